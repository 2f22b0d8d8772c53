"""Errors, the busy/storage classification of SQLite errors, and file helpers of the replay buffer."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from edge_plm.errors import EdgePlmError


class StoreError(EdgePlmError, RuntimeError):
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
    missing = []
    p = path
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):  # every folder made here is 0700, not only the last one
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:  # made meanwhile by another process
            continue
        d.chmod(0o700)  # mkdir's mode is filtered by the umask
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
