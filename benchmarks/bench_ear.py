#!/usr/bin/env python3
"""The ear in the loop: the spoken sessions of benchmarks/data/spoken/ (spoken_sessions.py)
replayed from their WAVs through the real loop (`edge-plm replay`'s path: `read_session`,
`replay_asr`, `build_replay`, `run_session`: streaming ASR, the policy, gpiozero's
MockFactory, the SQLite buffer, online learning), from the shipped model (``model.start =
"switch-en"``) and, for the households, from empty (``model.start = "empty"``).

Per session and in total: commands (ON/OFF wishes) acted on right, wrong actions (share of
actions), asks at chatter (share of the non-commands), commands missed (neither acted on nor
asked about); from empty, commands acted on right in the first half of the session and in the
second; the loop's CPU seconds per second of audio (`time.process_time` of the whole process,
all threads, over `run_session`, divided by the summed duration of the session's WAVs); the
after-speech latency (`latency_ms.after_speech`, docs/contracts.md) and the ASR's decode time
per utterance (the streamed feeding plus the finalisation after the endpoint).

WAVs are synthesised where missing (flite, espeak-ng) into --wav-dir, not kept in the repository.
Runs one session at a time.

    python3 benchmarks/bench_ear.py [--only household-flite,crowd] [--sessions N]
        [--starts switch-en,empty] [--set SECTION.KEY=VALUE ...] [--wav-dir DIR] [--tag general]
    python3 benchmarks/bench_ear.py --table benchmarks/results/ear-general.json

Prints a markdown table; writes benchmarks/results/ear[-<tag>].json (after each session too, with
``"partial": true`` until the run is complete).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import wave
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sessions import settings_with  # noqa: E402
from benchinfo import header, markdown_table, write_result  # noqa: E402
from spoken_sessions import OUT as SESSIONS, WAV_DIR, replay_file  # noqa: E402

from edge_plm.config.settings import Settings  # noqa: E402
from edge_plm.learning.evaluation import percentiles  # noqa: E402
from edge_plm.loop.replay import build_replay, read_session, replay_asr, run_session, session_span_s  # noqa: E402

STARTS = ("switch-en", "empty")


class DecodeTimes:
    """Per streamed utterance, the ASR's decode time in ms: the feeding while the audio came
    (`Transcript.stream_ms`) plus the finalisation after the endpoint (`decode_ms`)."""

    def __init__(self, asr) -> None:
        self.ms: list[float] = []
        make = asr.session

        def session():
            s = make()
            finish = s.finish

            def timed_finish():
                t = finish()
                self.ms.append(t.stream_ms + t.decode_ms)
                return t

            s.finish = timed_finish
            return s

        asr.session = session


def wav_seconds(path: Path) -> float:
    with wave.open(str(path), "rb") as w:
        return w.getnframes() / float(w.getframerate())


def metrics(lines) -> dict:
    """What a person lives with, from `run_session`'s lines (`LineResult`)."""
    commands = [x for x in lines if x.wish is not None and x.wish.state is not None]
    chatter = [x for x in lines if x.wish is not None and x.wish.state is None]
    acted = sum(x.acted for x in lines)
    wrong = sum(x.acted_wrong for x in lines)
    right = sum(x.acted_right for x in commands)
    half = len(lines) // 2
    halves = []
    for part in (lines[:half], lines[half:]):
        cmds = [x for x in part if x.wish is not None and x.wish.state is not None]
        halves.append({"commands": len(cmds), "acted_right": sum(x.acted_right for x in cmds)})
    return {"lines": len(lines), "commands": len(commands), "commands_acted_right": right,
            "acted_right_share": right / len(commands) if commands else None,
            "acted": acted, "acted_wrong": wrong, "wrong_share_of_actions": wrong / acted if acted else 0.0,
            "non_commands": len(chatter), "asked_non_commands": sum(x.asked for x in chatter),
            "asked_non_command_share": sum(x.asked for x in chatter) / len(chatter) if chatter else None,
            "asked_commands": sum(x.asked for x in commands), "commands_acted_wrong": sum(x.acted_wrong for x in commands),
            "missed": sum(x.missed for x in lines), "halves": halves,
            "errors": sum(x.outcome.error is not None for x in lines)}


def replay_spoken(path: Path, settings: Settings, start: str) -> dict:
    """One replay of the session file `path` (audio lines) from `start`, with its measures."""
    lines = read_session(path)
    if not all(line.audio for line in lines):
        raise ValueError(f"{path}: every line needs \"audio\" (a spoken session)")
    s = replace(settings, model=replace(settings.model, start=start))
    asr = replay_asr(lines, s)
    decode = DecodeTimes(asr)
    audio_s = sum(wav_seconds(line.audio) for line in lines)
    r = build_replay(s, None, seed=0, asr=asr, span_s=session_span_s(len(lines), s))
    try:
        cpu0 = time.process_time()
        result = run_session(lines, r.controller, r.clock, endpointer=r.endpointer)
        cpu = time.process_time() - cpu0
        r.controller.stop()
    finally:
        r.close()
    out = metrics(result.lines)
    summary = result.summary()
    out.update({"start": start, "audio_s": round(audio_s, 2), "cpu_s": round(cpu, 3),
                "cpu_per_audio_s": cpu / audio_s if audio_s else None,
                "after_speech_ms": summary["latency_ms"]["after_speech"],
                "asr_finish_ms": summary["latency_ms"]["asr"],
                "asr_decode_ms": percentiles(decode.ms), "labels": summary["labels"],
                "misheard_commands": [[line.text, x.outcome.transcript] for line, x in zip(lines, result.lines)
                                      if x.wish is not None and x.wish.state is not None and not x.acted_right][:8]})
    return out


def pct(n: int, d: int) -> str:
    return f"{n} / {d} ({100 * n / d:.0f} %)" if d else f"{n} / 0"


def row(name: str, start: str, s: dict) -> list:
    h = s["halves"]
    return [name, start, pct(s["commands_acted_right"], s["commands"]), pct(s["acted_wrong"], s["acted"]),
            pct(s["asked_non_commands"], s["non_commands"]), s["missed"],
            f"{h[0]['acted_right']}/{h[0]['commands']} -> {h[1]['acted_right']}/{h[1]['commands']}",
            f"{s['cpu_per_audio_s']:.3f}" if s["cpu_per_audio_s"] is not None else "-",
            f"{s['after_speech_ms']['median']:.0f} / {s['after_speech_ms']['p95']:.0f}",
            f"{s['asr_decode_ms']['median']:.0f} / {s['asr_decode_ms']['p95']:.0f}"]


def total(runs: list[dict]) -> dict:
    """The sums of `runs`; CPU per second of audio over all their audio; latencies: the median
    and the largest p95 of the sessions' (their medians' median)."""
    keys = ("lines", "commands", "commands_acted_right", "acted", "acted_wrong", "non_commands",
            "asked_non_commands", "asked_commands", "missed", "errors", "audio_s", "cpu_s")
    out = {k: sum(s[k] for s in runs) for k in keys}
    out["halves"] = [{k: sum(s["halves"][i][k] for s in runs) for k in ("commands", "acted_right")} for i in (0, 1)]
    out["cpu_per_audio_s"] = out["cpu_s"] / out["audio_s"] if out["audio_s"] else None
    for key in ("after_speech_ms", "asr_decode_ms"):
        meds = sorted(s[key]["median"] for s in runs)
        out[key] = {"median": meds[len(meds) // 2], "p95": max(s[key]["p95"] for s in runs)}
    return out


def table(results: dict[str, dict[str, dict]], starts: list[str]) -> tuple[str, dict]:
    """The markdown table of `results` (session -> start -> measures) with totals rows, and the
    totals: the households, the crowd sessions, flite only, espeak-ng only and all, per start."""
    rows = [row(name, start, s) for name, by in results.items() for start, s in by.items()]
    totals = {}
    for start in starts:
        for label, keep in (("households", lambda n: n.startswith("household")),
                            ("crowd", lambda n: n.startswith("crowd")),
                            ("flite only", lambda n: "flite" in n), ("espeak-ng only", lambda n: "espeak" in n),
                            ("all", lambda n: True)):
            runs = [by[start] for n, by in results.items() if keep(n) and start in by]
            if runs:
                totals[f"{label} from {start}"] = t = total(runs)
                rows.append([f"**{label}** ({len(runs)})", start, *row("", start, t)[2:]])
    return markdown_table(["session", "from", "commands acted right", "wrong actions (of actions)",
                           "asks at chatter", "missed", "acted right 1st -> 2nd half",
                           "CPU s per s of audio", "after speech ms median / p95",
                           "ASR decode ms median / p95"], rows), totals


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    ap.add_argument("--only", default="", help="comma-separated name prefixes of the sessions to run")
    ap.add_argument("--sessions", type=int, default=None, help="run at most N sessions (after --only)")
    ap.add_argument("--starts", default=",".join(STARTS),
                    help="where the model starts: switch-en (every session), empty (households)")
    ap.add_argument("--wav-dir", default=str(WAV_DIR), help="where the WAVs and replay files are made")
    ap.add_argument("--tag", default="")
    ap.add_argument("--table", metavar="RESULTS.json", help="print the table of a results file (no replay)")
    args = ap.parse_args(argv)
    if args.table:
        try:
            saved = json.loads(Path(args.table).read_text(encoding="utf-8"))
            print(table(saved["sessions"], saved["starts"])[0])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            ap.error(f"--table {args.table}: not a results file of this benchmark ({type(exc).__name__}: {exc})")
        return 0
    try:
        settings = settings_with(args.set)
    except (ValueError, TypeError) as exc:
        ap.error(str(exc))
    starts = [s for s in args.starts.split(",") if s]
    if not starts or any(s not in STARTS for s in starts):
        ap.error(f"--starts: use a comma-separated list of {', '.join(STARTS)}, got {args.starts!r}")
    if args.sessions is not None and args.sessions < 1:
        ap.error(f"--sessions must be at least 1, got {args.sessions}")
    prefixes = [p for p in args.only.split(",") if p]
    names = [p.stem for p in sorted(SESSIONS.glob("*.jsonl"))
             if not prefixes or any(p.stem.startswith(x) for x in prefixes)]
    if not names:
        ap.error(f"no session in {SESSIONS.relative_to(SESSIONS.parents[2])} matches --only {args.only!r}")
    names = names[:args.sessions]
    results: dict[str, dict[str, dict]] = {}
    name_out = "ear" + (f"-{args.tag}" if args.tag else "")
    for name in names:
        path = replay_file(SESSIONS / f"{name}.jsonl", Path(args.wav_dir))
        for start in starts:
            if start == "empty" and not name.startswith("household"):
                continue
            s = replay_spoken(path, settings, start)
            results.setdefault(name, {})[start] = s
            print(f"{name} from {start}: acted right {s['commands_acted_right']}/{s['commands']}, "
                  f"wrong {s['acted_wrong']}/{s['acted']}, asks at chatter {s['asked_non_commands']}/"
                  f"{s['non_commands']}, missed {s['missed']}, cpu/audio {s['cpu_per_audio_s']:.3f}",
                  file=sys.stderr, flush=True)
            # what is done so far, should a long run be stopped (the totals come at the end)
            write_result(name_out, {**header(), "overrides": args.set, "starts": starts, "sessions": results,
                                    "partial": True})
    text, totals = table(results, starts)
    print(text)
    write_result(name_out, {**header(), "overrides": args.set, "starts": starts, "sessions": results, "totals": totals})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
