"""Online learning on the replay buffer: the live model, its holdout, versions and rollbacks.

`Learner` owns the live `SwitchModel`. It predicts; learns each stored label, or puts it in the
holdout slice (`is_holdout_id`, a hash of the interaction id; corrections are always learned);
replaces a corrected label and takes forgotten interactions back; and every few labels gates
the model as a candidate version against the active one on the holdout: accepted and saved,
or rolled back (the labels are then learned again onto the active version). Its parts: the
gate's scoring and noise test (`gate.py`), writing, loading and rebuilding versions
(`version_registry.py`), other processes' versions and deletions, and forgetting (`sync.py`).
Its live model, versions and window are one value, `LiveModel` (`live.py`), which only the
learner assigns: its parts are handed it and return the new one. The device's loop does not call it directly on the utterance
path: `worker.LearnerWorker` runs it on a worker thread and publishes a `Predictor`
for prediction. How and why: docs/loop.md ("Labels", "Holdout", "Versions and automatic
rollback", "Start-up", "The learner worker: the relay first"). What is learnable, debris and retention are in
`state.py`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from edge_plm.learning import state
from edge_plm.learning.household import Household
from edge_plm.learning.gate import HoldoutScore, Verdict, judge, predict_rows, relearned_metrics, score
from edge_plm.learning.live import LiveModel
from edge_plm.learning.types import (CORRECTION_SOURCES, GOLDEN, ForgetOutcome, LabelOutcome,
                                    LearnerConfig, VersionEvent, Window, is_holdout_id,
                                    keys_of, load_start, start_checkpoint)
from edge_plm.store import ReplayStore
from edge_plm.learning.sync import StoreSync
from edge_plm.switch.model import SwitchModel, SwitchPrediction
from edge_plm.learning.version_registry import VersionRegistry

log = logging.getLogger(__name__)


class Learner:
    """The live model plus its versions in the replay buffer."""

    def __init__(self, store: ReplayStore, cfg: LearnerConfig, checkpoints_dir: str | Path,
                 household: Household, model: SwitchModel | None = None, version: str | None = None,
                 clock: Callable[[], float] = time.time,
                 keys: dict[int, int] | None = None) -> None:
        self.store = store
        self.cfg = cfg
        self.checkpoints_dir = Path(checkpoints_dir)
        self.clock = clock
        self.household = household  # the configured devices (one: a household of one)
        self.registry = VersionRegistry(store, cfg, self.checkpoints_dir, self.fresh_model)
        # a device that has versions does not depend on the starting-model file (it may since
        # have been moved or deleted): `open` loads a version, or the starting model after all
        self.start_deferred = model is None and bool(cfg.start) and self.registry.has_checkpoints()
        if model is None:
            model = SwitchModel.empty(cfg.config, seed=cfg.seed) if self.start_deferred else self.fresh_model()
            keys = {} if keys is None else keys
        held = dict(keys) if keys is not None else keys_of(model)
        self.live = LiveModel(model, version, held, dict(held) if version is not None else {})
        self.events: list[VersionEvent] = []
        self.syncer = StoreSync(store, cfg, clock, self.registry, self.checkpoints_dir)
        if version is not None:
            self.live = replace(self.live, good_preds=predict_rows(model, self.holdout_rows()))

    # --- the live state (`LiveModel`: read here, assigned only by the learner) ------------
    model = property(lambda self: self.live.model, doc="The live model.")
    version = property(lambda self: self.live.version,
                       doc="The active version the live model descends from.")
    keys = property(lambda self: self.live.keys, doc="interaction id -> example key in the model.")
    window = property(lambda self: self.live.window, doc="Labels learned since the last version.")

    # --- construction -------------------------------------------------------------------
    def fresh_model(self) -> SwitchModel:
        """Where learning starts (no version yet, or a rebuild): ``cfg.start`` or empty."""
        if self.cfg.start:
            return load_start(self.cfg)
        return SwitchModel.empty(self.cfg.config, seed=self.cfg.seed)

    @classmethod
    def open(cls, store: ReplayStore, cfg: LearnerConfig, checkpoints_dir: str | Path,
             household: Household, clock: Callable[[], float] = time.time) -> Learner:
        """Start-up: the active checkpoint, else the previous good one (then the catch-up,
        `reconcile`), else a rebuild from the database's labels, else the starting model."""
        learner = cls(store, cfg, checkpoints_dir, household, clock=clock)  # before the catch-up
        found = learner.registry.first_loadable()
        if found is not None:
            learner.set_live(found[1], found[0].version)
            learner.reconcile()
        elif store.count(labeled=True):
            log.warning("no loadable model checkpoint; rebuilding the model from the %d "
                        "labelled interactions in the database", store.count(labeled=True))
            learner.rebuild_from_store()
        else:
            if learner.start_deferred:  # versions exist but none loaded: the starting model
                learner.live = LiveModel(learner.fresh_model())
            log.info("no model version yet: starting from %s",
                     cfg.start or f"an empty {cfg.config} model")
        return learner

    def set_live(self, model: SwitchModel, version: str | None) -> None:
        """`model` (loaded from `version`'s checkpoint) is the live and the active model."""
        self.live = LiveModel.loaded(model, version, self.holdout_rows())

    def version_window(self) -> int:
        """Labels between versions now: ``version_every``, or ``version_growth`` of the
        owner's labels held if more (a frozen starting part adds a fixed cost: docs/loop.md)."""
        return max(self.cfg.version_every,
                   math.ceil(self.cfg.version_growth * self.model.n_owner_examples))

    pending_labels = property(lambda self: self.live.window.count,
                              doc="Labels learned since the last version (in no checkpoint yet).")

    # --- predicting (never polls the store, never writes) ---------------------------------
    def predict(self, text: str) -> SwitchPrediction:
        """The live model's prediction of the command (devices aside), with the priors; the
        loop predicts from the worker's published `Predictor` (`learning/predictor.py`)."""
        return self.model.predict(text, prior_strength=self.cfg.prior_strength,
                                  evidence_prior=self.cfg.evidence_prior)

    # --- learning state: the database's labels reach the model (state.py) --------
    def apply_difference(self) -> state.Difference:
        """Make the live model hold exactly the learnable labels of the database
        (`LiveModel.apply_difference`)."""
        return self.live.apply_difference(self.store, self.cfg.holdout_fraction, self.household.devices)

    def unlearned(self) -> int:
        """Learnable labels of the database the live model lacks (plus examples it holds that
        are no longer learnable): 0 when the invariant holds."""
        return self.live.difference(self.store, self.cfg.holdout_fraction).count

    def reconcile(self) -> VersionEvent | None:
        """Start-up catch-up: re-learn what the loaded checkpoint lacks (labels added or
        changed after it, in interaction order), take out what was deleted, and save the
        result as a version (gated like any candidate; a rollback keeps the labels)."""
        diff = self.apply_difference()
        if not diff.count:
            return None
        log.warning("model version %s lacked %d label(s) of the database (%d new, %d changed, "
                    "%d no longer learnable): learned again", self.version, diff.count,
                    len(diff.missing), len(diff.changed), len(diff.extra))
        return self.new_version(extra_metrics={"catch_up": {
            "missing": len(diff.missing), "changed": len(diff.changed),
            "removed": len(diff.extra)}})

    def checkpoint_pending(self) -> VersionEvent | None:
        """Save the labels learned since the last version (a clean stop): a version now
        instead of a re-learn at the next start."""
        if self.window.count == 0:
            return None
        return self.new_version()

    # --- other processes and forgetting (`StoreSync`) -----------------------------------
    def poll(self) -> bool:
        """Rate-limited checks: another version made active (`sync`, every ``sync_every_s``),
        rows deleted (every ``forget_check_s``). True when the live model changed."""
        before = (id(self.model), self.version)
        sync_due, forget_due = self.syncer.due()
        if sync_due:
            self.sync()
        forgot = self.check_forgotten() if forget_due else None
        return forgot is not None or (id(self.model), self.version) != before

    def sync(self) -> bool:
        """Load the database's active version if it is not the one the live model descends
        from; the labels it lacks (the pending window's among them) are learned again from
        the database (a row deleted meanwhile is skipped). True when it reloaded."""
        loaded = self.syncer.sync(self.live)
        if loaded is None:
            return False
        self.live = loaded
        self.apply_difference()
        return True

    def check_forgotten(self) -> ForgetOutcome | None:
        """If rows were deleted since the last look, take the ones the live model holds out
        of it (and out of the active version, as `on_forget` does)."""
        if not self.syncer.forget_seq_moved():
            return None
        self.sync()  # the forgetting process may have made a version without them
        gone = self.syncer.gone(self.live)
        return self.on_forget(gone) if gone else None

    def forget_interactions(self, ids: list[int], rebuild: bool = False,
                            remove_audio: bool = True) -> ForgetOutcome:
        """`edge-plm forget` (`StoreSync.forget_interactions`)."""
        outcome, self.live = self.syncer.forget_interactions(
            self.live, ids, self.household.devices, rebuild=rebuild, remove_audio=remove_audio)
        return outcome

    def on_forget(self, ids: list[int]) -> ForgetOutcome:
        """The person deleted these interactions (`StoreSync.on_forget`)."""
        outcome, self.live = self.syncer.on_forget(self.live, ids)
        return outcome

    # --- labels -------------------------------------------------------------------------
    def observe(self, text: str) -> None:
        """A transcript that got no label: unlabelled language signal for the model."""
        if text.strip():
            self.model.observe(text)

    def on_label(self, interaction_id: int, text: str, label: str,
                 source: str | None = None, device_labels: dict[str, str] | None = None) -> LabelOutcome:
        """A label for interaction `interaction_id`: holdout it, or learn it (and version).
        If the model already holds a label of this interaction, it is replaced (relabel).
        ``source`` (how the label was obtained): a correction (`CORRECTION_SOURCES`) is always
        learned, whatever the holdout hash says. ``device_labels``: `LiveModel.learn_devices`."""
        if source not in CORRECTION_SOURCES and is_holdout_id(interaction_id, self.cfg.holdout_fraction):
            self.store.set_holdout(interaction_id, True)
            log.info("interaction %d (%s) goes to the holdout slice", interaction_id, label)
            return LabelOutcome(holdout=True, loss=None)
        loss, previous = self.live.learn_label(interaction_id, text, label, self.household.devices, device_labels)
        event = None
        if self.window.count >= self.version_window():
            event = self.new_version()
        return LabelOutcome(holdout=False, loss=loss, event=event,
                            relabelled=previous is not None, previous=previous)

    def on_relabel(self, interaction_id: int, label: str,
                   device_labels: dict[str, str] | None = None) -> LabelOutcome:
        """A corrected label for a stored interaction (its transcript is read from the
        database). The model replaces the label it holds for it (no rebuild needed), or
        learns it if it never did; a holdout interaction only changes what models are judged
        on. Counts towards the next version like any label. ``device_labels`` (several
        devices): its devices' labels, learned again with the command's `label`."""
        row = self.store.get(interaction_id)
        if not row.transcript.strip() or row.error is not None:
            raise ValueError(f"interaction {interaction_id} has no transcript to learn from")
        if row.holdout:  # the model never holds a holdout row: only the judging changes
            return LabelOutcome(holdout=True, loss=None)
        source = "manual" if interaction_id in self.keys else row.label_source
        return self.on_label(interaction_id, row.transcript, label, source=source,
                             device_labels=device_labels)

    # --- versions -----------------------------------------------------------------------
    def holdout_rows(self) -> list[tuple[int, str, str]]:
        """(id, transcript, label) of the holdout slice, in interaction order."""
        return self.store.holdout_rows()

    def new_version(self, extra_metrics: dict[str, Any] | None = None) -> VersionEvent:
        """Gate the live model as a candidate (`gate.judge`): accept (checkpoint, active) or
        roll back (`_roll_back`). First, if another process made another version active,
        that one is loaded (`sync`)."""
        self.sync()
        window = self.window
        verdict = judge(self.model, self.version, self.live.good_preds, self.holdout_rows(), window,
                        self.cfg, lambda ids: self.store.count_label_sources(ids, CORRECTION_SOURCES),
                        extra_metrics)
        self.live = replace(self.live, window=Window())
        if verdict.roll_back:
            event = self._roll_back(verdict, window)
        else:
            parent = self.version
            name = self.save_active(verdict.metrics, verdict.preds)
            log.info("model version %s active (parent %s): %s", name, parent, verdict.reason)
            event = VersionEvent(name, "active", parent, verdict.candidate, verdict.base,
                                 verdict.reason)
        self.events.append(event)
        return event

    def _roll_back(self, verdict: Verdict, window: Window) -> VersionEvent:
        """Record the candidate ``rolled_back``. A rollback rejects the *model*, not the labels:
        the live model goes back to the active version, the labels of the database it lacks
        (the window's among them) are learned onto it again, every labelled statistic is
        re-gathered with the current layers (`regather_all`), and that is saved as the new
        active version (gate ``relearned``). See docs/loop.md for what the gate protects against."""
        cand, base, metrics = verdict.candidate, verdict.base, verdict.metrics
        parent = self.version
        reason = (f"holdout balanced accuracy {cand.balanced_accuracy:.3f} < active "
                  f"{parent} {base.balanced_accuracy:.3f} (n={cand.n})")
        metrics["gate"] = "rolled back"
        name = self.registry.claim(parent=parent, path=None, status="rolled_back",
                                   metrics=metrics, n_train=self.model.n_examples)
        # the candidate goes before the active version is loaded: two models at once
        # raised the resident high-water mark by a model's size, for good
        self.live = replace(self.live, model=self.fresh_model(), keys={})
        model, keys = self.registry.reload_good(parent)
        self.live = replace(self.live, model=model, keys=keys, window=Window())
        diff = self.apply_difference()
        self.model.regather_all()  # exact sums: re-solving the explicit layer is enough
        relearned = self.save_active(relearned_metrics(name, score(self.model, self.holdout_rows()), verdict, diff, window))
        log.warning("model candidate %s rolled back: %s; its labels were learned again "
                    "onto %s: %s is active", name, reason, parent, relearned)
        return VersionEvent(name, "rolled_back", parent, cand, base,
                            f"{reason}; labels re-learned onto {parent} as {relearned}")

    def save_active(self, metrics: dict[str, Any], preds: dict[int, str] | None = None) -> str:
        """The live model as a new active version; returns its name. ``preds``: its holdout
        predictions when already made."""
        name = self.registry.write(self.model, self.keys, metrics, parent=self.version,
                                   status="active")
        if preds is None:
            preds = predict_rows(self.model, self.holdout_rows())
        self.live = self.live.saved(name, preds)
        return name

    def adopt(self, model: SwitchModel, metrics: dict[str, Any], keys: dict[int, int] | None = None) -> str:
        """A model made elsewhere (`edge-plm model import`) becomes the live model and a new
        active version (no holdout gate here: the caller judged it). `keys`: the rows of this
        database whose labels it already holds (`state.match_examples`); the others
        are learned on the next start. Returns the version name."""
        self.live = replace(self.live, model=model, keys=dict(keys or {}), window=Window())
        return self.save_active(metrics)

    def rollback(self, version: str) -> str | None:
        """Manual rollback: make saved `version` active and the live model; return the
        version it replaced (None: none was active)."""
        model, replaced = self.registry.activate(version)
        self.set_live(model, version)
        log.warning("manual rollback: model version %s is active (was %s)", version, replaced or "none")
        return replaced

    def rebuild_from_store(self) -> str:
        """Re-learn a fresh model from the database in time order; save it as the active version.

        Every learnable label is learned (labelled, not holdout, with a transcript and no
        error), unlabelled transcripts are observed. Labels of windows whose candidate was
        rolled back are learned too: a rollback rejects a model, never the person's labels
        (``skipped_rolled_back`` stays in the metrics, always 0).
        """
        model, keys, metrics = self.registry.rebuild(self.household.devices)
        self.live = replace(self.live, model=model, keys=keys, window=Window())
        name = self.save_active(metrics)
        log.info("model rebuilt from the database as %s: %d labels learned", name,
                 metrics["labels_in_window"])
        return name


__all__ = ["CORRECTION_SOURCES", "GOLDEN", "ForgetOutcome", "HoldoutScore", "LabelOutcome",
           "Learner", "LearnerConfig", "VersionEvent", "is_holdout_id", "load_start",
           "start_checkpoint"]
