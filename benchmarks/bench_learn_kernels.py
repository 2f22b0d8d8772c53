"""Online-learning throughput of the Numba kernels vs the NumPy reference (docs/design.md §5).

The device learns through ``SwitchModel.learn`` (explicit statistics gathered layer by layer,
re-solved, plus the cyclic re-gather of earlier examples; gradient steps per the config). This
measures that path: two empty potato models, one per kernel backend, learn the same switch-dev
train prefix in the same order; reported are interactions/s, the speed-up, and the largest
difference between the two models' predictions on the test file (equal results).

Usage (from the repo root):
    python3 benchmarks/bench_learn_kernels.py [--data ../shared/data] [--n 200] [--config potato]
Writes benchmarks/results/learn_kernels.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import machine, pin_one_core  # noqa: E402

pin_one_core()  # before NumPy loads: its BLAS reads the thread count once, at import

import numpy as np  # noqa: E402

from curves import load_jsonl  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--config", default="potato")
    args = ap.parse_args()
    from edge_plm.switch.model import SwitchModel

    train = load_jsonl(Path(args.data) / "switch-dev-train.jsonl")[: args.n]
    test = [r["text"] for r in load_jsonl(Path(args.data) / "switch-dev-test.jsonl")]
    warm = SwitchModel.empty(args.config, kernel="numba")
    warm.learn("warm the numba cache", "NOOP")
    rows, probs = [], {}
    for kernel in ("numba", "numpy"):
        model = SwitchModel.empty(args.config, kernel=kernel)
        t0 = time.perf_counter()
        for r in train:
            model.learn(r["text"], r["label"])
        seconds = time.perf_counter() - t0
        probs[kernel] = model.predict_many(test)
        rows.append({"kernel": kernel, "interactions": len(train), "seconds": seconds,
                     "per_s": len(train) / seconds})
    speedup = rows[0]["per_s"] / rows[1]["per_s"]
    diff = float(np.abs(probs["numba"] - probs["numpy"]).max())
    print("| kernel | interactions/s | seconds |\n|---|---|---|")
    for r in rows:
        print(f"| {r['kernel']} | {r['per_s']:.1f} | {r['seconds']:.1f} |")
    print(f"\nspeed-up numba/numpy: {speedup:.2f}x; max |p_numba - p_numpy| on the test file: {diff:.2e}")
    out = Path(__file__).resolve().parent / "results" / "learn_kernels.json"
    out.write_text(json.dumps({"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               "command": "python3 " + " ".join(sys.argv), "machine": machine(),
                               "rows": rows, "speedup": speedup, "max_prob_diff": diff}, indent=1))


if __name__ == "__main__":
    main()
