"""Streaming corpus reading and length-bucketed next-token batches (docs/design.md §2.5).

Memory is independent of corpus size: the file is read in *windows* of whole paragraphs
(about ``window_chars`` characters, split at blank lines), each window is turned into
samples, shuffled deterministically (seed, epoch, window index) and cut into batches.

A paragraph (lines up to and including the next blank line, so concatenating paragraphs
gives the file back) is a document: its tokens are predicted from ``<bos>`` and the tokens
before them in the same paragraph, at most ``max(widths)`` of them. Sample at position t:
context = seq[t], seq[t-1], ... (slot 0 = most recent), target = seq[t+1], seq = [<bos>] + doc.
Its branch is the smallest width >= its context length; a batch holds one branch only, padded
to that branch's width (so short contexts never pay for the longest width).

``BatchStream`` has a small JSON-able state (epoch, byte offset of the current window, window
index, batches already taken from it): a resumed stream re-reads that window and skips the
taken batches, so an interrupted run sees exactly the same batches.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from edge_plm.research.lm.subword import BOS, PAD


@dataclass
class LMBatch:
    ctx: np.ndarray  # (N, B) int64, slot 0 = most recent token, PAD past the length
    lengths: np.ndarray  # (N,) int64, 1..B
    targets: np.ndarray  # (N,) int64
    branch: int  # index into widths (all samples of a bucketed batch share it)

    def __len__(self) -> int:
        return len(self.targets)


def split_offsets(path, val_frac: float = 0.1) -> tuple[int, int, int]:
    """(0, split, size): the training split is [0, split), validation [split, size); split is
    the first paragraph boundary at or after (1 - val_frac) of the file's bytes."""
    size = os.path.getsize(path)
    cut = int(size * (1.0 - val_frac))
    with open(path, "rb") as f:
        f.seek(cut)
        if cut > 0:
            f.readline()  # finish the current line
        while True:
            line = f.readline()
            if not line:
                return 0, size, size
            if line.strip() == b"":
                return 0, f.tell(), size


def read_window(path, start: int, end: int, window_chars: int, max_doc_chars: int = 1 << 20) -> tuple[list[str], int]:
    """Paragraphs from byte offset `start` (up to `end`) totalling >= window_chars characters
    (whole paragraphs; a paragraph longer than max_doc_chars is cut). Returns (docs, next)."""
    docs: list[str] = []
    total = 0
    with open(path, "rb") as f:
        f.seek(start)
        pos = start
        cur: list[bytes] = []
        cur_len = 0
        while pos < end:
            line = f.readline()
            if not line:
                break
            if pos + len(line) > end:
                line = line[: end - pos]
            pos += len(line)
            cur.append(line)
            cur_len += len(line)
            if line.strip() == b"" or cur_len >= max_doc_chars:
                text = b"".join(cur).decode("utf-8", errors="replace")
                docs.append(text)
                total += len(text)
                cur, cur_len = [], 0
                if total >= window_chars:
                    break
        if cur:
            docs.append(b"".join(cur).decode("utf-8", errors="replace"))
    return docs, pos


def iter_texts(path, start: int, end: int, window_chars: int = 1 << 16):
    """All paragraphs of [start, end), streamed."""
    pos = start
    while pos < end:
        docs, pos = read_window(path, pos, end, window_chars)
        yield from docs
        if not docs:
            break


def doc_samples(doc: np.ndarray, max_len: int):
    """(seq, positions, lengths): seq = [<bos>] + doc; predict seq[t+1] from seq[..t]."""
    seq = np.concatenate([[BOS], np.asarray(doc, dtype=np.int64)])
    t = np.arange(len(doc))
    return seq, t, np.minimum(t + 1, max_len)


def make_batch(seqs: list[np.ndarray], which: np.ndarray, pos: np.ndarray, lengths: np.ndarray, width: int,
               branch: int) -> LMBatch:
    N = len(which)
    ctx = np.full((N, width), PAD, dtype=np.int64)
    targets = np.empty(N, dtype=np.int64)
    for i in range(N):
        s, t, L = seqs[which[i]], pos[i], lengths[i]
        ctx[i, :L] = s[t - L + 1: t + 1][::-1]
        targets[i] = s[t + 1]
    return LMBatch(ctx, lengths.astype(np.int64), targets, branch)


def batches_from_docs(docs_ids: list[np.ndarray], widths: tuple[int, ...], batch_size: int,
                      rng: np.random.Generator | None = None, bucketed: bool = True) -> list[LMBatch]:
    """All samples of the documents as batches. Bucketed: one branch per batch, samples
    shuffled within their branch and batches shuffled across branches (``rng``; None keeps
    document order). Unbucketed (for tests/benchmarks): document order, padded to max(widths),
    ``branch`` = -1 (every sample still uses its own branch)."""
    Bmax = max(widths)
    seqs, which, pos, lens = [], [], [], []
    for d, doc in enumerate(docs_ids):
        if len(doc) == 0:
            continue
        seq, t, L = doc_samples(doc, Bmax)
        seqs.append(seq)
        which.append(np.full(len(t), len(seqs) - 1))
        pos.append(t)
        lens.append(L)
    if not seqs:
        return []
    which, pos, lens = np.concatenate(which), np.concatenate(pos), np.concatenate(lens)
    if not bucketed:
        out = []
        for s in range(0, len(which), batch_size):
            sl = slice(s, s + batch_size)
            out.append(make_batch(seqs, which[sl], pos[sl], lens[sl], Bmax, -1))
        return out
    branch = np.searchsorted(np.asarray(widths), lens)  # smallest width >= length (== branch_for)
    out = []
    for bi, B in enumerate(widths):
        idx = np.flatnonzero(branch == bi)
        if rng is not None:
            idx = idx[rng.permutation(len(idx))]
        for s in range(0, len(idx), batch_size):
            sel = idx[s: s + batch_size]
            out.append(make_batch(seqs, which[sel], pos[sel], lens[sel], B, bi))
    if rng is not None:
        out = [out[i] for i in rng.permutation(len(out))]
    return out


class BatchStream:
    """Endless, resumable stream of bucketed training batches over [start, end) of a file."""

    def __init__(self, path, start: int, end: int, tokenizer, widths, batch_size: int, window_chars: int,
                 seed: int = 0, state: dict | None = None):
        self.path, self.start, self.end = str(path), start, end
        self.tok, self.widths, self.batch_size = tokenizer, tuple(widths), batch_size
        self.window_chars, self.seed = window_chars, seed
        st = state or {"epoch": 0, "offset": start, "window": 0, "taken": 0}
        self.epoch, self.offset, self.window, self.taken = st["epoch"], st["offset"], st["window"], st["taken"]
        self._batches: list[LMBatch] | None = None
        self._next_offset = None
        self.tokens_read = 0

    def state(self) -> dict:
        return {"epoch": self.epoch, "offset": self.offset, "window": self.window, "taken": self.taken}

    def _load(self) -> None:
        while True:
            docs, nxt = read_window(self.path, self.offset, self.end, self.window_chars)
            if docs:
                break
            if self.offset == self.start:
                raise ValueError(f"{self.path}: no text in the training split")
            self.epoch, self.offset, self.window = self.epoch + 1, self.start, 0
        rng = np.random.default_rng([self.seed, self.epoch, self.window])
        self._batches = batches_from_docs([self.tok.encode(d) for d in docs], self.widths, self.batch_size, rng)
        self._next_offset = nxt

    def next(self) -> LMBatch:
        while True:
            if self._batches is None:
                self._load()
            if self.taken < len(self._batches):
                b = self._batches[self.taken]
                self.taken += 1
                self.tokens_read += len(b)
                return b
            self._batches = None
            self.window += 1
            self.taken = 0
            self.offset = self._next_offset
            if self.offset >= self.end:
                self.epoch, self.offset, self.window = self.epoch + 1, self.start, 0
