"""Build the shipped kind head `edge_plm/data/models/switch-en.kinds.npz` (edge_plm/switch/kinds.py,
docs/method.md "The kind head") in one command, from the repository root:

    python models/build_kinds_en.py            # writes the npz and the ear's templates
    python models/build_kinds_en.py --check    # exit 1 if either committed file differs from a rebuild

Data (all in this repository; nothing read from switch-dev-test or any other test file; no other
public corpus):
  - QUERY: Home Assistant's HassGetState lines (models/data/ha-intents.jsonl and their ASR
    renderings, models/data/ha-intents.asr.jsonl), except the ones about people and zones ("is
    anyone home", "where is anna": no device's state; PLAIN), and the question templates below;
  - LEVEL: HassLightSet lines that set a brightness (colour and colour-temperature lines are
    PLAIN), and the level templates below;
  - DIM / BRIGHTEN: the step templates below (Home Assistant has no step intent);
  - PLAIN: the starting model's own lines (models/data/switch-en-train.jsonl, -val.jsonl: ON / OFF
    / NOOP, timers, colour, chatter, questions not about a device) and a few hard negatives below
    (volume, heating, blinds: steps of other things); a PLAIN line is dropped when its text is a
    kind's line, when it is a Home Assistant HassGetState / brightness line, when it is one of
    switch-dev-train's SLURP dim / brighten utterances (intents *hue_lightdim, *hue_lightup:
    neither PLAIN nor written by us) or one of models/data/templates.py's NOOP patterns that is
    a kind ("dim {d}", "is {d} on", ...; those are kept as their kind).
The templates' slots are filled from models/data/ha_intents.py's light names, device names and
areas, up to FILLS fills per template, drawn with a seed made of the template (deterministic).
A line equal to a line of benchmarks/data/kinds/crowd-kinds.jsonl is dropped, so that file stays
unseen wording. A text given two kinds keeps its first (kinds before PLAIN).

Split by template sentence: every HOLDOUT-th template of each kind (in list order) and every
HOLDOUT-th Home Assistant template sentence (in order of first appearance, as
models/build_switch_en.py splits them) is validation with all its lines; PLAIN lines follow the
starting model's own split (switch-en-val.jsonl is validation). The head fitted on the training
split gives the validation logits, on which the temperature is fitted (and the benchmark's
held-out figures are measured: benchmarks/kind_head.py). The shipped head is then fitted on
every line (training and validation) with the same recipe, and carries that temperature.

The ear's templates, `edge_plm/data/models/switch-en.kinds.txt.gz`: the DIM, BRIGHTEN and LEVEL
templates above that name no area and no other device, as written (``{name}``: a dimmer's name,
``{pct}``: a level in words), one ``KIND<TAB>template`` a line, in list order, gzip without a time
stamp. A household with a dimmer fills them with its dimmers' names and hears them
(edge_plm/voice/ear_lm.py `dimmer_sentences`).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "models" / "data"
TARGET = ROOT / "edge_plm" / "data" / "models" / "switch-en.kinds.npz"
EAR_TARGET = TARGET.with_name("switch-en.kinds.txt.gz")  # the templates the ear fills (module docstring)
CROWD = ROOT / "benchmarks" / "data" / "kinds" / "crowd-kinds.jsonl"
sys.path.insert(0, str(DATA))
sys.path.insert(0, str(ROOT))

import ha_intents  # noqa: E402
import templates as switch_templates  # noqa: E402

from edge_plm.actions import KIND_INDEX, KINDS  # noqa: E402
from edge_plm.switch import kinds as K  # noqa: E402

HOLDOUT = 5
FILLS = 6  # slot fills per template
# the recipe: gradient steps of class-weighted cross-entropy pulled toward the explicit solution
REFINE = {"steps": 200, "lr": 2.0, "l2": 1e-4}  # chosen on the validation split (docs/method.md)

NAMES = ["light", "lights", "lamp", "the lights", "desk lamp", "floor lamp", "ceiling light", "reading lamp",
         "bedside lamp", "kitchen light", "living room lights", "bedroom lamp", "hallway light", "table lamp",
         "porch light", "corner lamp", "night light", "string lights", "lamps", "ceiling lights"]
DEVICES = NAMES + ["plug", "smart plug", "socket", "heater", "fan", "tv", "kettle", "coffee maker", "radio",
                   "space heater", "air conditioner", "ceiling fan", "outlet", "power strip"]
PCT = ["five", "ten", "fifteen", "twenty", "twenty five", "thirty", "thirty five", "forty", "forty five", "fifty",
       "sixty", "sixty five", "seventy", "seventy five", "eighty", "eighty five", "ninety", "one hundred"]
PREFIX = ["", "", "", "please ", "can you ", "could you ", "hey ", "ok ", "would you "]
SUFFIX = ["", "", "", " please", " for me", " thanks", " a bit", " now"]

DIM = """dim the {name}|dim {name}|dim the lights in the {area}|dim the {name} a little|dim it|dim it a bit
dim down the {name}|turn down the {name}|turn the {name} down|turn the {name} down a bit|turn the lights down in the {area}
turn down the light in the {area}|turn down the brightness|turn the brightness down in the {area}|lower the {name}
lower the lights|lower the brightness|lower the brightness of the {name}|lower the light in the {area}|lights lower
make it darker|make it a bit darker|make it darker in the {area}|make the {name} darker|make the {name} dimmer
a bit darker in here|darker|a little darker|go darker|lights down|{name} down|{name} down a bit|bring the {name} down
bring down the lights in the {area}|decrease the brightness|decrease the brightness of the {name}|decrease the light in the {area}
reduce the brightness|reduce the light in the {area}|reduce the {name} brightness|less bright|not so bright
too bright|it's too bright in here|it's too bright in the {area}|the {name} is too bright|the lights are way too bright
tone down the {name}|tone the lights down|soften the lights|softer light|take the {name} down a notch
knock the lights down a bit|drop the brightness|drop the {name} a bit|dial down the {name}|dial the brightness down
i'd like it a bit darker|i want the lights dimmer|dimmer|a little dimmer|less light|less light in the {area}
the light is hurting my eyes|way too bright in here|can we dim the {name}|the {area} is too bright
could it be darker in here|turn the lights lower|dim the {area} lights|bring the brightness down a notch
it's a bit bright|too much light in here|make the {area} darker|dimmer lights in the {area}|darken the {area}"""
DIM = DIM.replace("\n", "|").split("|")
BRIGHTEN = """brighten the {name}|brighten {name}|brighten up the {area}|brighten the lights in the {area}|brighten it
brighten it up a bit|turn up the {name}|turn the {name} up|turn the {name} up a bit|turn the lights up in the {area}
turn up the light in the {area}|turn up the brightness|turn the brightness up in the {area}|raise the {name}
raise the lights|raise the brightness|raise the brightness of the {name}|raise the light in the {area}|lights higher
make it brighter|make it a bit brighter|make it brighter in the {area}|make the {name} brighter|make the {area} brighter
a bit brighter in here|brighter|a little brighter|go brighter|lights up|{name} up|{name} up a bit|bring the {name} up
bring up the lights in the {area}|increase the brightness|increase the brightness of the {name}|increase the light in the {area}
more light|more light in the {area}|i need more light|give me more light|a bit more light|can i have more light
it's too dim in here|it's too dim in the {area}|the {name} is too dim|the lights are too dim|not bright enough
it's not bright enough in the {area}|pump up the brightness|bump the {name} up a bit|crank up the lights
boost the brightness|boost the {name}|dial up the {name}|dial the brightness up|up the brightness
brighter in the {area}|increase the {name}|take the {name} up a notch|i can't see well turn the {name} up
i'd like it a bit brighter|i want the lights brighter|lighter in here|more brightness|brighten the {area} lights
it's a bit dim|could it be brighter in here|turn the lights higher|bring the brightness up a notch
the {area} is too dim|brighter lights in the {area}|lighten up the {area}|make the light stronger""".replace("\n", "|").split("|")
LEVEL = """set the {name} to {pct} percent|{name} to {pct} percent|{name} at {pct} percent|set the brightness to {pct} percent
brightness {pct} percent|set the lights in the {area} to {pct} percent|dim the {name} to {pct} percent
brighten the {name} to {pct} percent|turn the {name} to {pct} percent|put the {name} at {pct} percent
make the {name} {pct} percent|{pct} percent brightness|{pct} percent on the {name}|set the {name} brightness to {pct}
brightness to {pct}|{name} at half|{name} to half|half brightness|set the {name} to half brightness|put the lights at half
{name} on half|full brightness|{name} at full brightness|set the {name} to full|turn the {name} all the way up
all the way up|max brightness|{name} to maximum|maximum brightness in the {area}|{name} to the lowest setting
lowest brightness|minimum brightness|set the {name} to minimum|a quarter brightness|{name} at a quarter
three quarters brightness|dim the {name} to {pct}|dim the {name} to half|{area} lights at {pct} percent
change the {name} to {pct} percent brightness|can you set the {area} to {pct} percent|adjust the {name} to {pct} percent
the {name} at {pct} percent|i want the {name} at {pct} percent|{name} brightness {pct}|{name} halfway
turn the {name} to full|{name} to one hundred percent|set it to {pct} percent|put it on {pct} percent""".replace("\n", "|").split("|")
QUERY = """is the {dev} on|is the {dev} off|is the {dev} still on|is the {dev} switched on|is the {dev} turned off
is the {dev} on or off|is the {dev} on in the {area}|is the {area} {name} on|are the lights on|are the lights on in the {area}
are the {area} lights off|are any lights on|are any of the lights still on|is any light on|are all the lights off
what's on|what is on|what is switched on|what's switched on right now|what's still on|what devices are on
which lights are on|which lights are still on in the {area}|anything on in the {area}|is anything on
is anything still switched on|did i leave the {dev} on|did i leave the lights on in the {area}|did i turn off the {dev}
did i switch the {dev} off|did someone leave the {dev} on|can you check if the {dev} is on|check whether the {dev} is off
tell me if the {dev} is on|is the {dev} running|what's the status of the {dev}|what state is the {dev} in
is the {dev} on right now|is the {dev} off yet|how many lights are on|do i have any lights on|is there a light on in the {area}
is the {area} light on|is my {dev} on|are my lights off|was the {dev} left on|is the {dev} still running
has the {dev} been switched off|is the {dev} working|tell me what's on|what's on in the {area}|anything left on"""
QUERY = QUERY.replace("\n", "|").split("|")
PLAIN = """turn up the volume|turn the volume down|turn down the music|turn it up louder|lower the volume
raise the volume in the {area}|turn up the heat|turn down the heating|lower the temperature|make it warmer
make it cooler in the {area}|turn the thermostat up|lower the blinds|raise the blinds in the {area}|open the curtains
turn the fan up|turn down the fan speed|is it going to rain|is it cold outside|is the shop open|what time is it
how are you|what's on tv tonight|what's the temperature outside|is it sunny tomorrow|turn on the {name}|turn off the {name}
switch the {name} on|switch off the {name}|{name} on|{name} off|how is the weather today|how is your day going
how long is the film|how old is the queen|how much is a pint of milk|how do i get to the station|how tall is mount everest
is it windy outside|is the post office open on sunday|is there traffic on the way to work|is today a holiday
are we out of milk|are there any emails for me|are you listening|what is the capital of spain|what's the time in tokyo
what's for dinner|what is two plus two|where is the nearest pharmacy|who is calling|when does the game start
is the train on time|is the pool open today|are the kids asleep|how's it going|what's up|what day is it""".replace("\n", "|").split("|")
TEMPLATES = {"DIM": DIM, "BRIGHTEN": BRIGHTEN, "LEVEL": LEVEL, "QUERY": QUERY, "PLAIN": PLAIN}
# models/data/templates.py's NOOP patterns that are kinds
SWITCH_TEMPLATE_KINDS = {"dim {d}": "DIM", "make {d} brighter": "BRIGHTEN", "brighten {d} a bit": "BRIGHTEN",
                         "set {d} to fifty percent": "LEVEL", "is {d} on": "QUERY", "did i leave {d} on": "QUERY"}
SLURP_STEPS = ("iot_hue_lightdim", "iot_hue_lightup", "hue_lightdim", "hue_lightup")


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def fill(template: str, rng: random.Random) -> str:
    """One filling of a template's slots and fillers."""
    text = template
    for slot, values in (("{name}", NAMES), ("{dev}", DEVICES), ("{area}", ha_intents.AREAS), ("{pct}", PCT)):
        while slot in text:
            text = text.replace(slot, rng.choice(values), 1)
    text = (rng.choice(PREFIX) + text + rng.choice(SUFFIX)).replace("the the ", "the ")
    return " ".join(text.split())


def template_lines(kind: str, patterns: list[str]) -> list[dict]:
    """Up to FILLS distinct fillings of each template (the first one without fillers)."""
    out = []
    for i, p in enumerate(patterns):
        rng = random.Random(f"{kind}/{p}")
        texts = []
        for _ in range(4 * FILLS):
            t = fill(p, rng)
            if t not in texts:
                texts.append(t)
            if len(texts) == FILLS or "{" not in p and len(texts) == 3:
                break
        out += [{"text": t, "kind": kind, "val": i % HOLDOUT == 0, "source": "kind-template"} for t in texts]
    return out


def ha_kind(row: dict) -> str | None:
    """The kind of a Home Assistant line: QUERY, LEVEL, or None (PLAIN / the starting lines)."""
    t = row["template"]
    if row["intent"] == "HassGetState":
        people = "{zone:state}" in t or t.startswith("<where_is>") or t.startswith("where can I find")
        return None if people else "QUERY"
    if row["intent"] == "HassLightSet" and "{brightness" in t:
        return "LEVEL"
    return None


def ha_lines() -> tuple[list[dict], set[str]]:
    """(QUERY and LEVEL lines of Home Assistant, clean and heard, split by template sentence;
    every text of a HassGetState or HassLightSet-brightness line, which PLAIN must not hold)."""
    clean = read(DATA / "ha-intents.jsonl")
    order: dict[tuple[str, str], int] = {}
    for r in clean:
        order.setdefault((r["intent"], r["template"]), len(order))
    out, banned = [], set()
    for r in clean + read(DATA / "ha-intents.asr.jsonl"):
        if r["intent"] == "HassGetState" or (r["intent"] == "HassLightSet" and "{brightness" in r["template"]):
            banned.add(r["text"])
        kind = ha_kind(r)
        if kind:
            src = "ha-intents.asr" if "clean_text" in r else "ha-intents"
            out.append({"text": r["text"], "kind": kind, "val": order[(r["intent"], r["template"])] % HOLDOUT == 0,
                        "source": src})
    return out, banned


def plain_banned() -> set[str]:
    """Texts of the starting lines that are not PLAIN: SLURP's dim / brighten utterances (clean and
    heard) and models/data/templates.py's NOOP patterns that are kinds."""
    out = {r["text"] for r in read(DATA / "switch-dev-train.jsonl") if r["intent"] in SLURP_STEPS}
    out |= {r["text"] for r in read(ROOT / "benchmarks" / "data" / "switch-dev-train.asr.jsonl") if r["intent"] in SLURP_STEPS}
    for p in SWITCH_TEMPLATE_KINDS:
        out |= {p.format(d=d) for d in switch_templates.DEVICES}
    return out


def switch_template_kinds() -> list[dict]:
    """templates.py's NOOP patterns that are kinds, as those kinds (all training: not our split)."""
    return [{"text": p.format(d=d), "kind": k, "val": False, "source": "switch-template"}
            for p, k in SWITCH_TEMPLATE_KINDS.items() for d in switch_templates.DEVICES]


def build_rows() -> list[dict]:
    """Every labelled line {text, kind, val, source} (module docstring), in a fixed order."""
    crowd = {r["text"] for r in read(CROWD)}
    ha, ha_banned = ha_lines()
    rows = [r for k in KINDS[1:] for r in template_lines(k, TEMPLATES[k])] + ha + switch_template_kinds()
    rows += template_lines("PLAIN", TEMPLATES["PLAIN"])
    banned = ha_banned | plain_banned()
    for name, val in (("switch-en-train.jsonl", False), ("switch-en-val.jsonl", True)):
        rows += [{"text": r["text"], "kind": "PLAIN", "val": val, "source": r["source"]} for r in read(DATA / name)
                 if r["text"] not in banned]
    out, seen = [], set()
    for r in rows:
        if r["text"] in seen or r["text"] in crowd or not r["text"].strip():
            continue
        seen.add(r["text"])
        out.append(r)
    return out


def fit(rows: list[dict]) -> K.KindHead:
    """A kind head from labelled rows: statistics, then the refinement steps (REFINE)."""
    head = K.KindHead()
    for r in rows:
        head.add(r["text"], r["kind"])
    if REFINE["steps"]:
        K.fit_refinement(head, [r["text"] for r in rows], [r["kind"] for r in rows], **REFINE)
    return head


def held_out(rows: list[dict]) -> tuple[K.KindHead, np.ndarray, np.ndarray]:
    """(the head fitted on the training split, validation logits, validation labels)."""
    head = fit([r for r in rows if not r["val"]])
    val = [r for r in rows if r["val"]]
    logits = np.array([head.logits(r["text"]) for r in val])
    return head, logits, np.array([KIND_INDEX[r["kind"]] for r in val], dtype=np.int64)


def build() -> tuple[bytes, dict]:
    """(the shipped head's npz bytes, a summary)."""
    rows = build_rows()
    _, logits, labels = held_out(rows)
    temperature = K.fit_temperature(logits, labels)
    head = fit(rows)
    head.temperature = temperature
    counts = {k: {"train": sum(r["kind"] == k and not r["val"] for r in rows),
                  "val": sum(r["kind"] == k and r["val"] for r in rows)} for k in KINDS}
    val = K.calibration_report(K.softmax(logits / temperature), labels)
    summary = {"rows": counts, "temperature": temperature, "units": len(head.vocab),
               "val_balanced_accuracy": val["balanced_accuracy"], "val_ece": val["ece"]}
    return K.npz_bytes(head.to_arrays()), summary


def ear_templates() -> list[str]:
    """``KIND<TAB>template`` of every DIM, BRIGHTEN and LEVEL template without an area or another
    device's slot, in list order (the household's ear fills ``{name}`` and ``{pct}``)."""
    return [f"{k}\t{t}" for k in ("DIM", "BRIGHTEN", "LEVEL") for t in TEMPLATES[k]
            if "{area}" not in t and "{dev}" not in t]


def ear_bytes() -> bytes:
    """The ear's template file: `ear_templates`, gzip at level 9 with no time stamp or name."""
    return gzip.compress("".join(t + "\n" for t in ear_templates()).encode("utf-8"), compresslevel=9, mtime=0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed npz differs from a rebuild")
    ap.add_argument("--out", type=Path, default=TARGET)
    ap.add_argument("--ear-out", type=Path, default=EAR_TARGET)
    args = ap.parse_args(argv)
    blob, summary = build()
    ear = ear_bytes()
    if args.check:
        same = args.out.is_file() and args.out.read_bytes() == blob
        ear_same = args.ear_out.is_file() and args.ear_out.read_bytes() == ear
        print(json.dumps({"file": args.out.name, "identical": same}))
        print(json.dumps({"file": args.ear_out.name, "identical": ear_same}))
        return 0 if same and ear_same else 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(blob)
    args.ear_out.write_bytes(ear)
    print(json.dumps({**summary, "file": args.out.name, "bytes": len(blob)}))
    print(json.dumps({"file": args.ear_out.name, "templates": len(ear_templates()), "bytes": len(ear)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
