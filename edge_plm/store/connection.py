"""The connection to the replay buffer: opening (and migrating) the file, write transactions,
the meta table."""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlite_utils

from edge_plm.store.base import (BUSY_TIMEOUT_MS, BusyError, NotFoundError, SchemaError,
                                 StorageError, StoreError, is_busy, is_storage_failure,
                                 private_dir, quiet_unwritable, retry_busy, ro_uri)
from edge_plm.store.schema import SCHEMA_VERSION, migrate, schema_version

log = logging.getLogger("edge_plm.store")


class StoreConnection:
    """One connection to the replay buffer at `path`, guarded by a lock (thread-safe)."""

    def __init__(self, path: str | Path, busy_timeout_ms: int = BUSY_TIMEOUT_MS,
                 read_only: bool = False, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self.busy_timeout_ms = int(busy_timeout_ms)
        self._clock = clock
        self._lock = threading.RLock()
        self._loose_dir_mode: int | None = None  # the directory's mode, when group/others may enter
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
            private_dir(directory)  # it and every missing parent 0700
        elif directory.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            self._loose_dir_mode = stat.S_IMODE(directory.stat().st_mode)  # said in `_open`
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
        # deleted rows are overwritten with zeros, not left in free pages (`forget`)
        self.db.execute("PRAGMA secure_delete = ON")
        migrate(self.db)
        if self._loose_dir_mode is not None:
            self._warn_loose_dir_once(self._loose_dir_mode)

    def meta_value(self, key: str) -> str | None:
        """A value of the database's ``meta`` table (None: not set)."""
        with self._lock:
            row = self.db.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        return None if row is None else row[0]

    def set_meta_value(self, key: str, value: str) -> None:
        """Set a value of the ``meta`` table (``schema_version`` is the migration's own)."""
        if key == "schema_version":
            raise ValueError("meta.schema_version is set by the migration only")
        self._write(lambda: self.db.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [key, value]))

    def _warn_loose_dir_once(self, mode: int) -> None:
        """Say once, not at every command, that group/others may enter the directory (edge-plm
        makes the directories it creates 0700; one a person made keeps its mode): the mode
        said is kept in ``meta`` (``dir_mode_warned``), and a new mode is said again."""
        said = self.db.execute("SELECT value FROM meta WHERE key = 'dir_mode_warned'").fetchone()
        if said is not None and said[0] == f"{mode:o}":
            return
        log.warning("directory of the replay buffer %s is accessible to group/others (mode %o); "
                    "0700 is recommended (chmod 700 %s); said once for this mode", self.path.parent,
                    mode, self.path.parent)
        with self.db.conn:
            self.db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('dir_mode_warned', ?)",
                            [f"{mode:o}"])

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

    def _update_row(self, table: str, key: Any, values: dict[str, Any], missing: str) -> None:
        """Set `values` in the row of `table` with primary key `key` (inside a write);
        `NotFoundError` with the message `missing` when there is no such row."""
        try:
            self.db[table].update(key, values)
        except sqlite_utils.db.NotFoundError:
            raise NotFoundError(missing) from None

    def forget_seq(self) -> int:
        """How many `delete_interactions` transactions this database has seen (a cheap
        signal for a running service that rows it may have learned are gone)."""
        value = self._meta("forget_seq")
        return 0 if value is None else int(value)

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

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self.db.close()

    def __enter__(self) -> StoreConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
