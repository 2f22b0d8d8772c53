"""The kind head: a second, small learned head over the switch's units that tells the kinds of
`edge_plm.actions.KINDS` apart — PLAIN (what the switch model decides: ON / OFF / NOOP), DIM,
BRIGHTEN, LEVEL, QUERY (docs/method.md, "The kind head").

The switch model and its classes are not touched: a household with only relays keeps exactly its
behaviour, and this head only says whether a transcript is something else than what the switch
model decides.

    bag   = the transcript's units (switch/units.py: word-anchored character n-grams, the word
            weighing ``word_weight``), normalised as the switch normalises (tokenizer.normalize)
    x     = bag / |bag|_2                       (the norm over every unit of the transcript)
    B     = the class-balanced explicit solution: B[j, y] = log(F[j, y] / m_y + a)
            - log(sum_d F[d, y] / m_y + a V), rows centred over the kinds (unitnet's B);
            F[j, y] the summed weights of unit j in kind y's examples (an owner's example
            counts ``owner_weight``), m_y kind y's summed example weights, V the units labelled
    p     = softmax((x (B + delta) + b) / T)    delta, b: fixed at build time (``fit_refinement``)
            T: the calibration's temperature (``fit_temperature``)

Only units that occur in labelled examples are read (the others have B = delta = 0); the norm
counts every unit, so a unit learned and then forgotten leaves the prediction exactly as it was.
The statistics are sums of integer-valued weights (n-gram counts, integer word and owner
weights), which floats hold exactly: ``learn`` then ``forget`` gives the same arrays, bit for bit.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from edge_plm.actions import KIND_INDEX, KINDS, N_KINDS
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.plm.warmstart import NegativeInputError, check_nonnegative
from edge_plm.switch.solution import row_means
from edge_plm.switch.tokenizer import normalize
from edge_plm.switch.units import UnitVocab

#: The kind head's array format; ``from_arrays`` refuses any other.
KIND_FORMAT = 1
#: The shipped kind head (models/build_kinds_en.py writes it).
SHIPPED = Path(__file__).resolve().parents[1] / "data" / "models" / "switch-en.kinds.npz"


class KindFormatError(CheckpointError):
    """Kind-head arrays of another format, or damaged."""


@dataclass(frozen=True)
class KindConfig:
    # units as the switch model's (SwitchConfig.unit_min_n / unit_max_n): the same n-grams, so a
    # transcript is read the same way by both heads
    min_n: int = 2
    max_n: int = 5
    # a whole word weighs as much as in the switch model; an integer, so that the statistics
    # (sums of weights) stay exact under learn / forget
    word_weight: float = 8.0
    # pairs of adjacent words ("b:turn down"): "turn down" vs "turn off" is a pair's difference
    bigram_weight: float = 8.0
    # units at most (the switch model's cap): bounds the arrays a device holds
    unit_cap: int = 60000
    # additive smoothing of the explicit solution: a floor under the per-example unit rates
    alpha: float = 0.03
    # an owner's example counts this many starting examples (integer: exact sums); with ~600
    # starting examples per kind one label then moves its wording's rates visibly
    owner_weight: float = 16.0


@dataclass(frozen=True)
class KindPrediction:
    kind: str  # the most probable kind
    confidence: float  # its calibrated probability
    distribution: dict[str, float] = field(default_factory=dict)  # every kind's calibrated probability


def softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def explicit_rows(F_rows: np.ndarray, colsum: np.ndarray, mass: np.ndarray, n_seen: int, alpha: float) -> np.ndarray:
    """B of some units from their rows of F, F's column sums over the labelled units and the
    kinds' masses (module docstring): row by row, so any subset of rows gives the same values."""
    m = np.maximum(mass, 1.0)
    Fb = F_rows / m
    check_nonnegative("kind co-occurrence F", Fb)
    B = np.log(Fb + alpha) - np.log(colsum / m + alpha * n_seen)
    return B - row_means(B)


def bag(text: str, vocab: UnitVocab) -> tuple[list[str], np.ndarray, float]:
    """(distinct unit strings in reading order, their weights, the bag's L2 norm) of a
    normalised transcript."""
    acc: dict[str, float] = {}
    for u, w in vocab.weighted_units(text):
        acc[u] = acc.get(u, 0.0) + w
    w = np.fromiter(acc.values(), dtype=np.float64, count=len(acc))
    return list(acc), w, float(np.sqrt((w * w).sum()))


class KindHead:
    """The kind head's statistics, refinement and calibration (module docstring)."""

    def __init__(self, config: KindConfig = KindConfig()):
        c = config
        if c.word_weight != int(c.word_weight) or c.bigram_weight != int(c.bigram_weight) or \
                c.owner_weight != int(c.owner_weight) or c.owner_weight < 1:
            raise ValueError("word, pair and owner weights must be whole numbers (owner >= 1): exact sums")
        self.config = c
        self.vocab = UnitVocab(c.unit_cap, c.min_n, c.max_n, c.word_weight, bigram_weight=c.bigram_weight)
        self.F = np.zeros((c.unit_cap, N_KINDS))  # per unit and kind: summed weights
        self.df = np.zeros(c.unit_cap)  # labelled examples holding each unit
        self.mass = np.zeros(N_KINDS)  # per kind: summed example weights
        self.colsum = np.zeros(N_KINDS)  # per kind: F's column sum
        self.n_seen = 0  # units with df > 0 (V of the solution)
        self.delta = np.zeros((0, N_KINDS))  # refinement of the first len(delta) units
        self.bias = np.zeros(N_KINDS)
        self.temperature = 1.0
        self.owner: Counter = Counter()  # (normalised text, kind) -> owner examples learned

    # -- statistics --------------------------------------------------------------------------

    def _units(self, text: str, grow: bool) -> tuple[np.ndarray, np.ndarray]:
        """(ids, weights) of the distinct units of a normalised transcript (``grow``: new units
        join the vocabulary; otherwise units without an id are left out)."""
        units, w, _ = bag(text, self.vocab)
        ids = np.array([self.vocab.add(u) if grow else self.vocab.index.get(u, -1) for u in units], dtype=np.int64)
        keep = ids >= 0
        return ids[keep], w[keep]

    def _count(self, ids: np.ndarray, w: np.ndarray, kind: int, weight: float) -> None:
        """Add (weight > 0) or take back (weight < 0) one example's units."""
        if w.size and not (np.isfinite(w).all() and w.min() > 0):
            raise NegativeInputError("kind head: unit weights must be positive and finite (logs of counts)")
        sign = 1.0 if weight > 0 else -1.0
        before = self.df[ids] > 0.5
        self.F[ids, kind] += weight * w
        self.df[ids] += sign
        self.mass[kind] += weight
        self.colsum[kind] += weight * float(w.sum())
        self.n_seen += int((self.df[ids] > 0.5).sum()) - int(before.sum())

    def add(self, text: str, kind: str, weight: float = 1.0) -> None:
        """A starting example (build time; ``learn`` for an owner's)."""
        if kind not in KIND_INDEX:
            raise ValueError(f"unknown kind {kind!r}; kinds are {KINDS}")
        ids, w = self._units(normalize(text), grow=True)
        self._count(ids, w, KIND_INDEX[kind], float(weight))

    def learn(self, text: str, kind: str) -> None:
        """The owner's example: its units added to the statistics at ``owner_weight`` (exact)."""
        t = normalize(text)
        self.add(t, kind, self.config.owner_weight)
        self.owner[(t, kind)] += 1

    def forget(self, text: str, kind: str) -> None:
        """Take an owner's example back exactly; KeyError if it was never learned."""
        t = normalize(text)
        if self.owner[(t, kind)] < 1:
            self.owner.pop((t, kind), None)
            raise KeyError(f"no owner example {t!r} as {kind}")
        self.owner[(t, kind)] -= 1
        if not self.owner[(t, kind)]:
            del self.owner[(t, kind)]
        ids, w = self._units(t, grow=False)
        self._count(ids, w, KIND_INDEX[kind], -self.config.owner_weight)

    # -- prediction --------------------------------------------------------------------------

    def features(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(ids, x): the labelled units of a normalised transcript (increasing id) and their
        weights divided by the norm of the whole bag."""
        units, w, norm = bag(text, self.vocab)
        if norm == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        ids = np.array([self.vocab.index.get(u, -1) for u in units], dtype=np.int64)
        keep = ids >= 0
        ids, x = ids[keep], w[keep] / norm
        keep = self.df[ids] > 0.5
        ids, x = ids[keep], x[keep]
        order = np.argsort(ids, kind="stable")
        return ids[order], x[order]

    def weights(self, ids: np.ndarray) -> np.ndarray:
        """U = B + delta of some labelled units."""
        U = explicit_rows(self.F[ids], self.colsum, self.mass, self.n_seen, self.config.alpha)
        inside = ids < len(self.delta)
        U[inside] += self.delta[ids[inside]]
        return U

    def logits(self, text: str) -> np.ndarray:
        """x U + b of a transcript, before the temperature."""
        ids, x = self.features(normalize(text))
        return x @ self.weights(ids) + self.bias if ids.size else self.bias.copy()

    def predict(self, text: str) -> KindPrediction:
        p = softmax(self.logits(text) / self.temperature)
        k = int(np.argmax(p))
        return KindPrediction(KINDS[k], float(p[k]), {name: float(v) for name, v in zip(KINDS, p)})

    # -- arrays ------------------------------------------------------------------------------

    def to_arrays(self) -> dict[str, np.ndarray]:
        n = len(self.vocab)
        owner = sorted(self.owner.items())
        return {
            "format": np.array(KIND_FORMAT, dtype=np.int64),
            "kinds": np.array(KINDS),
            "config": np.array(json.dumps(asdict(self.config), sort_keys=True)),
            "units": np.array([u or "" for u in self.vocab.units], dtype=str) if n else np.zeros(0, dtype="<U1"),
            "F": self.F[:n].copy(), "df": self.df[:n].copy(), "mass": self.mass.copy(),
            "colsum": self.colsum.copy(), "n_seen": np.array(self.n_seen, dtype=np.int64),
            "delta": self.delta.copy(), "bias": self.bias.copy(),
            "temperature": np.array(self.temperature, dtype=np.float64),
            "owner.texts": np.array([t for (t, _), _ in owner], dtype=str) if owner else np.zeros(0, dtype="<U1"),
            "owner.kinds": np.array([k for (_, k), _ in owner], dtype=str) if owner else np.zeros(0, dtype="<U1"),
            "owner.counts": np.array([c for _, c in owner], dtype=np.int64),
        }

    @classmethod
    def from_arrays(cls, d: dict[str, np.ndarray]) -> "KindHead":
        if "format" not in d or int(d["format"]) != KIND_FORMAT:
            got = int(d["format"]) if "format" in d else "none"
            raise KindFormatError(f"kind head format {got}, this edge-plm reads format {KIND_FORMAT}: "
                                  "rebuild it (python models/build_kinds_en.py)")
        if tuple(str(k) for k in d["kinds"]) != KINDS:
            raise KindFormatError(f"kind head classes {tuple(d['kinds'])}, this edge-plm has {KINDS}")
        head = cls(KindConfig(**json.loads(str(d["config"]))))
        for u in d["units"]:
            head.vocab.add(str(u))
        n = len(head.vocab)
        if d["F"].shape != (n, N_KINDS) or d["df"].shape != (n,):
            raise KindFormatError("kind head arrays do not match its unit vocabulary")
        check_nonnegative("kind head F", d["F"])
        head.F[:n], head.df[:n] = d["F"], d["df"]
        head.mass, head.colsum = d["mass"].astype(np.float64), d["colsum"].astype(np.float64)
        head.n_seen = int(d["n_seen"])
        head.delta, head.bias = d["delta"].astype(np.float64), d["bias"].astype(np.float64)
        head.temperature = float(d["temperature"])
        for t, k, c in zip(d["owner.texts"], d["owner.kinds"], d["owner.counts"]):
            head.owner[(str(t), str(k))] = int(c)
        return head

    def save(self, path: Path) -> None:
        Path(path).write_bytes(npz_bytes(self.to_arrays()))

    @classmethod
    def load(cls, path: Path) -> "KindHead":
        with np.load(path, allow_pickle=False) as z:
            return cls.from_arrays({k: z[k] for k in z.files})


def load_shipped() -> KindHead:
    """The kind head shipped with the package (edge_plm/data/models/switch-en.kinds.npz)."""
    return KindHead.load(SHIPPED)


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """An .npz of ``arrays`` (keys sorted, fixed zip timestamps, deflated): the same arrays give
    the same bytes (np.savez stamps the time of writing)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key in sorted(arrays):
            one = io.BytesIO()
            np.lib.format.write_array(one, np.asarray(arrays[key]), allow_pickle=False)
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, one.getvalue())
    return buf.getvalue()


# -- build time: refinement and calibration (pure functions of the head and labelled texts) --


def design(head: KindHead, texts: list[str]):
    """The CSR matrix (rows x labelled units) of the texts' features x (``KindHead.features``)."""
    from scipy.sparse import csr_matrix

    indptr, indices, values = [0], [], []
    for t in texts:
        ids, x = head.features(normalize(t))
        indices.extend(ids.tolist())
        values.extend(x.tolist())
        indptr.append(len(indices))
    n = len(head.vocab)
    return csr_matrix((np.array(values, dtype=np.float64), np.array(indices, dtype=np.int64),
                       np.array(indptr, dtype=np.int64)), shape=(len(texts), n))


def class_weights(labels: np.ndarray, example_weights: np.ndarray | None = None) -> np.ndarray:
    """Each present kind's rows weigh 1 / (kinds present) in all (class balance), summing to 1."""
    ew = np.ones(len(labels)) if example_weights is None else np.asarray(example_weights, dtype=np.float64)
    mass = np.bincount(labels, weights=ew, minlength=N_KINDS)
    s = ew / mass[labels]
    return s / s.sum()


def objective(X, B: np.ndarray, delta: np.ndarray, bias: np.ndarray, labels: np.ndarray, s: np.ndarray,
              l2: float) -> tuple[float, np.ndarray, np.ndarray]:
    """(loss, d/d delta, d/d bias) of the class-weighted cross-entropy of softmax(X (B + delta) + b)
    plus (l2 / 2)(|delta|^2 + |b|^2): the pull toward the explicit solution B."""
    P = softmax(np.asarray(X @ (B + delta)) + bias)
    rows = np.arange(len(labels))
    loss = -float((s * np.log(np.maximum(P[rows, labels], 1e-300))).sum())
    loss += 0.5 * l2 * (float((delta * delta).sum()) + float((bias * bias).sum()))
    G = P * s[:, None]
    G[rows, labels] -= s
    return loss, np.asarray(X.T @ G) + l2 * delta, G.sum(axis=0) + l2 * bias


def solved(head: KindHead) -> np.ndarray:
    """B of every unit of the vocabulary (0 where no labelled example holds it)."""
    n = len(head.vocab)
    B = explicit_rows(head.F[:n], head.colsum, head.mass, head.n_seen, head.config.alpha)
    B[head.df[:n] <= 0.5] = 0.0
    return B


def fit_refinement(head: KindHead, texts: list[str], kinds: list[str], steps: int, lr: float, l2: float) -> list[float]:
    """``steps`` full-batch gradient steps (rate ``lr``) on the head's delta and b from zero over
    its labelled texts (``objective``): deterministic. Returns the loss before each step."""
    labels = np.array([KIND_INDEX[k] for k in kinds], dtype=np.int64)
    X, B, s = design(head, texts), solved(head), class_weights(labels)
    delta, bias = np.zeros_like(B), np.zeros(N_KINDS)
    losses = []
    for _ in range(steps):
        loss, gD, gb = objective(X, B, delta, bias, labels, s, l2)
        losses.append(loss)
        delta -= lr * gD
        bias -= lr * gb
    head.delta, head.bias = delta, bias
    return losses


def nll(logits: np.ndarray, labels: np.ndarray, temperature: float) -> float:
    P = softmax(logits / temperature)
    return -float(np.log(np.maximum(P[np.arange(len(labels)), labels], 1e-300)).mean())


def fit_temperature(logits: np.ndarray, labels: np.ndarray) -> float:
    """The temperature T minimising the mean log-loss of softmax(logits / T) on held-out rows
    (a bounded scalar search over log T: deterministic)."""
    from scipy.optimize import minimize_scalar

    res = minimize_scalar(lambda lt: nll(logits, labels, float(np.exp(lt))), bounds=(-4.0, 4.0), method="bounded",
                          options={"xatol": 1e-6})
    return float(np.exp(res.x))


def ece(confidence: np.ndarray, correct: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error over ``bins`` equal-width bins of the confidence."""
    confidence = np.asarray(confidence, dtype=np.float64)
    if not len(confidence):
        return float("nan")
    b = np.minimum((confidence * bins).astype(np.int64), bins - 1)
    total = 0.0
    for k in range(bins):
        m = b == k
        if m.any():
            total += m.sum() * abs(float(confidence[m].mean()) - float(np.asarray(correct, dtype=np.float64)[m].mean()))
    return total / len(confidence)


def calibration_report(P: np.ndarray, labels: np.ndarray, bins: int = 10) -> dict:
    """Accuracy and ECE: overall (top label: confidence vs right) and per kind (class-wise: the
    probability of the kind over every row vs whether the row is that kind), with per-kind
    accuracy (recall) and rows."""
    pred = P.argmax(axis=1)
    out = {"rows": int(len(labels)), "accuracy": float((pred == labels).mean()),
           "balanced_accuracy": float(np.mean([(pred[labels == k] == k).mean() for k in np.unique(labels)])),
           "ece": ece(P.max(axis=1), pred == labels, bins), "kinds": {}}
    for k, name in enumerate(KINDS):
        m = labels == k
        out["kinds"][name] = {"rows": int(m.sum()), "accuracy": float((pred[m] == k).mean()) if m.any() else None,
                              "ece": ece(P[:, k], m, bins)}
    return out
