#!/usr/bin/env python3
"""Timed crowd commands through the loop, from the shipped starting model: timers on against off.

The session: --lines ON/OFF lines of switch-dev-train.jsonl (a seeded sample; the test file is
never read), each with a time phrase written here put before (every third) or after it, as
``"delay": S`` ("in twenty minutes") or ``"for": S`` ("for an hour") session lines, each
followed by a NOOP line of the same file. `edge-plm replay --json` runs it twice on fresh
databases: as shipped, and with ``[timers] enabled = false`` (the whole transcript to the model,
the device as it was before timers). The starting model was trained on switch-dev-train, so the
action part reads seen wording; what this measures is the time: acted at the time wished, at a
wrong time, or not at all.

    python3 benchmarks/timed_crowd.py [--data DEV_DATA_DIR] [--lines 60] [--seed 48]

Prints a markdown table; writes benchmarks/results/timed-crowd.json.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import DEFAULT_DATA, describe, header, markdown_table, shown, write_result  # noqa: E402

#: (phrase, seconds, key): the time phrases added to the commands, in turn
PHRASES = [("in twenty minutes", 1200, "delay"), ("in five minutes", 300, "delay"),
           ("in an hour", 3600, "delay"), ("in half an hour", 1800, "delay"),
           ("in ten minutes", 600, "delay"), ("in two hours", 7200, "delay"),
           ("for an hour", 3600, "for"), ("for ten minutes", 600, "for"),
           ("for half an hour", 1800, "for"), ("in thirty seconds", 30, "delay"),
           ("in fifteen minutes", 900, "delay"), ("for two hours", 7200, "for")]
KEYS = ("interactions", "acted", "acted_wrong", "asked", "timed_lines", "timers_set", "timed_right",
        "acted_at_wrong_time", "timed_missed")


def session(data: Path, lines: int, seed: int) -> list[dict]:
    rows = [json.loads(x) for x in (data / "switch-dev-train.jsonl").open()]
    commands = [r for r in rows if r["label"] in ("ON", "OFF")]
    chatter = [r for r in rows if r["label"] == "NOOP"]
    rng = random.Random(seed)
    out = []
    for i, r in enumerate(rng.sample(commands, lines)):
        phrase, seconds, key = PHRASES[i % len(PHRASES)]
        text = r["text"].lower().rstrip(".!?")
        out.append({"text": f"{phrase} {text}" if i % 3 == 0 else f"{text} {phrase}", "label": r["label"],
                    key: seconds})
        out.append({"text": rng.choice(chatter)["text"], "label": "NOOP"})
    return out


def replay(path: Path, db: Path, config: Path | None) -> dict:
    cmd = [str(Path(sys.executable).with_name("edge-plm")), "replay", str(path), "--db", str(db), "--json"]
    if config is not None:
        cmd += ["--config", str(config)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"replay failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA), help="the dev data folder (switch-dev-train.jsonl)")
    ap.add_argument("--lines", type=int, default=60)
    ap.add_argument("--seed", type=int, default=48)
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp_dir = Path(tmp)
        path = tmp_dir / "timed-crowd.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in session(Path(args.data), args.lines, args.seed)))
        off = tmp_dir / "timers-off.toml"
        off.write_text("[timers]\nenabled = false\n")
        for name, config in (("timers on", None), ("timers off", off)):
            out = replay(path, tmp_dir / f"{name.replace(' ', '-')}.db", config)
            results[name] = {k: out.get(k) for k in KEYS}
    payload = {**header(), "args": {**vars(args), "data": shown(args.data)}, "results": results}
    print(describe(payload))
    print(markdown_table(["run", *KEYS], [[name, *r.values()] for name, r in results.items()]))
    write_result("timed-crowd", payload)


if __name__ == "__main__":
    main()
