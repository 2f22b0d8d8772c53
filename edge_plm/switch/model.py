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

The model is composed of parts that own their state: ``store`` (the labelled examples,
``examples.ExampleStore``), ``memory`` (``memory.TranscriptMemory``), ``confidence`` (the
confidence maps, ``confidence.ConfidenceMap``), ``naming`` (what it knows of the devices' names,
``model_devices.DeviceNaming``), the owner's part ``net`` with the frozen ``start`` and the
``share`` that pools them (``owner.py``), and the vocabularies ``units`` and ``words``. The methods
here wire them. A transcript is normalised once, at the entry (``predict``, ``learn``,
``observe``, ``raw``, ``heldout_row``, ``remembered``; ``tokenizer.normalize``): what is passed
down (``predict_normalised``, ``learn_normalised``, ``placed``) is normalised text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edge_plm.actions import ACTIONS, INDEX
from edge_plm.switch import confidence, frozen, owner
from edge_plm.switch.confidence import ConfidenceMap
from edge_plm.switch.config import SwitchConfig, get_config
from edge_plm.switch.examples import ExampleStore
from edge_plm.switch.memory import MEMORY_CONFLICT_SHARE, MEMORY_DOUBT, TranscriptMemory  # noqa: F401 - re-exported
from edge_plm.switch.model_devices import DeviceNaming, SeveralDevices
from edge_plm.switch.model_file import MODEL_FORMAT, Checkpointed, unit_vocab, word_vocab  # noqa: F401 - MODEL_FORMAT: re-exported
from edge_plm.switch.query import query_evidence
from edge_plm.switch.scrub import Forgetting
from edge_plm.switch.share import OwnerShare, share_for
from edge_plm.switch.tokenizer import normalize
from edge_plm.switch.unitnet import UnitNet
from edge_plm.switch.units import UnitVocab
from edge_plm.switch.words import WordVocab

LABEL_INDEX = INDEX  # action name -> class index


@dataclass
class SwitchPrediction:
    action: str
    confidence: float
    distribution: dict[str, float]
    # several devices: how likely the utterance is no command at all (the command's NOOP; a
    # device's distribution's NOOP also holds "a command for another device"); None: one device
    not_command: float | None = None


@dataclass
class SwitchModel(SeveralDevices, Forgetting, Checkpointed):
    config: SwitchConfig
    net: UnitNet  # the owner's part (the whole model without a starting part)
    units: UnitVocab
    seed: int = 0
    words: WordVocab | None = None  # the attention's tokens (None: the config has no attention)
    store: ExampleStore = field(default_factory=ExampleStore, repr=False)  # the labelled examples
    unlabeled_seen: int = 0
    # the checkpoint's metadata when loaded (callers' ``extra`` included); {} for a new model
    meta: dict = field(default_factory=dict, repr=False, compare=False)
    memory: TranscriptMemory = field(default_factory=TranscriptMemory, repr=False)
    confidence: ConfidenceMap = field(default_factory=ConfidenceMap, repr=False)
    share: OwnerShare = field(default_factory=OwnerShare, repr=False)  # the owner's part's weight (share.py)
    start: UnitNet | None = field(default=None, repr=False, compare=False)  # the frozen starting part
    query_bags: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False, compare=False)
    naming: DeviceNaming = field(init=False, repr=False, compare=False)  # the devices' names (model_devices.py)

    def __post_init__(self) -> None:
        self.naming = DeviceNaming(self.words, self.config.unit_min_n, self.config.unit_max_n)

    @classmethod
    def empty(cls, config: str | SwitchConfig = "potato", seed: int = 0, **overrides) -> "SwitchModel":
        cfg = get_config(config, **overrides) if isinstance(config, str) else config
        words = word_vocab(cfg)
        return cls(cfg, UnitNet(cfg, words), unit_vocab(cfg), seed, words=words, share=share_for(cfg))

    # the parts' state, read only, for the callers that read it
    tokenizer = property(lambda self: self.store.tokenizer, doc="The examples' character vocabulary.")
    examples = property(lambda self: self.store.examples, doc="(character ids, label) by key (``ExampleStore``).")
    removed = property(lambda self: self.store.removed, doc="Keys of forgotten examples.")
    prior_examples = property(lambda self: self.store.prior, doc="Keys below this are the starting model's.")
    device_evidence = property(lambda self: self.naming.evidence, doc="The devices' word evidence (``DeviceNaming``).")
    name_query = property(lambda self: self.naming.query, doc="The devices' name queries (``DeviceNaming``).")

    def placed(self, text: str, grow: bool) -> owner.Placed:
        """(ids, weights, unknown, placed): the normalised transcript's units and, with attention,
        where they occur (word ids and the entries of ``UnitVocab.positioned``)."""
        if self.words is None:
            ids, w, unknown = self.units.features(text, grow=grow)
            return ids, w, unknown, None
        ids, w, unknown, entries = self.units.positioned(text, grow=grow)
        word_ids = np.array(self.words.ids(text, grow=grow), dtype=np.int64)
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

    def query_evidence(self) -> np.ndarray:
        """Each query word's labelled evidence in the owner's part (``query.py``)."""
        return query_evidence(self.net, self.words, self.query_bag)

    def update_query(self) -> None:
        """The query's weights: each query word's labelled evidence (``query_evidence``),
        scaled to a maximum of 1."""
        if self.words is None:
            return
        ev = self.query_evidence()
        top = ev.max() if len(ev) else 0.0
        self.net.set_query(ev / top if top > 0 else ev)

    def reconfigure(self, **changes) -> None:
        """The same model with ``changes`` to how it learns (e.g. ``replay_rows``), in every part."""
        self.config = self.net.config = self.config.with_(**changes)
        if self.start is not None:
            self.start.config = self.config

    @property
    def params(self) -> int:
        return self.config.param_count()

    def encode(self, transcript: str, grow: bool) -> list[int]:
        return self.store.encode(normalize(transcript), grow)

    def text_of(self, key: int) -> str:
        """The normalised transcript of example ``key`` (from its stored character ids)."""
        return self.store.text_of(key)

    # -- prediction ------------------------------------------------------------------------

    def predict(self, transcript: str, prior_strength: float = 0.0, evidence_prior: float = 0.0) -> SwitchPrediction:
        """The action and its calibrated confidence (``calibration.py``): the probability that
        it is right on wording the model has not heard. An exact transcript the person labelled
        is decided by its labels (``memory.py``). No labelled support, or fewer than two
        labelled actions: NOOP (``confidence.calibrated``).

        ``prior_strength`` a > 0 adds a x log(class frequencies + 1) to the network's logits
        before the calibration's features are taken (off by default: the calibration is fitted
        on the household's own held-out rows, which carry its class mix). ``evidence_prior``
        k > 0 then weighs the distribution (calibrated, or remembered) by the n labels the model
        holds (the owner's part's, when it decides alone: ``read``), p' = (n p + k/3) /
        (n + k): after the calibration, so the confidence the policy sees is p', not the
        calibrated p. Off here by default; the loop passes ``model.evidence_prior`` (3.0 by
        default: it matters only while few labels exist)."""
        return self.predict_normalised(normalize(transcript), prior_strength, evidence_prior)

    def predict_normalised(self, text: str, prior_strength: float = 0.0, evidence_prior: float = 0.0) -> SwitchPrediction:
        """``predict`` of the normalised transcript ``text``."""
        if evidence_prior < 0:
            raise ValueError(f"evidence_prior must be >= 0, got {evidence_prior}")
        remembered = self.memory.remembered(text, self.store.label)
        if remembered is not None:
            y, n = remembered, float(self.class_counts.sum())
            i = int(np.argmax(y))
        else:
            i, y, n = self.read(text, prior_strength)
        if evidence_prior:
            y = (n * y + evidence_prior / len(y)) / (n + evidence_prior)
        return SwitchPrediction(ACTIONS[i], float(y[i]), {a: float(p) for a, p in zip(ACTIONS, y)})

    def part_logits(self, text: str) -> tuple[np.ndarray | None, np.ndarray, float, bool]:
        """``owner.part_logits`` of the normalised transcript ``text`` (read only)."""
        row = self.placed(text, grow=False)
        return owner.part_logits(self.net, self.start, row, self.units.long_mask(row[0]), self.config.start_read_floor)

    def pooled(self, start: np.ndarray | None, own: np.ndarray, unread: bool) -> np.ndarray:
        """The model's log-probabilities from its parts' logits (``owner.pooled_scores``)."""
        return owner.pooled_scores(start, own, unread, self.net.class_counts > 0.5, self.owner_share)

    def read(self, text: str, prior_strength: float = 0.0) -> tuple[int, np.ndarray, float]:
        """(top action, calibrated distribution, the labels behind it) of the normalised
        transcript ``text`` (``predict`` without its memory and evidence prior). What the
        starting part cannot read the owner's part decides alone, with its own map and labels
        (``ConfidenceMap.owner_calib``): 10 labels are as sure as a model of 10 labels."""
        start, own, support, unread = self.part_logits(text)
        scores = self.pooled(start, own, unread)
        if prior_strength:
            scores = scores + prior_strength * np.log(self.class_counts + 1.0)
        i, y = self.calibrated(scores, support, owner_alone=unread)
        return i, y, float((self.net.class_counts if unread else self.class_counts).sum())

    def raw(self, transcript: str) -> tuple[np.ndarray, float]:
        """(logits, support): the network's logits for the transcript and its labelled support."""
        start, own, support, unread = self.part_logits(normalize(transcript))
        return self.pooled(start, own, unread), support

    def owner_share(self) -> float:
        """How much the owner's part counts in the pooling (``switch/share.py``)."""
        return self.share.value(self.n_owner_examples)

    @property
    def class_counts(self) -> np.ndarray:
        """Labelled examples per action, of both parts."""
        return self.net.class_counts + (0.0 if self.start is None else self.start.class_counts)

    def calibrated(self, scores: np.ndarray, support: float, owner_alone: bool = False) -> tuple[int, np.ndarray]:
        """(top action, calibrated distribution) of the logits (``owner_alone``: the owner's map)."""
        return self.confidence.calibrated(scores, support, self.class_counts, self.start is not None, owner_alone)

    def held_out(self, text: str, label: str) -> None:
        """What a label tells before it is learned (prequential): a row of the confidence's
        calibration and, with a starting part, a row of the owner's share (``switch/share.py``).
        Nothing when the normalised transcript ``text`` is remembered (the memory decides it)."""
        if self.memory.remembered(text, self.store.label) is not None:
            return
        start, own, support, unread = self.part_logits(text)
        row = confidence.row_of(self.pooled(start, own, unread), support, self.class_counts, label)
        if row is not None:
            self.confidence.add(row, owner_alone=unread)
        if start is not None:
            p_start, p_own = owner.mixture_parts(start, own, self.net.class_counts > 0.5)
            self.share.add(p_start, p_own, INDEX[label], self.n_owner_examples)

    def heldout_row(self, transcript: str, label: str) -> tuple[np.ndarray, bool] | None:
        """The calibration row of a labelled transcript the model has not learned: (features,
        right?), or None when its exact transcript is remembered or nothing is known yet."""
        text = normalize(transcript)
        if self.memory.remembered(text, self.store.label) is not None:
            return None
        start, own, support, unread = self.part_logits(text)
        return confidence.row_of(self.pooled(start, own, unread), support, self.class_counts, label)

    def calibrate_on(self, rows: list[tuple[str, str]], strength: float = 30.0) -> dict:
        """Fit the confidence's map on held-out (text, label) rows (``ConfidenceMap.fit``)."""
        held = [r for r in (self.heldout_row(text, label) for text, label in rows) if r is not None]
        return self.confidence.fit(held, strength)

    def distribution(self, transcript: str) -> np.ndarray:
        """The model's distribution as the device uses it (no class prior, no evidence weighting)."""
        return np.array(list(self.predict(transcript).distribution.values()))

    def remembered(self, transcript: str) -> np.ndarray | None:
        """The distribution the labels of this exact transcript give, None if never labelled."""
        return self.memory.remembered(normalize(transcript), self.store.label)

    def predict_many(self, transcripts: list[str]) -> np.ndarray:
        return np.array([self.distribution(t) for t in transcripts])

    # -- learning --------------------------------------------------------------------------

    def observe(self, transcript: str) -> None:
        """An unlabelled transcript: its units join the vocabulary (the local block needs no
        label); the labelled statistics do not change."""
        text = normalize(transcript)
        self.store.encode(text, grow=True)
        self.placed(text, grow=True)
        self.unlabeled_seen += 1

    def learn(self, transcript: str, label: str) -> float | None:
        """One online update from a labelled interaction: the example joins the statistics,
        the explicit layer is re-solved and ``refine_budget()`` refinement steps run. Returns
        the refinement objective before its last step (None when no step ran)."""
        return self.learn_normalised(normalize(transcript), label)

    def learn_normalised(self, text: str, label: str) -> float | None:
        """``learn`` of the normalised transcript ``text``."""
        if label not in LABEL_INDEX:
            raise ValueError(f"label must be one of {ACTIONS}, got {label!r}")
        self.held_out(text, label)  # predicted before it is learned: calibration, share
        y = LABEL_INDEX[label]
        key = self.store.add(text, y)
        self.naming.evidence.add_text(text.split())
        ids, w, _, placed = self.placed(text, grow=True)
        self.net.add(key, ids, w, y, placed)
        self.net.solve()
        self.update_query()
        self.net.warm_refresh(key, self.config.attention_refresh)
        self.memory.add(text, key)
        loss = self._refine_label(key)
        self.update_query()  # what predictions (and a reload) compare with
        return loss

    def mark_start(self) -> None:
        """This model is where a device (or ``eval --init``) starts: every example it holds is
        the starting model's, frozen as ``start``; every later one is the owner's, learned
        into a new ``net`` of its own (module docstring)."""
        if self.store.prior == 0 and len(self.store):
            self.store.prior = len(self.store)
            self.config = self.config.with_(alpha_young=self.config.alpha)  # flat: SwitchConfig.alpha_young
            self.start = frozen.frozen_net(self.config, self.words, frozen.frozen_state(self.net))
            self.net = UnitNet(self.config, self.words)
            self.update_query()

    def refine_budget(self) -> int:
        """Refinement steps after one label (``owner.refine_budget``)."""
        return owner.refine_budget(self.config, self.n_owner_examples)

    def _refine_label(self, key: int) -> float | None:
        return owner.refine_label(self.net, self.config, self.seed, key, self.n_owner_examples)

    def refine(self, steps: int) -> float | None:
        """``steps`` more full-batch refinement steps over every labelled example (the desktop
        trainer runs many; the device runs ``refine_budget()`` per label inside ``learn``)."""
        loss = self.net.refine(steps)
        self.update_query()  # as after a learn: what predictions (and a reload) compare with
        return loss

    @property
    def n_examples(self) -> int:
        """Labelled examples the model holds now (forgotten ones not counted)."""
        return self.store.n_live

    @property
    def n_owner_examples(self) -> int:
        """Labelled examples of the owner's part now: every one the model holds beyond its
        starting model's (all of them for a model that started empty)."""
        return len(self.net.rows)

    def live_keys(self) -> list[int]:
        return self.store.live_keys()

    def check_key(self, key: int) -> int:
        return self.store.check_key(key, frozen_prior=self.start is not None)

    def relabel(self, key: int, label: str) -> bool:
        """Change the label of example `key` (its index in ``examples``: learning order): its
        counts move from the old action's statistics to the new one's (exact: plain sums), the
        explicit layer is re-solved and ``refine_budget()`` refinement steps run. Returns False
        when the label already was `label` (nothing changes). What earlier refinement steps
        fitted to the old label is corrected by refinement, not taken back."""
        key = self.check_key(key)
        if label not in LABEL_INDEX:
            raise ValueError(f"label must be one of {ACTIONS}, got {label!r}")
        new = LABEL_INDEX[label]
        if new == self.store.label(key):
            return False
        self.store.relabel(key, new)
        self.net.relabel(key, new)
        self.net.solve()
        self.update_query()
        self.net.warm_refresh(key, self.config.attention_refresh)
        self._refine_label(key)
        self.update_query()
        return True

    def regather_all(self) -> None:
        """Re-solve the explicit layer from the statistics (they are exact sums over the live
        examples, so nothing needs re-gathering), then the query and the attention's statistics
        (which go stale as the solution moves)."""
        self.net.solve()
        self.update_query()
        self.net.warm_all()
