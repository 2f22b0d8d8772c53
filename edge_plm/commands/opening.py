"""Opening a replay buffer for a command: read-only for readers (in WAL mode they never block the
service, which keeps writing meanwhile), and the one error class of what the person can fix."""

from __future__ import annotations

import os
from pathlib import Path

from edge_plm.errors import EdgePlmError
from edge_plm.store import BUSY_TIMEOUT_MS, ReplayStore, read_only_fs

SERVICE_DB = Path("/var/lib/edge-plm/edge-plm.db")


class UserError(EdgePlmError, RuntimeError):
    """A problem the person can fix (missing database, bad argument, unknown id...)."""


def open_store(path: str | Path, write: bool = False,
               busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> ReplayStore:
    """The replay buffer at `path`: read-only unless `write`; never creates a database.

    Raises `UserError` (missing, unreadable) or `StoreError`/`SchemaError` (not an edge-plm
    database, newer schema) with a message meant for the person.
    """
    path = Path(path)
    if not path.exists():
        hint = ""
        if path != SERVICE_DB and SERVICE_DB.exists():
            hint = f"; the service's database is {SERVICE_DB} (use --db {SERVICE_DB})"
        raise UserError(f"no database at {path}: nothing recorded yet (has the service or a "
                        f"replay run?), or give its path with --db{hint}")
    if path.is_dir():
        raise UserError(f"{path} is a directory, not a database file")
    if write and read_only_fs(path):
        raise UserError(f"{path} is on a read-only file system: it cannot be changed here")
    if not os.access(path, os.R_OK | (os.W_OK if write else 0)):
        owner = _owner(path)
        raise UserError(f"permission denied: {path} (mode {path.stat().st_mode & 0o777:o}, "
                        f"owner {owner}); run the command as that user, e.g. "
                        f"`sudo -u {owner} edge-plm ...`")
    return ReplayStore(path, busy_timeout_ms=busy_timeout_ms, read_only=not write)


def _owner(path: Path) -> str:
    try:
        import pwd  # noqa: PLC0415 - POSIX only

        return pwd.getpwuid(path.stat().st_uid).pw_name
    except (ImportError, KeyError):
        return str(path.stat().st_uid)


def db_bytes(path: str | Path) -> int:
    """Size on disk of the database with its -wal and -shm files."""
    total = 0
    for suffix in ("", "-wal", "-shm"):
        p = Path(f"{path}{suffix}")
        if p.exists():
            total += p.stat().st_size
    return total


__all__ = ["SERVICE_DB", "UserError", "db_bytes", "open_store"]
