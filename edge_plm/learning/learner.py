"""Online learning on the replay buffer: the live model, its holdout, versions and rollbacks.

`Learner` owns the live `SwitchModel`. It predicts; learns each stored label, or puts it in the
holdout slice (`is_holdout_id`, a hash of the interaction id; corrections are always learned);
replaces a corrected label and takes forgotten interactions back; and every few labels gates
the model as a candidate version against the active one on the holdout: accepted and saved,
or rolled back (the labels are then learned again onto the active version). Its parts: the
gate's scoring and noise test (`gate.py`), writing, loading, rolling back and
rebuilding versions (`version_registry.py`), other processes' versions and deletions, and
forgetting (`sync.py`). The device's loop does not call it directly on the utterance
path: `learner_worker.LearnerWorker` runs it on a worker thread and publishes model snapshots
for prediction. How and why: docs/loop.md ("Labels", "Holdout", "Versions and automatic
rollback", "Start-up", "The learner worker: the relay first"). What is learnable, debris and retention are in
`state.py`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from edge_plm.learning import devices as device_learning
from edge_plm.learning import state
from edge_plm.learning.devices import device_names
from edge_plm.learning.gate import (HoldoutScore, accept_reason, candidate_metrics, noise_test,
                                   predict_rows, score_preds, unjudgeable)
from edge_plm.learning.types import (CORRECTION_SOURCES, GOLDEN, ForgetOutcome, LabelOutcome,
                                    LearnerConfig, VersionEvent, Window, is_holdout_id,
                                    keys_of, load_start, start_checkpoint)
from edge_plm.store import ReplayStore
from edge_plm.config.settings import DEFAULT_DEVICE
from edge_plm.learning.sync import StoreSync
from edge_plm.switch.addressing import DeviceName
from edge_plm.switch.model import SwitchModel, SwitchPrediction
from edge_plm.switch.tokenizer import ACTIONS
from edge_plm.learning.version_registry import VersionRegistry

log = logging.getLogger(__name__)


class Learner:
    """The live model plus its versions in the replay buffer."""

    def __init__(self, store: ReplayStore, cfg: LearnerConfig, checkpoints_dir: str | Path,
                 model: SwitchModel | None = None, version: str | None = None,
                 clock: Callable[[], float] = time.time,
                 keys: dict[int, int] | None = None, devices: list[DeviceName] | None = None) -> None:
        self.store = store
        self.cfg = cfg
        self.checkpoints_dir = Path(checkpoints_dir)
        self.start_deferred = False
        self.registry = VersionRegistry(self)  # writes, loads, rolls back, rebuilds versions
        self.model = model if model is not None else self.registry.initial_model()
        self.version = version  # the active version the live model descends from
        # interaction id -> example key in the live model (what it learned, to correct/forget)
        self.keys: dict[int, int] = dict(keys) if keys is not None else (
            keys_of(model) if model is not None else {})
        # the active version is not kept in memory (a copy per version cost more than the
        # loop itself on a long soak): its key map and its predictions on the holdout rows
        # that existed when it was made are enough to judge the next candidate
        self.good_keys: dict[int, int] = dict(self.keys) if version is not None else {}
        self.clock = clock
        self.window = Window()
        self.events: list[VersionEvent] = []
        self.syncer = StoreSync(self)  # other processes' versions and deletions
        self.good_preds: dict[int, str] = {}  # the active version's holdout predictions
        self.devices = list(devices or [DeviceName(DEFAULT_DEVICE)])  # [[devices]]: devices.py
        if version is not None:
            self.good_preds = predict_rows(self.model, self.holdout_rows())

    # --- construction -------------------------------------------------------------------
    def fresh_model(self) -> SwitchModel:
        """Where learning starts (no version yet, or a rebuild): ``cfg.start`` or empty."""
        if self.cfg.start:
            return load_start(self.cfg)
        return SwitchModel.empty(self.cfg.config, seed=self.cfg.seed)

    @classmethod
    def open(cls, store: ReplayStore, cfg: LearnerConfig, checkpoints_dir: str | Path,
             clock: Callable[[], float] = time.time, devices: list[DeviceName] | None = None) -> Learner:
        """Start-up: the active checkpoint, else the previous good one, else a rebuild/empty."""
        learner = cls(store, cfg, checkpoints_dir, clock=clock, devices=devices)  # before the catch-up
        learner.registry.start_up()
        return learner

    def set_live(self, model: SwitchModel, version: str | None) -> None:
        """`model` (loaded from `version`'s checkpoint) is the live and the active model."""
        self.model, self.version = model, version
        self.keys = keys_of(model)
        self.good_keys = dict(self.keys)
        self.good_preds = predict_rows(model, self.holdout_rows())
        self.window = Window()

    def version_window(self) -> int:
        """Labels between versions now: ``version_every``, or ``version_growth`` of the
        labels the model holds when that is more."""
        return max(self.cfg.version_every,
                   math.ceil(self.cfg.version_growth * self.model.n_examples))

    @property
    def pending_labels(self) -> int:
        """Labels learned since the last version boundary (not in any checkpoint yet)."""
        return self.window.count

    # --- the loop's calls ---------------------------------------------------------------
    def predict(self, text: str) -> SwitchPrediction:
        """The live model's prediction for a transcript (after a cheap check, at most every
        ``sync_every_s`` seconds, that no other process made another version active)."""
        self.poll()
        return self.model.predict(text, prior_strength=self.cfg.prior_strength,
                                  evidence_prior=self.cfg.evidence_prior)

    def sync(self) -> bool:
        """Load the active version another process made (`StoreSync.sync`); True if reloaded."""
        return self.syncer.sync()

    # --- learning state: the database's labels reach the model (state.py) --------
    def apply_difference(self) -> state.Difference:
        """Make the live model hold exactly the learnable labels of the database: examples of
        rows no longer learnable (deleted, moved to the holdout) are taken out, changed
        labels replaced, missing ones learned in interaction order (they count towards the
        window like any label). Rows the holdout hash claims are marked holdout."""
        held = state.model_labels(self.model, self.keys)
        diff = state.difference(self.store, held, self.cfg.holdout_fraction)
        if diff.extra:
            self._forget_live(diff.extra)
        for row in sorted(diff.missing + diff.changed, key=lambda r: r.id):
            self._learn(row.id, row.transcript, row.label, device_learning.stored_labels(self, row.id))
        for row in state.labelled_rows(self.store):
            if (row.id not in self.keys and not row.holdout
                    and not state.should_learn(row, self.cfg.holdout_fraction, False)):
                self.store.set_holdout(row.id, True)
        return diff

    def unlearned(self) -> int:
        """Learnable labels of the database the live model lacks (plus examples it holds that
        are no longer learnable): 0 when the invariant holds."""
        held = state.model_labels(self.model, self.keys)
        return state.difference(self.store, held, self.cfg.holdout_fraction).count

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

    def poll(self) -> bool:
        """Rate-limited checks for other processes' versions and deletions
        (`store_sync.StoreSync.poll`); True when the live model changed."""
        return self.syncer.poll()

    def forget_interactions(self, ids: list[int], rebuild: bool = False,
                            remove_audio: bool = True) -> ForgetOutcome:
        """`edge-plm forget` (`store_sync.StoreSync.forget_interactions`)."""
        return self.syncer.forget_interactions(ids, rebuild=rebuild, remove_audio=remove_audio)

    def _forget_live(self, ids: list[int]) -> list[int]:
        return self.syncer.forget_live(ids)

    def observe(self, text: str) -> None:
        """A transcript that got no label: unlabelled language signal for the model."""
        if text.strip():
            self.model.observe(text)

    def on_label(self, interaction_id: int, text: str, label: str,
                 source: str | None = None, device_labels: dict[str, str] | None = None) -> LabelOutcome:
        """A label for interaction `interaction_id`: holdout it, or learn it (and version).
        If the model already holds a label of this interaction, it is replaced (relabel).
        ``source`` (how the label was obtained): a correction (`CORRECTION_SOURCES`) is always
        learned, whatever the holdout hash says. ``device_labels``: `device_learning.learn`."""
        if source not in CORRECTION_SOURCES and is_holdout_id(interaction_id, self.cfg.holdout_fraction):
            self.store.set_holdout(interaction_id, True)
            log.info("interaction %d (%s) goes to the holdout slice", interaction_id, label)
            return LabelOutcome(holdout=True, loss=None)
        loss, previous = self._learn(interaction_id, text, label, device_labels)
        event = None
        if self.window.count >= self.version_window():
            event = self.new_version()
        return LabelOutcome(holdout=False, loss=loss, event=event,
                            relabelled=previous is not None, previous=previous)

    def on_relabel(self, interaction_id: int, label: str) -> LabelOutcome:
        """A corrected label for a stored interaction (its transcript is read from the
        database). The model replaces the label it holds for it (no rebuild needed), or
        learns it if it never did; a holdout interaction only changes what models are judged
        on. Counts towards the next version like any label."""
        row = self.store.get(interaction_id)
        if not row.transcript.strip() or row.error is not None:
            raise ValueError(f"interaction {interaction_id} has no transcript to learn from")
        if row.holdout:  # the model never holds a holdout row: only the judging changes
            return LabelOutcome(holdout=True, loss=None)
        if interaction_id in self.keys:  # the model holds it: replace, whatever the hash says
            return self.on_label(interaction_id, row.transcript, label, source="manual")
        return self.on_label(interaction_id, row.transcript, label, source=row.label_source)

    def _learn(self, interaction_id: int, text: str, label: str, device_labels: dict | None = None) -> tuple[float | None, str | None]:
        """Learn, or relabel what the model holds; (loss or None, previous label or None)."""
        if (known := device_learning.known_labels(self, device_labels)) is not None:  # several devices
            return device_learning.learn(self, interaction_id, text, label, known)
        key = self.keys.get(interaction_id)
        if key is not None and key not in self.model.removed and key < len(self.model.examples):
            previous = ACTIONS[self.model.examples[key][1]]
            if self.model.relabel(key, label):
                self.window.relabel(interaction_id)
                log.info("interaction %d relabelled in the model: %s -> %s", interaction_id,
                         previous, label)
                return None, previous
            return None, None  # the model already holds this label
        self.keys[interaction_id] = len(self.model.examples)
        loss = self.model.learn(text, label)
        self.window.add(interaction_id)
        return float(loss), None

    def on_forget(self, ids: list[int]) -> ForgetOutcome:
        """The person deleted these interactions (`StoreSync.on_forget`)."""
        return self.syncer.on_forget(ids)

    def holdout_rows(self) -> list[tuple[int, str, str]]:
        """(id, transcript, label) of the holdout slice, in interaction order."""
        return self.store.holdout_rows()

    def score(self, model: SwitchModel, rows: list[tuple[int, str, str]] | None = None,
              preds: dict[int, str] | None = None) -> HoldoutScore:
        """Balanced accuracy of `model` on the holdout slice of the database (or on `rows`).
        ``preds``: predictions already made (id -> action); the missing ones are made and
        added to it."""
        rows = self.holdout_rows() if rows is None else rows
        preds = {} if preds is None else preds
        preds.update(predict_rows(model, [r for r in rows if r[0] not in preds]))
        return score_preds(preds, rows)

    def _score_base(self, rows: list[tuple[int, str, str]]) -> HoldoutScore:
        """The active version's score on `rows` (all must have a cached prediction)."""
        return score_preds(self.good_preds, rows)

    def new_version(self, extra_metrics: dict[str, Any] | None = None) -> VersionEvent:
        """Gate the live model as a candidate: accept (checkpoint, active) or roll back.
        First, if another process made another version active, that one is loaded (`sync`).

        A rollback rejects the *model*, not the labels: the live model goes back to the
        active version, the labels of the database it lacks (the window's among them) are
        learned onto it again, every labelled statistic is re-gathered with the current
        layers (`regather_all`), and that is saved as the new active version (gate
        ``relearned``). See docs/loop.md for what the gate protects against."""
        self.sync()
        cand, cand_all, base, cand_preds = self._candidate_scores()
        window = self.window
        self.window = Window()
        metrics = candidate_metrics(window, cand, cand_all, base, self.model)
        metrics.update(extra_metrics or {})
        why_not = (unjudgeable(cand, self.model, self.cfg.holdout_min)
                   if base is not None else None)
        judged = (base is not None and base.balanced_accuracy is not None
                  and cand.balanced_accuracy is not None and why_not is None)
        noise = None
        if judged:
            corrections = self.store.count_label_sources(  # override / manual labels
                window.learned + window.relabelled, CORRECTION_SOURCES)
            noise = noise_test(cand, base, self.cfg.noise_se, corrections)
            metrics["noise"] = noise
            metrics["corrections"] = corrections
        worse = judged and cand.balanced_accuracy < base.balanced_accuracy - self.cfg.rollback_margin
        if worse and not noise["within_noise"]:
            event = self.registry.roll_back_candidate(metrics, cand, base, window)
        else:
            reason = accept_reason(metrics, cand, base, judged, why_not,
                                   noise if worse else None, self.cfg.rollback_margin,
                                   self.cfg.holdout_min)
            parent = self.version
            name = self.save_active(metrics, cand_preds)
            log.info("model version %s active (parent %s): %s", name, parent, reason)
            event = VersionEvent(name, "active", parent, cand, base, reason)
        self.events.append(event)
        return event

    def _candidate_scores(self) -> tuple[HoldoutScore, HoldoutScore, HoldoutScore | None,
                                         dict[int, str]]:
        """(candidate score on the rows the gate compares, on the whole holdout, the active
        version's score on the compared rows or None, the candidate's predictions)."""
        rows = self.holdout_rows()
        cand_preds: dict[int, str] = {}
        cand = cand_all = self.score(self.model, rows, preds=cand_preds)
        base = None
        if self.version is not None:
            # judged on the rows the active version was scored on (rows labelled since are
            # judged at the next version): its predictions are cached, the model is not kept
            common = [r for r in rows if r[0] in self.good_preds]
            base = self._score_base(common)
            if len(common) != len(rows):
                cand = self.score(self.model, common, preds=cand_preds)
        return cand, cand_all, base, cand_preds

    def save_active(self, metrics: dict[str, Any], preds: dict[int, str] | None = None) -> str:
        """The live model as a new active version; returns its name. ``preds``: its holdout
        predictions when already made."""
        name = self.registry.write(self.model, self.keys, metrics, status="active")
        self.version = name
        self.good_keys = dict(self.keys)
        self.good_preds = dict(preds) if preds is not None else predict_rows(
            self.model, self.holdout_rows())
        self.window = Window()
        return name

    def adopt(self, model: SwitchModel, metrics: dict[str, Any], keys: dict[int, int] | None = None) -> str:
        """A model made elsewhere (`edge-plm model import`) becomes the live model and a new
        active version (no holdout gate here: the caller judged it). `keys`: the rows of this
        database whose labels it already holds (`learning_state.match_examples`); the others
        are learned on the next start. Returns the version name."""
        self.model, self.keys = model, dict(keys or {})
        self.window = Window()
        return self.save_active(metrics)

    def rollback(self, version: str) -> str | None:
        """Manual rollback: make saved `version` active and the live model; return the
        version it replaced (None: none was active)."""
        return self.registry.rollback(version)

    def rebuild_from_store(self) -> str:
        """Re-learn a fresh model from the database in time order; save it as the active
        version (`version_registry.VersionRegistry.rebuild_from_store`)."""
        return self.registry.rebuild_from_store()


__all__ = ["CORRECTION_SOURCES", "GOLDEN", "device_names", "ForgetOutcome", "HoldoutScore", "LabelOutcome",
           "Learner", "LearnerConfig", "VersionEvent", "is_holdout_id", "load_start",
           "start_checkpoint"]
