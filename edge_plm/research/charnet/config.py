"""Configuration of the character SAFFU network (``research/charnet/network.py``).

Two SAFFU blocks and an output layer:
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
class CharNetConfig:
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
    update_steps: int = 0  # gradient steps per online update (0: explicit solution only; see docs/benchmarks-log.md)
    clip: float = 5.0  # gradient-norm clipping
    kernel: str = "numba"  # numba | numpy

    def with_(self, **changes) -> "CharNetConfig":
        return dataclasses.replace(self, **changes)

    @property
    def max_len(self) -> int:
        return max(self.widths)

    def param_count(self) -> int:
        local = self.heads * self.window * self.window + self.heads * self.bits * self.local_hidden
        n_u2 = 1 if self.shared_u2 else len(self.widths)
        glob = sum(w * w for w in self.widths) + n_u2 * self.local_hidden * 3
        return local + glob + 3 * 3


CONFIGS: dict[str, CharNetConfig] = {
    "potato": CharNetConfig(name="potato"),
    "orange": CharNetConfig(name="orange", bits=32, window=5, heads=5, local_hidden=512, hidden_ngram=5,
                            widths=(16, 32, 64, 128, 256)),
}


def get_config(name: str, **overrides) -> CharNetConfig:
    if name not in CONFIGS:
        raise ValueError(f"unknown model config {name!r}; known: {', '.join(CONFIGS)}")
    return CONFIGS[name].with_(**overrides) if overrides else CONFIGS[name]
