#!/usr/bin/env python3
"""A young model's calibration on held-out lines, two ways: the mean of each order's ECE (what
`learning_curve.py` reports as `ece_mean`) and the ECE of all orders' predictions pooled.

With 283 test lines in 10 bins, one order's ECE is noisy and biased upward (a bin of a few
lines is off by chance); pooling the orders' predictions (5 x 283) estimates the same
quantity with five times the lines per bin. Both are printed, with the reliability table of the
pooled predictions.

The model starts empty (`SwitchModel.empty("potato")`) and learns the first n lines of each
pyrandom order of switch-dev-train (the orders of `learning_curve.py`), then predicts
switch-dev-test (`--asr`: the ASR versions of both).

    python3 benchmarks/young_ece.py [--data ../shared/data] [--asr] [--orders 5] [--budgets 10,20,50]

Writes benchmarks/results/young-ece[-asr].json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import DEFAULT_DATA, describe, header, markdown_table, write_result  # noqa: E402
from curves import load_switch_dev, pyrandom_orders  # noqa: E402

from edge_plm.switch.calibration import expected_calibration_error  # noqa: E402
from edge_plm.switch.model import SwitchModel  # noqa: E402


def predictions(train: list[dict], test: list[dict], order: list[int], n: int) -> tuple[np.ndarray, np.ndarray]:
    """(confidence, right) of an empty model after the first n lines of ``order``."""
    m = SwitchModel.empty("potato", seed=0)
    for i in order[:n]:
        m.learn(train[i]["text"], train[i]["label"])
    preds = [m.predict(r["text"]) for r in test]
    return (np.array([p.confidence for p in preds]),
            np.array([p.action == r["label"] for p, r in zip(preds, test)]))


def reliability(conf: np.ndarray, right: np.ndarray) -> list[list]:
    bins = np.minimum((conf * 10).astype(int), 9)
    return [[f"{b / 10:.1f}-{(b + 1) / 10:.1f}", int((bins == b).sum()), f"{conf[bins == b].mean():.3f}",
             f"{right[bins == b].mean():.3f}"] for b in range(10) if (bins == b).any()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--asr", action="store_true")
    ap.add_argument("--orders", type=int, default=5)
    ap.add_argument("--budgets", default="10,20,50")
    args = ap.parse_args()
    train, test = load_switch_dev(args.data, asr=args.asr)
    orders = pyrandom_orders(len(train), args.orders)
    payload = header()
    payload["budgets"] = []
    for n in [int(b) for b in args.budgets.split(",")]:
        runs = [predictions(train, test, order, n) for order in orders]
        per_order = [expected_calibration_error(c, r) for c, r in runs]
        conf, right = np.concatenate([c for c, _ in runs]), np.concatenate([r for _, r in runs])
        payload["budgets"].append({"n": n, "ece_per_order": per_order, "ece_mean": float(np.mean(per_order)),
                                   "ece_pooled": expected_calibration_error(conf, right),
                                   "reliability": reliability(conf, right)})
    path = write_result("young-ece" + ("-asr" if args.asr else ""), payload)
    print(describe(payload))
    print(markdown_table(["labels", "ECE, mean of the orders' ECE", "ECE of the pooled predictions"],
                         [[b["n"], f"{b['ece_mean']:.3f}", f"{b['ece_pooled']:.3f}"] for b in payload["budgets"]]))
    for b in payload["budgets"]:
        print(f"\nafter {b['n']} labels, pooled predictions:")
        print(markdown_table(["confidence", "predictions", "mean confidence", "accuracy"], b["reliability"]))
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
