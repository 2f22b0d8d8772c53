"""Changes to the model versions a person asks for (`edge-plm model rollback|rebuild`), and
the learner those commands and the label corrections work with."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from edge_plm.commands import inspection as q
from edge_plm.learning import forgetting
from edge_plm.learning.learner import Learner, LearnerConfig
from edge_plm.plm.checkpoint import CheckpointError


def learner_setup(store, settings, db_path: Path) -> tuple[LearnerConfig, Path]:
    """(learner configuration, checkpoint dir: the database's own folder,
    `ReplayStore.checkpoints_home`). What an interrupted `forget` still owes is finished
    first (`forgetting.complete_owed`)."""
    cfg = LearnerConfig.from_settings(settings.model)
    ckdir = q.checkpoints_dir(store, db_path)
    forgetting.complete_owed(store)
    return cfg, ckdir


def rollback(store, settings, db_path: Path, version: str) -> dict[str, Any]:
    """Make the saved `version` active: ``{"version", "previous", "changed"}``. A version
    whose checkpoint does not load is a `q.UserError`, and nothing changes."""
    target = q.find_version(store, version)
    active = store.active_model_version()
    previous = active.version if active else None
    if previous == version:
        return {"version": version, "previous": previous, "changed": False}
    try:
        replaced = Learner(store, *learner_setup(store, settings, db_path)).rollback(target.version)
    except CheckpointError as exc:
        raise q.UserError(f"cannot roll back to {version}: {exc}; nothing changed"
                          + (" (rolled-back candidates are never saved)"
                             if target.status == "rolled_back" and not target.path else "")) from exc
    # retention keeps the newest manual rollback target (learning_state.prune_checkpoints)
    store.set_model_metrics(target.version, {**(q.find_version(store, target.version).metrics or {}),
                                             "rollback_target": time.time()})
    return {"version": version, "previous": replaced, "changed": True}


def rebuild(store, settings, db_path: Path) -> dict[str, Any]:
    """Re-learn a new active version from the database alone; its record (`q.model_record`)
    with ``"previous"``, the version active before."""
    active = store.active_model_version()
    name = Learner(store, *learner_setup(store, settings, db_path)).rebuild_from_store()
    d = q.model_record(q.find_version(store, name))
    d["previous"] = active.version if active else None
    return d
