"""The rows of ``model_versions``: the model's versions, their checkpoints and status."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

import sqlite_utils

from edge_plm.store.records import MODEL_STATUSES, ModelVersion, _check, _model


class ModelVersionRows:
    """The model-version queries of `ReplayStore` (a mixin over `StoreConnection`)."""

    db: sqlite_utils.Database
    _lock: threading.RLock
    _clock: Callable[[], float]
    _write: Callable[[Callable[[], Any]], Any]
    _update_row: Callable[..., None]

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
                      metrics: dict[str, Any]) -> None:
        """`version`'s checkpoint was written again (`forget` took examples out of it): its
        record, its labels learned (``n_train``, now the examples it holds) and its metrics,
        in one transaction."""
        values = {"sha256": sha256, "config": config, "n_examples": int(n_examples),
                  "n_train": int(n_examples), "metrics": json.dumps(metrics, sort_keys=True)}
        self._write(lambda: self._update_row("model_versions", version, values,
                                             f"no model version {version!r}"))

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
