#!/usr/bin/env python3
"""A German household for benchmarks/owner_share.py: Home Assistant's German sentences
(`home-assistant-intents`, expanded with `hassil`; build-time tools, the `build-model` extra),
labelled by the rule of models/data/ha_intents.py (HassTurnOn / HassTurnOff of a light, plug or
socket -> ON / OFF, everything else NOOP), written to benchmarks/data/household-de.jsonl.

A household the English starting model cannot read: it measures whether the owner's labels take
over when they must. It reuses models/data/ha_intents.py's expansion with German curated lists:
that module reads its list constants when it runs, and this script rebinds them before calling
it (a build-time script; the device never imports either). Umlauts are folded (ä -> ae, ...)
as an ASCII transcript would spell them. 600 lines for the owner's stream, 600 held out, in a
seeded shuffled order (deterministic: same packages, same file).

    python benchmarks/data/ha_intents_de.py
"""

from __future__ import annotations

import json
import random
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "models" / "data"))
import ha_intents as ha  # noqa: E402

OUT = HERE / "household-de.jsonl"
LINES = 1200  # the owner's 600, then 600 held out


AREAS = ["küche", "wohnzimmer", "schlafzimmer", "bad", "badezimmer", "flur", "büro", "esszimmer",
         "kinderzimmer", "keller", "garage", "garten", "gästezimmer", "dachboden", "balkon", "terrasse"]
FLOORS = ["erdgeschoss", "obergeschoss", "dachgeschoss", "keller"]
LIGHT_BARE = ["schreibtisch", "decken", "steh", "lese", "nacht", "wand", "tisch", "küchen", "flur"]
LIGHT_NAMES = ["licht", "lampe", "stehlampe", "deckenlampe", "leselampe", "nachttischlampe",
               "schreibtischlampe", "küchenlicht", "flurlicht", "lichterkette", "deckenlicht"]
SWITCH_NAMES = ["steckdose", "zwischenstecker", "funksteckdose", "steckerleiste", "lichtschalter", "schalter"]
OTHER_NAMES = {
    "fan": ["ventilator", "deckenventilator", "luftreiniger"],
    "media_player": ["fernseher", "radio", "lautsprecher", "musikanlage"],
    "input_boolean": ["gästemodus", "urlaubsmodus", "nachtmodus"],
    "climate": ["heizung", "thermostat", "klimaanlage", "heizkörper"],
    "cover": ["garagentor", "rollladen", "jalousie", "vorhang", "markise"],
    "valve": ["wasserventil", "bewässerung"],
    "lock": ["haustür", "hintertür", "türschloss"],
    "scene": ["filmabend", "guten morgen", "entspannen"],
    "script": ["morgenroutine", "abendroutine"],
    "button": ["türklingel"],
    "input_button": ["türklingel"],
    "todo": ["einkaufsliste", "aufgaben"],
    "weather": ["berlin", "hamburg", "münchen"],
    "lawn_mower": ["rasenmäher", "mähroboter"],
    "vacuum": ["staubsauger", "saugroboter"],
    "person": ["mama", "papa", "anna"],
    "binary_sensor": ["bewegungsmelder", "fenstersensor"],
    "sensor": ["temperatursensor", "luftfeuchtigkeit"],
    "appliance": ["kaffeemaschine", "wasserkocher", "spülmaschine", "waschmaschine"],
}
WILDCARDS = {
    "message": ["das essen ist fertig", "zeit fürs bett"],
    "search_query": ["die beatles", "jazz", "nachrichten", "entspannende musik"],
    "zone": ["zuhause", "arbeit", "schule"],
    "timer_name": ["pizza", "nudeln", "tee", "wäsche"],
    "timer_command": ["mach die musik an", "schließ die rollläden"],
    "shopping_list_item": ["milch", "eier", "brot", "äpfel", "kaffee"],
    "todo_list_item": ["milch", "rechnungen bezahlen", "pflanzen gießen"],
}
PREFIXES = ["bitte", "kannst du", "könntest du"]
SUFFIXES = ["bitte", "für mich"]
QUESTION_WORDS = frozenset("ist sind was welche wie wo wer wann gibt kannst".split())


def use_german_lists() -> None:
    """German areas, floors, names and wildcards in place of ha_intents' English ones."""
    ha.AREAS, ha.FLOORS, ha.LIGHT_BARE, ha.LIGHT_NAMES = AREAS, FLOORS, LIGHT_BARE, LIGHT_NAMES
    ha.SWITCH_NAMES, ha.OTHER_NAMES, ha.WILDCARDS = SWITCH_NAMES, OTHER_NAMES, WILDCARDS
    ha.LAMP_NAMES = frozenset(LIGHT_NAMES + LIGHT_BARE + SWITCH_NAMES)
    ha.PREFIXES, ha.SUFFIXES, ha.QUESTION_WORDS = PREFIXES, SUFFIXES, QUESTION_WORDS
    ha.PER_COMMAND, ha.PER_OTHER = 6, 2


def generate() -> list[dict]:
    from hassil.intents import Intents
    from hassil.numbers import get_rbnf_engine
    from home_assistant_intents import get_intents

    use_german_lists()
    intents = Intents.from_dict(get_intents("de"))
    rows, conflicts, _ = ha.expand_all(intents, get_rbnf_engine("de"), set(), hard=False)
    fold = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "ß": "ss"})
    out = [{"text": r["text"].translate(fold), "label": r["label"], "intent": r["intent"]}
           for r in rows if r["text"] not in conflicts]
    random.Random(0).shuffle(out)
    return out[:LINES]


def main() -> int:
    rows = generate()
    OUT.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(f"{OUT}: {len(rows)} lines, {dict(Counter(r['label'] for r in rows))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
