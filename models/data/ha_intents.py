#!/usr/bin/env python3
"""Labelled phrasings for the starting model from Home Assistant's community English intents.

Home Assistant's voice assistant ships its sentence templates as the PyPI package
`home-assistant-intents` (https://github.com/OHF-Voice/intents, "The Home Assistant Authors";
the project publishes its sentences under CC BY 4.0, the package declares Apache-2.0). This
script expands the English templates with `hassil` (Apache-2.0, the same project's template
parser and sampler) into lines {"text", "label", "source": "home-assistant-intents", "intent",
"template", "sample"} written to models/data/ha-intents.jsonl. Both packages are build-time tools (the
`build-model` extra); the device never imports them. Regenerate (from the repository root):

    python models/data/ha_intents.py            # writes models/data/ha-intents.jsonl
    python models/data/ha_intents.py --check    # exit 1 if the committed file differs

Labels (the device switches ONE relay, on a lamp):
  - HassTurnOn / HassTurnOff whose target is a light (the block's domain is `light`, or its
    `{name}` is filled with a light/lamp name) or a plug / socket / switch (domain `switch`,
    `{name}` filled with a plug/socket/switch name) -> ON / OFF;
  - HassTurnOn / HassTurnOff of every other device (fans, covers such as garage doors and
    blinds, locks, valves, media players, climate devices and heaters, scenes, scripts, buttons,
    modes, coffee makers and kettles ...) -> NOOP;
  - every other intent (HassLightSet brightness/colour, HassGetState "is the light on", timers,
    weather, media, lists, climate, vacuums, ...) -> NOOP.
A block whose `{name}` may be a light or another device (HA's "turn on {name}" for light, switch,
fan, media_player, input_boolean, climate) is expanded twice: with lamp/plug names (ON/OFF) and
with the other devices' names (NOOP). The one template that is a bare name ("[<the>] {name}",
HA's shorthand for "turn on {name}") is left out: a lamp's name alone is not a command.

Expansion, per template sentence (fixed order: intents by name, blocks and sentences as listed):
every slot list is cut to a few values drawn with a seed made of the sentence's key (areas,
floors and names from the curated lists below; the intents' own value lists; number ranges as
a few numbers written as words with hassil's RBNF engine; wildcards such as a timer's name or a
shopping item from curated lists); hassil's `sample_expression` lists every sentence of that
cut (a cut with more than ENUM_LIMIT sentences is sampled by a seeded random walk over the
parsed template instead), and at most PER_COMMAND (ON/OFF) or PER_OTHER (NOOP) distinct lines
are kept ("sample": "main"). A second pass over the hard negatives HassLightSet and
HassGetState (light words that are not a command), with seeds of its own, adds at most
HARD_EXTRA lines per sentence not already there ("sample": "hard-negative"). A seeded fifth of
the lines gets one of HA's own skip words ("please", "can you", ...). Text is normalised the
way an ASR transcript looks: lower case, "%" -> "percent", "°" -> "degrees", digits as words,
no punctuation (apostrophes kept, as the device's tokenizer
keeps them). A text is kept once (first occurrence); a text that would get two labels is
dropped, and so is any line of the held-out evaluation set (the clean texts of
benchmarks/data/switch-dev-test.asr.jsonl). Deterministic: same packages, same file.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import re
import sys
import unicodedata
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
OUT = HERE / "ha-intents.jsonl"
TEST_SET = REPO / "benchmarks" / "data" / "switch-dev-test.asr.jsonl"
SOURCE = "home-assistant-intents"

PER_COMMAND = 12  # at most this many lines per ON/OFF template sentence (and filling variant)
ENUM_LIMIT = 3000  # a cut template with more sentences than this is sampled by a random walk
PER_OTHER = 4  # ... per NOOP template sentence (and variant)
# light words that are not a command ("set the kitchen lights to red", "are the lights on"): a
# second pass adds up to HARD_EXTRA more lines per sentence of these, so that "light" alone does not decide
HARD_NEGATIVES = ("HassLightSet", "HassGetState")
HARD_EXTRA = 8
LIST_CUT = {"command": 6, "other": 3}  # values kept per slot list for one sentence
SKIP_WORD_SHARE = 0.2
ASR_LINES = 1500  # lines of the ASR rendering (asr_subset)
ASR_COMMANDS = 800  # ... of them ON/OFF
PREFIXES = ["please", "can you", "could you", "would you"]
SUFFIXES = ["please", "for me"]

AREAS = ["kitchen", "living room", "bedroom", "master bedroom", "bathroom", "hallway", "hall", "office",
         "study", "dining room", "garage", "basement", "attic", "guest room", "kids room", "nursery",
         "laundry room", "porch", "patio", "garden", "back yard", "front yard", "den", "family room",
         "playroom", "lounge", "entrance", "landing", "stairs", "utility room", "pantry", "loft",
         "conservatory", "balcony", "downstairs bathroom", "upstairs hallway"]
FLOORS = ["first", "second", "third", "ground", "top", "upstairs", "downstairs", "basement", "main"]
# {name} of a light when the template adds the light word itself ("{name} <light>")
LIGHT_BARE = ["desk", "ceiling", "floor", "reading", "bedside", "porch", "kitchen", "corner", "table",
              "hallway", "night", "wall", "pendant", "christmas", "garden", "accent"]
LIGHT_NAMES = ["light", "lamp", "desk lamp", "floor lamp", "ceiling light", "reading lamp", "bedside lamp",
               "porch light", "kitchen light", "living room lamp", "night light", "table lamp",
               "corner lamp", "hallway light", "string lights", "fairy lights", "christmas lights",
               "bedroom light"]
SWITCH_NAMES = ["plug", "smart plug", "socket", "wall socket", "power socket", "outlet", "power strip",
                "light switch", "switch", "lamp plug", "kitchen plug", "wall switch"]
OTHER_NAMES = {
    "fan": ["fan", "ceiling fan", "desk fan", "bedroom fan", "air purifier"],
    "media_player": ["tv", "television", "radio", "stereo", "kitchen speaker", "sound bar", "record player"],
    "input_boolean": ["guest mode", "vacation mode", "night mode", "party mode"],
    "climate": ["heater", "thermostat", "air conditioner", "radiator", "space heater", "heat pump"],
    "cover": ["garage door", "blinds", "curtains", "bedroom shades", "shutters", "awning", "gate"],
    "valve": ["water valve", "sprinkler", "main water valve", "gas valve"],
    "lock": ["front door", "back door", "front door lock", "garage door lock", "side gate"],
    "scene": ["movie night", "romantic dinner", "good morning", "relax", "party time"],
    "script": ["morning routine", "bedtime routine", "leave home", "wake up routine"],
    "button": ["doorbell", "restart button", "reset button"],
    "input_button": ["doorbell", "restart button"],
    "todo": ["shopping", "grocery", "to do", "chores", "packing"],
    "weather": ["london", "paris", "new york", "home", "the beach house"],
    "lawn_mower": ["lawn mower", "robot mower", "mower"],
    "vacuum": ["vacuum", "robot vacuum", "roomba", "vacuum cleaner"],
    "person": ["mum", "dad", "anna", "tom", "grandma"],
    "binary_sensor": ["front door sensor", "motion sensor", "window sensor", "smoke detector"],
    "sensor": ["temperature sensor", "humidity", "outside temperature", "power meter"],
    # on a smart plug in Home Assistant, but not the lamp's relay
    "appliance": ["coffee maker", "kettle", "dishwasher", "washing machine", "dehumidifier"],
}
LAMP_DOMAINS = ("light", "switch")
WILDCARDS = {
    "message": ["dinner is ready", "we are leaving in five minutes", "time for bed", "the movie starts now"],
    "search_query": ["the beatles", "some jazz", "my workout playlist", "taylor swift", "the news",
                     "relaxing music", "the latest episode", "abbey road"],
    "zone": ["home", "work", "school", "the gym", "the office"],
    "timer_name": ["pizza", "pasta", "laundry", "tea", "oven", "homework"],
    "timer_command": ["start the vacuum", "play some music", "close the blinds", "lock the front door",
                      "turn off the tv"],
    "shopping_list_item": ["milk", "eggs", "bread", "apples", "coffee", "toilet paper", "bananas"],
    "todo_list_item": ["call the plumber", "milk", "pay the bills", "water the plants", "eggs"],
}
SKIPPED_TEMPLATES = {("HassTurnOn", "[<the>] {name}")}


def _engine():
    from hassil.numbers import get_rbnf_engine

    return get_rbnf_engine("en")


def number_words(n, engine) -> str:
    return engine.format_number(n).text


def normalise(text: str, engine) -> str:
    """Lower-case plain words, as an ASR transcript looks (see the module docstring)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = text.replace("%", " percent ").replace("°", " degrees ")
    text = re.sub(r"\d+", lambda m: " " + number_words(int(m.group()), engine) + " ", text)
    kept = [ch if (ch.isalnum() or ch in "' ") else " " for ch in text]
    return " ".join("".join(kept).split())


def name_values(domains: list[str], lamp: bool, bare_light: bool) -> list[str]:
    """The curated {name} values for a block's domains: lamp/plug names or the other devices'."""
    if lamp:
        out = []
        if "light" in domains:
            out += LIGHT_BARE if bare_light else LIGHT_NAMES
        if "switch" in domains:
            out += SWITCH_NAMES
        return out
    out = []
    for d in domains:
        if d in LAMP_DOMAINS:
            continue
        out += OTHER_NAMES.get(d, [])
    if "switch" in domains or "fan" in domains:
        out += OTHER_NAMES["appliance"]
    return out


def cut_lists(intents, sentence, names: list[str], rng: random.Random, k: int, engine) -> dict:
    """Every slot list the sentence uses, cut to at most k values (seeded)."""
    from hassil.intents import RangeSlotList, TextSlotList, WildcardSlotList

    lists = {}
    for list_name in sorted(sentence.list_names(intents.expansion_rules)):
        if list_name == "area":
            lists[list_name] = TextSlotList.from_strings(rng.sample(AREAS, min(k, len(AREAS))), name=list_name)
            continue
        if list_name == "floor":
            lists[list_name] = TextSlotList.from_strings(rng.sample(FLOORS, min(k, len(FLOORS))), name=list_name)
            continue
        if list_name == "name":
            lists[list_name] = TextSlotList.from_strings(rng.sample(names, min(k, len(names))), name=list_name)
            continue
        slot_list = intents.slot_lists.get(list_name)
        if isinstance(slot_list, RangeSlotList):
            numbers = [n for n in range(slot_list.start, slot_list.stop + 1, slot_list.step)]
            picked = rng.sample(numbers, min(k, len(numbers)))
            lists[list_name] = TextSlotList.from_strings([number_words(n, engine) for n in picked], name=list_name)
        elif isinstance(slot_list, WildcardSlotList) or slot_list is None:
            values = WILDCARDS.get(list_name)
            if values is None:
                raise SystemExit(f"error: no curated values for the wildcard list {{{list_name}}}")
            lists[list_name] = TextSlotList.from_strings(rng.sample(values, min(k, len(values))), name=list_name)
        elif isinstance(slot_list, TextSlotList):
            values = list(slot_list.values)
            lists[list_name] = TextSlotList(name=list_name, values=rng.sample(values, min(k, len(values))))
        else:
            raise SystemExit(f"error: slot list {{{list_name}}} has an unknown type {type(slot_list).__name__}")
    return lists


LAMP_NAMES = frozenset(LIGHT_NAMES + LIGHT_BARE + SWITCH_NAMES)
QUESTION_WORDS = frozenset("is are am was were what what's whats which how how's hows where where's wheres who when "
                           "do does did any can could would will tell".split())


def label_of(intent_name: str, domains, name: str | None) -> str:
    """The label rule of the module docstring: ON / OFF for HassTurnOn / HassTurnOff of a light,
    plug, socket or switch (by the `{name}` filled in, else by the block's domain), else NOOP."""
    command = {"HassTurnOn": "ON", "HassTurnOff": "OFF"}.get(intent_name)
    if command is None:
        return "NOOP"
    if name is not None:
        return command if name in LAMP_NAMES else "NOOP"
    return command if set(domains) & set(LAMP_DOMAINS) else "NOOP"


def recogniser():
    """(intents, slot lists, skip words) to recognise a sentence with hassil against the same
    templates and curated lists; every {name} value carries its domain as context."""
    from hassil.expression import TextChunk
    from hassil.intents import Intents, TextSlotList, TextSlotValue
    from home_assistant_intents import get_intents

    raw = get_intents("en")
    values = []
    groups = [("light", LIGHT_NAMES + LIGHT_BARE), ("switch", SWITCH_NAMES)] + list(OTHER_NAMES.items())
    for domain, names in groups:
        # the generator fills appliances into switch and fan blocks (name_values): both contexts
        for d in (("switch", "fan") if domain == "appliance" else (domain,)):
            values += [TextSlotValue(text_in=TextChunk(n), value_out=n, context={"domain": d}) for n in names]
    lists = {"area": TextSlotList.from_strings(AREAS, name="area"), "floor": TextSlotList.from_strings(FLOORS, name="floor"),
             "name": TextSlotList(name="name", values=values)}
    return Intents.from_dict(raw), lists, raw["skip_words"]


def label_text(text: str, rec=None) -> tuple[str, str] | None:
    """(intent, label) of a sentence as hassil recognises it (first match; an area is assumed as
    the device's context), or None when no template matches: a check of the labels independent
    of how the lines were generated."""
    from hassil.recognize import recognize

    intents, lists, skip_words = rec or recogniser()
    result = recognize(text, intents, slot_lists=lists, intent_context={"area": AREAS[0]}, skip_words=skip_words,
                       language="en")
    if result is None:
        return None
    name = result.entities.get("name")
    value = None if name is None else str(name.value)
    return result.intent.name, label_of(result.intent.name, result.intent_data.domains, value)


def variants(intent_name: str, data) -> list[tuple[str, str | None, list[str]]]:
    """(variant, label or None for NOOP, block domains) for one block of sentences."""
    domains = sorted(data.domains)
    command = intent_name in ("HassTurnOn", "HassTurnOff")
    label = {"HassTurnOn": "ON", "HassTurnOff": "OFF"}.get(intent_name)
    lamp = [d for d in domains if d in LAMP_DOMAINS]
    if not command:
        return [("all", None, domains)]
    has_name = any("name" in s.list_names(data.expansion_rules or {}) for s in data.sentences) or any(
        "{name}" in t for t in data.sentence_texts)
    if not has_name:  # the domain is fixed by the block: light -> command, anything else -> NOOP
        return [("lamp", label, domains)] if lamp else [("other", None, domains)]
    out = []
    if lamp:
        out.append(("lamp", label, domains))
    if [d for d in domains if d not in LAMP_DOMAINS] or "switch" in domains:
        out.append(("other", None, domains))
    return out


def walk(expression, lists: dict, rules: dict, rng: random.Random) -> str:
    """One random sentence of a parsed hassil expression: each alternative, list value and
    permutation order drawn from rng (used where a cut template has too many sentences to list)."""
    from hassil.expression import Alternative, ListReference, Permutation, RuleReference, Sequence, TextChunk
    from hassil.intents import TextSlotList

    if isinstance(expression, TextChunk):
        return expression.original_text
    if isinstance(expression, Alternative):
        return walk(rng.choice(expression.items), lists, rules, rng)
    if isinstance(expression, Permutation):
        items = list(expression.items)
        rng.shuffle(items)
        return " ".join(walk(item, lists, rules, rng) for item in items)
    if isinstance(expression, Sequence):
        return "".join(walk(item, lists, rules, rng) for item in expression.items)
    if isinstance(expression, RuleReference):
        return walk(rules[expression.rule_name].expression, lists, rules, rng)
    if isinstance(expression, ListReference):
        slot_list = lists[expression.list_name]
        if not isinstance(slot_list, TextSlotList):
            raise SystemExit(f"error: slot list {{{expression.list_name}}} was not cut to text values")
        return walk(rng.choice(slot_list.values).text_in, lists, rules, rng)
    raise SystemExit(f"error: unexpected template expression {type(expression).__name__}")


def expand(sentence, lists: dict, rules: dict, rng: random.Random, cap: int, engine) -> list[str]:
    """At most `cap` distinct normalised sentences of one cut template: hassil's own
    `sample_expression` lists them all when there are at most ENUM_LIMIT, and a seeded sample of
    that list is kept; a larger template is sampled by `walk` (ENUM_LIMIT draws at most)."""
    from hassil.sample import sample_expression

    listed = list(itertools.islice(sample_expression(sentence.expression, lists, rules, language="en"), ENUM_LIMIT + 1))
    if len(listed) <= ENUM_LIMIT:
        texts = list(dict.fromkeys(normalise(t, engine) for t in listed if "/" not in t))
        texts = [t for t in texts if t]
        return rng.sample(texts, min(cap, len(texts)))
    texts: list[str] = []
    for _ in range(ENUM_LIMIT):
        raw = walk(sentence.expression, lists, rules, rng)
        t = normalise(raw, engine) if "/" not in raw else ""
        if t and t not in texts:
            texts.append(t)
            if len(texts) == cap:
                break
    return texts


def expand_all(intents, engine, banned: set[str], hard: bool) -> tuple[list[dict], set[str], dict[str, str]]:
    """One pass over every template sentence (see the module docstring): (rows, conflicting texts,
    text -> label). The hard pass takes HARD_NEGATIVES only, with seeds of its own."""
    rows: list[dict] = []
    seen: dict[str, str] = {}
    conflicts: set[str] = set()
    for intent_name in sorted(intents.intents):
        if hard and intent_name not in HARD_NEGATIVES:
            continue
        intent = intents.intents[intent_name]
        for b, data in enumerate(intent.data):
            rules = {**intents.expansion_rules, **(data.expansion_rules or {})}
            for s, (sentence, template) in enumerate(zip(data.sentences, data.sentence_texts)):
                if (intent_name, template) in SKIPPED_TEMPLATES:
                    continue
                for variant, label, domains in variants(intent_name, data):
                    rng = random.Random(f"{intent_name}/{b}/{s}/{variant}" + ("/hard" if hard else ""))
                    kind = "other" if label is None else "command"
                    names = name_values(domains, variant == "lamp", "{name} <light>" in template)
                    if "{name}" in template and not names:
                        continue
                    lists = {**intents.slot_lists, **cut_lists(intents, sentence, names, rng, LIST_CUT[kind], engine)}
                    lab = label_of(intent_name, domains, names[0] if "{name}" in template else None)
                    cap = HARD_EXTRA if hard else PER_OTHER if lab == "NOOP" else PER_COMMAND
                    for t in expand(sentence, lists, rules, rng, cap, engine):
                        if rng.random() < SKIP_WORD_SHARE:
                            question = t.split()[0] in QUESTION_WORDS
                            t = f"{rng.choice(PREFIXES)} {t}" if rng.random() < 0.7 and not question else f"{t} {rng.choice(SUFFIXES)}"
                        if t in banned:
                            continue
                        if t in seen:
                            if seen[t] != lab:
                                conflicts.add(t)
                            continue
                        seen[t] = lab
                        rows.append({"text": t, "label": lab, "source": SOURCE, "intent": intent_name,
                                     "template": template, "sample": "hard-negative" if hard else "main"})
    return rows, conflicts, seen


def generate() -> list[dict]:
    """The main pass, then the hard-negative pass (its texts not already in the main pass)."""
    from hassil.intents import Intents
    from home_assistant_intents import get_intents

    engine = _engine()
    intents = Intents.from_dict(get_intents("en"))
    banned = {json.loads(line)["clean_text"] for line in TEST_SET.read_text(encoding="utf-8").splitlines() if line.strip()}
    main, conflicts, seen = expand_all(intents, engine, banned, hard=False)
    main = [r for r in main if r["text"] not in conflicts]
    extra, _, _ = expand_all(intents, engine, banned | set(seen), hard=True)  # all NOOP: no conflicts
    return main + extra


def asr_subset(rows: list[dict], size: int = ASR_LINES) -> list[dict]:
    """The lines rendered through speech -> pocketsphinx (models/data/ha-intents.asr.jsonl): a
    seeded sample, in file order, of ASR_COMMANDS ON/OFF lines and the rest NOOP lines of the main
    pass (commands are over-represented: they are what the device must not miss when it hears
    them garbled)."""
    rows = [r for r in rows if r["sample"] == "main"]
    rng = random.Random(0)
    commands = [i for i, r in enumerate(rows) if r["label"] != "NOOP"]
    others = [i for i, r in enumerate(rows) if r["label"] == "NOOP"]
    n_cmd = min(ASR_COMMANDS, len(commands), size)
    picked = rng.sample(commands, n_cmd) + rng.sample(others, min(size - n_cmd, len(others)))
    return [rows[i] for i in sorted(picked)]


def dumps(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    args = ap.parse_args(argv)
    try:
        rows = generate()
    except ImportError as exc:
        print(f"error: {exc.name} is not installed (pip install -e '.[build-model]')", file=sys.stderr)
        return 1
    text = dumps(rows)
    if args.check:
        same = args.out.is_file() and args.out.read_text(encoding="utf-8") == text
        print(json.dumps({"file": str(args.out.name), "lines": len(rows), "identical": same}))
        return 0 if same else 1
    args.out.write_text(text, encoding="utf-8")
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["label"]] = counts.get(r["label"], 0) + 1
    print(json.dumps({"file": str(args.out.name), "lines": len(rows), "labels": counts}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
