"""The switch model's confidence: the calibrated distribution of a prediction, held-out rows
and fitting the map on a validation file (``switch/calibration.py`` holds the map itself;
docs/method.md, "Calibrated confidence")."""

from __future__ import annotations

import numpy as np

from edge_plm.actions import ACTIONS, DRIVING, INDEX
from edge_plm.switch import calibration
from edge_plm.switch.calibration import Calibrator


def softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max())
    return e / e.sum()


def calibrated(model, scores: np.ndarray, support: float, calib: Calibrator | None = None) -> tuple[int, np.ndarray]:
    """(top action, distribution): the calibrated confidence on the top action, the rest
    shared by the other actions in the network's proportions. Fewer than two actions
    labelled: NOOP at the labels' own shares (add-one smoothed; ``label_shares``), the only
    evidence there is. Nothing known about the words (support 0): a model without a starting
    part says NOOP at its labels' shares when NOOP is the most labelled action (measured on
    young models, docs/benchmarks-log.md "Words nobody labelled"), else, and always with a starting
    part (whose label mix is not the household's), NOOP at the uniform distribution (words
    nobody labelled are never acted on). A relay state on top while another state has no
    label yet: the states share the top's and the untaught one's mass (``untaught_states``).
    ``calib``: the map (default the model's; ``owner.read`` passes the owner's part's own)."""
    n_act = len(ACTIONS)
    present = model.class_counts > 0.5
    if present.sum() < 2:
        return INDEX["NOOP"], label_shares(model.class_counts)
    if support <= 0.0:
        if model.start is not None:
            return INDEX["NOOP"], np.full(n_act, 1.0 / n_act)
        return INDEX["NOOP"], noop_at_label_shares(model.class_counts)
    f, top = calibration_features(model, scores, support)
    conf = max((model.calib if calib is None else calib).confidence(f), 1.0 / n_act)
    p = softmax(scores)
    rest = p.copy()
    rest[top] = 0.0
    share = rest / rest.sum() if rest.sum() > 0 else np.full(n_act, 1.0 / (n_act - 1))
    uniform = np.where(np.arange(n_act) == top, 0.0, 1.0 / (n_act - 1))
    if (1.0 - conf) * share.max() > conf:  # mix toward uniform: the top stays the top
        lam = (conf / (1.0 - conf) - uniform.max()) / (share.max() - uniform.max())
        share = lam * share + (1.0 - lam) * uniform
    y = (1.0 - conf) * share
    y[top] = conf
    return top, untaught_states(model.class_counts, top, y)


def untaught_states(counts: np.ndarray, top: int, y: np.ndarray) -> np.ndarray:
    """``y`` with the top relay state's probability shared evenly with every other relay state
    that has no label yet (others unchanged). A young model taught ON but never OFF has not
    seen what "off" looks like: "turn the lights off in the living room" reads like its ON
    commands (the same words but one) and came out ON .83, acted on and wrong, 21 lines into a
    spoken session from empty (docs/benchmarks-log.md, "Taught both states"). Which state such a command
    asks for is then as open as the labels leave it, so it is asked about, not acted on; the
    top action stays the top. A model with every state labelled (any starting model): ``y``."""
    if ACTIONS[top] not in DRIVING:
        return y
    group = [top] + [INDEX[a] for a in DRIVING if INDEX[a] != top and counts[INDEX[a]] <= 0.5]
    if len(group) == 1:
        return y
    y = y.copy()
    y[group] = y[group].sum() / len(group)
    return y

def noop_at_label_shares(counts: np.ndarray) -> np.ndarray:
    """The distribution of a prediction that knows nothing of the words: ``label_shares`` when
    NOOP is the most labelled action (a young model's unknown words are chatter about as often
    as its labels were: measured, docs/benchmarks-log.md "A young model's confidence"), else uniform."""
    y = label_shares(counts)
    if y[INDEX["NOOP"]] < y.max():
        return np.full(len(y), 1.0 / len(y))
    return y


def label_shares(counts: np.ndarray) -> np.ndarray:
    """(n_a + 1) / (n + 3): how often each action was labelled, add-one smoothed. A model that
    has seen only chatter says NOOP at about its share of chatter (10 NOOP labels: .85), not
    1/3; one that has seen only OFF says NOOP at 1/13 after 10 and does not act."""
    counts = np.asarray(counts, dtype=np.float64)
    return (counts + 1.0) / (counts.sum() + len(counts))


def calibration_features(model, scores: np.ndarray, support: float) -> tuple[np.ndarray, int]:
    """(features, top action) of one prediction for the calibration map."""
    order = np.argsort(-scores, kind="stable")
    top = int(order[0])
    margin = float(scores[top] - scores[order[1]])
    return calibration.features(margin, min(max(support, 0.0), 1.0), ACTIONS[top] == "NOOP"), top


def heldout_row(model, transcript: str, label: str) -> tuple[np.ndarray, bool] | None:
    """The calibration row of a labelled transcript the model has not learned: (features,
    right?), or None when its exact transcript is remembered or nothing is known yet."""
    if model.remembered(transcript) is not None:
        return None
    scores, support = model.raw(transcript)
    return row_of(model, scores, support, label)


def row_of(model, scores: np.ndarray, support: float, label: str) -> tuple[np.ndarray, bool] | None:
    """The calibration row of a prediction's (logits, support) for its true ``label``; None
    when nothing is known of the words or fewer than two actions are labelled."""
    if support <= 0.0 or (model.class_counts > 0.5).sum() < 2:
        return None
    f, top = calibration_features(model, scores, support)
    return f, ACTIONS[top] == label


def calibrate_on(model, rows: list[tuple[str, str]], strength: float = 30.0) -> dict:
    """Fit the calibration map on held-out labelled rows (text, label) — a validation file
    the model has not learned — and make it the prior that the device's own held-out rows
    pull away from (``strength``: the prior counts as that many rows); the device's rows
    start empty. Returns the rows used and the ECE of the confidence on them before/after."""
    X, y = [], []
    for text, label in rows:
        r = heldout_row(model, text, label)
        if r is not None:
            X.append(r[0])
            y.append(r[1])
    if not X:
        raise ValueError("no held-out row the calibration can use (empty rows, or nothing learned)")
    X, y = np.array(X), np.array(y, dtype=float)
    before = calibration.expected_calibration_error(calibration.sigmoid(X @ model.calib.theta), y)
    fit = Calibrator(strength=1.0)
    theta = fit.fit(X, y)
    model.calib = Calibrator(prior=theta, strength=strength)
    after = calibration.expected_calibration_error(calibration.sigmoid(X @ theta), y)
    return {"rows": len(y), "theta": theta.tolist(), "ece_before": before, "ece_after": after}
