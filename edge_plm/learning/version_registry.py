"""The learner's model versions: naming and writing checkpoints (row first, then the file, then
its status; retention prunes old ones), loading them, a candidate's automatic rollback and a
manual one, and rebuilding a model from the database. One `VersionRegistry` belongs to one
`Learner` and works on its live state (docs/loop.md, "Versions and automatic rollback")."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from edge_plm.learning import trust
from edge_plm.learning import forgetting
from edge_plm.learning import state
from edge_plm.learning.types import VersionEvent, Window, keys_of
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.store import ModelVersion
from edge_plm.switch.model import LABEL_INDEX, SwitchModel

if TYPE_CHECKING:
    from edge_plm.learning.gate import HoldoutScore

log = logging.getLogger("edge_plm.learning.learner")


class VersionRegistry:
    """Write, load, roll back and rebuild versions for `learner` (its store and directory)."""

    def __init__(self, learner: Any) -> None:
        self.learner = learner

    # --- start-up -----------------------------------------------------------------------
    def initial_model(self) -> SwitchModel:
        """The model before `open` loads a version. When the database has saved versions the
        starting model is not loaded (`open` loads a version; a rebuild loads the starting
        model itself): a device that has versions does not depend on the starting-model file
        (it may since have been moved or deleted). `open` loads it if no version loads."""
        lr = self.learner
        if lr.cfg.start and any(v.path for v in lr.store.model_versions()):
            lr.start_deferred = True
            return SwitchModel.empty(lr.cfg.config, seed=lr.cfg.seed)
        return lr.fresh_model()

    def start_up(self) -> None:
        """The active checkpoint, else the previous good one, else a rebuild (labels in the
        database) or the starting model; then the catch-up (`Learner.reconcile`)."""
        lr = self.learner
        state.ensure_dir(lr.checkpoints_dir)
        state.clean_debris(lr.store, lr.checkpoints_dir)
        forgetting.complete_owed(lr.store)  # what a killed `forget` still owes, first
        versions = lr.store.model_versions()
        active = lr.store.active_model_version()
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
                lr.store.set_model_status(v.version, "rolled_back")
                lr.store.set_model_metrics(v.version, {**(v.metrics or {}), "damaged": str(exc)})
                continue
            if v.status != "active":
                lr.store.set_model_status(v.version, "active")
                log.warning("fell back to model version %s (%d labels learned); labels after "
                            "it are in the database: `rebuild_from_store` re-learns them",
                            v.version, v.n_train)
            lr.set_live(model, v.version)
            log.info("model version %s loaded (%d labels learned)", v.version, v.n_train)
            lr.reconcile()
            return
        if lr.store.count(labeled=True):
            log.warning("no loadable model checkpoint; rebuilding the model from the %d "
                        "labelled interactions in the database", lr.store.count(labeled=True))
            lr.rebuild_from_store()
        else:
            if lr.start_deferred:  # versions exist but none loaded: the starting model
                lr.model = lr.fresh_model()
            log.info("no model version yet: starting from %s",
                     lr.cfg.start or f"an empty {lr.cfg.config} model")

    # --- naming and writing -------------------------------------------------------------
    def next_name(self) -> str:
        numbers = [int(v.version[1:]) for v in self.learner.store.model_versions()
                   if v.version[:1] == "v" and v.version[1:].isdigit()]
        return f"v{max(numbers, default=0) + 1:04d}"

    def claim(self, **row: Any) -> str:
        """Insert a model_versions row under the next free name and return the name. The row
        goes first, so two processes never pick the same name (the database refuses the
        second insert; it tries the next name). With a checkpoint, the row is a candidate
        with its future path until `write` has written the file."""
        lr = self.learner
        for _ in range(100):
            name = self.next_name()
            path = str(lr.checkpoints_dir / f"{name}.npz") if row.get("path") else None
            try:
                lr.store.add_model_version(name, **{**row, "path": path})
                return name
            except ValueError:
                if not any(v.version == name for v in lr.store.model_versions()):
                    raise
                log.info("model version name %s was taken by another process; next", name)
        raise RuntimeError("could not claim a model version name")

    def write(self, model: SwitchModel, keys: dict[int, int], metrics: dict[str, Any],
              status: str = "active", commit: Callable[[str], Any] | None = None) -> str:
        """Claim a name (row first), write the checkpoint, then make the row `status` (or call
        ``commit(name)``, which must make it active: `forget_interactions`' one transaction);
        then retention prunes old checkpoints. The checkpoints directory's lock is held shared
        meanwhile, so no other process takes the candidate row or the temp file for debris."""
        lr = self.learner
        state.ensure_dir(lr.checkpoints_dir)
        pairs = sorted([i, k] for i, k in keys.items())
        with state.checkpoint_lock(lr.checkpoints_dir):
            name = self.claim(parent=lr.version, path=True, status="candidate",
                              metrics=metrics, n_train=model.n_examples)
            path = model.save(lr.checkpoints_dir / f"{name}.npz",
                              extra={"version": name, "parent": lr.version, "interaction_keys": pairs})
            lr.store.set_checkpoint_record(name, **trust.record_of(path, model))
            model.meta = {**model.meta, "interaction_keys": pairs}
            if commit is not None:
                commit(name)
                status = "active"
            elif status != "candidate":
                lr.store.set_model_status(name, status)
        if status == "active":
            state.prune_checkpoints(lr.store, lr.cfg.keep_checkpoints,
                                    lr.cfg.checkpoints_max_mb * 1e6)
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

    def reload_good(self) -> tuple[SwitchModel, dict[int, int]]:
        """The active version again (and its key map), from its checkpoint (a fresh model if
        that fails: the database's labels are then learned again)."""
        lr = self.learner
        active = lr.store.active_model_version()
        if active is not None and active.path and active.version == lr.version:
            try:
                model = SwitchModel.load(active.path)
                return model, keys_of(model)
            except CheckpointError as exc:
                log.error("active checkpoint %s unreadable (%s); starting from an empty "
                          "model (the database's labels are learned again)", active.path, exc)
        return lr.fresh_model(), {}

    # --- rollbacks ----------------------------------------------------------------------
    def roll_back_candidate(self, metrics: dict[str, Any], cand: HoldoutScore,
                            base: HoldoutScore, window: Window) -> VersionEvent:
        """Record the candidate ``rolled_back``, reload the active version and learn the
        labels onto it again (a new active version)."""
        lr = self.learner
        reason = (f"holdout balanced accuracy {cand.balanced_accuracy:.3f} < active "
                  f"{lr.version} {base.balanced_accuracy:.3f} (n={cand.n})")
        metrics["gate"] = "rolled back"
        parent = lr.version
        name = self.claim(parent=lr.version, path=None, status="rolled_back",
                          metrics=metrics, n_train=lr.model.n_examples)
        # the candidate goes before the active version is loaded: two models at once
        # raised the resident high-water mark by a model's size, for good
        lr.model, lr.keys = lr.fresh_model(), {}
        lr.model, lr.keys = self.reload_good()
        lr.window = Window()
        relearned = self._relearn_after_rollback(name, cand, base, window)
        log.warning("model candidate %s rolled back: %s; its labels were learned again "
                    "onto %s: %s is active", name, reason, parent, relearned)
        return VersionEvent(name, "rolled_back", parent, cand, base,
                            f"{reason}; labels re-learned onto {parent} as {relearned}")

    def _relearn_after_rollback(self, rolled: str, cand: HoldoutScore, base: HoldoutScore,
                                window: Window) -> str:
        """After a rollback: the labels back onto the last good model (see `new_version`)."""
        lr = self.learner
        diff = lr.apply_difference()
        lr.model.regather_all()  # exact sums: re-solving the explicit layer is enough
        after = lr.score(lr.model)
        metrics = {"gate": "relearned", "rolled_back_candidate": rolled,
                   "holdout_n": after.n, "balanced_accuracy": after.balanced_accuracy,
                   "parent_balanced_accuracy": base.balanced_accuracy,
                   "candidate_balanced_accuracy": cand.balanced_accuracy,
                   "labels_in_window": len(diff.missing) + len(diff.changed),
                   "interactions": [window.first_id, window.last_id],
                   "holdout_classes": after.per_class}
        return lr.save_active(metrics)

    def rollback(self, version: str) -> str | None:
        """Manual rollback: make saved `version` active and the live model; return the
        version it replaced (None: none was active)."""
        lr = self.learner
        matches = [v for v in lr.store.model_versions() if v.version == version]
        if not matches:
            raise LookupError(f"no model version {version!r}")
        if version in lr.store.owed_rewrites():
            raise CheckpointError(f"the checkpoint of model version {version} still holds "
                                  "interactions a `forget` deleted (its rewrite is owed; it "
                                  "is finished at the next start of the service or of a "
                                  "model command)")
        model = self.load(matches[0])  # CheckpointError propagates: nothing changed
        replaced = lr.store.activate_model_version(version)
        lr.set_live(model, version)
        log.warning("manual rollback: model version %s is active (was %s)", version, replaced or "none")
        return replaced

    # --- rebuilding ---------------------------------------------------------------------
    def rebuilt_model(self, exclude: set[int] = frozenset()
                      ) -> tuple[SwitchModel, dict[int, int], int]:
        """A fresh model from the database in interaction order: learnable labels learned
        (`learning_state.should_learn`), unlabelled transcripts observed, rows in `exclude`
        left out. Returns (model, interaction keys, labels learned)."""
        lr = self.learner
        model = lr.fresh_model()
        keys: dict[int, int] = {}
        learned = 0
        rows = list(lr.store.interactions(oldest_first=True))
        by_device = relearn_devices(lr, [r.id for r in rows if r.label is not None])
        for row in rows:
            if row.id in exclude or row.error or not row.transcript.strip():
                continue
            if row.label is None:
                model.observe(row.transcript)
                continue
            lrow = state.LabelRow(row.id, row.transcript, row.label, row.label_source, row.holdout)
            if not state.should_learn(lrow, lr.cfg.holdout_fraction, False):
                if not row.holdout:
                    lr.store.set_holdout(row.id, True)
                continue
            keys[row.id] = len(model.examples)
            if row.id in by_device:  # several devices: what each device's switch said
                model.learn_devices(row.transcript, by_device[row.id], lr.devices)
                if model.examples[-1][1] != LABEL_INDEX[row.label]:  # the database's label wins
                    model.relabel(keys[row.id], row.label)
            else:
                model.learn(row.transcript, row.label)
            learned += 1
        return model, keys, learned

    def rebuild_from_store(self) -> str:
        """Re-learn a fresh model from the database in time order; save it as the active version.

        Every learnable label is learned (labelled, not holdout, with a transcript and no
        error), unlabelled transcripts are observed. Labels of windows whose candidate was
        rolled back are learned too: a rollback rejects a model, never the person's labels
        (``skipped_rolled_back`` stays in the metrics, always 0).
        """
        lr = self.learner
        model, keys, learned = self.rebuilt_model()
        lr.model, lr.keys = model, keys
        lr.window = Window()
        cand = lr.score(model)
        metrics = {"holdout_n": cand.n, "balanced_accuracy": cand.balanced_accuracy,
                   "gate": "rebuild", "labels_in_window": learned,
                   "skipped_rolled_back": 0, "interactions": [None, None]}
        name = lr.save_active(metrics)
        log.info("model rebuilt from the database as %s: %d labels learned", name, learned)
        return name


def relearn_devices(lr, ids: list[int]) -> dict[int, dict[str, str]]:
    """The stored per-device labels of `ids` for the learner's configured devices (several
    devices only; a device no longer configured is left out): what a rebuild re-learns with
    ``SwitchModel.learn_devices``."""
    if len(lr.devices) < 2 or not ids:
        return {}
    names = {d.name for d in lr.devices}
    out = {}
    for iid, labels in lr.store.device_labels(ids).items():
        kept = {d: v for d, v in labels.items() if d in names}
        if kept:
            out[iid] = kept
    return out


__all__ = ["VersionRegistry", "relearn_devices"]
