"""Which checkpoint folder is a database's own: by the database's identity, not its stem.

A database keeps its checkpoints in a folder beside it. The folder carries an owner mark
(``owner.json``: the database's file name and id) and the database records the folder's name
(``meta.checkpoints_folder``) and its own id (``meta.database_id``). On every read-write open
(`claim`) the database makes sure the folder it uses is its own:

- its recorded folder whose mark names it (or names a file that is gone: a renamed database
  adopts its folder) is kept;
- otherwise (a copy made with ``cp``, a second database whose stem is the same, ``x.db`` and
  ``x.sqlite``) it takes the first free name of ``<stem>.checkpoints``,
  ``<file name>.checkpoints``, ``<file name>.<n>.checkpoints``, gets a new id, and copies
  every checkpoint its rows refer to in a folder owned by another database into its own
  (``copied``): from then on the two never write each other's files;
- a folder from before the mark (``<stem>.checkpoints`` shared by stem) is adopted by one
  database only: the file named ``<stem>.db`` when there is one, else the first of the
  sharing files by name; the others copy as above (existing layouts migrate).

`planned` is the same answer without writing (read-only opens).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

log = logging.getLogger("edge_plm.store")

MARK = "owner.json"
SQLITE_MAGIC = b"SQLite format 3\x00"
SUFFIX = ".checkpoints"


def read_mark(folder: Path) -> dict[str, Any] | None:
    """The owner mark of `folder` (None: none, or unreadable)."""
    try:
        with open(folder / MARK, encoding="utf-8") as f:
            mark = json.load(f)
    except (OSError, ValueError):
        return None
    return mark if isinstance(mark, dict) and isinstance(mark.get("database"), str) else None


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def _legacy_owner(folder: Path) -> str | None:
    """Which database file adopts an unmarked (pre-mark) folder ``<stem>.checkpoints``: the
    file ``<stem>.db`` if it is there, else the first SQLite file of that stem by name."""
    stem = folder.name[:-len(SUFFIX)]
    names = sorted(p.name for p in folder.parent.iterdir()
                   if p.is_file() and p.stem == stem and not p.name.endswith(("-wal", "-shm"))
                   and _is_sqlite(p))
    if f"{stem}.db" in names:
        return f"{stem}.db"
    return names[0] if names else None


def verdict(folder: Path, name: str) -> str:
    """Whether `folder` is the database file `name`'s: ``mine``, ``free`` or ``taken``."""
    if not folder.exists():
        return "free"
    if not folder.is_dir():
        return "taken"
    mark = read_mark(folder)
    if mark is not None:
        if mark["database"] == name:
            return "mine"
        return "taken" if (folder.parent / mark["database"]).exists() else "free"
    owner = _legacy_owner(folder) if folder.name.endswith(SUFFIX) else None
    return "free" if owner in (None, name) else "taken"


def _candidates(db: Path, recorded: str | None) -> list[str]:
    names = [recorded] if recorded else []
    names += [f"{db.stem}{SUFFIX}", f"{db.name}{SUFFIX}"]
    names += [f"{db.name}.{n}{SUFFIX}" for n in range(2, 100)]
    return list(dict.fromkeys(names))


def planned(db: Path, recorded: str | None) -> str:
    """The folder name `claim` would use for the database file `db` (nothing written)."""
    for name in _candidates(db, recorded):
        if verdict(db.parent / name, db.name) != "taken":
            return name
    return f"{db.name}.{secrets.token_hex(4)}{SUFFIX}"


def write_mark(folder: Path, name: str, database_id: str) -> None:
    """Create `folder` (0700) if needed and write its owner mark (0600, atomically)."""
    folder.mkdir(mode=0o700, exist_ok=True)  # two processes opening one file: both may
    folder.chmod(0o700)
    tmp = folder / f".{MARK}.{os.getpid()}.{secrets.token_hex(4)}.part"
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"database": name, "database_id": database_id}, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, folder / MARK)


def foreign_folder(path: Path, home: Path, own: str) -> bool:
    """Whether the file `path` (absolute) lies in a checkpoint folder of the directory `home`
    other than the database's own folder `own` (another database's, or one it left)."""
    try:
        rel = path.relative_to(home)
    except ValueError:
        return False
    return len(rel.parts) >= 2 and rel.parts[0] != own and rel.parts[0].endswith(SUFFIX)


_local = threading.local()


def settling() -> bool:
    """Whether this thread is giving a copy its own folder (no cascade from there)."""
    return bool(getattr(_local, "active", False))


@contextmanager
def settling_copies() -> Iterator[None]:
    _local.active = True
    try:
        yield
    finally:
        _local.active = False


def copies_referring_to(db: Path, own: str) -> list[Path]:
    """The other SQLite files in `db`'s directory whose versions refer to a file in the
    folder `own` there (read-only look; an unreadable file is skipped)."""
    out = []
    for p in sorted(db.parent.iterdir()):
        if (p == db or not p.is_file() or p.name.endswith(("-wal", "-shm", "-journal"))
                or not _is_sqlite(p)):
            continue
        try:
            conn = sqlite3.connect(f"file:{p}?mode=ro", uri=True, timeout=5)
            try:
                row = conn.execute("SELECT 1 FROM model_versions WHERE path LIKE ? LIMIT 1",
                                   [f"{own}/%"]).fetchone()
            finally:
                conn.close()
        except sqlite3.Error:
            continue  # not an edge-plm database, or not readable now
        if row is not None:
            out.append(p)
    return out


def copy_into(src: Path, folder: Path) -> Path:
    """Copy the checkpoint `src` into `folder` (0600, fsynced, atomically); its new path."""
    target = folder / src.name
    tmp = folder / f".{src.name}.{os.getpid()}.part"
    shutil.copyfile(src, tmp)
    os.chmod(tmp, 0o600)
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)
    return target


__all__ = ["MARK", "SUFFIX", "copies_referring_to", "copy_into", "foreign_folder", "planned",
           "read_mark", "settling", "settling_copies", "verdict", "write_mark"]
