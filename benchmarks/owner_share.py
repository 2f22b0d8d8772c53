#!/usr/bin/env python3
"""The owner's share (edge_plm/switch/share.py) against the fixed back-off rule, on a household
the starting model can read and on one it cannot.

  --data de   (default) benchmarks/data/household-de.jsonl: Home Assistant's German sentences
              (benchmarks/data/ha_intents_de.py), the owner's 600 lines then 600 held out,
              from the English starting model (--init, default models/switch-en.npz);
  --data dev  switch-dev-train as the owner's labels, switch-dev-test held out (--asr: their
              ASR versions), from --init (use a starting model built without switch-dev-train:
              `python models/build_switch_en.py --without switch-dev-train --out
              runs/switch-en-noswdev --no-install`).

Each order of the owner's lines (pyrandom, --orders) is fed through `run_eval` (the `edge-plm
eval --init` path) with the share's test threshold set per variant (--z; "rule" = the back-off
rule alone), and logistic regression on the owner's labels alone (benchmarks/baselines.py) runs
on the same orders. Balanced accuracy on the held-out lines after n labels, mean over orders.

    python3 benchmarks/owner_share.py [--data de|dev] [--asr] [--init CKPT] [--orders 3] [--read-floor F]
        [--z rule,2]
Writes benchmarks/results/owner-share-<data>[-asr].json and prints a markdown table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baselines import lr_fit_predict  # noqa: E402
from benchinfo import DEFAULT_DATA, describe, header, markdown_table, write_result  # noqa: E402
from curves import balanced_accuracy, load_jsonl, load_switch_dev, pyrandom_orders  # noqa: E402

from edge_plm.learning.evaluation import load_init, run_eval  # noqa: E402
from edge_plm.switch.share import OwnerShare  # noqa: E402

HERE = Path(__file__).resolve().parent
RULE = 1e12  # a threshold no evidence passes: the share stays on the back-off rule


def household(data: str, asr: bool) -> tuple[list[dict], list[dict], list[int]]:
    """(the owner's lines, the held-out lines, budgets)."""
    if data == "de":
        rows = load_jsonl(HERE / "data" / "household-de.jsonl")
        return rows[:600], rows[600:], [0, 10, 20, 50, 100, 200, 550]
    train, test = load_switch_dev(DEFAULT_DATA, asr=asr)
    return train, test, [0, 10, 20, 50, 100, 200, len(train)]


def plm_curve(init: str, train, test, budgets, orders, z: float,
              read_floor: float | None = None) -> tuple[list[float], list[float]]:
    """(balanced accuracy, ECE) per budget, means over the orders; ``read_floor``: the
    model's ``start_read_floor`` instead of its own."""
    curves, eces = [], []
    for order in orders:
        model = load_init(init)
        if read_floor is not None:
            model.config = model.config.with_(start_read_floor=read_floor)
        model.share = OwnerShare(model.config.owner_backoff, z, model.config.owner_share_window)
        result = run_eval([train[i] for i in order], test, budgets, init=model)
        curves.append([b["balanced_accuracy"] for b in result["budgets"]])
        eces.append([b["ece"] for b in result["budgets"]])
    return np.mean(curves, axis=0).tolist(), np.mean(eces, axis=0).tolist()


def lr_curve(train, test, budgets, orders) -> list[float | None]:
    truth, texts = [r["label"] for r in test], [r["text"] for r in test]
    curves = [[balanced_accuracy(truth, lr_fit_predict([train[i] for i in order][:n], texts)) if n else np.nan
               for n in budgets] for order in orders]
    return [None if np.isnan(v) else float(v) for v in np.mean(curves, axis=0)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", choices=("de", "dev"), default="de")
    ap.add_argument("--asr", action="store_true", help="with --data dev: the ASR versions")
    ap.add_argument("--init", default="models/switch-en.npz")
    ap.add_argument("--orders", type=int, default=3)
    ap.add_argument("--z", default="rule,2")
    ap.add_argument("--read-floor", type=float, default=None,
                    help="the models' start_read_floor (default: the checkpoint's config)")
    args = ap.parse_args()
    train, test, budgets = household(args.data, args.asr)
    orders = pyrandom_orders(len(train), args.orders)
    curves, eces = {}, {}
    for s in args.z.split(","):
        name = f"share, z = {s}" if s != "rule" else "back-off rule alone"
        curves[name], eces[name] = plm_curve(args.init, train, test, budgets, orders,
                                             RULE if s == "rule" else float(s), args.read_floor)
    curves["logistic regression, owner's labels alone"] = lr_curve(train, test, budgets, orders)
    name = f"owner-share-{args.data}" + ("-asr" if args.asr else "")
    payload = header()
    payload.update({"data": args.data, "asr": args.asr, "init": args.init, "orders": args.orders,
                    "read_floor": args.read_floor, "budgets": budgets, "balanced_accuracy": curves,
                    "ece": eces})
    path = write_result(name, payload)
    print(describe(payload))
    print(markdown_table(["learner"] + [str(n) for n in budgets],
                         [[k] + ["" if v is None else f"{v:.3f}" for v in c] for k, c in curves.items()]
                         + [[f"ECE, {k}"] + [f"{v:.3f}" for v in c] for k, c in eces.items()]))
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
