"""The switch as a dialogue language model (DESIGN.md §2.7): a small API used identically by
``edge-plm eval`` and by the device loop.

    model = SwitchModel.empty("potato")
    p = model.predict("turn on the lamp")   # Prediction(action, confidence, distribution)
    model.learn("turn on the lamp", "ON")   # one online update (+ a replay mini-batch)

The input is ``USER: <transcript> <sep> DEVICE:`` at character level; the prediction is the
distribution over the three action tokens that may follow ``DEVICE:``. ``learn`` adds the
interaction to the explicit statistics, re-solves the explicit layers and takes
``update_steps`` gradient steps on the interaction plus a replay mini-batch drawn
deterministically (seeded) from earlier labelled interactions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

import dataclasses
from pathlib import Path

from edge_plm.plm import checkpoint
from edge_plm.plm.bitcipher import embedding_hash, radial_refine
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.plm.config import PLMConfig, get_config
from edge_plm.plm.switch import Batch, SwitchNet
from edge_plm.plm.tokenizer import ACTIONS, CharTokenizer

LABEL_INDEX = {a: i for i, a in enumerate(ACTIONS)}


@dataclass
class Prediction:
    action: str
    confidence: float
    distribution: dict[str, float]


@dataclass
class SwitchModel:
    config: PLMConfig
    tokenizer: CharTokenizer
    net: SwitchNet
    seed: int = 0
    examples: list[tuple[list[int], int]] = field(default_factory=list)  # labelled, for replay
    unlabeled_seen: int = 0
    refresh_cursor: int = 0
    # keys (indices into `examples`) of forgotten examples: their slot stays (keys are stable),
    # their token ids are dropped, and replay / refresh skip them
    removed: set[int] = field(default_factory=set)
    # the checkpoint's metadata when loaded (callers' ``extra`` included); {} for a new model
    meta: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    @classmethod
    def empty(cls, config: str | PLMConfig = "potato", seed: int = 0, **overrides) -> "SwitchModel":
        cfg = get_config(config, **overrides) if isinstance(config, str) else config
        tok = CharTokenizer()
        return cls(cfg, tok, SwitchNet(cfg, len(tok)), seed)

    def refine_embedding(self, transcripts: list[str], radii: tuple[int, ...] = (1, 2),
                         weight: float = 0.5) -> None:
        """Radial co-occurrence refinement of the bit-cipher codes (DESIGN.md §2.1) from heard
        transcripts (no labels needed), before anything is learned: every statistic depends on
        the codes, so refining a model that has learned would invalidate them all. Off unless
        called; BENCHMARKS.md has the measurement (`learning_curve.py --radial`)."""
        if self.examples or self.unlabeled_seen or self.net.stats_U.rows:
            raise RuntimeError("refine_embedding needs an empty model (statistics depend on the codes)")
        seqs = [self.tokenizer.dialogue(t, grow=True) for t in transcripts]
        self.net.grow_vocab(len(self.tokenizer))
        self.net.E = radial_refine(self.net.E, seqs, radii=radii, weight=weight)

    @property
    def params(self) -> int:
        return self.config.param_count()

    def encode(self, transcript: str, grow: bool) -> list[int]:
        ids = self.tokenizer.dialogue(transcript, grow=grow)
        self.net.grow_vocab(len(self.tokenizer))
        return ids

    def predict(self, transcript: str, prior_strength: float = 0.0, evidence_prior: float = 0.0) -> Prediction:
        """The distribution over the actions. The model itself is class-balanced (each action
        counts equally, what balanced accuracy measures); ``prior_strength`` a > 0 multiplies in
        the class frequencies seen so far (add-one smoothed) raised to a — a tempered prior for
        a device deciding whether to act on a household's mostly-NOOP speech (a = 1: the full
        prior; measured in BENCHMARKS.md).

        ``evidence_prior`` k > 0 weighs the distribution by how many labelled examples n stand
        behind it: p' = (n p + k/3) / (n + k), i.e. k pseudo-examples that know nothing. The top
        action stays the same; its confidence is honest about little evidence (one label makes
        the class-balanced model 100 % sure of the only class it knows; with k = 3 that is 44 %).
        """
        y = self.predict_many([transcript])[0]
        if prior_strength:
            y = y * (self.net.class_counts + 1.0) ** prior_strength
            y = y / y.sum()
        if evidence_prior < 0:
            raise ValueError(f"evidence_prior must be >= 0, got {evidence_prior}")
        if evidence_prior:
            n = float(self.net.class_counts.sum())
            y = (n * y + evidence_prior / len(y)) / (n + evidence_prior)
        i = int(np.argmax(y))
        return Prediction(ACTIONS[i], float(y[i]), {a: float(p) for a, p in zip(ACTIONS, y)})

    def predict_many(self, transcripts: list[str]) -> np.ndarray:
        seqs = [self.encode(t, grow=False) for t in transcripts]
        return self.net.predict_proba(Batch.from_sequences(seqs))

    def observe(self, transcript: str) -> None:
        """An unlabelled transcript: language signal for the local (USER-side) block."""
        self.net.observe(Batch.from_sequences([self.encode(transcript, grow=True)]))
        self.unlabeled_seen += 1

    def learn(self, transcript: str, label: str) -> float:
        """One online update from a labelled interaction. Returns the loss before the update."""
        if label not in LABEL_INDEX:
            raise ValueError(f"label must be one of {ACTIONS}, got {label!r}")
        seq, y = self.encode(transcript, grow=True), LABEL_INDEX[label]
        key = len(self.examples)
        self.examples.append((seq, y))
        # the new interaction plus `refresh` earlier ones (cyclic), gathered layer by layer
        keys = [key, *self.refresh_keys(key)]
        self.net.observe(Batch.from_sequences([seq]))
        self.net.regather(self.batch_of(keys), keys)
        loss = 0.0
        for _ in range(self.config.update_steps):
            batch = self.batch_of([key, *self.replay_sample(exclude=key)])
            loss = self.net.train_step(batch)
        return loss

    @property
    def n_examples(self) -> int:
        """Labelled examples the model holds now (forgotten ones not counted)."""
        return len(self.examples) - len(self.removed)

    def live_keys(self) -> list[int]:
        return [k for k in range(len(self.examples)) if k not in self.removed]

    def _check_key(self, key: int) -> int:
        key = int(key)
        if not 0 <= key < len(self.examples):
            raise KeyError(f"no example with key {key} (the model holds keys 0..{len(self.examples) - 1})")
        if key in self.removed:
            raise KeyError(f"example {key} was forgotten")
        return key

    def relabel(self, key: int, label: str) -> bool:
        """Change the label of example `key` (its index in ``examples``: learning order) and
        re-gather its labelled-layer statistics under the new label: its contribution is
        taken back from the class it was added to and added, computed now, to the new one.
        Returns False when the label already was `label` (nothing changes).

        Exactness: the labelled statistics are plain sums of each example's contribution as
        last gathered; after ``relabel`` they are exactly (up to rounding) those sums with
        this example's contribution gathered now, under the new label. That equals a model
        that learned the corrected data directly when nothing else changed: the example is
        the last one learned and no other example was re-gathered with it (``refresh`` = 0;
        tests/test_relabel.py). Otherwise two things differ, both by design: (1) the
        example's contribution is computed with the current layers, not those of its time
        (as any refresh does), and (2) other examples were gathered while it had the old
        label (W_B's attention targets use the class evidence of all labels; U_B and O see
        the layers re-solved below them) and are not re-gathered here. ``regather_all``
        removes both: afterwards the labelled statistics depend only on the current local
        block (which never sees labels) and the current labels. What gradient steps
        (``update_steps`` > 0, off by default) added to ``delta`` is not taken back.
        """
        key = self._check_key(key)
        if label not in LABEL_INDEX:
            raise ValueError(f"label must be one of {ACTIONS}, got {label!r}")
        seq, old = self.examples[key]
        new = LABEL_INDEX[label]
        if new == old:
            return False
        self.examples[key] = (seq, new)
        self.net.regather(Batch.from_sequences([seq], [new]), [key], old_labels=[old])
        return True

    def forget_example(self, key: int) -> None:
        """Take example `key` out of the model: its labelled-layer contributions are taken back
        (exact: plain sums), ``class_counts`` decremented, its slot is marked removed (keys of
        the others do not change) and its token ids are dropped, so replay, refresh and the
        checkpoint no longer hold it.

        Its local (unlabelled) statistics are taken back too (``SwitchNet.unobserve``): W's
        exactly (they depend only on the token ids and the comparison cache), U's as
        recomputed with the current W. U's are approximate in how each n-gram bucket's mass is
        spread over the input features (they were gathered with an older W); the bucket
        masses themselves, the row count and the priming number come back exactly. Taking U
        back, rather than leaving it, removes the evidence that the forgotten n-grams occurred,
        which is what forgetting is asked for; ``rebuild`` remains the exact way."""
        key = self._check_key(key)
        seq, y = self.examples[key]
        self.net.forget([key], np.array([y]))
        self.net.unobserve(Batch.from_sequences([seq]))
        self.examples[key] = ([], y)
        self.removed.add(key)

    def regather_all(self) -> None:
        """Re-gather the labelled-layer statistics of every example with the current layers
        (one batch): afterwards they depend only on the local block and the current labels."""
        keys = self.live_keys()
        if keys:
            self.net.regather(self.batch_of(keys), keys)

    def batch_of(self, keys: list[int]) -> Batch:
        return Batch.from_sequences([self.examples[i][0] for i in keys], [self.examples[i][1] for i in keys])

    def refresh_keys(self, n: int) -> list[int]:
        """The next `refresh` of the n earlier examples in cyclic order: their labelled-layer
        statistics are re-gathered with the current lower layers (they go stale as the local
        block learns); each update pays for a few, every example is refreshed once per sweep."""
        live = n - sum(1 for r in self.removed if r < n)
        k = min(self.config.refresh, live)
        keys: list[int] = []
        i = 0
        while len(keys) < k:  # forgotten examples are skipped (without any, i == k)
            key = (self.refresh_cursor + i) % n
            i += 1
            if key not in self.removed:
                keys.append(key)
        if n:
            self.refresh_cursor = (self.refresh_cursor + i) % n
        return keys

    def replay_sample(self, exclude: int) -> list[int]:
        """Indices of a replay mini-batch: `replay` earlier examples, seeded, without repeats."""
        if not self.removed:
            k = min(self.config.replay, exclude)
            if k == 0:
                return []
            return sorted(self.rng.choice(exclude, size=k, replace=False).tolist())
        pool = [i for i in range(exclude) if i not in self.removed]
        k = min(self.config.replay, len(pool))
        if k == 0:
            return []
        return sorted(pool[j] for j in self.rng.choice(len(pool), size=k, replace=False).tolist())

    # -- checkpoints ----------------------------------------------------------------------

    def save(self, path: str | Path, extra: dict | None = None) -> Path:
        """Atomic checkpoint with everything needed to continue learning identically."""
        arrays = self.net.state_arrays()
        lengths = np.array([len(s) for s, _ in self.examples], dtype=np.int64)
        arrays["examples.ids"] = np.array([t for s, _ in self.examples for t in s], dtype=np.int64)
        arrays["examples.lengths"] = lengths
        arrays["examples.labels"] = np.array([y for _, y in self.examples], dtype=np.int64)
        arrays["examples.removed"] = np.array(sorted(self.removed), dtype=np.int64)
        arrays["rng"] = np.frombuffer(json.dumps(self.rng.bit_generator.state).encode(), dtype=np.uint8)
        meta = {
            "kind": "edge-plm switch model",
            "config": dataclasses.asdict(self.config),
            "vocabulary": self.tokenizer.to_json(),
            "embedding_hash": embedding_hash(self.net.E),
            "seed": self.seed,
            "counters": {**self.net.counters(), "labelled": self.n_examples,
                         "unlabelled": self.unlabeled_seen, "refresh_cursor": self.refresh_cursor},
            **(extra or {}),
        }
        return checkpoint.save(path, arrays, meta)

    @classmethod
    def load(cls, path: str | Path) -> "SwitchModel":
        arrays, meta = checkpoint.load(path)
        if meta.get("kind") != "edge-plm switch model":
            raise CheckpointError(f"{path} is not a switch-model checkpoint (kind={meta.get('kind')!r})")
        try:
            cfg_dict = dict(meta["config"])
            cfg_dict["widths"] = tuple(cfg_dict["widths"])
            config = PLMConfig(**cfg_dict)
            tok = CharTokenizer.from_json(meta["vocabulary"])
            model = cls(config, tok, SwitchNet(config, len(tok)), int(meta["seed"]))
            model.net.load_state(arrays, meta["counters"])
            if embedding_hash(model.net.E) != meta["embedding_hash"]:
                raise CheckpointError(f"{path}: embedding hash mismatch (vocabulary and codes disagree)")
            ids, lengths, labels = arrays["examples.ids"], arrays["examples.lengths"], arrays["examples.labels"]
            offsets = np.concatenate([[0], np.cumsum(lengths)])
            model.examples = [(ids[offsets[i]:offsets[i + 1]].tolist(), int(labels[i])) for i in range(len(lengths))]
            if "examples.removed" in arrays:  # older checkpoints have none
                model.removed = {int(k) for k in arrays["examples.removed"].tolist()}
            model.meta = meta
            model.rng.bit_generator.state = json.loads(arrays["rng"].tobytes().decode())
            model.unlabeled_seen = int(meta["counters"].get("unlabelled", 0))
            model.refresh_cursor = int(meta["counters"].get("refresh_cursor", 0))
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, CheckpointError):
                raise
            raise CheckpointError(f"{path}: incompatible checkpoint: {exc}") from exc
        return model

