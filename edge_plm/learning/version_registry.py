"""The learner's model versions: naming and writing checkpoints (row first, then the file, then
its status; retention prunes old ones), loading them (at start-up: the first that loads), the
checks of a manual rollback, and rebuilding a model from the database. One `VersionRegistry`
serves one `Learner`: it is given the store, the checkpoints directory and how a fresh model
starts, and is handed the model, keys and parent of each version it writes; it never holds
or changes the learner's live state (docs/loop.md, "Versions and automatic rollback")."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from edge_plm.learning import gate, trust
from edge_plm.learning import forgetting
from edge_plm.learning import state
from edge_plm.learning.household import several
from edge_plm.learning.types import LearnerConfig, keys_of
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.store import ModelVersion, ReplayStore
from edge_plm.switch.addressing import DeviceName
from edge_plm.switch.model import LABEL_INDEX, SwitchModel

log = logging.getLogger("edge_plm.learning.learner")


class VersionRegistry:
    """Write, load and rebuild versions in `store` and `checkpoints_dir`; ``fresh()``: the model
    learning starts from (``cfg.start`` or empty)."""

    def __init__(self, store: ReplayStore, cfg: LearnerConfig, checkpoints_dir: Path,
                 fresh: Callable[[], SwitchModel]) -> None:
        self.store = store
        self.cfg = cfg
        self.checkpoints_dir = checkpoints_dir
        self.fresh = fresh

    # --- start-up -----------------------------------------------------------------------
    def has_checkpoints(self) -> bool:
        """Some saved version has a checkpoint file (the starting model is then not loaded
        before `first_loadable`: a device that has versions does not depend on it)."""
        return any(v.path for v in self.store.model_versions())

    def first_loadable(self) -> tuple[ModelVersion, SwitchModel] | None:
        """Start-up: after cleaning debris and finishing what a killed `forget` owes, the
        active checkpoint, else the newest earlier one that was active once (retired), loaded;
        one that does not load is marked rolled back (with why), a fallback is made active.
        None: no version loads."""
        state.ensure_dir(self.checkpoints_dir)
        state.clean_debris(self.store, self.checkpoints_dir)
        forgetting.complete_owed(self.store)  # what a killed `forget` still owes, first
        versions = self.store.model_versions()
        active = self.store.active_model_version()
        # newest first: the active one, then earlier versions that were active once (retired)
        candidates = ([active] if active else []) + [
            v for v in reversed(versions)
            if v.status == "retired" and v.path and not state.is_pruned(v)]
        for v in candidates:
            try:
                model = self.load(v)
            except CheckpointError as exc:
                log.error("model version %s cannot be loaded (%s); marking it rolled back and "
                          "trying the previous good version", v.version, exc)
                self.store.set_model_status(v.version, "rolled_back")
                self.store.set_model_metrics(v.version, {**(v.metrics or {}), "damaged": str(exc)})
                continue
            if v.status != "active":
                self.store.set_model_status(v.version, "active")
                log.warning("fell back to model version %s (%d labels learned); labels after "
                            "it are in the database: `rebuild_from_store` re-learns them",
                            v.version, v.n_train)
            log.info("model version %s loaded (%d labels learned)", v.version, v.n_train)
            return v, model
        return None

    # --- naming and writing -------------------------------------------------------------
    def next_name(self) -> str:
        numbers = [int(v.version[1:]) for v in self.store.model_versions()
                   if v.version[:1] == "v" and v.version[1:].isdigit()]
        return f"v{max(numbers, default=0) + 1:04d}"

    def claim(self, **row: Any) -> str:
        """Insert a model_versions row under the next free name and return the name. The row
        goes first, so two processes never pick the same name (the database refuses the
        second insert; it tries the next name). With a checkpoint, the row is a candidate
        with its future path until `write` has written the file."""
        for _ in range(100):
            name = self.next_name()
            path = str(self.checkpoints_dir / f"{name}.npz") if row.get("path") else None
            try:
                self.store.add_model_version(name, **{**row, "path": path})
                return name
            except ValueError:
                if not any(v.version == name for v in self.store.model_versions()):
                    raise
                log.info("model version name %s was taken by another process; next", name)
        raise RuntimeError("could not claim a model version name")

    def write(self, model: SwitchModel, keys: dict[int, int], metrics: dict[str, Any],
              parent: str | None, status: str = "active",
              commit: Callable[[str], Any] | None = None) -> str:
        """Claim a name (row first, its parent `parent`), write the checkpoint, then make the row
        `status` (or call ``commit(name)``, which must make it active: `forget_interactions`'
        one transaction); then retention prunes old checkpoints. The checkpoints directory's
        lock is held shared meanwhile, so no other process takes the candidate row or the
        temp file for debris."""
        state.ensure_dir(self.checkpoints_dir)
        pairs = sorted([i, k] for i, k in keys.items())
        with state.checkpoint_lock(self.checkpoints_dir):
            name = self.claim(parent=parent, path=True, status="candidate",
                              metrics=metrics, n_train=model.n_examples)
            path = model.save(self.checkpoints_dir / f"{name}.npz",
                              extra={"version": name, "parent": parent, "interaction_keys": pairs})
            self.store.set_checkpoint_record(name, **trust.record_of(path, model))
            model.meta = {**model.meta, "interaction_keys": pairs}
            if commit is not None:
                commit(name)
                status = "active"
            elif status != "candidate":
                self.store.set_model_status(name, status)
        if status == "active":
            state.prune_checkpoints(self.store, self.cfg.keep_checkpoints,
                                    self.cfg.checkpoints_max_mb * 1e6)
        return name

    @staticmethod
    def load(v: ModelVersion) -> SwitchModel:
        if not v.path:
            raise CheckpointError(f"model version {v.version} has no checkpoint file")
        if forgetting.forget_removed(v):
            raise CheckpointError(f"the checkpoint of model version {v.version} was deleted by "
                                  "`forget` (it could not be rewritten without the forgotten "
                                  "interactions)")
        if state.is_pruned(v):
            raise CheckpointError(f"the checkpoint of model version {v.version} was pruned "
                                  "(retention: model.keep_checkpoints)")
        trust.check_file(v)  # the file this version wrote, not another one copied over it
        model = SwitchModel.load(v.path)
        trust.check_model(v, model)
        return model

    def reload_good(self, version: str | None) -> tuple[SwitchModel, dict[int, int]]:
        """Active `version` again (and its key map), from its checkpoint (a fresh model if
        that fails or it is no longer the active one: the database's labels are then learned
        again)."""
        active = self.store.active_model_version()
        if active is not None and active.path and active.version == version:
            try:
                model = SwitchModel.load(active.path)
                return model, keys_of(model)
            except CheckpointError as exc:
                log.error("active checkpoint %s unreadable (%s); starting from an empty "
                          "model (the database's labels are learned again)", active.path, exc)
        return self.fresh(), {}

    # --- a manual rollback --------------------------------------------------------------
    def activate(self, version: str) -> tuple[SwitchModel, str | None]:
        """Manual rollback: saved `version` loaded and made active; (its model, the version it
        replaced or None). Nothing changes when it cannot be (LookupError, CheckpointError)."""
        matches = [v for v in self.store.model_versions() if v.version == version]
        if not matches:
            raise LookupError(f"no model version {version!r}")
        if version in self.store.owed_rewrites():
            raise CheckpointError(f"the checkpoint of model version {version} still holds "
                                  "interactions a `forget` deleted (its rewrite is owed; it "
                                  "is finished at the next start of the service or of a "
                                  "model command)")
        model = self.load(matches[0])  # CheckpointError propagates: nothing changed
        return model, self.store.activate_model_version(version)

    # --- rebuilding ---------------------------------------------------------------------
    def rebuild(self, devices: Sequence[DeviceName]) -> tuple[SwitchModel, dict[int, int], dict[str, Any]]:
        """`rebuilt_model` from every row, with the metrics its version is saved with (its
        holdout score; a rollback rejects a model, never the person's labels, so
        ``skipped_rolled_back`` is always 0)."""
        model, keys, learned = self.rebuilt_model(devices)
        cand = gate.score(model, self.store.holdout_rows())
        return model, keys, {"holdout_n": cand.n, "balanced_accuracy": cand.balanced_accuracy,
                             "gate": "rebuild", "labels_in_window": learned,
                             "skipped_rolled_back": 0, "interactions": [None, None]}

    def rebuilt_model(self, devices: Sequence[DeviceName], exclude: set[int] = frozenset()
                      ) -> tuple[SwitchModel, dict[int, int], int]:
        """A fresh model from the database in interaction order: learnable labels learned
        (`state.should_learn`; several `devices`: each device's stored label),
        unlabelled transcripts observed, rows in `exclude` left out. Returns (model,
        interaction keys, labels learned)."""
        model = self.fresh()
        keys: dict[int, int] = {}
        learned = 0
        rows = list(self.store.interactions(oldest_first=True))
        by_device = relearn_devices(self.store, devices, [r.id for r in rows if r.label is not None])
        for row in rows:
            if row.id in exclude or row.error or not row.transcript.strip():
                continue
            if row.label is None:
                model.observe(row.transcript)
                continue
            lrow = state.LabelRow(row.id, row.transcript, row.label, row.label_source, row.holdout)
            if not state.should_learn(lrow, self.cfg.holdout_fraction, False):
                if not row.holdout:
                    self.store.set_holdout(row.id, True)
                continue
            keys[row.id] = len(model.examples)
            if row.id in by_device:  # several devices: what each device's switch said
                model.learn_devices(row.transcript, by_device[row.id], list(devices))
                if model.examples[-1][1] != LABEL_INDEX[row.label]:  # the database's label wins
                    model.relabel(keys[row.id], row.label)
            else:
                model.learn(row.transcript, row.label)
            learned += 1
        return model, keys, learned


def relearn_devices(store: ReplayStore, devices: Sequence[DeviceName],
                    ids: list[int]) -> dict[int, dict[str, str]]:
    """The stored per-device labels of `ids` for the configured `devices` (several devices
    only; a device no longer configured is left out): what a rebuild re-learns with
    ``SwitchModel.learn_devices``."""
    if not several(devices) or not ids:
        return {}
    names = {d.name for d in devices}
    out = {}
    for iid, labels in store.device_labels(ids).items():
        kept = {d: v for d, v in labels.items() if d in names}
        if kept:
            out[iid] = kept
    return out


__all__ = ["VersionRegistry", "relearn_devices"]
