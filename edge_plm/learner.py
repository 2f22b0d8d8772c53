"""Online learning on the replay buffer: the live model, its holdout, versions and rollbacks.

`Learner` owns the live `SwitchModel`. It predicts; learns each stored label, or puts it in the
holdout slice (`is_holdout_id`, a hash of the interaction id; corrections are always learned);
replaces a corrected label and takes forgotten interactions back; and every few labels gates
the model as a candidate version against the active one on the holdout: accepted and saved,
or rolled back (the labels are then learned again onto the active version). Other processes
share the database: `sync` and `poll` notice the versions they make and the rows they delete.
How and why: docs/loop.md ("Labels", "Holdout", "Versions and automatic rollback",
"Start-up"). What is learnable, debris and retention are in `learning_state.py`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edge_plm import learning_state as state
from edge_plm.evaluation import balanced_accuracy, confusion
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.switch.model import SwitchPrediction, SwitchModel
from edge_plm.switch.tokenizer import ACTIONS
from edge_plm.settings import ModelConfig
from edge_plm.store import ModelVersion, ReplayStore

log = logging.getLogger(__name__)

GOLDEN = state.GOLDEN  # 0.618...
MIN_PER_CLASS = 2  # holdout rows needed per trained class before a candidate is judged
CORRECTION_SOURCES = state.CORRECTION_SOURCES  # labels that correct the device: always learned


def is_holdout_id(interaction_id: int, fraction: float) -> bool:
    """Whether a labelled interaction belongs to the holdout slice (deterministic in the id)."""
    return state.hash_holdout(interaction_id, fraction)


_MODEL = ModelConfig()  # the defaults of the [model] section

#: `ModelConfig` fields the learner takes as they are (``start`` is resolved to a path).
_FROM_MODEL = ("config", "seed", "replay_size", "holdout_fraction", "holdout_min",
               "version_every", "rollback_margin", "prior_strength", "evidence_prior",
               "keep_checkpoints", "checkpoints_max_mb", "version_growth")


@dataclass(frozen=True)
class LearnerConfig:
    """What the learner needs from `ModelConfig`, with its defaults (settings.py explains
    them), plus the learner's own timings and noise threshold.

    ``version_every``: labels learned between candidate versions. ``rollback_margin``: how
    much lower a candidate's holdout balanced accuracy may be before it is rolled back.
    """

    config: str = _MODEL.config
    seed: int = _MODEL.seed
    replay_size: int = _MODEL.replay_size
    holdout_fraction: float = _MODEL.holdout_fraction
    holdout_min: int = _MODEL.holdout_min
    version_every: int = _MODEL.version_every
    rollback_margin: float = _MODEL.rollback_margin
    sync_every_s: float = 5.0  # how often predict() checks the database's active version
    forget_check_s: float = 1.0  # how often poll() checks for deleted rows (`forget`)
    prior_strength: float = _MODEL.prior_strength
    evidence_prior: float = _MODEL.evidence_prior
    start: str = ""  # checkpoint every fresh model starts from ("": an empty model); model.start
    keep_checkpoints: int = _MODEL.keep_checkpoints
    checkpoints_max_mb: float = _MODEL.checkpoints_max_mb
    noise_se: float = 2.0  # the gate rolls back only beyond this many standard errors
    version_growth: float = _MODEL.version_growth  # the window grows with the model

    def __post_init__(self) -> None:
        if not 0.0 <= self.holdout_fraction < 1.0:
            raise ValueError("holdout_fraction must be in [0, 1)")
        if self.version_every < 1:
            raise ValueError("version_every must be >= 1")
        if self.holdout_min < 1:
            raise ValueError("holdout_min must be >= 1")
        if self.rollback_margin < 0:
            raise ValueError("rollback_margin must be >= 0")
        if not 0.0 <= self.version_growth <= 1.0:
            raise ValueError("version_growth must be in [0, 1]")
        if self.sync_every_s < 0:
            raise ValueError("sync_every_s must be >= 0")
        if self.prior_strength < 0 or self.evidence_prior < 0:
            raise ValueError("prior_strength and evidence_prior must be >= 0")

    @classmethod
    def from_settings(cls, m: ModelConfig, **overrides: Any) -> LearnerConfig:
        """From the `[model]` section of the config (keyword arguments override it)."""
        values: dict[str, Any] = {name: getattr(m, name) for name in _FROM_MODEL}
        values["start"] = start_checkpoint(m)
        values.update(overrides)
        return cls(**values)


@dataclass(frozen=True)
class HoldoutScore:
    """Balanced accuracy of a model on the holdout slice (None when it is empty)."""

    n: int
    balanced_accuracy: float | None
    per_class: dict[str, int] = field(default_factory=dict)  # holdout rows per label
    # per holdout row (in the order of the rows scored): did the model get it right
    correct: tuple[bool, ...] = ()
    recall: dict[str, float] = field(default_factory=dict)  # per class with rows


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
    loss: float | None  # None for a holdout label (nothing learned) or a relabel
    event: VersionEvent | None = None
    relabelled: bool = False  # the model held an earlier label of this interaction: replaced
    previous: str | None = None  # that earlier label


@dataclass(frozen=True)
class ForgetOutcome:
    """Result of `Learner.on_forget`."""

    forgotten: list[int]  # interaction ids the live model held and took back
    not_in_model: list[int]  # ids the live model never learned (unlabelled, holdout, older)
    version: str | None = None  # the new active version without them (None: none needed)


@dataclass
class _Window:
    """Labels learned since the last version boundary (ids for rebuild's rollback filter)."""

    first_id: int | None = None
    last_id: int | None = None
    count: int = 0
    learned: list[int] = field(default_factory=list)  # new labels, in order
    relabelled: list[int] = field(default_factory=list)  # corrections of labels already held

    def add(self, interaction_id: int) -> None:
        self.first_id = interaction_id if self.first_id is None else self.first_id
        self.last_id = interaction_id
        self.count += 1
        self.learned.append(interaction_id)

    def relabel(self, interaction_id: int) -> None:
        self.count += 1
        if interaction_id not in self.learned and interaction_id not in self.relabelled:
            self.relabelled.append(interaction_id)


def start_checkpoint(m: ModelConfig) -> str:
    """The checkpoint path of ``model.start`` ("" for "empty"); StartError when unusable."""
    from edge_plm.starting_model import check_config, resolve  # noqa: PLC0415

    check_config(m.start, m.config)
    path = resolve(m.start, check=False)  # a missing file is an error only when it is needed
    return "" if path is None else str(path)


def load_start(cfg: LearnerConfig) -> SwitchModel:
    """The starting model ``cfg.start``: a checkpoint of ``cfg.config``, re-seeded with
    ``cfg.seed`` and with the learner's replay size. Its examples stay in it (replayed and
    refreshed like the household's own); its interaction-key map is dropped (those keys are
    another database's). StartError (a LookupError) when it does not load or has another
    config: the device cannot start the way it is configured to."""
    from edge_plm.starting_model import StartError  # noqa: PLC0415

    try:
        model = SwitchModel.load(cfg.start)
    except CheckpointError as exc:
        raise StartError(f"model.start: {exc}") from exc
    if model.config.name != cfg.config:
        raise StartError(f"model.start: {cfg.start} is a {model.config.name} model, "
                         f"but model.config is {cfg.config}")
    if model.config.replay != cfg.replay_size:
        model.config = model.config.with_(replay=cfg.replay_size)
        model.net.config = model.config
    model.seed = cfg.seed
    model.mark_start()  # the device's own labels weigh owner_weight each
    model.rng = np.random.default_rng(cfg.seed)
    model.meta = {k: v for k, v in model.meta.items() if k != "interaction_keys"}
    return model


def _keys_of(model: SwitchModel) -> dict[int, int]:
    """interaction id -> example key, from the checkpoint's metadata ({} if it has none)."""
    pairs = model.meta.get("interaction_keys") or []
    return {int(i): int(k) for i, k in pairs}


class Learner:
    """The live model plus its versions in the replay buffer."""

    def __init__(self, store: ReplayStore, cfg: LearnerConfig, checkpoints_dir: str | Path,
                 model: SwitchModel | None = None, version: str | None = None,
                 clock: Callable[[], float] = time.time,
                 keys: dict[int, int] | None = None) -> None:
        self.store = store
        self.cfg = cfg
        self.checkpoints_dir = Path(checkpoints_dir)
        self._start_deferred = False
        self.model = model if model is not None else self._initial_model()
        self.version = version  # the active version the live model descends from
        # interaction id -> example key in the live model (what it learned, to correct/forget)
        self.keys: dict[int, int] = dict(keys) if keys is not None else (
            _keys_of(model) if model is not None else {})
        # the active version is not kept in memory (a copy per version cost more than the
        # loop itself on a long soak): its key map and its predictions on the holdout rows
        # that existed when it was made are enough to judge the next candidate
        self._good_keys: dict[int, int] = dict(self.keys) if version is not None else {}
        self._clock = clock
        self._window = _Window()
        self._last_sync = clock()
        self._sync_failed: str | None = None  # an active version that would not load
        self.events: list[VersionEvent] = []
        self._forget_seq = store.forget_seq()  # deletions seen (see `poll`)
        self._last_forget_check = clock()
        self._good_preds: dict[int, str] = {}  # the active version's holdout predictions
        if version is not None:
            self._good_preds = self._predict_rows(self.model, self.holdout_rows())

    # --- construction -------------------------------------------------------------------
    def _initial_model(self) -> SwitchModel:
        """The model before `open` loads a version. When the database has saved versions the
        starting model is not loaded (`open` loads a version; a rebuild loads the starting
        model itself): a device that has versions does not depend on the starting-model file
        (it may since have been moved or deleted). `open` loads it if no version loads."""
        if self.cfg.start and any(v.path for v in self.store.model_versions()):
            self._start_deferred = True
            return SwitchModel.empty(self.cfg.config, seed=self.cfg.seed, replay=self.cfg.replay_size)
        return self._fresh_model()

    def _fresh_model(self) -> SwitchModel:
        """Where learning starts (no version yet, or a rebuild): ``cfg.start`` or empty."""
        if self.cfg.start:
            return load_start(self.cfg)
        return SwitchModel.empty(self.cfg.config, seed=self.cfg.seed, replay=self.cfg.replay_size)

    @classmethod
    def open(cls, store: ReplayStore, cfg: LearnerConfig, checkpoints_dir: str | Path,
             clock: Callable[[], float] = time.time) -> Learner:
        """Start-up: the active checkpoint, else the previous good one, else a rebuild/empty."""
        learner = cls(store, cfg, checkpoints_dir, clock=clock)
        state.ensure_dir(learner.checkpoints_dir)
        state.clean_debris(store, learner.checkpoints_dir)
        versions = store.model_versions()
        active = store.active_model_version()
        # newest first: the active one, then earlier versions that were active once (retired)
        candidates = ([active] if active else []) + [
            v for v in reversed(versions)
            if v.status == "retired" and v.path and not state.is_pruned(v)]
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
            learner._set_live(model, v.version)
            log.info("model version %s loaded (%d labels learned)", v.version, v.n_train)
            learner.reconcile()
            return learner
        if store.count(labeled=True):
            log.warning("no loadable model checkpoint; rebuilding the model from the %d "
                        "labelled interactions in the database", store.count(labeled=True))
            learner.rebuild_from_store()
        else:
            if learner._start_deferred:  # versions exist but none loaded: the starting model
                learner.model = learner._fresh_model()
            log.info("no model version yet: starting from %s", cfg.start or f"an empty {cfg.config} model")
        return learner

    def _load_version(self, v: ModelVersion) -> SwitchModel:
        if not v.path:
            raise CheckpointError(f"model version {v.version} has no checkpoint file")
        if state.is_pruned(v):
            raise CheckpointError(f"the checkpoint of model version {v.version} was pruned "
                                  "(retention: model.keep_checkpoints)")
        return SwitchModel.load(v.path)

    def _set_live(self, model: SwitchModel, version: str | None) -> None:
        """`model` (loaded from `version`'s checkpoint) is the live and the active model."""
        self.model, self.version = model, version
        self.keys = _keys_of(model)
        self._good_keys = dict(self.keys)
        self._good_preds = self._predict_rows(model, self.holdout_rows())
        self._window = _Window()

    def version_window(self) -> int:
        """Labels between versions now: ``version_every``, or ``version_growth`` of the
        labels the model holds when that is more."""
        return max(self.cfg.version_every,
                   math.ceil(self.cfg.version_growth * self.model.n_examples))

    @property
    def pending_labels(self) -> int:
        """Labels learned since the last version boundary (not in any checkpoint yet)."""
        return self._window.count

    # --- the loop's calls ---------------------------------------------------------------
    def predict(self, text: str) -> SwitchPrediction:
        """The live model's prediction for a transcript (after a cheap check, at most every
        ``sync_every_s`` seconds, that no other process made another version active)."""
        self.poll()
        return self.model.predict(text, prior_strength=self.cfg.prior_strength,
                                  evidence_prior=self.cfg.evidence_prior)

    def sync(self) -> bool:
        """Load the database's active version if it is not the one the live model descends
        from (another process made it: `edge-plm label`, `forget`, `model rollback` or
        `rebuild`). The labels of the pending window that it does not hold are learned again
        from the database (a row deleted meanwhile is skipped). True when it reloaded."""
        self._last_sync = self._clock()
        active = self.store.active_model_version()
        if active is None or active.version == self.version or active.version == self._sync_failed:
            return False
        try:
            model = self._load_version(active)
        except CheckpointError as exc:
            log.error("model version %s was made active by another process but cannot be "
                      "loaded (%s); keeping %s", active.version, exc, self.version)
            self._sync_failed = active.version
            return False
        pending = self._window.learned + self._window.relabelled
        log.warning("model version %s was made active by another process; loading it "
                    "(live model was %s, %d labels pending)",
                    active.version, self.version, len(pending))
        self._set_live(model, active.version)
        self._apply_difference()  # what it lacks (the pending labels among them) is learned
        return True

    # --- learning state: the database's labels reach the model (learning_state.py) --------
    def _apply_difference(self) -> state.Difference:
        """Make the live model hold exactly the learnable labels of the database: examples of
        rows no longer learnable (deleted, moved to the holdout) are taken out, changed
        labels replaced, missing ones learned in interaction order (they count towards the
        window like any label). Rows the holdout hash claims are marked holdout."""
        held = state.model_labels(self.model, self.keys)
        diff = state.difference(self.store, held, self.cfg.holdout_fraction)
        if diff.extra:
            self._forget_live(diff.extra)
        for row in sorted(diff.missing + diff.changed, key=lambda r: r.id):
            self._learn(row.id, row.transcript, row.label)
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
        diff = self._apply_difference()
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
        if self._window.count == 0:
            return None
        return self.new_version()

    def poll(self) -> None:
        """Cheap checks, rate-limited: another process made a version active (`sync`, every
        ``sync_every_s``), or deleted rows (`forget`: ``meta.forget_seq`` moved, every
        ``forget_check_s``) — those are taken out of the live model at once."""
        now = self._clock()
        if now - self._last_sync >= self.cfg.sync_every_s:
            self.sync()
        if now - self._last_forget_check >= self.cfg.forget_check_s:
            self._last_forget_check = now
            self.check_forgotten()

    def check_forgotten(self) -> ForgetOutcome | None:
        """If rows were deleted since the last look, take the ones the live model holds out
        of it (and out of the active version, as `on_forget` does)."""
        seq = self.store.forget_seq()
        if seq == self._forget_seq:
            return None
        self._forget_seq = seq
        self.sync()  # the forgetting process may have made a version without them
        ids = self.store.interaction_ids()
        gone = sorted(i for i in self.keys if i not in ids)
        if not gone:
            return None
        log.warning("%d interaction(s) the live model learned were deleted: taking them out",
                    len(gone))
        return self.on_forget(gone)

    def _forget_live(self, ids: list[int]) -> list[int]:
        """Take `ids` out of the live model only; returns those it held."""
        forgotten = []
        for iid in ids:
            key = self.keys.pop(int(iid), None)
            if key is None or key in self.model.removed:
                continue
            self.model.forget_example(key)
            forgotten.append(int(iid))
        gone = set(forgotten)
        self._window.learned = [i for i in self._window.learned if i not in gone]
        self._window.relabelled = [i for i in self._window.relabelled if i not in gone]
        return forgotten

    def forget_interactions(self, ids: list[int], rebuild: bool = False,
                            remove_audio: bool = True) -> ForgetOutcome:
        """`edge-plm forget`: delete rows and what the model learned from them in one
        database transaction, or neither. The new model (the live one without them, or with
        `rebuild` one re-learned from the remaining rows) is written first as a candidate;
        then one transaction deletes the rows, bumps ``meta.forget_seq`` (a running service
        takes them out of its live model) and makes the new version active. A crash before
        it leaves the rows and the old model (the candidate is debris, cleaned at the next
        open); after it, both are gone."""
        ids = sorted({int(i) for i in ids})
        if rebuild:
            drop = set(ids)
            model, keys, learned = self._rebuilt_model(exclude=drop)
            metrics = {"gate": "rebuild", "labels_in_window": learned, "skipped_rolled_back": 0,
                       "interactions": [None, None], "forgotten": len(ids)}
            name = self._write_version(model, keys, metrics, commit=lambda n: (
                self.store.delete_interactions(ids, remove_audio=remove_audio,
                                               activate_version=n)))
            self._forget_seq = self.store.forget_seq()
            held = [i for i in ids if i in self.keys]
            self._set_live(model, name)
            return ForgetOutcome(held, [i for i in ids if i not in set(held)], name)
        forgotten = self._forget_live(ids)
        absent = [i for i in ids if i not in set(forgotten)]
        name = None
        if forgotten:
            metrics = {"gate": "forget", "forgotten": len(forgotten),
                       "interactions": [None, None], "labels_in_window": 0}
            name = self._write_version(self.model, self.keys, metrics, commit=lambda n: (
                self.store.delete_interactions(ids, remove_audio=remove_audio,
                                               activate_version=n)))
        else:
            self.store.delete_interactions(ids, remove_audio=remove_audio)
        self._forget_seq = self.store.forget_seq()
        if name is not None:
            self.version = name
            self._good_keys = dict(self.keys)
            self._good_preds = self._predict_rows(self.model, self.holdout_rows())
            self._window = _Window()
        return ForgetOutcome(forgotten, absent, name)

    def observe(self, text: str) -> None:
        """A transcript that got no label: unlabelled language signal for the model."""
        if text.strip():
            self.model.observe(text)

    def on_label(self, interaction_id: int, text: str, label: str,
                 source: str | None = None) -> LabelOutcome:
        """A label for interaction `interaction_id`: holdout it, or learn it (and version).
        If the model already holds a label of this interaction, it is replaced (relabel).
        ``source`` (how the label was obtained): a correction (`CORRECTION_SOURCES`) is always
        learned, whatever the holdout hash says."""
        if source not in CORRECTION_SOURCES and is_holdout_id(interaction_id, self.cfg.holdout_fraction):
            self.store.set_holdout(interaction_id, True)
            log.info("interaction %d (%s) goes to the holdout slice", interaction_id, label)
            return LabelOutcome(holdout=True, loss=None)
        loss, previous = self._learn(interaction_id, text, label)
        event = None
        if self._window.count >= self.version_window():
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

    def _learn(self, interaction_id: int, text: str, label: str) -> tuple[float | None, str | None]:
        """Learn, or relabel what the model holds; (loss or None, previous label or None)."""
        key = self.keys.get(interaction_id)
        if key is not None and key not in self.model.removed and key < len(self.model.examples):
            previous = ACTIONS[self.model.examples[key][1]]
            if self.model.relabel(key, label):
                self._window.relabel(interaction_id)
                log.info("interaction %d relabelled in the model: %s -> %s", interaction_id,
                         previous, label)
                return None, previous
            return None, None  # the model already holds this label
        self.keys[interaction_id] = len(self.model.examples)
        loss = self.model.learn(text, label)
        self._window.add(interaction_id)
        return float(loss), None

    def on_forget(self, ids: list[int]) -> ForgetOutcome:
        """The person deleted these interactions: take them out of the live model and of the
        active version. If the active version held any, it is saved again without them as a
        new active version (gate "forget"; its checkpoint then no longer holds their tokens;
        older checkpoints still do until they are deleted)."""
        forgotten = self._forget_live([int(i) for i in ids])
        absent = [int(i) for i in ids if int(i) not in set(forgotten)]
        in_good = [i for i in forgotten if i in self._good_keys]
        if not in_good:
            return ForgetOutcome(forgotten, absent)
        good, good_keys = self._reload_good()
        for iid in in_good:
            key = good_keys.pop(iid, None)
            if key is not None and key not in good.removed:
                good.forget_example(key)
        metrics = {"gate": "forget", "forgotten": len(in_good), "interactions": [None, None],
                   "labels_in_window": 0}
        name = self._write_version(good, good_keys, metrics, status="active")
        self._good_keys = good_keys
        self._good_preds = self._predict_rows(good, self.holdout_rows())
        log.info("model version %s active: %s without %d forgotten interaction(s)", name,
                 self.version, len(in_good))
        self.version = name
        return ForgetOutcome(forgotten, absent, name)

    # --- versions -------------------------------------------------------------------------
    def holdout_rows(self) -> list[tuple[int, str, str]]:
        """(id, transcript, label) of the holdout slice, in interaction order."""
        return self.store.holdout_rows()

    @staticmethod
    def _predict_rows(model: SwitchModel, rows: list[tuple[int, str, str]]) -> dict[int, str]:
        """id -> the model's action for each row, in batches of 32 (batches of 128 left ~20 MB
        more resident after the first long one: the allocator keeps what it grew to)."""
        out: dict[int, str] = {}
        for i in range(0, len(rows), 32):
            chunk = rows[i:i + 32]
            probs = model.predict_many([t for _, t, _ in chunk])
            out.update({r[0]: ACTIONS[int(p.argmax())] for r, p in zip(chunk, probs)})
        return out

    def score(self, model: SwitchModel, rows: list[tuple[int, str, str]] | None = None,
              preds: dict[int, str] | None = None) -> HoldoutScore:
        """Balanced accuracy of `model` on the holdout slice of the database (or on `rows`).
        ``preds``: predictions already made (id -> action); the missing ones are made and
        added to it."""
        rows = self.holdout_rows() if rows is None else rows
        preds = {} if preds is None else preds
        preds.update(self._predict_rows(model, [r for r in rows if r[0] not in preds]))
        return self._score_preds(preds, rows)

    def _score_base(self, rows: list[tuple[int, str, str]]) -> HoldoutScore:
        """The active version's score on `rows` (all must have a cached prediction)."""
        return self._score_preds(self._good_preds, rows)

    @staticmethod
    def _score_preds(by_id: dict[int, str], rows: list[tuple[int, str, str]]) -> HoldoutScore:
        if not rows:
            return HoldoutScore(0, None)
        preds = [by_id[r[0]] for r in rows]
        labels = [label for _, _, label in rows]
        table = confusion(labels, preds)
        per_class = {a: labels.count(a) for a in ACTIONS}
        recall = {a: sum(p == y for p, y in zip(preds, labels) if y == a) / n
                  for a, n in per_class.items() if n}
        return HoldoutScore(len(rows), balanced_accuracy(table), per_class,
                            tuple(p == y for p, y in zip(preds, labels)), recall)

    def _trained_classes(self) -> list[str]:
        """The labels the live model holds at least once (in ACTIONS order)."""
        seen = {self.model.examples[k][1] for k in self.model.live_keys()}
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
        numbers = [int(v.version[1:]) for v in self.store.model_versions()
                   if v.version[:1] == "v" and v.version[1:].isdigit()]
        return f"v{max(numbers, default=0) + 1:04d}"

    def _claim_version(self, **row: Any) -> str:
        """Insert a model_versions row under the next free name and return the name. The row
        goes first, so two processes never pick the same name (the database refuses the
        second insert; it tries the next name). With a checkpoint, the row is a candidate
        with its future path until `_write_version` has written the file."""
        for _ in range(100):
            name = self._next_version_name()
            path = str(self.checkpoints_dir / f"{name}.npz") if row.get("path") else None
            try:
                self.store.add_model_version(name, **{**row, "path": path})
                return name
            except ValueError:
                if not any(v.version == name for v in self.store.model_versions()):
                    raise
                log.info("model version name %s was taken by another process; next", name)
        raise RuntimeError("could not claim a model version name")

    def _write_version(self, model: SwitchModel, keys: dict[int, int], metrics: dict[str, Any],
                       status: str = "active",
                       commit: Callable[[str], Any] | None = None) -> str:
        """Claim a name (row first), write the checkpoint, then make the row `status` (or call
        ``commit(name)``, which must make it active: `forget_interactions`' one transaction);
        then retention prunes old checkpoints. The checkpoints directory's lock is held shared
        meanwhile, so no other process takes the candidate row or the temp file for debris."""
        state.ensure_dir(self.checkpoints_dir)
        with state.checkpoint_lock(self.checkpoints_dir):
            name = self._claim_version(parent=self.version, path=True, status="candidate",
                                       metrics=metrics, n_train=model.n_examples)
            model.save(self.checkpoints_dir / f"{name}.npz",
                       extra={"version": name, "parent": self.version,
                              "interaction_keys": sorted([i, k] for i, k in keys.items())})
            model.meta = {**model.meta,
                          "interaction_keys": sorted([i, k] for i, k in keys.items())}
            if commit is not None:
                commit(name)
                status = "active"
            elif status != "candidate":
                self.store.set_model_status(name, status)
        if status == "active":
            state.prune_checkpoints(self.store, self.cfg.keep_checkpoints,
                                    self.cfg.checkpoints_max_mb * 1e6)
        return name

    def _noise(self, cand: HoldoutScore, base: HoldoutScore,
               corrections: int = 0) -> dict[str, Any]:
        """Is the candidate's deficit within the noise of the holdout? Three tests, all must
        say "real" for a rollback: (1) the deficit exceeds ``noise_se`` binomial standard
        errors of a balanced accuracy on these rows (per class p(1-p)/n, p the two models'
        pooled recall, add-one smoothed so a perfect score still has an error); (2) at least
        two more holdout rows are wrong for the candidate than for the active version (one
        row is never enough, however small its class); (3) the rows the two disagree on
        are not a coin toss: exact one-sided sign test (McNemar) on rows lost vs won, p <
        0.05, or p < 0.01 when the candidate carries corrections (the person just said the
        device was wrong: that outweighs older holdout labels unless the evidence is
        strong)."""
        diff = (base.balanced_accuracy or 0.0) - (cand.balanced_accuracy or 0.0)
        classes = [a for a, n in cand.per_class.items() if n]
        var = 0.0
        for a in classes:
            n = cand.per_class[a]
            k = (cand.recall.get(a, 0.0) + base.recall.get(a, 0.0)) * n
            p = (k + 1.0) / (2 * n + 2.0)
            var += p * (1.0 - p) / n
        se = math.sqrt(var) / len(classes) if classes else 0.0
        out: dict[str, Any] = {"diff": round(diff, 6), "se": round(se, 6)}
        within = diff <= self.cfg.noise_se * se
        if cand.correct and len(cand.correct) == len(base.correct):
            lost = sum(b and not c for b, c in zip(base.correct, cand.correct))
            won = sum(c and not b for b, c in zip(base.correct, cand.correct))
            n = lost + won
            p_value = (sum(math.comb(n, k) for k in range(lost, n + 1)) / 2.0 ** n
                       if n else 1.0)
            alpha = 0.01 if corrections else 0.05
            out.update(rows_lost=lost, rows_won=won, sign_test_p=round(p_value, 6),
                       alpha=alpha)
            within = within or lost - won < 2 or p_value >= alpha
        out["within_noise"] = bool(within)
        return out

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
        window = self._window
        self._window = _Window()
        metrics = self._candidate_metrics(window, cand, cand_all, base, extra_metrics)
        unjudgeable = self._unjudgeable(cand) if base is not None else None
        judged = (base is not None and base.balanced_accuracy is not None
                  and cand.balanced_accuracy is not None and unjudgeable is None)
        noise = None
        if judged:
            corrections = self._corrections_in(window)
            noise = self._noise(cand, base, corrections)
            metrics["noise"] = noise
            metrics["corrections"] = corrections
        worse = judged and cand.balanced_accuracy < base.balanced_accuracy - self.cfg.rollback_margin
        if worse and not noise["within_noise"]:
            event = self._roll_back_candidate(metrics, cand, base, window)
        else:
            reason = self._accept_reason(metrics, cand, base, judged, unjudgeable,
                                         noise if worse else None)
            parent = self.version
            name = self._save_active(metrics, cand_preds)
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
            common = [r for r in rows if r[0] in self._good_preds]
            base = self._score_base(common)
            if len(common) != len(rows):
                cand = self.score(self.model, common, preds=cand_preds)
        return cand, cand_all, base, cand_preds

    def _candidate_metrics(self, window: _Window, cand: HoldoutScore, cand_all: HoldoutScore,
                           base: HoldoutScore | None,
                           extra_metrics: dict[str, Any] | None) -> dict[str, Any]:
        """The metrics a candidate version is stored with (the gate adds its verdict)."""
        metrics: dict[str, Any] = {
            "holdout_n": cand_all.n, "balanced_accuracy": cand_all.balanced_accuracy,
            "parent_balanced_accuracy": base.balanced_accuracy if base else None,
            "labels_in_window": window.count, "interactions": [window.first_id, window.last_id],
            "holdout_classes": cand_all.per_class, "trained_classes": self._trained_classes(),
        }
        if cand.n != cand_all.n:  # the gate compared the two on the rows both predicted
            metrics["judged"] = {"holdout_n": cand.n, "balanced_accuracy": cand.balanced_accuracy}
        if window.relabelled:
            metrics["relabelled"] = window.relabelled
        metrics.update(extra_metrics or {})
        return metrics

    def _accept_reason(self, metrics: dict[str, Any], cand: HoldoutScore,
                       base: HoldoutScore | None, judged: bool, unjudgeable: str | None,
                       within_noise: dict[str, Any] | None) -> str:
        """Why an accepted candidate passed; sets ``metrics["gate"]``. `within_noise`: the
        noise test of a candidate that scored worse, but within the holdout's noise."""
        if within_noise is not None:
            metrics["gate"] = "passed (within noise)"
            return (f"holdout balanced accuracy {cand.balanced_accuracy:.3f} vs active "
                    f"{base.balanced_accuracy:.3f}: the difference is within the holdout's "
                    f"noise (se {within_noise['se']:.3f}, rows lost/won "
                    f"{within_noise.get('rows_lost', '-')}/{within_noise.get('rows_won', '-')})")
        if judged:
            metrics["gate"] = "passed"
            return (f"holdout balanced accuracy {cand.balanced_accuracy:.3f} >= active "
                    f"{base.balanced_accuracy:.3f} - margin {self.cfg.rollback_margin}")
        if base is None:
            metrics["gate"] = "first version"
            return "first version"
        reason = unjudgeable or "no holdout score to compare"
        metrics["gate"] = ("holdout too small" if cand.n < self.cfg.holdout_min
                           else "holdout lacks classes")
        metrics["gate_reason"] = reason
        return reason

    def _roll_back_candidate(self, metrics: dict[str, Any], cand: HoldoutScore,
                             base: HoldoutScore, window: _Window) -> VersionEvent:
        """Record the candidate ``rolled_back``, reload the active version and learn the
        labels onto it again (a new active version)."""
        reason = (f"holdout balanced accuracy {cand.balanced_accuracy:.3f} < active "
                  f"{self.version} {base.balanced_accuracy:.3f} (n={cand.n})")
        metrics["gate"] = "rolled back"
        parent = self.version
        name = self._claim_version(parent=self.version, path=None, status="rolled_back",
                                   metrics=metrics, n_train=self.model.n_examples)
        # the candidate goes before the active version is loaded: two models at once
        # raised the resident high-water mark by a model's size, for good
        self.model, self.keys = self._fresh_model(), {}
        self.model, self.keys = self._reload_good()
        self._window = _Window()
        relearned = self._relearn_after_rollback(name, cand, base, window)
        log.warning("model candidate %s rolled back: %s; its labels were learned again "
                    "onto %s: %s is active", name, reason, parent, relearned)
        return VersionEvent(name, "rolled_back", parent, cand, base,
                            f"{reason}; labels re-learned onto {parent} as {relearned}")

    def _save_active(self, metrics: dict[str, Any], preds: dict[int, str] | None = None) -> str:
        """The live model as a new active version; returns its name. ``preds``: its holdout
        predictions when already made."""
        name = self._write_version(self.model, self.keys, metrics, status="active")
        self.version = name
        self._good_keys = dict(self.keys)
        self._good_preds = dict(preds) if preds is not None else self._predict_rows(
            self.model, self.holdout_rows())
        self._window = _Window()
        return name

    def adopt(self, model: SwitchModel, metrics: dict[str, Any], keys: dict[int, int] | None = None) -> str:
        """A model made elsewhere (`edge-plm model import`) becomes the live model and a new
        active version (no holdout gate here: the caller judged it). `keys`: the rows of this
        database whose labels it already holds (`learning_state.match_examples`); the others
        are learned on the next start. Returns the version name."""
        self.model, self.keys = model, dict(keys or {})
        self._window = _Window()
        return self._save_active(metrics)

    def _corrections_in(self, window: _Window) -> int:
        """How many labels of the window are corrections (override / manual)."""
        return self.store.count_label_sources(window.learned + window.relabelled,
                                              CORRECTION_SOURCES)

    def _relearn_after_rollback(self, rolled: str, cand: HoldoutScore, base: HoldoutScore,
                                window: _Window) -> str:
        """After a rollback: the labels back onto the last good model (see `new_version`)."""
        diff = self._apply_difference()
        self.model.regather_all()  # exact sums: re-solving the explicit layer is enough
        after = self.score(self.model)
        metrics = {"gate": "relearned", "rolled_back_candidate": rolled,
                   "holdout_n": after.n, "balanced_accuracy": after.balanced_accuracy,
                   "parent_balanced_accuracy": base.balanced_accuracy,
                   "candidate_balanced_accuracy": cand.balanced_accuracy,
                   "labels_in_window": len(diff.missing) + len(diff.changed),
                   "interactions": [window.first_id, window.last_id],
                   "holdout_classes": after.per_class}
        return self._save_active(metrics)

    def _reload_good(self) -> tuple[SwitchModel, dict[int, int]]:
        """The active version again (and its key map), from its checkpoint (from memory if
        that fails)."""
        active = self.store.active_model_version()
        if active is not None and active.path and active.version == self.version:
            try:
                model = SwitchModel.load(active.path)
                return model, _keys_of(model)
            except CheckpointError as exc:
                log.error("active checkpoint %s unreadable (%s); starting from an empty "
                          "model (the database's labels are learned again)", active.path, exc)
        return self._fresh_model(), {}

    def rollback(self, version: str) -> None:
        """Manual rollback: make saved `version` active and the live model."""
        matches = [v for v in self.store.model_versions() if v.version == version]
        if not matches:
            raise LookupError(f"no model version {version!r}")
        model = self._load_version(matches[0])  # CheckpointError propagates: nothing changed
        self.store.set_model_status(version, "active")
        self._set_live(model, version)
        log.warning("manual rollback: model version %s is active", version)

    def _rebuilt_model(self, exclude: set[int] = frozenset()
                       ) -> tuple[SwitchModel, dict[int, int], int]:
        """A fresh model from the database in interaction order: learnable labels learned
        (`learning_state.should_learn`), unlabelled transcripts observed, rows in `exclude`
        left out. Returns (model, interaction keys, labels learned)."""
        model = self._fresh_model()
        keys: dict[int, int] = {}
        learned = 0
        for row in self.store.interactions(oldest_first=True):
            if row.id in exclude or row.error or not row.transcript.strip():
                continue
            if row.label is None:
                model.observe(row.transcript)
                continue
            lr = state.LabelRow(row.id, row.transcript, row.label, row.label_source, row.holdout)
            if not state.should_learn(lr, self.cfg.holdout_fraction, False):
                if not row.holdout:
                    self.store.set_holdout(row.id, True)
                continue
            keys[row.id] = len(model.examples)
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
        model, keys, learned = self._rebuilt_model()
        self.model, self.keys = model, keys
        self._window = _Window()
        cand = self.score(model)
        metrics = {"holdout_n": cand.n, "balanced_accuracy": cand.balanced_accuracy,
                   "gate": "rebuild", "labels_in_window": learned,
                   "skipped_rolled_back": 0, "interactions": [None, None]}
        name = self._save_active(metrics)
        log.info("model rebuilt from the database as %s: %d labels learned", name, learned)
        return name


__all__ = ["ForgetOutcome", "HoldoutScore", "LabelOutcome", "Learner", "LearnerConfig", "VersionEvent",
           "is_holdout_id"]
