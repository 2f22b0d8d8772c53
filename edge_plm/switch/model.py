"""The switch model as the device uses it: learn / predict / relabel / forget / save / load.

A transcript is a dialogue ``USER: <transcript> <sep> DEVICE:``; the prediction is the
distribution over the action tokens (`edge_plm.actions`) that may follow ``DEVICE:``. The
network is ``unitnet.UnitNet`` over the collision-free units of ``switch/units.py`` (docs/method.md).
``learn`` adds the interaction to the explicit statistics, re-solves the explicit layer and
runs a bounded number of full-batch refinement steps (``refine``), all deterministic: the same
interactions in the same order give the same model, byte for byte.

Corrections stick: the model remembers which labelled examples had each exact (normalised)
transcript. A transcript heard again is decided by the latest label the person gave it, not by
the generalising network: with every label of that transcript agreeing, the remembered action is
confident; when they disagree (the person corrected it), the latest label wins with a confidence
of 0.73 (MEMORY_CONFLICT_SHARE + its share of the rest), which the default policy asks about
instead of acting on. The memory is derived from the examples (so relabel / forget update it
and the checkpoint holds it through the examples).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edge_plm.actions import ACTIONS, INDEX
from edge_plm.plm import checkpoint
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.switch.config import SwitchConfig, get_config
from edge_plm.switch.tokenizer import RESERVED, CharTokenizer, normalize
from edge_plm.switch.unitnet import UnitNet
from edge_plm.switch.units import UnitVocab

LABEL_INDEX = INDEX  # action name -> class index


def softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max())
    return e / e.sum()

MODEL_FORMAT = 2  # 1: the character SwitchNet (switch/charnet.py); 2: the unit network
MEMORY_DOUBT = 0.1  # pseudo-count of "anything" next to n agreeing labels of an exact transcript
MEMORY_CONFLICT_SHARE = 0.6  # weight of the latest label when labels of a transcript disagree


@dataclass
class SwitchPrediction:
    action: str
    confidence: float
    distribution: dict[str, float]


@dataclass
class SwitchModel:
    config: SwitchConfig
    tokenizer: CharTokenizer
    net: UnitNet
    units: UnitVocab
    seed: int = 0
    examples: list[tuple[list[int], int]] = field(default_factory=list)  # labelled, in learning order
    unlabeled_seen: int = 0
    # keys (indices into `examples`) of forgotten examples: their slot stays (keys are stable),
    # their token ids are dropped
    removed: set[int] = field(default_factory=set)
    # the checkpoint's metadata when loaded (callers' ``extra`` included); {} for a new model
    meta: dict = field(default_factory=dict, repr=False, compare=False)
    memory: dict[str, list[int]] = field(default_factory=dict, repr=False)  # transcript -> keys

    @classmethod
    def empty(cls, config: str | SwitchConfig = "potato", seed: int = 0, **overrides) -> "SwitchModel":
        cfg = get_config(config, **overrides) if isinstance(config, str) else config
        return cls(cfg, CharTokenizer(), UnitNet(cfg), cls._vocab(cfg), seed)

    @staticmethod
    def _vocab(cfg: SwitchConfig, units=()) -> UnitVocab:
        return UnitVocab(cfg.unit_cap, cfg.unit_min_n, cfg.unit_max_n, cfg.word_weight, units, cfg.support_min_n,
                         cfg.sound_weight, cfg.bigram_weight, cfg.unit_tf,
                         cfg.ngram_mass, cfg.ngram_power, cfg.sound_max_len)

    @property
    def params(self) -> int:
        return self.config.param_count()

    def encode(self, transcript: str, grow: bool) -> list[int]:
        return self.tokenizer.dialogue(transcript, grow=grow)

    def text_of(self, key: int) -> str:
        """The normalised transcript of example ``key`` (from its stored character ids)."""
        seq = self.examples[key][0]
        return "".join(self.tokenizer.tokens[i] for i in seq[1:-2])

    # -- prediction ------------------------------------------------------------------------

    def predict(self, transcript: str, prior_strength: float = 0.0, evidence_prior: float = 0.0) -> SwitchPrediction:
        """The distribution over the actions. The network is class-balanced (each action counts
        equally, what balanced accuracy measures); an exact transcript the person labelled is
        decided by its labels (module docstring). ``prior_strength`` a > 0 multiplies in the
        class frequencies seen so far (add-one smoothed) raised to a — a tempered prior for a
        device deciding whether to act on a household's mostly-NOOP speech. Then the log-scores
        are multiplied by the support shrink of the transcript (``UnitNet.shrink``): a
        transcript made of units never seen labelled comes out exactly uniform (ties, which the
        policy's label rules resolve toward NOOP), whatever the prior. The action is the top of
        the scores before the shrink.

        ``evidence_prior`` k > 0 weighs the distribution by how many labelled examples n stand
        behind it: p' = (n p + k/3) / (n + k), i.e. k pseudo-examples that know nothing. The top
        action stays the same; its confidence is honest about little evidence.
        """
        if evidence_prior < 0:
            raise ValueError(f"evidence_prior must be >= 0, got {evidence_prior}")
        scores, shrink = self.scores(transcript)
        if prior_strength and self.remembered(transcript) is None:
            # a remembered transcript is decided by its own labels: the household's class
            # frequencies are evidence about unknown wording only, not about what the person
            # said this exact transcript means
            scores = scores + prior_strength * np.log(self.net.class_counts + 1.0)
        y = softmax(scores * shrink)
        if evidence_prior:
            n = float(self.net.class_counts.sum())
            y = (n * y + evidence_prior / len(y)) / (n + evidence_prior)
        i = int(np.argmax(scores))  # the ranking before the shrink (which only flattens it)
        return SwitchPrediction(ACTIONS[i], float(y[i]), {a: float(p) for a, p in zip(ACTIONS, y)})

    def scores(self, transcript: str) -> tuple[np.ndarray, float]:
        """(log-scores, shrink): the network's logits and the support shrink of its units, or
        for a remembered transcript the log of the distribution its labels give and 1."""
        remembered = self.remembered(transcript)
        if remembered is not None:
            return np.log(remembered), 1.0
        ids, w, unknown = self.units.features(transcript, grow=False)
        long = self.units.long_mask(ids)
        return self.net.logits(ids, w), self.net.shrink(ids, w, unknown, long)

    def distribution(self, transcript: str) -> np.ndarray:
        """The model's own distribution (no class prior, no evidence weighting)."""
        scores, shrink = self.scores(transcript)
        return softmax(scores * shrink)

    def remembered(self, transcript: str) -> np.ndarray | None:
        """The distribution the labels of this exact transcript give, None if never labelled."""
        keys = self.memory.get(normalize(transcript))
        if not keys:
            return None
        labels = [self.examples[k][1] for k in keys]
        latest = np.eye(len(ACTIONS))[labels[-1]]
        uniform = np.full(len(ACTIONS), 1.0 / len(ACTIONS))
        if len(set(labels)) == 1:
            n = len(labels)
            return (n * latest + MEMORY_DOUBT * uniform) / (n + MEMORY_DOUBT)
        return MEMORY_CONFLICT_SHARE * latest + (1.0 - MEMORY_CONFLICT_SHARE) * uniform

    def predict_many(self, transcripts: list[str]) -> np.ndarray:
        return np.array([self.distribution(t) for t in transcripts])

    # -- learning --------------------------------------------------------------------------

    def observe(self, transcript: str) -> None:
        """An unlabelled transcript: its units join the vocabulary (the local block needs no
        label); the labelled statistics do not change."""
        self.encode(transcript, grow=True)
        self.units.features(transcript, grow=True)
        self.unlabeled_seen += 1

    def learn(self, transcript: str, label: str) -> float | None:
        """One online update from a labelled interaction: the example joins the statistics,
        the explicit layer is re-solved and ``refine_budget()`` refinement steps run. Returns
        the refinement objective before its last step (None when no step ran)."""
        if label not in LABEL_INDEX:
            raise ValueError(f"label must be one of {ACTIONS}, got {label!r}")
        seq, y = self.encode(transcript, grow=True), LABEL_INDEX[label]
        key = len(self.examples)
        self.examples.append((seq, y))
        ids, w, _ = self.units.features(transcript, grow=True)
        self.net.add(key, ids, w, y)
        self.net.solve()
        self.memory.setdefault(normalize(transcript), []).append(key)
        return self.net.refine(self.refine_budget())

    def refine_budget(self) -> int:
        """Refinement steps after one label: ``refine_steps``, fewer when the examples are many
        (at most ``refine_rows`` example-passes), at least one. Counted in steps, not time, so
        the result is deterministic."""
        c = self.config
        n = max(len(self.net.rows), 1)
        return max(1, min(c.refine_steps, c.refine_rows // n)) if c.refine_steps > 0 else 0

    def refine(self, steps: int) -> float | None:
        """``steps`` more full-batch refinement steps over every labelled example (the desktop
        trainer runs many; the device runs ``refine_budget()`` per label inside ``learn``)."""
        return self.net.refine(steps)

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
        """Change the label of example `key` (its index in ``examples``: learning order): its
        counts move from the old action's statistics to the new one's (exact: plain sums), the
        explicit layer is re-solved and ``refine_budget()`` refinement steps run. Returns False
        when the label already was `label` (nothing changes). What earlier refinement steps
        fitted to the old label is corrected by refinement, not taken back."""
        key = self._check_key(key)
        if label not in LABEL_INDEX:
            raise ValueError(f"label must be one of {ACTIONS}, got {label!r}")
        seq, old = self.examples[key]
        new = LABEL_INDEX[label]
        if new == old:
            return False
        self.examples[key] = (seq, new)
        self.net.relabel(key, new)
        self.net.solve()
        self.net.refine(self.refine_budget())
        return True

    def forget_example(self, key: int) -> None:
        """Take example `key` out of the model: its counts leave the statistics (exact), its
        slot is marked removed (keys of the others do not change), its token ids are dropped and
        its transcript leaves the memory. Refinement steps then run on the remaining examples;
        what earlier steps fitted to the forgotten one is pulled back toward the explicit
        solution by them, not removed exactly (``rebuild`` is the exact way). Its units stay in
        the vocabulary (ids are append-only) but carry no labelled evidence any more."""
        key = self._check_key(key)
        seq, y = self.examples[key]
        text = self.text_of(key)
        self.net.remove(key)
        self.net.solve()
        keys = self.memory.get(text, [])
        if key in keys:
            keys.remove(key)
        if not keys:
            self.memory.pop(text, None)
        self.examples[key] = ([], y)
        self.removed.add(key)
        self.net.refine(self.refine_budget())

    def regather_all(self) -> None:
        """Re-solve the explicit layer from the statistics (they are exact sums over the live
        examples, so nothing needs re-gathering)."""
        self.net.solve()

    # -- checkpoints ----------------------------------------------------------------------

    def save(self, path: str | Path, extra: dict | None = None) -> Path:
        """Atomic checkpoint with everything needed to continue learning identically: the
        examples (character ids + labels), the unit vocabulary, delta and b. The statistics
        are sums over the examples and are recomputed on load."""
        arrays = self.net.state_arrays()
        lengths = np.array([len(s) for s, _ in self.examples], dtype=np.int64)
        arrays["examples.ids"] = np.array([t for s, _ in self.examples for t in s], dtype=np.int64)
        arrays["examples.lengths"] = lengths
        arrays["examples.labels"] = np.array([y for _, y in self.examples], dtype=np.int64)
        arrays["examples.removed"] = np.array(sorted(self.removed), dtype=np.int64)
        arrays["units.vocabulary"] = np.frombuffer(json.dumps(self.units.to_json()).encode(), dtype=np.uint8)
        meta = {
            "kind": "edge-plm switch model",
            "model_format": MODEL_FORMAT,
            "config": dataclasses.asdict(self.config),
            "vocabulary": self.tokenizer.to_json(),
            "seed": self.seed,
            "counters": {"refine_steps": self.net.refine_steps_done, "n_active": self.net.n_active,
                         "labelled": self.n_examples,
                         "unlabelled": self.unlabeled_seen, "units": len(self.units)},
            **(extra or {}),
        }
        return checkpoint.save(path, arrays, meta)

    @classmethod
    def load(cls, path: str | Path) -> "SwitchModel":
        arrays, meta = checkpoint.load(path)
        if meta.get("kind") != "edge-plm switch model":
            raise CheckpointError(f"{path} is not a switch-model checkpoint (kind={meta.get('kind')!r})")
        fmt = meta.get("model_format", 1)
        if fmt != MODEL_FORMAT:
            raise CheckpointError(
                f"{path} holds a switch model of format {fmt} (written by an older edge-plm: the character "
                f"network); this edge-plm reads format {MODEL_FORMAT}. Rebuild the model from the database's "
                f"labels (`edge-plm model rebuild`) or train a new one")
        try:
            known = {f.name for f in dataclasses.fields(SwitchConfig)}
            cfg_dict = {k: v for k, v in dict(meta["config"]).items() if k in known}
            cfg_dict["widths"] = tuple(cfg_dict["widths"])
            config = SwitchConfig(**cfg_dict)
            tok = CharTokenizer.from_json(meta["vocabulary"])
            units = cls._vocab(config, json.loads(arrays["units.vocabulary"].tobytes().decode()))
            model = cls(config, tok, UnitNet(config), units, int(meta["seed"]))
            ids, lengths, labels = arrays["examples.ids"], arrays["examples.lengths"], arrays["examples.labels"]
            offsets = np.concatenate([[0], np.cumsum(lengths)])
            model.examples = [(ids[offsets[i]:offsets[i + 1]].tolist(), int(labels[i])) for i in range(len(lengths))]
            model.removed = {int(k) for k in arrays["examples.removed"].tolist()}
            if any(t < len(RESERVED) and j not in (0, len(s) - 2, len(s) - 1)
                   for s, _ in model.examples for j, t in enumerate(s)):
                raise ValueError("an example holds a reserved token inside its transcript")
            for key in model.live_keys():
                text = model.text_of(key)
                f_ids, w, _ = units.features(text, grow=False)
                model.net.add(key, f_ids, w, model.examples[key][1])
                model.memory.setdefault(text, []).append(key)
            model.net.solve()
            model.net.load_state(arrays)
            model.net.refine_steps_done = int(meta["counters"]["refine_steps"])
            model.net.n_active = max(model.net.n_active, int(meta["counters"]["n_active"]))
            model.meta = meta
            model.unlabeled_seen = int(meta["counters"].get("unlabelled", 0))
        except (KeyError, TypeError, ValueError, IndexError, UnicodeDecodeError) as exc:
            if isinstance(exc, CheckpointError):
                raise
            raise CheckpointError(f"{path}: incompatible checkpoint: {exc}") from exc
        return model
