"""What the learner's parts share: its configuration, the outcomes of its calls, the window of
labels since the last version, and the starting model (`learner.py` is the learner itself)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


from edge_plm.learning import state
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.learning.gate import HoldoutScore
from edge_plm.learning.predictor import Priors
from edge_plm.switch.model import SwitchModel
from edge_plm.config.settings import ModelConfig

GOLDEN = state.GOLDEN  # 0.618...
CORRECTION_SOURCES = state.CORRECTION_SOURCES  # labels that correct the device: always learned


def is_holdout_id(interaction_id: int, fraction: float) -> bool:
    """Whether a labelled interaction belongs to the holdout slice (deterministic in the id)."""
    return state.hash_holdout(interaction_id, fraction)


_MODEL = ModelConfig()  # the defaults of the [model] section

#: `ModelConfig` fields the learner takes as they are (``start`` is resolved to a path).
_FROM_MODEL = ("config", "seed", "holdout_fraction", "holdout_min",
               "version_every", "rollback_margin", "prior_strength", "evidence_prior",
               "keep_checkpoints", "checkpoints_max_mb", "version_growth")


@dataclass(frozen=True)
class LearnerConfig:
    """What the learner needs from `ModelConfig`, with its defaults (config/settings.py explains
    them), plus the learner's own timings and noise threshold.

    ``version_every``: labels learned between candidate versions. ``rollback_margin``: how
    much lower a candidate's holdout balanced accuracy may be before it is rolled back.
    """

    config: str = _MODEL.config
    seed: int = _MODEL.seed
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

    @property
    def priors(self) -> Priors:
        """The prediction priors, as a `Predictor` carries them."""
        return Priors(self.prior_strength, self.evidence_prior)

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
    # the other kept checkpoints (`forgetting.rewrite_kept`): rewritten / removed / clean versions
    files: dict[str, list[str]] | None = None


@dataclass
class Window:
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

    def drop(self, ids: set[int]) -> None:
        """Interactions taken out of the model (forgotten): no longer in the window's lists
        (the count stays: the labels were learned)."""
        self.learned = [i for i in self.learned if i not in ids]
        self.relabelled = [i for i in self.relabelled if i not in ids]


def start_checkpoint(m: ModelConfig) -> str:
    """The checkpoint path of ``model.start`` ("" for "empty"); StartError when unusable."""
    from edge_plm.config.starting_model import check_config, resolve  # noqa: PLC0415

    check_config(m.start, m.config)
    path = resolve(m.start, check=False)  # a missing file is an error only when it is needed
    return "" if path is None else str(path)


def load_start(cfg: LearnerConfig) -> SwitchModel:
    """The starting model ``cfg.start``: a checkpoint of ``cfg.config``, re-seeded with
    ``cfg.seed`` and with the learner's replay size. Its examples stay in it (replayed and
    refreshed like the household's own); its interaction-key map is dropped (those keys are
    another database's). StartError (a LookupError) when it does not load or has another
    config: the device cannot start the way it is configured to."""
    from edge_plm.config.starting_model import StartError  # noqa: PLC0415

    try:
        model = SwitchModel.load(cfg.start)
    except CheckpointError as exc:
        raise StartError(f"model.start: {exc}") from exc
    if model.config.name != cfg.config:
        raise StartError(f"model.start: {cfg.start} is a {model.config.name} model, "
                         f"but model.config is {cfg.config}")
    model.seed = cfg.seed
    model.mark_start()  # the device's own labels go to the owner's part (switch/owner.py)
    model.meta = {k: v for k, v in model.meta.items() if k != "interaction_keys"}
    return model


def keys_of(model: SwitchModel) -> dict[int, int]:
    """interaction id -> example key, from the checkpoint's metadata ({} if it has none)."""
    pairs = model.meta.get("interaction_keys") or []
    return {int(i): int(k) for i, k in pairs}
