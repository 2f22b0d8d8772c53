"""The kind head (edge_plm/switch/kinds.py): per-kind accuracy and expected calibration error
(10 equal-width bins; overall = top label, per kind = class-wise) on

  (a) the held-out template split of models/build_kinds_en.py (the head fitted on the training
      split, with the temperature fitted on that split's logits: the build's recipe), and
  (b) benchmarks/data/kinds/crowd-kinds.jsonl (150 crowd-style lines written before any tuning,
      never trained on) with the shipped head, and with the explicit solution alone (no
      refinement steps) for comparison,

plus the shipped head's predict and learn times (median / p95 over the crowd lines, one core).

    python3 benchmarks/kind_head.py     # writes benchmarks/results/kind-head.json
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import REPO, header, pin_one_core, write_result  # noqa: E402

pin_one_core()

import numpy as np  # noqa: E402

sys.path.insert(0, str(REPO / "models"))
import build_kinds_en as build  # noqa: E402

from edge_plm.actions import KIND_INDEX  # noqa: E402
from edge_plm.switch import kinds as K  # noqa: E402


def rounded(report: dict) -> dict:
    def r(v):
        return round(v, 4) if isinstance(v, float) else v
    return {k: ({n: {a: r(b) for a, b in x.items()} for n, x in v.items()} if k == "kinds" else r(v))
            for k, v in report.items()}


def crowd_report(head: K.KindHead, rows: list[dict]) -> dict:
    P = np.array([list(head.predict(r["text"]).distribution.values()) for r in rows])
    return rounded(K.calibration_report(P, np.array([KIND_INDEX[r["kind"]] for r in rows])))


def timings(head: K.KindHead, rows: list[dict], repeats: int = 20) -> dict:
    """Median and p95 ms of predict (every crowd line, ``repeats`` times) and of learn (each
    crowd line learned once into a copy of the head, then forgotten: not kept)."""
    pred = []
    for _ in range(repeats):
        for r in rows:
            t = time.perf_counter()
            head.predict(r["text"])
            pred.append(time.perf_counter() - t)
    copy = K.KindHead.from_arrays(head.to_arrays())
    learn = []
    for _ in range(3):
        for r in rows:
            t = time.perf_counter()
            copy.learn(r["text"], r["kind"])
            learn.append(time.perf_counter() - t)
        for r in rows:
            copy.forget(r["text"], r["kind"])
    ms = lambda xs, q: round(1000 * float(np.quantile(xs, q)), 4)  # noqa: E731
    return {"predict_ms_median": ms(pred, 0.5), "predict_ms_p95": ms(pred, 0.95),
            "learn_ms_median": ms(learn, 0.5), "learn_ms_p95": ms(learn, 0.95),
            "predict_calls": len(pred), "learn_calls": len(learn)}


def main() -> None:
    rows = build.build_rows()
    crowd = build.read(build.CROWD)
    held_head, logits, labels = build.held_out(rows)
    temperature = K.fit_temperature(logits, labels)
    held = rounded(K.calibration_report(K.softmax(logits / temperature), labels))
    shipped = K.load_shipped()
    steps = build.REFINE["steps"]
    build.REFINE["steps"] = 0
    explicit_held, e_logits, e_labels = build.held_out(rows)
    e_temp = K.fit_temperature(e_logits, e_labels)
    explicit_full = build.fit(rows)
    explicit_full.temperature = e_temp
    build.REFINE["steps"] = steps
    crowd_texts = {r["text"] for r in crowd}
    payload = {
        **header(),
        "data": {"crowd": "benchmarks/data/kinds/crowd-kinds.jsonl", "crowd_rows": len(crowd),
                 "crowd_lines_in_training": sum(r["text"] in crowd_texts for r in rows),
                 "training_rows": sum(not r["val"] for r in rows), "held_out_rows": sum(r["val"] for r in rows)},
        "recipe": {**build.REFINE, "temperature": round(temperature, 4), "owner_weight": shipped.config.owner_weight},
        "held_out_split": held,
        "held_out_split_explicit_only": rounded(K.calibration_report(K.softmax(e_logits / e_temp), e_labels)),
        "crowd_shipped": crowd_report(shipped, crowd),
        "crowd_explicit_only": crowd_report(explicit_full, crowd),
        "timing": timings(shipped, crowd),
    }
    path = write_result("kind-head", payload)
    print(f"wrote {path.relative_to(REPO)}")
    for name in ("held_out_split", "held_out_split_explicit_only", "crowd_shipped", "crowd_explicit_only"):
        rep = payload[name]
        per = ", ".join(f"{k} {v['accuracy']:.3f}/{v['ece']:.3f}" for k, v in rep["kinds"].items())
        print(f"{name}: bal acc {rep['balanced_accuracy']:.3f} acc {rep['accuracy']:.3f} ECE {rep['ece']:.3f} | {per}")
    print(payload["timing"])


if __name__ == "__main__":
    main()
