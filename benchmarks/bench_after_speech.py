#!/usr/bin/env python3
"""What the person waits for after the last word: the silence tail plus the processing after it.

The spoken sessions are replayed from audio through `edge-plm replay`'s own path (`build_replay`
+ `run_session`: MockFactory pins, the SQLite buffer, online learning of every label the
simulated person gives), with `Settings()` defaults unless --set overrides a field:
  household-<i>  benchmarks/data/households/household-<i>.jsonl: each line's clean_text spoken
                 by its flite voice again (scripts/synth_speech.py; WAVs cached in --wav-dir)
  crowd-283      benchmarks/data/switch-dev-test.asr.jsonl the same way (clean_text + voice)
  demo           the packaged demo's WAVs
Each WAV is trimmed by the endpointer and fed to the ASR session in 30 ms blocks, as the
microphone's blocks would arrive; its endpoint is the configured silence tail after its speech.
`after_speech` = tail + (relay call returned - endpoint), for utterances that drove the relay;
"processing" = after_speech - tail (ASR finalisation, model, policy, relay; wall time here).

--batch replays the same audio with whole-utterance decoding after the endpoint (the loop
before streaming) for comparison; the sessions' counts show what streaming changed.

    python3 benchmarks/bench_after_speech.py [--only household,crowd,demo] [--batch] [--tag T]

Prints a markdown table; writes benchmarks/results/after-speech[-<tag>].json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "scripts"))

from bench_sessions import settings_with  # noqa: E402
from benchinfo import header, markdown_table, write_result  # noqa: E402
from synth_speech import synthesize  # noqa: E402

from edge_plm.loop.replay import build_replay, read_session, run_session  # noqa: E402
from edge_plm.voice.asr import PocketSphinxASR  # noqa: E402

HOUSEHOLDS = REPO / "benchmarks" / "data" / "households"
CROWD = REPO / "benchmarks" / "data" / "switch-dev-test.asr.jsonl"
DEMO = REPO / "edge_plm" / "data" / "demo" / "session.jsonl"


class TimedSphinx(PocketSphinxASR):
    """PocketSphinx that also records the CPU time (this thread's) of each ASR stage: on a
    shared, loaded machine the wall time includes waiting for a core, the CPU time does not."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.stage_cpu_ms: list[float] = []

    def transcribe_utterance(self, utterance):
        c0 = time.thread_time()
        try:
            return self._stage(utterance)
        finally:
            self.stage_cpu_ms.append((time.thread_time() - c0) * 1e3)

    def _stage(self, utterance):
        return super().transcribe_utterance(utterance)


class BatchSphinx(TimedSphinx):
    """The loop before streaming: the whole utterance decoded in one call after the endpoint."""

    streams = False

    def _stage(self, utterance):
        return self.transcribe(utterance.samples, batch=True)


def audio_session(src: Path, wav_dir: Path, out: Path) -> Path:
    """`src` lines (clean_text + voice + label) as a session of WAVs spoken by flite."""
    rows = []
    for line in src.read_text().splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        name = "".join(ch if ch.isalnum() else "-" for ch in r["clean_text"].lower())[:60]
        wav = wav_dir / f"{name}.{r['voice']}.wav"
        if not wav.exists():
            synthesize(r["clean_text"], wav, voice=r["voice"])
        rows.append({"audio": str(wav), "label": r["label"]})
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def replay(session: Path, settings, batch: bool) -> dict:
    lines = read_session(session)
    # --batch: the loop before streaming (whole-utterance decode with both search passes)
    asr = BatchSphinx(adapt_cmn=False, fwdflat=True, bestpath=True) if batch else TimedSphinx(adapt_cmn=False)
    r = build_replay(settings, None, seed=0, asr=asr)
    try:
        result = run_session(lines, r.controller, r.clock, endpointer=r.endpointer)
    finally:
        r.close()
    s = result.summary()
    tail = s["silence_tail_ms"]
    ok = [x.outcome.latency for x in result.lines if x.outcome.error is None]
    after = [x.after_speech for x in ok if x.after_speech is not None]
    s["after_speech_all"] = after
    s["processing_ms"] = [a - tail for a in after]
    s["asr_finish_ms"] = [x.asr for x in ok if x.asr is not None]
    # CPU estimate of the processing after the tail: the ASR stage's CPU time plus the wall time
    # of the rest (model, policy, relay: milliseconds), for the utterances that drove the relay
    staged = [x for x in result.lines if x.outcome.latency.asr is not None]
    assert len(staged) == len(asr.stage_cpu_ms), (len(staged), len(asr.stage_cpu_ms))
    s["processing_cpu_ms"] = [x.outcome.latency.after_speech - tail - x.outcome.latency.asr + c
                              for x, c in zip(staged, asr.stage_cpu_ms)
                              if x.outcome.latency.after_speech is not None]
    s["transcripts"] = [x.outcome.transcript for x in result.lines]
    return s


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(xs, q)) if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    ap.add_argument("--only", default="household,crowd,demo")
    ap.add_argument("--batch", action="store_true", help="whole-utterance decoding after the endpoint")
    ap.add_argument("--wav-dir", default="/tmp/edge-plm-households")
    ap.add_argument("--tag", default="")
    args = ap.parse_args(argv)
    settings = settings_with(args.set)
    prefixes = [p for p in args.only.split(",") if p]
    sources = {p.stem: p for p in sorted(HOUSEHOLDS.glob("household-[0-9]*.jsonl"))}
    sources["crowd-283"] = CROWD
    results = {}
    with tempfile.TemporaryDirectory(prefix="edge-plm-after-") as tmp:
        for name, src in sources.items():
            if any(name.startswith(p) for p in prefixes):
                session = audio_session(src, Path(args.wav_dir), Path(tmp) / f"{name}.jsonl")
                results[name] = replay(session, settings, args.batch)
                print(f"{name} done", file=sys.stderr, flush=True)
        if "demo" in prefixes:
            results["demo"] = replay(DEMO, settings, args.batch)
    rows = []
    groups = {"households": [n for n in results if n.startswith("household")]}
    groups.update({n: [n] for n in results if not n.startswith("household")})
    for label, names in groups.items():
        if not names:
            continue
        proc = [x for n in names for x in results[n]["processing_ms"]]
        cpu = [x for n in names for x in results[n]["processing_cpu_ms"]]
        fin = [x for n in names for x in results[n]["asr_finish_ms"]]
        tot = {k: sum(results[n][k] for n in names) for k in ("interactions", "asked", "acted", "acted_wrong", "labels")}
        tail = results[names[0]]["silence_tail_ms"]
        rows.append([label, tot["interactions"], tot["asked"], tot["acted"], tot["acted_wrong"], tot["labels"],
                     tail, len(proc), f"{pct(fin, 50):.1f} / {pct(fin, 95):.1f}",
                     f"{pct(proc, 50):.1f} / {pct(proc, 95):.1f}", f"{pct(cpu, 50):.1f} / {pct(cpu, 95):.1f}",
                     f"{tail + pct(proc, 50):.0f} / {tail + pct(proc, 95):.0f}"])
    print(markdown_table(["sessions", "lines", "asked", "acted", "acted wrong", "labels", "tail ms",
                          "relay drives", "ASR stage p50 / p95 ms", "processing after the tail p50 / p95 ms (wall)",
                          "the same with the ASR stage's CPU time",
                          "after_speech p50 / p95 ms"], rows))
    name = "after-speech" + (f"-{args.tag}" if args.tag else "")
    write_result(name, {**header(), "overrides": args.set, "batch": args.batch, "sessions": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
