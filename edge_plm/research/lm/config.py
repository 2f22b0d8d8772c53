"""Configurations of the SAFFU next-token language model (the desktop trainer, `edge-plm train lm`).

One prediction: the context is the last K tokens of the current paragraph (slot k = k tokens
back, slot 0 = the most recent token = the query). Branch B = the smallest width >= K
(multi-context, docs/design.md §2.5); every branch has its own W_B (heads x B x B) and U_B
(heads*bits x hidden); the output O (hidden x V) is shared:

    c   = C[x_k, x_0]                     cached comparisons, C = E E^T   (K,)
    a_h = softmax(c W_B[h] + mask)        heads                            (H, K)
    z   = concat_h a_h X                                                   (H*b,)
    h   = softmax(z U_B)                                                   (hidden,)
    y   = softmax(h O)                                                     (V,)

Heads 0..positional_heads-1 are warm-started to attend to slot h (the n-gram heads); the
others to positions whose code resembles the target's (content heads). See ``research/lm/warmstart.py``.

The switch model's configurations (``switch/config.py``: potato, orange) belong to a different
model; these names (``char``, ``bpe16k``) refer to the language model only. ``bpe16k`` scales
the lecture's ~2K context down to 512 on a 2-core desktop: W_2048 alone would be
4 x 2048^2 = 16.8M parameters and 16M multiply-adds per token, and tinyshakespeare paragraphs
rarely exceed 512 subword tokens (see benchmarks/results/lm.md).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

LM_KIND = "edge-plm language model"


@dataclass(frozen=True)
class LMConfig:
    name: str
    level: str = "char"  # char | bpe
    vocab_size: int = 0  # BPE target vocabulary (char level: whatever the corpus has)
    bits: int = 16  # bit-cipher width b
    heads: int = 8
    positional_heads: int = 6  # heads warm-started on slot h; the rest are content heads
    hidden: int = 512  # width of h (the label-embedding simplex)
    widths: tuple[int, ...] = (16, 32, 64, 128)
    # explicit warm start (eps relative to the per-row-normalised co-occurrence F / rows)
    eps_W: float = 1e-6
    eps_U: float = 1e-7
    eps_O: float = 1e-6
    warm_tokens: int = 100_000  # size of the warm slice (first tokens of the training split)
    # gradient training
    batch_size: int = 128
    lr: float = 3e-3  # Adam, frozen-embedding phase
    lr_thaw: float = 5e-4  # Adam, thawed phase (all parameters including E)
    thaw_frac: float = 0.2  # last fraction of the steps/time budget runs thawed
    clip: float = 5.0
    kernel: str = "numba"  # numba | numpy
    # data stream
    window_chars: int = 65_536  # shuffle window of the streaming reader (bounded memory)
    seed: int = 0  # data order only; the model has no random numbers
    # bookkeeping
    checkpoint_every: int = 200
    eval_every: int = 100
    eval_tokens: int = 20_000  # periodic validation subset; phase ends use the whole split

    def with_(self, **changes) -> "LMConfig":
        return dataclasses.replace(self, **changes)

    @property
    def max_len(self) -> int:
        return max(self.widths)

    def param_shapes(self, vocab: int) -> dict[str, tuple[int, ...]]:
        shapes = {}
        for i, B in enumerate(self.widths):
            shapes[f"W.{i}"] = (self.heads, B, B)
            shapes[f"U.{i}"] = (self.heads * self.bits, self.hidden)
        shapes["O"] = (self.hidden, vocab)
        return shapes

    def param_count(self, vocab: int, include_embedding: bool = False) -> int:
        n = 0
        for s in self.param_shapes(vocab).values():
            p = 1
            for d in s:
                p *= d
            n += p
        return n + (vocab * self.bits if include_embedding else 0)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "LMConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown language-model config fields {unknown} (newer edge-plm?)")
        d = dict(d)
        d["widths"] = tuple(d["widths"])
        return cls(**d)


LM_CONFIGS: dict[str, LMConfig] = {
    # char level, SBC-sized: ~0.47M weights with a 67-symbol vocabulary
    "char": LMConfig(name="char"),
    # ~16K BPE vocabulary, context up to 512 (scaled down from ~2K, see module docstring)
    "bpe16k": LMConfig(name="bpe16k", level="bpe", vocab_size=16384, bits=32, heads=4, positional_heads=3,
                       hidden=512, widths=(32, 64, 128, 256, 512), batch_size=128, lr=2e-3, lr_thaw=3e-4,
                       warm_tokens=100_000, eval_tokens=8_000),
}


def get_lm_config(name: str, **overrides) -> LMConfig:
    if name not in LM_CONFIGS:
        raise ValueError(f"unknown language-model config {name!r}; known: {', '.join(LM_CONFIGS)}")
    return LM_CONFIGS[name].with_(**overrides) if overrides else LM_CONFIGS[name]
