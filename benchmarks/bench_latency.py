"""Latency of the switch model on one core (docs/design.md §5): parameters, predict ms and
online-update ms per configuration, measured over the switch-dev train file fed through
``SwitchModel.learn`` (the device's path: predict the transcript, then learn its label).

Usage (from the repo root):
    python3 benchmarks/bench_latency.py [--data ../shared/data] [--configs potato,orange] [--limit N]
        [--init potato=models/switch-en.npz,orange=runs/orange/checkpoint.npz] [--memory]
    python3 benchmarks/bench_latency.py --history 0,500,2000,5000 [--init potato=models/switch-en.npz]

--history: a device's cost at each number of owner labels on top of its starting model: the
owner's labels are lines of models/data/ (Home Assistant intents, templates) in a fixed shuffled
order, learned untimed up to each level and saved; then 70 predict+learn of switch-dev-test lines
per level (another 70 at each level; the starting model holds none of them) and three-device
prediction (``predict_devices``: lamp, fan, plug) are timed on each level's saved model, line k
of every level in turn (interleaved, so the machine's slow spells fall on every level alike and
the ratios to level 0 compare like with like); the checkpoint the model writes after a level's
lines is loaded three times (wall seconds, best and median).
Writes benchmarks/results/latency-history.json.

--init starts a configuration from a checkpoint (as a device with ``model.start``) instead of an
empty model. --memory also measures, per configuration in a fresh child process: the resident memory after
importing edge_plm and warming the kernels, how much it grows while the model is loaded (or
made) and runs the same predict+learn pass, the process's peak, and the size of the checkpoint
the model then writes (uncompressed, as the device writes it).

Writes benchmarks/results/latency.json and prints a markdown table. Threads are pinned to
one (NUMBA_NUM_THREADS / OMP / OPENBLAS / MKL = 1, CPU affinity = one core). The Numba cache
is warmed (a throwaway model learns and predicts) before anything is timed.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import DEFAULT_DATA, describe, header, markdown_table, pin_one_core, shown, write_result  # noqa: E402

pin_one_core()

from curves import load_jsonl  # noqa: E402  (imports NumPy: after the thread pinning)

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from edge_plm.switch.model import SwitchModel  # noqa: E402


def pct(ms: list[float]) -> dict:
    return {"median": float(np.median(ms)), "p95": float(np.percentile(ms, 95)),
            "mean": float(np.mean(ms)), "max": float(np.max(ms))}


def warm(config: str) -> None:
    m = SwitchModel.empty(config)
    for text, label in [("turn on the light", "ON"), ("lights off", "OFF"), ("what time is it", "NOOP")]:
        m.predict(text)
        m.learn(text, label)


def measure(config: str, rows: list[dict], init: str | None = None) -> dict:
    warm(config)
    model = SwitchModel.load(init) if init else SwitchModel.empty(config)
    if model.config.name != config:
        raise SystemExit(f"--init {init} is a {model.config.name} model, not {config}")
    predict_ms, update_ms = [], []
    t_all = time.perf_counter()
    for row in rows:
        t0 = time.perf_counter()
        model.predict(row["text"])
        t1 = time.perf_counter()
        model.learn(row["text"], row["label"])
        t2 = time.perf_counter()
        predict_ms.append((t1 - t0) * 1e3)
        update_ms.append((t2 - t1) * 1e3)
    total = time.perf_counter() - t_all
    upd = np.array(update_ms)
    # a device that has learned ~2,000 interactions: keep learning the file over again (every
    # update includes the refinement steps, bounded by refine_rows example-passes per label)
    late = []
    i = 0
    while model.n_examples < 2000:
        row = rows[i % len(rows)]
        i += 1
        t0 = time.perf_counter()
        model.learn(row["text"], row["label"])
        if model.n_examples > 1900:
            late.append((time.perf_counter() - t0) * 1e3)
    return {"config": config, "config_fields": dataclasses.asdict(model.config), "params": model.params,
            "examples": len(rows), "init": init, "start_examples": model.n_examples - len(rows),
            "predict_ms": pct(predict_ms), "update_ms": pct(update_ms),
            # the first updates can differ in cost (statistics and replay still growing):
            # report the later steady state separately
            "update_ms_after_64": pct(upd[64:].tolist()) if len(upd) > 64 else None,
            "update_ms_at_2000_labels": pct(late) if late else None,
            "total_s": total}


def history(config: str, init: str | None, pool: list[dict], dev: list[dict], levels: list[int]) -> dict:
    import tempfile  # noqa: PLC0415

    from edge_plm.switch.addressing import DeviceName  # noqa: PLC0415

    warm(config)
    model = SwitchModel.load(init) if init else SwitchModel.empty(config)
    model.mark_start()
    devices = [DeviceName("lamp", ("light",)), DeviceName("fan"), DeviceName("plug", ("socket",))]
    with tempfile.TemporaryDirectory() as d:
        # 1. the device at each level, as a checkpoint (untimed): the owner's labels up to the
        #    level, then the level's timed lines are learned too, as the timed pass will
        owner, states, timed, out = 0, [], [], []
        for i, level in enumerate(levels):
            rows = dev[i * 70:(i + 1) * 70] or dev[:70]  # lines no model learned (no exact-transcript memory)
            while owner < level:
                row = pool[owner % len(pool)]
                model.learn(row["text"], row["label"])
                owner += 1
            states.append(model.save(Path(d) / f"level{i}.npz"))
            timed.append(rows)
            for row in rows:
                model.learn(row["text"], row["label"])
            owner += len(rows)
            path = model.save(Path(d) / f"after{i}.npz")
            loads = []
            for _ in range(3):
                t0 = time.perf_counter()
                SwitchModel.load(path)
                loads.append(time.perf_counter() - t0)
            out.append({"owner_labels": level, "load_s_best": min(loads),
                        "load_s_median": float(np.median(loads)), "checkpoint_bytes": path.stat().st_size})
        # 2. the timed pass, interleaved: line k of every level in turn, so that a slow spell of
        #    a shared machine falls on all levels alike and the ratios compare like with like
        models = [SwitchModel.load(p) for p in states]
        times = [([], [], []) for _ in levels]
        for k in range(max(len(rows) for rows in timed)):
            for m, rows, (predict_ms, update_ms, three_ms) in zip(models, timed, times):
                if k >= len(rows):
                    continue
                row = rows[k]
                t0 = time.perf_counter()
                m.predict(row["text"])
                t1 = time.perf_counter()
                m.learn(row["text"], row["label"])
                t2 = time.perf_counter()
                m.predict_devices(row["text"], devices)
                t3 = time.perf_counter()
                predict_ms.append((t1 - t0) * 1e3)
                update_ms.append((t2 - t1) * 1e3)
                three_ms.append((t3 - t2) * 1e3)
    for r, (predict_ms, update_ms, three_ms) in zip(out, times):
        r.update({"predict_ms": pct(predict_ms), "update_ms": pct(update_ms),
                  "predict_three_devices_ms": pct(three_ms)})
    base = out[0]["update_ms"]["median"]
    for r in out:
        r["update_ratio_to_first"] = r["update_ms"]["median"] / base if base > 0 else None
    return {"config": config, "init": init, "levels": out, "timing": "interleaved"}


def history_main(args, inits: dict) -> None:
    root = Path(__file__).resolve().parents[1]
    pool = [r for name in ("ha-intents.jsonl", "templates.jsonl")
            for r in load_jsonl(root / "models" / "data" / name)]
    pool = [pool[i] for i in np.random.default_rng(0).permutation(len(pool))]  # a fixed order, labels mixed
    dev = load_jsonl(args.data / "switch-dev-test.jsonl")  # not in the starting model
    levels = [int(x) for x in args.history.split(",")]
    payload = header()
    payload["results"] = [history(c, inits.get(c), pool, dev, levels) for c in args.configs.split(",")]
    path = write_result("latency-history", payload)
    table = [[r["config"] + (f" from {Path(r['init']).name}" if r["init"] else ""), x["owner_labels"],
              x["update_ms"]["median"], x["update_ms"]["p95"], x["update_ratio_to_first"],
              x["predict_ms"]["median"], x["predict_three_devices_ms"]["median"], x["load_s_best"],
              x["load_s_median"], f"{x['checkpoint_bytes']:,}"]
             for r in payload["results"] for x in r["levels"]]
    print(describe(payload))
    print()
    print(markdown_table(["config", "owner labels", "update ms median", "update ms p95", "update / first level",
                          "predict ms median", "three devices predict ms median", "load s (best of 3)",
                          "load s (median)", "checkpoint bytes"], table))
    print(f"\nwritten {path}")


MEMORY_CHILD = r"""
import json, sys, tempfile, os
from pathlib import Path
sys.path.insert(0, sys.argv[4])
def rss():  # current and peak resident set size, MB (Linux /proc)
    f = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
    return int(f["VmRSS"].split()[0]) / 1024, int(f["VmHWM"].split()[0]) / 1024
config, data, init = sys.argv[1], sys.argv[2], sys.argv[3] or None
from edge_plm.switch.model import SwitchModel
from curves import load_jsonl
rows = load_jsonl(Path(data))
w = SwitchModel.empty(config)  # warm the kernels (Numba cache) on a throwaway model
w.predict("turn on the light"); w.learn("turn on the light", "ON")
del w
before = rss()[0]
m = SwitchModel.load(init) if init else SwitchModel.empty(config)
for r in rows:
    m.predict(r["text"]); m.learn(r["text"], r["label"])
after, peak = rss()
with tempfile.TemporaryDirectory() as d:
    size = os.path.getsize(m.save(Path(d) / "c.npz"))
print(json.dumps({"rss_mb_before_model": before, "rss_mb_after": after, "model_mb": after - before,
                  "peak_rss_mb": peak, "checkpoint_bytes": size, "examples_held": m.n_examples}))
"""


def memory(config: str, data: Path, init: str | None) -> dict:
    import json  # noqa: PLC0415
    import subprocess  # noqa: PLC0415

    here = str(Path(__file__).resolve().parent)
    out = subprocess.run([sys.executable, "-c", MEMORY_CHILD, config, str(data), init or "", here],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--configs", default="potato,orange")
    ap.add_argument("--limit", type=int, default=0, help="use only the first N training examples")
    ap.add_argument("--init", default="", help="CONFIG=CKPT[,CONFIG=CKPT]: start that configuration from a checkpoint")
    ap.add_argument("--memory", action="store_true", help="peak RSS and checkpoint size per configuration")
    ap.add_argument("--history", default="", help="N,N,...: cost at these numbers of owner labels (docstring)")
    args = ap.parse_args()
    inits = dict(item.split("=", 1) for item in args.init.split(",") if item)
    if args.history:
        return history_main(args, inits)
    rows = load_jsonl(args.data / "switch-dev-train.jsonl")
    if args.limit:
        rows = rows[: args.limit]
    payload = header()
    payload["data"] = shown(args.data / "switch-dev-train.jsonl")
    payload["results"] = [measure(c, rows, inits.get(c)) for c in args.configs.split(",")]
    if args.memory:
        for r in payload["results"]:
            r["memory"] = memory(r["config"], args.data / "switch-dev-train.jsonl", inits.get(r["config"]))
    path = write_result("latency" + ("-start" if inits else "") + ("-memory" if args.memory else ""), payload)
    table = []
    for r in payload["results"]:
        steady = r["update_ms_after_64"] or r["update_ms"]
        mem = r.get("memory") or {}
        table.append([r["config"] + (f" from {Path(r['init']).name}" if r["init"] else ""), f"{r['params']:,}",
                      r["predict_ms"]["median"], r["predict_ms"]["p95"],
                      r["update_ms"]["median"], r["update_ms"]["p95"], steady["median"], steady["p95"],
                      r["update_ms_at_2000_labels"]["median"], r["update_ms_at_2000_labels"]["p95"],
                      r["examples"], mem.get("rss_mb_before_model", "-"), mem.get("model_mb", "-"),
                      mem.get("peak_rss_mb", "-"), f"{mem['checkpoint_bytes']:,}" if mem else "-"])
    print(describe(payload))
    print()
    print(markdown_table(["config", "params", "predict ms median", "predict ms p95", "update ms median",
                          "update ms p95", "update ms median (after 64)", "update ms p95 (after 64)",
                          "update ms median at 2,000 labels", "p95 at 2,000", "examples",
                          "RSS MB before the model", "model MB (RSS growth)", "peak RSS MB", "checkpoint bytes"],
                         table))
    print(f"\nwritten {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")


if __name__ == "__main__":
    main()
