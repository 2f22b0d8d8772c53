"""Training throughput of the Numba kernels vs the NumPy reference path (docs/design.md §5: Numba
>= 3x NumPy at equal results).

Same data, same starting point, same fixed batches, same number of steps: a potato SwitchNet is
warm-started once (``observe`` of the switch-dev train file + ``solve``), deep-copied, and each
copy runs ``SwitchNet.train_step`` with kernel="numba" or kernel="numpy". Reported: examples/s,
the speed-up, and the max abs difference of the final parameters and of the per-step losses.
A thawed run (embeddings trainable, dE computed) is measured too.

Usage (from the repo root):
    python3 benchmarks/bench_kernels.py [--data ../shared/data] [--config potato] [--steps 40]
        [--batch 32] [--repeats 3] [--all-threads]

Writes benchmarks/results/kernels.json and prints a markdown table. One core by default.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import (DEFAULT_DATA, describe, header, markdown_table, pin_one_core, shown,  # noqa: E402
                       warm_start, write_result)

if "--all-threads" not in sys.argv:
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


def make_batches(rows: list[dict], tok: CharTokenizer, size: int) -> list[Batch]:
    seqs = [tok.dialogue(r["text"]) for r in rows]
    labels = [LABEL_INDEX[r["label"]] for r in rows]
    return [Batch.from_sequences(seqs[i:i + size], labels[i:i + size]) for i in range(0, len(seqs), size)]


def run(net: SwitchNet, batches: list[Batch], steps: int) -> tuple[float, list[float], int]:
    losses, examples = [], 0
    t0 = time.perf_counter()
    for s in range(steps):
        b = batches[s % len(batches)]
        losses.append(net.train_step(b))
        examples += len(b.lengths)
    return time.perf_counter() - t0, losses, examples


def compare(start: SwitchNet, batches: list[Batch], steps: int, repeats: int, thaw: bool) -> dict:
    out = {}
    finals = {}
    for kernel in ("numba", "numpy"):
        times = []
        for _ in range(repeats):
            net = copy.deepcopy(start)
            net.config = net.config.with_(kernel=kernel)
            if thaw:
                net.thaw()
            seconds, losses, examples = run(net, batches, steps)
            times.append(seconds)
        best = min(times)
        out[kernel] = {"seconds_best": best, "seconds_all": times, "examples": examples,
                       "examples_per_s": examples / best, "final_loss": losses[-1]}
        finals[kernel] = (net, losses)
    (fast, lf), (ref, lr) = finals["numba"], finals["numpy"]
    out["speedup"] = out["numba"]["examples_per_s"] / out["numpy"]["examples_per_s"]
    out["max_abs_diff_params"] = max(float(np.abs(fast.delta[k] - ref.delta[k]).max()) for k in ref.delta)
    out["max_abs_diff_E"] = float(np.abs(fast.E - ref.E).max())
    out["max_abs_diff_loss"] = float(np.abs(np.array(lf) - np.array(lr)).max())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--config", default="potato")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3, help="best of N timed runs per kernel")
    ap.add_argument("--all-threads", action="store_true", help="do not pin to one core")
    args = ap.parse_args()

    rows = load_jsonl(args.data / "switch-dev-train.jsonl")
    tok = CharTokenizer.from_texts(r["text"] for r in rows)
    batches = make_batches(rows, tok, args.batch)
    cfg = get_config(args.config, kernel="numpy")
    start = SwitchNet(cfg, len(tok))
    t0 = time.perf_counter()
    warm_start(start, batches)  # explicit warm start, the same for both kernels
    warm_s = time.perf_counter() - t0
    # compile / load the Numba cache outside the timings
    warm = copy.deepcopy(start)
    warm.config = warm.config.with_(kernel="numba")
    warm.train_step(batches[0])
    warm.thaw()
    warm.train_step(batches[0])

    payload = header()
    payload.update(config=args.config, config_fields=dataclasses.asdict(cfg), params=cfg.param_count(),
                   steps=args.steps, batch=args.batch,
                   batches=len(batches), repeats=args.repeats, warm_start_s=warm_s,
                   data=shown(args.data / "switch-dev-train.jsonl"))
    payload["frozen"] = compare(start, batches, args.steps, args.repeats, thaw=False)
    payload["thawed"] = compare(start, batches, args.steps, args.repeats, thaw=True)
    path = write_result("kernels", payload)

    table = []
    for regime in ("frozen", "thawed"):
        r = payload[regime]
        table.append([regime, f"{r['numba']['examples_per_s']:.0f}", f"{r['numpy']['examples_per_s']:.0f}",
                      f"{r['speedup']:.2f}x", f"{r['max_abs_diff_loss']:.2e}", f"{r['max_abs_diff_params']:.2e}",
                      f"{r['max_abs_diff_E']:.2e}"])
    print(describe(payload))
    print(f"\n{args.config} ({payload['params']:,} parameters), {args.steps} train_step calls on "
          f"{len(batches)} fixed batches of {args.batch}, best of {args.repeats}\n")
    print(markdown_table(["regime", "numba ex/s", "numpy ex/s", "speed-up", "max |Δ loss|", "max |Δ delta|",
                          "max |Δ E|"], table))
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
