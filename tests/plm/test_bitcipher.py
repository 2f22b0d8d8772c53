"""Bit-cipher embeddings (docs/design.md §2.1) and the character tokenizer (§2.7)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from edge_plm.plm.bitcipher import bit_cipher, code_patterns, embedding_hash, min_bits, radial_refine
from edge_plm.switch.tokenizer import (
    ACTION_IDS, DEVICE, PAD, RESERVED, SEP, UNK, USER, CharTokenizer, normalize,
)

# ---------------------------------------------------------------------------------------------
# bit cipher


@pytest.mark.parametrize("V,bits", [(1, 1), (3, 2), (7, 3), (8, 4), (15, 4), (40, 6), (255, 8), (300, 16)])
def test_codes_unique_nonneg_l1_normalised(V, bits):
    E = bit_cipher(V, bits)
    assert E.shape == (V, bits)
    assert E.dtype == np.float64
    assert (E >= 0).all()
    np.testing.assert_allclose(E.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    eta = code_patterns(V, bits)
    assert set(np.unique(eta)) <= {0.0, 1.0}
    assert (eta.sum(axis=1) >= 1).all(), "the all-zero code must never be used"
    assert len({row.tobytes() for row in eta}) == V, "codes must be distinct"
    assert len({row.tobytes() for row in E}) == V, "normalised codes must be distinct"


def test_deterministic_byte_identical():
    a, b = bit_cipher(100, 8), bit_cipher(100, 8)
    assert a.tobytes() == b.tobytes()
    assert embedding_hash(a) == embedding_hash(b)
    assert embedding_hash(a) != embedding_hash(bit_cipher(101, 8))


@pytest.mark.parametrize("V,expected", [(1, 1), (2, 2), (3, 2), (4, 3), (7, 3), (8, 4), (15, 4), (16, 5), (1000, 10)])
def test_min_bits(V, expected):
    assert min_bits(V) == expected == math.ceil(math.log2(V + 1))


@pytest.mark.parametrize("bits", [2, 3, 5])
def test_width_enforced_with_clear_error(bits):
    cap = 2**bits - 1
    bit_cipher(cap, bits)  # exactly enough codes: fine
    with pytest.raises(ValueError) as err:
        bit_cipher(cap + 1, bits)
    msg = str(err.value)
    assert str(min_bits(cap + 1)) in msg and str(bits) in msg and "bits" in msg


def test_sparsest_first_order():
    bits = 6
    eta = code_patterns(2**bits - 1, bits)
    weights = eta.sum(axis=1)
    assert (np.diff(weights) >= 0).all(), "code weight must never decrease with rank"
    for w in range(1, bits + 1):
        assert (weights == w).sum() == math.comb(bits, w)
    # all weight-1 codes first, in bit order; then weight-2 in lexicographic order of positions
    np.testing.assert_array_equal(eta[:bits], np.eye(bits))
    pairs = [tuple(np.flatnonzero(r)) for r in eta[bits:bits + math.comb(bits, 2)]]
    assert pairs == list(itertools.combinations(range(bits), 2))
    # values: weight-w codes are 1/w on their bits
    E = bit_cipher(2**bits - 1, bits)
    np.testing.assert_allclose(E[bits], [0.5, 0.5, 0, 0, 0, 0])


def test_growing_vocabulary_keeps_old_codes():
    small, big = bit_cipher(20, 8), bit_cipher(50, 8)
    assert small.tobytes() == big[:20].tobytes()


def _corpus():
    rng = np.random.default_rng(3)
    return [rng.integers(0, 12, size=n).tolist() for n in (5, 9, 1, 14, 3)]


def test_radial_refine_nonneg_normalised_deterministic():
    E = bit_cipher(15, 4)
    seqs = _corpus()
    R1 = radial_refine(E, seqs, radii=(1, 2), weight=0.5)
    R2 = radial_refine(E, seqs, radii=(1, 2), weight=0.5)
    assert R1.tobytes() == R2.tobytes()
    assert (R1 >= 0).all()
    np.testing.assert_allclose(R1.sum(axis=1), 1.0, atol=1e-14)
    seen = {t for s in seqs for t in s if len(s) > 1}
    unseen = [v for v in range(15) if v not in seen]
    assert unseen, "test corpus must leave some tokens unseen"
    np.testing.assert_array_equal(R1[unseen], E[unseen])  # never-seen tokens keep their code
    assert not np.allclose(R1[sorted(seen)], E[sorted(seen)])  # seen tokens do move
    # weight 0 is the identity
    np.testing.assert_allclose(radial_refine(E, seqs, weight=0.0), E, atol=1e-15)


def test_radial_refine_hand_case():
    # sequence 0 1 with radius 1: token 0's only neighbour is 1 and vice versa
    E = bit_cipher(3, 2)  # e0=[1,0], e1=[0,1], e2=[.5,.5]
    R = radial_refine(E, [[0, 1]], radii=(1,), weight=0.25)
    np.testing.assert_allclose(R[0], [0.75, 0.25])
    np.testing.assert_allclose(R[1], [0.25, 0.75])
    np.testing.assert_allclose(R[2], [0.5, 0.5])


# ---------------------------------------------------------------------------------------------
# tokenizer


@pytest.mark.parametrize("raw,expected", [
    ("Turn ON the Light!", "turn on the light"),
    ("  lights,   off...\tplease\n", "lights off please"),
    ("what's up?", "what's up"),
    ("ＴＵＲＮ ｏｎ", "turn on"),  # NFKC full-width
    ("STRASSE Straße", "strasse strasse"),  # casefold
    ("!!!", ""),
    ("", ""),
    ("lamp-2 on", "lamp 2 on"),
])
def test_normalize(raw, expected):
    assert normalize(raw) == expected


def test_reserved_ids():
    tok = CharTokenizer()
    assert len(tok) == len(RESERVED) == 8
    assert (PAD, UNK, USER, DEVICE, SEP, *ACTION_IDS) == tuple(range(8))
    assert [tok.tokens[i] for i in ACTION_IDS] == ["ON", "OFF", "NOOP"]
    assert tok.index["<pad>"] == PAD and tok.index["<unk>"] == UNK
    # characters start after the reserved block
    assert tok.encode("a") == [8]


def test_from_texts_ranks_by_frequency_then_char():
    tok = CharTokenizer.from_texts(["bba", "ca", "a"])
    # counts: a=3, b=2, c=1
    assert tok.tokens[8:] == ["a", "b", "c"]
    tok2 = CharTokenizer.from_texts(["xy", "yx"])  # tie -> by character
    assert tok2.tokens[8:] == ["x", "y"]


def test_growth_keeps_ids_and_grow_false_maps_to_unk():
    tok = CharTokenizer()
    first = tok.encode("on")
    assert first == [8, 9]
    second = tok.encode("no one")
    assert second[:2] == [9, 8]  # n, o keep their ids
    assert len(tok) == 8 + 4  # o n ' ' e
    before = len(tok)
    assert tok.encode("onz", grow=False) == [8, 9, UNK]
    assert len(tok) == before, "grow=False must not add tokens"
    assert tok.encode("z") == [before]
    assert tok.encode("onz", grow=False) == [8, 9, before]


def test_add_rejects_multichar():
    with pytest.raises(ValueError):
        CharTokenizer().add("ab")


def test_dialogue_framing_and_json_roundtrip():
    tok = CharTokenizer()
    ids = tok.dialogue("Lamp ON!")
    assert ids[0] == USER and ids[-2:] == [SEP, DEVICE]
    assert tok.decode(ids) == "[USER:]lamp on[<sep>][DEVICE:]"
    assert tok.dialogue("", grow=False) == [USER, SEP, DEVICE]
    tok2 = CharTokenizer.from_json(tok.to_json())
    assert tok2.tokens == tok.tokens
    assert tok2.dialogue("lamp on", grow=False) == ids
