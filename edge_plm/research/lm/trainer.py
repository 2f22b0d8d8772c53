"""Desktop trainer of the SAFFU language model: explicit warm start -> frozen embeddings ->
thawed embeddings (docs/design.md §2.6), streaming, checkpointed, resumable.

Phases
  warm    one streaming pass over the first ``warm_tokens`` tokens of the training split
          (``research/lm/warmstart.py``); validation perplexity right after it ("step 0").
  freeze  Adam (lr) on W, U, O; E frozen, the comparison cache stays valid.
  thaw    Adam (lr_thaw) on W, U, O and E (projected to E >= 0); the cache is rebuilt whenever
          E changed (every step), and the rebuild time is part of the training time.
The thaw starts after (1 - thaw_frac) of ``steps`` or of ``time_budget`` seconds of training
time, whichever comes first; its step is recorded, so a resumed run thaws at the same step.

Training time = warm start + optimisation steps (cache rebuilds included); evaluation time is
measured separately. Checkpoints (``checkpoint_every`` steps, atomic) hold the model, Adam's
moments, the data stream's position and the history, so ``resume`` continues the same run:
same batches, same updates, same loss curve. A JSON log (``train_log.json``) is rewritten at
every evaluation and checkpoint.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np

from edge_plm.files import atomic_file
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.research.lm.corpus import BatchStream, batches_from_docs, iter_texts, read_window, split_offsets
from edge_plm.research.lm.model import SaffuLM
from edge_plm.research.lm.checkpoint import load_lm, save_lm
from edge_plm.research.lm.config import LMConfig
from edge_plm.research.lm.warmstart import LMWarmStart
from edge_plm.research.optim import Adam, clip_by_global_norm
from edge_plm.research.lm.subword import BPEVocab, CharVocab

CHECKPOINT = "checkpoint.npz"
LOG = "train_log.json"


def set_threads(n: int) -> None:
    """Same thread count for BLAS and Numba (oversubscribed BLAS threads spin and can be >10x
    slower on a busy 2-core machine; benchmarks/results/lm.md)."""
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n)
    except ImportError:  # pragma: no cover
        pass
    import numba

    numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))


def build_tokenizer(config: LMConfig, path, start: int, end: int):
    if config.level == "char":
        return CharVocab.train(iter_texts(path, start, end))
    if config.level == "bpe":
        return BPEVocab.train(lambda: iter_texts(path, start, end), config.vocab_size)
    raise ValueError(f"unknown tokenizer level {config.level!r} (char, bpe)")


class Evaluator:
    """Validation batches built once (documents order, bucketed); ``limit`` tokens subset."""

    def __init__(self, path, start, end, tokenizer, config: LMConfig, limit: int | None = None):
        self.batches = []
        n = 0
        for text in iter_texts(path, start, end):
            ids = tokenizer.encode(text)
            if limit is not None and n + len(ids) > limit:
                ids = ids[: max(0, limit - n)]
            if len(ids):
                self.batches.extend(batches_from_docs([ids], config.widths, 10**9))
                n += len(ids)
            if limit is not None and n >= limit:
                break
        # regroup per branch into large batches (same samples, fewer calls)
        by_branch: dict[int, list] = {}
        for b in self.batches:
            by_branch.setdefault(b.branch, []).append(b)
        from edge_plm.research.lm.corpus import LMBatch

        self.batches = []
        for bi, bs in sorted(by_branch.items()):
            ctx = np.concatenate([b.ctx for b in bs])
            lengths = np.concatenate([b.lengths for b in bs])
            targets = np.concatenate([b.targets for b in bs])
            for s in range(0, len(targets), 1024):
                self.batches.append(LMBatch(ctx[s:s + 1024], lengths[s:s + 1024], targets[s:s + 1024], bi))
        self.tokens = sum(len(b) for b in self.batches)

    def loss(self, model: SaffuLM) -> float:
        total = sum(float(model.nll(b).sum()) for b in self.batches)
        return total / max(self.tokens, 1)


class Trainer:
    def __init__(self, config: LMConfig, corpus, out, val=None, steps: int | None = None,
                 time_budget: float | None = None, resume: bool = False, threads: int = 1,
                 progress: bool = True, val_frac: float = 0.1):
        if steps is None and time_budget is None:
            raise ValueError("give --steps or --time-budget (or both)")
        self.config, self.corpus, self.out = config, str(corpus), Path(out)
        self.steps, self.time_budget, self.threads, self.progress = steps, time_budget, threads, progress
        if not Path(self.corpus).exists():
            raise FileNotFoundError(f"corpus not found: {self.corpus}")
        _, split, size = split_offsets(self.corpus, 0.0 if val else val_frac)
        self.train_range = (0, split)
        if val:
            if not Path(val).exists():
                raise FileNotFoundError(f"validation file not found: {val}")
            self.val_path, self.val_range = str(val), (0, os.path.getsize(val))
        else:
            self.val_path, self.val_range = self.corpus, (split, size)
        self.resume = resume
        self.log: dict = {}

    # -- state ------------------------------------------------------------------------------

    def _counters(self) -> dict:
        return {"step": self.step, "adam_steps": self.opt.steps, "thaw_step": self.thaw_step,
                "train_seconds": self.train_seconds, "eval_seconds": self.eval_seconds,
                "tokens": self.tokens, "stream": self.stream.state(), "rebuilds": self.model.cache.rebuilds,
                "rebuild_seconds": self.model.cache.rebuild_seconds, "steps_target": self.steps,
                "time_budget": self.time_budget, "log": self.log}

    def save(self) -> Path:
        extra = {f"adam.m.{k}": v for k, v in self.opt.m.items()}
        extra.update({f"adam.v.{k}": v for k, v in self.opt.v.items()})
        extra["train_loss"] = np.asarray(self.losses, dtype=np.float64)
        path = save_lm(self.out / CHECKPOINT, self.model, self.tok, extra, self._counters())
        self.write_log()
        return path

    def write_log(self) -> None:
        with atomic_file(self.out / LOG, "w", perms=0o644, durable=False) as f:
            f.write(json.dumps(self.log, indent=1))

    def _setup_fresh(self) -> None:
        c = self.config
        t0 = time.perf_counter()
        self.tok = build_tokenizer(c, self.corpus, *self.train_range)
        t_tok = time.perf_counter() - t0
        self.model = SaffuLM(c, len(self.tok))
        self.opt = Adam(c.lr)
        self.step, self.thaw_step, self.tokens = 0, None, 0
        self.train_seconds, self.eval_seconds = 0.0, 0.0
        self.losses: list[float] = []
        self.stream = BatchStream(self.corpus, *self.train_range, self.tok, c.widths, c.batch_size,
                                  c.window_chars, c.seed)
        self._make_evaluators()
        warm = LMWarmStart(self.model)
        n, pos = 0, self.train_range[0]
        while n < c.warm_tokens and pos < self.train_range[1]:
            docs, pos = read_window(self.corpus, pos, self.train_range[1], min(c.window_chars, c.warm_tokens))
            ids = [self.tok.encode(d) for d in docs]
            if n + sum(len(i) for i in ids) > c.warm_tokens:  # cut the slice at warm_tokens
                keep, left = [], c.warm_tokens - n
                for i in ids:
                    keep.append(i[:left])
                    left -= len(keep[-1])
                ids = keep
            n += sum(len(i) for i in ids)
            for b in batches_from_docs(ids, c.widths, 512):
                warm.observe(b)
        warm.finish()
        self.train_seconds = warm.seconds
        self.log = {"config": c.to_dict(), "corpus": self.corpus, "val": self.val_path,
                    "train_bytes": self.train_range, "val_bytes": self.val_range,
                    "vocab": len(self.tok), "params": c.param_count(len(self.tok)),
                    "params_with_embedding": c.param_count(len(self.tok), True),
                    "threads": self.threads, "tokenizer_seconds": t_tok,
                    "warm_start": warm.report(), "evals": [], "phases": {}, "checkpoints": []}
        self._evaluate("warm", full=True)

    def _make_evaluators(self) -> None:
        self.val_full = Evaluator(self.val_path, *self.val_range, self.tok, self.config)
        self.val_sub = Evaluator(self.val_path, *self.val_range, self.tok, self.config, self.config.eval_tokens)

    def _setup_resume(self) -> None:
        try:
            self.model, self.tok, arrays, meta = load_lm(self.out / CHECKPOINT, kernel=self.config.kernel)
        except CheckpointError:
            raise
        if self.model.config.with_(kernel=self.config.kernel) != self.config:
            raise CheckpointError(f"{self.out / CHECKPOINT}: was trained with config {self.model.config.name!r} "
                                  f"{self.model.config}, not {self.config}")
        cn = meta["counters"]
        self.opt = Adam(self.config.lr if cn["thaw_step"] is None else self.config.lr_thaw)
        self.opt.m = {k[7:]: np.array(v) for k, v in arrays.items() if k.startswith("adam.m.")}
        self.opt.v = {k[7:]: np.array(v) for k, v in arrays.items() if k.startswith("adam.v.")}
        self.opt.steps = int(cn["adam_steps"])
        self.step, self.thaw_step, self.tokens = int(cn["step"]), cn["thaw_step"], int(cn["tokens"])
        self.train_seconds, self.eval_seconds = float(cn["train_seconds"]), float(cn["eval_seconds"])
        self.losses = list(arrays["train_loss"])
        self.stream = BatchStream(self.corpus, *self.train_range, self.tok, self.config.widths,
                                  self.config.batch_size, self.config.window_chars, self.config.seed, cn["stream"])
        self.model.cache.rebuilds = int(cn["rebuilds"])
        self.model.cache.rebuild_seconds = float(cn["rebuild_seconds"])
        self.log = cn["log"]
        self.log.setdefault("resumed_at", []).append(self.step)
        self._make_evaluators()

    # -- loop -------------------------------------------------------------------------------

    def _evaluate(self, tag: str, full: bool = False) -> float:
        t0 = time.perf_counter()
        ev = self.val_full if full else self.val_sub
        loss = ev.loss(self.model)
        self.eval_seconds += time.perf_counter() - t0
        rec = {"tag": tag, "step": self.step, "tokens": self.tokens, "train_seconds": round(self.train_seconds, 3),
               "val_loss": loss, "val_ppl": float(np.exp(loss)), "val_tokens": ev.tokens, "full": full}
        self.log["evals"].append(rec)
        if full:
            self.log["phases"][tag] = rec
        self.write_log()
        return loss

    def _thaw_due(self) -> bool:
        c = self.config
        if self.steps is not None and self.step >= round(self.steps * (1 - c.thaw_frac)):
            return True
        return self.time_budget is not None and self.train_seconds >= self.time_budget * (1 - c.thaw_frac)

    def _done(self) -> bool:
        if self.steps is not None and self.step >= self.steps:
            return True
        return self.time_budget is not None and self.train_seconds >= self.time_budget

    def train_step(self) -> float:
        m, c = self.model, self.config
        t0 = time.perf_counter()
        batch = self.stream.next()
        thawed = not m.embeddings_frozen
        loss, grads = m.gradients(batch, need_dE=thawed)
        clip_by_global_norm(grads, c.clip)
        params = dict(m.params)
        if thawed:
            params["E"] = m.E
        self.opt.step(params, grads)  # in place on the model's arrays
        if thawed:
            np.maximum(m.E, 0.0, out=m.E)  # codes stay non-negative (the explicit solution needs it)
            m.comparisons()  # rebuild now: counted in this step's time
        self.train_seconds += time.perf_counter() - t0
        self.step += 1
        self.tokens += len(batch)
        self.losses.append(loss)
        return loss

    def run(self, stop_after: int | None = None) -> dict:
        """Train until done (or ``stop_after`` more steps: used by tests to simulate an
        interruption). Returns the log."""
        from edge_plm.research.lm.progress import make_progress

        set_threads(self.threads)
        self.out.mkdir(parents=True, exist_ok=True)
        if self.resume and (self.out / CHECKPOINT).exists():
            self._setup_resume()
        else:
            self._setup_fresh()
            self.save()
        c, m = self.config, self.model
        if self.thaw_step is not None:
            m.embeddings_frozen = False
        taken = 0
        with make_progress(self.progress, self.steps, self.time_budget) as prog:
            while not self._done():
                if stop_after is not None and taken >= stop_after:
                    return self.log
                if self.thaw_step is None and self._thaw_due():
                    self._evaluate("freeze", full=True)
                    self.thaw_step = self.step
                    m.embeddings_frozen = False
                    self.opt.lr = c.lr_thaw
                loss = self.train_step()
                taken += 1
                prog.update(self, loss)
                if c.eval_every and self.step % c.eval_every == 0:
                    self._evaluate("thaw" if self.thaw_step is not None else "freeze")
                if c.checkpoint_every and self.step % c.checkpoint_every == 0:
                    self.save()
        if self.thaw_step is None:  # the run ended before the thaw
            self._evaluate("freeze", full=True)
        else:
            self._evaluate("thaw", full=True)
        self.log["summary"] = {
            "steps": self.step, "tokens": self.tokens, "thaw_step": self.thaw_step,
            "train_seconds": self.train_seconds, "eval_seconds": self.eval_seconds,
            "warm_seconds": self.log["warm_start"]["seconds"],
            "cache_rebuilds": m.cache.rebuilds, "cache_rebuild_seconds": m.cache.rebuild_seconds,
            "tokens_per_second": self.tokens / max(self.train_seconds - self.log["warm_start"]["seconds"], 1e-9),
            "final_val_loss": self.log["evals"][-1]["val_loss"], "final_val_ppl": self.log["evals"][-1]["val_ppl"],
        }
        self.save()
        return self.log
