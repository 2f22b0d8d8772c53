"""Online learning on the replay buffer: holdout slice, model versions, automatic rollback.

The `Learner` owns the live `SwitchModel` (DESIGN.md §2.6, §3 "Online learning safety"):

- `predict(text)` — the model's distribution over ON / OFF / NOOP.
- `on_label(interaction_id, text, label)` — a label arrived for an interaction. A deterministic
  slice of labelled interactions is the **holdout**: chosen by a hash of the interaction id
  (`is_holdout_id`), marked in the store (``interactions.holdout``) and never learned from.
  Every other label is one `SwitchModel.learn` update (which includes its replay mini-batch).
- `observe(text)` — a transcript that got no label: unlabelled language signal.
- **Versions**: after every ``version_every`` learned labels the in-memory model is a
  *candidate*. It is scored on the holdout (balanced accuracy) together with the active
  version (on the same, current holdout). Candidate worse than the active one by more than
  ``rollback_margin`` -> **automatic rollback**: the candidate is recorded ``rolled_back`` and
  the live model is reloaded from the active checkpoint (the labels learned since are dropped
  from the model, not from the database). Otherwise the candidate is saved as an atomic
  checkpoint under the checkpoints directory and becomes ``active`` (parent = previous active,
  metrics = its scores). A candidate is only judged when the score means something: the
  holdout holds at least ``holdout_min`` labels *and* at least ``MIN_PER_CLASS`` (2) rows of
  every class the candidate was trained on. Otherwise it is accepted and the metrics say why
  (``gate: "holdout too small"`` / ``"holdout lacks classes"``, ``holdout_classes``). Why:
  balanced accuracy averages per-class recall, so with a single ON row in the holdout one
  prediction moves the score by a third; on a 425-line replay with margin 0 that noise
  rolled back 12 of 33 candidates, several by about 0.01.
- `rollback(version)` — manual: make an older saved version active and live.
- `rebuild_from_store()` — the database is the source of truth: a fresh model re-learns every
  labelled, non-holdout row in time order (and observes unlabelled transcripts), skipping the
  rows of windows whose candidate was rolled back (their label range is in the version's
  metrics), then is saved as a new active version.
- `Learner.open(...)` — start-up: load the active checkpoint; if it is missing or damaged, log
  it, mark it rolled back and try the previous good (retired, saved) versions newest first;
  if none loads and the database holds labels, rebuild; else start from an empty model.

Holdout choice: ``frac(id * golden_ratio) < holdout_fraction``. The golden-ratio sequence is
evenly spread for consecutive ids (about one in five for 0.2, from the first labels on), needs
no counter that could drift after a restart or a rebuild, and gives the same slice every time.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge_plm.evaluation import balanced_accuracy, confusion
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.plm.dialogue import Prediction, SwitchModel
from edge_plm.plm.tokenizer import ACTIONS
from edge_plm.settings import ModelConfig
from edge_plm.store import ModelVersion, ReplayStore

log = logging.getLogger(__name__)

GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0  # 0.618...
MIN_PER_CLASS = 2  # holdout rows needed per trained class before a candidate is judged


def is_holdout_id(interaction_id: int, fraction: float) -> bool:
    """Whether a labelled interaction belongs to the holdout slice (deterministic in the id)."""
    if fraction <= 0.0:
        return False
    return (interaction_id * GOLDEN) % 1.0 < fraction


@dataclass(frozen=True)
class LearnerConfig:
    """What the learner needs from `ModelConfig` (same defaults; see settings.py).

    ``version_every``: labels learned between candidate versions. ``rollback_margin``: how
    much lower a candidate's holdout balanced accuracy may be before it is rolled back.
    """

    config: str = "potato"
    seed: int = 0
    replay_size: int = 8
    holdout_fraction: float = 0.2
    holdout_min: int = 10
    version_every: int = 10
    rollback_margin: float = 0.03

    def __post_init__(self) -> None:
        if not 0.0 <= self.holdout_fraction < 1.0:
            raise ValueError("holdout_fraction must be in [0, 1)")
        if self.version_every < 1:
            raise ValueError("version_every must be >= 1")
        if self.holdout_min < 1:
            raise ValueError("holdout_min must be >= 1")
        if self.rollback_margin < 0:
            raise ValueError("rollback_margin must be >= 0")

    @classmethod
    def from_settings(cls, m: ModelConfig, **overrides: Any) -> LearnerConfig:
        """From the `[model]` section of the config (keyword arguments override it)."""
        values = dict(config=m.config, seed=m.seed, replay_size=m.replay_size,
                      holdout_fraction=m.holdout_fraction, holdout_min=m.holdout_min,
                      version_every=m.version_every, rollback_margin=m.rollback_margin)
        values.update(overrides)
        return cls(**values)


@dataclass(frozen=True)
class HoldoutScore:
    """Balanced accuracy of a model on the holdout slice (None when it is empty)."""

    n: int
    balanced_accuracy: float | None
    per_class: dict[str, int] = field(default_factory=dict)  # holdout rows per label


@dataclass(frozen=True)
class VersionEvent:
    """What happened at a version boundary."""

    version: str
    status: str  # "active" (accepted) or "rolled_back"
    parent: str | None
    candidate: HoldoutScore
    baseline: HoldoutScore | None  # the previous active version on the same holdout
    reason: str


@dataclass(frozen=True)
class LabelOutcome:
    """Result of `Learner.on_label`."""

    holdout: bool
    loss: float | None  # None for a holdout label (nothing learned)
    event: VersionEvent | None = None


@dataclass
class _Window:
    """Labels learned since the last version boundary (ids for rebuild's rollback filter)."""

    first_id: int | None = None
    last_id: int | None = None
    count: int = 0

    def add(self, interaction_id: int) -> None:
        self.first_id = interaction_id if self.first_id is None else self.first_id
        self.last_id = interaction_id
        self.count += 1


class Learner:
    """The live model plus its versions in the replay buffer."""

    def __init__(self, store: ReplayStore, cfg: LearnerConfig, checkpoints_dir: str | Path,
                 model: SwitchModel | None = None, version: str | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.cfg = cfg
        self.checkpoints_dir = Path(checkpoints_dir)
        self.model = model if model is not None else self._fresh_model()
        self.version = version  # the active version the live model descends from
        self._good: SwitchModel | None = None  # the active version, for holdout comparison
        self._clock = clock
        self._window = _Window()
        self.events: list[VersionEvent] = []

    # --- construction -------------------------------------------------------------------
    def _fresh_model(self) -> SwitchModel:
        return SwitchModel.empty(self.cfg.config, seed=self.cfg.seed, replay=self.cfg.replay_size)

    @classmethod
    def open(cls, store: ReplayStore, cfg: LearnerConfig, checkpoints_dir: str | Path,
             clock: Callable[[], float] = time.time) -> Learner:
        """Start-up: the active checkpoint, else the previous good one, else a rebuild/empty."""
        learner = cls(store, cfg, checkpoints_dir, clock=clock)
        versions = store.model_versions()
        active = store.active_model_version()
        # newest first: the active one, then earlier versions that were active once (retired)
        candidates = ([active] if active else []) + [
            v for v in reversed(versions) if v.status == "retired" and v.path]
        for v in candidates:
            try:
                model = learner._load_version(v)
            except CheckpointError as exc:
                log.error("model version %s cannot be loaded (%s); marking it rolled back and "
                          "trying the previous good version", v.version, exc)
                store.set_model_status(v.version, "rolled_back")
                continue
            if v.status != "active":
                store.set_model_status(v.version, "active")
                log.warning("fell back to model version %s (%d labels learned); labels after "
                            "it are in the database: `rebuild_from_store` re-learns them",
                            v.version, v.n_train)
            learner.model, learner.version = model, v.version
            learner._good = copy.deepcopy(model)
            log.info("model version %s loaded (%d labels learned)", v.version, v.n_train)
            return learner
        if store.count(labeled=True):
            log.warning("no loadable model checkpoint; rebuilding the model from the %d "
                        "labelled interactions in the database", store.count(labeled=True))
            learner.rebuild_from_store()
        else:
            log.info("no model version yet: starting from an empty %s model", cfg.config)
        return learner

    def _load_version(self, v: ModelVersion) -> SwitchModel:
        if not v.path:
            raise CheckpointError(f"model version {v.version} has no checkpoint file")
        return SwitchModel.load(v.path)

    @property
    def pending_labels(self) -> int:
        """Labels learned since the last version boundary (not in any checkpoint yet)."""
        return self._window.count

    # --- the loop's calls ---------------------------------------------------------------
    def predict(self, text: str) -> Prediction:
        """The live model's prediction for a transcript."""
        return self.model.predict(text)

    def observe(self, text: str) -> None:
        """A transcript that got no label: unlabelled language signal for the model."""
        if text.strip():
            self.model.observe(text)

    def on_label(self, interaction_id: int, text: str, label: str) -> LabelOutcome:
        """A label for interaction `interaction_id`: holdout it, or learn it (and version)."""
        if is_holdout_id(interaction_id, self.cfg.holdout_fraction):
            self.store.set_holdout(interaction_id, True)
            log.info("interaction %d (%s) goes to the holdout slice", interaction_id, label)
            return LabelOutcome(holdout=True, loss=None)
        loss = self.model.learn(text, label)
        self._window.add(interaction_id)
        event = None
        if self._window.count >= self.cfg.version_every:
            event = self.new_version()
        return LabelOutcome(holdout=False, loss=float(loss), event=event)

    # --- versions -------------------------------------------------------------------------
    def score(self, model: SwitchModel) -> HoldoutScore:
        """Balanced accuracy of `model` on the holdout slice of the database."""
        rows = self.store.labeled_examples(holdout=True)
        if not rows:
            return HoldoutScore(0, None)
        preds = [model.predict(text).action for text, _ in rows]
        labels = [label for _, label in rows]
        table = confusion(labels, preds)
        per_class = {a: labels.count(a) for a in ACTIONS}
        return HoldoutScore(len(rows), balanced_accuracy(table), per_class)

    def _trained_classes(self) -> list[str]:
        """The labels the live model has learned at least once (in ACTIONS order)."""
        seen = {y for _, y in self.model.examples}
        return [a for i, a in enumerate(ACTIONS) if i in seen]

    def _unjudgeable(self, cand: HoldoutScore) -> str | None:
        """Why the holdout cannot judge this candidate (None when it can)."""
        if cand.n < self.cfg.holdout_min:
            return f"holdout too small to judge ({cand.n} < {self.cfg.holdout_min})"
        thin = [f"{a}={cand.per_class.get(a, 0)}" for a in self._trained_classes()
                if cand.per_class.get(a, 0) < MIN_PER_CLASS]
        if thin:
            return (f"holdout lacks classes the candidate learned (need >= {MIN_PER_CLASS} "
                    f"each): {', '.join(thin)}")
        return None

    def _next_version_name(self) -> str:
        return f"v{len(self.store.model_versions()) + 1:04d}"

    def new_version(self) -> VersionEvent:
        """Gate the live model as a candidate: accept (checkpoint, active) or roll back."""
        name = self._next_version_name()
        cand = self.score(self.model)
        base = self.score(self._good) if self._good is not None else None
        window = self._window
        self._window = _Window()
        metrics: dict[str, Any] = {
            "holdout_n": cand.n, "balanced_accuracy": cand.balanced_accuracy,
            "parent_balanced_accuracy": base.balanced_accuracy if base else None,
            "labels_in_window": window.count, "interactions": [window.first_id, window.last_id],
            "holdout_classes": cand.per_class, "trained_classes": self._trained_classes(),
        }
        unjudgeable = self._unjudgeable(cand) if base is not None else None
        judged = (base is not None and base.balanced_accuracy is not None
                  and cand.balanced_accuracy is not None and unjudgeable is None)
        if judged and cand.balanced_accuracy < base.balanced_accuracy - self.cfg.rollback_margin:
            reason = (f"holdout balanced accuracy {cand.balanced_accuracy:.3f} < active "
                      f"{self.version} {base.balanced_accuracy:.3f} (n={cand.n})")
            metrics["gate"] = "rolled back"
            self.store.add_model_version(name, parent=self.version, path=None,
                                         status="rolled_back", metrics=metrics,
                                         n_train=len(self.model.examples))
            self.model = self._reload_good()
            log.warning("model candidate %s rolled back: %s; live model is %s again",
                        name, reason, self.version)
            event = VersionEvent(name, "rolled_back", self.version, cand, base, reason)
        else:
            if judged:
                reason = (f"holdout balanced accuracy {cand.balanced_accuracy:.3f} >= active "
                          f"{base.balanced_accuracy:.3f} - margin {self.cfg.rollback_margin}")
                metrics["gate"] = "passed"
            elif base is None:
                reason = "first version"
                metrics["gate"] = "first version"
            else:
                reason = unjudgeable or "no holdout score to compare"
                metrics["gate"] = ("holdout too small" if cand.n < self.cfg.holdout_min
                                   else "holdout lacks classes")
                metrics["gate_reason"] = reason
            parent = self.version
            self._save_active(name, metrics)
            log.info("model version %s active (parent %s): %s", name, parent, reason)
            event = VersionEvent(name, "active", parent, cand, base, reason)
        self.events.append(event)
        return event

    def _save_active(self, name: str, metrics: dict[str, Any]) -> None:
        path = self.checkpoints_dir / f"{name}.npz"
        self.model.save(path, extra={"version": name, "parent": self.version})
        self.store.add_model_version(name, parent=self.version, path=str(path), status="active",
                                     metrics=metrics, n_train=len(self.model.examples))
        self.version = name
        self._good = copy.deepcopy(self.model)

    def _reload_good(self) -> SwitchModel:
        """The active version again, from its checkpoint (from memory if that fails)."""
        active = self.store.active_model_version()
        if active is not None and active.path:
            try:
                return SwitchModel.load(active.path)
            except CheckpointError as exc:
                log.error("active checkpoint %s unreadable during rollback (%s); using the "
                          "in-memory copy", active.path, exc)
        if self._good is not None:
            return copy.deepcopy(self._good)
        return self._fresh_model()

    def rollback(self, version: str) -> None:
        """Manual rollback: make saved `version` active and the live model."""
        matches = [v for v in self.store.model_versions() if v.version == version]
        if not matches:
            raise LookupError(f"no model version {version!r}")
        model = self._load_version(matches[0])  # CheckpointError propagates: nothing changed
        self.store.set_model_status(version, "active")
        self.model, self.version, self._good = model, version, copy.deepcopy(model)
        self._window = _Window()
        log.warning("manual rollback: model version %s is active", version)

    def rebuild_from_store(self) -> str:
        """Re-learn a fresh model from the database in time order; save it as the active version.

        Labelled non-holdout rows are learned, unlabelled transcripts (without error) observed,
        holdout rows skipped, and so are the labelled rows of rolled-back windows.
        """
        skipped_ranges = []
        for v in self.store.model_versions():
            gated = v.status == "rolled_back" and (v.metrics or {}).get("gate") == "rolled back"
            span = (v.metrics or {}).get("interactions") if gated else None
            if span and span[0] is not None:
                skipped_ranges.append((int(span[0]), int(span[1])))
        model = self._fresh_model()
        learned = skipped = 0
        for row in self.store.interactions(oldest_first=True):
            if row.error or not row.transcript.strip():
                continue
            if row.label is None:
                model.observe(row.transcript)
                continue
            if row.holdout:
                continue
            if any(a <= row.id <= b for a, b in skipped_ranges):
                skipped += 1
                continue
            model.learn(row.transcript, row.label)
            learned += 1
        self.model = model
        self._window = _Window()
        name = self._next_version_name()
        cand = self.score(model)
        metrics = {"holdout_n": cand.n, "balanced_accuracy": cand.balanced_accuracy,
                   "gate": "rebuild", "labels_in_window": learned,
                   "skipped_rolled_back": skipped, "interactions": [None, None]}
        self._save_active(name, metrics)
        log.info("model rebuilt from the database as %s: %d labels learned, %d skipped "
                 "(rolled-back windows)", name, learned, skipped)
        return name


__all__ = ["HoldoutScore", "LabelOutcome", "Learner", "LearnerConfig", "VersionEvent",
           "is_holdout_id"]
