#!/usr/bin/env python3
"""Calibration of the device's confidence (issue: a confidence that means what it says).

Two models, each scored on switch-dev-test (clean text and as pocketsphinx heard it), with the
prediction the device makes (``SwitchModel.predict``: the calibrated confidence):
  shipped  the starting model as shipped (``--init``, default models/switch-en.npz), before any label;
  empty    an empty potato model after every line of switch-dev-train (clean / ASR to match the
           test text), fed through ``SwitchModel.learn`` in file order (the ``edge-plm eval`` path).
Reported per model and text: ECE (10 equal-width bins, ``calibration.expected_calibration_error``),
the reliability table (per bin: predictions, mean confidence, accuracy), what the policy's
thresholds would do with the test lines (acted = ON/OFF at or above act, their precision; asked;
commands acted right), and the confidence of made-up utterances. A reliability diagram of all
four is written to benchmarks/results/calibration.png.

    python3 benchmarks/calibration.py [--init CKPT] [--data ../shared/data]

Writes benchmarks/results/calibration.json and prints markdown.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import DEFAULT_DATA, RESULTS, header, markdown_table, shown, write_result  # noqa: E402
from curves import load_switch_dev  # noqa: E402

from edge_plm.config.settings import Settings  # noqa: E402
from edge_plm.switch.calibration import expected_calibration_error  # noqa: E402
from edge_plm.switch.model import SwitchModel  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
NONSENSE = ["zxqv blorf gnarp", "quaxe vlimph drozzle", "krrt mnemb fyxl", "ploo ghuzz vexterim"]
BINS = 10


def reliability(conf: np.ndarray, right: np.ndarray) -> list[list]:
    idx = np.clip(np.ceil(conf * BINS).astype(int) - 1, 0, BINS - 1)
    return [[f"{b / BINS:.1f}-{(b + 1) / BINS:.1f}", int((idx == b).sum()), float(conf[idx == b].mean()),
             float(right[idx == b].mean())] for b in range(BINS) if (idx == b).any()]


def score(model: SwitchModel, test: list[dict], s: Settings) -> dict:
    preds = [model.predict(r["text"]) for r in test]
    conf = np.array([p.confidence for p in preds])
    truth = np.array([r["label"] for r in test])
    action = np.array([p.action for p in preds])
    right = (action == truth).astype(float)
    command = action != "NOOP"
    act = command & (conf >= s.policy.act_threshold)
    ask = command & (conf >= s.policy.ask_threshold) & ~act
    wanted = truth != "NOOP"
    return {"ece": expected_calibration_error(conf, right), "accuracy": float(right.mean()),
            "reliability": reliability(conf, right), "acted": int(act.sum()),
            "acted_precision": float(right[act].mean()) if act.any() else None,
            "commands_acted_right": [int((act & wanted & (right > 0)).sum()), int(wanted.sum())],
            "asked": int(ask.sum()), "asked_non_commands": int((ask & ~wanted).sum()),
            "nonsense_confidence": [model.predict(t).confidence for t in NONSENSE],
            "nonsense_actions": [model.predict(t).action for t in NONSENSE],
            "_conf": conf.tolist(), "_right": right.tolist()}


def plot(out: dict, path: Path) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(1, len(out), figsize=(4 * len(out), 4), sharey=True)
    for ax, (name, r) in zip(np.atleast_1d(axes), out.items()):
        rows = r["reliability"]
        mids = [float(x[0][:3]) + 0.05 for x in rows]
        ax.bar(mids, [x[3] for x in rows], width=0.09, color="#8fb8de", label="accuracy in bin")
        ax.plot([0, 1], [0, 1], "k--", lw=1, label="perfect")
        ax.plot([x[2] for x in rows], [x[3] for x in rows], "o-", color="#c0392b", label="(mean conf., acc.)")
        for m, x in zip(mids, rows):
            ax.text(m, 0.02, str(x[1]), ha="center", fontsize=7)
        ax.set_title(f"{name}\nECE {r['ece']:.3f}", fontsize=9)
        ax.set_xlabel("confidence")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
    np.atleast_1d(axes)[0].set_ylabel("accuracy (bar labels: predictions)")
    np.atleast_1d(axes)[0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--init", default=str(REPO / "models" / "switch-en.npz"))
    args = ap.parse_args(argv)
    s = Settings()
    out = {}
    for asr in (False, True):
        kind = "ASR" if asr else "clean"
        train, test = load_switch_dev(args.data, asr)
        out[f"shipped, n=0, {kind}"] = score(SwitchModel.load(args.init), test, s)
        empty = SwitchModel.empty(s.model.config)
        for r in train:
            empty.learn(r["text"], r["label"])
        out[f"empty, all {len(train)} labels, {kind}"] = score(empty, test, s)
    for name, r in out.items():
        print(f"\n### {name}: ECE {r['ece']:.3f}, accuracy {r['accuracy']:.3f}; at act {s.policy.act_threshold} / "
              f"ask {s.policy.ask_threshold}: acted {r['acted']} (precision {r['acted_precision']}), commands acted "
              f"right {r['commands_acted_right'][0]}/{r['commands_acted_right'][1]}, asked {r['asked']} "
              f"({r['asked_non_commands']} non-commands); nonsense "
              f"{', '.join(f'{a} {c:.2f}' for a, c in zip(r['nonsense_actions'], r['nonsense_confidence']))}\n")
        print(markdown_table(["confidence", "predictions", "mean confidence", "accuracy"],
                             [[b, n, f"{c:.3f}", f"{a:.3f}"] for b, n, c, a in r["reliability"]]))
    plot(out, RESULTS / "calibration.png")
    write_result("calibration", {**header(), "init": shown(args.init), "bins": BINS,
                                 "thresholds": {"act": s.policy.act_threshold, "ask": s.policy.ask_threshold},
                                 **{k: {kk: vv for kk, vv in v.items() if not kk.startswith("_")}
                                    for k, v in out.items()}})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
