"""Dimmers and questions in the loop: "dim the lamp", "brighter", "set the lamp to thirty
percent", "is the heater on?" (docs/loop.md, "Dimmers and questions").

`KindActions` is a collaborator of the `Controller`, beside the timers:

- `read(text)`: the kind head's call for an utterance (`edge_plm.decide.kinds.call_for`), or
  None: the switch model decides as it would without the head. A household with relays only
  and questions off never runs the head.
- `carry_out(iid, text, call, now)`: a dimmer steps or goes to the level the words name; an
  unsure call blinks that dimmer's LED (and with talk-back asks "Dim the lamp?"); a question is
  answered from the devices' states, aloud with talk-back, else on the LED. Never a relay.
- `heard(iid, text, now)`: every utterance of a household with a dimmer is remembered for
  ``kinds.teach_window_s``: a turn of a dimmer's own knob (or a brightness from the home hub)
  in that time teaches the head its kind (`edge_plm.decide.kinds.label_for`), stored in the
  ``kinds`` table and learned at once.
- `answer(text, now)`: with talk-back, a spoken yes / no to an open dim question does it (or
  not) and teaches its kind.
- `pump()`: the dimmers' level changes become labels; an ask's signal goes out when its window
  ends; after a `forget` the head is rebuilt from the shipped head and the labels left.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from edge_plm.actions import LEVEL_KINDS, PLAIN
from edge_plm.config.settings import Settings
from edge_plm.decide.kinds import (ACT, ASK, OTHER_THINGS, KindCall, KindRules, about_devices, answer_text,
                                   call_for, label_for)
from edge_plm.decide.level import read_level
from edge_plm.device import Devices
from edge_plm.learning.household import Household, several
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.store import ReplayStore
from edge_plm.voice.answers import classify_answer
from edge_plm.switch.tokenizer import normalize

if TYPE_CHECKING:
    from edge_plm.switch.kinds import KindHead
    from edge_plm.switch.model import SwitchPrediction
    from edge_plm.voice.talkback import Talkback

log = logging.getLogger("edge_plm.loop.kinds")

Clock = Callable[[], float]
Address = Callable[[str], tuple[str, ...]]

#: What a carried-out call did, by kind (the ``kinds.done`` column).
DONE = {"DIM": "dimmed", "BRIGHTEN": "brightened", "LEVEL": "levelled", "QUERY": "answered"}
ASK_WORDS = {"DIM": "Dim", "BRIGHTEN": "Brighter", "LEVEL": "Set the level"}


@dataclass(frozen=True)
class Asked:
    """The open dim / brighten / level question: its row, the words, the call, and until when
    a spoken yes / no answers it."""

    iid: int
    text: str
    call: KindCall
    until: float


@dataclass(frozen=True)
class Heard:
    """An utterance a turn of a dimmer may teach: its row, the words the head reads, when, and
    each dimmer's level just before it."""

    iid: int
    text: str
    at: float
    before: dict[str, float]


class KindActions:
    """The kind head's calls in the loop over `devices` (`household`); ``load_head`` gives the
    shipped head (None: no head, the loop is as before)."""

    def __init__(self, settings: Settings, store: ReplayStore, devices: Devices, household: Household,
                 clock: Clock, wall: Clock = time.time, talkback: Talkback | None = None,
                 load_head: Callable[[], KindHead] | None = None,
                 address: Address | None = None) -> None:
        self.cfg = settings.kinds
        self.rules = KindRules(self.cfg.act_threshold, self.cfg.ask_threshold, self.cfg.dimmers,
                               self.cfg.questions)
        self.act_threshold = settings.policy.act_threshold  # the switch model would act from here
        self.store, self.devices, self.household = store, devices, household
        self.clock, self.wall, self.talkback = clock, wall, talkback
        self.load_head = load_head
        self.address = address or (lambda text: household.names)
        self.dimmers = tuple(n for n in household.names if devices.is_dimmer(n))
        self.name_words = {w for d in household.devices for p in (d.name, *d.aliases)
                           for w in normalize(p).split()}
        self.head: KindHead | None = None
        self.recent: deque[Heard] = deque(maxlen=8)
        self.asking: dict[str, float] = {}  # dimmer -> when its ask's signal goes out
        self.asked: Asked | None = None  # the open question a spoken yes / no answers (talk-back)
        self.labels = 0  # kind labels taught in this run
        self._forget_seq = store.forget_seq()
        if self.reads and load_head is not None:
            try:
                self.head = self._rebuilt()
            except (CheckpointError, OSError) as exc:  # the loop runs on as before the head
                log.error("the kind head could not be loaded (%s): no dimming or answers by voice", exc)

    @property
    def reads(self) -> bool:
        """The household has a use for the head: a dimmer to move, or questions to answer."""
        return (self.cfg.dimmers and bool(self.dimmers)) or self.cfg.questions

    def _rebuilt(self) -> KindHead:
        """The shipped head, taught every kind label the database holds (oldest first)."""
        head = self.load_head()
        for _, text, label in self.store.kind_labels():
            head.learn(text, label)
        return head

    # --- an utterance ---------------------------------------------------------------------
    def read(self, text: str, preds: Mapping[str, SwitchPrediction]) -> KindCall | None:
        """The call for `text` (the command without a time phrase; `preds`: the switch model's
        per device), or None."""
        if self.head is None:
            return None
        p = self.head.predict(text)
        if p.kind == PLAIN:
            return None
        level = read_level(text) if p.kind in LEVEL_KINDS else None
        addressed = self._addressed(text, p.kind)
        words = normalize(text).split()
        about = p.kind != "QUERY" or about_devices(words, self.name_words)
        commanded = any(q.action != "NOOP" and q.confidence >= self.act_threshold for q in preds.values())
        other = not (self.name_words & set(words)) and bool(OTHER_THINGS & set(words))
        return call_for(p.kind, p.confidence, self.rules, addressed, self.dimmers, level, about, commanded,
                        other)

    def _addressed(self, text: str, kind: str) -> tuple[str, ...]:
        """The devices the words address; naming none: every device for a question, the first
        dimmer for a level command."""
        if not self.household.several:
            return self.household.names
        named = tuple(self.address(text))
        if named:
            return named
        return self.household.names if kind == "QUERY" else self.dimmers[:1]

    def carry_out(self, iid: int, text: str, call: KindCall | None, now: float) -> bool:
        """Do what `call` says; True when a dimmer moved or a question was answered."""
        if call is None:
            return False
        if call.kind == "QUERY":
            self._answer(iid, call, now)
            return True
        if call.what == ACT:
            return self._move(iid, call, now)
        if call.what == ASK:
            self.asked = Asked(iid, text, call, now + self.cfg.teach_window_s)
            for name in call.devices:
                self.devices.ask(name)
                self.asking[name] = now + self.cfg.teach_window_s
                if self.talkback is not None:
                    shown = self.household.shown(name)
                    self.talkback.tell(f"{ASK_WORDS[call.kind]}{' the ' + shown if shown else ''}?", now)
        self._record(iid, call, "asked" if call.what == ASK else "held")
        return False

    def _move(self, iid: int, call: KindCall, now: float) -> bool:
        before = {n: self.devices.dimmers[n].level for n in call.devices}
        for name in call.devices:
            if call.kind == "LEVEL":
                self.devices.set_level(name, float(call.level), now)
            else:
                self.devices.step(name, -1 if call.kind == "DIM" else 1, now)
        first = call.devices[0]
        after = self.devices.dimmers[first].level
        self._record(iid, call, DONE[call.kind], before[first], after)
        log.info("#%d %s%s: %.0f%% -> %.0f%%", iid, DONE[call.kind], self.household.of(first, " {!r}"),
                 before[first] * 100, after * 100)
        return any(self.devices.dimmers[n].level != before[n] for n in call.devices)

    def _answer(self, iid: int, call: KindCall, now: float) -> None:
        states: dict[str, float | bool] = {
            n: (self.devices.dimmers[n].level if n in self.dimmers else self.devices.relays[n].is_on)
            for n in self.household.names}
        text = answer_text(states, call.devices, self.household.several)
        if self.talkback is not None:
            self.talkback.tell(text, now)
        else:
            asked = None if several(call.devices) else call.devices[0]  # several: the shared LED
            self.devices.show(asked, any(bool(states[n]) for n in call.devices))
        self._record(iid, call, DONE["QUERY"])
        log.info("#%d question answered: %s", iid, text)

    def _record(self, iid: int, call: KindCall, done: str, before: float | None = None,
                after: float | None = None) -> None:
        device = call.devices[0] if call.devices else None
        self.store.record_kind(iid, device, call.kind, call.confidence, done, before, after)

    def heard(self, iid: int, text: str, now: float, before: dict[str, float] | None = None) -> None:
        """Remember an utterance a turn of a dimmer may teach (a household with dimmers);
        `before`: each dimmer's level before it (default: now)."""
        if self.head is None or not self.dimmers:
            return
        levels = before if before is not None else self.levels()
        self.recent.append(Heard(iid, text, now, dict(levels)))

    def levels(self) -> dict[str, float]:
        """Each dimmer's level now."""
        return {n: self.devices.dimmers[n].level for n in self.dimmers}

    def answer(self, text: str, now: float) -> tuple[int, bool] | None:
        """A spoken yes / no (talk-back) to the open dim / brighten / level question: yes does it
        (a level the words did not name: nothing to do) and teaches its kind, no teaches PLAIN
        (label source ``spoken``); returns (the question's row, yes). None: no such question
        open, or `text` is not a yes or a no (then it is an ordinary utterance)."""
        a = self.asked
        if self.talkback is None or a is None or now > a.until:
            return None
        yes = classify_answer(text, states=False)
        if yes is None:
            return None
        self.asked = None
        for name in a.call.devices:
            self.asking.pop(name, None)
            self.devices.done(name)
        if yes and (a.call.kind != "LEVEL" or a.call.level is not None):
            self._move(a.iid, replace(a.call, what=ACT), now)
        device = a.call.devices[0] if a.call.devices else None
        self._learn(a.iid, a.text, a.call.kind if yes else PLAIN, "spoken", device)
        return a.iid, yes

    # --- time and the knobs -----------------------------------------------------------------
    def pump(self) -> int:
        """Level changes into labels, ask signals out at their time, a forget into a rebuilt
        head; returns the labels taught. Without a head the level changes are drained and
        dropped (nothing learns from them; the queue stays bounded)."""
        changes = self.devices.level_changes()
        if self.head is None:
            return 0
        seq = self.store.forget_seq()
        if seq != self._forget_seq:
            self._forget_seq = seq
            self.head = self._rebuilt()
            self.recent.clear()  # they may be gone: no label for a forgotten utterance
        taught = 0
        for change in changes:
            taught += self._teach(change)
        now = self.clock()
        if self.asked is not None and now > self.asked.until:
            self.asked = None
        for name, until in list(self.asking.items()):
            if now >= until:
                del self.asking[name]
                self.devices.done(name)
        return taught

    def _teach(self, change) -> int:
        """A person's (or the hub's) turn of dimmer ``change.device``: the label of the latest
        utterance heard within the teaching window before it."""
        if change.device in self.asking:
            del self.asking[change.device]
            self.devices.done(change.device)
        h = next((h for h in reversed(self.recent)
                  if h.at <= change.at <= h.at + self.cfg.teach_window_s and change.device in h.before), None)
        if h is None:
            return 0
        label = label_for(h.before[change.device], change.after, read_level(h.text) is not None)
        return self._learn(h.iid, h.text, label, change.source, change.device)

    def _learn(self, iid: int, text: str, label: str, source: str, device: str | None) -> int:
        """Store and learn the kind label of interaction `iid` (a relabel takes the old one out
        of the head); returns 1 when it is new."""
        old = self.store.label_kind(iid, label, source, self.wall(), device)
        if old == label:
            return 0
        if old is not None:
            self.head.forget(text, old)
        self.head.learn(text, label)
        self.labels += 1
        log.info("#%d taught %s (%s%s)", iid, label, source, f", {device!r}" if device else "")
        return 1


__all__ = ["Asked", "Heard", "KindActions"]
