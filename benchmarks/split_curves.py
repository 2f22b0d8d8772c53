#!/usr/bin/env python3
"""Learning curves over several train / test splits of switch-dev, next to the baselines.

`learning_curve.py` scores every order on one test file (switch-dev-test: 283 lines, 10 of them
ON), so a setting tuned there can be tuned to those 283 lines. Here switch-dev's two files are
pooled (708 utterances, clean or as pocketsphinx heard them) and cut into `--splits` seeded
train / test splits of 425 / 283 lines (split s: ``numpy.random.default_rng(100 + s)``'s
permutation; the train part in that order), each learned once through the exact `edge-plm eval`
path (`run_eval`) and scored after 10 / 20 / 50 / 100 / 200 / all labels. Six test sets instead
of one: a difference that holds here is less likely to be one test file's luck.

    python3 benchmarks/split_curves.py [--data DIR] [--asr] [--splits 6]
        [--set key=value ...] [--init CKPT] [--baselines] [--json OUT]

--data is the folder that holds switch-dev-{train,test}.jsonl (clean text; the ASR versions are
in benchmarks/data/).
--set overrides SwitchConfig fields of the empty model (as in learning_curve.py); --init starts
every split from that checkpoint (adds budget 0). Prints a markdown table: mean balanced accuracy
per budget, its mean over the budgets, and the mean ECE.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import DEFAULT_DATA  # noqa: E402
from curves import learning_curve, load_jsonl  # noqa: E402
from learning_curve import parse_overrides  # noqa: E402

from edge_plm.learning.evaluation import load_init, run_eval  # noqa: E402

BUDGETS = [10, 20, 50, 100, 200, 10**9]
TRAIN_SIZE = 425


def pooled_rows(data: Path, asr: bool) -> list[dict]:
    folder = Path(__file__).resolve().parent / "data" if asr else data
    suffix = ".asr.jsonl" if asr else ".jsonl"
    return [r for name in ("switch-dev-train", "switch-dev-test") for r in load_jsonl(folder / f"{name}{suffix}")]


def splits(rows: list[dict], n: int) -> list[tuple[list[dict], list[dict]]]:
    out = []
    for s in range(n):
        p = np.random.default_rng(100 + s).permutation(len(rows))
        out.append(([rows[i] for i in p[:TRAIN_SIZE]], [rows[i] for i in p[TRAIN_SIZE:]]))
    return out


def plm_row(parts, init: str | None, overrides: dict) -> dict:
    accs, eces = [], []
    budgets = ([0] if init else []) + BUDGETS
    for train, test in parts:
        r = run_eval(train, test, budgets, init=load_init(init) if init else None, **overrides)
        accs.append([b["balanced_accuracy"] for b in r["budgets"]])
        eces.append([b["ece"] for b in r["budgets"]])
    return {"mean": np.mean(accs, axis=0).tolist(), "ece_mean": np.mean(eces, axis=0).tolist(), "per_split": accs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--asr", action="store_true")
    ap.add_argument("--splits", type=int, default=6)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--init", help="start every split from this checkpoint (adds budget 0)")
    ap.add_argument("--baselines", action="store_true")
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()
    overrides = parse_overrides(args.set)
    if args.init and overrides:
        raise SystemExit("--set applies to an empty model only")
    parts = splits(pooled_rows(args.data, args.asr), args.splits)
    name = f"PLM from {Path(args.init).name}" if args.init else "PLM potato" + (f" {overrides}" if overrides else "")
    rows = {name: plm_row(parts, args.init, overrides)}
    if args.baselines:
        from baselines import make_baselines  # noqa: PLC0415

        for bname, fit_predict in make_baselines(keyword_both="OFF").items():
            per = [[v["mean"] for v in learning_curve(fit_predict, train, test, orders=[list(range(len(train)))]).values()]
                   for train, test in parts]
            mean = np.mean(per, axis=0).tolist()
            rows[bname] = {"mean": ([mean[0] if "keyword" in bname else float("nan")] + mean) if args.init else mean}
    head = (["0"] if args.init else []) + ["10", "20", "50", "100", "200", "all"]
    print("| learner | " + " | ".join(head) + " | mean over budgets | ECE (mean) |\n|---" + "|---" * (len(head) + 2) + "|")
    for rname, r in rows.items():
        vals = [v for v in r["mean"] if v == v]
        ece = f"{np.mean(r['ece_mean']):.3f}" if "ece_mean" in r else ""
        print(f"| {rname} | " + " | ".join("-" if v != v else f"{v:.3f}" for v in r["mean"])
              + f" | {np.mean(vals):.3f} | {ece} |")
    print(f"\n{args.splits} splits of {TRAIN_SIZE} / {len(parts[0][1])}, {'ASR' if args.asr else 'clean'} text")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"asr": args.asr, "splits": args.splits, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
