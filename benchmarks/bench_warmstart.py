"""Explicit warm start vs random start (docs/design.md §2.3) on the switch-dev data.

Same architecture (a potato SwitchNet over the train file's characters), same loss (the
class-weighted cross-entropy of SwitchNet.loss, with the train file's class counts), same Adam
optimiser and the same mini-batch schedule; only the starting point differs:
  warm   — ``observe`` of the whole training file (labelled) + ``solve``: the explicit solution
           in ``base``, ``delta`` = 0;
  random — ``base`` = 0, ``delta`` ~ N(0, sigma) for several seeds (the only place randomness
           is used: this benchmark), for each sigma in --sigmas.
Reported: weighted CE and balanced accuracy on the train and test files at step 0 and after
each of --checkpoints Adam steps (mini-batches of --batch drawn with a fixed seed).

Usage (from the repo root):
    python3 benchmarks/bench_warmstart.py [--data ../shared/data] [--config potato]
        [--checkpoints 50,200] [--batch 32] [--seeds 3] [--sigmas 0.1,1.0]

Writes benchmarks/results/warmstart.json and prints a markdown table.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import (DEFAULT_DATA, describe, header, markdown_table, pin_one_core, shown,  # noqa: E402
                      warm_start, write_result)

pin_one_core()

from curves import load_jsonl  # noqa: E402  (imports NumPy: after the thread pinning)

import argparse  # noqa: E402
import copy  # noqa: E402
import dataclasses  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from edge_plm.research.charnet.config import get_config  # noqa: E402
from edge_plm.switch.model import LABEL_INDEX  # noqa: E402
from edge_plm.research.charnet.network import Batch, SwitchNet  # noqa: E402
from edge_plm.switch.tokenizer import CharTokenizer  # noqa: E402


def encode(rows, tok):
    return [tok.dialogue(r["text"], grow=False) for r in rows], np.array([LABEL_INDEX[r["label"]] for r in rows])


def balanced_accuracy(y_true: np.ndarray, proba: np.ndarray) -> float:
    pred = proba.argmax(axis=1)
    return float(np.mean([(pred[y_true == c] == c).mean() for c in np.unique(y_true)]))


def evaluate(net: SwitchNet, sets: dict) -> dict:
    out = {}
    for name, (seqs, labels) in sets.items():
        b = Batch.from_sequences(seqs, labels.tolist())
        proba = net.predict_proba(b)
        out[name] = {"loss": net.loss(b), "balanced_accuracy": balanced_accuracy(labels, proba)}
    return out


def train(net: SwitchNet, sets: dict, schedule: list[np.ndarray], checkpoints: list[int]) -> dict:
    seqs, labels = sets["train"]
    curve = {0: evaluate(net, sets)}
    t0 = time.perf_counter()
    for step, idx in enumerate(schedule, 1):
        net.train_step(Batch.from_sequences([seqs[i] for i in idx], labels[idx].tolist()))
        if step in checkpoints:
            curve[step] = evaluate(net, sets)
    return {"curve": curve, "train_seconds": time.perf_counter() - t0}


def random_start(empty: SwitchNet, sigma: float, seed: int) -> SwitchNet:
    """A copy of `empty` with ``base`` = 0 and ``delta`` ~ N(0, sigma) (seeded)."""
    net = copy.deepcopy(empty)
    r = np.random.default_rng(1000 + seed)
    for k in net.base:
        net.base[k][...] = 0.0
        net.delta[k][...] = r.normal(0.0, sigma, net.delta[k].shape)
    net.delta["W2"] *= net.w2_mask
    if getattr(net.config, "shared_u2", False):  # one U_B shared by all branches
        net.delta["U2"][:] = net.delta["U2"][0]
    if isinstance(getattr(net, "_effective", None), dict):
        net._effective.clear()  # the net caches base + delta: we wrote them directly
    return net


def summarise(runs: dict, sigmas: list[float], seeds: int, steps: list[int]) -> tuple[list[list[str]], dict]:
    """Table rows and summary: warm, and mean +- std over the seeds of each sigma."""
    groups = {"warm (explicit solution)": ["warm"]}
    for sigma in sigmas:
        groups[f"random N(0, {sigma:g}), {seeds} seeds"] = [f"random sigma={sigma:g} seed={s}" for s in range(seeds)]
    table, summary = [], {}
    for label, keys in groups.items():
        for split in ("train", "test"):
            row = [label, split]
            for s in steps:
                for metric in ("loss", "balanced_accuracy"):
                    vals = np.array([runs[k]["curve"][s][split][metric] for k in keys])
                    summary.setdefault(label, {}).setdefault(split, {}).setdefault(str(s), {})[metric] = \
                        {"mean": float(vals.mean()), "std": float(vals.std())}
                    row.append(f"{vals.mean():.3f}" + (f" ± {vals.std():.3f}" if len(vals) > 1 else ""))
            table.append(row)
    return table, summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--config", default="potato")
    ap.add_argument("--checkpoints", default="50,200")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--sigmas", default="0.1,1.0")
    args = ap.parse_args()
    checkpoints = sorted(int(x) for x in args.checkpoints.split(","))
    sigmas = [float(x) for x in args.sigmas.split(",")]

    train_rows = load_jsonl(args.data / "switch-dev-train.jsonl")
    test_rows = load_jsonl(args.data / "switch-dev-test.jsonl")
    tok = CharTokenizer.from_texts(r["text"] for r in train_rows)
    sets = {"train": encode(train_rows, tok), "test": encode(test_rows, tok)}
    train_seqs, train_labels = sets["train"]
    cfg = get_config(args.config)
    rng = np.random.default_rng(0)  # the mini-batch schedule, shared by every run
    schedule = [rng.choice(len(train_seqs), size=args.batch, replace=False) for _ in range(max(checkpoints))]

    empty = SwitchNet(cfg, len(tok))
    warm = copy.deepcopy(empty)
    t0 = time.perf_counter()
    warm_start(warm, [Batch.from_sequences(train_seqs[i:i + 64], train_labels[i:i + 64].tolist())
                      for i in range(0, len(train_seqs), 64)])
    warm_seconds = time.perf_counter() - t0
    # same loss weights for every run: the train file's class counts (what observe gathered)
    empty.class_counts = np.bincount(train_labels, minlength=3).astype(float)
    np.testing.assert_array_equal(warm.class_counts, empty.class_counts)

    runs = {"warm": train(warm, sets, schedule, checkpoints)}
    runs["warm"]["solve_seconds"] = warm_seconds
    for sigma in sigmas:
        for seed in range(args.seeds):
            runs[f"random sigma={sigma:g} seed={seed}"] = train(random_start(empty, sigma, seed), sets,
                                                                schedule, checkpoints)

    payload = header()
    payload.update(config=args.config, config_fields=dataclasses.asdict(cfg), params=cfg.param_count(),
                   batch=args.batch, checkpoints=checkpoints,
                   sigmas=sigmas, seeds=args.seeds, lr=cfg.lr,
                   data={"train": shown(args.data / "switch-dev-train.jsonl"),
                         "test": shown(args.data / "switch-dev-test.jsonl")},
                   runs={k: {"curve": {str(s): v for s, v in r["curve"].items()},
                             **{kk: vv for kk, vv in r.items() if kk != "curve"}} for k, r in runs.items()})
    steps = [0, *checkpoints]
    table, payload["summary"] = summarise(runs, sigmas, args.seeds, steps)
    path = write_result("warmstart", payload)
    print(describe(payload))
    print(f"\n{args.config} ({payload['params']:,} parameters), Adam lr {cfg.lr}, mini-batches of {args.batch} "
          f"(same schedule for every run); weighted CE / balanced accuracy; warm start took {warm_seconds:.1f} s\n")
    headers = ["start", "set"]
    for s in steps:
        headers += [f"CE @{s}", f"bal.acc @{s}"]
    print(markdown_table(headers, table))
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
