#!/usr/bin/env python3
"""Does the ear hear timed commands? (issue 48: "turn off the lights in twenty minutes", spoken)

The lines of benchmarks/data/spoken-time.txt (32 timed commands written for this benchmark:
lights, lamp, fan, heater; durations, clock times, "for" / "until"; the time before or after the
command; two of them with time phrases the ear's grammar does not write: "in twelve minutes",
"at ten to seven") are spoken by four flite voices and espeak-ng (en-us, 175 wpm), made 16 kHz
mono 16-bit by sox (spoken_answers.speech_wav, cached), and transcribed by pocketsphinx with
each language model given (``--lm LABEL=PATH``, repeatable; default: the shipped ear,
edge_plm/data/models/switch-en.ear.arpa; ``general`` for the wheel's general English LM),
without cepstral-mean adaptation across clips (each clip is heard as the first).

Counted per LM: **time read** -- `read_time` on the transcript gives a time slot of the same
kind and due time as on the written line (at a fixed "now", 2026-12-06 14:05 local); **WER**
(word error rate against the written line); **exact** -- the transcript is the line.

    python3 benchmarks/spoken_time.py --lm old=/tmp/ear-old.arpa --lm new=edge_plm/data/models/switch-en.ear.arpa
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from asr_transcripts import edit_distance, normalise  # noqa: E402
from benchinfo import header, markdown_table, write_result  # noqa: E402
from spoken_answers import speech_wav  # noqa: E402

from edge_plm.decide.when import TimeSlot, read_time  # noqa: E402
from edge_plm.voice.audio import read_wav  # noqa: E402
from edge_plm.voice.ear_lm import EAR_LM  # noqa: E402

LINES = REPO / "benchmarks" / "data" / "spoken-time.txt"
VOICES = ("flite:kal16", "flite:awb", "flite:slt", "flite:rms", "espeak:en-us:175")
NOW = dt.datetime(2026, 12, 6, 14, 5).timestamp()


def same_time(written: str, heard: str) -> bool:
    """`read_time` gives the heard transcript the written line's kind and due time."""
    want, got = read_time(written, NOW), read_time(heard, NOW)
    assert isinstance(want, TimeSlot), f"the written line has no readable time: {written!r}"
    return isinstance(got, TimeSlot) and (got.kind, got.due) == (want.kind, want.due)


def run(label: str, lm: str, lines: list[str], voices: tuple[str, ...]) -> dict:
    from edge_plm.voice.asr import PocketSphinxASR  # noqa: PLC0415

    asr = PocketSphinxASR(adapt_cmn=False, lm=None if lm == "general" else lm)
    rows, t0 = [], time.process_time()
    for voice in voices:
        for line in lines:
            heard = asr.transcribe(read_wav(speech_wav(line, voice))[0]).text
            ref = normalise(line)
            rows.append({"voice": voice, "line": line, "heard": heard, "time_read": same_time(line, heard),
                         "errors": edit_distance(ref, normalise(heard)), "words": len(ref),
                         "exact": normalise(heard) == ref})
    n = len(rows)
    return {"label": label, "lm": lm, "clips": n, "time_read": sum(r["time_read"] for r in rows),
            "wer": round(sum(r["errors"] for r in rows) / sum(r["words"] for r in rows), 4),
            "exact": sum(r["exact"] for r in rows), "cpu_s": round(time.process_time() - t0, 1), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lm", action="append", default=[], metavar="LABEL=PATH",
                    help="a language model to hear with (repeatable; PATH 'general': the wheel's LM)")
    ap.add_argument("--voices", default=",".join(VOICES))
    ap.add_argument("--tag", default="")
    args = ap.parse_args(argv)
    lms = [a.split("=", 1) for a in args.lm] or [["shipped", str(EAR_LM)]]
    if any(len(x) != 2 for x in lms):
        ap.error("--lm takes LABEL=PATH")
    lines = [x.strip() for x in LINES.read_text(encoding="utf-8").splitlines() if x.strip()]
    voices = tuple(v for v in args.voices.split(",") if v)
    results = []
    for label, lm in lms:
        r = run(label, lm, lines, voices)
        results.append(r)
        print(f"{label}: time read {r['time_read']}/{r['clips']}, WER {r['wer']:.1%}, exact {r['exact']}/{r['clips']}",
              file=sys.stderr, flush=True)
    print(markdown_table(["LM", "time read right", "WER", "exact transcripts"],
                         [[r["label"], f"{r['time_read']} / {r['clips']}", f"{r['wer']:.1%}",
                           f"{r['exact']} / {r['clips']}"] for r in results]))
    for v in voices:
        print(f"{v}: " + ", ".join(f"{r['label']} {sum(x['time_read'] for x in r['rows'] if x['voice'] == v)}"
                                   f"/{len(lines)}" for r in results))
    write_result("spoken-time" + (f"-{args.tag}" if args.tag else ""), {**header(), "voices": voices, "results": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
