"""Phrasing templates for switching things on and off, written for edge-plm's starting model
(models/README.md). Deterministic: `python models/data/templates.py > models/data/templates.jsonl`.

Each line is {"text", "label", "source": "template"}. ON / OFF: the ways people ask a voice switch
to switch a light, lamp, plug or socket on or off (imperatives, polite forms, indirect requests):
the device's relay is on a lamp. NOOP: what a household says near the device that must not switch
it — switching other devices (fans, heaters: not the lamp's relay), brightness and colour changes,
questions about the state, and everyday requests to an assistant.
The lists below are the whole content; nothing is sampled at random.
"""

from __future__ import annotations

import json
import sys

DEVICES = ["light", "lights", "lamp", "the light", "the lights", "the lamp", "the kitchen light",
           "the bedroom lamp", "the living room lights", "the plug", "the socket",
           "the smart plug", "the desk lamp", "the hallway light", "my lights", "my lamp", "my plug"]
# other devices: switching them is not a command for the lamp's relay (NOOP)
OTHER_DEVICES = ["the fan", "the heater", "the ceiling fan", "the space heater"]
OTHER_DEVICE = ["turn on {o}", "turn off {o}", "switch on {o}", "switch off {o}", "turn {o} on", "turn {o} off"]

ON = ["turn on {d}", "switch on {d}", "turn {d} on", "switch {d} on", "{d} on", "power on {d}",
      "put {d} on", "enable {d}", "activate {d}", "please turn on {d}", "can you turn on {d}",
      "could you switch on {d}", "turn on {d} please", "i'd like {d} on", "i want {d} on",
      "i want to turn on {d}", "start {d}", "hey turn on {d}", "light up {d}", "please turn {d} on",
      "turn on {d} for me", "it's too dark in here turn on {d}", "lights on",
      "light on please", "it's too dark in here", "i can't see anything turn on the light"]
OFF = ["turn off {d}", "switch off {d}", "turn {d} off", "switch {d} off", "{d} off", "power off {d}",
       "shut off {d}", "disable {d}", "deactivate {d}", "please turn off {d}", "can you turn off {d}",
       "could you switch off {d}", "turn off {d} please", "i want {d} off", "i want to turn off {d}",
       "kill {d}", "stop {d}", "hey turn off {d}", "please turn {d} off", "turn off {d} for me",
       "it's too bright in here turn off {d}", "lights off",
       "light off please", "i'm going to bed turn off the light", "shut {d} down"]
NOOP = ["dim {d}", "make {d} brighter", "change {d} to blue", "set {d} to fifty percent",
        "is {d} on", "did i leave {d} on", "what colour is {d}", "brighten {d} a bit",
        "what's the weather like today", "set an alarm for seven", "what time is it",
        "play some music", "tell me a joke", "add milk to my shopping list", "read my emails",
        "what's on my calendar tomorrow", "how far is the station", "order a taxi",
        "who won the game last night", "make me a coffee", "start the vacuum cleaner",
        "remind me to call mum", "what's the news", "how do you spell lamp", "thank you",
        "good morning", "never mind", "what's the capital of france", "set a timer for ten minutes",
        "volume up", "louder please", "next song"]


def lines() -> list[dict]:
    out = []
    for label, patterns in (("ON", ON), ("OFF", OFF), ("NOOP", NOOP)):
        for p in patterns:
            # a device-bearing pattern with every device (the full cross product): the
            # commonest commands ("turn on the light") are then in the data word for word
            texts = [p.format(d=d) for d in DEVICES] if "{d}" in p else [p]
            out.extend({"text": t, "label": label, "source": "template"} for t in texts)
    out.extend({"text": p.format(o=o), "label": "NOOP", "source": "template"} for p in OTHER_DEVICE for o in OTHER_DEVICES)
    return out


if __name__ == "__main__":
    for row in lines():
        sys.stdout.write(json.dumps(row) + "\n")
