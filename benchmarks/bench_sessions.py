#!/usr/bin/env python3
"""The loop's behaviour on replayed sessions (issue targets: wrong actions <= 10 % of actions on
a spoken session; on a long session, asks in the second half < half those in the first; no
repeated wrong action on a transcript after the person corrected it).

Every session goes through `edge-plm replay`'s own path (`build_replay` + `run_session`: the
policy, gpiozero's MockFactory, the SQLite buffer, online learning with holdout and versions)
with `Settings()` defaults unless --set overrides a field. Sessions:
  household-<i>  benchmarks/data/households/ (household_sessions.py): one person's repeated
                 phrasings, spoken by flite and heard by pocketsphinx; the text is the ASR output
  household-text-<i>  the same households' clean text, 200 lines: long text sessions
  demo           the packaged demo (edge_plm/data/demo), played from its WAVs through pocketsphinx
  crowd-425      every line of ../shared/data/switch-dev-train.jsonl once, in file order, clean
                 text: 425 different people's utterances, 85 % chatter (a stress case: nothing
                 repeats)
  crowd-283      every line of switch-dev-test once, in file order, as heard through
                 pocketsphinx from flite voices (benchmarks/data/switch-dev-test.asr.jsonl,
                 asr_transcripts.py): the spoken stress case
  first-week-text / first-week-asr  every line of switch-dev-test once, commands alternating
                 with other requests, clean and as heard (benchmarks/first_week.py)

    python3 benchmarks/bench_sessions.py [--set model.evidence_prior=0 ...] [--only household]

Prints a markdown table; writes benchmarks/results/sessions[-<tag>].json.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import header, markdown_table, write_result  # noqa: E402

from edge_plm.loop.replay import build_replay, read_session, replay_asr, run_session  # noqa: E402
from edge_plm.switch.tokenizer import normalize  # noqa: E402
from edge_plm.config.settings import Settings  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
HOUSEHOLDS = REPO / "benchmarks" / "data" / "households"
DEMO = REPO / "edge_plm" / "data" / "demo" / "session.jsonl"


def settings_with(overrides: list[str]) -> Settings:
    s = Settings()
    for item in overrides:
        key, _, value = item.partition("=")
        section, _, field = key.partition(".")
        sec = getattr(s, section, None)
        if sec is None or not hasattr(sec, field):
            raise ValueError(f"--set {item!r}: no setting {key!r} (use SECTION.KEY=VALUE, e.g. model.evidence_prior=0)")
        s = replace(s, **{section: replace(sec, **{field: type(getattr(sec, field))(value)})})
    return s


def replay(path: Path, settings: Settings) -> dict:
    lines = read_session(path)
    r = build_replay(settings, None, seed=0, asr=replay_asr(lines, settings))
    try:
        result = run_session(lines, r.controller, r.clock, endpointer=r.endpointer)
    finally:
        r.close()
    s = result.summary()
    half = len(result.lines) // 2
    first, second = result.lines[:half], result.lines[half:]
    s["asked_halves"] = [sum(x.asked for x in first), sum(x.asked for x in second)]
    s["switched_by_hand_halves"] = [switched_by_hand(first), switched_by_hand(second)]
    s["wrong_share"] = s["acted_wrong"] / s["acted"] if s["acted"] else 0.0
    s["repeated_wrong_after_correction"] = repeated_wrong_after_correction(result.lines)
    s.update(person_metrics(result.lines))
    return s


def person_metrics(lines) -> dict:
    """What a person lives with: commands (ON/OFF wishes) acted on right, wrong actions as a share
    of actions, asks at utterances that were not commands (NOOP wishes)."""
    commands = [x for x in lines if x.wish is not None and x.wish.state is not None]
    chatter = [x for x in lines if x.wish is not None and x.wish.state is None]
    right = sum(x.acted and not x.acted_wrong for x in commands)
    acted = sum(x.acted for x in lines)
    asked_chatter = sum(x.asked for x in chatter)
    return {"commands": len(commands), "commands_acted_right": right,
            "acted_right_share": right / len(commands) if commands else None,
            "wrong_share_of_actions": sum(x.acted_wrong for x in lines) / acted if acted else 0.0,
            "non_commands": len(chatter), "asked_non_commands": asked_chatter,
            "asked_non_command_share": asked_chatter / len(chatter) if chatter else None}


def switched_by_hand(lines) -> dict:
    """The commands of ``lines`` that would change the relay (not said in the state it already
    had): how many, and how many the device acted on right, asked about, or did neither on (the
    person switched those by hand). Asks can grow while a young device learns, when it moves
    from missing such commands to asking about them; this says which it is."""
    changing = [x for x in lines if x.wish is not None and x.wish.state is not None and not x.already_so]
    return {"commands": len(changing), "acted_right": sum(x.acted and not x.acted_wrong for x in changing),
            "asked": sum(x.asked for x in changing), "neither": sum(not x.acted and not x.asked for x in changing)}


def by_hand(halves: list[dict]) -> str:
    """"a/b -> c/d": state-changing commands switched by hand of those said, by half."""
    return " -> ".join(f"{h['neither']}/{h['commands']}" for h in halves)


def repeated_wrong_after_correction(lines) -> int:
    """Wrong actions on a transcript that the person had already corrected for that same action:
    the device acted wrongly on transcript t with action A and the person flipped the switch
    (an override), and later acted on exactly t (normalised) with A again, wrongly."""
    overridden: dict[str, set[str]] = {}
    repeats = 0
    for x in lines:
        if not x.acted_wrong:
            continue
        t, a = normalize(x.outcome.transcript), x.outcome.prediction
        if a in overridden.get(t, ()):
            repeats += 1
        if x.flips:
            overridden.setdefault(t, set()).add(a)
    return repeats


def sessions(args) -> dict[str, Path]:
    out = {p.stem: p for p in sorted(HOUSEHOLDS.glob("household-[0-9]*.jsonl"))}
    out.update({p.stem: p for p in sorted(HOUSEHOLDS.glob("household-text-*.jsonl"))})
    out["demo"] = DEMO
    train = Path(args.data) / "switch-dev-train.jsonl"
    if train.exists():
        out["crowd-425"] = train
    out["crowd-283"] = REPO / "benchmarks" / "data" / "switch-dev-test.asr.jsonl"
    for kind in ("text", "asr"):
        out[f"first-week-{kind}"] = REPO / "benchmarks" / "data" / f"first-week-{kind}.jsonl"
    prefixes = [p for p in args.only.split(",") if p]
    return {k: v for k, v in out.items() if not prefixes or any(k.startswith(p) for p in prefixes)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    ap.add_argument("--only", default="", help="comma-separated name prefixes of the sessions to run")
    ap.add_argument("--tag", default="")
    args = ap.parse_args(argv)
    settings = settings_with(args.set)
    results = {}
    for name, path in sessions(args).items():
        results[name] = replay(path, settings)
        s = results[name]
        print(f"{name}: commands acted right {s['commands_acted_right']}/{s['commands']}, "
              f"asked at non-commands {s['asked_non_commands']}/{s['non_commands']}; "
              f"asked {s['asked']} acted {s['acted']} wrong {s['acted_wrong']} "
              f"asks {s['asked_halves'][0]}->{s['asked_halves'][1]} "
              f"switched by hand {by_hand(s['switched_by_hand_halves'])} "
              f"repeated wrong {s['repeated_wrong_after_correction']}", file=sys.stderr, flush=True)
    rows = [[name, s["interactions"], s["asked"], s["acted"], s["acted_wrong"],
             f"{100 * s['wrong_share']:.0f} %", s["missed"], s["labels"],
             f"{s['asked_halves'][0]} -> {s['asked_halves'][1]}", by_hand(s["switched_by_hand_halves"]),
             s["repeated_wrong_after_correction"]]
            for name, s in results.items()]
    for kind in ("spoken", "text"):
        hh = [s for n, s in results.items() if n.startswith("household-") and ("-text-" in n) == (kind == "text")]
        if not hh:
            continue
        tot = {k: sum(s[k] for s in hh) for k in ("interactions", "asked", "acted", "acted_wrong", "missed", "labels",
                                                   "repeated_wrong_after_correction")}
        halves = [sum(s["asked_halves"][i] for s in hh) for i in (0, 1)]
        hand = [{k: sum(s["switched_by_hand_halves"][i][k] for s in hh) for k in ("commands", "neither")}
                for i in (0, 1)]
        rows.append([f"all {len(hh)} {kind} households", tot["interactions"], tot["asked"], tot["acted"],
                     tot["acted_wrong"], f"{100 * tot['acted_wrong'] / max(tot['acted'], 1):.0f} %", tot["missed"],
                     tot["labels"], f"{halves[0]} -> {halves[1]}", by_hand(hand), tot["repeated_wrong_after_correction"]])
    print(markdown_table(["session", "lines", "asked", "acted", "acted wrong", "wrong share", "missed",
                          "labels", "asks 1st -> 2nd half", "switched by hand 1st -> 2nd half",
                          "repeated wrong after a correction"], rows))
    name = "sessions" + (f"-{args.tag}" if args.tag else "")
    write_result(name, {**header(), "overrides": args.set, "sessions": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
