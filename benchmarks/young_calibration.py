#!/usr/bin/env python3
"""The calibration prior of a model that starts empty (``switch/calibration.py``,
``YOUNG_THETA``): fitted on the held-out rows of young models, measured.

A model started empty has no validation file, so its confidence map starts from a prior that
its own held-out rows pull away from. This replays crowd streams from empty, each line
predicted before it is learned (prequential, as on a device), and keeps every held-out
calibration row (features, right?) with the number of labels the model held then. The map
fitted on all of them (one logistic regression, Newton's method, pulled toward the former guess
sigmoid(margin - 1) with the weight of one row: deterministic) is the prior printed at the end;
the report compares the confidence a device would show with the guess and with the fitted one,
by labels held: ECE, how many ON / OFF predictions reached the act threshold and how many of
those were wrong.

Streams: models/data/switch-dev-train.jsonl and its three ASR versions (clean and as
pocketsphinx heard them), ``--orders`` seeded shuffles of each. The result is written to
benchmarks/results/young-calibration.json.

    python3 benchmarks/young_calibration.py [--orders 3] [--act 0.8]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import REPO, describe, header, markdown_table, write_result  # noqa: E402

from edge_plm.switch import calibration  # noqa: E402
from edge_plm.switch.model import SwitchModel  # noqa: E402

STREAMS = ["switch-dev-train.jsonl", "switch-dev-train.asr1.jsonl", "switch-dev-train.asr2.jsonl",
           "switch-dev-train.asr3.jsonl"]
GUESS = np.array([1.0, 0.0, 0.0, -1.0])  # the empty model's prior before this fit: sigmoid(margin - 1)
AGES = [(0, 20), (20, 50), (50, 100), (100, 200), (200, 10_000)]


def young_rows(path: Path, order: int) -> list[tuple[int, np.ndarray, bool, str, str]]:
    """(labels held, features, right?, predicted, label) of each held-out row of one stream."""
    lines = [json.loads(line) for line in path.open(encoding="utf-8")]
    random.Random(order).shuffle(lines)
    model = SwitchModel.empty("potato")
    out = []
    for n, r in enumerate(lines):
        row = model.heldout_row(r["text"], r["label"])
        if row is not None:
            scores, support = model.raw(r["text"])
            top = model.calibrated(scores, support)[0]
            out.append((n, row[0], row[1], ("ON", "OFF", "NOOP")[top], r["label"]))
        model.learn(r["text"], r["label"])
    return out


def by_age(rows, theta: np.ndarray, act: float, evidence_prior: float) -> list[dict]:
    out = []
    for lo, hi in AGES:
        sel = [r for r in rows if lo <= r[0] < hi]
        if not sel:
            continue
        conf = calibration.sigmoid(np.array([r[1] for r in sel]) @ theta)
        # what the loop shows: the evidence prior p' = (n p + k/3) / (n + k) on top
        n = np.array([r[0] for r in sel], dtype=float)
        shown = (n * conf + evidence_prior / 3) / (n + evidence_prior)
        right = np.array([r[2] for r in sel], dtype=float)
        acts = [r for r, c in zip(sel, shown) if r[3] != "NOOP" and c >= act]
        out.append({"labels": f"{lo}-{hi if hi < 10_000 else ''}", "rows": len(sel),
                    "ece": calibration.expected_calibration_error(shown, right),
                    "acts": len(acts), "wrong_acts": sum(1 for r in acts if r[3] != r[4])})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--orders", type=int, default=3)
    ap.add_argument("--act", type=float, default=0.8, help="the policy's act threshold")
    ap.add_argument("--evidence-prior", type=float, default=3.0, help="settings model.evidence_prior")
    args = ap.parse_args()
    rows = []
    for name in STREAMS:
        for order in range(args.orders):
            rows += young_rows(REPO / "models" / "data" / name, order)
    X = np.array([r[1] for r in rows])
    y = np.array([r[2] for r in rows], dtype=float)
    fitted = calibration.Calibrator(prior=GUESS, strength=1.0).fit(X, y)
    payload = {**header(), "streams": STREAMS, "orders": args.orders, "rows": len(rows),
               "fitted_theta": fitted.tolist(), "guessed_theta": GUESS.tolist(),
               "shipped_theta": calibration.DEFAULT_THETA.tolist(),
               "guessed": by_age(rows, GUESS, args.act, args.evidence_prior),
               "fitted": by_age(rows, fitted, args.act, args.evidence_prior)}
    print(describe(payload))
    table = [[f"{name}", a["labels"], a["rows"], f"{a['ece']:.3f}", f"{a['wrong_acts']}/{a['acts']}"]
             for name in ("guessed", "fitted") for a in payload[name]]
    print(markdown_table(["prior", "labels held", "rows", "ECE", "wrong / acts"], table))
    print("fitted theta (margin, support, NOOP, 1):", np.round(fitted, 3).tolist())
    print(f"written {write_result('young-calibration', payload)}")


if __name__ == "__main__":
    main()
