#!/usr/bin/env python3
"""Spoken "household" sessions for the loop benchmarks: one person, a few ways of saying ON and
OFF, some chatter, each phrasing spoken by flite in two voices and heard through pocketsphinx.

Why: the crowd-written dev set has every utterance once, from many people; a household repeats
its own phrasings, and on the device the model only ever sees ASR output. Each household
(seeded) takes 3 ON, 3 OFF and 6 NOOP utterances of ../shared/data/switch-dev-train.jsonl and
two flite voices, and plays `--lines` interactions: a command that changes the light (ON when
it is off, OFF when it is on) after 0-2 chatter lines. Every line is synthesised
(scripts/synth_speech.py), converted to 16 kHz with sox and transcribed in session order by one
PocketSphinx decoder, as on the device.

Output per household: benchmarks/data/households/household-<seed>.jsonl with
{"text": ASR transcript, "label", "clean_text", "voice"} per line, ready for `edge-plm replay`
(the text is what the device heard; an empty one is an utterance it heard nothing in, which
the loop logs as an error row). WAVs go to --wav-dir (not kept in the repository).

With --text, no speech: the same households' clean text, for long text sessions
(household-text-<seed>.jsonl; default 200 lines).

    python3 benchmarks/household_sessions.py [--households 8] [--lines 60] [--wav-dir /tmp/edge-plm-households]
    python3 benchmarks/household_sessions.py --text [--households 8] [--lines 200]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from synth_speech import VOICES, synthesize  # noqa: E402

from edge_plm.voice.asr import PocketSphinxASR  # noqa: E402
from edge_plm.voice.audio import read_wav  # noqa: E402

OUT = REPO / "benchmarks" / "data" / "households"


def household_script(train: list[dict], seed: int, lines: int) -> list[dict]:
    """The lines a household says: {"clean_text", "label", "voice"} in order."""
    rng = random.Random(seed)
    pick = {lab: rng.sample([r["text"] for r in train if r["label"] == lab], k)
            for lab, k in (("ON", 3), ("OFF", 3), ("NOOP", 6))}
    voices = rng.sample(VOICES, 2)
    out: list[dict] = []
    light_on = False
    while len(out) < lines:
        for _ in range(rng.randint(0, 2)):
            out.append({"clean_text": rng.choice(pick["NOOP"]), "label": "NOOP", "voice": rng.choice(voices)})
        wish = "OFF" if light_on else "ON"
        out.append({"clean_text": rng.choice(pick[wish]), "label": wish, "voice": rng.choice(voices)})
        light_on = not light_on
    return out[:lines]


def transcribe_session(script: list[dict], wav_dir: Path) -> list[dict]:
    asr = PocketSphinxASR()
    rows = []
    for line in script:
        name = "".join(ch if ch.isalnum() else "-" for ch in line["clean_text"].lower())[:60]
        wav = wav_dir / f"{name}.{line['voice']}.wav"
        if not wav.exists():
            synthesize(line["clean_text"], wav, voice=line["voice"])
        samples, _ = read_wav(wav)
        text = asr.transcribe(samples).text
        rows.append({"text": text, "label": line["label"],
                     "clean_text": line["clean_text"], "voice": line["voice"]})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--households", type=int, default=8)
    ap.add_argument("--lines", type=int, default=None, help="per household (60 spoken, 200 text)")
    ap.add_argument("--text", action="store_true", help="clean text sessions, no speech")
    ap.add_argument("--wav-dir", default="/tmp/edge-plm-households")
    args = ap.parse_args(argv)
    train = [json.loads(x) for x in Path(args.data, "switch-dev-train.jsonl").read_text().splitlines() if x.strip()]
    OUT.mkdir(parents=True, exist_ok=True)
    for seed in range(args.households):
        if args.text:
            script = household_script(train, seed, args.lines or 200)
            path = OUT / f"household-text-{seed}.jsonl"
            path.write_text("".join(json.dumps({"text": r["clean_text"], "label": r["label"]}) + "\n"
                                    for r in script))
            print(f"{path.relative_to(REPO)}: {len(script)} lines", flush=True)
            continue
        rows = transcribe_session(household_script(train, seed, args.lines or 60), Path(args.wav_dir))
        path = OUT / f"household-{seed}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        empty = sum(not r["text"] for r in rows)
        print(f"{path.relative_to(REPO)}: {len(rows)} lines, {empty} heard as nothing", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
