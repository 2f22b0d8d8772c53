"""The replay buffer: one SQLite file (via sqlite-utils), the device's source of truth.

Every SQL statement of edge-plm is here: the schema and its migrations, the writes (each one
``BEGIN IMMEDIATE`` transaction, retried while the database is busy; `StorageError` when it
cannot be stored) and the named queries that the loop, the learner and the CLI ask.
Durability, concurrency, privacy and schema versions: docs/loop.md "The replay buffer".
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

from edge_plm import actions

log = logging.getLogger(__name__)

LABELS = actions.ACTIONS
LABEL_SOURCES = ("asked", "override", "confirmed", "manual")
DECISIONS = ("act", "ask", "ignore")
ACTIONS = actions.DRIVING  # what the device can do to the relay
MODEL_STATUSES = ("candidate", "active", "rolled_back", "retired")


class StoreError(RuntimeError):
    """The replay buffer cannot be opened or used."""


class SchemaError(StoreError):
    """The database schema is newer than this code, or not an edge-plm database."""


class NotFoundError(StoreError, LookupError):
    """No interaction / model version with that id."""


class StorageError(StoreError):
    """A write could not be stored: disk full, I/O error, read-only file or directory."""


class BusyError(StoreError):
    """Another process held the database's write lock longer than the busy timeout."""


#: The busy timeout of every connection to the replay buffer (ms): writers wait this long for
#: each other; the service's transactions are milliseconds long.
BUSY_TIMEOUT_MS = 10_000

# primary result codes (sqlite3.Error.sqlite_errorcode & 0xFF)
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6
_STORAGE_CODES = {8: "read-only", 10: "I/O error", 13: "disk full", 14: "cannot open"}


def private_dir(path: str | Path) -> Path:
    """Create `path` (and missing parents) 0700 if it does not exist; return it. Transcripts
    and what the model learned from them are private (checkpoints, audio)."""
    path = Path(path)
    if not path.exists():
        path.mkdir(parents=True, mode=0o700)
        path.chmod(0o700)  # mkdir's mode is filtered by the umask
    return path


def read_only_fs(path: Path) -> bool:
    """Whether `path` lies on a file system mounted read-only."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def quiet_unwritable(path: Path) -> bool:
    """No -wal file next to the database and its directory cannot be written: no writer can
    be active, so it can be read as immutable (a WAL database otherwise needs its -shm file,
    which a read-only directory cannot get)."""
    path = Path(path)
    wal = path.with_name(path.name + "-wal")
    return not wal.exists() and (read_only_fs(path.parent)
                                 or not os.access(path.parent, os.W_OK))


def ro_uri(path: Path, immutable: bool = False) -> str:
    """A read-only SQLite URI for `path` (?, # and % quoted: they would end or escape it)."""
    return f"file:{quote(str(Path(path).resolve()))}?mode=ro" + ("&immutable=1" if immutable
                                                                 else "")


def _primary_code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def is_busy(exc: BaseException) -> bool:
    """SQLITE_BUSY / SQLITE_LOCKED ("database is locked")."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = _primary_code(exc)
    if code is not None:
        return code in (_SQLITE_BUSY, _SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def is_storage_failure(exc: BaseException) -> bool:
    """Disk full, I/O error, read-only database or directory: the write did not happen."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = _primary_code(exc)
    if code is not None:
        return code in _STORAGE_CODES
    text = str(exc)
    return any(w in text for w in ("disk is full", "disk I/O error", "readonly", "read-only",
                                   "unable to open"))


def retry_busy(fn: Callable[[], Any], timeout_ms: int = BUSY_TIMEOUT_MS) -> Any:
    """Call `fn`, again after a short sleep while it raises SQLITE_BUSY, until `timeout_ms`."""
    deadline = time.monotonic() + timeout_ms / 1000
    delay = 0.005
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.25)


# --- schema ---------------------------------------------------------------------------------
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


def _v3(db: sqlite_utils.Database) -> None:
    """The last state each relay was driven to, by relay name (``gpio.relay_restore``)."""
    db.execute("""
        CREATE TABLE relay_state (
            name TEXT PRIMARY KEY,
            is_on INTEGER NOT NULL CHECK (is_on IN (0, 1)),
            ts REAL NOT NULL
        )""")


#: Ordered migrations: (version reached, what it does, function).
MIGRATIONS: list[tuple[int, str, Callable[[sqlite_utils.Database], None]]] = [
    (1, "initial schema", _v1),
    (2, "interactions.latency_total_ms (backfilled from the parts)", _v2),
    (3, "relay_state: the last state of each relay, by name", _v3),
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


#: Columns `ReplayStore.counts_by` may group by.
_GROUPABLE = ("label", "label_source", "prediction", "decision", "action", "asr_backend",
              "model_version")


def _marks(values: list[Any]) -> str:
    """``?, ?, ...``: one parameter mark per value."""
    return ", ".join("?" for _ in values)


def _interaction_filter(labeled: bool | None = None, since: float | None = None,
                        label: Any = None, after_id: int | None = None,
                        holdout: bool | None = None, error: bool | None = None,
                        before: float | None = None) -> tuple[str | None, list[Any]]:
    """A WHERE fragment over ``interactions`` and its parameters (None: no condition)."""
    where: list[str] = []
    params: list[Any] = []
    if labeled is not None:
        where.append("label IS NOT NULL" if labeled else "label IS NULL")
    if since is not None:
        where.append("ts >= ?")
        params.append(since)
    if before is not None:
        where.append("ts < ?")
        params.append(before)
    if label is not None:
        label = _enum_value(label)
        _check("label", label, LABELS)
        where.append("label = ?")
        params.append(label)
    if after_id is not None:
        where.append("id > ?")
        params.append(int(after_id))
    if holdout is not None:
        where.append("holdout = ?")
        params.append(int(bool(holdout)))
    if error is not None:
        where.append("error IS NOT NULL" if error else "error IS NULL")
    return (" AND ".join(where) or None), params


# --- the store ------------------------------------------------------------------------------
class ReplayStore:
    """The replay buffer at `path`. Thread-safe; one instance per process is enough."""

    def __init__(self, path: str | Path, busy_timeout_ms: int = BUSY_TIMEOUT_MS,
                 read_only: bool = False, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self.busy_timeout_ms = int(busy_timeout_ms)
        self._clock = clock
        self._lock = threading.RLock()
        if self.path.exists() and not self.path.is_file():
            kind = "a directory" if self.path.is_dir() else "not a regular file"
            raise StoreError(f"{self.path} is {kind}, not a database file")
        try:
            if read_only:
                if not self.path.exists():
                    raise StoreError(f"replay buffer not found: {self.path}")
                conn = sqlite3.connect(ro_uri(self.path), uri=True,
                                       timeout=busy_timeout_ms / 1000, check_same_thread=False)
            else:
                self._prepare_files()
                conn = sqlite3.connect(str(self.path), timeout=busy_timeout_ms / 1000,
                                       check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot open replay buffer: {exc}") from exc
        except OSError as exc:
            raise StorageError(f"{self.path}: cannot create the replay buffer: "
                               f"{exc.strerror or exc}") from exc
        try:
            self.db = sqlite_utils.Database(conn)
            retry_busy(lambda: self._open(busy_timeout_ms), busy_timeout_ms)
        except sqlite3.DatabaseError as exc:
            conn.close()
            if read_only and is_storage_failure(exc) and self._unwritable_quiet_dir():
                # a WAL file in a directory nobody can write (read-only media, a copy): no
                # writer can be active, so read it as immutable (no -shm needed)
                self._open_immutable(busy_timeout_ms)
                return
            if is_storage_failure(exc):
                how = "" if read_only else " for writing"
                raise StorageError(f"{self.path}: cannot open replay buffer{how}: {exc} (is "
                                   "the file or its directory read-only, or the disk "
                                   "full?)") from exc
            if is_busy(exc):
                raise BusyError(f"{self.path}: database is locked by another process "
                                f"(waited {busy_timeout_ms / 1000:g} s)") from exc
            raise StoreError(f"{self.path}: cannot open replay buffer: {exc}") from exc
        except OSError as exc:
            conn.close()
            raise StorageError(f"{self.path}: cannot open replay buffer: "
                               f"{exc.strerror or exc}") from exc
        except BaseException:
            conn.close()
            raise

    def _unwritable_quiet_dir(self) -> bool:
        return quiet_unwritable(self.path)

    def _open_immutable(self, busy_timeout_ms: int) -> None:
        uri = ro_uri(self.path, immutable=True)
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout_ms / 1000,
                                   check_same_thread=False)
            self.db = sqlite_utils.Database(conn)
            self._open(busy_timeout_ms)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: cannot open replay buffer: {exc}") from exc
        log.info("%s opened as immutable (read-only directory, no writer)", self.path)

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
        if stat.S_IMODE(self.path.stat().st_mode) != 0o600:
            self.path.chmod(0o600)
        self.db.enable_wal()
        # every commit fsyncs the WAL: a label is never lost once it was stored (docs/loop.md)
        self.db.execute("PRAGMA synchronous = FULL")
        migrate(self.db)

    # --- writing --------------------------------------------------------------------------
    def _write(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` as one write transaction and return its result.

        ``BEGIN IMMEDIATE`` takes the write lock before anything is read (waiting up to the busy
        timeout for another writer); SQLITE_BUSY that SQLite could not wait for is retried until
        the busy timeout has passed. Inside an open transaction, `fn` runs in a savepoint.
        Disk full / I/O / read-only failures become `StorageError`.
        """
        with self._lock:
            if self.db.conn.in_transaction:
                with self.db.atomic():
                    return fn()

        def attempt() -> Any:
            with self._lock:
                conn = self.db.conn
                conn.execute("BEGIN IMMEDIATE")
                try:
                    out = fn()
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.rollback()
                    raise
                return out

        try:
            return retry_busy(attempt, self.busy_timeout_ms)
        except sqlite3.OperationalError as exc:
            raise self._translate(exc) from exc

    def _translate(self, exc: sqlite3.OperationalError) -> Exception:
        if is_busy(exc):
            return BusyError(f"{self.path}: database is locked by another process (waited "
                             f"{self.busy_timeout_ms / 1000:g} s): {exc}")
        if is_storage_failure(exc):
            return StorageError(f"{self.path}: could not store: {exc}")
        return exc

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
        cols = ", ".join(f"[{k}]" for k in row)
        marks = ", ".join("?" for _ in row)
        sql = f"INSERT INTO interactions ({cols}) VALUES ({marks})"
        return self._write(lambda: int(self.db.execute(sql, list(row.values())).lastrowid))

    def set_label(self, interaction_id: int, label: Any, source: Any,
                  ts: float | None = None) -> None:
        """Record the label of an interaction and how it was obtained."""
        label, source = _enum_value(label), _enum_value(source)
        _check("label", label, LABELS)
        _check("label_source", source, LABEL_SOURCES)
        if label is None or source is None:
            raise ValueError("set_label needs a label and a source")
        values = {"label": label, "label_source": source,
                  "label_ts": self._clock() if ts is None else ts}
        self._write(lambda: self._update_row("interactions", interaction_id, values,
                                             f"no interaction with id {interaction_id}"))

    def update_interaction(self, interaction_id: int, **fields_: Any) -> None:
        """Set the given fields of an existing interaction (e.g. latencies, error, action).

        Only the named columns change; every other column keeps its stored value.
        """
        row = self._normalise(fields_, partial=True)
        if not row:
            return
        self._write(lambda: self._update_row("interactions", interaction_id, row,
                                             f"no interaction with id {interaction_id}"))

    def _update_row(self, table: str, key: Any, values: dict[str, Any], missing: str) -> None:
        """Set `values` in the row of `table` with primary key `key` (inside a write);
        `NotFoundError` with the message `missing` when there is no such row."""
        try:
            self.db[table].update(key, values)
        except sqlite_utils.db.NotFoundError:
            raise NotFoundError(missing) from None

    def get(self, interaction_id: int) -> Interaction:
        """One interaction; `NotFoundError` when there is none with that id."""
        with self._lock:
            try:
                row = self.db["interactions"].get(interaction_id)
            except sqlite_utils.db.NotFoundError:
                raise NotFoundError(f"no interaction with id {interaction_id}") from None
        return row_to_interaction(row)

    def interactions(self, limit: int | None = None, labeled: bool | None = None,
                     since: float | None = None, label: Any = None,
                     oldest_first: bool = False, after_id: int | None = None
                     ) -> list[Interaction]:
        """Interactions, newest first (or oldest first), filtered (`after_id`: ids above it).
        Order is by id: the order they were stored in (``ts`` may come from a replay's
        simulated clock or a clock that was set back)."""
        where, params = _interaction_filter(labeled=labeled, since=since, label=label,
                                            after_id=after_id)
        if limit is not None and limit < 0:
            raise ValueError("limit must be >= 0")
        with self._lock:
            return [row_to_interaction(r) for r in self.db["interactions"].rows_where(
                where, params, order_by="id ASC" if oldest_first else "id DESC",
                limit=None if limit is None else int(limit))]

    def count(self, labeled: bool | None = None, holdout: bool | None = None,
              error: bool | None = None) -> int:
        """Number of interactions: all, or labelled / in the holdout / with an error (or not)."""
        where, params = _interaction_filter(labeled=labeled, holdout=holdout, error=error)
        with self._lock:
            return int(self.db["interactions"].count_where(where, params))

    def counts_by(self, column: str) -> dict[Any, int]:
        """Number of interactions per value of `column` (a ``None`` key counts NULLs)."""
        if column not in _GROUPABLE:
            raise ValueError(f"cannot count by {column!r} (one of {', '.join(_GROUPABLE)})")
        with self._lock:
            return {r[0]: int(r[1]) for r in self.db.execute(
                f"SELECT [{column}], count(*) FROM interactions GROUP BY [{column}]")}

    def last_interaction_id(self) -> int:
        """The highest interaction id stored (0 when there is none)."""
        with self._lock:
            return int(self.db.execute(
                "SELECT coalesce(max(id), 0) FROM interactions").fetchone()[0])

    def last_asr_backend(self) -> str | None:
        """The ASR backend of the newest interaction that names one."""
        with self._lock:
            rows = list(self.db["interactions"].rows_where(
                "asr_backend IS NOT NULL", select="asr_backend", order_by="id DESC", limit=1))
        return rows[0]["asr_backend"] if rows else None

    def ids_in_order(self, before: float | None = None) -> list[int]:
        """Interaction ids in id order; with `before`, those stored with ``ts`` before it."""
        where, params = _interaction_filter(before=before)
        with self._lock:
            return [int(r["id"]) for r in self.db["interactions"].rows_where(
                where, params, select="id", order_by="id")]

    def labels_of(self, ids: Iterable[int]) -> dict[int, tuple[str, str]]:
        """(label, label source) of those of `ids` that are labelled now."""
        ids = [int(i) for i in ids]
        if not ids:
            return {}
        with self._lock:
            return {r["id"]: (r["label"], r["label_source"])
                    for r in self.db["interactions"].rows_where(
                        f"id IN ({_marks(ids)}) AND label IS NOT NULL", ids,
                        select="id, label, label_source")}

    def audio_paths(self, ids: Iterable[int]) -> list[str]:
        """The audio files the interactions `ids` refer to (rows without one left out)."""
        ids = [int(i) for i in ids]
        if not ids:
            return []
        with self._lock:
            return [r["audio_path"] for r in self.db["interactions"].rows_where(
                f"id IN ({_marks(ids)}) AND audio_path IS NOT NULL", ids, select="audio_path")]

    def label_counts(self, ids: Iterable[int]) -> tuple[int, int]:
        """Among the interactions `ids`: (labelled, labelled outside the holdout slice)."""
        ids = [int(i) for i in ids]
        if not ids:
            return 0, 0
        with self._lock:
            labelled, learnable = self.db.execute(
                "SELECT count(label), coalesce(sum(label IS NOT NULL AND holdout = 0), 0) "
                f"FROM interactions WHERE id IN ({_marks(ids)})", ids).fetchone()
        return int(labelled), int(learnable)

    def count_label_sources(self, ids: Iterable[int], sources: Iterable[str]) -> int:
        """How many of the interactions `ids` have a label from one of `sources`."""
        ids, sources = [int(i) for i in ids], list(sources)
        if not ids or not sources:
            return 0
        with self._lock:
            return int(self.db["interactions"].count_where(
                f"id IN ({_marks(ids)}) AND label_source IN ({_marks(sources)})",
                [*ids, *sources]))

    def holdout_rows(self) -> list[tuple[int, str, str]]:
        """(id, transcript, label) of the labelled holdout rows, in id order."""
        with self._lock:
            return [(int(r["id"]), r["transcript"], r["label"])
                    for r in self.db["interactions"].rows_where(
                        "label IS NOT NULL AND holdout = 1", select="id, transcript, label",
                        order_by="id")]

    def labelled_transcripts(self) -> list[tuple[int, str, str, str | None, bool]]:
        """(id, transcript, label, label source, holdout) of the labelled rows with a
        transcript and no error, in id order."""
        with self._lock:
            return [(int(r["id"]), r["transcript"], r["label"], r["label_source"],
                     bool(r["holdout"])) for r in self.db["interactions"].rows_where(
                "label IS NOT NULL AND error IS NULL AND trim(transcript) != ''",
                select="id, transcript, label, label_source, holdout", order_by="id")]

    def prediction_summary(self, version: str) -> dict[str, Any]:
        """What model `version` predicted: interactions, labelled ones, correct ones (label
        = prediction), and the first and last ``ts``."""
        with self._lock:
            n, labelled, correct, first, last = self.db.execute(
                "SELECT count(*), count(label), coalesce(sum(label = prediction), 0), "
                "min(ts), max(ts) FROM interactions WHERE model_version = ?",
                [version]).fetchone()
        return {"interactions": int(n), "labelled": int(labelled), "correct": int(correct),
                "first_ts": first, "last_ts": last}

    def labeled_examples(self, holdout: bool | None = None) -> list[tuple[str, str]]:
        """(transcript, label) of labeled interactions in time order; holdout filter if given."""
        where, params = _interaction_filter(labeled=True, holdout=holdout)
        with self._lock:
            return [(r["transcript"], r["label"]) for r in self.db["interactions"].rows_where(
                where, params, select="transcript, label", order_by="ts, id")]

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
        def delete() -> list[str]:
            found = self.audio_paths(ids)
            self.db["interactions"].delete_where(f"id IN ({_marks(ids)})", ids)
            self.db.execute(
                "INSERT INTO meta (key, value) VALUES ('forget_seq', '1') ON CONFLICT(key) "
                "DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)")
            if activate_version is not None:
                self._retire_active(except_version=activate_version)
                self._update_row("model_versions", activate_version, {"status": "active"},
                                 f"no model version {activate_version!r}")
            return found

        paths = self._write(delete)
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
        cols = ", ".join(row)
        sql = f"INSERT INTO model_versions ({cols}) VALUES ({', '.join('?' for _ in row)})"

        def insert() -> None:
            if status == "active":
                self._retire_active()
            try:
                self.db.execute(sql, list(row.values()))
            except sqlite3.IntegrityError as exc:
                raise ValueError(f"model version {version!r} already exists") from exc

        self._write(insert)

    def set_model_status(self, version: str, status: str) -> None:
        """Change a version's status; making one active retires the previous active one."""
        _check("status", status, MODEL_STATUSES)

        def update() -> None:
            if status == "active":
                self._retire_active(except_version=version)
            self._update_row("model_versions", version, {"status": status},
                             f"no model version {version!r}")

        self._write(update)

    def _retire_active(self, except_version: str | None = None) -> None:
        self.db.execute("UPDATE model_versions SET status = 'retired' "
                        "WHERE status = 'active' AND version IS NOT ?", [except_version])

    def forget_seq(self) -> int:
        """How many `delete_interactions` transactions this database has seen (a cheap
        signal for a running service that rows it may have learned are gone)."""
        value = self._meta("forget_seq")
        return 0 if value is None else int(value)

    # --- relay state (gpio.relay_restore) --------------------------------------------------
    def set_relay_state(self, name: str, is_on: bool) -> None:
        """Record that relay `name` was driven to `is_on` (one transaction: after a crash the
        row holds either the previous state or this one, never a mix)."""
        row = [str(name), int(bool(is_on)), float(self._clock())]
        self._write(lambda: self.db.execute(
            "INSERT INTO relay_state (name, is_on, ts) VALUES (?, ?, ?) ON CONFLICT(name) DO "
            "UPDATE SET is_on = excluded.is_on, ts = excluded.ts", row))

    def relay_state(self, name: str) -> bool | None:
        """The last recorded state of relay `name` (None: never recorded)."""
        with self._lock:
            row = self.db.execute("SELECT is_on FROM relay_state WHERE name = ?",
                                  [str(name)]).fetchone()
        return None if row is None else bool(row[0])

    def stored_schema_version(self) -> int | None:
        """``meta.schema_version`` of the open database (None if the row is gone)."""
        value = self._meta("schema_version")
        return None if value is None else int(value)

    def _meta(self, key: str) -> str | None:
        with self._lock:
            try:
                return self.db["meta"].get(key)["value"]
            except sqlite_utils.db.NotFoundError:
                return None

    def interaction_ids(self, among: Iterable[int] | None = None) -> set[int]:
        """Every stored interaction id (only those `among` the given ids, if given)."""
        where, params = None, []
        if among is not None:
            params = [int(i) for i in among]
            if not params:
                return set()
            where = f"id IN ({_marks(params)})"
        with self._lock:
            return {int(r["id"]) for r in self.db["interactions"].rows_where(
                where, params, select="id")}

    def set_model_metrics(self, version: str, metrics: dict[str, Any]) -> None:
        """Replace a version's metrics (e.g. to mark its checkpoint pruned)."""
        values = {"metrics": json.dumps(metrics, sort_keys=True)}
        self._write(lambda: self._update_row("model_versions", version, values,
                                             f"no model version {version!r}"))

    def delete_model_version(self, version: str) -> None:
        """Remove a version row (only for debris: a candidate whose writer died)."""
        self._write(lambda: self.db["model_versions"].delete_where(
            "version = ? AND status = 'candidate'", [version]))

    def model_versions(self) -> list[ModelVersion]:
        """All model versions in the order they were made (rowid; ``created_ts`` is the
        clock of whoever made them, e.g. a replay's simulated time)."""
        with self._lock:
            return [_model(r) for r in self.db["model_versions"].rows_where(order_by="rowid")]

    def active_model_version(self) -> ModelVersion | None:
        """The active model version, if any."""
        with self._lock:
            rows = list(self.db["model_versions"].rows_where("status = 'active'"))
        return _model(rows[0]) if rows else None

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self.db.close()

    def __enter__(self) -> ReplayStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- whole database files -------------------------------------------------------------------
def file_schema_version(path: str | Path, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> int:
    """The schema version of the database file at `path`, read on a read-only connection
    (the file is not changed). `SchemaError`: not an edge-plm database;
    `sqlite3.DatabaseError`: not a readable SQLite database."""
    conn = sqlite3.connect(ro_uri(Path(path)), uri=True, timeout=busy_timeout_ms / 1000)
    try:
        return schema_version(sqlite_utils.Database(conn))
    finally:
        conn.close()


def copy_database(src: str | Path, target: str | Path,
                  busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> dict[str, Any]:
    """Copy the live database at `src` into the file `target` and check the copy.

    The whole copy is one step of `sqlite3.Connection.backup` on a read-only connection: in
    WAL mode that is a read transaction, so it is one snapshot and the service keeps writing
    meanwhile (a step-wise backup would restart whenever the service commits). The copy is
    switched to a self-contained rollback journal, then checked: returns ``integrity_check``,
    ``schema_version`` and the row counts. `StoreError` when ``PRAGMA integrity_check``
    fails, `SchemaError` when the copy is not an edge-plm database.
    """
    source = _snapshot_source(Path(src), busy_timeout_ms)
    try:
        copy = sqlite3.connect(str(target), timeout=busy_timeout_ms / 1000)
        try:
            source.backup(copy)  # pages=-1: everything in one step, one snapshot
            copy.execute("PRAGMA journal_mode = DELETE")
            return _verify_copy(copy)
        finally:
            copy.close()
    finally:
        source.close()


def _snapshot_source(src: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    """A read-only connection to `src`; immutable when its directory is read-only and no
    writer is active (a WAL database otherwise needs a -shm file it cannot get there)."""
    source = sqlite3.connect(ro_uri(src), uri=True, timeout=busy_timeout_ms / 1000)
    try:
        source.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        try:
            source.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:
            if not quiet_unwritable(src):
                raise
            source.close()
            return sqlite3.connect(ro_uri(src, immutable=True), uri=True)
    except BaseException:
        source.close()
        raise
    return source


def _verify_copy(conn: sqlite3.Connection) -> dict[str, Any]:
    problems = [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]
    if problems != ["ok"]:
        raise StoreError("integrity_check of the copy failed: " + "; ".join(problems[:5]))
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "meta" not in tables:
        raise SchemaError("the copied database is not an edge-plm database (no meta table)")
    version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return {"integrity_check": "ok", "schema_version": int(version[0]) if version else None,
            "interactions": conn.execute("SELECT count(*) FROM interactions").fetchone()[0],
            "model_versions": conn.execute("SELECT count(*) FROM model_versions").fetchone()[0]}


def passes_quick_check(path: str | Path, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> bool:
    """Whether the database file at `path` opens read-only and passes ``PRAGMA quick_check``."""
    conn = sqlite3.connect(ro_uri(Path(path)), uri=True, timeout=busy_timeout_ms / 1000)
    try:
        return conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    finally:
        conn.close()


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
