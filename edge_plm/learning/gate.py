"""The holdout gate: a model's score on the holdout slice, whether that slice can judge a
candidate version, and whether a candidate's deficit against the active version is real or
within the holdout's noise. Pure functions of the predictions and labels (the learner decides
what to do with the verdict; docs/loop.md, "Versions and automatic rollback")."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

from collections.abc import Callable

from edge_plm.learning.evaluation import balanced_accuracy, confusion
from edge_plm.switch.model import SwitchModel
from edge_plm.switch.tokenizer import ACTIONS

MIN_PER_CLASS = 2  # holdout rows needed per trained class before a candidate is judged

Rows = list[tuple[int, str, str]]  # (interaction id, transcript, label) of holdout rows


@dataclass(frozen=True)
class HoldoutScore:
    """Balanced accuracy of a model on the holdout slice (None when it is empty)."""

    n: int
    balanced_accuracy: float | None
    per_class: dict[str, int] = field(default_factory=dict)  # holdout rows per label
    # per holdout row (in the order of the rows scored): did the model get it right
    correct: tuple[bool, ...] = ()
    recall: dict[str, float] = field(default_factory=dict)  # per class with rows


def score(model: SwitchModel, rows: Rows, preds: dict[int, str] | None = None) -> HoldoutScore:
    """Balanced accuracy of `model` on `rows`; ``preds``: predictions already made (id ->
    action), the missing ones are made and added to it."""
    preds = {} if preds is None else preds
    preds.update(predict_rows(model, [r for r in rows if r[0] not in preds]))
    return score_preds(preds, rows)


def predict_rows(model: SwitchModel, rows: Rows) -> dict[int, str]:
    """id -> the model's action for each row, in batches of 32 (batches of 128 left ~20 MB
    more resident after the first long one: the allocator keeps what it grew to)."""
    out: dict[int, str] = {}
    for i in range(0, len(rows), 32):
        chunk = rows[i:i + 32]
        probs = model.predict_many([t for _, t, _ in chunk])
        out.update({r[0]: ACTIONS[int(p.argmax())] for r, p in zip(chunk, probs)})
    return out


def score_preds(by_id: dict[int, str], rows: Rows) -> HoldoutScore:
    """The score of the predictions `by_id` (id -> action) on `rows`."""
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


def trained_classes(model: SwitchModel) -> list[str]:
    """The labels `model` holds at least once (in ACTIONS order)."""
    seen = {model.examples[k][1] for k in model.live_keys()}
    return [a for i, a in enumerate(ACTIONS) if i in seen]


def unjudgeable(cand: HoldoutScore, model: SwitchModel, holdout_min: int) -> str | None:
    """Why the holdout cannot judge this candidate (None when it can)."""
    if cand.n < holdout_min:
        return f"holdout too small to judge ({cand.n} < {holdout_min})"
    thin = [f"{a}={cand.per_class.get(a, 0)}" for a in trained_classes(model)
            if cand.per_class.get(a, 0) < MIN_PER_CLASS]
    if thin:
        return (f"holdout lacks classes the candidate learned (need >= {MIN_PER_CLASS} "
                f"each): {', '.join(thin)}")
    return None


def noise_test(cand: HoldoutScore, base: HoldoutScore, noise_se: float,
               corrections: int = 0) -> dict[str, Any]:
    """Is the candidate's deficit within the noise of the holdout? Three tests, all must
    say "real" for a rollback: (1) the deficit exceeds `noise_se` binomial standard
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
    within = diff <= noise_se * se
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


def accept_reason(metrics: dict[str, Any], cand: HoldoutScore, base: HoldoutScore | None,
                  judged: bool, why_not: str | None, within_noise: dict[str, Any] | None,
                  margin: float, holdout_min: int) -> str:
    """Why an accepted candidate passed; sets ``metrics["gate"]``. `within_noise`: the
    noise test of a candidate that scored worse, but within the holdout's noise; `why_not`:
    why the holdout could not judge it (`unjudgeable`)."""
    if within_noise is not None:
        metrics["gate"] = "passed (within noise)"
        return (f"holdout balanced accuracy {cand.balanced_accuracy:.3f} vs active "
                f"{base.balanced_accuracy:.3f}: the difference is within the holdout's "
                f"noise (se {within_noise['se']:.3f}, rows lost/won "
                f"{within_noise.get('rows_lost', '-')}/{within_noise.get('rows_won', '-')})")
    if judged:
        metrics["gate"] = "passed"
        return (f"holdout balanced accuracy {cand.balanced_accuracy:.3f} >= active "
                f"{base.balanced_accuracy:.3f} - margin {margin}")
    if base is None:
        metrics["gate"] = "first version"
        return "first version"
    reason = why_not or "no holdout score to compare"
    metrics["gate"] = "holdout too small" if cand.n < holdout_min else "holdout lacks classes"
    metrics["gate_reason"] = reason
    return reason


def candidate_metrics(window: Any, cand: HoldoutScore, cand_all: HoldoutScore,
                      base: HoldoutScore | None, model: SwitchModel) -> dict[str, Any]:
    """The metrics a candidate version is stored with (the gate adds its verdict);
    `window`: the labels learned since the last version (`types.Window`)."""
    metrics: dict[str, Any] = {
        "holdout_n": cand_all.n, "balanced_accuracy": cand_all.balanced_accuracy,
        "parent_balanced_accuracy": base.balanced_accuracy if base else None,
        "labels_in_window": window.count, "interactions": [window.first_id, window.last_id],
        "holdout_classes": cand_all.per_class, "trained_classes": trained_classes(model),
    }
    if cand.n != cand_all.n:  # the gate compared the two on the rows both predicted
        metrics["judged"] = {"holdout_n": cand.n, "balanced_accuracy": cand.balanced_accuracy}
    if window.relabelled:
        metrics["relabelled"] = window.relabelled
    return metrics


def relearned_metrics(rolled: str, after: HoldoutScore, verdict: Verdict, diff: Any,
                      window: Any) -> dict[str, Any]:
    """The metrics of the version saved after candidate `rolled` was rolled back and its
    labels (`diff`: what was learned again) went onto the active version (score `after`)."""
    return {"gate": "relearned", "rolled_back_candidate": rolled, "holdout_n": after.n,
            "balanced_accuracy": after.balanced_accuracy,
            "parent_balanced_accuracy": verdict.base.balanced_accuracy,
            "candidate_balanced_accuracy": verdict.candidate.balanced_accuracy,
            "labels_in_window": len(diff.missing) + len(diff.changed),
            "interactions": [window.first_id, window.last_id], "holdout_classes": after.per_class}


@dataclass(frozen=True)
class Verdict:
    """The gate's judgement of a candidate: its scores, the metrics it is stored with (the
    verdict in ``metrics["gate"]`` when accepted), and whether it is rolled back."""

    candidate: HoldoutScore  # on the rows the gate compared
    base: HoldoutScore | None  # the active version's score on them (None: no active version)
    preds: dict[int, str]  # the candidate's holdout predictions
    metrics: dict[str, Any]
    roll_back: bool
    reason: str  # why it was accepted ("" for a rollback: `Learner` words it)


class GateConfig(Protocol):
    """The learner configuration's fields the gate reads (`LearnerConfig`)."""

    holdout_min: int
    noise_se: float
    rollback_margin: float


def judge(model: SwitchModel, version: str | None, good_preds: dict[int, str], rows: Rows,
          window: Any, cfg: GateConfig, corrections: Callable[[list[int]], int],
          extra_metrics: dict[str, Any] | None = None) -> Verdict:
    """Judge `model` as a candidate against the active `version` on the holdout `rows`: the
    active version by its cached predictions `good_preds`, on the rows it was scored on
    (rows labelled since are judged at the next version; the model is not kept).
    ``corrections(ids)``: how many of the window's labels are corrections (asked only when
    the candidate can be judged). Worse beyond ``rollback_margin`` and beyond the holdout's
    noise (`noise_test`): rolled back."""
    cand_preds: dict[int, str] = {}
    cand = cand_all = score(model, rows, preds=cand_preds)
    base = None
    if version is not None:
        common = [r for r in rows if r[0] in good_preds]
        base = score_preds(good_preds, common)
        if len(common) != len(rows):
            cand = score(model, common, preds=cand_preds)
    metrics = candidate_metrics(window, cand, cand_all, base, model)
    metrics.update(extra_metrics or {})
    why_not = unjudgeable(cand, model, cfg.holdout_min) if base is not None else None
    judged = (base is not None and base.balanced_accuracy is not None
              and cand.balanced_accuracy is not None and why_not is None)
    noise = None
    if judged:
        n_corrections = corrections(window.learned + window.relabelled)  # override / manual
        noise = noise_test(cand, base, cfg.noise_se, n_corrections)
        metrics["noise"] = noise
        metrics["corrections"] = n_corrections
    worse = judged and cand.balanced_accuracy < base.balanced_accuracy - cfg.rollback_margin
    if worse and not noise["within_noise"]:
        return Verdict(cand, base, cand_preds, metrics, True, "")
    reason = accept_reason(metrics, cand, base, judged, why_not, noise if worse else None,
                           cfg.rollback_margin, cfg.holdout_min)
    return Verdict(cand, base, cand_preds, metrics, False, reason)


__all__ = ["MIN_PER_CLASS", "GateConfig", "HoldoutScore", "Verdict", "accept_reason", "candidate_metrics",
           "judge", "noise_test", "predict_rows", "relearned_metrics", "score", "score_preds", "trained_classes", "unjudgeable"]
