"""The switch model as the device uses it: learn / predict / relabel / forget / save / load.

A transcript is a dialogue ``USER: <transcript> <sep> DEVICE:``; the prediction is the
distribution over the action tokens (`edge_plm.actions`) that may follow ``DEVICE:``. The
network is ``unitnet.UnitNet`` over the collision-free units of ``switch/units.py`` (docs/method.md).
``learn`` adds the interaction to the explicit statistics, re-solves the explicit layer and
runs a bounded number of refinement steps on it and a bounded replay sample of earlier examples
(``owner.replay_keys``), all deterministic: the same interactions in the same order give the
same model, byte for byte.

A device's model has two parts once it starts (``mark_start``): ``start``, the starting model,
frozen (it holds what prediction needs, not its examples' statistics), and ``net``, the owner's
part, learned from the owner's labels alone; the prediction pools them as a product, the
owner's evidence multiplying the starting model's odds (``switch/owner.py``). A model with no
starting model (an empty start, the desktop trainer) is ``net`` alone.

Corrections stick: the model remembers which labelled examples had each exact (normalised)
transcript. A transcript heard again is decided by the latest label the person gave it, not by
the generalising network: with every label of that transcript agreeing, the remembered action is
confident; when they disagree (the person corrected it), the latest label wins with a confidence
of 0.73 (MEMORY_CONFLICT_SHARE + its share of the rest), which the default policy asks about
instead of acting on. The memory is derived from the examples (so relabel / forget update it
and the checkpoint holds it through the examples).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from edge_plm.actions import ACTIONS, INDEX
from edge_plm.switch import confidence, frozen, model_devices, model_file, owner
from edge_plm.switch import scrub as scrubbing
from edge_plm.switch.query import query_evidence
from edge_plm.switch.model_file import MODEL_FORMAT  # noqa: F401 - the format this edge-plm reads and writes
from edge_plm.switch.calibration import Calibrator
from edge_plm.switch.config import SwitchConfig, get_config
from edge_plm.switch.device_evidence import DeviceEvidence
from edge_plm.switch.share import OwnerShare, share_for
from edge_plm.switch.tokenizer import CharTokenizer, normalize
from edge_plm.switch.unitnet import UnitNet
from edge_plm.switch.units import UnitVocab
from edge_plm.switch.words import WordVocab

LABEL_INDEX = INDEX  # action name -> class index

MEMORY_DOUBT = 0.1  # pseudo-count of "anything" next to n agreeing labels of an exact transcript
MEMORY_CONFLICT_SHARE = 0.6  # weight of the latest label when labels of a transcript disagree


@dataclass
class SwitchPrediction:
    action: str
    confidence: float
    distribution: dict[str, float]
    # several devices: how likely the utterance is no command at all (the command's NOOP; a
    # device's distribution's NOOP also holds "a command for another device"); None: one device
    not_command: float | None = None


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
    owner_calib: Calibrator = field(default_factory=lambda: Calibrator(name="owner_calibration"), repr=False)  # owner.read
    share: OwnerShare = field(default_factory=OwnerShare, repr=False)  # the owner's part's weight (share.py)
    # examples with keys below this came with the starting model (0: no starting model); they
    # are behind the frozen ``start``, the owner's later ones are ``net``'s
    prior_examples: int = 0
    start: UnitNet | None = field(default=None, repr=False, compare=False)  # the frozen starting part
    query_bags: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False, compare=False)
    device_evidence: DeviceEvidence = field(default_factory=DeviceEvidence, repr=False, compare=False)  # model_devices.py
    name_query = cached_property(model_devices.name_query)
    predict_devices, learn_devices = model_devices.predict_devices, model_devices.learn_devices
    relabel_devices, prepare_devices = model_devices.relabel_devices, model_devices.prepare_devices

    @classmethod
    def empty(cls, config: str | SwitchConfig = "potato", seed: int = 0, **overrides) -> "SwitchModel":
        cfg = get_config(config, **overrides) if isinstance(config, str) else config
        words = cls._words(cfg)
        return cls(cfg, CharTokenizer(), UnitNet(cfg, words), cls._vocab(cfg), seed, words=words,
                   share=share_for(cfg))

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

    def query_bag(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        """Query word r's own units (cached once all of them have ids)."""
        bag = self.query_bags.get(r)
        if bag is None:
            ids, w, unknown = self.units.features(self.words.words[r], grow=False)
            bag = (ids, w)
            if not unknown:
                self.query_bags[r] = bag
        return bag

    def update_query(self) -> None:
        """The query's weights: each query word's labelled evidence (``query_evidence``),
        scaled to a maximum of 1."""
        if self.words is None:
            return
        ev = query_evidence(self)
        top = ev.max() if len(ev) else 0.0
        self.net.set_query(ev / top if top > 0 else ev)

    @staticmethod
    def _vocab(cfg: SwitchConfig, units=()) -> UnitVocab:
        return UnitVocab(cfg.unit_cap, cfg.unit_min_n, cfg.unit_max_n, cfg.word_weight, units, cfg.support_min_n,
                         cfg.sound_weight, cfg.bigram_weight, cfg.unit_tf,
                         cfg.ngram_mass, cfg.ngram_power, cfg.sound_max_len)

    def reconfigure(self, **changes) -> None:
        """The same model with ``changes`` to how it learns (e.g. ``replay_rows``), in every part."""
        self.config = self.net.config = self.config.with_(**changes)
        if self.start is not None:
            self.start.config = self.config

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
        is decided by its labels (module docstring). No labelled support (no word or n-gram seen
        labelled), or fewer than two labelled actions: NOOP (``confidence.calibrated``).

        ``prior_strength`` a > 0 adds a x log(class frequencies + 1) to the network's logits
        before the calibration's features are taken (off by default: the calibration is fitted
        on the household's own held-out rows, which carry its class mix). ``evidence_prior``
        k > 0 then weighs the distribution (calibrated, or remembered) by the n labels the model
        holds (the owner's part's, when it decides alone: ``owner.read``), p' = (n p + k/3) /
        (n + k): after the calibration, so the confidence the policy sees is p', not the
        calibrated p. Off here by default; the loop passes ``model.evidence_prior`` (3.0 by
        default: it matters only while few labels exist)."""
        if evidence_prior < 0:
            raise ValueError(f"evidence_prior must be >= 0, got {evidence_prior}")
        remembered = self.remembered(transcript)
        if remembered is not None:
            y, n = remembered, float(self.class_counts.sum())
            i = int(np.argmax(y))
        else:
            i, y, n = owner.read(self, transcript, prior_strength)
        if evidence_prior:
            y = (n * y + evidence_prior / len(y)) / (n + evidence_prior)
        return SwitchPrediction(ACTIONS[i], float(y[i]), {a: float(p) for a, p in zip(ACTIONS, y)})

    def raw(self, transcript: str) -> tuple[np.ndarray, float]:
        """(logits, support): the network's logits for the transcript and its labelled support."""
        start, own, support, unread = owner.part_logits(self, transcript)
        return owner.model_scores(self, start, own, unread), support

    def owner_share(self) -> float:
        """How much the owner's part counts in the pooling (``switch/share.py``)."""
        return self.share.value(self.n_owner_examples)

    @property
    def class_counts(self) -> np.ndarray:
        """Labelled examples per action, of both parts."""
        return self.net.class_counts + (0.0 if self.start is None else self.start.class_counts)

    def calibrated(self, scores: np.ndarray, support: float) -> tuple[int, np.ndarray]:
        """(top action, calibrated distribution) of the network's logits (``confidence.py``)."""
        return confidence.calibrated(self, scores, support)

    def heldout_row(self, transcript: str, label: str) -> tuple[np.ndarray, bool] | None:
        """The calibration row of a labelled transcript not learned yet (``confidence.py``)."""
        return confidence.heldout_row(self, transcript, label)

    def calibrate_on(self, rows: list[tuple[str, str]], strength: float = 30.0) -> dict:
        """Fit the confidence's map on held-out (text, label) rows (``confidence.py``)."""
        return confidence.calibrate_on(self, rows, strength)

    def distribution(self, transcript: str) -> np.ndarray:
        """The model's distribution as the device uses it (no class prior, no evidence weighting)."""
        return np.array(list(self.predict(transcript).distribution.values()))

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
        self.placed(transcript, grow=True)
        self.unlabeled_seen += 1

    def learn(self, transcript: str, label: str) -> float | None:
        """One online update from a labelled interaction: the example joins the statistics,
        the explicit layer is re-solved and ``refine_budget()`` refinement steps run. Returns
        the refinement objective before its last step (None when no step ran)."""
        if label not in LABEL_INDEX:
            raise ValueError(f"label must be one of {ACTIONS}, got {label!r}")
        owner.held_out(self, transcript, label)  # predicted before it is learned: calibration, share
        seq, y = self.encode(transcript, grow=True), LABEL_INDEX[label]
        key = len(self.examples)
        self.examples.append((seq, y))
        self.device_evidence.add_text(self.text_of(key).split())
        ids, w, _, placed = self.placed(transcript, grow=True)
        self.net.add(key, ids, w, y, placed)
        self.net.solve()
        self.update_query()
        self.net.warm_refresh(key, self.config.attention_refresh)
        self.memory.setdefault(normalize(transcript), []).append(key)
        loss = owner.refine_label(self, key)
        self.update_query()  # what predictions (and a reload) compare with
        return loss

    def mark_start(self) -> None:
        """This model is where a device (or ``eval --init``) starts: every example it holds is
        the starting model's, frozen as ``start``; every later one is the owner's, learned
        into a new ``net`` of its own (module docstring)."""
        if self.prior_examples == 0 and self.examples:
            self.prior_examples = len(self.examples)
            self.config = self.config.with_(alpha_young=self.config.alpha)  # flat: SwitchConfig.alpha_young
            self.start = frozen.frozen_net(self.config, self.words, frozen.frozen_state(self.net))
            self.net = UnitNet(self.config, self.words)
            self.update_query()

    def refine_budget(self) -> int:
        """Refinement steps after one label (``owner.refine_budget``)."""
        return owner.refine_budget(self.config, self.n_owner_examples)

    def refine(self, steps: int) -> float | None:
        """``steps`` more full-batch refinement steps over every labelled example (the desktop
        trainer runs many; the device runs ``refine_budget()`` per label inside ``learn``)."""
        loss = self.net.refine(steps)
        self.update_query()  # as after a learn: what predictions (and a reload) compare with
        return loss

    @property
    def n_examples(self) -> int:
        """Labelled examples the model holds now (forgotten ones not counted)."""
        return len(self.examples) - len(self.removed)

    @property
    def n_owner_examples(self) -> int:
        """Labelled examples of the owner's part now: every one the model holds beyond its
        starting model's (all of them for a model that started empty)."""
        return len(self.net.rows)

    def live_keys(self) -> list[int]:
        return [k for k in range(len(self.examples)) if k not in self.removed]

    def check_key(self, key: int) -> int:
        key = int(key)
        if not 0 <= key < len(self.examples):
            raise KeyError(f"no example with key {key} (the model holds keys 0..{len(self.examples) - 1})")
        if key in self.removed:
            raise KeyError(f"example {key} was forgotten")
        if key < self.prior_examples and self.start is not None:
            raise KeyError(f"example {key} is the starting model's (frozen); only the owner's examples change")
        return key

    def relabel(self, key: int, label: str) -> bool:
        """Change the label of example `key` (its index in ``examples``: learning order): its
        counts move from the old action's statistics to the new one's (exact: plain sums), the
        explicit layer is re-solved and ``refine_budget()`` refinement steps run. Returns False
        when the label already was `label` (nothing changes). What earlier refinement steps
        fitted to the old label is corrected by refinement, not taken back."""
        key = self.check_key(key)
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
        owner.refine_label(self, key)
        self.update_query()
        return True

    def forget_example(self, key: int) -> None:
        """Take example `key` out (its counts exactly; what refinement fitted to it is pulled
        back; ``rebuild`` is the exact way; ``scrub`` takes its strings out)."""
        self.forget_examples([key])

    def forget_examples(self, keys: list[int]) -> None:
        """``forget_example`` of several keys at once: one solve and one round of refinement
        for any number of keys (``switch/scrub.py``)."""
        scrubbing.forget_examples(self, keys)

    def scrub(self, texts: list[str]) -> dict[str, int]:
        """Tombstone the unit and word strings that neither a live example nor ``texts`` uses;
        predictions for them do not change (``switch/scrub.py``)."""
        return scrubbing.scrub(self, texts)

    def regather_all(self) -> None:
        """Re-solve the explicit layer from the statistics (they are exact sums over the live
        examples, so nothing needs re-gathering), then the query and the attention's statistics
        (which go stale as the solution moves)."""
        self.net.solve()
        self.update_query()
        self.net.warm_all()

    # -- checkpoints ----------------------------------------------------------------------

    def save(self, path: str | Path, extra: dict | None = None) -> Path:
        """Atomic checkpoint with everything needed to continue learning identically
        (``model_file.save_model``)."""
        return model_file.save_model(self, path, extra)

    @classmethod
    def load(cls, path: str | Path) -> "SwitchModel":
        """A model from its checkpoint; ``CheckpointError`` when it is not a usable one."""
        return model_file.load_model(cls, path)
