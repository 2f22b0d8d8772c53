"""Shared helpers for the PLM core tests (small configs, random parameters, sequences)."""

from __future__ import annotations

import numpy as np

from edge_plm.research.charnet.config import get_config
from edge_plm.research.charnet.network import Batch, SwitchNet

VOCAB = 20


def small_config(kernel: str = "numpy", **overrides):
    kw = dict(bits=8, window=3, heads=2, local_hidden=6, widths=(8, 16), kernel=kernel)
    kw.update(overrides)
    return get_config("potato", **kw)


def random_net(kernel: str = "numpy", seed: int = 0, scale: float = 0.7, vocab: int = VOCAB, **overrides) -> SwitchNet:
    """A small SwitchNet with random non-zero parameters in ``delta`` (base stays the empty
    explicit solution) and unequal class counts, so the loss weighting is exercised."""
    net = SwitchNet(small_config(kernel, **overrides), vocab)
    rng = np.random.default_rng(seed)
    for k, v in net.delta.items():
        v[...] = rng.normal(0.0, scale, v.shape)
    net.delta["W2"] *= net.w2_mask
    if getattr(net.config, "shared_u2", False):  # one U_B shared by every branch
        net.delta["U2"][:] = net.delta["U2"][0]
    _invalidate(net)
    net.class_counts = np.array([3.0, 1.0, 2.0])
    return net


def random_sequences(lengths, seed: int = 1, vocab: int = VOCAB) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(1, vocab, size=n).tolist() for n in lengths]


def batch(lengths, labels=None, seed: int = 1) -> Batch:
    seqs = random_sequences(lengths, seed)
    if labels is None:
        labels = [i % 3 for i in range(len(seqs))]
    return Batch.from_sequences(seqs, labels)


def _invalidate(net: SwitchNet) -> None:
    """Drop a cache of effective parameters (base + delta) if the net keeps one."""
    eff = getattr(net, "_effective", None)
    if isinstance(eff, dict):
        eff.clear()


def copy_params(src: SwitchNet, dst: SwitchNet) -> None:
    for k in src.delta:
        dst.base[k] = src.base[k].copy()
        dst.delta[k] = src.delta[k].copy()
    dst.E = src.E.copy()
    dst.class_counts = src.class_counts.copy()
    _invalidate(dst)
