#!/usr/bin/env python3
"""The first-week sessions of the loop benchmark, built from switch-dev-test (phrasings the
starting model never saw) for `edge-plm replay` / benchmarks/bench_sessions.py:

  benchmarks/data/first-week-text.jsonl  every line of switch-dev-test once, clean text:
      commands (ON/OFF) alternating with other requests (NOOP) while both remain, first a
      command, each kind in file order; then the lines of the kind that is left, in file order;
  benchmarks/data/first-week-asr.jsonl   the same lines in the same order, each with the text
      pocketsphinx heard from its flite voice (benchmarks/data/switch-dev-test.asr.jsonl, matched
      by its "clean_text"), the clean text kept as "clean_text".

Lines are {"text", "label"} (+ "clean_text" in the spoken one), what `edge-plm replay` reads.
Deterministic; no sampling.

    python3 benchmarks/first_week.py [--data ../shared/data] [--out benchmarks/data]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ASR = REPO / "benchmarks" / "data" / "switch-dev-test.asr.jsonl"


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def interleave(rows: list[dict]) -> list[dict]:
    """Commands alternating with NOOP lines while both remain, then the rest (file order)."""
    commands = [r for r in rows if r["label"] != "NOOP"]
    others = [r for r in rows if r["label"] == "NOOP"]
    out = []
    for c, o in zip(commands, others):
        out += [c, o]
    n = min(len(commands), len(others))
    return out + commands[n:] + others[n:]


def build(test: list[dict], asr: list[dict]) -> tuple[list[dict], list[dict]]:
    heard: dict[str, list[dict]] = {}
    for a in asr:
        heard.setdefault(a["clean_text"], []).append(a)
    text_rows, asr_rows = [], []
    for r in interleave(test):
        if not heard.get(r["text"]):
            raise ValueError(f"no ASR line has clean_text {r['text']!r} ({ASR.name} does not match the test file)")
        a = heard[r["text"]].pop(0)
        if a["label"] != r["label"]:
            raise ValueError(f"label differs between the test file and {ASR.name} for {r['text']!r}")
        text_rows.append({"text": r["text"], "label": r["label"]})
        asr_rows.append({"text": a["text"], "label": r["label"], "clean_text": r["text"]})
    return text_rows, asr_rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data",
                    help="directory with switch-dev-test.jsonl (default: ../shared/data)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "data")
    args = ap.parse_args(argv)
    src = args.data / "switch-dev-test.jsonl"
    if not src.is_file():
        print(f"error: {src} not found (use --data)", file=sys.stderr)
        return 1
    try:
        text_rows, asr_rows = build(read(src), read(ASR))
    except (ValueError, KeyError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("first-week-text.jsonl", text_rows), ("first-week-asr.jsonl", asr_rows)):
        (args.out / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    commands = sum(r["label"] != "NOOP" for r in text_rows)
    print(json.dumps({"lines": len(text_rows), "commands": commands, "other": len(text_rows) - commands}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
