"""Operations on whole database files: schema version, a checked copy, a quick check."""

from __future__ import annotations

import os
import secrets
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import sqlite_utils

from edge_plm.files import atomic_path, fsync_path
from edge_plm.store import folder as owner
from edge_plm.store.base import BUSY_TIMEOUT_MS, SchemaError, StoreError, quiet_unwritable, ro_uri
from edge_plm.store.schema import schema_version


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


def copy_checkpoints(src_db: str | Path, copy: str | Path, dest_db: str | Path) -> dict[str, int]:
    """Give the database copy at `copy` (to be renamed to `dest_db`) its own checkpoints:
    every version's file (its path resolved against `src_db`'s directory) is copied into
    ``<dest_db stem>.checkpoints/`` (0700, files 0600, fsynced; marked as the copy's, with a
    new database id: `edge_plm.store.folder`) and the copy's rows point there, relative to
    `dest_db`'s directory; a version whose file is gone points there too (missing, never
    another database's file). Returns ``{"copied", "missing"}``."""
    src_home = Path(os.path.abspath(src_db)).parent
    dest_db = Path(os.path.abspath(dest_db))
    folder = dest_db.parent / f"{dest_db.stem}{owner.SUFFIX}"
    database_id = secrets.token_hex(8)
    owner.write_mark(folder, dest_db.name, database_id)
    out = {"copied": 0, "missing": 0}
    conn = sqlite3.connect(str(copy))
    try:
        with conn:
            for key, value in (("checkpoints_folder", folder.name), ("database_id", database_id)):
                conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [key, value])
            rows = conn.execute("SELECT version, path FROM model_versions "
                                "WHERE path IS NOT NULL").fetchall()
            for version, stored in rows:
                src = Path(stored) if os.path.isabs(stored) else src_home / stored
                target = folder / Path(stored).name
                if src.is_file():
                    with atomic_path(target) as tmp:
                        shutil.copyfile(src, tmp)
                    out["copied"] += 1
                else:
                    out["missing"] += 1
                conn.execute("UPDATE model_versions SET path = ? WHERE version = ?",
                             [str(target.relative_to(dest_db.parent)), version])
    finally:
        conn.close()
    fsync_path(folder)
    return out


def passes_quick_check(path: str | Path, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> bool:
    """Whether the database file at `path` opens read-only and passes ``PRAGMA quick_check``."""
    conn = sqlite3.connect(ro_uri(Path(path)), uri=True, timeout=busy_timeout_ms / 1000)
    try:
        return conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    finally:
        conn.close()
