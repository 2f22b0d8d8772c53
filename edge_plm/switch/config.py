"""The device's switch model configurations (what `SwitchModel` runs; docs/method.md).

A transcript's words are the tokens. Each word has a frozen bit-cipher code (``word_bits``;
the ``query_words`` commonest words own exclusive bits) and a bag of collision-free units
(word-anchored character n-grams and the word). A SAFFU block attends over the word positions:
c = the comparisons of the words with the query (the query words weighted by their labelled
evidence; read from the cached block of C = E E^T), a = softmax(c W_B + mask) with one W_B per
context-length branch in ``attention_widths``; the attention-weighted, count-scaled sum of the
word bags, L2-normalised, goes through the action layer softmax(x U + b) with U = logit_scale x
B + delta: B the class-balanced explicit solution, delta its refinement. W = W0 + dW: W0 the
explicit warm start, dW its refinement. The confidence is calibrated (``switch/calibration.py``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class SwitchConfig:
    name: str
    kernel: str = "numba"  # numba | numpy: the refinement objective's backend (same results)
    class_balance: bool = True  # ON/OFF/NOOP count equally in the explicit solution and the loss
    eps: float = 1e-3  # epsilon of the attention's explicit solution
    # the units and the action layer (switch/units.py, switch/unitnet.py)
    unit_cap: int = 60000  # units in the vocabulary at most (3 parameters each)
    unit_min_n: int = 2  # shortest character n-gram unit (word-anchored, padded with spaces)
    unit_max_n: int = 5  # longest
    # weight of a unit for each pair of adjacent words (0: none). A model that learns from empty
    # reads pairs ("turn off" against "off the"): six splits from empty, clean mean .755 -> .774,
    # ASR .648 -> .658 (docs/benchmarks-log.md, "Word pairs for a device that starts empty"). The shipped
    # starting model was built without them (STARTING_OVERRIDES below)
    bigram_weight: float = 8.0
    sound_weight: float = 0.0  # weight of a word's Soundex-key unit (0: no such units)
    sound_max_len: int = 0  # > 0: Soundex units only for words of at most this many characters
    unit_tf: str = "count"  # a unit's weight from its occurrences c in a transcript: count c | log 1+ln c | binary 1
    ngram_mass: float = 0.0  # > 0: a word's n-grams share this weight (else each weighs 1)
    ngram_power: float = 1.0  # ... shared as ngram_mass / k^power among the word's k n-grams
    idf_power: float = 0.0  # input x = L2-normalised (weights x idf^p), idf = ln((1+N)/(1+df)) + 1 over the N labelled examples
    word_weight: float = 8.0  # weight of a whole-word unit relative to one n-gram occurrence
    alpha: float = 0.03  # additive smoothing of the explicit (naive-Bayes) solution, once the model holds many examples
    # ... and while it holds few: alpha_young with no labels, falling toward alpha as
    # young_n / (young_n + n) after n labelled examples (``solution.smoothing``). From empty, 0.1
    # gained .014 clean / .008 ASR balanced accuracy on the six splits; a flat 0.1 made an empty
    # model that learned 2,000 diverse lines collapse (.937 -> .737): the smoothing floors the
    # per-example rates of units (docs/benchmarks-log.md, "A young model's smoothing"). alpha_young = alpha:
    # flat (`train switch`, checkpoints from before the field, and a starting model's owner's
    # part: 0.1 there gained nothing clean and lost .003 ASR)
    alpha_young: float = 0.1
    young_n: float = 500.0
    logit_scale: float = 1.0  # U = logit_scale * B + delta
    l2: float = 0.02  # refinement's pull toward the explicit solution (|delta|^2, |b|^2)
    # ... and once the model holds more examples than one replay sample (replay_rows + 1), when
    # each label refines on a seeded sample rather than on every example: a stronger pull keeps
    # the samples' noise out of delta. From empty, six splits, ASR .690 / .746 / .758 -> .703 /
    # .769 / .779 at 100 / 200 / all labels, clean unchanged (docs/benchmarks-log.md, "A firmer pull once
    # a label refines on a sample"). 0: l2 throughout (starting models, older checkpoints)
    replay_l2: float = 0.05
    l2_df_power: float = 0.0  # per unit the pull is l2 x df^-power (df: labelled examples holding it)
    l2_n0: int = 0  # beyond this many labelled examples the pull weakens as l2_n0 / n (0: constant)
    refine_lr: float = 10.0  # refinement's gradient-descent step size (inputs are L2-normalised)
    refine_steps: int = 10  # refinement steps after each label (on its replay sample, below)
    refine_rows: int = 6000  # ... at most this many example-passes per label (steps x examples)
    # a label refines on itself and at most this many earlier examples (class-balanced, seeded):
    # an update costs the same at any history (0: every example, full batch); 64 gave the
    # curves of 128 on switch-dev at half the cost (docs/benchmarks-log.md, "Learns from its owner")
    replay_rows: int = 64
    # ... and at most this many example-passes (steps x examples) per label once it refines on
    # a replay sample: 6 steps on a full sample of 65, all 10 on fewer than 41 examples, so a
    # label costs about the same at 40 owner labels as at 5,000 (at 10 steps a full sample cost
    # up to 1.5x a young model's label); the curves did not move (docs/benchmarks-log.md, "Example-passes")
    replay_passes: int = 400
    # the owner's part counts n / (n + owner_backoff) after n owner labels (switch/owner.py);
    # 1000 beat 100 and 400 on switch-dev, clean and ASR (docs/benchmarks-log.md, "Learns from its owner")
    owner_backoff: float = 1000.0
    # ... unless the owner's labels, predicted before they were learned, show a share that decides
    # them better by more than owner_share_z standard errors (a paired test; switch/share.py) on
    # the newest owner_share_window of them; a penalty instead lost up to .05 on switch-dev ASR
    owner_share_z: float = 2.0
    owner_share_window: int = 400
    # ... once every action among those labels has this many rows: before that, a few rows of
    # one action passed the test and moved the share where nothing showed its cost to the
    # others (at 50 labels, 2 of them ON: .90 -> .74 held out; docs/benchmarks-log.md, "A share chosen
    # on one action's rows")
    owner_share_min_rows: int = 5
    # a transcript the starting part reads less than this share of (its support: words and
    # longer n-grams it has labelled) is decided by the owner's part alone when that reads more
    # of it: the starting model's opinion of a language it does not know is not evidence (0: off)
    start_read_floor: float = 0.3
    # the SAFFU block over word positions (switch/attention.py, switch/words.py)
    attention: bool = True  # False: uniform pooling (W = 0), the network without attention
    attention_widths: tuple[int, ...] = (8, 16, 32, 64)  # context branches: one W_B per width B
    # W0 = this x W's explicit solution; 0: W starts at 0 and only refinement moves it (the warm
    # start at 0.1 and 0.5 cost .04 balanced accuracy from the starting model: docs/benchmarks-log.md §1)
    attention_warm_scale: float = 0.0
    attention_lr: float = 1.0  # refinement's step size for W
    attention_l2: float = 0.02  # refinement's pull of W toward its warm start W0
    attention_refresh: int = 4  # earlier examples whose W statistics are re-gathered per label
    word_cap: int = 20000  # words in the word vocabulary at most (their codes are frozen)
    word_bits: int = 40  # bit-cipher width of the word codes
    query_words: int = 24  # the first (most frequent) words: the query vocabulary, with exclusive bits
    support_min_n: int = 4  # n-grams shorter than this do not count for the support (a calibration feature)
    # with several devices, the word that stands for the device's name in the command the action
    # is read from (switch/naming.py): a starting model trained with Home Assistant's commands
    # with this word as the name knows "turn on the <slot>"; "": the name's words are left out
    # (the shipped model; a trial `models/build_switch_en.py --slot-word` lost: docs/benchmarks-log.md)
    slot_word: str = ""

    def with_(self, **changes) -> "SwitchConfig":
        return dataclasses.replace(self, **changes)

    def param_count(self) -> int:
        """Parameters of the device's switch model: U and b, and W of every attention branch."""
        return 3 * self.unit_cap + 3 + (sum(w * w for w in self.attention_widths) if self.attention else 0)

    def refines_on_sample(self, n: int) -> bool:
        """Does a label of a net holding ``n`` examples refine on a replay sample (more than
        ``replay_rows`` + 1 examples), rather than on every example?"""
        return self.replay_rows > 0 and n > self.replay_rows + 1

    def __post_init__(self) -> None:
        # the refinement's step shrinks a pulled delta by 1 - refine_lr x pull: at 2 and beyond
        # it grows instead, and the model ends at chance without another sign
        for name in ("l2", "replay_l2"):
            if not 0.0 <= self.refine_lr * getattr(self, name) < 2.0:
                raise ValueError(f"refine_lr x {name} must be in [0, 2) or the refinement diverges; got "
                                 f"{self.refine_lr} x {getattr(self, name)}")


CONFIGS: dict[str, SwitchConfig] = {
    "potato": SwitchConfig(name="potato"),
    # orange: room for a household that talks a lot (600K parameters), 6-grams and word pairs,
    # twice the refinement per label; on switch-dev its curve equals potato's (docs/benchmarks-log.md §8)
    "orange": SwitchConfig(name="orange", attention_widths=(8, 16, 32, 64, 128), unit_cap=200_000, unit_max_n=6,
                           bigram_weight=1.0, refine_steps=20, refine_rows=20_000),
}


# How a starting model is built against a model that learns from empty on a device (the
# defaults): without word pairs, solved with the many-example smoothing from its first line (a
# flat 0.1 cost the starting model's validation file .913 -> .738), with one pull throughout.
# models/switch-en.npz was built with them (models/build_switch_en.py); `model import` accepts
# either structure.
STARTING_OVERRIDES: dict[str, float] = {"bigram_weight": 0.0, "alpha_young": 0.03, "replay_l2": 0.0}


def get_config(name: str, **overrides) -> SwitchConfig:
    if name not in CONFIGS:
        raise ValueError(f"unknown model config {name!r}; known: {', '.join(CONFIGS)}")
    return CONFIGS[name].with_(**overrides) if overrides else CONFIGS[name]
