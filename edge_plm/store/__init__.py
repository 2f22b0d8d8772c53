"""The replay buffer: one SQLite file (via sqlite-utils), the device's source of truth.

Every SQL statement of edge-plm is in this package: the schema and its migrations
(`schema.py`), the connection and its writes (`connection.py`: each one ``BEGIN IMMEDIATE``
transaction, retried while the database is busy; `StorageError` when it cannot be stored), the
named queries that the loop, the learner and the CLI ask, by job (`interactions.py`,
`labels.py`, `model_versions.py`, `devices.py`), and operations on whole files (`files.py`). `ReplayStore`
puts the jobs together behind one object. Durability, concurrency, privacy and schema
versions: docs/loop.md "The replay buffer".
"""

from __future__ import annotations

from typing import Any

from edge_plm.store.base import (BUSY_TIMEOUT_MS, BusyError, NotFoundError, SchemaError,
                                 StorageError, StoreError, is_busy, is_storage_failure,
                                 private_dir, quiet_unwritable, read_only_fs, retry_busy, ro_uri)
from edge_plm.store.connection import StoreConnection
from edge_plm.store.devices import DeviceOutcome, DeviceRows
from edge_plm.store.files import (copy_checkpoints, copy_database, file_schema_version,
                                  passes_quick_check)
from edge_plm.store.interactions import InteractionRows
from edge_plm.store.labels import LabelRows
from edge_plm.store.model_versions import ModelVersionRows
from edge_plm.store.relays import RelayRows
from edge_plm.store.kinds import KIND_LABEL_SOURCES, KindRow, KindRows
from edge_plm.store.timers import TIMER_STATUSES, Timer, TimerRows
from edge_plm.store.records import (ACTIONS, DECISIONS, INTERACTION_FIELDS, LABEL_SOURCES, LABELS,
                                    MODEL_STATUSES, Interaction, ModelVersion, clean_text,
                                    row_to_interaction)
from edge_plm.store.schema import MIGRATIONS, SCHEMA_VERSION, migrate, schema_version

__all__ = [
    "ACTIONS", "BUSY_TIMEOUT_MS", "DECISIONS", "DeviceOutcome", "INTERACTION_FIELDS", "LABELS", "LABEL_SOURCES",
    "MIGRATIONS", "MODEL_STATUSES", "SCHEMA_VERSION", "BusyError", "Interaction", "ModelVersion",
    "NotFoundError", "ReplayStore", "SchemaError", "StorageError", "StoreError", "clean_text",
    "copy_checkpoints", "copy_database", "file_schema_version", "is_busy", "is_storage_failure", "migrate",
    "passes_quick_check", "private_dir", "quiet_unwritable", "read_only_fs", "retry_busy",
    "ro_uri", "row_to_interaction", "schema_version", "TIMER_STATUSES", "Timer", "KIND_LABEL_SOURCES", "KindRow",
]


class ReplayStore(InteractionRows, LabelRows, ModelVersionRows, RelayRows, DeviceRows, TimerRows,
                  KindRows, StoreConnection):
    """The replay buffer at `path`. Thread-safe; one instance per process is enough.

    Opening, writing and closing: `StoreConnection`; the queries by job: `InteractionRows`,
    `LabelRows`, `ModelVersionRows`, `RelayRows`, `DeviceRows` (several devices).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.read_only:
            try:
                self.claim_checkpoints_home()
            except OSError as exc:
                self.close()
                raise StorageError(f"{self.path}: cannot claim its checkpoint folder: "
                                   f"{exc.strerror or exc}") from exc
            except BaseException:
                self.close()
                raise

    def __enter__(self) -> ReplayStore:
        return self
