"""Changes to the model versions a person asks for (`edge-plm model rollback|rebuild`), on the
household's learner (`loop.house.open_learner`: the devices the loop learns for)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from edge_plm.commands.opening import UserError
from edge_plm.commands.status import find_version, model_record
from edge_plm.config.settings import Settings
from edge_plm.loop.house import open_learner
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.store import ReplayStore


@dataclass(frozen=True)
class RolledBack:
    """What `model rollback` did (``to_dict``: its ``--json`` document)."""

    version: str  # the version asked for, active now
    previous: str | None  # the version it replaced (None: none was active)
    changed: bool  # False: it was the active version already

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rollback(store: ReplayStore, settings: Settings, version: str) -> RolledBack:
    """Make the saved `version` active. A version whose checkpoint does not load is a
    `UserError`, and nothing changes."""
    target = find_version(store, version)
    active = store.active_model_version()
    previous = active.version if active else None
    if previous == version:
        return RolledBack(version, previous, False)
    try:
        replaced = open_learner(settings, store, load=False).rollback(target.version)
    except CheckpointError as exc:
        raise UserError(f"cannot roll back to {version}: {exc}; nothing changed"
                          + (" (rolled-back candidates are never saved)"
                             if target.status == "rolled_back" and not target.path else "")) from exc
    # retention keeps the newest manual rollback target (learning/state.py, `prune_checkpoints`)
    store.set_model_metrics(target.version, {**(find_version(store, target.version).metrics or {}),
                                             "rollback_target": time.time()})
    return RolledBack(version, replaced, True)


@dataclass(frozen=True)
class Rebuilt:
    """What `model rebuild` did (``to_dict``: its ``--json`` document, docs/contracts.md: the
    new version's record, `model_record`, with ``"previous"``)."""

    record: dict[str, Any]  # the new active version's `model_record`
    previous: str | None  # the version active before (None: none was)

    @property
    def version(self) -> str:
        return self.record["version"]

    @property
    def metrics(self) -> dict[str, Any]:
        return self.record["metrics"]

    def to_dict(self) -> dict[str, Any]:
        return {**self.record, "previous": self.previous}


def rebuild(store: ReplayStore, settings: Settings) -> Rebuilt:
    """Re-learn a new active version from the database alone."""
    active = store.active_model_version()
    name = open_learner(settings, store, load=False).rebuild_from_store()
    return Rebuilt(model_record(find_version(store, name)), active.version if active else None)
