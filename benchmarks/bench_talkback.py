#!/usr/bin/env python3
"""Talk-back (issue 21): do asks end with a label when the person can answer by voice, how
often does a misheard answer teach a wrong label, is the device deaf to its own voice, and how
soon does the question start?

Sessions (each replayed through `edge-plm replay`'s own path: `build_replay` + `run_session`,
the policy, MockFactory pins, SQLite, online learning), twice: the person answers asks with the
switch only (today), and by voice (every line ``"answer": "voice"``, talk-back on):
  household-<i>  benchmarks/data/households/ (the ASR transcripts of flite-spoken households)
  crowd-283      benchmarks/data/switch-dev-test.asr.jsonl (every dev-test line once, as heard)
with the shipped starting model and, with --empty too, from an empty model (many more asks).
The voice answers: "yes" / "yeah" / "do it" / ... and "no" / "leave it" / ..., in 4 flite and 5
espeak-ng voices at 140-210 wpm, pink noise mixed in at --snr dB by sox
(benchmarks/spoken_answers.py), trimmed by the endpointer and heard by pocketsphinx.

Echo: at every ask, the device's own question (the samples it played) is fed into the loop as a
microphone utterance just before its guard ends, as if the speaker were loud enough to trigger
the endpointer; the interactions and labels it produces are counted (target 0).

Timing: synthesis of the prompts cold (espeak-ng) and cached; per ask, the actuator stage
(policy step to the question handed to the player, LED included) and the talk-back call alone;
the demo's WAV session replayed with talk-back off and on for the after-speech latency.

    python3 benchmarks/bench_talkback.py [--snr 20] [--empty] [--only household,crowd]

Prints markdown tables; writes benchmarks/results/talkback.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import describe, header, markdown_table, write_result  # noqa: E402
from spoken_answers import NoisyAnswerer  # noqa: E402

from edge_plm.learning.evaluation import percentiles  # noqa: E402
from edge_plm.loop.replay import build_replay, read_session, replay_asr, run_session, spoken_input  # noqa: E402
from edge_plm.config.settings import Settings  # noqa: E402
from edge_plm.voice.talkback import prompt_text  # noqa: E402
from edge_plm.voice.asr import PocketSphinxASR  # noqa: E402
from edge_plm.voice.speech import EspeakSpeech, PromptCache  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
HOUSEHOLDS = REPO / "benchmarks" / "data" / "households"
DEMO = REPO / "edge_plm" / "data" / "demo" / "session.jsonl"


class EchoingAnswerer:
    """Before each answer, the device's own question goes back into the loop (echo test)."""

    def __init__(self, inner, replay) -> None:
        self.inner, self.r = inner, replay
        self.fed = self.rows_from_echo = 0

    def __call__(self, yes: bool, n: int):
        c, tb = self.r.controller, self.r.controller.talkback
        rows = self.r.store.count()
        utt = spoken_input(tb.player.played[-1], self.r.endpointer, c.asr)
        self.r.clock.set(max(self.r.clock(), tb.guard.quiet_at() - 0.05))
        c.handle(utt)
        self.fed += 1
        self.rows_from_echo += self.r.store.count() - rows
        return self.inner(yes, n)


def run(path: Path, settings: Settings, voice: bool, asr, snr: float) -> dict:
    lines = read_session(path)
    if voice:
        lines = [replace(x, answer="voice") for x in lines]
    r = build_replay(settings, None, seed=0, asr=asr if voice else replay_asr(lines, settings),
                     talkback=voice)
    echo = EchoingAnswerer(NoisyAnswerer(snr_db=snr), r) if voice else None
    try:
        res = run_session(lines, r.controller, r.clock, endpointer=r.endpointer, answerer=echo)
        r.controller.pump()
        rows = {row.id: row for row in r.store.interactions()}
        tb = r.controller.talkback
        actuator = [x.outcome.latency.actuator for x in res.lines if x.asked]
        ask_ms = list(tb.ask_start_ms) if tb else []
    finally:
        r.close()
    asked = [x for x in res.lines if x.asked]
    labelled = [x for x in asked if rows[x.outcome.interaction_id].label is not None]
    wrong = [x for x in labelled if x.wish is not None
             and rows[x.outcome.interaction_id].label != x.wish.value]
    misheard = {i for i, said, heard in res.answers if heard is not said}
    wrong_misheard = [x for x in wrong if x.index in misheard]
    spoken_labels = sum(rows[x.outcome.interaction_id].label_source == "spoken" for x in asked)
    # rows no session line made: answers not heard as answers (they became utterances)
    line_ids = {x.outcome.interaction_id for x in res.lines}
    extra = [row for i, row in rows.items() if i not in line_ids]
    extra_wrong = [row for row in extra if row.label in ("ON", "OFF")]
    return {"lines": len(res.lines), "asked": len(asked), "asked_labelled": len(labelled),
            "labelled_share": len(labelled) / max(1, len(asked)),
            "wrong_labels_on_asks": len(wrong), "spoken_labels": spoken_labels,
            "spoken_answers": res.spoken_answers, "answer_errors": res.answer_errors,
            "answers_heard_opposite": sum(h is not None and h is not s for _i, s, h in res.answers),
            "wrong_labels_from_misheard": len(wrong_misheard) + len(extra_wrong),
            "answer_rows": len(extra), "answer_rows_labelled_on_off": len(extra_wrong),
            "echo_fed": echo.fed if echo else 0, "echo_interactions": echo.rows_from_echo if echo else 0,
            "echo_dropped": res.own_voice_dropped,
            "acted_wrong": sum(x.acted_wrong for x in res.lines),
            "actuator_ms_on_asks": percentiles([a for a in actuator if a is not None]),
            "talkback_ask_ms": percentiles(ask_ms)}


def _share(n: int, of: int) -> str:
    return f"{n} ({100 * n / max(1, of):.1f} %)"


def synthesis_timing(repeats: int = 5) -> dict:
    texts = [prompt_text(a, d) for d in (None, "lamp", "fan") for a in ("ON", "OFF")]
    speech = EspeakSpeech()
    cold, cached = [], []
    for _ in range(repeats):
        cache = PromptCache(speech)
        for t in texts:
            t0 = time.perf_counter()
            cache.get(t)
            cold.append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            cache.get(t)
            cached.append((time.perf_counter() - t0) * 1e3)
    return {"texts": texts, "cold_ms": percentiles(cold), "cached_ms": percentiles(cached),
            "cold_ms_max": max(cold), "cached_ms_max": max(cached)}


def after_speech(settings: Settings, asr) -> dict:
    """The demo's audio session, talk-back off then on (the person answers with the switch)."""
    out = {}
    lines = read_session(DEMO)
    for on in (False, True):
        meds = []
        for _ in range(3):
            r = build_replay(settings, None, seed=0, asr=asr, talkback=on)
            try:
                s = run_session(lines, r.controller, r.clock, endpointer=r.endpointer).summary()
            finally:
                r.close()
            meds.append(s["latency_ms"]["after_speech"]["median"])
        out["on" if on else "off"] = {"after_speech_median_ms": statistics.median(meds),
                                      "runs": meds}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--snr", type=float, default=20.0)
    ap.add_argument("--empty", action="store_true", help="also from an empty model")
    ap.add_argument("--only", default="household,crowd")
    args = ap.parse_args(argv)
    info = header()
    asr = PocketSphinxASR(adapt_cmn=False)
    sessions = {}
    if "household" in args.only:
        sessions.update({p.stem: p for p in sorted(HOUSEHOLDS.glob("household-[0-9]*.jsonl"))})
    if "crowd" in args.only:
        sessions["crowd-283"] = REPO / "benchmarks" / "data" / "switch-dev-test.asr.jsonl"
    starts = ["switch-en"] + (["empty"] if args.empty else [])
    results: dict = {"sessions": {}}
    for start in starts:
        settings = replace(Settings(), model=replace(Settings().model, start=start))
        for name, path in sessions.items():
            for voice in (False, True):
                key = f"{name}/{start}/{'voice' if voice else 'switch'}"
                results["sessions"][key] = s = run(path, settings, voice, asr, args.snr)
                print(f"{key}: asks labelled {s['asked_labelled']}/{s['asked']}, answers "
                      f"{s['spoken_answers']} errors {s['answer_errors']}, wrong from misheard "
                      f"{s['wrong_labels_from_misheard']}, echo rows {s['echo_interactions']}",
                      file=sys.stderr, flush=True)
    results["synthesis"] = synthesis_timing()
    results["after_speech_demo"] = after_speech(Settings(), asr)
    print(describe(info))
    rows = []
    for start in starts:
        for kind in ("switch", "voice"):
            for group in ("household", "crowd"):
                ss = [v for k, v in results["sessions"].items()
                      if k.startswith(group) and k.endswith(f"/{start}/{kind}")]
                if not ss:
                    continue
                tot = {f: sum(s[f] for s in ss) for f in ("asked", "asked_labelled", "spoken_answers",
                                                           "answer_errors", "answers_heard_opposite",
                                                           "wrong_labels_from_misheard",
                                                           "wrong_labels_on_asks", "echo_fed",
                                                           "echo_interactions", "acted_wrong")}
                rows.append([f"{group} ({len(ss)})", start, kind, tot["asked"],
                             f"{tot['asked_labelled']} ({100 * tot['asked_labelled'] / max(1, tot['asked']):.0f} %)",
                             tot["spoken_answers"], tot["answer_errors"], tot["answers_heard_opposite"],
                             _share(tot["wrong_labels_from_misheard"], tot["spoken_answers"]),
                             tot["wrong_labels_on_asks"], f"{tot['echo_interactions']}/{tot['echo_fed']}",
                             tot["acted_wrong"]])
    print(markdown_table(["sessions", "start", "answers by", "asks", "asks ending with a label",
                          "spoken answers", "answers not heard as said", "heard as the opposite",
                          "wrong labels from misheard answers", "wrong labels on asks (all causes)",
                          "echo: interactions / prompts fed", "acted wrong"], rows))
    syn = results["synthesis"]
    print(f"\nsynthesis (espeak-ng, {len(syn['texts'])} prompts x 5): cold median "
          f"{syn['cold_ms']['median']:.0f} ms (max {syn['cold_ms_max']:.0f}), cached median "
          f"{syn['cached_ms']['median'] * 1000:.1f} us (max {syn['cached_ms_max']:.3f} ms)")
    asks = [v["actuator_ms_on_asks"]["p95"] for v in results["sessions"].values()
            if v["actuator_ms_on_asks"]["p95"] is not None and v["spoken_answers"]]
    tbs = [v["talkback_ask_ms"]["p95"] for v in results["sessions"].values()
           if v["talkback_ask_ms"]["p95"] is not None]
    if asks:
        print(f"ask: actuator stage p95 (worst session) {max(asks):.2f} ms; talk-back call p95 "
              f"(worst session) {max(tbs):.3f} ms")
    a = results["after_speech_demo"]
    print(f"demo after-speech median: talk-back off {a['off']['after_speech_median_ms']:.1f} ms, "
          f"on {a['on']['after_speech_median_ms']:.1f} ms (3 runs each)")
    write_result("talkback", {**info, "snr_db": args.snr, **results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
