#!/usr/bin/env python3
"""Synthesise spoken commands to 16 kHz mono int16 WAV with flite (several voices) and sox.

Why: tests, demos and ASR benchmarks need real speech audio without a microphone or
downloads. flite renders the text (its voices differ in rate and quality: kal is 8 kHz, the
others 16 kHz); sox converts to exactly what the ASR wants and pads a little silence around
the speech, as a microphone recording would have.

    python3 scripts/synth_speech.py "turn on the light" -o out.wav --voice slt
    python3 scripts/synth_speech.py --demo edge_plm/data/demo     # rebuild the packaged demo set

Reusable: `synthesize(text, out_path, voice)` and `build_demo(out_dir)`.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

VOICES = ("slt", "rms", "awb", "kal16")  # flite's general-purpose voices (awb_time only says times)


class SynthError(RuntimeError):
    """flite or sox is missing or failed; the message says which and why."""


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise SynthError(f"'{tool}' not found on PATH (Debian: apt-get install {tool})")
    return path


def synthesize(text: str, out_path: str | Path, voice: str = "slt", rate: int = 16000,
               pad_s: tuple[float, float] = (0.15, 0.2)) -> Path:
    """Speak `text` with flite voice `voice` into `out_path` as `rate` Hz mono 16-bit PCM WAV,
    with `pad_s` seconds of silence before and after."""
    text = " ".join(text.split())
    if not text:
        raise SynthError("nothing to synthesise: empty text")
    flite, sox = _need("flite"), _need("sox")
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "flite.wav"
        run = subprocess.run([flite, "-voice", voice, "-t", text, "-o", str(raw)],
                             capture_output=True, text=True)
        if run.returncode != 0 or not raw.exists() or raw.stat().st_size <= 44:
            raise SynthError(f"flite failed for voice {voice!r}: {run.stderr.strip() or 'no output'}")
        cmd = [sox, str(raw), "-r", str(rate), "-c", "1", "-b", "16", "-e", "signed-integer",
               str(out_path), "pad", str(pad_s[0]), str(pad_s[1])]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            raise SynthError(f"sox conversion failed: {run.stderr.strip()}")
    return out_path


# ---------------------------------------------------------------------------------------------
# The packaged demo set: a lamp, spoken to in several voices.


@dataclass(frozen=True)
class Phrase:
    slug: str
    text: str
    label: str  # ON | OFF | NOOP
    voices: tuple[str, ...]


# text | label | voices (each phrase in two voices, every voice about as often)
_DEMO_TABLE = """
turn on the light             | ON   | slt rms
switch the lamp on            | ON   | awb kal16
lights on please              | ON   | rms slt
can you turn the lamp on      | ON   | kal16 awb
turn off the light            | OFF  | slt awb
switch the lamp off           | OFF  | rms kal16
lights off please             | OFF  | awb slt
i am going to bed, lights off | OFF  | kal16 rms
what time is it               | NOOP | slt kal16
play some music               | NOOP | rms awb
what is the weather like      | NOOP | awb slt
set an alarm for seven        | NOOP | kal16 rms
"""


def _phrase(row: str) -> Phrase:
    text, label, voices = (cell.strip() for cell in row.split("|"))
    return Phrase(re.sub(r"[^a-z0-9]+", "-", text).strip("-"), text, label, tuple(voices.split()))


DEMO_PHRASES: tuple[Phrase, ...] = tuple(_phrase(row) for row in _DEMO_TABLE.strip().splitlines())


def build_demo(out_dir: str | Path, n_lines: int = 48, seed: int = 7) -> Path:
    """Render DEMO_PHRASES (one WAV per phrase and voice) and write session.jsonl: `n_lines`
    interactions in a plausible order — the first pass uses the plainest phrasings, later ones
    mix everything, each phrasing recurring in different voices so a learner can improve."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    clips: list[tuple[str, Phrase]] = []
    for phrase in DEMO_PHRASES:
        for voice in phrase.voices:
            name = f"{phrase.slug}.{voice}.wav"
            synthesize(phrase.text, out_dir / name, voice)
            clips.append((name, phrase))
    rng = random.Random(seed)
    plain = [c for c in clips if c[1].slug in ("turn-on-the-light", "turn-off-the-light")]
    session = [plain[0], plain[2], plain[1], plain[3]]  # on, off, on, off: an easy start
    while len(session) < n_lines:
        batch = clips[:]
        rng.shuffle(batch)
        session.extend(batch)
    session = session[:n_lines]
    lines = [json.dumps({"audio": name, "label": p.label, "text": p.text}) for name, p in session]
    (out_dir / "session.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out_dir


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("text", nargs="?", help="what to say")
    ap.add_argument("-o", "--out", help="output WAV path")
    ap.add_argument("--voice", default="slt", help=f"flite voice (one of {', '.join(VOICES)})")
    ap.add_argument("--rate", type=int, default=16000)
    ap.add_argument("--demo", metavar="DIR", help="build the demo set (WAVs + session.jsonl) in DIR")
    args = ap.parse_args(argv)
    try:
        if args.demo:
            out = build_demo(args.demo)
            n = len(list(out.glob("*.wav")))
            print(f"wrote {n} WAV files and session.jsonl to {out}")
        elif args.text and args.out:
            print(synthesize(args.text, args.out, args.voice, args.rate))
        else:
            ap.error("give TEXT and --out, or --demo DIR")
    except SynthError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
