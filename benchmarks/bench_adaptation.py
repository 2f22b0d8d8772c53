#!/usr/bin/env python3
"""The owner's labels win over the starting model (issue: a household's unusual phrases).

`benchmarks/data/adaptation-session.jsonl` (48 text lines, 8 rounds): a household that says
"abracadabra" to switch its lamp ON (a word no starting model knows) and "lights please" to a
*different* lamp, so it means NOOP here (the starting model reads it as ON), between ordinary
on/off commands and chatter. It goes through `edge-plm replay`'s own path (`build_replay` +
`run_session`, default settings) from each starting model, and for each unusual phrase reports
what the device did at each occurrence and how many corrections (labels the person gave on that
phrase: an answer to a question, an override of a wrong action, or a switch flipped after a
missed command) came before the device followed the phrase for good (every later occurrence
right: ON acted, NOOP not acted on).

    python3 benchmarks/bench_adaptation.py [--start switch-en --start empty]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from edge_plm.loop.replay import build_replay, read_session, run_session
from edge_plm.config.settings import Settings

SESSION = Path(__file__).resolve().parent / "data" / "adaptation-session.jsonl"
PHRASES = {"abracadabra": "ON", "lights please": "NOOP"}


def status(line) -> str:
    if line.acted:
        return "wrong" if line.acted_wrong else "right"
    if line.asked:
        return "asked"
    return "missed" if line.missed else ("right" if line.wish.value == "NOOP" else "ignored")


def run(start: str) -> dict:
    s = Settings()
    s = replace(s, model=replace(s.model, start=start))
    lines = read_session(SESSION)
    r = build_replay(s, None, seed=0)
    try:
        result = run_session(lines, r.controller, r.clock)
        labels = {row.id: row.label_source for row in r.store.interactions(oldest_first=True)}
    finally:
        r.close()
    out = {"start": start, "summary": result.summary(), "phrases": {}}
    for phrase in PHRASES:
        seen = [x for x in result.lines if x.outcome.transcript == phrase]
        marks = [status(x) for x in seen]
        follows = next((i for i in range(len(marks)) if all(m == "right" for m in marks[i:])), None)
        before = seen[:follows] if follows is not None else seen
        corrections = sum(1 for x in before if labels.get(x.outcome.interaction_id))
        out["phrases"][phrase] = {"wish": PHRASES[phrase], "occurrences": marks,
                                  "follows_from_occurrence": None if follows is None else follows + 1,
                                  "corrections_before": corrections}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--start", action="append", help="model.start values (default: switch-en and empty)")
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()
    results = [run(s) for s in (args.start or ["switch-en", "empty"])]
    print("| start | phrase (wish) | what the device did, occurrence by occurrence | follows from | corrections before |")
    print("|---|---|---|---|---|")
    for r in results:
        for phrase, p in r["phrases"].items():
            print(f"| {r['start']} | {phrase} ({p['wish']}) | {' '.join(p['occurrences'])} | "
                  f"{p['follows_from_occurrence'] or 'never'} | {p['corrections_before']} |")
    for r in results:
        s = r["summary"]
        print(f"\n{r['start']}: {s['interactions']} interactions, asked {s['asked']}, acted {s['acted']} "
              f"({s['acted_wrong']} wrong), missed {s['missed']}, labels {s['labels']}", end="")
    print()
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    sys.exit(main())
