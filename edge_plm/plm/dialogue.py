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
from edge_plm.plm.bitcipher import embedding_hash
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

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    @classmethod
    def empty(cls, config: str | PLMConfig = "potato", seed: int = 0, **overrides) -> "SwitchModel":
        cfg = get_config(config, **overrides) if isinstance(config, str) else config
        tok = CharTokenizer()
        return cls(cfg, tok, SwitchNet(cfg, len(tok)), seed)

    @property
    def params(self) -> int:
        return self.config.param_count()

    def encode(self, transcript: str, grow: bool) -> list[int]:
        ids = self.tokenizer.dialogue(transcript, grow=grow)
        self.net.grow_vocab(len(self.tokenizer))
        return ids

    def predict(self, transcript: str) -> Prediction:
        y = self.predict_many([transcript])[0]
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

    def batch_of(self, keys: list[int]) -> Batch:
        return Batch.from_sequences([self.examples[i][0] for i in keys], [self.examples[i][1] for i in keys])

    def refresh_keys(self, n: int) -> list[int]:
        """The next `refresh` of the n earlier examples in cyclic order: their labelled-layer
        statistics are re-gathered with the current lower layers (they go stale as the local
        block learns); each update pays for a few, every example is refreshed once per sweep."""
        k = min(self.config.refresh, n)
        keys = [(self.refresh_cursor + i) % n for i in range(k)]
        if n:
            self.refresh_cursor = (self.refresh_cursor + k) % n
        return keys

    def replay_sample(self, exclude: int) -> list[int]:
        """Indices of a replay mini-batch: `replay` earlier examples, seeded, without repeats."""
        k = min(self.config.replay, exclude)
        if k == 0:
            return []
        return sorted(self.rng.choice(exclude, size=k, replace=False).tolist())

    # -- checkpoints ----------------------------------------------------------------------

    def save(self, path: str | Path, extra: dict | None = None) -> Path:
        """Atomic checkpoint with everything needed to continue learning identically."""
        arrays = self.net.state_arrays()
        lengths = np.array([len(s) for s, _ in self.examples], dtype=np.int64)
        arrays["examples.ids"] = np.array([t for s, _ in self.examples for t in s], dtype=np.int64)
        arrays["examples.lengths"] = lengths
        arrays["examples.labels"] = np.array([y for _, y in self.examples], dtype=np.int64)
        arrays["rng"] = np.frombuffer(json.dumps(self.rng.bit_generator.state).encode(), dtype=np.uint8)
        meta = {
            "kind": "edge-plm switch model",
            "config": dataclasses.asdict(self.config),
            "vocabulary": self.tokenizer.to_json(),
            "embedding_hash": embedding_hash(self.net.E),
            "seed": self.seed,
            "counters": {**self.net.counters(), "labelled": len(self.examples),
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
            model.rng.bit_generator.state = json.loads(arrays["rng"].tobytes().decode())
            model.unlabeled_seen = int(meta["counters"].get("unlabelled", 0))
            model.refresh_cursor = int(meta["counters"].get("refresh_cursor", 0))
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, CheckpointError):
                raise
            raise CheckpointError(f"{path}: incompatible checkpoint: {exc}") from exc
        return model

