"""``[model]``: the switch model's configuration, where learning starts, versions and
checkpoints, with its checks (`problems`)."""

from __future__ import annotations

from dataclasses import dataclass

from edge_plm.config.keys import Problems, setting


@dataclass
class ModelConfig:
    config: str = "potato"
    # where learning starts: "switch-en" (the shipped English starting model, understands
    # common on/off commands from the first word), "empty", or a switch-model checkpoint path
    start: str = "switch-en"
    seed: int = 0
    holdout_fraction: float = 0.2
    holdout_min: int = setting(10, "holdout rows needed before a candidate is judged at all")
    version_every: int = setting(10, "learned labels between candidate versions, at least "
                                         "(or version_growth of the owner's labels the model holds, if more)")
    # ... or this share of the owner's labels the model holds, when more: the cost of versioning
    # per label (checkpoint + holdout pass, both growing with the owner's part) stays constant;
    # a starting model's examples do not count (its part is frozen: a fixed cost per version)
    version_growth: float = 0.05
    # a candidate is rolled back only if its holdout balanced accuracy is lower than the
    # active version's by more than this (small holdouts are noisy: one row moves it a lot)
    rollback_margin: float = 0.03
    # act/ask decisions may add the household's label frequencies raised to this power to the
    # model's logits before its confidence is calibrated (0 = off, the default: the calibration
    # is fitted on the household's own held-out rows, which carry its class mix; docs/benchmarks-log.md)
    prior_strength: float = 0.0
    # ... and weigh the distribution by the evidence behind it: with n labels, p' = (n p + k/3)
    # / (n + k), k pseudo-labels that know nothing, so a model taught a handful of labels does not
    # act on them alone (0 = off; 3: from an empty model the households' wrong actions fall from
    # 44 to 21 of about 1,000 actions; a starting model's thousands of labels make it a no-op;
    # docs/benchmarks-log.md)
    evidence_prior: float = 3.0
    # checkpoint retention: the active version, its parent and the newest `keep_checkpoints`
    # saved versions keep their files; older files are deleted (the rows stay, marked pruned),
    # and more are pruned, oldest first, while the directory holds more than
    # `checkpoints_max_mb` (the active version and its parent are never pruned)
    keep_checkpoints: int = 5
    checkpoints_max_mb: float = 64.0

    def problems(self) -> list[str]:
        """The [model] checks."""
        m, out = self, Problems()
        known = _known_model_configs()
        out.need(m.config in known, f"model.config {m.config!r} is not a known model configuration "
                                    f"(known: {', '.join(known)})")
        out.need(m.seed >= 0, f"model.seed must be >= 0, got {m.seed}")
        out.need(0.0 <= m.holdout_fraction < 1.0,
                 f"model.holdout_fraction must be in [0, 1), got {m.holdout_fraction}")
        out.need(m.holdout_min >= 1 and m.version_every >= 1,
                 "model.holdout_min and model.version_every must be >= 1")
        out.need(m.rollback_margin >= 0, f"model.rollback_margin must be >= 0, got {m.rollback_margin}")
        out.need(0.0 <= m.version_growth <= 1.0,
                 f"model.version_growth must be in [0, 1], got {m.version_growth}")
        out.need(m.keep_checkpoints >= 2,
                 "model.keep_checkpoints must be >= 2 (the active version and its parent)")
        out.need(m.checkpoints_max_mb > 0, f"model.checkpoints_max_mb must be > 0, got {m.checkpoints_max_mb}")
        out.need(m.prior_strength >= 0 and m.evidence_prior >= 0,
                 "model.prior_strength and model.evidence_prior must be >= 0")
        start = _start_problem(m) if m.config in known else None  # else: the config is the problem
        if start:
            out.append(start)
        return out


def _known_model_configs() -> list[str]:
    from edge_plm.switch.config import CONFIGS  # noqa: PLC0415 - plain dataclasses, no kernels

    return sorted(CONFIGS)


def _start_problem(m: ModelConfig) -> str | None:
    """model.start names a shipped model of model.config, "empty", or an existing file (whether
    it loads is checked when it is loaded)."""
    from edge_plm.config.starting_model import StartError, check_config, resolve  # noqa: PLC0415

    if not m.start.strip():
        return 'model.start must be "switch-en", "empty" or a checkpoint path'
    try:
        check_config(m.start, m.config)
        resolve(m.start)  # a shipped model installed, a path an existing file
    except StartError as exc:
        return str(exc)
    return None
