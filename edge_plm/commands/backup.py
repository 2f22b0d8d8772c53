"""`edge-plm db backup`: a consistent, verified copy of the live database that owns its own copy
of every checkpoint file."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from edge_plm.commands.opening import UserError
from edge_plm.files import atomic_path
from edge_plm.store import folder as store_folder
from edge_plm.store import BUSY_TIMEOUT_MS, copy_checkpoints, copy_database, passes_quick_check

def backup(src: str | Path, dest: str | Path, overwrite: bool = False,
           busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> dict[str, Any]:
    """A consistent copy of the live database (SQLite's online backup API), verified.

    One snapshot while the service keeps writing (`store.copy_database`), written to a
    temporary file in the destination directory (0600), checked (``PRAGMA integrity_check``,
    schema version, row counts), given its own copy of every checkpoint file
    (``<dest stem>.checkpoints/`` beside it, `store.copy_checkpoints`: the copy never writes a
    file the original refers to), fsynced and renamed into place; the copy in place must then
    pass ``quick_check``. `UserError` for what the person can fix, `StoreError` when the copy
    fails its integrity check.
    """
    src = Path(src)
    dest = _backup_destination(src, Path(dest), overwrite)
    started = time.perf_counter()
    try:
        with atomic_path(dest, prefix=f".{dest.name}.partial-{os.getpid()}-", suffix="") as tmp:
            verified = copy_database(src, tmp, busy_timeout_ms)
            files = copy_checkpoints(src, tmp, dest)  # the copy owns its files (independent)
    except sqlite3.DatabaseError as exc:
        raise UserError(f"backup of {src} failed: {exc}") from exc
    if not passes_quick_check(dest, busy_timeout_ms):  # the copy in place opens on its own
        raise UserError(f"{dest}: the copy does not pass quick_check")
    return {"source": str(src), "backup": str(dest), "bytes": dest.stat().st_size,
            "seconds": round(time.perf_counter() - started, 3), **verified,
            "checkpoints": str(dest.parent / f"{dest.stem}.checkpoints"),
            "checkpoints_copied": files["copied"], "checkpoints_missing": files["missing"]}


def _backup_destination(src: Path, dest: Path, overwrite: bool) -> Path:
    """The file a backup of `src` goes to (`dest`, or `src`'s name inside directory `dest`)."""
    if not src.exists():
        raise UserError(f"no database at {src}: nothing to back up (give its path with --db)")
    if dest.is_dir():
        dest = dest / src.name
    if dest.exists():
        if dest.resolve() == src.resolve():
            raise UserError(f"{dest} is the database itself")
        if not overwrite:
            raise UserError(f"{dest} exists; not overwritten (use --force)")
    if not dest.parent.is_dir():
        raise UserError(f"directory {dest.parent} does not exist")
    if (dest.parent.resolve() / dest.stem) == (src.parent.resolve() / src.stem):
        raise UserError(f"{dest} would share the checkpoint folder {src.stem}.checkpoints of "
                        f"{src}; give the copy another name")
    ckdir = dest.parent / f"{dest.stem}{store_folder.SUFFIX}"
    if store_folder.verdict(ckdir, dest.name) == "taken":
        raise UserError(f"{dest} would share the checkpoint folder {ckdir.name} of another "
                        "database in that directory; give the copy another name")
    return dest


__all__ = ["backup"]
