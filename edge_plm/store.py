"""The replay buffer: one SQLite file (via sqlite-utils), the device's source of truth.

Durability: WAL journal + ``synchronous=FULL``. Power can fail at any instant on an SBC; in
WAL mode ``NORMAL`` may lose the last committed transactions on power loss (the WAL is not
fsynced at each commit), while ``FULL`` fsyncs the WAL on every commit, so a label the person
gave is never lost once `set_label` returned. The cost (one fsync per interaction) is nothing
next to an utterance. WAL also lets the CLI read while the service writes; a busy timeout
makes a second writer wait instead of failing.

Privacy: the database file is 0600 (SQLite gives its -wal/-shm files the same mode); a
directory the store creates is 0700, an existing group/world-readable one is reported.

Schema: ``meta.schema_version`` + `MIGRATIONS` (ordered, each applied in one transaction with
its version bump). A file with a newer schema than this code raises `SchemaError` and is not
touched (not even switched to WAL).

Text from outside (transcripts, backend names, errors) may hold bytes that are not UTF-8; it is
stored with U+FFFD replacement characters rather than dropping the row.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import quote

import sqlite_utils

log = logging.getLogger(__name__)

LABELS = ("ON", "OFF", "NOOP")
LABEL_SOURCES = ("asked", "override", "confirmed", "manual")
DECISIONS = ("act", "ask", "ignore")
ACTIONS = ("ON", "OFF")
MODEL_STATUSES = ("candidate", "active", "rolled_back", "retired")


class StoreError(RuntimeError):
    """The replay buffer cannot be opened or used."""


class SchemaError(StoreError):
    """The database schema is newer than this code, or not an edge-plm database."""


class NotFoundError(StoreError, LookupError):
    """No interaction / model version with that id."""


# --- schema ---------------------------------------------------------------------------------
def _v1(db: sqlite_utils.Database) -> None:
    """Initial schema: meta, interactions, model_versions."""
    db["meta"].create({"key": str, "value": str}, pk="key")
    db.execute("""
        CREATE TABLE interactions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,  -- ids are never reused after a delete
            ts REAL NOT NULL,
            transcript TEXT NOT NULL DEFAULT '',
            asr_backend TEXT,
            asr_confidence REAL,
            audio_path TEXT,
            prediction TEXT CHECK (prediction IN ('ON', 'OFF', 'NOOP')),
            confidence REAL,
            distribution TEXT,
            decision TEXT CHECK (decision IN ('act', 'ask', 'ignore')),
            action TEXT CHECK (action IN ('ON', 'OFF')),
            label TEXT CHECK (label IN ('ON', 'OFF', 'NOOP')),
            label_source TEXT CHECK (label_source IN ('asked', 'override', 'confirmed', 'manual')),
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


#: Ordered migrations: (version reached, what it does, function).
MIGRATIONS: list[tuple[int, str, Callable[[sqlite_utils.Database], None]]] = [
    (1, "initial schema", _v1),
    (2, "interactions.latency_total_ms (backfilled from the parts)", _v2),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]


def schema_version(db: sqlite_utils.Database) -> int:
    """The file's schema version (0 for an empty database)."""
    if "meta" not in db.table_names():
        if db.table_names():
            raise SchemaError(f"not an edge-plm database (tables: {', '.join(db.table_names())})")
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
            with db.atomic():
                apply(db)
                db["meta"].upsert({"key": "schema_version", "value": str(version)}, pk="key")
            log.info("replay buffer migrated to schema v%d: %s", version, what)
            current = version
    return current


# --- records --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Interaction:
    """One row of `interactions`."""

    id: int
    ts: float
    transcript: str
    asr_backend: str | None
    asr_confidence: float | None
    audio_path: str | None
    prediction: str | None
    confidence: float | None
    distribution: dict[str, float] | None
    decision: str | None
    action: str | None
    label: str | None
    label_source: str | None
    label_ts: float | None
    model_version: str | None
    holdout: bool
    latency_audio_ms: float | None
    latency_asr_ms: float | None
    latency_model_ms: float | None
    latency_actuator_ms: float | None
    latency_total_ms: float | None
    error: str | None


@dataclass(frozen=True)
class ModelVersion:
    """One row of `model_versions`."""

    version: str
    parent: str | None
    created_ts: float
    path: str | None
    status: str
    metrics: dict[str, Any] | None
    n_train: int


INTERACTION_FIELDS = tuple(f.name for f in fields(Interaction))
_WRITABLE = tuple(f for f in INTERACTION_FIELDS if f != "id")
_TEXT_FIELDS = ("transcript", "asr_backend", "audio_path", "model_version", "error")


def clean_text(value: str | bytes | None) -> str | None:
    """Text safe to store: bytes decoded as UTF-8 with replacement, lone surrogates replaced."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    if not isinstance(value, str):
        raise TypeError(f"expected text, got {type(value).__name__}")
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:  # surrogates, e.g. from os.fsdecode of a non-UTF-8 name
        raw = value.encode("utf-8", errors="surrogateescape" if _escape_only(value)
                           else "surrogatepass")
        return raw.decode("utf-8", errors="replace")


def _escape_only(value: str) -> bool:
    return all(not 0xD800 <= ord(c) <= 0xDFFF or 0xDC80 <= ord(c) <= 0xDCFF for c in value)


def _check(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value is not None and value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)} (or None), got {value!r}")


def _check_prob(name: str, value: Any) -> None:
    if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value)
                                  and 0.0 <= value <= 1.0):
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")


def _enum_value(value: Any) -> Any:
    """Accept str-Enums (e.g. policy.Action) as their value."""
    return getattr(value, "value", value)


# --- the store ------------------------------------------------------------------------------
class ReplayStore:
    """The replay buffer at `path`. Thread-safe; one instance per process is enough."""

    def __init__(self, path: str | Path, busy_timeout_ms: int = 5000, read_only: bool = False,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self._clock = clock
        self._lock = threading.RLock()
        if read_only:
            if not self.path.exists():
                raise StoreError(f"replay buffer not found: {self.path}")
            # a URI: ?, # and % in the path must be quoted or they end or escape it
            uri = f"file:{quote(str(self.path.resolve()))}?mode=ro"
            conn = sqlite3.connect(uri, uri=True,
                                   timeout=busy_timeout_ms / 1000, check_same_thread=False)
        else:
            self._prepare_files()
            conn = sqlite3.connect(str(self.path), timeout=busy_timeout_ms / 1000,
                                   check_same_thread=False)
        self.db = sqlite_utils.Database(conn)
        try:
            self._open(busy_timeout_ms)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(f"{self.path}: cannot open replay buffer: {exc}") from exc
        except BaseException:
            conn.close()
            raise

    def _prepare_files(self) -> None:
        directory = self.path.parent
        if not directory.exists():
            directory.mkdir(parents=True, mode=0o700)
            directory.chmod(0o700)  # mkdir's mode is filtered by the umask
        elif directory.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            log.warning("directory of the replay buffer %s is accessible to group/others "
                        "(mode %o); 0700 is recommended", directory,
                        stat.S_IMODE(directory.stat().st_mode))
        if not self.path.exists():
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))

    def _open(self, busy_timeout_ms: int) -> None:
        self.db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        version = schema_version(self.db)  # before any change to the file
        if version > SCHEMA_VERSION:
            raise SchemaError(
                f"{self.path}: schema v{version} is newer than this edge-plm knows "
                f"(v{SCHEMA_VERSION}); upgrade edge-plm. The file was not changed.")
        if self.read_only:
            if version < SCHEMA_VERSION:
                raise SchemaError(f"{self.path}: schema v{version} needs migrating to "
                                  f"v{SCHEMA_VERSION}; open it once read-write (the service)")
            return
        self.path.chmod(0o600)
        self.db.enable_wal()
        self.db.execute("PRAGMA synchronous = FULL")  # see the module docstring
        migrate(self.db)

    # --- interactions ---------------------------------------------------------------------
    def _normalise(self, values: dict[str, Any], partial: bool = False) -> dict[str, Any]:
        """Validate and convert `values` for SQLite.

        With `partial` (an update), only the given keys are returned: filling defaults for
        missing keys would overwrite stored values (an update that set ``holdout`` once reset
        the transcript to ''). Cross-field rules that need both fields (label + label_source)
        are then checked only when both are given.
        """
        unknown = set(values) - set(_WRITABLE)
        if unknown:
            raise ValueError(f"unknown interaction field(s): {', '.join(sorted(unknown))} "
                             f"(known: {', '.join(_WRITABLE)})")
        row = {k: _enum_value(v) for k, v in values.items()}
        for name in _TEXT_FIELDS:
            if name in row:
                row[name] = clean_text(row[name])
        if not partial and row.get("transcript") is None:
            row["transcript"] = ""
        elif partial and "transcript" in row and row["transcript"] is None:
            raise ValueError("transcript cannot be set to None (use '' for no transcript)")
        _check("prediction", row.get("prediction"), LABELS)
        _check("label", row.get("label"), LABELS)
        _check("label_source", row.get("label_source"), LABEL_SOURCES)
        _check("decision", row.get("decision"), DECISIONS)
        _check("action", row.get("action"), ACTIONS)
        _check_prob("confidence", row.get("confidence"))
        _check_prob("asr_confidence", row.get("asr_confidence"))
        label_keys = {"label", "label_source"} & set(row)
        if partial and label_keys and label_keys != {"label", "label_source"}:
            raise ValueError("label and label_source must be given together (or use set_label)")
        if (row.get("label") is None) != (row.get("label_source") is None):
            raise ValueError("label and label_source must be given together")
        if "holdout" in row:
            row["holdout"] = int(bool(row["holdout"]))
        if row.get("distribution") is not None:
            row["distribution"] = json.dumps(row["distribution"], sort_keys=True)
        return row

    def add_interaction(self, **fields_: Any) -> int:
        """Insert one interaction (`ts` defaults to the clock); return its id."""
        row = self._normalise(fields_)
        row.setdefault("ts", self._clock())
        if row.get("label") is not None:
            row.setdefault("label_ts", row["ts"])
        with self._lock:
            return int(self.db["interactions"].insert(row).last_pk)

    def set_label(self, interaction_id: int, label: Any, source: Any,
                  ts: float | None = None) -> None:
        """Record the label of an interaction and how it was obtained."""
        label, source = _enum_value(label), _enum_value(source)
        _check("label", label, LABELS)
        _check("label_source", source, LABEL_SOURCES)
        if label is None or source is None:
            raise ValueError("set_label needs a label and a source")
        with self._lock:
            cur = self.db.execute(
                "UPDATE interactions SET label = ?, label_source = ?, label_ts = ? WHERE id = ?",
                [label, source, self._clock() if ts is None else ts, interaction_id])
            if cur.rowcount != 1:
                raise NotFoundError(f"no interaction with id {interaction_id}")

    def update_interaction(self, interaction_id: int, **fields_: Any) -> None:
        """Set the given fields of an existing interaction (e.g. latencies, error, action).

        Only the named columns change; every other column keeps its stored value.
        """
        row = self._normalise(fields_, partial=True)
        if not row:
            return
        with self._lock:
            cols = ", ".join(f"[{k}] = ?" for k in row)
            cur = self.db.execute(f"UPDATE interactions SET {cols} WHERE id = ?",
                                  [*row.values(), interaction_id])
            if cur.rowcount != 1:
                raise NotFoundError(f"no interaction with id {interaction_id}")

    def get(self, interaction_id: int) -> Interaction:
        """One interaction; `NotFoundError` when there is none with that id."""
        with self._lock:
            rows = list(self.db.query("SELECT * FROM interactions WHERE id = ?",
                                      [interaction_id]))
        if not rows:
            raise NotFoundError(f"no interaction with id {interaction_id}")
        return row_to_interaction(rows[0])

    def interactions(self, limit: int | None = None, labeled: bool | None = None,
                     since: float | None = None, label: Any = None,
                     oldest_first: bool = False) -> list[Interaction]:
        """Interactions, newest first (or oldest first), filtered. Order is by id: the order
        they were stored in (``ts`` may come from a replay's simulated clock or a clock that
        was set back)."""
        where, params = [], []
        if labeled is not None:
            where.append("label IS NOT NULL" if labeled else "label IS NULL")
        if since is not None:
            where.append("ts >= ?")
            params.append(since)
        if label is not None:
            label = _enum_value(label)
            _check("label", label, LABELS)
            where.append("label = ?")
            params.append(label)
        order = "ASC" if oldest_first else "DESC"
        sql = "SELECT * FROM interactions"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY id {order}"
        if limit is not None:
            if limit < 0:
                raise ValueError("limit must be >= 0")
            sql += " LIMIT ?"
            params.append(limit)
        with self._lock:
            return [row_to_interaction(r) for r in self.db.query(sql, params)]

    def count(self, labeled: bool | None = None) -> int:
        """Number of interactions (all, labeled or unlabeled)."""
        sql = "SELECT count(*) FROM interactions"
        if labeled is not None:
            sql += " WHERE label IS NOT NULL" if labeled else " WHERE label IS NULL"
        with self._lock:
            return int(self.db.execute(sql).fetchone()[0])

    def labeled_examples(self, holdout: bool | None = None) -> list[tuple[str, str]]:
        """(transcript, label) of labeled interactions in time order; holdout filter if given."""
        sql = "SELECT transcript, label FROM interactions WHERE label IS NOT NULL"
        params: list[Any] = []
        if holdout is not None:
            sql += " AND holdout = ?"
            params.append(int(holdout))
        sql += " ORDER BY ts, id"
        with self._lock:
            return [(r[0], r[1]) for r in self.db.execute(sql, params).fetchall()]

    def set_holdout(self, interaction_id: int, holdout: bool) -> None:
        """Put an interaction into (or take it out of) the holdout slice."""
        self.update_interaction(interaction_id, holdout=holdout)

    def delete_interactions(self, ids: Iterable[int], remove_audio: bool = True,
                            activate_version: str | None = None) -> list[str]:
        """Delete rows; return the audio paths they referenced.

        The same transaction bumps ``meta.forget_seq`` (a running service polls it and takes
        the deleted rows out of its live model) and, with `activate_version`, makes that
        (already written) model version active: rows and the model's contribution go
        together, or neither does.

        With `remove_audio`, those files are deleted too (a file already gone is logged, not an
        error). Rows go first, so a crash in between leaves an orphan file, never a row
        pointing at nothing.
        """
        ids = [int(i) for i in ids]
        if not ids:
            return []
        marks = ", ".join("?" for _ in ids)
        with self._lock, self.db.atomic():
            paths = [r[0] for r in self.db.execute(
                f"SELECT audio_path FROM interactions WHERE id IN ({marks}) "
                "AND audio_path IS NOT NULL", ids).fetchall()]
            self.db.execute(f"DELETE FROM interactions WHERE id IN ({marks})", ids)
            self.db.execute(
                "INSERT INTO meta (key, value) VALUES ('forget_seq', '1') ON CONFLICT(key) "
                "DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)")
            if activate_version is not None:
                self._retire_active(except_version=activate_version)
                cur = self.db.execute("UPDATE model_versions SET status = 'active' "
                                      "WHERE version = ?", [activate_version])
                if cur.rowcount != 1:
                    raise NotFoundError(f"no model version {activate_version!r}")
        if remove_audio:
            for p in paths:
                try:
                    os.remove(p)
                except FileNotFoundError:
                    log.warning("audio file of a deleted interaction was already gone: %s", p)
        return paths

    # --- model versions -------------------------------------------------------------------
    def add_model_version(self, version: str, parent: str | None = None,
                          path: str | None = None, status: str = "candidate",
                          metrics: dict[str, Any] | None = None, n_train: int = 0,
                          created_ts: float | None = None) -> None:
        """Record a new model version (a candidate unless told otherwise)."""
        _check("status", status, MODEL_STATUSES)
        if not version:
            raise ValueError("model version must be a non-empty string")
        row = {"version": version, "parent": parent, "path": path, "status": status,
               "metrics": None if metrics is None else json.dumps(metrics, sort_keys=True),
               "n_train": int(n_train),
               "created_ts": self._clock() if created_ts is None else created_ts}
        with self._lock, self.db.atomic():
            if status == "active":
                self._retire_active()
            try:
                self.db["model_versions"].insert(row)
            except sqlite3.IntegrityError as exc:
                raise ValueError(f"model version {version!r} already exists") from exc

    def set_model_status(self, version: str, status: str) -> None:
        """Change a version's status; making one active retires the previous active one."""
        _check("status", status, MODEL_STATUSES)
        with self._lock, self.db.atomic():
            if status == "active":
                self._retire_active(except_version=version)
            cur = self.db.execute("UPDATE model_versions SET status = ? WHERE version = ?",
                                  [status, version])
            if cur.rowcount != 1:
                raise NotFoundError(f"no model version {version!r}")

    def _retire_active(self, except_version: str | None = None) -> None:
        self.db.execute("UPDATE model_versions SET status = 'retired' "
                        "WHERE status = 'active' AND version IS NOT ?", [except_version])

    def forget_seq(self) -> int:
        """How many `delete_interactions` transactions this database has seen (a cheap
        signal for a running service that rows it may have learned are gone)."""
        with self._lock:
            row = self.db.execute("SELECT value FROM meta WHERE key = 'forget_seq'").fetchone()
        return int(row[0]) if row else 0

    def interaction_ids(self) -> set[int]:
        """Every stored interaction id."""
        with self._lock:
            return {int(r[0]) for r in self.db.execute("SELECT id FROM interactions")}

    def set_model_metrics(self, version: str, metrics: dict[str, Any]) -> None:
        """Replace a version's metrics (e.g. to mark its checkpoint pruned)."""
        with self._lock, self.db.atomic():
            cur = self.db.execute("UPDATE model_versions SET metrics = ? WHERE version = ?",
                                  [json.dumps(metrics, sort_keys=True), version])
            if cur.rowcount != 1:
                raise NotFoundError(f"no model version {version!r}")

    def delete_model_version(self, version: str) -> None:
        """Remove a version row (only for debris: a candidate whose writer died)."""
        with self._lock, self.db.atomic():
            self.db.execute("DELETE FROM model_versions WHERE version = ? AND status = "
                            "'candidate'", [version])

    def model_versions(self) -> list[ModelVersion]:
        """All model versions in the order they were made (rowid; ``created_ts`` is the
        clock of whoever made them, e.g. a replay's simulated time)."""
        with self._lock:
            return [_model(r) for r in self.db.query(
                "SELECT * FROM model_versions ORDER BY rowid")]

    def active_model_version(self) -> ModelVersion | None:
        """The active model version, if any."""
        with self._lock:
            rows = list(self.db.query("SELECT * FROM model_versions WHERE status = 'active'"))
        return _model(rows[0]) if rows else None

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self.db.close()

    def __enter__(self) -> ReplayStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def row_to_interaction(row: dict[str, Any]) -> Interaction:
    """An `Interaction` from a raw ``interactions`` row (a dict of column values)."""
    row = dict(row)
    row["holdout"] = bool(row["holdout"])
    if row.get("distribution") is not None:
        row["distribution"] = json.loads(row["distribution"])
    return Interaction(**{name: row.get(name) for name in INTERACTION_FIELDS})


def _model(row: dict[str, Any]) -> ModelVersion:
    row = dict(row)
    if row.get("metrics") is not None:
        row["metrics"] = json.loads(row["metrics"])
    return ModelVersion(**{f.name: row[f.name] for f in fields(ModelVersion)})
