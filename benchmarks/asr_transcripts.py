#!/usr/bin/env python3
"""Turn the text dev sets into what the device would actually hear: speech -> ASR transcripts.

Every line of switch-dev-{train,test}.jsonl is spoken by flite (voices round-robin), converted
to 16 kHz mono, and transcribed by the embedded PocketSphinx backend. The output files keep the
lines in order with `text` replaced by the transcript, plus `clean_text` (the original), `voice`
and `asr_ms`; a learning-curve benchmark can then compare learning from clean text vs. from
ASR output. Prints the word error rate (overall and per voice).

The decoder runs as on the device (cepstral mean adapting across utterances, one decoder per
worker process), so a rerun with another --jobs may change a few transcripts; `asr_ms` is wall
time and depends on machine load.

    python3 benchmarks/asr_transcripts.py [--data ../shared/data] [--out benchmarks/data] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from synth_speech import VOICES, synthesize  # noqa: E402

from edge_plm.voice.audio import read_wav  # noqa: E402
from edge_plm.voice.asr import PocketSphinxASR  # noqa: E402

_ASR: PocketSphinxASR | None = None


def normalise(text: str) -> list[str]:
    """Words for WER: lower case, apostrophes kept inside words, other punctuation dropped."""
    return re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower())


def edit_distance(ref: list[str], hyp: list[str]) -> int:
    """Word-level Levenshtein distance (substitutions + deletions + insertions)."""
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]


def _work(job: tuple[int, str, str]) -> tuple[int, str, float]:
    """Synthesise and transcribe one line (runs in a worker process with its own decoder)."""
    global _ASR
    idx, text, voice = job
    if _ASR is None:
        _ASR = PocketSphinxASR(adapt_cmn=True)  # as on the device
    with tempfile.TemporaryDirectory() as tmp:
        wav = synthesize(text, Path(tmp) / "u.wav", voice)
        samples, _ = read_wav(wav)
    t = _ASR.transcribe(samples)
    return idx, t.text, t.decode_ms


def process(src: Path, dst: Path, jobs: int, offset: int) -> tuple[int, int, dict[str, list[int]]]:
    """Write dst from src; return (word errors, reference words, per-voice [errors, words])."""
    lines = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines() if line.strip()]
    work = [(i, row["text"], VOICES[(i + offset) % len(VOICES)]) for i, row in enumerate(lines)]
    results: dict[int, tuple[str, float]] = {}
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for n, (idx, hyp, ms) in enumerate(pool.map(_work, work, chunksize=4), 1):
            results[idx] = (hyp, ms)
            if n % 50 == 0:
                print(f"  {src.name}: {n}/{len(work)} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    errors = words = 0
    per_voice: dict[str, list[int]] = {}
    dst.parent.mkdir(parents=True, exist_ok=True)
    with open(dst, "w", encoding="utf-8") as out:
        for (i, clean, voice), row in zip(work, lines):
            hyp, ms = results[i]
            ref_w = normalise(clean)
            e = edit_distance(ref_w, normalise(hyp))
            errors, words = errors + e, words + len(ref_w)
            pv = per_voice.setdefault(voice, [0, 0])
            pv[0] += e
            pv[1] += len(ref_w)
            new = dict(row, text=hyp, clean_text=clean, voice=voice, asr_ms=round(ms, 1))
            out.write(json.dumps(new, ensure_ascii=False) + "\n")
    return errors, words, per_voice


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data",
                    help="directory with switch-dev-{train,test}.jsonl (default: ../shared/data)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "data")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 1)))
    args = ap.parse_args(argv)
    total_e = total_w = 0
    voices: dict[str, list[int]] = {}
    summary = {}
    for k, split in enumerate(("train", "test")):
        src = args.data / f"switch-dev-{split}.jsonl"
        if not src.is_file():
            print(f"error: {src} not found (use --data)", file=sys.stderr)
            return 1
        e, w, pv = process(src, args.out / f"switch-dev-{split}.asr.jsonl", args.jobs, offset=k)
        summary[split] = {"wer": round(e / max(w, 1), 4), "words": w}
        total_e, total_w = total_e + e, total_w + w
        for v, (ve, vw) in pv.items():
            acc = voices.setdefault(v, [0, 0])
            acc[0] += ve
            acc[1] += vw
    summary["all"] = {"wer": round(total_e / max(total_w, 1), 4), "words": total_w}
    summary["per_voice"] = {v: round(e / max(w, 1), 4) for v, (e, w) in sorted(voices.items())}
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
