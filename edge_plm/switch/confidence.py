"""The switch model's confidence: the calibrated distribution of a prediction from the network's
logits, its labelled support and the labels' counts; the calibration rows a held-out prediction
gives; and ``ConfidenceMap``, the model's two maps (``switch/calibration.py`` holds a map itself;
docs/method.md, "Calibrated confidence")."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edge_plm.actions import ACTIONS, DRIVING, INDEX
from edge_plm.switch import calibration
from edge_plm.switch.calibration import Calibrator


def softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max())
    return e / e.sum()


def calibrated(scores: np.ndarray, support: float, counts: np.ndarray, has_start: bool,
               calib: Calibrator) -> tuple[int, np.ndarray]:
    """(top action, distribution): the calibrated confidence on the top action, the rest
    shared by the other actions in the network's proportions. Fewer than two actions
    labelled: NOOP at the labels' own shares (add-one smoothed; ``label_shares``), the only
    evidence there is. Nothing known about the words (support 0): a model without a starting
    part says NOOP at its labels' shares when NOOP is the most labelled action (measured on
    young models, docs/benchmarks-log.md "Words nobody labelled"), else, and always with a starting
    part (whose label mix is not the household's), NOOP at the uniform distribution (words
    nobody labelled are never acted on). A relay state on top while another state has no
    label yet: the states share the top's and the untaught one's mass (``untaught_states``).
    ``counts``: the labelled examples per action; ``has_start``: the model has a starting part;
    ``calib``: the map (``ConfidenceMap.calibrated`` picks it)."""
    n_act = len(ACTIONS)
    present = counts > 0.5
    if present.sum() < 2:
        return INDEX["NOOP"], label_shares(counts)
    if support <= 0.0:
        if has_start:
            return INDEX["NOOP"], np.full(n_act, 1.0 / n_act)
        return INDEX["NOOP"], noop_at_label_shares(counts)
    f, top = calibration_features(scores, support)
    conf = max(calib.confidence(f), 1.0 / n_act)
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
    return top, untaught_states(counts, top, y)


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


def calibration_features(scores: np.ndarray, support: float) -> tuple[np.ndarray, int]:
    """(features, top action) of one prediction for the calibration map."""
    order = np.argsort(-scores, kind="stable")
    top = int(order[0])
    margin = float(scores[top] - scores[order[1]])
    return calibration.features(margin, min(max(support, 0.0), 1.0), ACTIONS[top] == "NOOP"), top


def row_of(scores: np.ndarray, support: float, counts: np.ndarray, label: str) -> tuple[np.ndarray, bool] | None:
    """The calibration row of a prediction's (logits, support) for its true ``label``: (features,
    right?); None when nothing is known of the words or fewer than two actions are labelled
    (``counts``: the labelled examples per action)."""
    if support <= 0.0 or (counts > 0.5).sum() < 2:
        return None
    f, top = calibration_features(scores, support)
    return f, ACTIONS[top] == label


@dataclass
class ConfidenceMap:
    """The model's confidence maps: ``calib``, and ``owner_calib`` for what the owner's part
    decides alone (a young model's prior, moved by the owner's held-out rows of such
    transcripts: ``SwitchModel.read``)."""

    calib: Calibrator = field(default_factory=Calibrator)
    owner_calib: Calibrator = field(default_factory=lambda: Calibrator(name="owner_calibration"))

    def of(self, owner_alone: bool) -> Calibrator:
        return self.owner_calib if owner_alone else self.calib

    def calibrated(self, scores: np.ndarray, support: float, counts: np.ndarray, has_start: bool,
                   owner_alone: bool = False) -> tuple[int, np.ndarray]:
        """``calibrated`` with the map of the part that decides."""
        return calibrated(scores, support, counts, has_start, self.of(owner_alone))

    def add(self, row: tuple[np.ndarray, bool], owner_alone: bool) -> None:
        """A held-out row of the device's own (``row_of``) into the map of the part that decided."""
        self.of(owner_alone).add(*row)

    def fit(self, rows: list[tuple[np.ndarray, bool]], strength: float = 30.0) -> dict:
        """Fit the map on held-out rows (``row_of``) of a validation file the model has not
        learned and make it the prior that the device's own held-out rows pull away from
        (``strength``: the prior counts as that many rows); the device's rows start empty.
        Returns the rows used and the ECE of the confidence on them before/after."""
        if not rows:
            raise ValueError("no held-out row the calibration can use (empty rows, or nothing learned)")
        X, y = np.array([f for f, _ in rows]), np.array([r for _, r in rows], dtype=float)
        before = calibration.expected_calibration_error(calibration.sigmoid(X @ self.calib.theta), y)
        fit = Calibrator(strength=1.0)
        theta = fit.fit(X, y)
        self.calib = Calibrator(prior=theta, strength=strength)
        after = calibration.expected_calibration_error(calibration.sigmoid(X @ theta), y)
        return {"rows": len(y), "theta": theta.tolist(), "ece_before": before, "ece_after": after}

    def state(self) -> dict[str, np.ndarray]:
        return {**self.calib.state(), **self.owner_calib.state()}

    def load(self, arrays: dict[str, np.ndarray]) -> None:
        """The maps a checkpoint stores (a checkpoint without one: its prior)."""
        for calib in (self.calib, self.owner_calib):
            if calib.stored_in(arrays):
                calib.load(arrays)
