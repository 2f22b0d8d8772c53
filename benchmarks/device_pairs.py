#!/usr/bin/env python3
"""Commands that name two or three devices at once (issue 20), at model level, from the shipped
starting model: "turn on the lamp and the fan", "switch the fan and the heater off", ...

Devices: a lamp (alias "light"), a fan, a heater and a kettle. Every template below is filled
with every ordered pair (and, for the list templates, every triple) of the devices' names and
decided on first hearing by ``SwitchModel.predict_devices``. A line is *acted right* when every
named device's action is the wanted one with confidence >= 0.80 (the default act threshold) and
no other device is acted on; *wrong* when some device would be acted on with an action the line
does not want. Lines that mix actions ("turn on the lamp and turn off the fan") are counted
apart: acting on them is wrong for one of the devices unless both actions are right.

    python3 benchmarks/device_pairs.py [--compare-slot-only]

``--compare-slot-only`` also decides every line the way the model did before the span rule
(``model_devices.SeveralDevices.command_of``): the command read without the names' words only. Writes
benchmarks/results/device-pairs.json.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from benchinfo import header, markdown_table, write_result  # noqa: E402

from edge_plm.switch import model_devices  # noqa: E402
from edge_plm.switch.addressing import DeviceName  # noqa: E402
from edge_plm.switch.model import SwitchModel  # noqa: E402

DEVICES = [DeviceName("lamp", ("light",)), DeviceName("fan"), DeviceName("heater"), DeviceName("kettle")]
ACT = 0.80
PAIRS = ["turn on the {a} and the {b}", "turn off the {a} and the {b}", "switch the {a} and the {b} on",
         "switch the {a} and the {b} off", "{a} and {b} on please", "{a} and {b} off please",
         "could you turn on the {a} and {b}", "please switch off the {a} and the {b}",
         "turn the {a} and {b} off", "put the {a} and the {b} on"]
TRIPLES = ["turn on the {a}, the {b} and the {c}", "switch off the {a}, {b} and {c}"]
MIXED = ["turn on the {a} and turn off the {b}", "switch the {a} on and the {b} off"]


def wanted(template: str) -> str:
    return "OFF" if " off" in f" {template}" else "ON"


def lines() -> list[tuple[str, dict[str, str], str]]:
    """(text, wanted action per named device, kind)."""
    names = [d.name for d in DEVICES]
    out = []
    for t in PAIRS:
        for a, b in itertools.permutations(names, 2):
            out.append((t.format(a=a, b=b), {a: wanted(t), b: wanted(t)}, "pair"))
    for t in TRIPLES:
        for a, b, c in itertools.permutations(names, 3):
            out.append((t.format(a=a, b=b, c=c), dict.fromkeys((a, b, c), wanted(t)), "triple"))
    for t in MIXED:
        for a, b in itertools.permutations(names, 2):
            out.append((t.format(a=a, b=b), {a: "ON", b: "OFF"}, "mixed"))
    return out


def score(model: SwitchModel) -> dict:
    out: dict[str, dict[str, int]] = {}
    for text, want, kind in lines():
        preds = model.predict_devices(text, DEVICES)
        acted = {n: p.action for n, p in preds.items() if p.action != "NOOP" and p.confidence >= ACT}
        row = out.setdefault(kind, {"lines": 0, "acted_right": 0, "wrong": 0, "asked_or_ignored": 0})
        row["lines"] += 1
        if acted == want:
            row["acted_right"] += 1
        elif any(want.get(n, "NOOP") != a for n, a in acted.items()):
            row["wrong"] += 1
        else:
            row["asked_or_ignored"] += 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare-slot-only", action="store_true")
    args = ap.parse_args()
    model = SwitchModel.load(REPO / "models" / "switch-en.npz")
    results = {"span rule (shipped)": score(model)}
    if args.compare_slot_only:
        with mock.patch.object(model_devices.SeveralDevices, "command_of", lambda self, a: a.command):
            results["names' words only (before)"] = score(model)
    rows = [[design, kind, r["lines"], r["acted_right"], r["wrong"], r["asked_or_ignored"]]
            for design, by_kind in results.items() for kind, r in by_kind.items()]
    print(markdown_table(["reading", "lines", "n", "acted right", "wrong", "asked / ignored"], rows))
    write_result("device-pairs", {**header(), "act_threshold": ACT, "results": results})


if __name__ == "__main__":
    main()
