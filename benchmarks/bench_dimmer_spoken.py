#!/usr/bin/env python3
"""Dimmers and questions, spoken: the three dimmer sessions of benchmarks/bench_dimmer.py
(benchmarks/data/dimmer/dimmer-{crowd,ha,mixed}.jsonl, household benchmarks/data/dimmer/
household.toml: a dimmable lamp "lamp" / "light" / "lights" and a fan on a relay) spoken by one
voice each (one voice per household) and replayed from their WAVs through the real loop
(`edge-plm replay`'s path: `read_session`, `replay_asr` (pocketsphinx with the ear's configured
LM, ``asr.lm = "household"`` by default), `build_replay`, `run_session`), from the shipped
switch model and the shipped kind head.

Voices: flite slt and rms, espeak-ng en-us at 160 wpm (benchmarks/spoken_answers.py
`speech_wav`: flite via scripts/synth_speech.py, espeak-ng through the repository's own speech
code, 16 kHz). The WAVs and the replay files go to --wav-dir (default
``<tmp>/edge-plm-spoken/dimmer``), never into the repository.

Per session and voice: dim / brighten lines acted right, level lines right, dimmer lines wrong
(a relay moved, the lamp went the other way or to another level), relays moved by dimmer and
question lines, questions answered, on / off and chatter lines acted wrong (of those acted on, as
bench_dimmer.py counts them), asks at
chatter (chatter lines the device asked about: the switch model's ask or a dim ask), chatter
that moved the lamp, and the dimmer lines' transcripts.

    python3 benchmarks/bench_dimmer_spoken.py [--voices flite:slt,...] [--only dimmer-ha] [--tag TAG]

Prints a markdown table; writes benchmarks/results/dimmer-spoken[-<tag>].json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import header, markdown_table, write_result  # noqa: E402
from bench_dimmer import HERE, SESSIONS, STEPS, tot  # noqa: E402
from spoken_answers import speech_wav  # noqa: E402

from edge_plm.config.settings import load  # noqa: E402
from edge_plm.loop.kind_replay import per_kind  # noqa: E402
from edge_plm.loop.replay import build_replay, read_session, replay_asr, run_session  # noqa: E402


VOICES = ("flite:slt", "flite:rms", "espeak:en-us:160")
WAV_DIR = Path(tempfile.gettempdir()) / "edge-plm-spoken" / "dimmer"
MOVES = ("dimmed", "brightened", "levelled")


def voice_tag(voice: str) -> str:
    return voice.replace(":", "-").replace("+", "-")


def replay_file(name: str, voice: str, wav_dir: Path = WAV_DIR) -> Path:
    """Session `name` spoken by `voice`: its replay file in `wav_dir` (WAVs made where missing),
    every line as in the text session plus ``"audio"`` and ``"voice"``."""
    rows = [json.loads(line) for line in (HERE / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    out = []
    for row in rows:
        wav = speech_wav(row["text"], voice, wav_dir / "wav")
        out.append({"audio": str(wav.relative_to(wav_dir)), **row, "voice": voice})
    path = wav_dir / f"{name}.{voice_tag(voice)}.replay.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in out), encoding="utf-8")
    return path


def run(path: Path) -> dict:
    """One replay of the spoken session `path`, with its measures."""
    settings = load(HERE / "household.toml")
    lines = read_session(path)
    rep = build_replay(settings, None, asr=replay_asr(lines, settings), epoch=1.8e9)
    try:
        res = run_session(lines, rep.controller, rep.clock, endpointer=rep.endpointer)
        by_kind = per_kind(res.kinds)
        store = rep.controller.store
        rows = {r.index: store.kind(r.outcome.interaction_id) if r.outcome.interaction_id else None
                for r in res.lines}
        plain = [r for r in res.lines if lines[r.index].kind is None]
        chatter = [r for r in plain if r.wish is not None and r.wish.state is None]
        heard = [{"text": lines[r.index].text, "heard": r.outcome.transcript, "kind": lines[r.index].kind,
                  "right": k.right} for r, k in zip((res.lines[k.index] for k in res.kinds), res.kinds)]
        return {"summary": res.summary(), "kinds": by_kind,
                "onoff_acted_wrong": sum(r.acted_wrong for r in plain),
                "onoff_acted": sum(r.acted for r in plain),
                "onoff_lines": sum(r.wish is not None and r.wish.state is not None for r in plain),
                "chatter": len(chatter),
                "chatter_asked": sum(r.asked or (rows[r.index] is not None and rows[r.index].done == "asked")
                                     for r in chatter),
                "chatter_moved_dimmer": sum(rows[r.index] is not None and rows[r.index].done in MOVES
                                            for r in chatter),
                "kind_lines_heard": heard}
    finally:
        rep.close()


def row(name: str, voice: str, r: dict) -> list:
    return [name, voice, f"{tot(r, STEPS, 'right')}/{tot(r, STEPS, 'lines')}",
            f"{tot(r, ('LEVEL',), 'right')}/{tot(r, ('LEVEL',), 'lines')}",
            tot(r, (*STEPS, "LEVEL"), "wrong"), tot(r, (*STEPS, "LEVEL", "QUERY"), "relays_moved"),
            f"{tot(r, ('QUERY',), 'right')}/{tot(r, ('QUERY',), 'lines')}",
            f"{r['onoff_acted_wrong']}/{r['onoff_acted']}", f"{r['chatter_asked']}/{r['chatter']}",
            r["chatter_moved_dimmer"]]


def totals(runs: list[dict]) -> dict:
    out: dict = {"kinds": {}}
    for r in runs:
        for kind, c in r["kinds"].items():
            t = out["kinds"].setdefault(kind, dict.fromkeys(c, 0))
            for key, v in c.items():
                t[key] += v
    for key in ("onoff_acted_wrong", "onoff_acted", "onoff_lines", "chatter", "chatter_asked", "chatter_moved_dimmer"):
        out[key] = sum(r[key] for r in runs)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--voices", default=",".join(VOICES), help="comma-separated flite:<voice> / espeak:<voice>:<wpm>")
    ap.add_argument("--only", default="", help="comma-separated session names")
    ap.add_argument("--wav-dir", default=str(WAV_DIR))
    ap.add_argument("--tag", default="")
    args = ap.parse_args(argv)
    voices = [v for v in args.voices.split(",") if v]
    names = [n for n in args.only.split(",") if n] or list(SESSIONS)
    if not voices or any(n not in SESSIONS for n in names):
        ap.error(f"--only: use names of {', '.join(SESSIONS)}; --voices: at least one voice")
    out = {**header(), "voices": voices, "sessions": {}}
    rows = []
    for name in names:
        for voice in voices:
            try:
                path = replay_file(name, voice, Path(args.wav_dir))
            except ValueError as exc:
                ap.error(str(exc))
            r = run(path)
            out["sessions"][f"{name}/{voice}"] = r
            rows.append(row(name, voice, r))
            print(" | ".join(map(str, rows[-1])), file=sys.stderr, flush=True)
    out["totals"] = totals(list(out["sessions"].values()))
    rows.append(row("**all**", f"{len(out['sessions'])} runs", out["totals"]))
    print(markdown_table(["session", "voice", "dim/brighten right", "level right", "dimmer lines wrong",
                          "relays moved by them", "questions answered", "on/off acted wrong",
                          "asks at chatter", "chatter moved the lamp"], rows))
    path = write_result("dimmer-spoken" + (f"-{args.tag}" if args.tag else ""), out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
