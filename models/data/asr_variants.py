#!/usr/bin/env python3
"""More renderings of the training utterances as a device hears them, for the desktop orange
recipe (`python models/build_switch_en.py --model-config orange`, models/README.md).

benchmarks/data/switch-dev-train.asr.jsonl has every switch-dev-train utterance spoken by one of
four flite voices (round robin) and transcribed by pocketsphinx; this writes the other three
voices of every utterance (models/data/switch-dev-train.asr{1,2,3}.jsonl: voice offsets 1-3) and
one voice of every template line (models/data/templates.asr.jsonl), with
benchmarks/asr_transcripts.py's own pipeline (flite, sox, pocketsphinx as on the device).
Needs flite and sox (scripts/setup-dev.sh installs them); about 15 minutes on one core.
``--ha-intents`` instead renders the seeded 1,500-line subset of models/data/ha-intents.jsonl
(`ha_intents.asr_subset`: 800 ON/OFF and 700 NOOP lines; voices round robin) to
models/data/ha-intents.asr.jsonl, the starting model's ASR lines of Home Assistant phrasing.

    python models/data/asr_variants.py [--ha-intents] [--jobs N]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "benchmarks"))

import asr_transcripts  # noqa: E402


def render_ha_intents(jobs: int) -> None:
    sys.path.insert(0, str(HERE))
    import ha_intents

    rows = [json.loads(line) for line in ha_intents.OUT.read_text(encoding="utf-8").splitlines() if line.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "ha-intents.asr-subset.jsonl"
        src.write_text(ha_intents.dumps(ha_intents.asr_subset(rows)), encoding="utf-8")
        dst = HERE / "ha-intents.asr.jsonl"
        errors, words, per_voice = asr_transcripts.process(src, dst, jobs, offset=0)
    print(json.dumps({"file": dst.name, "wer": round(errors / max(words, 1), 4),
                      "per_voice": {v: round(e / max(w, 1), 4) for v, (e, w) in sorted(per_voice.items())}}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ha-intents", action="store_true", help="render the Home Assistant subset only")
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args()
    if args.ha_intents:
        render_ha_intents(args.jobs)
        return
    jobs = [(HERE / "switch-dev-train.jsonl", HERE / f"switch-dev-train.asr{k}.jsonl", k) for k in (1, 2, 3)]
    jobs.append((HERE / "templates.jsonl", HERE / "templates.asr.jsonl", 0))
    for src, dst, offset in jobs:
        errors, words, _ = asr_transcripts.process(src, dst, args.jobs, offset=offset)
        print(json.dumps({"file": dst.name, "wer": round(errors / max(words, 1), 4)}))


if __name__ == "__main__":
    main()
