"""Model configurations as dataclasses, and parameter counting.

The switch model (``edge_plm.switch.charnet``) is two SAFFU blocks and an output layer:
  local block  — at every position t: context = the last `window` tokens, query = token t,
                 `heads` attention heads with W_h in R^{window x window}, z_t = concat_h(a_h X),
                 h_t = softmax(z_t U) with U in R^{heads*bits x local_hidden};
  global block — at the DEVICE: position: context = the local states h of the whole dialogue,
                 query = the last state, branch width B = smallest of `widths` >= length,
                 W_B in R^{B x B}, z = L * a H, g = softmax(z U_B), U_B in R^{local_hidden x 3};
  output O     — R^{3 x 3}: the distribution over the action tokens ON / OFF / NOOP.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class SwitchConfig:
    name: str
    bits: int = 24  # bit-cipher width b
    window: int = 4  # local context (tokens) of the local block
    heads: int = 4  # local attention heads
    local_hidden: int = 256  # d_h of the local block (n-gram detector units)
    hidden_ngram: int = 4  # n of the n-gram whose identity is the local hidden target
    widths: tuple[int, ...] = (16, 32, 64, 128)  # global context branches
    shared_u2: bool = True  # one U_B for all branches (W_B stays per branch): few labels go further
    eps: float = 1e-3  # epsilon of the explicit solution (unlabelled layers)
    smoothing: float = 0.3  # additive prior (in counts) of the labelled layers U_B, O
    class_balance: bool = True  # balance ON/OFF/NOOP mass in statistics and loss
    lr: float = 0.01  # Adam learning rate of the online updates
    replay: int = 8  # replay mini-batch size per online update
    refresh: int = 4  # examples whose labelled-layer statistics are re-gathered per update
    update_steps: int = 0  # gradient steps per online update (0: explicit solution only; see BENCHMARKS.md)
    clip: float = 5.0  # gradient-norm clipping
    kernel: str = "numba"  # numba | numpy
    # the unit network (switch/unitnet.py), what the device runs; the fields above are SwitchNet's
    unit_cap: int = 60000  # units in the vocabulary at most (3 parameters each)
    unit_min_n: int = 2  # shortest character n-gram unit (word-anchored, padded with spaces)
    unit_max_n: int = 5  # longest
    bigram_weight: float = 0.0  # weight of a unit for each pair of adjacent words (0: none)
    sound_weight: float = 0.0  # weight of a word's Soundex-key unit (0: no such units)
    sound_max_len: int = 0  # > 0: Soundex units only for words of at most this many characters
    unit_tf: str = "count"  # a unit's weight from its occurrences c in a transcript: count c | log 1+ln c | binary 1
    ngram_mass: float = 0.0  # > 0: a word's n-grams share this weight (else each weighs 1)
    ngram_power: float = 1.0  # ... shared as ngram_mass / k^power among the word's k n-grams
    idf_power: float = 0.0  # input x = L2-normalised (weights x idf^p), idf = ln((1+N)/(1+df)) + 1 over the N labelled examples
    word_weight: float = 8.0  # weight of a whole-word unit relative to one n-gram occurrence
    alpha: float = 0.03  # additive smoothing of the explicit (naive-Bayes) solution
    logit_scale: float = 1.0  # U = logit_scale * B + delta
    l2: float = 0.02  # refinement's pull toward the explicit solution (|delta|^2, |b|^2)
    l2_df_power: float = 0.0  # per unit the pull is l2 x df^-power (df: labelled examples holding it)
    l2_n0: int = 0  # beyond this many labelled examples the pull weakens as l2_n0 / n (0: constant)
    refine_lr: float = 10.0  # refinement's gradient-descent step size (inputs are L2-normalised)
    refine_steps: int = 10  # full-batch refinement steps after each label
    refine_rows: int = 6000  # ... at most this many example-passes per label (steps x examples)
    # the SAFFU block over word positions (switch/attention.py, switch/words.py)
    attention: bool = True  # False: uniform pooling (W = 0), the network without attention
    attention_widths: tuple[int, ...] = (8, 16, 32, 64)  # context branches: one W_B per width B
    attention_warm_scale: float = 0.5  # W0 = this x the explicit solution (1.0 over-sharpens: BENCHMARKS.md)
    attention_lr: float = 1.0  # refinement's step size for W
    attention_l2: float = 0.02  # refinement's pull of W toward its warm start W0
    attention_refresh: int = 4  # earlier examples whose W statistics are re-gathered per label
    word_cap: int = 20000  # words in the word vocabulary at most (their codes are frozen)
    word_bits: int = 40  # bit-cipher width of the word codes
    query_words: int = 24  # the first (most frequent) words: the query vocabulary, with exclusive bits
    support_min_n: int = 4  # n-grams shorter than this do not count for the support (a calibration feature)

    def with_(self, **changes) -> "SwitchConfig":
        return dataclasses.replace(self, **changes)

    @property
    def max_len(self) -> int:
        return max(self.widths)

    def param_count(self) -> int:
        """Parameters of the device's switch model: U and b, and W of every attention branch."""
        return 3 * self.unit_cap + 3 + (sum(w * w for w in self.attention_widths) if self.attention else 0)

    def switchnet_param_count(self) -> int:
        """Parameters of the character-level SwitchNet (switch/charnet.py; benchmarks of its kernels)."""
        local = self.heads * self.window * self.window + self.heads * self.bits * self.local_hidden
        n_u2 = 1 if self.shared_u2 else len(self.widths)
        glob = sum(w * w for w in self.widths) + n_u2 * self.local_hidden * 3
        out = 3 * 3
        return local + glob + out


CONFIGS: dict[str, SwitchConfig] = {
    "potato": SwitchConfig(name="potato"),
    # orange: room for a household that talks a lot (600K parameters), 6-grams and word pairs,
    # twice the refinement per label; on switch-dev its curve equals potato's (BENCHMARKS.md §8)
    "orange": SwitchConfig(name="orange", bits=32, window=5, heads=5, local_hidden=512, hidden_ngram=5,
                        widths=(16, 32, 64, 128, 256), unit_cap=200_000, unit_max_n=6,
                        bigram_weight=1.0, refine_steps=20, refine_rows=20_000),
}


def get_config(name: str, **overrides) -> SwitchConfig:
    if name not in CONFIGS:
        raise ValueError(f"unknown model config {name!r}; known: {', '.join(CONFIGS)}")
    return CONFIGS[name].with_(**overrides) if overrides else CONFIGS[name]
