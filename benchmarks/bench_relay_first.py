#!/usr/bin/env python3
"""Processing after the endpoint with learning running (issue 18, "relay first"): from the
utterance reaching the loop (`Controller.handle`) to the relay call having returned, less the
ASR stage — the switch and window updates, predict -> decide -> drive the relay (or ask /
ignore) — per utterance, on household sessions; also "ready -> relay", from the transcript
being ready.

Each line is handled the way a live device meets it: the previous interaction's window has
expired but nothing pumped since, so the utterance itself closes it and its label is learned
(and every few labels a version is written and gated) by the same `handle` call. Before the
learner worker that learning ran before the relay (in the pump at the start of `handle`, or
between prediction and the relay); with it, the label is stored and queued after the relay. The simulated person reacts as in `edge-plm
replay` (their flips are pumped after the utterance). Lines follow each other with no pause
by default (``--pace-ms``): the worker is then always busy, the worst case for the utterance
thread (they share the interpreter lock and, pinned, one core).

    python3 benchmarks/bench_relay_first.py --mode sync|async [--only household-text-0,...]
        [--pace-ms 0] [--tag before]

``--mode sync``: the learner runs inline (the loop before the worker, and replays now);
``async``: the learner worker thread (`edge-plm run`). Runs on the code it imports, so the
"before" numbers come from running this file with the previous commit's package first on
PYTHONPATH (``--mode sync`` is then the only mode). Pinned to one core. Writes
benchmarks/results/relay-first[-<tag>].json and prints p50/p95.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import header, markdown_table, pin_one_core, write_result  # noqa: E402

pin_one_core()

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from edge_plm.device import MAIN_RELAY  # noqa: E402
from edge_plm.loop.controller import Controller, text_utterance  # noqa: E402
from edge_plm.loop.simulation import SimulatedPerson  # noqa: E402
from edge_plm.loop.replay import flip_switch, build_replay, read_session  # noqa: E402
from edge_plm.config.settings import Settings  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
HOUSEHOLDS = REPO / "benchmarks" / "data" / "households"
#: sessions by name: the households, and crowd-283 (switch-dev-test as heard by pocketsphinx)
SESSIONS = {p.stem: p for p in sorted(HOUSEHOLDS.glob("household-*.jsonl"))}
SESSIONS["crowd-283"] = REPO / "benchmarks" / "data" / "switch-dev-test.asr.jsonl"


def asynchronous(replay) -> Controller:
    from edge_plm.learning.worker import LearnerWorker  # noqa: PLC0415 - absent before the worker

    c = replay.controller
    worker = LearnerWorker(c.learner, synchronous=False)
    replay.controller = Controller(c.settings, c.store, c.learner, c.devices, None,
                                   clock=replay.clock, wall=c.wall, worker=worker)
    return replay.controller


def instrument(c: Controller, marks: dict) -> None:
    """Mark when the transcript is ready and when the relay/ask/ignore step has returned, and
    time storing the interaction's row (a SQLite commit, ``synchronous = FULL``: on the path,
    an unstored interaction is not acted on)."""
    predict, act, add = c.worker.predict_all, c.dialogue.act_or_ask, c.store.add_interaction

    def add_interaction(*a, **k):
        t = time.perf_counter()
        out = add(*a, **k)
        marks["store"] = marks.get("store", 0.0) + time.perf_counter() - t
        return out

    c.store.add_interaction = add_interaction

    def predict_all(*a, **k):  # called as soon as the transcript is ready
        marks["ready"] = time.perf_counter()
        return predict(*a, **k)

    def act_or_ask(*a, **k):
        out = act(*a, **k)
        marks["relay"] = time.perf_counter()
        return out

    c.worker.predict_all, c.dialogue.act_or_ask = predict_all, act_or_ask


def session(path: Path, mode: str, pace_s: float) -> dict:
    lines = read_session(path)
    r = build_replay(Settings(), None, seed=0)
    c = asynchronous(r) if mode == "async" else r.controller
    person, clock = SimulatedPerson(), r.clock
    cfg = c.settings.policy
    gap = max(cfg.ask_window_s, cfg.override_window_s) + 1.0
    pin = c.devices.factory.pin(c.devices.switches[MAIN_RELAY].cfg.pin)
    marks: dict = {}
    instrument(c, marks)
    after_ms, ready_ms, store_ms, handle_ms, wrong, acted = [], [], [], [], 0, 0
    t_all = time.perf_counter()
    try:
        for line in lines:
            clock.advance(gap)  # the previous window expired; this utterance closes it
            before = c.devices.relays[MAIN_RELAY].is_on
            marks.clear()
            t0 = time.perf_counter()
            out = c.handle(text_utterance(line.text or ""))
            handle_ms.append((time.perf_counter() - t0) * 1e3)
            if "relay" in marks:
                asr = out.latency.asr or 0.0
                after_ms.append((marks["relay"] - t0) * 1e3 - asr)
                ready_ms.append((marks["relay"] - marks["ready"]) * 1e3)
                store_ms.append(marks.get("store", 0.0) * 1e3)
            acted += out.action is not None
            wrong += out.action is not None and line.wish is not None and (
                out.action.value != line.wish.value)
            for flip in [] if line.wish is None else person.react(
                    line.wish, before, c.devices.relays[MAIN_RELAY].is_on, clock()):
                clock.set(max(clock(), flip.at))
                flip_switch(c.devices.switches[MAIN_RELAY], pin, clock)
                c.pump()
            if pace_s:
                time.sleep(pace_s)
        if mode == "async":
            c.worker.drain()
        elapsed = time.perf_counter() - t_all
        versions = len(c.store.model_versions())
        labels = c.store.count(labeled=True)
    finally:
        r.close()
    return {"lines": len(lines), "acted": acted, "acted_wrong": wrong, "labels": labels,
            "versions": versions, "seconds": round(elapsed, 2),
            "after_endpoint_ms": pct(after_ms), "ready_to_relay_ms": pct(ready_ms),
            "store_row_ms": pct(store_ms),
            "handle_ms": pct(handle_ms),
            "_after": after_ms, "_store": store_ms}


def clone_costs(path: Path, repeat: int = 15) -> dict:
    """What a snapshot costs: copying the model the way `clone_model` does (deepcopy) and by
    pickling, against learning one label, on the starting model after a household session."""
    import copy  # noqa: PLC0415
    import pickle  # noqa: PLC0415

    from edge_plm.learning.learner import LearnerConfig, load_start  # noqa: PLC0415

    model = load_start(LearnerConfig.from_settings(Settings().model))
    for line in read_session(path):
        if line.wish:
            model.learn(line.text or "", line.wish.value)

    def median_ms(f) -> float:
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            f()
            times.append((time.perf_counter() - t) * 1e3)
        return round(float(np.median(times)), 2)

    return {"examples": len(model.examples),
            "deepcopy_ms": median_ms(lambda: copy.deepcopy(model)),
            "pickle_ms": median_ms(lambda: pickle.loads(pickle.dumps(model, protocol=5))),
            "learn_one_label_ms": median_ms(lambda: model.learn("turn on the lamp", "ON"))}


def pct(ms: list[float]) -> dict:
    return {"p50": round(float(np.median(ms)), 3), "p95": round(float(np.percentile(ms, 95)), 3),
            "max": round(float(np.max(ms)), 3), "n": len(ms)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("sync", "async"), default="async")
    ap.add_argument("--only", default="household-text-0,household-text-1,household-0,household-1",
                    help="comma-separated: household-<i>, household-text-<i>, crowd-283")
    ap.add_argument("--pace-ms", type=float, default=0.0, help="pause after each line")
    ap.add_argument("--tag", default="")
    ap.add_argument("--clone-cost", action="store_true",
                    help="also time a snapshot copy (deepcopy vs pickle) against one label")
    args = ap.parse_args(argv)
    results, every, stores = {}, [], []
    names = [n for n in args.only.split(",") if n]
    if unknown := [n for n in names if n not in SESSIONS]:
        ap.error(f"unknown session(s) {', '.join(unknown)}; known: {', '.join(SESSIONS)}")
    for name in names:
        s = session(SESSIONS[name], args.mode, args.pace_ms / 1e3)
        every += s.pop("_after")
        stores += s.pop("_store")
        results[name] = s
        print(f"{name}: after endpoint p50 {s['after_endpoint_ms']['p50']} ms, p95 "
              f"{s['after_endpoint_ms']['p95']} ms; acted {s['acted']} wrong "
              f"{s['acted_wrong']} labels {s['labels']} versions {s['versions']}",
              file=sys.stderr, flush=True)
    total = pct(every)
    print(f"storing the row (on the path): p50 {pct(stores)['p50']} ms, p95 {pct(stores)['p95']} ms",
          file=sys.stderr)
    rows = [[n, s["lines"], s["after_endpoint_ms"]["p50"], s["after_endpoint_ms"]["p95"],
             s["after_endpoint_ms"]["max"], s["acted"], s["acted_wrong"], s["labels"],
             s["versions"]] for n, s in results.items()]
    rows.append(["all", sum(s["lines"] for s in results.values()), total["p50"], total["p95"],
                 total["max"], "", "", "", ""])
    print(markdown_table(["session", "lines", "p50 ms", "p95 ms", "max ms", "acted",
                          "acted wrong", "labels", "versions"], rows))
    name = "relay-first" + (f"-{args.tag}" if args.tag else "")
    extra = {}
    if args.clone_cost:
        extra["clone"] = clone_costs(HOUSEHOLDS / "household-text-0.jsonl")
        print(f"snapshot copy: {extra['clone']}", file=sys.stderr)
    write_result(name, {**header(), "mode": args.mode, "pace_ms": args.pace_ms,
                        "all": total, "all_store_row_ms": pct(stores), "sessions": results,
                        **extra})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
