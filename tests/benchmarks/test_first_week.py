"""The first-week sessions (benchmarks/first_week.py): every switch-dev-test line once, commands
alternating with other requests while both remain, clean and as heard, in the same order."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import first_week  # noqa: E402

BENCH = REPO / "benchmarks" / "data"


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_committed_sessions_are_what_the_script_builds():
    asr = read(first_week.ASR)
    test = [{"text": a["clean_text"], "label": a["label"]} for a in asr]  # switch-dev-test, in order
    text_rows, asr_rows = first_week.build(test, asr)
    assert read(BENCH / "first-week-text.jsonl") == text_rows
    assert read(BENCH / "first-week-asr.jsonl") == asr_rows


def test_order_each_line_once_commands_alternating():
    text_rows = read(BENCH / "first-week-text.jsonl")
    asr_rows = read(BENCH / "first-week-asr.jsonl")
    test = read(first_week.ASR)
    assert sorted(r["text"] for r in text_rows) == sorted(a["clean_text"] for a in test)
    assert [r["clean_text"] for r in asr_rows] == [r["text"] for r in text_rows]
    assert [r["label"] for r in asr_rows] == [r["label"] for r in text_rows]
    kinds = ["cmd" if r["label"] != "NOOP" else "noop" for r in text_rows]
    n = min(kinds.count("cmd"), kinds.count("noop"))
    assert kinds[:2 * n] == ["cmd", "noop"] * n
    assert len(set(kinds[2 * n:])) <= 1


def test_interleave_keeps_the_rest_in_file_order():
    rows = [{"text": t, "label": lab} for t, lab in [("a", "NOOP"), ("b", "ON"), ("c", "NOOP"), ("d", "NOOP"), ("e", "OFF")]]
    assert [r["text"] for r in first_week.interleave(rows)] == ["b", "a", "e", "c", "d"]
