"""The schema of the replay buffer and its ordered migrations."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import sqlite_utils

from edge_plm import actions
from edge_plm.store.base import SchemaError, retry_busy
from edge_plm.store.records import ACTIONS, LABEL_SOURCES, LABELS

log = logging.getLogger("edge_plm.store")

#: The label sources the v1 schema's CHECK allows (`_spoken_source` adds ``spoken``).
LABEL_SOURCES_V1 = ("asked", "override", "confirmed", "manual")


def _v1(db: sqlite_utils.Database) -> None:
    """Initial schema: meta, interactions, model_versions."""
    db["meta"].create({"key": str, "value": str}, pk="key")
    db.execute(f"""
        CREATE TABLE interactions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,  -- ids are never reused after a delete
            ts REAL NOT NULL,
            transcript TEXT NOT NULL DEFAULT '',
            asr_backend TEXT,
            asr_confidence REAL,
            audio_path TEXT,
            prediction TEXT CHECK (prediction IN ({actions.sql_in(LABELS)})),
            confidence REAL,
            distribution TEXT,
            decision TEXT CHECK (decision IN ('act', 'ask', 'ignore')),
            action TEXT CHECK (action IN ({actions.sql_in(ACTIONS)})),
            label TEXT CHECK (label IN ({actions.sql_in(LABELS)})),
            label_source TEXT CHECK (label_source IN ({actions.sql_in(LABEL_SOURCES_V1)})),
            label_ts REAL,
            model_version TEXT,
            holdout INTEGER NOT NULL DEFAULT 0 CHECK (holdout IN (0, 1)),
            latency_audio_ms REAL,
            latency_asr_ms REAL,
            latency_model_ms REAL,
            latency_actuator_ms REAL,
            error TEXT
        )""")
    db["interactions"].create_index(["ts"], index_name="idx_interactions_ts")
    db["interactions"].create_index(["label"], index_name="idx_interactions_label")
    db.execute("""
        CREATE TABLE model_versions (
            version TEXT PRIMARY KEY,
            parent TEXT,
            created_ts REAL NOT NULL,
            path TEXT,
            status TEXT NOT NULL CHECK (status IN ('candidate', 'active', 'rolled_back', 'retired')),
            metrics TEXT,
            n_train INTEGER NOT NULL DEFAULT 0
        )""")
    # at most one active model, enforced by the database itself
    db.execute("CREATE UNIQUE INDEX idx_one_active_model ON model_versions(status) "
               "WHERE status = 'active'")


def _v2(db: sqlite_utils.Database) -> None:
    """End-to-end latency per interaction (the parts do not include policy/store overhead).

    Rows written under v1 are backfilled with the sum of their parts (a lower bound) when all
    four parts are known, else left NULL.
    """
    db["interactions"].add_column("latency_total_ms", float)
    db.execute("""
        UPDATE interactions SET latency_total_ms =
            latency_audio_ms + latency_asr_ms + latency_model_ms + latency_actuator_ms
        WHERE latency_audio_ms IS NOT NULL AND latency_asr_ms IS NOT NULL
          AND latency_model_ms IS NOT NULL AND latency_actuator_ms IS NOT NULL""")


def _v3(db: sqlite_utils.Database) -> None:
    """What each version's checkpoint file must be: its SHA-256, the model configuration and
    the number of examples it holds (NULL for versions written before: not checked)."""
    db["model_versions"].add_column("sha256", str)
    db["model_versions"].add_column("config", str)
    db["model_versions"].add_column("n_examples", int)


def _v4(db: sqlite_utils.Database) -> None:
    """The last state each relay was driven to, by relay name (``gpio.relay_restore``)."""
    db.execute("""
        CREATE TABLE relay_state (
            name TEXT PRIMARY KEY,
            is_on INTEGER NOT NULL CHECK (is_on IN (0, 1)),
            ts REAL NOT NULL
        )""")


def _v5(db: sqlite_utils.Database) -> None:
    """Several named devices: each device's outcome of an utterance (its prediction, decision,
    action and the label its own switch gave), one row per (interaction, device). Written only
    when more than one device is configured; a v4 database (one device) gains the empty table
    and nothing else changes."""
    db.execute(f"""
        CREATE TABLE interaction_devices (
            interaction_id INTEGER NOT NULL,  -- interactions.id (deleted with it)
            device TEXT NOT NULL,
            prediction TEXT CHECK (prediction IN ({actions.sql_in(LABELS)})),
            confidence REAL,
            distribution TEXT,
            decision TEXT CHECK (decision IN ('act', 'ask', 'ignore')),
            action TEXT CHECK (action IN ({actions.sql_in(ACTIONS)})),
            label TEXT CHECK (label IN ({actions.sql_in(LABELS)})),
            label_source TEXT CHECK (label_source IN ({actions.sql_in(LABEL_SOURCES)})),
            label_ts REAL,
            PRIMARY KEY (interaction_id, device)
        )""")
    db.execute("CREATE INDEX idx_interaction_devices_device ON interaction_devices(device)")


def _spoken_source(db: sqlite_utils.Database) -> None:
    """interactions.label_source may be ``spoken`` (talk-back: a spoken yes/no to an ask).

    SQLite cannot alter a CHECK constraint; widening one changes no stored row, so the table's
    CREATE statement is edited in place (SQLite's documented ``writable_schema`` procedure for
    constraint changes that leave the file format alone) and checked with
    ``PRAGMA integrity_check``. Ids, rows and ``sqlite_sequence`` are untouched.
    """
    row = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND "
                     "name = 'interactions'").fetchone()
    old = f"label_source IN ({actions.sql_in(LABEL_SOURCES_V1)})"
    new = f"label_source IN ({actions.sql_in(LABEL_SOURCES)})"
    if row is not None and new in row[0]:
        return  # already allowed (a file whose version number was set back by hand)
    if row is None or old not in row[0]:
        raise SchemaError("interactions.label_source has an unexpected CHECK constraint; "
                          "cannot add the 'spoken' label source")
    _rewrite_tables(db, {"interactions": row[0].replace(old, new)},
                    "adding the 'spoken' label source")


def _remote_source(db: sqlite_utils.Database) -> None:
    """interactions.label_source (and interaction_devices.label_source) may be ``remote``: a
    command from the home hub (MQTT, `edge_plm.bridge`) inside an utterance's window.

    Widened in place as ``_spoken_source`` does (the tables' CREATE statements edited with
    ``writable_schema``, checked with ``PRAGMA integrity_check``); whatever sources a CHECK
    allows stay allowed, ``remote`` is added to each that lacks it. No row changes."""
    import re  # noqa: PLC0415 - only for this migration

    pattern = re.compile(r"label_source IN \(([^)]*)\)")
    rows = db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND "
                      "name IN ('interactions', 'interaction_devices')").fetchall()
    edits = {}
    for name, sql in rows:
        found = pattern.search(sql)
        if found is None:
            raise SchemaError(f"{name}.label_source has an unexpected CHECK constraint; "
                              "cannot add the 'remote' label source")
        if "'remote'" not in found.group(1):
            edits[name] = sql[:found.end(1)] + ", 'remote'" + sql[found.end(1):]
    if edits:
        _rewrite_tables(db, edits, "adding the 'remote' label source")


def _rewrite_tables(db: sqlite_utils.Database, edits: dict[str, str], what: str) -> None:
    """Replace the CREATE statements of the tables in `edits` (name -> new SQL) in place:
    SQLite's documented ``writable_schema`` procedure for constraint changes that leave the
    file format alone (the schema version bumped so every connection re-reads it), then
    ``PRAGMA integrity_check``; a failure is a `SchemaError` naming `what` was done."""
    version = db.execute("PRAGMA schema_version").fetchone()[0]
    db.execute("PRAGMA writable_schema = ON")
    try:
        for name, sql in edits.items():
            db.execute("UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = ?",
                       [sql, name])
        db.execute(f"PRAGMA schema_version = {int(version) + 1}")
    finally:
        db.execute("PRAGMA writable_schema = OFF")
    check = db.execute("PRAGMA integrity_check").fetchone()[0]
    if check != "ok":
        raise SchemaError(f"integrity check after {what}: {check}")


def _own_files(db: sqlite_utils.Database) -> None:
    """A database owns its files: checkpoint paths inside the database's directory become
    relative to it (a copied or moved state dir keeps working; paths elsewhere stay absolute
    and are only read), and ``forget_owed`` journals the checkpoint rewrites a `forget`
    still owes (one row per version and forget, cleared when the file is rewritten)."""
    db.execute("""
        CREATE TABLE IF NOT EXISTS forget_owed (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            version TEXT NOT NULL,           -- model_versions.version
            interaction_ids TEXT NOT NULL,   -- JSON list: what its checkpoint must lose
            created_ts REAL NOT NULL
        )""")
    db.execute("CREATE INDEX IF NOT EXISTS idx_forget_owed_version ON forget_owed(version)")
    main = next((r[2] for r in db.execute("PRAGMA database_list") if r[1] == "main"), "")
    if not main:
        return  # an in-memory database has no directory
    homes = {os.path.dirname(os.path.abspath(main)), os.path.dirname(os.path.realpath(main))}
    for version, path in db.execute("SELECT version, path FROM model_versions "
                                    "WHERE path IS NOT NULL").fetchall():
        if not os.path.isabs(path):
            continue
        for home in homes:
            for p in {os.path.abspath(path), os.path.realpath(path)}:
                if os.path.commonpath([p, home]) == home and p != home:
                    rel = str(Path(p).relative_to(home))
                    db.execute("UPDATE model_versions SET path = ? WHERE version = ?",
                               [rel, version])
                    break
            else:
                continue
            break


def _tombstones(db: sqlite_utils.Database) -> None:
    """``forgotten``: one keyed digest (HMAC-SHA256 with ``meta.forget_key``, a secret of this
    database) per transcript a `forget` deleted, as the model normalises it, never the text:
    `model import` takes out of an imported checkpoint every example a forget deleted."""
    import secrets  # noqa: PLC0415 - only for this migration

    db.execute("CREATE TABLE IF NOT EXISTS forgotten (digest TEXT PRIMARY KEY)")
    db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('forget_key', ?)",
               [secrets.token_hex(32)])


def _timers(db: sqlite_utils.Database) -> None:
    """``timers``: the pending actions of timed commands ("in twenty minutes", "for an hour";
    `edge_plm.store.timers`), kept after they ran, were cancelled or dropped."""
    db.execute("""
        CREATE TABLE IF NOT EXISTS timers (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            interaction_id INTEGER,          -- interactions.id of the command (deleted with it)
            device TEXT NOT NULL,
            action TEXT NOT NULL CHECK (action IN ('ON', 'OFF')),
            kind TEXT NOT NULL CHECK (kind IN ('at', 'for', 'until')),
            due_ts REAL NOT NULL,
            created_ts REAL NOT NULL,
            transcript TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'done', 'cancelled', 'dropped', 'refused')),
            done_ts REAL,
            note TEXT
        )""")
    db.execute("CREATE INDEX IF NOT EXISTS idx_timers_status_due ON timers(status, due_ts)")


def _kinds(db: sqlite_utils.Database) -> None:
    """``kinds``: what the kind head (dim, brighten, a level, a question) called and did per
    interaction, and the person's kind label (`edge_plm.store.kinds`); no text of its own."""
    db.execute("""
        CREATE TABLE IF NOT EXISTS kinds (
            interaction_id INTEGER PRIMARY KEY,  -- interactions.id (deleted with it)
            device TEXT,
            predicted TEXT,
            confidence REAL,
            done TEXT,
            level_before REAL,
            level_after REAL,
            label TEXT,
            label_source TEXT,
            label_ts REAL
        )""")


def _dimmer_level(db: sqlite_utils.Database) -> None:
    """``relay_state.level``: the level a dimmer was last lit at (NULL for a relay, and for a
    dimmer never dimmed), restored with its on / off after a restart."""
    if "level" not in db["relay_state"].columns_dict:  # idempotent, as the other migrations
        db["relay_state"].add_column("level", float)


#: Ordered migrations: (version reached, what it does, function).
MIGRATIONS: list[tuple[int, str, Callable[[sqlite_utils.Database], None]]] = [
    (1, "initial schema", _v1),
    (2, "interactions.latency_total_ms (backfilled from the parts)", _v2),
    (3, "model_versions.sha256, config, n_examples (the checkpoint file's record)", _v3),
    (4, "relay_state: the last state of each relay, by name", _v4),
    (5, "interaction_devices: each device's outcome of an utterance (several devices)", _v5),
    (6, "interactions.label_source may be 'spoken' (talk-back)", _spoken_source),
    (7, "label_source may be 'remote' (a home hub's command, MQTT)", _remote_source),
    (8, "checkpoint paths relative to the database; forget_owed (forget's journal)", _own_files),
    (9, "forgotten: keyed digests of forgotten transcripts (model import checks them)", _tombstones),
    (10, "timers: the pending actions of timed commands", _timers),
    (11, "kinds: dim, brighten, level and question calls and labels", _kinds),
    (12, "relay_state.level: a dimmer's lit level, restored after a restart", _dimmer_level),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]


def schema_version(db: sqlite_utils.Database) -> int:
    """The file's schema version (0 for an empty database)."""
    tables = db.table_names()  # once: another process may create the schema meanwhile
    if "meta" not in tables:
        if tables:
            raise SchemaError(f"not an edge-plm database (tables: {', '.join(tables)})")
        return 0
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        raise SchemaError("meta table has no schema_version")
    try:
        return int(row[0])
    except ValueError as exc:
        raise SchemaError(f"meta.schema_version is not an integer: {row[0]!r}") from exc


def migrate(db: sqlite_utils.Database, target: int = SCHEMA_VERSION) -> int:
    """Apply the migrations after the file's version up to `target`; return the new version."""
    current = schema_version(db)
    for version, what, apply in MIGRATIONS:
        if current < version <= target:
            # BEGIN IMMEDIATE: two processes opening a new file at once wait for each other,
            # and the second sees the first one's work (checked again inside the transaction)
            retry_busy(lambda: db.execute("BEGIN IMMEDIATE"))
            try:
                current = schema_version(db)
                if current < version:
                    apply(db)
                    db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES "
                               "('schema_version', ?)", [str(version)])
                    log.info("replay buffer migrated to schema v%d: %s", version, what)
                    current = version
                db.execute("COMMIT")
            except BaseException:
                if db.conn.in_transaction:
                    db.conn.rollback()
                raise
    return current
