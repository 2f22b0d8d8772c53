"""Rebuild the shipped starting model `models/switch-en.npz` (models/README.md) in one command:

    python models/build_switch_en.py            # from the repository root

``--model-config orange`` trains the desktop orange model of docs/benchmarks-log.md §8 into
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
     (models/data/templates.py, regenerated here);
   - models/data/ha-intents.jsonl: Home Assistant's English intent templates expanded with
     hassil (models/data/ha_intents.py; CC BY 4.0 sentences), and
     models/data/ha-intents.asr.jsonl: 1,500 of them as pocketsphinx heard them
     (models/data/asr_variants.py --ha-intents). A trial with `--slot-word WORD --no-install`
     adds up to three lines of each template that names a light or a plug, with the name as
     WORD (`slot_lines`: what the device would read with several devices, switch/naming.py),
     split with their template; not the shipped model (docs/benchmarks-log.md, "Two devices").
   Every fifth utterance of switch-dev-train (index % 5 == 0; clean and ASR) and every fifth
   Home Assistant template sentence (in order of first appearance, index % 5 == 0: all its
   lines, clean and ASR) are the validation file for early stopping; the rest plus the
   templates is the training file, shuffled with a fixed seed. A line equal to a switch-dev-test
   text is dropped from both, and a held-out Home Assistant line whose text another source has
   in training is dropped from validation. Both are written to models/data/ (switch-en-train.jsonl,
   switch-en-val.jsonl); `--data-only` writes them and trains nothing.

   A starting model from fewer sources, for learning curves "from a starting model built
   without the lines fed" (nothing installed; data files and checkpoint in the run directory):

       python models/build_switch_en.py --without switch-dev-train --out runs/switch-en-noswdev --no-install
2. `edge-plm train switch --model-config potato --data models/data/switch-en-train.jsonl
   --val models/data/switch-en-val.jsonl --out runs/switch-en --seed 0 --set bigram_weight=0
   --set alpha_young=0.03 --set replay_l2=0 --json` (``STARTING_RECIPE``: no word pairs, a flat
   smoothing, one pull).
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

from edge_plm.switch.config import STARTING_OVERRIDES

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "models" / "data"
OUT = ROOT / "runs" / "switch-en"
TARGETS = [ROOT / "models" / "switch-en.npz", ROOT / "edge_plm" / "data" / "models" / "switch-en.npz"]
# What a starting model is, against a model that learns from empty on a device (the config's
# defaults): edge_plm/switch/config.py STARTING_OVERRIDES, as models/switch-en.npz was built.
STARTING_RECIPE = [arg for key, value in STARTING_OVERRIDES.items() for arg in ("--set", f"{key}={value:g}")]
CARD = ROOT / "models" / "README.md"


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


SOURCES = ("switch-dev-train", "templates", "ha-intents")
HA_HOLDOUT = 5  # every 5th Home Assistant template sentence (in file order) is validation
# --slot-word WORD (a trial, not the shipped model: docs/benchmarks-log.md, "Two devices"): with several
# devices the device reads a command with the device's name replaced by WORD (SwitchConfig.slot_word,
# switch/naming.py), and Home Assistant's lines that name a light or a plug are also learned with
# the name as WORD, at most SLOT_PER_TEMPLATE per template
SLOT_PER_TEMPLATE = 3


def slot_lines(rows: list[dict], slot_word: str) -> list[dict]:
    """Home Assistant lines (clean) that name a light or a plug (ha_intents.LIGHT_NAMES,
    SWITCH_NAMES and their plurals, longest first), with the name as `slot_word`: the first
    SLOT_PER_TEMPLATE distinct such texts of each template, in file order, with their line's
    label ("turn on the desk lamp" -> "turn on the xqz" ON, "is the lamp on" -> "is the xqz
    on" NOOP)."""
    sys.path.insert(0, str(DATA))
    import ha_intents

    names = set(ha_intents.LIGHT_NAMES + ha_intents.SWITCH_NAMES)
    names = sorted(names | {n + "s" for n in names}, key=lambda n: (-len(n), n))
    pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in names) + r")\b")
    seen: set[str] = set()
    kept: dict[tuple[str, str], int] = {}
    out = []
    for r in rows:
        if not pattern.search(r["text"]):
            continue
        text = pattern.sub(slot_word, r["text"])
        key = (r["intent"], r["template"])
        if text in seen or kept.get(key, 0) >= SLOT_PER_TEMPLATE:
            continue
        seen.add(text)
        kept[key] = kept.get(key, 0) + 1
        out.append(dict(r, text=text))
    return out


def test_texts() -> set[str]:
    """The clean texts of switch-dev-test (the evaluation set), from its committed ASR file."""
    return {r["clean_text"] for r in read(ROOT / "benchmarks" / "data" / "switch-dev-test.asr.jsonl")}


def ha_split(slot_word: str = "") -> tuple[list[dict], list[dict]]:
    """(train, val) of the Home Assistant lines, clean (models/data/ha-intents.jsonl) and heard
    (models/data/ha-intents.asr.jsonl), held out by template sentence: the templates in order of
    first appearance, every HA_HOLDOUT-th (index % HA_HOLDOUT == 0) goes to validation with all
    its lines and their ASR renderings, so validation wording is unseen in training."""
    clean = read(DATA / "ha-intents.jsonl")
    heard = read(DATA / "ha-intents.asr.jsonl")
    order: dict[tuple[str, str], int] = {}
    for r in clean:
        order.setdefault((r["intent"], r["template"]), len(order))
    by_text = {r["text"]: r for r in clean}
    train, val = [], []
    for r in clean:
        held = order[(r["intent"], r["template"])] % HA_HOLDOUT == 0
        (val if held else train).append({"text": r["text"], "label": r["label"], "source": "ha-intents"})
    for a in heard:
        c = by_text.get(a["clean_text"])
        if c is None or c["label"] != a["label"]:
            raise SystemExit("error: models/data/ha-intents.asr.jsonl does not match ha-intents.jsonl "
                             "(rerun python models/data/asr_variants.py --ha-intents)")
        held = order[(c["intent"], c["template"])] % HA_HOLDOUT == 0
        (val if held else train).append({"text": a["text"], "label": a["label"], "source": "ha-intents.asr"})
    for r in slot_lines(clean, slot_word) if slot_word else ():
        held = order[(r["intent"], r["template"])] % HA_HOLDOUT == 0
        (val if held else train).append({"text": r["text"], "label": r["label"], "source": "ha-intents.slot"})
    return train, val


def build_data(without: frozenset[str] = frozenset(), dest: Path = DATA, slot_word: str = "") -> tuple[Path, Path]:
    """Write the training and validation files (module docstring, step 1) into dest from every
    source in SOURCES except those in `without`; return their paths."""
    sys.path.insert(0, str(DATA))
    import templates

    if dest == DATA:
        write(DATA / "templates.jsonl", templates.lines())
    train, val = [], []
    if "switch-dev-train" not in without:
        clean = read(DATA / "switch-dev-train.jsonl")
        asr = read(ROOT / "benchmarks" / "data" / "switch-dev-train.asr.jsonl")
        if len(clean) != len(asr) or any(a["clean_text"] != c["text"] for c, a in zip(clean, asr)):
            raise SystemExit("error: the ASR file does not match switch-dev-train line by line")
        for i, (c, a) in enumerate(zip(clean, asr)):
            pair = [{"text": c["text"], "label": c["label"], "source": "switch-dev-train"},
                    {"text": a["text"], "label": a["label"], "source": "switch-dev-train.asr"}]
            (val if i % 5 == 0 else train).extend(pair)
    if "templates" not in without:
        train += templates.lines()
    if "ha-intents" not in without:
        ha_train, ha_val = ha_split(slot_word)
        train += ha_train
        val += ha_val
    banned = test_texts()  # no line of the evaluation set, should a source ever contain one
    train = [r for r in train if r["text"] not in banned]
    seen = {r["text"] for r in train}  # a held-out HA line another source has in training is not unseen
    val = [r for r in val if r["text"] not in banned and not (r["source"].startswith("ha-intents") and r["text"] in seen)]
    if not train or not val:
        raise SystemExit("error: no training or no validation lines left (--without removed every source)")
    random.Random(0).shuffle(train)
    dest.mkdir(parents=True, exist_ok=True)
    write(dest / "switch-en-train.jsonl", train)
    write(dest / "switch-en-val.jsonl", val)
    counts = {k: {"train": sum(r["source"] == k for r in train), "val": sum(r["source"] == k for r in val)}
              for k in sorted({r["source"] for r in train + val})}
    print(json.dumps({"data": counts, "train": len(train), "val": len(val)}), file=sys.stderr)
    return dest / "switch-en-train.jsonl", dest / "switch-en-val.jsonl"


def build_asr_data(templates_lines: list[dict]) -> tuple[Path, Path]:
    """The orange recipe's data: clean + four ASR renderings of switch-dev-train, templates
    clean + one ASR rendering; every fifth utterance (all renderings) is validation; no line
    equal to a switch-dev-test text."""
    sources = [read(DATA / "switch-dev-train.jsonl"), read(ROOT / "benchmarks" / "data" / "switch-dev-train.asr.jsonl")]
    sources += [read(DATA / f"switch-dev-train.asr{k}.jsonl") for k in (1, 2, 3)]
    for src in sources[1:]:
        if len(src) != len(sources[0]) or any(a["clean_text"] != c["text"] for c, a in zip(sources[0], src)):
            raise SystemExit("error: an ASR file does not match switch-dev-train line by line")
    train, val = [], []
    for src in sources:
        for i, r in enumerate(src):
            (val if i % 5 == 0 else train).append({"text": r["text"], "label": r["label"]})
    current = {r["text"]: r["label"] for r in templates_lines}
    tmpl_asr = [dict(r, label=current[r["clean_text"]]) for r in read(DATA / "templates.asr.jsonl") if r["clean_text"] in current]
    train += [{"text": r["text"], "label": r["label"]} for r in templates_lines + tmpl_asr]
    banned = test_texts()
    train = [r for r in train if r["text"] not in banned]
    val = [r for r in val if r["text"] not in banned]
    random.Random(0).shuffle(train)
    write(DATA / "switch-en-asr-train.jsonl", train)
    write(DATA / "switch-en-asr-val.jsonl", val)
    return DATA / "switch-en-asr-train.jsonl", DATA / "switch-en-asr-val.jsonl"


def shown(path: Path) -> str:
    """A path as the train command gets it: relative to the repository root when inside it."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def repack(src: Path) -> bytes:
    with np.load(src, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def ear_sentences(files: list[Path], timed_every: int | None = None) -> list[str]:
    """The ear's LM text: every clean line (not an ASR rendering: the ear must not learn its own
    mishearings) of the starting model's training and validation files, in file order, whose
    words the bundled dictionary can pronounce (edge_plm/voice/ear_lm.py); then every
    `timed_every`-th (default ``TIMED_EVERY``) of its ON/OFF lines with a time phrase of our own
    grammar, and the "cancel the timer" sentences (``timed_sentences``): the time phrases of timed
    commands, which no line of the data has."""
    from edge_plm.voice.ear_lm import TIMED_EVERY, sentence, timed_sentences

    out, commands = [], []
    for path in files:
        for r in read(path):
            if not r.get("source", "").endswith(".asr"):
                s = sentence(r["text"])
                if s:
                    out.append(s)
                    if r.get("label") in ("ON", "OFF"):
                        commands.append(s)
    return out + timed_sentences(commands, TIMED_EVERY if timed_every is None else timed_every)


def build_ear(train: Path, val: Path) -> dict:
    """Write the ear's LM (ARPA) and its sentences beside the shipped model, and their size and
    SHA-256 into the model card."""
    from edge_plm.voice.ear_lm import EAR_LM, EAR_SENTENCES, build_arpa, write_sentences

    sentences = ear_sentences([train, val])
    arpa = build_arpa(sentences).encode("utf-8")
    EAR_LM.parent.mkdir(parents=True, exist_ok=True)
    EAR_LM.write_bytes(arpa)
    write_sentences(sentences, EAR_SENTENCES)
    sha = hashlib.sha256(arpa).hexdigest()
    if CARD.exists():
        text = CARD.read_text(encoding="utf-8")
        text = re.sub(r"(<!-- ear-sha256 -->`)[0-9a-f]*(`)", rf"\g<1>{sha}\g<2>", text)
        text = re.sub(r"(<!-- ear-bytes -->)[0-9,]*", rf"\g<1>{len(arpa):,}", text)
        text = re.sub(r"(<!-- ear-sentences -->)[0-9,]*", rf"\g<1>{len(sentences):,}", text)
        CARD.write_text(text, encoding="utf-8")
    return {"ear_sentences": len(sentences), "ear_bytes": len(arpa), "ear_sha256": sha}


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-config", default="potato", choices=["potato", "orange"])
    ap.add_argument("--without", action="append", default=[], choices=SOURCES,
                    help="leave a data source out (repeatable); needs --no-install")
    ap.add_argument("--out", type=Path, default=None, help="run directory (default runs/switch-en)")
    ap.add_argument("--no-install", action="store_true",
                    help="write only the run directory (its data files too), not models/switch-en.npz")
    ap.add_argument("--data-only", action="store_true", help="write the training and validation files, train nothing")
    ap.add_argument("--ear-only", action="store_true", help="build and install only the ear's language model, from "
                    "the committed models/data/switch-en-{train,val}.jsonl (no training)")
    ap.add_argument("--slot-word", default="", help="also learn Home Assistant's light/plug commands with the "
                    "name as this word (a trial; needs --no-install)")
    args = ap.parse_args()
    if args.slot_word and not args.no_install:
        raise SystemExit("error: --slot-word builds a trial model, not the shipped one: add --no-install")
    if args.slot_word and args.model_config != "potato":
        raise SystemExit("error: --slot-word works with --model-config potato only")
    if args.without and not args.no_install:
        raise SystemExit("error: --without builds a model from fewer sources than the shipped one: add --no-install")
    if args.without and args.model_config != "potato":
        raise SystemExit("error: --without works with --model-config potato only")
    out = OUT if args.model_config == "potato" else OUT.with_name(f"switch-en-{args.model_config}")
    out = (args.out if args.out.is_absolute() else ROOT / args.out) if args.out else out
    if args.no_install and out.resolve().is_relative_to((ROOT / "models").resolve()):
        raise SystemExit("error: --out must not be inside models/ with --no-install")
    if args.ear_only:
        print(json.dumps(build_ear(DATA / "switch-en-train.jsonl", DATA / "switch-en-val.jsonl")))
        return
    if args.data_only:
        build_data(frozenset(args.without), out / "data" if args.no_install else DATA, args.slot_word)
        return
    if out.exists():
        if not (out / "checkpoint.npz").exists() and not out.resolve().is_relative_to((ROOT / "runs").resolve()):
            raise SystemExit(f"error: {out} exists and is not a run directory (no checkpoint.npz): not removing it")
        shutil.rmtree(out)
    train, val = build_data(frozenset(args.without), out / "data" if args.no_install else DATA, args.slot_word)
    if args.model_config == "orange":
        sys.path.insert(0, str(DATA))
        import templates

        train, val = build_asr_data(templates.lines())
    cmd = [sys.executable, "-m", "edge_plm.cli", "train", "switch", "--model-config", args.model_config,
           "--data", shown(train), "--val", shown(val), "--out", shown(out), "--seed", "0",
           *STARTING_RECIPE, "--json"]
    if args.slot_word:
        cmd[-1:-1] = ["--slot-word", args.slot_word]
    print("$", " ".join(cmd[1:]), file=sys.stderr)
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(res.stderr.strip() or f"train switch failed ({res.returncode})")
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    if args.model_config != "potato" or args.no_install:
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
    print(json.dumps({**summary, "bytes": len(blob), "sha256": sha, **build_ear(train, val)}))


if __name__ == "__main__":
    main()
