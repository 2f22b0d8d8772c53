#!/usr/bin/env python3
"""Several named devices, the loop side (issue 20): three-device households (a lamp, a fan and
a heater, each relay with its own switch) replayed from the shipped starting model, and a
household that "moves house" (the owner starts calling the fan "the breeze").

Every session goes through `edge-plm replay`'s own path (`build_replay` + `run_session`: one
policy per device, gpiozero's MockFactory with three relays and three switches, the SQLite
buffer with its per-device rows, online learning) with `Settings()` defaults plus the
household's ``[[devices]]``. The simulated person puts every device where they want it with that
device's own switch: the devices a line names get its wish, the others are to stay as they are.

Sessions (built here, deterministic, from the seed):
  household-<i>  240 lines. Commands (45 %): the ON/OFF lines of the crowd data
                 (../shared/data/switch-dev-{train,test}.jsonl) and of Home Assistant's phrasings
                 (models/data/ha-intents.jsonl), their light/plug word replaced by a name of the
                 target device: its config name, an alias, or a name the starting model never
                 saw (in the config as an alias); one command in 12 is "everything off"-like
                 (all three devices). A person repeats themselves: each household draws its
                 lines from a pool of 36 commands and 50 chatter lines (crowd NOOP lines).
  moves-house    household-0's devices; 20 lines as usual, then 60 in which every fan command
                 calls it "the breeze" (a name in neither the config nor the model).
  config-names   20 households of a lamp and one device named only in the config (CONFIG_NAMES),
                 each from the shipped model: "turn on the NAME", heard once.

Metrics (issue 20 "Done when"): actions on the wrong device (a device the line did not name was
acted on with ON/OFF) as a share of lines with an action, wrong actions overall (some device
acted on with what the person did not want of it) as a share of lines with an action, commands
acted right (acted, no device acted on wrongly, no flip needed afterwards), asks in
the first vs the second half; moves-house: the corrections (breeze commands after which the
person had to flip a switch) until every later breeze command is acted right.

    python3 benchmarks/bench_devices.py [--households 3] [--lines 240] [--tag TAG]

Prints a markdown table; writes benchmarks/results/devices[-<tag>].json.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import header, markdown_table, write_result  # noqa: E402

from edge_plm.decide.policy import Action  # noqa: E402
from edge_plm.loop.replay import SessionLine, build_replay, run_session  # noqa: E402
from edge_plm.config.settings import DeviceConfig, Settings  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
HA = REPO / "models" / "data" / "ha-intents.jsonl"
NAMES = ("lamp", "fan", "heater")

#: Per household: each device's config (name, aliases) and the names the person uses for it
#: (the config's, plus ones the starting model never saw, which are also configured as aliases).
HOUSEHOLDS = [
    {"lamp": (["light", "big light"], ["lamp", "light", "lights", "big light"]),
     "fan": (["ceiling fan", "whirlybird"], ["fan", "ceiling fan", "whirlybird"]),
     "heater": (["radiator", "toastmaster"], ["heater", "radiator", "toastmaster"])},
    {"lamp": (["reading light", "glowbug"], ["lamp", "reading light", "glowbug"]),
     "fan": (["air mover", "zephyr"], ["fan", "air mover", "zephyr"]),
     "heater": (["warmer", "oil heater"], ["heater", "warmer", "oil heater"])},
    {"lamp": (["standard lamp", "lumo"], ["lamp", "standard lamp", "lumo", "the light"]),
     "fan": (["box fan", "breezer"], ["fan", "box fan", "breezer"]),
     "heater": (["space heater", "hotbox"], ["heater", "space heater", "hotbox"])},
]
#: the households' aliases that are not English words (never in the starting model's data)
INVENTED = ["whirlybird", "toastmaster", "glowbug", "zephyr", "lumo", "breezer", "hotbox"]
ALL_OFF = ["everything off", "turn everything off", "switch off everything", "turn off all of it",
           "all off please"]
ALL_ON = ["everything on", "turn everything on", "switch on everything"]
# the light / plug words of the crowd and Home Assistant lines, longest first
DEVICE_WORDS = sorted(["wemo plug socket", "wemo plug", "wemo socket", "smart socket", "smart plug",
                       "wall socket", "power socket", "power strip", "light switch", "wall switch",
                       "lamp plug", "kitchen plug", "desk lamp", "floor lamp", "ceiling light",
                       "reading lamp", "bedside lamp", "table lamp", "corner lamp", "night light",
                       "string lights", "fairy lights", "christmas lights", "wemo", "plug",
                       "socket", "outlet", "lights", "light", "lamps", "lamp"], key=len, reverse=True)
WORD_RE = re.compile(r"\b(" + "|".join(re.escape(w) for w in DEVICE_WORDS) + r")\b")


def read(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def base_lines(data: Path) -> tuple[list[dict], list[str]]:
    """(ON/OFF lines that name a light or plug, chatter texts)."""
    crowd = read(data / "switch-dev-train.jsonl") + read(data / "switch-dev-test.jsonl")
    ha = [r for r in read(HA) if r["label"] in ("ON", "OFF")]
    commands = [r for r in crowd + ha if r["label"] in ("ON", "OFF") and WORD_RE.search(r["text"])]
    chatter = [r["text"] for r in crowd if r["label"] == "NOOP" and not WORD_RE.search(r["text"])]
    return commands, chatter


def devices_of(house: dict) -> list[DeviceConfig]:
    pins = {"lamp": (17, 27), "fan": (23, 24), "heater": (5, 6)}
    return [DeviceConfig(n, list(house[n][0]), relay_pin=pins[n][0], switch_pin=pins[n][1]) for n in NAMES]


def command_pool(house: dict, commands: list[dict], rng: random.Random, size: int) -> list[dict]:
    """`size` commands of this household: a base line with its device word replaced by one of
    the target device's names; one in 12 addresses every device."""
    pool = []
    for _ in range(size):
        if rng.random() < 1 / 12:
            label = rng.choice(["OFF", "OFF", "ON"])
            text = rng.choice(ALL_OFF if label == "OFF" else ALL_ON)
            pool.append({"text": text, "label": label, "device": list(NAMES)})
            continue
        base = rng.choice(commands)
        target = rng.choice(NAMES)
        name = rng.choice(house[target][1])
        text = WORD_RE.sub(name, base["text"], count=1)
        pool.append({"text": text, "label": base["label"], "device": [target]})
    return pool


def household_session(house: dict, commands: list[dict], chatter: list[str], seed: int,
                      n_lines: int) -> list[SessionLine]:
    rng = random.Random(seed)
    cmds = command_pool(house, commands, rng, 36)
    talk = rng.sample(chatter, 50)
    lines = []
    for _ in range(n_lines):
        if rng.random() < 0.45:
            c = rng.choice(cmds)
            lines.append(SessionLine(Action(c["label"]), c["text"], devices=tuple(c["device"])))
        else:
            lines.append(SessionLine(Action.NOOP, rng.choice(talk)))
    return lines


BREEZE = ["turn on the breeze", "turn off the breeze", "breeze on", "breeze off please",
          "switch the breeze on", "switch off the breeze", "can you turn the breeze on",
          "put the breeze off"]


def moves_house_session(house: dict, commands: list[dict], chatter: list[str], seed: int) -> list[SessionLine]:
    """20 ordinary lines, then 60 in which every fan command calls it "the breeze"."""
    rng = random.Random(seed)
    lines = household_session(house, commands, chatter, seed, 20)
    talk = rng.sample(chatter, 30)
    for i in range(60):
        if i % 3 == 0:
            text = BREEZE[(i // 3) % len(BREEZE)]
            lines.append(SessionLine(Action.ON if " on" in f" {text} " else Action.OFF, text, devices=("fan",)))
        else:
            lines.append(SessionLine(Action.NOOP, rng.choice(talk)))
    return lines


def command_right(x) -> bool:
    """Acted, nothing acted on wrongly, and every device where the person wanted it without a
    flip of theirs."""
    return x.acted and not x.acted_wrong and x.flips == 0


def metrics(result) -> dict:
    lines = result.lines
    s = result.summary()
    acted = [x for x in lines if x.acted]
    commands = [x for x in lines if x.wish is not None and x.wish.state is not None]
    half = len(lines) // 2
    return {
        "lines": len(lines), "commands": len(commands), "acted": len(acted),
        "asked": s["asked"], "labels": s["labels"],
        "acted_wrong_device": s["acted_wrong_device"], "acted_wrong": s["acted_wrong"],
        "wrong_device_share": s["acted_wrong_device"] / len(acted) if acted else 0.0,
        "wrong_share": s["acted_wrong"] / len(acted) if acted else 0.0,
        "commands_acted_right": sum(command_right(x) for x in commands),
        "acted_right_share": sum(command_right(x) for x in commands) / len(commands) if commands else None,
        "asked_halves": [sum(x.asked for x in lines[:half]), sum(x.asked for x in lines[half:])],
        "missed": s["missed"], "devices": s["devices"],
        # the loop's model stage (Learner.predict_devices: the prediction shared out to the
        # three devices), wall time on the benchmark machine
        "latency_model_ms": s["latency_ms"]["model"],
    }


def corrections_until_followed(result, start: int) -> dict:
    """Breeze commands (from line `start` on): how many needed a correction before every later
    one was acted right, and whether that point was reached."""
    breeze = [x for x in result.lines[start:] if x.wish is not None and x.wants and x.wants["fan"].state is not None]
    right = [x.acted and not x.acted_wrong and x.outcome.devices["fan"].decision.value == "act" for x in breeze]
    followed_from = next((i for i in range(len(right)) if all(right[i:])), None)
    upto = breeze if followed_from is None else breeze[:followed_from]
    return {"breeze_commands": len(breeze), "followed": followed_from is not None,
            "corrections": sum(x.flips > 0 for x in upto),
            "acted_right": sum(right), "first_followed_at": followed_from}


#: Device names for "named only in the config": none occurs in the starting model's training or
#: validation text (models/data/switch-en-{train,val}.jsonl; `seen_in_training` checks), several
#: are not English words at all.
CONFIG_NAMES = ["aquarium", "jukebox", "dehydrator", "popcorn machine", "salt lamp", "lava lamp",
                "bubble machine", "foot spa", "heated blanket", "towel rail", "grow light", "zorbel",
                "kwindle", "plinth light", "drinks fridge", "water feature", "fog machine",
                "model railway", "ice maker", "bread maker"]


def seen_in_training(names: list[str]) -> list[str]:
    """The `names` (and the households' invented aliases) that occur in the starting model's
    training or validation text (should be none)."""
    texts = [r["text"] for f in ("switch-en-train.jsonl", "switch-en-val.jsonl")
             for r in read(REPO / "models" / "data" / f)]
    return [n for n in names if any(re.search(rf"\b{re.escape(n)}\b", t) for t in texts)]


def config_names(names: list[str]) -> dict:
    """For each name: a fresh household of a lamp and a device called only that (in the config,
    never in a label), from the shipped model; "turn on the NAME" heard once. Right: that device,
    and only it, switched on."""
    out = {}
    for name in names:
        devs = [DeviceConfig("lamp", ["light"], relay_pin=17, switch_pin=27),
                DeviceConfig(name, [], relay_pin=23, switch_pin=24)]
        res = run_devices([SessionLine(Action.ON, f"turn on the {name}", devices=(name,))], devs)
        (x,) = res.lines
        out[name] = {"right": command_right(x), "did": {n: (r.decision.value, r.prediction, round(r.confidence, 3))
                                                        for n, r in (x.outcome.devices or {}).items()}}
    return out


def run(lines: list[SessionLine], house: dict) -> object:
    return run_devices(lines, devices_of(house))


def run_devices(lines: list[SessionLine], devices: list[DeviceConfig]) -> object:
    settings = Settings(devices=devices)
    r = build_replay(settings, None, seed=0)
    try:
        return run_session(lines, r.controller, r.clock)
    finally:
        r.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--households", type=int, default=3)
    ap.add_argument("--lines", type=int, default=240)
    ap.add_argument("--tag", default="")
    args = ap.parse_args(argv)
    commands, chatter = base_lines(Path(args.data))
    results = {}
    for i in range(args.households):
        house = HOUSEHOLDS[i % len(HOUSEHOLDS)]
        res = run(household_session(house, commands, chatter, 1000 + i, args.lines), house)
        results[f"household-{i}"] = metrics(res)
        m = results[f"household-{i}"]
        print(f"household-{i}: wrong device {m['acted_wrong_device']}/{m['acted']}, wrong {m['acted_wrong']}, "
              f"commands right {m['commands_acted_right']}/{m['commands']}, asks {m['asked_halves']}",
              file=sys.stderr, flush=True)
    moved = run(moves_house_session(HOUSEHOLDS[0], commands, chatter, 2000), HOUSEHOLDS[0])
    results["moves-house"] = {**metrics(moved), "rename": corrections_until_followed(moved, 20)}
    print(f"moves-house: {results['moves-house']['rename']}", file=sys.stderr, flush=True)
    named = config_names(CONFIG_NAMES)
    results["config-names"] = {"names": len(named), "right": sum(v["right"] for v in named.values()),
                               "seen_in_training": seen_in_training(CONFIG_NAMES + INVENTED + ["breeze"]),
                               "per_name": named}
    print(f"config names: {results['config-names']['right']}/{len(named)} right at first hearing",
          file=sys.stderr, flush=True)
    hh = [m for n, m in results.items() if n.startswith("household-")]
    tot = {k: sum(m[k] for m in hh) for k in ("lines", "commands", "acted", "asked", "acted_wrong_device",
                                               "acted_wrong", "commands_acted_right")}
    halves = [sum(m["asked_halves"][j] for m in hh) for j in (0, 1)]
    rows = [[n, m["lines"], m["commands"], m["acted"], m["asked"],
             f"{m['acted_wrong_device']} ({100 * m['wrong_device_share']:.1f} %)",
             f"{m['acted_wrong']} ({100 * m['wrong_share']:.1f} %)",
             f"{m['commands_acted_right']} ({100 * (m['acted_right_share'] or 0):.0f} %)",
             f"{m['asked_halves'][0]} -> {m['asked_halves'][1]}"] for n, m in results.items()
            if n != "config-names"]
    acted = max(tot["acted"], 1)
    rows.append([f"all {len(hh)} households", tot["lines"], tot["commands"], tot["acted"], tot["asked"],
                 f"{tot['acted_wrong_device']} ({100 * tot['acted_wrong_device'] / acted:.1f} %)",
                 f"{tot['acted_wrong']} ({100 * tot['acted_wrong'] / acted:.1f} %)",
                 f"{tot['commands_acted_right']} ({100 * tot['commands_acted_right'] / max(tot['commands'], 1):.0f} %)",
                 f"{halves[0]} -> {halves[1]}"])
    print(markdown_table(["session", "lines", "commands", "acted", "asked", "acted on the wrong device",
                          "acted wrong", "commands acted right", "asks 1st -> 2nd half"], rows))
    rn = results["moves-house"]["rename"]
    print(f"\nmoves house (fan -> \"the breeze\"): {rn['breeze_commands']} breeze commands, "
          + (f"followed after {rn['corrections']} correction(s)" if rn["followed"]
             else f"not followed by the end ({rn['corrections']} corrections, {rn['acted_right']} acted right)"))
    cn = results["config-names"]
    print(f"devices named only in the config, \"turn on the NAME\" heard once: {cn['right']} of {cn['names']} "
          "switched right")
    name = "devices" + (f"-{args.tag}" if args.tag else "")
    write_result(name, {**header(), "households": args.households, "lines": args.lines,
                        "totals": {**tot, "asked_halves": halves}, "sessions": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
