"""Learning curves of the PLM (through `edge_plm.learning.evaluation.run_eval`, the exact `edge-plm eval`
path) next to the baselines, on the same training orders.

Usage (from the repo root):
    python3 benchmarks/learning_curve.py [--data ../shared/data] [--orders 5]
        [--order-scheme pyrandom|spec] [--asr] [--baselines] [--set key=value ...] [--json OUT]
        [--init CKPT]

--init starts every order from that checkpoint (`edge-plm eval --init`) and adds budget 0 (the
starting model before any label); e.g. --init models/switch-en.npz.

--asr uses benchmarks/data/switch-dev-{train,test}.asr.jsonl (ASR transcripts of the same
utterances, see asr_transcripts.py). --set overrides SwitchConfig fields (e.g. --set lr=0.02).
--order-scheme pyrandom (default) is the scheme docs/design.md's baseline table was made with.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from curves import ORDER_SCHEMES, load_switch_dev  # noqa: E402

from edge_plm.learning.evaluation import load_init, run_eval  # noqa: E402

BUDGETS = [10, 20, 50, 100, 200, 10**9]


def parse_overrides(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, _, value = item.partition("=")
        out[key] = json.loads(value) if value[:1] in "[{0123456789-.tf" else value
        if isinstance(out[key], list):
            out[key] = tuple(out[key])
    return out


def plm_curve(train, test, orders, init: str | None = None, **overrides) -> dict:
    per_order, eces, timings = [], [], []
    for order in orders:
        rows = [train[i] for i in order]
        if init:
            result = run_eval(rows, test, [0] + BUDGETS, init=load_init(init))
        else:
            result = run_eval(rows, test, BUDGETS, **overrides)
        per_order.append([b["balanced_accuracy"] for b in result["budgets"]])
        eces.append([b["ece"] for b in result["budgets"]])
        timings.append((result["predict_ms"]["median"], result["update_ms"]["median"]))
    means = np.mean(per_order, axis=0)
    return {"mean": means.tolist(), "per_order": per_order, "params": result["params"],
            "ece_mean": np.mean(eces, axis=0).tolist(),
            "predict_ms_median": float(np.median([t[0] for t in timings])),
            "update_ms_median": float(np.median([t[1] for t in timings]))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    ap.add_argument("--orders", type=int, default=5)
    ap.add_argument("--order-scheme", choices=sorted(ORDER_SCHEMES), default="pyrandom")
    ap.add_argument("--asr", action="store_true")
    ap.add_argument("--baselines", action="store_true", help="also run the baselines on the same orders")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--init", help="start every order from this checkpoint (adds budget 0)")
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()
    train, test = load_switch_dev(args.data, args.asr)
    orders = ORDER_SCHEMES[args.order_scheme](len(train), args.orders)
    overrides = parse_overrides(args.set)
    t0 = time.time()
    name = "PLM potato" + (f" {overrides}" if overrides else "")
    if args.init:
        name = f"PLM from {Path(args.init).name}"
    rows = {name: plm_curve(train, test, orders, init=args.init, **overrides)}
    plm_seconds = time.time() - t0
    if args.baselines:
        from baselines import make_baselines
        from curves import learning_curve

        for name, fit_predict in make_baselines(keyword_both="OFF").items():
            curve = learning_curve(fit_predict, train, test, orders=orders)
            rows[name] = {"mean": [v["mean"] for v in curve.values()]}
            if args.init:  # before any label a learned baseline has nothing; the keyword rule is fixed
                rows[name]["mean"] = [rows[name]["mean"][0] if "keyword" in name else float("nan")] + rows[name]["mean"]
    head = (["0"] if args.init else []) + ["10", "20", "50", "100", "200", "all"]
    print("| learner | " + " | ".join(head) + " |\n|---" * 1 + "|---" * len(head) + "|")
    for name, r in rows.items():
        print(f"| {name} | " + " | ".join("-" if v != v else f"{v:.3f}" for v in r["mean"]) + " |")
    print(f"\n{args.orders} orders ({args.order_scheme}), {'ASR' if args.asr else 'clean'} text; "
          f"PLM wall time {plm_seconds:.0f} s")
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(json.dumps({"orders": args.order_scheme, "asr": args.asr, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
