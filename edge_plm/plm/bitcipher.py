"""Bit-cipher embeddings (docs/design.md §2.1): deterministic, non-negative, low-dimensional.

Token rank r (its id: reserved tokens first, then characters by frequency / arrival) gets the
r-th non-zero bit vector of length b in the order "all weight-1 codes, then all weight-2
codes, ..." (within a weight, lexicographic order of the set bit positions). Each code is
L1-normalised: e_v = eta_v / |eta_v|_1. No random numbers: the same vocabulary gives the same
matrix, byte for byte. A growing vocabulary only appends rows.

``radial_refine`` is the optional radial co-occurrence refinement: each token's code is mixed
with the codes of tokens seen at distances r in ``radii`` around it, then renormalised.
"""

from __future__ import annotations

import hashlib
import itertools
import math

import numpy as np


def min_bits(vocab_size: int) -> int:
    """Smallest b with 2^b - 1 >= V distinct non-zero codes."""
    return max(1, math.ceil(math.log2(vocab_size + 1)))


def code_patterns(n: int, bits: int) -> np.ndarray:
    """The first n codes (0/1 rows of length `bits`), sparsest first."""
    if n > 2**bits - 1:
        raise ValueError(f"{n} tokens need at least {min_bits(n)} bits, config has {bits}")
    rows = np.zeros((n, bits), dtype=np.float64)
    r = 0
    for weight in range(1, bits + 1):
        for positions in itertools.combinations(range(bits), weight):
            if r == n:
                return rows
            rows[r, list(positions)] = 1.0
            r += 1
    return rows


def bit_cipher(n: int, bits: int) -> np.ndarray:
    """V x b matrix of L1-normalised codes."""
    eta = code_patterns(n, bits)
    return eta / eta.sum(axis=1, keepdims=True)


def exclusive_bit_cipher(n: int, bits: int, exclusive: int) -> np.ndarray:
    """V x b codes where the first ``exclusive`` tokens own one bit each that no other token
    uses (one-hot on bits 0..exclusive-1) and the rest get the bit cipher of the remaining
    ``bits - exclusive`` bits, sparsest first, L1-normalised. A comparison of any token with one
    of the first ``exclusive`` tokens is then exactly 1 for itself and 0 for every other token:
    the switch's word attention compares with those tokens (docs/method.md, "Word attention").
    ``exclusive`` = 0 is ``bit_cipher``."""
    if not 0 <= exclusive < bits:
        raise ValueError(f"need 0 <= exclusive < bits, got exclusive={exclusive}, bits={bits}")
    if exclusive == 0:
        return bit_cipher(n, bits)
    E = np.zeros((n, bits))
    k = min(n, exclusive)
    E[np.arange(k), np.arange(k)] = 1.0
    if n > exclusive:
        E[exclusive:, exclusive:] = bit_cipher(n - exclusive, bits - exclusive)
    return E


def radial_refine(E: np.ndarray, sequences, radii=(1, 2), weight: float = 0.5) -> np.ndarray:
    """Mix each code with the mean code of its neighbours at the given distances.

    E'_i = normalize((1 - weight) * e_i + weight * sum_r sum_j B^r_ij e_j / sum_r sum_j B^r_ij),
    where B^r counts how often token j stands r positions before or after token i.
    Tokens never seen keep their code. The result stays non-negative and L1-normalised.
    """
    V = E.shape[0]
    B = np.zeros((V, V))
    for seq in sequences:
        seq = np.asarray(seq)
        for r in radii:
            if len(seq) > r:
                np.add.at(B, (seq[:-r], seq[r:]), 1.0)
                np.add.at(B, (seq[r:], seq[:-r]), 1.0)
    mass = B.sum(axis=1, keepdims=True)
    context = np.divide(B @ E, mass, out=np.zeros_like(E), where=mass > 0)
    mixed = np.where(mass > 0, (1 - weight) * E + weight * context, E)
    return mixed / mixed.sum(axis=1, keepdims=True)


def embedding_hash(E: np.ndarray) -> str:
    """Identity of an embedding matrix (shape + bytes), used to validate caches/checkpoints."""
    h = hashlib.sha256(str(E.shape).encode())
    h.update(np.ascontiguousarray(E, dtype=np.float64).tobytes())
    return h.hexdigest()[:16]
