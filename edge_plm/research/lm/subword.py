"""Tokenizers of the language model: raw characters (``char``) and byte-level BPE trained
with Hugging Face ``tokenizers`` (``bpe16k``; optional dependency, imported lazily).

Both are lossless (decode(encode(text)) == text for text of known symbols; byte-level BPE for
any text) and renumber their tokens by frequency on the training split: ids 0..2 are
reserved (``<pad>``, ``<unk>``, ``<bos>``), then tokens from most to least frequent (ties by
the token's own id/character), because the bit-cipher gives the sparsest codes to the lowest
ids (docs/design.md §2.1). Vocabularies are built in streaming passes (``texts`` is any iterable)
and are saved with the model as JSON (``to_json`` / ``tokenizer_from_json``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable

import numpy as np

PAD, UNK, BOS = 0, 1, 2
RESERVED = ("<pad>", "<unk>", "<bos>")


class CharVocab:
    kind = "char"

    def __init__(self, chars: Iterable[str]):
        self.tokens = list(RESERVED) + list(chars)
        self.index = {ch: i for i, ch in enumerate(self.tokens) if i >= len(RESERVED)}

    @classmethod
    def train(cls, texts: Iterable[str]) -> "CharVocab":
        counts: Counter = Counter()
        for t in texts:
            counts.update(t)
        return cls(sorted(counts, key=lambda ch: (-counts[ch], ch)))

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, text: str) -> np.ndarray:
        get = self.index.get
        return np.fromiter((get(ch, UNK) for ch in text), dtype=np.int64, count=len(text))

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self.tokens[i] if i >= len(RESERVED) else "" for i in ids)

    def to_json(self) -> dict:
        return {"kind": self.kind, "chars": self.tokens[len(RESERVED):]}


class BPEVocab:
    """HF byte-level BPE; ``rank[hf_id]`` = our frequency-ranked id, ``unrank`` the inverse."""

    kind = "bpe"

    def __init__(self, hf_json: str, rank: np.ndarray):
        from tokenizers import Tokenizer

        self.hf_json = hf_json
        self.hf = Tokenizer.from_str(hf_json)
        self.rank = np.asarray(rank, dtype=np.int64)
        self.unrank = np.zeros(len(self.rank), dtype=np.int64)
        self.unrank[self.rank] = np.arange(len(self.rank))

    @classmethod
    def train(cls, texts_factory, vocab_size: int) -> "BPEVocab":
        """``texts_factory()`` returns a fresh iterable of training texts (two streaming passes:
        one to learn the merges, one to count token frequencies for the ranking)."""
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(RESERVED),
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
        tok.train_from_iterator(texts_factory(), trainer=trainer)
        V = tok.get_vocab_size()
        counts = np.zeros(V)
        for t in texts_factory():
            np.add.at(counts, tok.encode(t).ids, 1.0)
        hf_ids = np.arange(V)
        special = [tok.token_to_id(s) for s in RESERVED]
        rest = np.array([i for i in hf_ids if i not in special], dtype=np.int64)
        rest = rest[np.lexsort((rest, -counts[rest]))]
        order = np.concatenate([np.array(special, dtype=np.int64), rest])  # order[our id] = hf id
        rank = np.zeros(V, dtype=np.int64)
        rank[order] = np.arange(V)
        return cls(tok.to_str(), rank)

    def __len__(self) -> int:
        return len(self.rank)

    def encode(self, text: str) -> np.ndarray:
        return self.rank[np.asarray(self.hf.encode(text).ids, dtype=np.int64)]

    def decode(self, ids: Iterable[int]) -> str:
        ids = [int(i) for i in ids if int(i) >= len(RESERVED)]
        return self.hf.decode(self.unrank[np.asarray(ids, dtype=np.int64)].tolist(), skip_special_tokens=True)

    def to_json(self) -> dict:
        return {"kind": self.kind, "hf": self.hf_json, "rank": self.rank.tolist()}


def tokenizer_from_json(d: dict):
    if d.get("kind") == "char":
        return CharVocab(d["chars"])
    if d.get("kind") == "bpe":
        return BPEVocab(d["hf"], np.asarray(d["rank"]))
    raise ValueError(f"unknown tokenizer kind {d.get('kind')!r}")


def tokenizer_digest(tok) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(tok.to_json(), sort_keys=True).encode()).hexdigest()[:16]
