"""What to do with the kind head's reading of an utterance (pure: no devices, no store).

The kind head (`edge_plm.switch.kinds`) reads DIM, BRIGHTEN, LEVEL (a dimmer) and QUERY (a
question) beside the switch model's ON / OFF / NOOP. `call_for` turns its prediction into a
`KindCall` the loop carries out, or None (the switch model decides, exactly as without the
head):

- DIM / BRIGHTEN / LEVEL are read only in a household with a dimmer (``[kinds] dimmers``), and
  not when the words name another thing and no device ("turn up the heat a bit": `OTHER_THINGS`).
  At or above ``act_threshold`` the addressed dimmers move (a LEVEL whose level the words do
  not name is asked about); between ``ask_threshold`` and it, they are asked about (the
  dimmer's own knob answers). A call about devices none of which is a dimmer does nothing:
  a relay is never switched by a dim or brighten command. In every case the switch model's
  ON / OFF for that utterance is held (never acted on, never learned as a command).
- QUERY at or above ``act_threshold`` (``[kinds] questions``) whose words are about the
  devices (`about_devices`: a state word or a device's name) and that the switch model would
  not act on ("fan on please" is a command: the head alone reads it as "is the fan on") is
  answered from the devices' states: aloud with talk-back, else on the LED; never moves a relay. The head alone reads
  "how far is the airport" as a question (docs/benchmarks-log.md): an answer at chatter is
  what a person notices most, so a question must name what it asks about.
- Below the thresholds: None.
"""

from __future__ import annotations

from dataclasses import dataclass

from edge_plm.actions import LEVEL_KINDS
from edge_plm.learning.household import several

#: Words that ask about a device's state ("is the heater on", "what's running").
STATE_WORDS = frozenset({"on", "off", "running", "lit", "dimmed", "bright", "brightness", "level"})

#: Words that name something a dimmer is not (media, climate, covers, appliances: the other
#: devices of Home Assistant's intents, models/data/ha_intents.py ``OTHER_NAMES``, and their
#: volume, heat and screens): "turn up the heat a bit", "dim the screen", "turn down the tv" are
#: not about the lamp. A level command holding one and naming no dimmer is left to the switch
#: model (`call_for`), as before the kind head.
OTHER_THINGS = frozenset({
    "tv", "television", "radio", "stereo", "speaker", "speakers", "music", "song", "volume", "sound",
    "heat", "heating", "heater", "thermostat", "temperature", "radiator", "ac", "aircon", "air",
    "conditioner", "conditioning", "fan", "purifier", "blinds", "curtains", "shades", "shutters",
    "awning", "screen", "monitor", "phone", "oven", "stove", "kettle", "dishwasher", "dehumidifier",
    "vacuum", "mower", "sprinkler", "valve", "tap", "water", "lock", "gate"})

#: What the loop does with a call.
ACT, ASK, HOLD = "act", "ask", "hold"


@dataclass(frozen=True)
class KindCall:
    """One utterance's call: the kind, the head's confidence, what to do (`ACT`, `ASK`, or
    `HOLD`: nothing, the switch model held), the devices it is for and a level the words name."""

    kind: str
    confidence: float
    what: str
    devices: tuple[str, ...]
    level: float | None = None

    @property
    def reason(self) -> str:
        """Why the switch model's prediction is held (the policy's log line)."""
        return "a question" if self.kind == "QUERY" else f"a {self.kind.lower()} command"


@dataclass(frozen=True)
class KindRules:
    """The thresholds and switches of ``[kinds]`` a call needs."""

    act_threshold: float
    ask_threshold: float
    dimmers: bool
    questions: bool


#: Words that may follow the state word of a question about the devices ("what's on right now").
STATE_TAIL = frozenset({"right", "now", "still", "at", "the", "moment", "currently", "anymore", "yet",
                        "please", "in", "here", "there", "house", "home"})


def about_devices(words: list[str], name_words: set[str]) -> bool:
    """A question's words are about the devices: a word of a device's name or alias
    (`name_words`), or a state word (`STATE_WORDS`) that ends the question but for a few
    filler words (`STATE_TAIL`): "what's on right now", not "what are the headlines on cnn"."""
    if any(w in name_words for w in words):
        return True
    return any(w in STATE_WORDS and all(t in STATE_TAIL for t in words[i + 1:]) for i, w in enumerate(words))


def call_for(kind: str, confidence: float, rules: KindRules, addressed: tuple[str, ...],
             dimmers: tuple[str, ...], level: float | None, about: bool = True,
             commanded: bool = False, other_thing: bool = False) -> KindCall | None:
    """The call for a head prediction `kind` at `confidence`; `addressed`: the devices the words
    address (every device for a question naming none); `dimmers`: the household's dimmers, in
    order; `level`: the level the words name (`edge_plm.decide.level.read_level`); `about`: a
    question's words are about the devices (`about_devices`); `commanded`: the switch model
    would act on the words (then they are a command, not a question: "fan on please");
    `other_thing`: the words name something a dimmer is not (`OTHER_THINGS`) and no device by
    its name (`addressed` is then the default dimmer)."""
    if kind == "QUERY":
        if rules.questions and about and not commanded and confidence >= rules.act_threshold:
            return KindCall(kind, confidence, ACT, addressed)
        return None
    if kind not in LEVEL_KINDS or not (rules.dimmers and dimmers) or confidence < rules.ask_threshold:
        return None
    if other_thing:  # "turn up the heat a bit": not the lamp; the switch model decides
        return None
    targets = tuple(d for d in addressed if d in dimmers)
    if not targets:
        return KindCall(kind, confidence, HOLD, ())  # a relay is never dimmed
    sure = confidence >= rules.act_threshold and (kind != "LEVEL" or level is not None)
    return KindCall(kind, confidence, ACT if sure else ASK, targets, level)


def label_for(level_before: float, level_after: float, named_level: bool) -> str:
    """The kind a person's turn of a dimmer teaches for the utterance just before: the level
    the words name -> LEVEL; else the direction from the level before the utterance to where
    the person left it (up: BRIGHTEN, down: DIM; back where it was: PLAIN, not a dim command)."""
    if named_level:
        return "LEVEL"
    if abs(level_after - level_before) < 1e-6:
        return "PLAIN"
    return "BRIGHTEN" if level_after > level_before else "DIM"


def answer_text(states: dict[str, float | bool], asked: tuple[str, ...], name_them: bool) -> str:
    """The spoken answer to a question about `asked` (every device: "what's on?"), from
    `states` (a relay: on / off; a dimmer: its level, 0 = off). `name_them`: the household has
    several devices (one device is "it"); about several the answer names those that are on
    ("Everything is off." when none is)."""
    def phrase(name: str) -> str:
        s = states[name]
        who = f"the {name}" if name_them else "it"
        if isinstance(s, bool) or s in (0, 1):
            return f"{who} is {'on' if s else 'off'}"
        return f"{who} is at {round(float(s) * 100)} percent"

    names = [n for n in asked if n in states]
    if not names:
        return "I don't know that device."
    if several(names):  # about several devices: those that are on
        names = [n for n in names if states[n]]
        if not names:
            return "Everything is off."
    text = " and ".join(phrase(n) for n in names)
    return text[0].upper() + text[1:] + "."
