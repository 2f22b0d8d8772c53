#!/usr/bin/env python3
"""Dimmers and questions (issue 48): a household of a dimmable lamp and a fan on a relay,
replayed from the shipped starting model and the shipped kind head through `edge-plm replay`'s
own path (`build_replay` + `run_session`: gpiozero MockFactory pins, a PWM lamp with a rotary
encoder, the SQLite buffer, online learning of both the switch model and the kind head).

Sessions (written for this benchmark, never read to write the kind head's templates or the
starting model's text; benchmarks/data/dimmer/):
  dimmer-crowd  59 lines in a crowd worker's words: dim / brighten / a level / questions, on / off
                of the lamp and the fan, and chatter;
  dimmer-ha     37 lines in Home Assistant's phrasing ("set the living room lamp brightness to
                fifty percent", "decrease the brightness of ...");
  dimmer-mixed  32 short, casual lines ("dimmer", "more light", "did i leave the fan on").
The simulated person (`edge_plm/loop/kind_replay.py`) looks at the lamp after each dim,
brighten or level line and turns its knob where the device did not do what they wanted; for
on / off lines they flip the device's own switch as in every replay.

Each session is run twice: with the kind head (the device as shipped) and without it
(``[kinds] dimmers = false, questions = false``: dim commands go to the switch model alone, as
before issue 48). Metrics: dim / brighten lines acted right (the lamp moved the wanted way, no
relay moved), level lines right, wrong (a relay moved, the lamp went the other way or off), and
relays moved by a dim / brighten / question line; questions answered; on / off lines acted
wrong.

`--chatter`: also the 360 NOOP lines of the crowd train split (<data>/switch-dev-train.jsonl,
lines the crowd wrote for a relay: chatter, colour, and dim requests labelled NOOP) said to the
same household, the lamp at half before each: which lines moved the lamp, were asked about or
answered as a question (printed, and in the results, to be read: a dim request moving the lamp
is right in a dimmer household, chatter moving it is a wrong action).

    python3 benchmarks/bench_dimmer.py [--tag TAG] [--chatter] [--data DIR]

Prints a markdown table; writes benchmarks/results/dimmer[-<tag>].json.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import DEFAULT_DATA, header, markdown_table, write_result  # noqa: E402

from edge_plm.config.settings import load  # noqa: E402
from edge_plm.jsonl import read_objects  # noqa: E402
from edge_plm.loop.controller import text_utterance  # noqa: E402
from edge_plm.loop.kind_replay import per_kind  # noqa: E402
from edge_plm.loop.replay import build_replay, read_session, run_session  # noqa: E402

HERE = Path(__file__).resolve().parent / "data" / "dimmer"
SESSIONS = ("dimmer-crowd", "dimmer-ha", "dimmer-mixed")


def run(name: str, head: bool) -> dict:
    settings = load(HERE / "household.toml")
    if not head:
        settings = replace(settings, kinds=replace(settings.kinds, dimmers=False, questions=False))
    lines = read_session(HERE / f"{name}.jsonl")
    rep = build_replay(settings, None, epoch=1.8e9)
    try:
        res = run_session(lines, rep.controller, rep.clock)
        summary = res.summary()
        by_kind = per_kind(res.kinds)
        plain = [r for r in res.lines if lines[r.index].kind is None]
        return {"summary": summary, "kinds": by_kind,
                "onoff_acted_wrong": sum(r.acted_wrong for r in plain),
                "onoff_acted": sum(r.acted for r in plain)}
    finally:
        rep.close()


STEPS = ("DIM", "BRIGHTEN")  # the step kinds (a level is counted apart)


def tot(r: dict, kinds: tuple[str, ...], key: str) -> int:
    """The sum of count `key` over `kinds` in a run's ``kinds`` (`per_kind`)."""
    return sum(r["kinds"].get(x, {}).get(key, 0) for x in kinds)


def chatter(data: Path) -> dict:
    """The crowd train split's NOOP lines said to the dimmer household (module docstring)."""
    texts = [row["text"] for _, row in read_objects(data / "switch-dev-train.jsonl", "data")
             if row.get("label") == "NOOP"]
    rep = build_replay(load(HERE / "household.toml"), None, epoch=1.8e9)
    out: dict[str, list] = {"moved": [], "asked": [], "answered": []}
    try:
        for text in texts:
            rep.clock.advance(30.0)
            rep.controller.pump()
            rep.controller.devices.set_level("lamp", 0.5)
            rep.clock.advance(2.0)  # past the toggle's rate limit
            o = rep.controller.handle(text_utterance(text))
            k = rep.store.kind(o.interaction_id) if o.interaction_id else None
            what = {"dimmed": "moved", "brightened": "moved", "levelled": "moved", "asked": "asked",
                    "answered": "answered"}.get(k.done if k else "", None)
            if what:
                out[what].append([text, k.predicted, round(k.confidence, 2)])
    finally:
        rep.close()
    return {"lines": len(texts), **out}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tag", default="")
    ap.add_argument("--chatter", action="store_true", help="also the crowd train split's NOOP lines")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = ap.parse_args()
    out = {**header(), "sessions": {}}
    rows = []
    for name in SESSIONS:
        for head in (True, False):
            r = run(name, head)
            out["sessions"][f"{name}{'' if head else '-without-head'}"] = r
            rows.append([name, "head" if head else "switch model only",
                         f"{tot(r, STEPS, 'right')}/{tot(r, STEPS, 'lines')}",
                         f"{tot(r, ('LEVEL',), 'right')}/{tot(r, ('LEVEL',), 'lines')}",
                         tot(r, (*STEPS, "LEVEL"), "wrong"), tot(r, (*STEPS, "LEVEL", "QUERY"), "relays_moved"),
                         f"{tot(r, ('QUERY',), 'right')}/{tot(r, ('QUERY',), 'lines')}",
                         f"{r['onoff_acted_wrong']}/{r['onoff_acted']}"])
    if args.chatter:
        out["chatter"] = c = chatter(args.data)
        print(f"crowd NOOP lines: {c['lines']}; moved the lamp {len(c['moved'])}, asked "
              f"{len(c['asked'])}, answered {len(c['answered'])}")
        for what in ("moved", "asked", "answered"):
            for text, kind, conf in c[what]:
                print(f"  {what}: {text!r} ({kind} {conf})")
    print(markdown_table(["session", "device", "dim/brighten right", "level right", "dimmer lines wrong",
                          "relays moved by them", "questions answered", "on/off acted wrong"], rows))
    path = write_result("dimmer" + (f"-{args.tag}" if args.tag else ""), out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
