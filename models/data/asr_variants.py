#!/usr/bin/env python3
"""More renderings of the training utterances as a device hears them, for the desktop orange
recipe (`python models/build_switch_en.py --model-config orange`, models/README.md).

benchmarks/data/switch-dev-train.asr.jsonl has every switch-dev-train utterance spoken by one of
four flite voices (round robin) and transcribed by pocketsphinx; this writes the other three
voices of every utterance (models/data/switch-dev-train.asr{1,2,3}.jsonl: voice offsets 1-3) and
one voice of every template line (models/data/templates.asr.jsonl), with
benchmarks/asr_transcripts.py's own pipeline (flite, sox, pocketsphinx as on the device).
Needs flite and sox (scripts/setup-dev.sh installs them); about 15 minutes on one core.

    python models/data/asr_variants.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "benchmarks"))

import asr_transcripts  # noqa: E402


def main() -> None:
    jobs = [(HERE / "switch-dev-train.jsonl", HERE / f"switch-dev-train.asr{k}.jsonl", k) for k in (1, 2, 3)]
    jobs.append((HERE / "templates.jsonl", HERE / "templates.asr.jsonl", 0))
    for src, dst, offset in jobs:
        errors, words, _ = asr_transcripts.process(src, dst, 1, offset=offset)
        print(json.dumps({"file": dst.name, "wer": round(errors / max(words, 1), 4)}))


if __name__ == "__main__":
    main()
