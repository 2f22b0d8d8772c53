"""The rows of ``model_versions``: the model's versions, their checkpoints and status; and
``forget_owed``, the checkpoint rewrites a `forget` still owes.

A database owns its checkpoint files: new ones go to its own folder (`checkpoints_home`,
usually ``<database stem>.checkpoints/`` beside the file, claimed by the database's identity:
`edge_plm.store.folder`) and every path inside the database's directory is stored relative to
that directory, resolved against where the file is now (a copied or moved state dir keeps
working). A path outside the directory, or in another database's folder, is only read
(`owns_checkpoint`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import secrets
import sqlite3
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import sqlite_utils

from edge_plm.store import folder
from edge_plm.store.records import MODEL_STATUSES, ModelVersion, _check, _model

log = logging.getLogger("edge_plm.store")


class ModelVersionRows:
    """The model-version queries of `ReplayStore` (a mixin over `StoreConnection`)."""

    db: sqlite_utils.Database
    path: Path
    _lock: threading.RLock
    _clock: Callable[[], float]
    _write: Callable[[Callable[[], Any]], Any]
    _update_row: Callable[..., None]
    meta_value: Callable[[str], str | None]
    _home_folder: str | None = None

    def add_model_version(self, version: str, parent: str | None = None,
                          path: str | None = None, status: str = "candidate",
                          metrics: dict[str, Any] | None = None, n_train: int = 0,
                          created_ts: float | None = None) -> None:
        """Record a new model version (a candidate unless told otherwise)."""
        _check("status", status, MODEL_STATUSES)
        if not version:
            raise ValueError("model version must be a non-empty string")
        row = {"version": version, "parent": parent, "path": self.stored_path(path),
               "status": status,
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

    def activate_model_version(self, version: str) -> str | None:
        """Make `version` active in one write transaction; return the version it replaced
        (read inside the transaction: a service saving a version meanwhile cannot make the
        answer stale), None if none was active or `version` already was."""

        def update() -> str | None:
            row = self.db.execute("SELECT version FROM model_versions WHERE status = 'active'").fetchone()
            self._retire_active(except_version=version)
            self._update_row("model_versions", version, {"status": "active"},
                             f"no model version {version!r}")
            return None if row is None or row[0] == version else row[0]

        return self._write(update)

    def _retire_active(self, except_version: str | None = None) -> None:
        self.db.execute("UPDATE model_versions SET status = 'retired' "
                        "WHERE status = 'active' AND version IS NOT ?", [except_version])

    def set_checkpoint_record(self, version: str, sha256: str, config: str,
                              n_examples: int) -> None:
        """Record what `version`'s checkpoint file is: its SHA-256, the model configuration
        and the examples it holds (checked whenever the file is loaded)."""
        values = {"sha256": sha256, "config": config, "n_examples": int(n_examples)}
        self._write(lambda: self._update_row("model_versions", version, values,
                                             f"no model version {version!r}"))

    def set_rewritten(self, version: str, sha256: str, config: str, n_examples: int,
                      metrics: dict[str, Any], path: str | Path | None = None) -> None:
        """`version`'s checkpoint was written again (`forget` took examples out of it): its
        record, its labels learned (``n_train``, now the examples it holds), its metrics and
        (when the rewrite went to a new file) its path, in one transaction that also clears
        what `forget` owed it (`owed_rewrites`)."""
        values = {"sha256": sha256, "config": config, "n_examples": int(n_examples),
                  "n_train": int(n_examples), "metrics": json.dumps(metrics, sort_keys=True)}
        if path is not None:
            values["path"] = self.stored_path(path)

        def update() -> None:
            self._update_row("model_versions", version, values, f"no model version {version!r}")
            self.db.execute("DELETE FROM forget_owed WHERE version = ?", [version])

        self._write(update)

    def set_model_metrics(self, version: str, metrics: dict[str, Any],
                          settle_owed: bool = False) -> None:
        """Replace a version's metrics (e.g. to mark its checkpoint pruned); `settle_owed`:
        in the same transaction, clear what `forget` owed it (its file was deleted)."""
        values = {"metrics": json.dumps(metrics, sort_keys=True)}

        def update() -> None:
            self._update_row("model_versions", version, values, f"no model version {version!r}")
            if settle_owed:
                self.db.execute("DELETE FROM forget_owed WHERE version = ?", [version])

        self._write(update)

    def delete_model_version(self, version: str) -> None:
        """Remove a version row (only for debris: a candidate whose writer died)."""
        self._write(lambda: self.db["model_versions"].delete_where(
            "version = ? AND status = 'candidate'", [version]))

    def model_versions(self) -> list[ModelVersion]:
        """All model versions in the order they were made (rowid; ``created_ts`` is the
        clock of whoever made them, e.g. a replay's simulated time)."""
        with self._lock:
            return [self._resolved(_model(r))
                    for r in self.db["model_versions"].rows_where(order_by="rowid")]

    def active_model_version(self) -> ModelVersion | None:
        """The active model version, if any."""
        with self._lock:
            rows = list(self.db["model_versions"].rows_where("status = 'active'"))
        return self._resolved(_model(rows[0])) if rows else None

    # --- the database's own files -----------------------------------------------------------
    def home(self) -> Path:
        """The directory the database file is in now (absolute)."""
        return Path(os.path.abspath(self.path)).parent

    def checkpoints_home(self) -> Path:
        """This database's own checkpoint folder beside the file, by its identity (two
        databases in one folder never share it, whatever their names; a copy of the file
        gets its own on its first read-write open: `claim_checkpoints_home`)."""
        if self._home_folder is None:
            self._home_folder = folder.planned(Path(os.path.abspath(self.path)),
                                               self.meta_value("checkpoints_folder"))
        return self.home() / self._home_folder

    def claim_checkpoints_home(self) -> dict[str, Any]:
        """Make the database's checkpoint folder its own (`edge_plm.store.folder`): mark it,
        record it and the database's id in ``meta``, and copy every checkpoint its versions
        refer to in another database's folder into it (the rows then point at the copies).
        Returns ``{"folder", "database_id", "copied", "missing"}``."""
        db = Path(os.path.abspath(self.path))
        recorded = self.meta_value("checkpoints_folder")
        name = folder.planned(db, recorded)
        database_id = self.meta_value("database_id")
        if database_id is None or (recorded is not None and name != recorded):
            database_id = secrets.token_hex(8)  # a new database, or a copy of another one
        own = self.home() / name
        if folder.verdict(own, db.name) != "mine" or folder.read_mark(own) != {
                "database": db.name, "database_id": database_id}:
            folder.write_mark(own, db.name, database_id)
        moved: dict[str, str] = {}
        missing = 0
        for v in self.model_versions():
            if not v.path or not folder.foreign_folder(Path(os.path.abspath(v.path)),
                                                       self.home(), name):
                continue
            src = Path(v.path)
            if src.is_file():
                moved[v.version] = str(folder.copy_into(src, own))
            else:
                moved[v.version] = str(own / src.name)  # missing: never another's file
                missing += 1

        def update() -> None:
            for key, value in (("checkpoints_folder", name), ("database_id", database_id)):
                self.db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                                [key, value])
            for version, path in moved.items():
                self._update_row("model_versions", version, {"path": self.stored_path(path)},
                                 f"no model version {version!r}")

        if recorded != name or self.meta_value("database_id") != database_id or moved:
            self._write(update)
        self._home_folder = name
        self.settle_copies()
        if moved:
            log.warning("%s: its checkpoint folder is now %s/ (the one it shared belongs to "
                        "another database); %d checkpoint file(s) copied into it, %d already "
                        "gone", db.name, name, len(moved) - missing, missing)
        return {"folder": str(own), "database_id": database_id,
                "copied": len(moved) - missing, "missing": missing}

    def stored_path(self, path: str | Path | None) -> str | None:
        """How `path` is stored: relative to the database's directory when inside it (a
        copied or moved state dir keeps its paths), else absolute."""
        if not path:
            return None
        full = Path(os.path.abspath(path))
        rel = _inside(full, self.home())
        return str(rel) if rel is not None else str(full)

    def resolve_path(self, stored: str | None) -> str | None:
        """A stored path as a path to open (relative ones against the database's directory)."""
        if not stored:
            return stored
        return stored if os.path.isabs(stored) else str(self.home() / stored)

    def settle_copies(self) -> list[str]:
        """Give every other database file in this one's directory that still refers to
        checkpoints in this one's folder (a ``cp`` of the file not opened read-write since)
        its own copies first (`claim_checkpoints_home`, run by opening it): this database may
        then rewrite and delete its files. Run at every read-write open and before a rewrite
        or a prune. Returns the files settled; one that cannot be opened is logged."""
        if folder.settling():
            return []
        own = self.checkpoints_home().name
        settled = []
        for other in folder.copies_referring_to(Path(os.path.abspath(self.path)), own):
            with folder.settling_copies():
                try:
                    type(self)(other).close()  # its read-write open claims its own folder
                except Exception as exc:  # a busy, read-only or newer file: said, not raised
                    log.warning("%s refers to checkpoints of %s but could not be given its own "
                                "copies (%s: %s); its versions may go missing when this "
                                "database rewrites or prunes them", other, self.path,
                                type(exc).__name__, exc)
                    continue
            settled.append(str(other))
        return settled

    def owns_checkpoint(self, path: str | Path | None) -> bool:
        """Whether this database may rewrite or delete the file at `path`: only inside its
        own directory (stored relative) and not in another database's checkpoint folder. A
        file elsewhere may be another database's (an older backup's paths point at the
        original's files, a copy's at the original's folder): it is only read."""
        if not path:
            return False
        full = Path(os.path.abspath(path))
        return (_inside(full, self.home()) is not None
                and not folder.foreign_folder(full, self.home(), self.checkpoints_home().name))

    def _resolved(self, v: ModelVersion) -> ModelVersion:
        return dataclasses.replace(v, path=self.resolve_path(v.path)) if v.path else v

    def rebase_checkpoints(self, moved: dict[str, str]) -> None:
        """Point versions at new files (`db backup`: the copy's own folder), version -> path."""
        def update() -> None:
            for version, path in moved.items():
                self._update_row("model_versions", version, {"path": self.stored_path(path)},
                                 f"no model version {version!r}")
        self._write(update)

    # --- what `forget` still owes ---------------------------------------------------------
    def owed_rewrites(self) -> dict[str, set[int]]:
        """Version -> the forgotten interaction ids its checkpoint must still lose (written
        by `delete_interactions` in the transaction of the delete)."""
        out: dict[str, set[int]] = {}
        with self._lock:
            for version, ids in self.db.execute(
                    "SELECT version, interaction_ids FROM forget_owed ORDER BY id"):
                out.setdefault(version, set()).update(int(i) for i in json.loads(ids))
        return out

    def _owe(self, versions: Iterable[str], ids: list[int]) -> None:
        """Inside a write: journal a rewrite of each of `versions` without `ids`."""
        payload = json.dumps(sorted(int(i) for i in ids))
        now = self._clock()
        for version in versions:
            self.db.execute("INSERT INTO forget_owed (version, interaction_ids, created_ts) "
                            "VALUES (?, ?, ?)", [version, payload, now])

    def settle_owed(self, version: str) -> None:
        """Nothing is owed to `version` any more (its file is gone or holds none of them)."""
        self._write(lambda: self.db.execute("DELETE FROM forget_owed WHERE version = ?",
                                            [version]))


def _inside(path: Path, directory: Path) -> Path | None:
    """`path` relative to `directory` if it is inside it (symlinks resolved too), else None."""
    for p, d in ((path, directory), (Path(os.path.realpath(path)), Path(os.path.realpath(directory)))):
        try:
            rel = p.relative_to(d)
        except ValueError:
            continue
        if rel.parts and ".." not in rel.parts:
            return rel
    return None
