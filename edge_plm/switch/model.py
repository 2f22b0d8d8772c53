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
from edge_plm.switch import calibration
from edge_plm.switch.calibration import Calibrator
from edge_plm.switch.config import SwitchConfig, get_config
from edge_plm.switch.tokenizer import RESERVED, CharTokenizer, normalize
from edge_plm.switch.unitnet import UnitNet
from edge_plm.switch.units import UnitVocab
from edge_plm.switch.words import WordVocab

LABEL_INDEX = INDEX  # action name -> class index


def softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max())
    return e / e.sum()

MODEL_FORMAT = 2  # 1: the character SwitchNet (edge_plm/charnet/); 2: the unit network (since 2026-12-01 with the word attention)
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
    words: WordVocab | None = None  # the attention's tokens (None: the config has no attention)
    calib: Calibrator = field(default_factory=Calibrator, repr=False)  # the confidence's map
    # examples with keys below this came with the starting model; the owner's later ones weigh
    # config.owner_weight each (0: no starting model, every example weighs 1)
    prior_examples: int = 0
    _query_bags: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def empty(cls, config: str | SwitchConfig = "potato", seed: int = 0, **overrides) -> "SwitchModel":
        cfg = get_config(config, **overrides) if isinstance(config, str) else config
        words = cls._words(cfg)
        return cls(cfg, CharTokenizer(), UnitNet(cfg, words), cls._vocab(cfg), seed, words=words)

    @staticmethod
    def _words(cfg: SwitchConfig, words=()) -> WordVocab | None:
        return WordVocab(cfg.word_cap, cfg.word_bits, cfg.query_words, words) if cfg.attention else None

    def placed(self, transcript: str, grow: bool) -> tuple[np.ndarray, np.ndarray, float, tuple | None]:
        """(ids, weights, unknown, placed): the transcript's units and, with attention, where
        they occur (word ids and the entries of ``UnitVocab.positioned``)."""
        if self.words is None:
            ids, w, unknown = self.units.features(transcript, grow=grow)
            return ids, w, unknown, None
        ids, w, unknown, entries = self.units.positioned(transcript, grow=grow)
        word_ids = np.array(self.words.ids(transcript, grow=grow), dtype=np.int64)
        return ids, w, unknown, (word_ids, *entries)

    def _query_bag(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        """Query word r's own units (cached once all of them have ids)."""
        bag = self._query_bags.get(r)
        if bag is None:
            ids, w, unknown = self.units.features(self.words.words[r], grow=False)
            bag = (ids, w)
            if not unknown:
                self._query_bags[r] = bag
        return bag

    def update_query(self) -> None:
        """The query's weights: each query word's labelled evidence, the spread of its own
        logits over the labelled actions (its unit bag through U), scaled to a maximum of 1."""
        if self.words is None:
            return
        net = self.net
        q = self.words.query_ids()
        present = net.class_counts > 0.5
        ev = np.zeros(len(q))
        if present.sum() >= 2:
            for r in q.tolist():
                ids, w = self._query_bag(r)
                if len(ids):
                    U = net.config.logit_scale * net.base[ids] + net.delta[ids]
                    s = net.inputs(ids, w) @ U[:, present]
                    ev[r] = float(s.max() - s.min())
        top = ev.max() if len(ev) else 0.0
        net.set_query(ev / top if top > 0 else ev)

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
        """The action and its calibrated confidence (``calibration.py``): the probability that
        it is right on wording the model has not heard. An exact transcript the person labelled
        is decided by its labels (module docstring). A transcript with no labelled support
        (every word and longer n-gram never seen in a labelled example) or a model with fewer
        than two labelled actions gives the uniform distribution and NOOP: nothing is known.

        ``prior_strength`` a > 0 adds a x log(class frequencies + 1) to the network's logits
        before the calibration's features are taken (off by default: the calibration is fitted
        on the household's own held-out rows, which carry its class mix). ``evidence_prior``
        k > 0 weighs the distribution by the n labels behind it, p' = (n p + k/3) / (n + k)
        (off by default: the calibration's prior does this job)."""
        if evidence_prior < 0:
            raise ValueError(f"evidence_prior must be >= 0, got {evidence_prior}")
        remembered = self.remembered(transcript)
        if remembered is not None:
            y = remembered
            i = int(np.argmax(y))
        else:
            scores, support = self.raw(transcript)
            if prior_strength:
                scores = scores + prior_strength * np.log(self.net.class_counts + 1.0)
            i, y = self.calibrated(scores, support)
        if evidence_prior:
            n = float(self.net.class_counts.sum())
            y = (n * y + evidence_prior / len(y)) / (n + evidence_prior)
        return SwitchPrediction(ACTIONS[i], float(y[i]), {a: float(p) for a, p in zip(ACTIONS, y)})

    def raw(self, transcript: str) -> tuple[np.ndarray, float]:
        """(logits, support): the network's logits for the transcript and its labelled support."""
        ids, w, unknown, placed = self.placed(transcript, grow=False)
        return self.net.logits(ids, w, placed), self.net.support(ids, w, unknown, self.units.long_mask(ids))

    def calibrated(self, scores: np.ndarray, support: float) -> tuple[int, np.ndarray]:
        """(top action, distribution): the calibrated confidence on the top action, the rest
        shared by the other actions in the network's proportions."""
        n_act = len(ACTIONS)
        present = self.net.class_counts > 0.5
        if support <= 0.0 or present.sum() < 2:
            return LABEL_INDEX["NOOP"], np.full(n_act, 1.0 / n_act)
        f, top = self.calibration_features(scores, support)
        conf = max(self.calib.confidence(f), 1.0 / n_act)
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
        return top, y

    def calibration_features(self, scores: np.ndarray, support: float) -> tuple[np.ndarray, int]:
        """(features, top action) of one prediction for the calibration map."""
        order = np.argsort(-scores, kind="stable")
        top = int(order[0])
        margin = float(scores[top] - scores[order[1]])
        return calibration.features(margin, min(max(support, 0.0), 1.0), ACTIONS[top] == "NOOP"), top

    def distribution(self, transcript: str) -> np.ndarray:
        """The model's distribution as the device uses it (no class prior, no evidence weighting)."""
        return np.array(list(self.predict(transcript).distribution.values()))

    def heldout_row(self, transcript: str, label: str) -> tuple[np.ndarray, bool] | None:
        """The calibration row of a labelled transcript the model has not learned: (features,
        right?), or None when its exact transcript is remembered or nothing is known yet."""
        if self.remembered(transcript) is not None:
            return None
        scores, support = self.raw(transcript)
        if support <= 0.0 or (self.net.class_counts > 0.5).sum() < 2:
            return None
        f, top = self.calibration_features(scores, support)
        return f, ACTIONS[top] == label

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

    def calibrate_on(self, rows: list[tuple[str, str]], strength: float = 30.0) -> dict:
        """Fit the calibration map on held-out labelled rows (text, label) — a validation file
        the model has not learned — and make it the prior that the device's own held-out rows
        pull away from (``strength``: the prior counts as that many rows); the device's rows
        start empty. Returns the rows used and the ECE of the confidence on them before/after."""
        X, y = [], []
        for text, label in rows:
            r = self.heldout_row(text, label)
            if r is not None:
                X.append(r[0])
                y.append(r[1])
        if not X:
            raise ValueError("no held-out row the calibration can use (empty rows, or nothing learned)")
        X, y = np.array(X), np.array(y, dtype=float)
        before = calibration.expected_calibration_error(calibration.sigmoid(X @ self.calib.theta), y)
        fit = Calibrator(strength=1.0)
        theta = fit.fit(X, y)
        self.calib = Calibrator(prior=theta, strength=strength)
        after = calibration.expected_calibration_error(calibration.sigmoid(X @ theta), y)
        return {"rows": len(y), "theta": theta.tolist(), "ece_before": before, "ece_after": after}

    # -- learning --------------------------------------------------------------------------

    def observe(self, transcript: str) -> None:
        """An unlabelled transcript: its units join the vocabulary (the local block needs no
        label); the labelled statistics do not change."""
        self.encode(transcript, grow=True)
        self.placed(transcript, grow=True)
        self.unlabeled_seen += 1

    def learn(self, transcript: str, label: str) -> float | None:
        """One online update from a labelled interaction: the example joins the statistics,
        the explicit layer is re-solved and ``refine_budget()`` refinement steps run. Returns
        the refinement objective before its last step (None when no step ran)."""
        if label not in LABEL_INDEX:
            raise ValueError(f"label must be one of {ACTIONS}, got {label!r}")
        row = self.heldout_row(transcript, label)  # predicted before it is learned: held out
        if row is not None:
            self.calib.add(*row)
        seq, y = self.encode(transcript, grow=True), LABEL_INDEX[label]
        key = len(self.examples)
        self.examples.append((seq, y))
        ids, w, _, placed = self.placed(transcript, grow=True)
        self.net.add(key, ids, w, y, placed, self.example_weight(key))
        self.net.solve()
        self.update_query()
        self.net.warm_refresh(key, self.config.attention_refresh)
        self.memory.setdefault(normalize(transcript), []).append(key)
        loss = self.net.refine(self.refine_budget())
        self.update_query()  # what predictions (and a reload) compare with
        return loss

    def example_weight(self, key: int) -> float:
        """How much example ``key`` counts: the owner's labels (learned after the starting
        model) weigh ``owner_weight``, the starting model's 1 (so the owner's labels win)."""
        return self.config.owner_weight if 0 < self.prior_examples <= key else 1.0

    def mark_start(self) -> None:
        """This model is where a device (or ``eval --init``) starts: every example it holds is
        the starting model's; every later one is the owner's (``example_weight``)."""
        if self.prior_examples == 0 and self.examples:
            self.prior_examples = len(self.examples)

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
        self.update_query()
        self.net.warm_refresh(key, self.config.attention_refresh)
        self.net.refine(self.refine_budget())
        self.update_query()
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
        self.update_query()
        if self.net.att is not None:
            self.net.att.solve()
        keys = self.memory.get(text, [])
        if key in keys:
            keys.remove(key)
        if not keys:
            self.memory.pop(text, None)
        self.examples[key] = ([], y)
        self.removed.add(key)
        self.net.refine(self.refine_budget())
        self.update_query()

    def regather_all(self) -> None:
        """Re-solve the explicit layer from the statistics (they are exact sums over the live
        examples, so nothing needs re-gathering), then the query and the attention's statistics
        (which go stale as the solution moves)."""
        self.net.solve()
        self.update_query()
        self.net.warm_all()

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
        arrays.update(self.calib.state())
        if self.words is not None:
            arrays["words.vocabulary"] = np.frombuffer(json.dumps(self.words.to_json()).encode(), dtype=np.uint8)
        meta = {
            "kind": "edge-plm switch model",
            "model_format": MODEL_FORMAT,
            "config": dataclasses.asdict(self.config),
            "vocabulary": self.tokenizer.to_json(),
            "seed": self.seed,
            "counters": {"refine_steps": self.net.refine_steps_done, "n_active": self.net.n_active,
                         "labelled": self.n_examples,
                         "unlabelled": self.unlabeled_seen, "units": len(self.units),
                         "attention_refresh_at": self.net._refresh_at,
                         "prior_examples": self.prior_examples},
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
            cfg_dict = {k: tuple(v) if isinstance(v, list) else v for k, v in cfg_dict.items()}
            config = SwitchConfig(**cfg_dict)
            tok = CharTokenizer.from_json(meta["vocabulary"])
            units = cls._vocab(config, json.loads(arrays["units.vocabulary"].tobytes().decode()))
            words = None
            if config.attention:
                stored = (json.loads(arrays["words.vocabulary"].tobytes().decode())
                          if "words.vocabulary" in arrays else ())
                words = cls._words(config, stored)
            model = cls(config, tok, UnitNet(config, words), units, int(meta["seed"]), words=words)
            ids, lengths, labels = arrays["examples.ids"], arrays["examples.lengths"], arrays["examples.labels"]
            offsets = np.concatenate([[0], np.cumsum(lengths)])
            model.examples = [(ids[offsets[i]:offsets[i + 1]].tolist(), int(labels[i])) for i in range(len(lengths))]
            model.removed = {int(k) for k in arrays["examples.removed"].tolist()}
            model.prior_examples = int(meta["counters"].get("prior_examples", 0))
            if any(t < len(RESERVED) and j not in (0, len(s) - 2, len(s) - 1)
                   for s, _ in model.examples for j, t in enumerate(s)):
                raise ValueError("an example holds a reserved token inside its transcript")
            if words is not None and "words.vocabulary" not in arrays:  # written before attention
                words.register(model.text_of(k) for k in model.live_keys())
            for key in model.live_keys():
                text = model.text_of(key)
                f_ids, w, _, placed = model.placed(text, grow=False)
                model.net.add(key, f_ids, w, model.examples[key][1], placed, model.example_weight(key))
                model.memory.setdefault(text, []).append(key)
            model.net.solve()
            model.net.load_state(arrays)
            model.update_query()  # with the loaded delta, as after the last learn
            if "attention.dW" not in arrays:  # a checkpoint written before attention: warm-start it
                model.net.warm_all()
            if "calibration.theta" in arrays:
                model.calib.load(arrays)
            model.net.refine_steps_done = int(meta["counters"]["refine_steps"])
            model.net.n_active = max(model.net.n_active, int(meta["counters"]["n_active"]))
            model.meta = meta
            model.unlabeled_seen = int(meta["counters"].get("unlabelled", 0))
            model.net._refresh_at = int(meta["counters"].get("attention_refresh_at", 0))
        except (KeyError, TypeError, ValueError, IndexError, UnicodeDecodeError) as exc:
            if isinstance(exc, CheckpointError):
                raise
            raise CheckpointError(f"{path}: incompatible checkpoint: {exc}") from exc
        return model
