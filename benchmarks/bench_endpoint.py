#!/usr/bin/env python3
"""Endpointing in noise: energy endpointing against WebRTC's VAD, by silence tail.

The spoken households' lines (household_sessions.py: one person's phrasings of
../shared/data/switch-dev-train.jsonl, spoken by flite) are laid end to end as one continuous
"microphone" stream per household, each utterance scaled to -26 dBFS active speech level and
separated by a seeded pause of 0.4-2.0 s. Noise is mixed in by sox (`sox -m`) at 20 and 10 dB
SNR (noise RMS relative to the speech level):
  pink    sox's pink noise (a fan, an air conditioner);
  babble  six espeak-ng voices reading chatter at once (a television, people in the room).
The stream goes through `Endpointer` in 30 ms blocks exactly as the microphone's would, and the
segments are compared with where the speech really is (10 ms frames of the clean utterance
above -50 dBFS, first to last):
  cut     words cut off: an utterance split over several segments or missed, or whose segment
          leaves out more than 2 % of its clean speech energy (a word or a syllable, not a
          breath; at 10 dB SNR the quietest frames are under the noise)
  edge    stricter: any clean frame above -50 dBFS outside its one segment
  merged  utterances that share a segment with the one before them (two commands heard as one)
  false   segments with no speech in them (false starts: noise taken for speech)

    python3 benchmarks/bench_endpoint.py [--households 4] [--tails 150,200,250,300,350,450,600]

Prints a markdown table; writes benchmarks/results/endpoint.json. WAVs are cached in --wav-dir.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "scripts"))

from benchinfo import header, markdown_table, write_result  # noqa: E402
from household_sessions import household_script  # noqa: E402
from synth_speech import synthesize  # noqa: E402

from edge_plm.voice.endpoint import Endpointer  # noqa: E402
from edge_plm.voice.pcm import read_wav, write_wav  # noqa: E402

RATE = 16000
FRAME = 160  # 10 ms frames for the reference speech bounds
SPEECH_DB = -26.0  # active speech level every utterance is scaled to
TRUTH_DB = -50.0  # a 10 ms frame of the clean utterance above this is speech
DETECTORS = {"energy -40 dBFS": {"vad": "energy", "threshold_db": -40.0},
             "energy -40 + floor 8": {"vad": "energy", "threshold_db": -40.0, "floor_margin_db": 8.0},
             "webrtc 2": {"vad": "webrtc", "vad_aggressiveness": 2},
             "webrtc 3": {"vad": "webrtc", "vad_aggressiveness": 3},
             "webrtc 2 + floor 5": {"vad": "webrtc", "vad_aggressiveness": 2, "floor_margin_db": 5.0},
             "webrtc 2 + floor 8": {"vad": "webrtc", "vad_aggressiveness": 2, "floor_margin_db": 8.0},
             "webrtc 3 + floor 8": {"vad": "webrtc", "vad_aggressiveness": 3, "floor_margin_db": 8.0}}
CONDITIONS = [("clean", None, None), ("pink", 20, "pink"), ("pink", 10, "pink"),
              ("babble", 20, "babble"), ("babble", 10, "babble")]


def frame_db(x: np.ndarray) -> np.ndarray:
    n = len(x) // FRAME
    f = x[: n * FRAME].astype(np.float64).reshape(n, FRAME)
    rms = np.sqrt(np.mean(f * f, axis=1))
    return 20 * np.log10(np.maximum(rms, 1e-9) / 32768.0)


def scaled(samples: np.ndarray) -> np.ndarray:
    """The utterance at SPEECH_DB active level (RMS over its frames within 40 dB of the peak)."""
    db = frame_db(samples)
    active = db >= db.max() - 40
    n = len(db) * FRAME
    x = samples[:n].astype(np.float64).reshape(len(db), FRAME)[active]
    level = 20 * np.log10(np.sqrt(np.mean(x * x)) / 32768.0)
    return np.clip(samples * 10 ** ((SPEECH_DB - level) / 20), -32768, 32767).astype(np.int16)


def build_stream(train: list[dict], seed: int, lines: int, wav_dir: Path) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """One household as a continuous stream and the true speech bounds (ms) of each utterance."""
    rng = random.Random(1000 + seed)
    parts, truth, pos = [np.zeros(RATE, dtype=np.int16)], [], RATE
    for line in household_script(train, seed, lines):
        name = "".join(ch if ch.isalnum() else "-" for ch in line["clean_text"].lower())[:60]
        wav = wav_dir / f"{name}.{line['voice']}.wav"
        if not wav.exists():
            synthesize(line["clean_text"], wav, voice=line["voice"])
        utt = scaled(read_wav(wav)[0])
        speech = np.flatnonzero(frame_db(utt) >= TRUTH_DB)
        truth.append(((pos + speech[0] * FRAME) / RATE * 1000, (pos + (speech[-1] + 1) * FRAME) / RATE * 1000))
        gap = np.zeros(int(rng.uniform(0.4, 2.0) * RATE), dtype=np.int16)
        parts += [utt, gap]
        pos += len(utt) + len(gap)
    parts.append(np.zeros(RATE, dtype=np.int16))
    return np.concatenate(parts), truth


def make_noise(kind: str, seconds: float, tmp: Path, chatter: list[str]) -> Path:
    """A noise file of `seconds` (sox pink noise, or babble of six espeak-ng voices)."""
    out = tmp / f"{kind}.wav"
    if kind == "pink":
        subprocess.run(["sox", "-n", "-r", str(RATE), "-c", "1", "-b", "16", str(out), "synth",
                        f"{seconds:.2f}", "pinknoise"], check=True)
        return out
    voices = ["en-us+m3", "en-gb+f2", "en-us+f4", "en+m5", "en-gb-scotland+m1", "en-us+f1"]
    rng = random.Random(7)
    talkers = []
    for i, voice in enumerate(voices):
        text = ". ".join(rng.sample(chatter, min(len(chatter), 40)))
        raw, norm = tmp / f"talker{i}.raw.wav", tmp / f"talker{i}.wav"
        subprocess.run(["espeak-ng", "-v", voice, "-s", str(150 + 10 * i), "-w", str(raw), text], check=True)
        # each talker looped to the stream's length, starting at a different point
        subprocess.run(["sox", str(raw), "-r", str(RATE), "-c", "1", "-b", "16", str(norm),
                        "trim", f"{i * 3.1:.1f}", "repeat", "40", "trim", "0", f"{seconds:.2f}"], check=True)
        talkers.append(str(norm))
    subprocess.run(["sox", "-m", *talkers, str(out)], check=True)
    return out


def mix(clean: Path, noise: Path, snr_db: float, out: Path) -> np.ndarray:
    """sox -m of the clean stream and the noise scaled to SPEECH_DB - snr_db."""
    x = read_wav(noise)[0].astype(np.float64)
    level = 20 * np.log10(np.sqrt(np.mean(x * x)) / 32768.0)
    gain = 10 ** ((SPEECH_DB - snr_db - level) / 20)
    subprocess.run(["sox", "-m", "-v", "1", str(clean), "-v", f"{gain:.6f}", str(noise), str(out)],
                   check=True, capture_output=True)
    return read_wav(out)[0]


def lost_energy(clean: np.ndarray, s_ms: float, e_ms: float, seg) -> float:
    """Fraction of the clean utterance's energy in [s_ms, e_ms) outside the segment."""
    a, b = int(s_ms * RATE / 1000), int(e_ms * RATE / 1000)
    x = clean[a:b].astype(np.float64) ** 2
    lo = max(0, int(seg.start_ms * RATE / 1000) - a)
    hi = max(0, min(b - a, int(seg.end_ms * RATE / 1000) - a))
    total = float(x.sum())
    return 0.0 if total <= 0 else 1.0 - float(x[lo:hi].sum()) / total


def score(stream: np.ndarray, clean: np.ndarray, truth: list[tuple[float, float]], ep: Endpointer) -> dict:
    ep.reset()
    segs = ep.feed(stream) + ep.flush()
    cut = edge = merged = 0
    owner: list[list[int]] = [[] for _ in segs]
    for i, (s, e) in enumerate(truth):
        touching = [k for k, g in enumerate(segs) if g.start_ms < e and g.end_ms > s]
        for k in touching:
            owner[k].append(i)
        one = segs[touching[0]] if len(touching) == 1 else None
        if one is None or not (one.start_ms <= s and one.end_ms >= e):
            edge += 1
        if one is None or lost_energy(clean, s, e, one) > 0.02:
            cut += 1
    merged = sum(max(0, len(o) - 1) for o in owner)
    false = sum(not o for o in owner)
    return {"utterances": len(truth), "segments": len(segs), "cut": cut, "edge": edge, "merged": merged,
            "false_starts": false, "max_length_cuts": sum(g.truncated for g in segs)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--households", type=int, default=4)
    ap.add_argument("--lines", type=int, default=60)
    ap.add_argument("--tails", default="150,200,250,300,350,450,600")
    ap.add_argument("--wav-dir", default="/tmp/edge-plm-households")
    args = ap.parse_args(argv)
    tails = [int(t) for t in args.tails.split(",")]
    train = [json.loads(x) for x in Path(args.data, "switch-dev-train.jsonl").read_text().splitlines() if x.strip()]
    chatter = [r["text"] for r in train if r["label"] == "NOOP"]
    totals: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="edge-plm-endpoint-") as tmp_name:
        tmp = Path(tmp_name)
        streams = []
        for seed in range(args.households):
            stream, truth = build_stream(train, seed, args.lines, Path(args.wav_dir))
            clean = tmp / f"clean{seed}.wav"
            write_wav(clean, stream, RATE)
            streams.append((seed, clean, stream, truth))
        longest = max(len(s) for _, _, s, _ in streams) / RATE + 1
        noises = {kind: make_noise(kind, longest, tmp, chatter) for kind in ("pink", "babble")}
        for cond, snr, kind in CONDITIONS:
            label = cond if snr is None else f"{cond} {snr} dB"
            for seed, clean, stream, truth in streams:
                audio = stream if kind is None else mix(clean, noises[kind], snr, tmp / f"mix{seed}.wav")
                for det, opts in DETECTORS.items():
                    for tail in tails:
                        r = score(audio, stream, truth, Endpointer(silence_tail_ms=tail, **opts))
                        key = f"{det}|{label}|{tail}"
                        t = totals.setdefault(key, {"detector": det, "condition": label, "tail_ms": tail})
                        for k, v in r.items():
                            t[k] = t.get(k, 0) + v
            print(f"{label} done", file=sys.stderr, flush=True)
    rows = []
    for t in totals.values():
        n = t["utterances"]
        rows.append([t["detector"], t["condition"], t["tail_ms"], n, f"{100 * t['cut'] / n:.1f} %",
                     f"{100 * t['edge'] / n:.1f} %", f"{100 * t['merged'] / n:.1f} %", t["false_starts"],
                     t["max_length_cuts"]])
    print(markdown_table(["detector", "noise", "tail ms", "utterances", "cut", "edge", "merged", "false starts",
                          "max-length cuts"], rows))
    write_result("endpoint", {**header(), "households": args.households, "lines": args.lines,
                              "speech_dbfs": SPEECH_DB, "results": list(totals.values())})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
