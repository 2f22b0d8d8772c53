#!/usr/bin/env python3
"""Which parser reads the time of a spoken command best (issue 48, "Later and for a while").

The lines of benchmarks/data/time-slots.jsonl are written as an ASR writes them (lower case, no
punctuation, numbers as words): 53 commands with a time ("in twenty minutes", "at quarter past
six", "for an hour", "until ten"), each with the second after NOW at which the relay must act
(``at``) or go back (``for``, ``until``); 42 lines without a time (commands, some taken from
switch-dev-train, and chatter: "i'll be there in a minute", "order a pizza for two"), which must
give no time; 10 with time words no clock can be read from ("in a bit", "later"), which must give
no time either (the device asks about them). NOW is a Tuesday, 14:05: "at seven" means 19:00 (the
next time the clock shows seven), "at six am" tomorrow 06:00.

Candidates (each gives a due time or nothing; the kind comes from the word before the phrase):
  parsedatetime            Calendar().nlp(text, sourceTime=NOW): the last date/time it finds
  text2num+parsedatetime   text2num's alpha2digit(text, "en") first (words -> digits)
  word2number+parsedatetime  runs of number words replaced by word2number's word_to_num
  dateparser               dateparser.search.search_dates(text, RELATIVE_BASE=NOW, future)
  text2num+dateparser      alpha2digit first
  edge_plm.decide.when     the device's reader (text2num for the numbers, a small grammar of
                           spoken time phrases; only when installed in this environment)

    python3 benchmarks/time_slot_parsers.py [--only NAME,...]

Prints a markdown table: due time right (within 60 s) on the timed lines, a time given to a line
without one (false slot), a time guessed for an unreadable line, import ms and ms per call.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import re
import statistics
import sys
import time
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "time-slots.jsonl"
NOW = dt.datetime(2026, 3, 10, 14, 5, 0)
TOLERANCE_S = 60


def _pdt(text: str) -> dt.datetime | None:
    import parsedatetime  # noqa: PLC0415

    found = parsedatetime.Calendar().nlp(text, sourceTime=NOW)
    return found[-1][0] if found else None


def _a2d(text: str) -> str:
    from text_to_num import alpha2digit  # noqa: PLC0415

    return alpha2digit(text, "en")


_NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
                 "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy "
                 "eighty ninety hundred").split()


def _w2n(text: str) -> str:
    from word2number import w2n  # noqa: PLC0415

    pattern = r"\b(?:%s)(?: (?:%s))*\b" % ("|".join(_NUMBER_WORDS), "|".join(_NUMBER_WORDS))
    return re.sub(pattern, lambda m: str(w2n.word_to_num(m.group(0))), text)


def _dateparser(text: str) -> dt.datetime | None:
    from dateparser.search import search_dates  # noqa: PLC0415

    found = search_dates(text, languages=["en"],
                         settings={"RELATIVE_BASE": NOW, "PREFER_DATES_FROM": "future"})
    return found[-1][1] if found else None


def _when(text: str) -> dt.datetime | None:
    from edge_plm.decide.when import TimeSlot, read_time  # noqa: PLC0415

    slot = read_time(text, NOW.timestamp())
    return dt.datetime.fromtimestamp(slot.due) if isinstance(slot, TimeSlot) else None


CANDIDATES = {
    "parsedatetime": (("parsedatetime",), _pdt),
    "text2num+parsedatetime": (("parsedatetime", "text_to_num"), lambda t: _pdt(_a2d(t))),
    "word2number+parsedatetime": (("parsedatetime", "word2number.w2n"), lambda t: _pdt(_w2n(t))),
    "dateparser": (("dateparser.search",), _dateparser),
    "text2num+dateparser": (("dateparser.search", "text_to_num"), lambda t: _dateparser(_a2d(t))),
    "edge_plm.decide.when": (("edge_plm.decide.when",), _when),
}


def import_ms(modules: tuple[str, ...]) -> float:
    t0 = time.perf_counter()
    for m in modules:
        importlib.import_module(m)
    return (time.perf_counter() - t0) * 1e3


def score(fn, rows: list[dict]) -> dict:
    right = false_slot = guessed = errors = 0
    wrong: list[str] = []
    ms = []
    for row in rows:
        t0 = time.perf_counter()
        try:
            due = fn(row["text"])
        except Exception:  # a parser that raises on a line reads nothing there
            due, errors = None, errors + 1
        ms.append((time.perf_counter() - t0) * 1e3)
        if row["kind"] is None:
            false_slot += due is not None
        elif row["kind"] == "unreadable":
            guessed += due is not None
        elif due is not None and abs((due - NOW).total_seconds() - row["due_s"]) <= TOLERANCE_S:
            right += 1
        else:
            wrong.append(row["text"])
    return {"right": right, "false_slot": false_slot, "guessed": guessed, "errors": errors,
            "ms_median": statistics.median(ms), "ms_p95": sorted(ms)[int(0.95 * (len(ms) - 1))],
            "wrong": wrong}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="")
    ap.add_argument("--show-wrong", action="store_true")
    args = ap.parse_args(argv)
    rows = [json.loads(x) for x in DATA.read_text().splitlines() if x.strip()]
    n = {k: sum(r["kind"] == k if k != "timed" else r["kind"] in ("at", "for", "until") for r in rows)
         for k in ("timed", None, "unreadable")}
    names = [x for x in args.only.split(",") if x] or list(CANDIDATES)
    print(f"| parser | due right (of {n['timed']}) | false slot (of {n[None]}) | "
          f"guessed unreadable (of {n['unreadable']}) | import ms | ms/call median (p95) |")
    print("|---|---|---|---|---|---|")
    for name in names:
        modules, fn = CANDIDATES[name]
        try:
            imp = import_ms(modules)
        except ImportError as exc:
            print(f"| {name} | not installed: {exc} | | | | |")
            continue
        s = score(fn, rows)
        print(f"| {name} | {s['right']} | {s['false_slot']} | {s['guessed']} | {imp:.0f} | "
              f"{s['ms_median']:.2f} ({s['ms_p95']:.2f}) |")
        if args.show_wrong:
            print("   wrong:", "; ".join(s["wrong"]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
