"""Rebuild the shipped starting model `models/switch-en.npz` (models/README.md) in one command:

    python models/build_switch_en.py            # from the repository root

``--model-config orange`` trains the desktop orange model of BENCHMARKS.md §7 into
runs/switch-en-orange/ and installs nothing. Its data adds more ASR renderings: the other three
flite voices of every switch-dev-train utterance (models/data/switch-dev-train.asr{1,2,3}.jsonl)
and one of every template line (models/data/templates.asr.jsonl), all made by
models/data/asr_variants.py; split the same way (every fifth utterance, in all its renderings,
is validation), written to models/data/switch-en-asr-{train,val}.jsonl.

1. Data (all in this repository, none of it from switch-dev-test):
   - models/data/switch-dev-train.jsonl: 425 SLURP-derived utterances (CC BY 4.0), clean text;
   - benchmarks/data/switch-dev-train.asr.jsonl: the same utterances as pocketsphinx heard
     them from synthesised voices (benchmarks/asr_transcripts.py);
   - models/data/templates.jsonl: phrasing templates written for this project
     (models/data/templates.py, regenerated here).
   Every fifth utterance of switch-dev-train (index % 5 == 0; clean and ASR) is the validation
   file for early stopping; the rest plus the templates is the training file, shuffled with a
   fixed seed. Both are written to models/data/ (switch-en-train.jsonl, switch-en-val.jsonl).
2. `edge-plm train switch --model-config potato --data models/data/switch-en-train.jsonl
   --val models/data/switch-en-val.jsonl --out runs/switch-en --seed 0 --json`.
3. The checkpoint is re-packed compressed (same arrays, same metadata: `SwitchModel.load`
   reads it unchanged) to models/switch-en.npz and to edge_plm/data/models/switch-en.npz (the
   copy that `pip install .` installs; tests/test_shipped_model.py checks that both are
   identical), and the size and SHA-256 lines of models/README.md are rewritten.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "models" / "data"
OUT = ROOT / "runs" / "switch-en"
TARGETS = [ROOT / "models" / "switch-en.npz", ROOT / "edge_plm" / "data" / "models" / "switch-en.npz"]
CARD = ROOT / "models" / "README.md"


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def build_data() -> tuple[Path, Path]:
    sys.path.insert(0, str(DATA))
    import templates

    write(DATA / "templates.jsonl", templates.lines())
    clean = read(DATA / "switch-dev-train.jsonl")
    asr = read(ROOT / "benchmarks" / "data" / "switch-dev-train.asr.jsonl")
    if len(clean) != len(asr) or any(a["clean_text"] != c["text"] for c, a in zip(clean, asr)):
        raise SystemExit("error: the ASR file does not match switch-dev-train line by line")
    train, val = [], []
    for i, (c, a) in enumerate(zip(clean, asr)):
        pair = [{"text": c["text"], "label": c["label"], "source": "switch-dev-train"},
                {"text": a["text"], "label": a["label"], "source": "switch-dev-train.asr"}]
        (val if i % 5 == 0 else train).extend(pair)
    train += templates.lines()
    random.Random(0).shuffle(train)
    write(DATA / "switch-en-train.jsonl", train)
    write(DATA / "switch-en-val.jsonl", val)
    return DATA / "switch-en-train.jsonl", DATA / "switch-en-val.jsonl"


def build_asr_data(templates_lines: list[dict]) -> tuple[Path, Path]:
    """The orange recipe's data: clean + four ASR renderings of switch-dev-train, templates
    clean + one ASR rendering; every fifth utterance (all renderings) is validation."""
    sources = [read(DATA / "switch-dev-train.jsonl"), read(ROOT / "benchmarks" / "data" / "switch-dev-train.asr.jsonl")]
    sources += [read(DATA / f"switch-dev-train.asr{k}.jsonl") for k in (1, 2, 3)]
    for src in sources[1:]:
        if len(src) != len(sources[0]) or any(a["clean_text"] != c["text"] for c, a in zip(sources[0], src)):
            raise SystemExit("error: an ASR file does not match switch-dev-train line by line")
    train, val = [], []
    for src in sources:
        for i, r in enumerate(src):
            (val if i % 5 == 0 else train).append({"text": r["text"], "label": r["label"]})
    tmpl_asr = read(DATA / "templates.asr.jsonl")
    train += [{"text": r["text"], "label": r["label"]} for r in templates_lines + tmpl_asr]
    random.Random(0).shuffle(train)
    write(DATA / "switch-en-asr-train.jsonl", train)
    write(DATA / "switch-en-asr-val.jsonl", val)
    return DATA / "switch-en-asr-train.jsonl", DATA / "switch-en-asr-val.jsonl"


def repack(src: Path) -> bytes:
    with np.load(src, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-config", default="potato", choices=["potato", "orange"])
    args = ap.parse_args()
    out = OUT if args.model_config == "potato" else OUT.with_name(f"switch-en-{args.model_config}")
    train, val = build_data()
    if args.model_config == "orange":
        sys.path.insert(0, str(DATA))
        import templates

        train, val = build_asr_data(templates.lines())
    if out.exists():
        shutil.rmtree(out)
    cmd = [sys.executable, "-m", "edge_plm.cli", "train", "switch", "--model-config", args.model_config,
           "--data", str(train.relative_to(ROOT)), "--val", str(val.relative_to(ROOT)),
           "--out", str(out.relative_to(ROOT)), "--seed", "0", "--json"]
    print("$", " ".join(cmd[1:]), file=sys.stderr)
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(res.stderr.strip() or f"train switch failed ({res.returncode})")
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    if args.model_config != "potato":
        print(json.dumps(summary))
        return
    blob = repack(out / "checkpoint.npz")
    for t in TARGETS:
        t.parent.mkdir(parents=True, exist_ok=True)
        t.write_bytes(blob)
    sha = hashlib.sha256(blob).hexdigest()
    if CARD.exists():
        text = CARD.read_text(encoding="utf-8")
        text = re.sub(r"(<!-- sha256 -->`)[0-9a-f]*(`)", rf"\g<1>{sha}\g<2>", text)
        text = re.sub(r"(<!-- bytes -->)[0-9,]*", rf"\g<1>{len(blob):,}", text)
        CARD.write_text(text, encoding="utf-8")
    print(json.dumps({**summary, "bytes": len(blob), "sha256": sha}))


if __name__ == "__main__":
    main()
