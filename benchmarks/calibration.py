#!/usr/bin/env python3
"""Calibration of the device's confidence (issue: expected calibration error, thresholds).

An empty potato model learns every line of the training file through ``SwitchModel.learn`` (the
``edge-plm eval`` path), then predicts every test line the way the device does
(``Learner.predict``: ``prior_strength`` and ``evidence_prior`` from ``Settings().model``).
Reported, for the device's confidence and for the model's own distribution (no prior, no
evidence weighting):
  ECE        expected calibration error: 10 equal-width confidence bins, sum over bins of
             (share of predictions in the bin) x |accuracy in the bin - mean confidence in it|;
  reliability  per bin: predictions, mean confidence, accuracy;
  act/ask    at the policy's thresholds (``Settings().policy``): how many test lines would be
             acted on (confidence >= act, ON/OFF), their precision; asked; ignored;
  nonsense   the confidence given to made-up utterances whose units were never heard.

    python3 benchmarks/calibration.py [--asr] [--data ../shared/data]

Writes benchmarks/results/calibration[-asr].json and prints markdown.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import DEFAULT_DATA, header, markdown_table, write_result  # noqa: E402
from curves import load_switch_dev  # noqa: E402

from edge_plm.switch.model import SwitchModel  # noqa: E402
from edge_plm.settings import Settings  # noqa: E402

NONSENSE = ["zxqv blorf gnarp", "quaxe vlimph drozzle", "krrt mnemb fyxl", "ploo ghuzz vexterim"]
BINS = 10


def ece(conf: np.ndarray, correct: np.ndarray) -> tuple[float, list[list]]:
    edges = np.linspace(0.0, 1.0, BINS + 1)
    total, rows = 0.0, []
    for lo, hi in zip(edges[:-1], edges[1:]):
        sel = (conf > lo) & (conf <= hi) if lo > 0 else (conf >= lo) & (conf <= hi)
        if not sel.any():
            continue
        gap = abs(correct[sel].mean() - conf[sel].mean())
        total += sel.mean() * gap
        rows.append([f"{lo:.1f}-{hi:.1f}", int(sel.sum()), f"{conf[sel].mean():.3f}", f"{correct[sel].mean():.3f}"])
    return float(total), rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--asr", action="store_true", help="ASR transcripts (benchmarks/data/*.asr.jsonl)")
    args = ap.parse_args(argv)
    train, test = load_switch_dev(args.data, args.asr)
    s = Settings()
    model = SwitchModel.empty(s.model.config)
    for r in train:
        model.learn(r["text"], r["label"])
    truth = [r["label"] for r in test]
    out = {}
    for name, kw in (("device", dict(prior_strength=s.model.prior_strength, evidence_prior=s.model.evidence_prior)),
                     ("model", {})):
        preds = [model.predict(r["text"], **kw) for r in test]
        conf = np.array([p.confidence for p in preds])
        correct = np.array([p.action == t for p, t in zip(preds, truth)], dtype=float)
        e, rows = ece(conf, correct)
        act = np.array([p.action in ("ON", "OFF") and p.confidence >= s.policy.act_threshold for p in preds])
        ask = (conf >= s.policy.ask_threshold) & (conf < s.policy.act_threshold)
        nonsense = [model.predict(t, **kw).confidence for t in NONSENSE]
        out[name] = {"ece": e, "reliability": rows, "acted": int(act.sum()),
                     "acted_precision": float(correct[act].mean()) if act.any() else None,
                     "asked": int(ask.sum()), "ignored": int((conf < s.policy.ask_threshold).sum()),
                     "accuracy": float(correct.mean()), "nonsense_confidence": nonsense}
        print(f"\n### {name} confidence ({'ASR' if args.asr else 'clean'} text): ECE {e:.3f}, "
              f"accuracy {correct.mean():.3f}; at act {s.policy.act_threshold} / ask {s.policy.ask_threshold}: "
              f"acted {int(act.sum())} (precision {out[name]['acted_precision']}), asked {int(ask.sum())}; "
              f"nonsense confidence {', '.join(f'{c:.2f}' for c in nonsense)}\n")
        print(markdown_table(["confidence", "predictions", "mean confidence", "accuracy"], rows))
    write_result("calibration" + ("-asr" if args.asr else ""),
                 {**header(), "n_train": len(train), "n_test": len(test), "bins": BINS,
                  "thresholds": {"act": s.policy.act_threshold, "ask": s.policy.ask_threshold}, **out})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
