#!/usr/bin/env python3
"""A starting model variant from a run directory's training data, scored on switch-dev-test at
n = 0 (docs/benchmarks-log.md, "Confident and right": W = 0 against the attention's variants).

Learns every line of RUN/data/switch-en-train.jsonl (words registered by frequency first, as the
trainer does), runs 100 more refinement steps, fits the calibration on RUN/data/switch-en-val.jsonl
and prints one JSON line: balanced accuracy, ECE, and commands acted on at confidence >= 0.9.

    python3 benchmarks/attention_variants.py RUN_DIR [CONFIG_FIELD=VALUE ...]
    e.g. python3 benchmarks/attention_variants.py runs/switch-en attention=false
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import DEFAULT_DATA, REPO  # noqa: E402

from edge_plm.switch.calibration import expected_calibration_error  # noqa: E402
from edge_plm.switch.model import SwitchModel  # noqa: E402


def value(v: str):
    for t in (int, float):
        try:
            return t(v)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(v.lower(), v)


def main(argv: list[str]) -> int:
    run = Path(argv[0])
    kw = {k: value(v) for k, v in (a.split("=", 1) for a in argv[1:])}
    train = [json.loads(x) for x in (run / "data" / "switch-en-train.jsonl").read_text().splitlines() if x]
    val = [json.loads(x) for x in (run / "data" / "switch-en-val.jsonl").read_text().splitlines() if x]
    m = SwitchModel.empty("potato", **kw)
    if m.words is not None:
        m.words.register(r["text"] for r in train)
    for r in train:
        m.learn(r["text"], r["label"])
    m.refine(100)
    m.calibrate_on([(r["text"], r["label"]) for r in val])
    out = {"overrides": kw}
    for name, path in (("clean", DEFAULT_DATA / "switch-dev-test.jsonl"),
                       ("asr", REPO / "benchmarks" / "data" / "switch-dev-test.asr.jsonl")):
        rows = [json.loads(x) for x in path.read_text().splitlines() if x]
        preds = [m.predict(r["text"]) for r in rows]
        pred = np.array([p.action for p in preds])
        truth = np.array([r["label"] for r in rows])
        conf = np.array([p.confidence for p in preds])
        ba = float(np.mean([np.mean(pred[truth == a] == a) for a in ("ON", "OFF", "NOOP")]))
        act = (pred != "NOOP") & (conf >= 0.9)
        out[name] = {"balanced_accuracy": round(ba, 3), "ece": round(expected_calibration_error(conf, pred == truth), 3),
                     "acted_right": int((act & (pred == truth)).sum()), "acted_wrong": int((act & (pred != truth)).sum()),
                     "commands": int((truth != "NOOP").sum())}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
