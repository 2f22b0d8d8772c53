"""The person's side of the loop: their switches, the policies' windows, the questions and the
answers.

`Dialogue` turns the person's switch flips (they drive their device's relay at once, or when
the relay's rate limit allows) and the passing time into the policies' resolutions, decides an
utterance (`DevicePolicies.on_utterance`), drives the relays and asks about the devices in
doubt (the LED, the buzzer, and with talk-back the spoken question and confirmation), puts the
ask signals out as windows close, drops the device's own voice and takes a spoken yes / no to
an open question. What it resolves is returned to the controller, which has it stored and
learned (`Recorder`). docs/loop.md ("One interaction", "Talk-back"), docs/policy.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from edge_plm.config.settings import Settings
from edge_plm.decide.content import too_little_content
from edge_plm.decide.devices import DevicePolicies, DeviceResolution, Steps
from edge_plm.decide.policy import Action, Decision
from edge_plm.device import Devices
from edge_plm.loop import outcomes as device_outcomes
from edge_plm.learning.household import Household
from edge_plm.loop.records import Outcome, Stopwatch
from edge_plm.loop.recorder import Recorder
from edge_plm.switch.model import SwitchPrediction
from edge_plm.voice.audio import Utterance

if TYPE_CHECKING:
    from edge_plm.voice.talkback import Talkback

log = logging.getLogger("edge_plm.loop.controller")

Clock = Callable[[], float]


class Dialogue:
    """Flips, windows, asks and answers for the devices `names` (their `policies`, relays and
    switches in `devices`). ``talkback``: None when off. ``predict(text)``: the model's first
    device's action for a short utterance that may be an answer. ``recorder``: where a spoken
    yes's action is stored. ``on_hand(name)``: told each device whose switch the person used;
    ``holds_answer(key)``: True for an ask whose spoken yes sets a timer instead of switching
    now (both from `loop.timers.TimedCommands`; by default nothing is timed)."""

    def __init__(self, settings: Settings, devices: Devices, policies: DevicePolicies,
                 names: Household, clock: Clock, talkback: Talkback | None,
                 predict: Callable[[str], SwitchPrediction], recorder: Recorder, *,
                 on_hand: Callable[[str], None] = lambda name: None,
                 holds_answer: Callable[[int], bool] = lambda key: False) -> None:
        self.settings = settings
        self.devices = devices
        self.policies = policies
        self.names = names
        self.clock = clock
        self.talkback = talkback
        self.predict = predict
        self.recorder = recorder
        self.pending_manual: dict[str, bool] = {}  # flips the rate limit delayed, by device
        # resolved before an input's relay step, labelled after it (a spoken answer adds to it)
        self.deferred: list[DeviceResolution] = []
        self.closed = False  # `close`d: the loop stopped, the switches are no longer read
        self.on_hand = on_hand  # timed commands: the hand wins
        self.holds_answer = holds_answer

    # --- the person's switches and the time -------------------------------------------------
    def switch_and_time(self) -> list[DeviceResolution]:
        """The person's flips (they drive their device's relay) and expired windows, into the
        policies; returns what that resolved (for the controller to label)."""
        if self.closed:
            return []
        now = self.clock()
        resolved: list[DeviceResolution] = []
        for name in self.names.names:
            for flip in self.devices.switches[name].poll(until=now):
                log.info("%s%s: person wants %s", "remote command" if flip.remote else "switch flipped",
                         self.names.of(name, " of {!r}"), "ON" if flip.desired else "OFF")
                resolved += self.policies.on_flip(name, flip.desired, flip.ts, remote=flip.remote)
                self.manual(name, flip.desired, flip.ts)
                self.on_hand(name)
        resolved += self.policies.tick(now)
        for name, desired in list(self.pending_manual.items()):
            if now >= self.devices.relays[name].next_allowed(now):
                self.manual(name, desired, now)
        self.light_out(resolved)
        return resolved

    def defer(self) -> None:
        """The flips and expired windows up to now resolve before this input's relay step;
        their labels are stored and learned after it (`take_deferred`)."""
        self.deferred = self.switch_and_time()

    def take_deferred(self) -> list[DeviceResolution]:
        out, self.deferred = self.deferred, []
        return out

    def manual(self, name: str, desired: bool, now: float) -> None:
        """The person's switch drives its relay (retried later if the rate limit refuses)."""
        if self.devices.relays[name].set(desired, now):
            self.pending_manual.pop(name, None)
        else:
            self.pending_manual[name] = desired
            log.warning("switch flip%s to %s delayed by the relay rate limit",
                        self.names.of(name, " of {!r}"), "ON" if desired else "OFF")

    def light_out(self, resolutions: list[DeviceResolution]) -> None:
        """The ask light goes out when an asked interaction is resolved (that device's signal,
        and every signal once no device's window asks any more)."""
        device_outcomes.light_out(self.devices, self.policies, resolutions)

    def close(self, now: float) -> list[DeviceResolution]:
        """Every open window closes now (the loop stops); their signals go out."""
        self.closed = True
        closed = self.policies.close(now)
        self.light_out(closed)
        return closed

    # --- an utterance ---------------------------------------------------------------------
    def decide(self, iid: int, text: str, preds: dict[str, SwitchPrediction],
               unsure_hearing: bool = False, held: str | None = None) -> tuple[Steps, float]:
        """Each device's policy step for this utterance (closing the previous interaction: its
        ask light goes out now, its labels are stored and learned after the relay), and when.
        `unsure_hearing`: the ear doubted the words (asks instead of acting). `held`: why the
        switch model's prediction is not used (a dim command, a question: `loop.kinds`): the
        utterance is ignored and never learned as an on / off command, like junk."""
        now = self.clock()
        junk = held or too_little_content(text, min_letters=self.settings.policy.min_content_letters)
        predictions = device_outcomes.policy_predictions(preds, junk, unsure_hearing)
        relays = {n: self.devices.relays[n].is_on for n in self.names.names}
        steps = self.policies.on_utterance(iid, predictions, relays, now, text)
        self.light_out(steps.closed)
        return steps, now

    def act_or_ask(self, iid: int, steps: Steps, now: float, stopping: bool) -> dict[str, Action]:
        """Drive the relays and/or ask (and say so, with talk-back); returns the states driven,
        by device (refused: left out; nothing is driven once `stopping`)."""
        driven = device_outcomes.drive_and_ask(self.devices, self.policies, self.names, iid,
                                               steps, now, stopping=stopping)
        if self.talkback is not None:
            self.speak(steps, driven, now)
        return driven

    def speak(self, steps: Steps, driven: dict[str, Action], now: float) -> None:
        """The question for each device the steps ask about ("Lamp on?" where there are several
        devices); the confirmation (if configured) for each device driven."""
        for name in steps.asks:
            o = self.policies.open.get(name)
            if o is not None and o.decision is Decision.ASK:
                self.talkback.ask(o.prediction.action.value, self.names.shown(name), now)
        for name, action in driven.items():
            self.talkback.acted(action.value, self.names.shown(name), now)

    # --- talk-back: the device's own voice, spoken answers ----------------------------------
    def is_echo(self, utt: Utterance) -> bool:
        """Heard while the device spoke (or in the guard after): its own voice."""
        return self.talkback is not None and self.talkback.is_echo(utt, self.clock())

    def own_voice(self, utt: Utterance, watch: Stopwatch) -> Outcome:
        """The device's own voice: dropped, counted, no row."""
        if utt.stream is not None:
            utt.stream.cancel()
        log.info("dropped %.0f ms of audio heard while the device spoke (own voice; %d so far)",
                 utt.duration_ms, self.talkback.dropped)
        return Outcome(None, "", watch.stop(), error="own voice: dropped")

    def spoken_answer(self, text: str, utt: Utterance, watch: Stopwatch,
                      stopping: bool) -> Outcome | None:
        """A yes/no while an ask is open: the policy keeps it as the ask's label (a flip before
        the window ends wins); a yes drives the relay to the asked state, an answer naming the
        other state ("off" to "On?") to that one (not once `stopping`); what it resolves is
        labelled after this input (`take_deferred`). A short utterance that is neither an
        answer nor a likely command (`Talkback.unclear`) is a misheard answer: no row, the ask
        stays open. None: no question open, or an ordinary utterance (it supersedes the ask)."""
        if self.talkback is None:
            return None
        asking = [(n, o) for n, o in self.policies.open.items()
                  if o.decision is Decision.ASK and o.answer is None]
        if not asking:
            return None
        name, o = asking[0]  # the device the question was about (the first still in doubt)
        yes = self.talkback.answer(text, o.prediction.action.value, utt)
        if yes is None:
            if not self.talkback.unclear(text, self.predict(text).action):
                return None
            log.info("#%s: not understood as an answer; the ask stays open", o.key)
            return Outcome(o.key, text, watch.stop(), error="unclear answer")
        said = self.talkback.said(text)  # "off" to "On?": a no that asks for OFF
        wanted = o.prediction.action if yes else (Action(said) if said else None)
        now = self.clock()
        self.deferred += self.policies.on_answer(name, yes, now, wanted)
        driven = None
        if self.devices.led.asking:
            self.devices.done(name)
            if not any(o.decision is Decision.ASK and o.answer is None for o in self.policies.open.values()):
                self.devices.done()  # nothing left in doubt: every signal out, the buzzer too
        with watch.stage("actuator"):
            if wanted is not None and not stopping and not self.holds_answer(o.key):
                if self.devices.drive(wanted.value, name, now=now):
                    driven = wanted
                else:
                    log.warning("interaction %s: relay %s refused %s after a spoken answer (rate "
                                "limit)", o.key, name, wanted.value)
        if driven is not None:
            self.recorder.answered(o.key, name, driven)
        log.info("#%s spoken answer%s: %s%s", o.key, self.names.of(name, " ({})"),
                 "yes" if yes else "no", f" ({said})" if said else "")
        return Outcome(o.key, text, watch.stop(), answer=yes, answered=driven)


__all__ = ["Dialogue"]
