#!/usr/bin/env python3
"""Which language model should the ear decode with? The designs measured for issue 45.

Every line of switch-dev-test (283: 43 commands among chatter) is spoken once by a flite voice
and once by an espeak-ng voice (four of each, in turn; benchmarks/spoken_answers.py `speak`),
streamed in 30 ms blocks to one pocketsphinx decoder per voice family (cepstral mean carried
over, as on the device) with each design's LM, and the transcript is read by the shipped
starting model (no learning): acted on when it predicts ON/OFF at >= 0.80 (the policy's
act_threshold), and, with a fluency gate, only when the words' fluency under the LM is at or
above the gate. Designs:

  general        pocketsphinx's bundled general English LM (before)
  commands       trigram over the starting data's clean ON/OFF lines only
  ear            commands and chatter: the shipped ear LM (edge_plm/data/models/switch-en.ear.arpa)
  ear+bestpath   the same with pocketsphinx's lattice pass after the endpoint
  ear+shake/4    chatter widened with every 4th line of tinyshakespeare (general sentences)
  ear+shake      ... with every line of it
  ear, gate G    the ear with the fluency gate at G (asr.min_fluency)

Reported per family: commands acted right, wrong actions / actions, asks at chatter, word error
rate of the commands, CPU seconds per second of audio of the decoder. The test lines are used
only to measure (no LM here reads them: the ear's data leaves out every switch-dev-test text).

    python3 benchmarks/ear_designs.py [--data ../shared/data] [--only ear,general]

Prints a markdown table; writes benchmarks/results/ear-designs.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "models"))

from benchinfo import header, markdown_table, write_result  # noqa: E402
from spoken_answers import speak  # noqa: E402

from edge_plm.switch.model import SwitchModel  # noqa: E402
from edge_plm.voice.audio import write_wav  # noqa: E402
from edge_plm.voice.ear_lm import EAR_LM, build_arpa, ear_words, fluency, read_sentences, sentence  # noqa: E402

FLITE = ("flite:slt", "flite:rms", "flite:awb", "flite:kal16")
ESPEAK = ("espeak:en-us:160", "espeak:en-gb:175", "espeak:en-us+f3:150", "espeak:en-us+m3:190")
GATES = (-5.0, -4.5, -4.0)


def edits(ref: list[str], hyp: list[str]) -> int:
    d = list(range(len(hyp) + 1))
    for i in range(1, len(ref) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(hyp) + 1):
            cur = min(d[j] + 1, d[j - 1] + 1, prev + (ref[i - 1] != hyp[j - 1]))
            prev, d[j] = d[j], cur
    return d[len(hyp)]


def design_lms(data: Path, tmp: Path) -> dict[str, tuple[str | None, dict]]:
    """name -> (ARPA path or None for the general LM, decoder options)."""
    import build_switch_en as build

    rows = [r for f in ("switch-en-train.jsonl", "switch-en-val.jsonl") for r in build.read(REPO / "models/data" / f)
            if not r.get("source", "").endswith(".asr")]
    commands = [s for r in rows if r["label"] != "NOOP" for s in [sentence(r["text"])] if s]
    shake = [s for line in (data / "tinyshakespeare.txt").read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.strip().endswith(":") for s in [sentence(line)] if s]
    lms = {"commands": commands, "ear+shake/4": read_sentences() + shake[3::4], "ear+shake": read_sentences() + shake}
    out: dict[str, tuple[str | None, dict]] = {"general": (None, {}), "ear": (str(EAR_LM), {}),
                                               "ear+bestpath": (str(EAR_LM), {"bestpath": True})}
    for name, sentences in lms.items():
        path = tmp / f"{name.replace('/', '-')}.arpa"
        path.write_text(build_arpa(sentences), encoding="utf-8")
        out[name] = (str(path), {})
    return out


def decode_family(clips: list[dict], lm: str | None, options: dict, model: SwitchModel) -> list[dict]:
    from pocketsphinx import Decoder, NGramModel

    from edge_plm.voice.audio import read_wav

    kw = {"fwdflat": False, "bestpath": False, **options}
    if lm:
        kw["lm"] = lm
    dec = Decoder(logfn=os.devnull, samprate=16000, **kw)
    scorer = NGramModel(dec.config, dec.logmath, lm) if lm else None
    out = []
    for c in clips:
        samples = read_wav(c["wav"])[0]
        t0 = time.process_time()
        dec.start_utt()
        for i in range(0, len(samples), 480):
            dec.process_raw(samples[i:i + 480].astype("<i2").tobytes(), False, False)
        dec.end_utt()
        hyp = dec.hyp()
        cpu = time.process_time() - t0
        words = [w for w in (hyp.hypstr.split() if hyp else []) if not w.startswith(("<", "[", "++"))]
        text = " ".join(words)
        p = model.predict(text, evidence_prior=3.0) if text else None
        out.append({**c, "heard": text, "cpu": cpu, "audio_s": len(samples) / 16000,
                    "action": p.action if p else "NOOP", "confidence": p.confidence if p else 0.0,
                    "fluency": fluency(scorer, text) if scorer is not None and text else None})
    return out


def score(rows: list[dict], gate: float | None = None) -> dict:
    def acts(r):
        if r["action"] == "NOOP" or r["confidence"] < 0.8:
            return False
        return gate is None or (r["fluency"] is not None and r["fluency"] >= gate)

    commands = [r for r in rows if r["label"] != "NOOP"]
    chatter = [r for r in rows if r["label"] == "NOOP"]
    acted = [r for r in rows if acts(r)]
    # an act held back by the gate is asked about instead; so is an unsure command
    asked = [r for r in chatter if r["action"] != "NOOP" and r["confidence"] >= 0.35 and not acts(r)]
    ref = [ear_words(r["text"]) for r in commands]
    return {"commands": len(commands), "acted_right": sum(acts(r) and r["action"] == r["label"] for r in commands),
            "acted": len(acted), "wrong": sum(r["action"] != r["label"] for r in acted),
            "chatter": len(chatter), "asks_at_chatter": len(asked),
            "wer_commands": sum(edits(w, ear_words(r["heard"])) for w, r in zip(ref, commands)) / max(1, sum(map(len, ref))),
            "cpu_per_audio_s": sum(r["cpu"] for r in rows) / sum(r["audio_s"] for r in rows)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--only", default="", help="comma-separated design names")
    args = ap.parse_args(argv)
    test = args.data / "switch-dev-test.jsonl"
    if not test.is_file() or not (args.data / "tinyshakespeare.txt").is_file():
        ap.error(f"{args.data}: needs switch-dev-test.jsonl and tinyshakespeare.txt")
    rows = [json.loads(line) for line in test.read_text(encoding="utf-8").splitlines() if line.strip()]
    model = SwitchModel.load(REPO / "models" / "switch-en.npz")
    results: dict[str, dict] = {}
    table = []
    with tempfile.TemporaryDirectory(prefix="edge-plm-ear-designs-") as tmp:
        tmp = Path(tmp)
        families = {}
        for fam, voices in (("flite", FLITE), ("espeak-ng", ESPEAK)):
            families[fam] = []
            for i, r in enumerate(rows):
                wav = tmp / f"{fam}-{i:03d}.wav"
                write_wav(wav, speak(r["text"], voices[i % 4]), 16000)
                families[fam].append({"wav": str(wav), "text": r["text"], "label": r["label"]})
        lms = design_lms(args.data, tmp)
        wanted = [n for n in args.only.split(",") if n] or list(lms)
        for name in wanted:
            if name not in lms:
                ap.error(f"--only: no design {name!r} (known: {', '.join(lms)})")
            lm, options = lms[name]
            decoded = {fam: decode_family(clips, lm, options, model) for fam, clips in families.items()}
            gates = [None] + (list(GATES) if name == "ear" else [])
            for gate in gates:
                label = name if gate is None else f"ear, gate {gate}"
                results[label] = {fam: score(d, gate) for fam, d in decoded.items()}
                for fam, s in results[label].items():
                    table.append([label, fam, f"{s['acted_right']} / {s['commands']}", f"{s['wrong']} / {s['acted']}",
                                  f"{s['asks_at_chatter']} / {s['chatter']}", f"{s['wer_commands']:.2f}",
                                  f"{s['cpu_per_audio_s']:.3f}"])
                print(f"{label}: " + "; ".join(f"{fam} {s['acted_right']}/{s['commands']} wrong {s['wrong']}/{s['acted']}"
                                                for fam, s in results[label].items()), file=sys.stderr)
    print(markdown_table(["design", "voices", "commands acted right", "wrong / actions", "asks at chatter",
                          "WER commands", "decoder CPU s per s of audio"], table))
    write_result("ear-designs", {**header(), "designs": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
