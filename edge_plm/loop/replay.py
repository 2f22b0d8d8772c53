"""Replaying a labelled session through the real loop (``edge-plm replay`` / ``demo``, tests
and benchmarks): the session file, a simulated clock and the runner (the simulated person is
`edge_plm.loop.simulation`).

`run_session` drives a `Controller` on gpiozero MockFactory pins with a `SimulatedPerson` and a
`SimClock` (nothing sleeps): the person's corrections are made by driving the mock pin of their
switch, so the real `PersonSwitch` code path labels them. `build_replay` assembles the store,
learner, devices and controller a replay runs on.
"""

from __future__ import annotations

import functools
import logging
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from edge_plm.bridge import start_bridge, stop_bridge
from edge_plm.loop.undo import undo_handler
from edge_plm.loop.timed_replay import follow_line, summary_keys, timing_of, wants_now
from edge_plm.bridge.status import status_path
from edge_plm.loop.controller import Controller, Outcome, text_utterance, wav_inputs
from edge_plm.device import Devices
from edge_plm.device.person_switch import PersonSwitch
from edge_plm.learning.evaluation import percentiles
from edge_plm.learning.household import several
from edge_plm.learning.learner import LearnerConfig
from edge_plm.loop.house import open_learner, open_loop
from edge_plm.jsonl import JsonlError, label_of, read_objects
from edge_plm.decide.policy import Action, Decision
from edge_plm.config.settings import DeviceConfig, Settings
from edge_plm.loop.stopping import StopFlag
from edge_plm.loop.simulation import SimulatedPerson
from edge_plm.store import ReplayStore, StorageError
from edge_plm.voice.asr import AsrBackend, make_pocketsphinx
from edge_plm.voice.audio import Utterance
from edge_plm.voice.endpoint import Endpointer
from edge_plm.voice.stream import stream_recording
from edge_plm.errors import EdgePlmError


log = logging.getLogger(__name__)

Clock = Callable[[], float]


# --- session replay ---------------------------------------------------------------------------
class SessionError(EdgePlmError, ValueError):
    """A session file is missing or has a bad line."""


class ReplayStorageError(StorageError):
    """A replay stopped because an interaction or a label could not be stored."""

    def __init__(self, line: int, total: int, reason: str) -> None:
        self.line, self.total = line, total
        super().__init__(f"replay stopped at line {line} of {total}: {reason} (the lines "
                         "before it were stored)")


@dataclass(frozen=True)
class SessionLine:
    """One line of a session: what was said (text or a WAV) and what the person wanted
    (None: not known, e.g. an exported interaction the device never got a label for; the
    simulated person then does nothing)."""

    wish: Action | None
    text: str | None = None
    audio: Path | None = None
    # several devices: the devices the wish is for (None: the first device; the others are
    # to stay as they are)
    devices: tuple[str, ...] | None = None
    answer: str | None = None  # "voice": the person answers an ask by voice (else the switch)
    delay: float | None = None  # the wish is for this many seconds later ("in twenty minutes")
    hold: float | None = None  # "for": the wish now, the relay back this many seconds later


#: How a session line's person answers an ask (``"answer"``): by voice or (default) the switch.
ANSWER_WAYS = ("voice", "switch")


def read_session(path: str | Path) -> list[SessionLine]:
    """Lines ``{"text": ...}`` or ``{"audio": "x.wav"}`` (relative to the file) + ``"label"``,
    optionally ``"answer": "voice"`` (the person answers an ask by voice: `run_session`).

    With both keys the audio is what is played (the text is the reference transcript).
    ``"device"`` (several devices): the device the wish is for, or a list of them
    ("everything off"); absent: the first device. The devices not named are to stay as they
    are (the simulated person puts them back if the device switched them).
    ``"label": null`` (what `edge-plm export` writes for an interaction without a label) or
    no "label" is accepted: the simulated person does nothing after that line. A label is
    taken in any case (``"on"`` is ``ON``), as on the command line.
    """
    path = Path(path)
    lines = []
    try:
        for no, row in read_objects(path, "session file"):
            label = None if row.get("label") is None else label_of(path, no, row)
            audio = row.get("audio")
            text = row.get("text")
            if audio is not None and not isinstance(audio, str):
                raise SessionError(f'{path}:{no}: "audio" must be a file name')
            if text is not None and not isinstance(text, str):
                raise SessionError(f'{path}:{no}: "text" must be a string')
            if audio is None and text is None:
                raise SessionError(f'{path}:{no}: needs "text" or "audio"')
            answer = row.get("answer")
            if answer is not None and answer not in ANSWER_WAYS:
                raise SessionError(f'{path}:{no}: "answer" must be one of '
                                   f'{", ".join(ANSWER_WAYS)}, got {answer!r}')
            lines.append(SessionLine(None if label is None else Action(label), text,
                                     (path.parent / audio) if audio else None,
                                     _devices_of(path, no, row.get("device")), answer,
                                     *timing_of(row, f"{path}:{no}", SessionError)))
    except JsonlError as exc:
        raise SessionError(str(exc)) from exc
    if not lines:
        raise SessionError(f"{path}: no lines")
    return lines


def _devices_of(path: Path, no: int, value: object) -> tuple[str, ...] | None:
    """A line's ``"device"``: a name or a non-empty list of names (None: absent)."""
    if value is None:
        return None
    names = [value] if isinstance(value, str) else value
    if (not isinstance(names, list) or not names
            or not all(isinstance(n, str) and n.strip() for n in names)):
        raise SessionError(f'{path}:{no}: "device" must be a device name or a list of names')
    return tuple(names)


def check_devices(lines: list[SessionLine], names: list[str]) -> None:
    """Every device a line names is configured (`SessionError` naming the line, else). One
    device: every line is for it, whatever device a line names (`wanted_actions`)."""
    if not several(names):
        return
    for i, line in enumerate(lines, 1):
        unknown = [d for d in line.devices or () if d not in names]
        if unknown:
            raise SessionError(f"session line {i}: unknown device {unknown[0]!r} "
                               f"(configured: {', '.join(names)})")


def session_devices(lines: list[SessionLine], settings: Settings) -> Settings:
    """`settings` for replaying `lines`: as given when they configure ``[[devices]]`` or no line
    names a device; else one mock device per name the lines give, in order of first mention
    (the first is the default device), on pins of their own, the rest of `settings` kept (a
    session from another household replays without writing its config first)."""
    if settings.devices:
        return settings
    names = list(dict.fromkeys(d for line in lines for d in line.devices or ()))
    if not names:
        return settings
    g = settings.gpio
    free = iter(p for p in range(2, 28) if p not in (g.led_pin, g.buzzer_pin))
    try:
        devices = [DeviceConfig(n, [], relay_pin=next(free), relay_active_high=g.relay_active_high,
                                relay_restore=g.relay_restore, switch_pin=next(free),
                                switch_mode=g.switch_mode, switch_pull_up=g.switch_pull_up,
                                switch_bounce_ms=g.switch_bounce_ms) for n in names]
    except StopIteration:
        raise SessionError(f"the session names {len(names)} devices; at most 12 can be replayed "
                           "without a config (give one with [[devices]])") from None
    return replace(settings, devices=devices)


class SimClock:
    """A settable clock in seconds for replays: nothing sleeps, time jumps."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = float(t)

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds

    def set(self, t: float) -> None:
        if t < self.t:
            raise ValueError("the simulated clock cannot go back")
        self.t = t


@dataclass(frozen=True)
class LineResult:
    """One replayed line: the wish, what the device did, and the stored row's id."""

    index: int
    wish: Action | None  # None: the person's wish is not known (they do nothing)
    outcome: Outcome
    relay_before: bool
    relay_after: bool  # right after the device responded
    flips: int
    relay_final: bool  # after the person's reaction
    # what the person wanted of each device (None: not known; one device: the wish)
    wants: dict[str, Action] | None = None
    # an ON/OFF wish that every device it was for already met when it was said
    already_so: bool = False

    def _devices(self) -> dict:
        """Each device's `DeviceResult` ({} for an input that never reached the policies)."""
        return self.outcome.devices or {}

    def _acts(self) -> dict[str, Action | None]:
        """The action each device was acted on with (None: not acted)."""
        return {n: Action(r.prediction) if r.decision is Decision.ACT else None
                for n, r in self._devices().items()}

    @property
    def asked(self) -> bool:
        """The device asked (several devices: about any of them)."""
        return any(r.decision is Decision.ASK for r in self._devices().values())

    @property
    def acted(self) -> bool:
        """The device acted (several devices: on any of them)."""
        return any(a is not None for a in self._acts().values())

    @property
    def acted_wrong(self) -> bool:
        """Acted, and the action was not what the person wanted (unknown wish: never):
        some device was acted on with an action the person did not want of it (several
        devices: a device they did not name, anything but NOOP)."""
        if self.wish is None or self.wants is None:
            return False
        return any(a is not None and a is not self.wants[n] for n, a in self._acts().items())

    @property
    def acted_wrong_device(self) -> bool:
        """A device the person wanted left as it was was acted on with ON / OFF (counted in the
        summary with several devices only; one device: a NOOP wish acted on, also `acted_wrong`)."""
        if self.wish is None or self.wants is None:
            return False
        return any(a is not None and a.state is not None and self.wants[n] is Action.NOOP
                   for n, a in self._acts().items())

    @property
    def acted_right(self) -> bool:
        """Acted, and every action was what the person wanted."""
        return self.acted and not self.acted_wrong

    @property
    def missed(self) -> bool:
        """An ON/OFF wish that got neither an action nor a question (incl. input errors) on
        one of the devices it was for."""
        if self.wish not in (Action.ON, Action.OFF) or self.wants is None:
            return False
        devs = self._devices()
        return any(w.state is not None and (n not in devs or devs[n].decision is Decision.IGNORE)
                   for n, w in self.wants.items())

    @property
    def missed_already_so(self) -> bool:
        """Missed, but the relays already were as wished: nothing was left undone."""
        return self.missed and self.already_so


@dataclass
class SessionResult:
    """All replayed lines plus the store rows they produced."""

    lines: list[LineResult] = field(default_factory=list)
    labels: int = 0
    versions: list[str] = field(default_factory=list)
    rollbacks: int = 0
    silence_tail_ms: int = 0  # the endpointer's tail the after_speech latency includes
    talkback: bool = False  # the replay spoke its asks (some line answers by voice)
    spoken_answers: int = 0  # answers the simulated person said
    answer_errors: int = 0  # ... not heard as what was said (the other answer, or none)
    own_voice_dropped: int = 0  # utterances dropped as the device's own voice
    answers: list[tuple[int, bool, bool | None]] = field(default_factory=list)  # (line, said, heard)
    several: bool = False  # several devices: the summary adds per-device counts
    timed: list = field(default_factory=list)  # timed lines' results (`loop/timed_replay.py`)

    def summary(self) -> dict:
        """The ``edge-plm replay --json`` object (docs/contracts.md), exact keys and types;
        with several devices also ``acted_wrong_device`` and ``devices`` (per-device counts)."""
        ok = [r.outcome.latency for r in self.lines if r.outcome.error is None]
        after = [x.after_speech for x in ok if x.after_speech is not None]
        out = {
            "interactions": len(self.lines),
            "asked": sum(r.asked for r in self.lines),
            "acted": sum(r.acted for r in self.lines),
            "acted_wrong": sum(r.acted_wrong for r in self.lines),
            "missed": sum(r.missed for r in self.lines),
            "labels": int(self.labels),
            "latency_ms": {
                "asr": percentiles([x.asr for x in ok if x.asr is not None]),
                "model": percentiles([x.model for x in ok if x.model is not None]),
                "total": percentiles([x.total for x in ok if x.total is not None]),
                "after_speech": percentiles(after),
            },
            "silence_tail_ms": self.silence_tail_ms,
            # talk-back replays only: a replay without voice answers prints what it always did
            **({"spoken_answers": self.spoken_answers, "answer_errors": self.answer_errors,
                "own_voice_dropped": self.own_voice_dropped} if self.talkback else {}),
            **summary_keys(self.timed),  # sessions with timed lines only
        }
        if self.several and any(r.wants is not None for r in self.lines):
            out["acted_wrong_device"] = sum(r.acted_wrong_device for r in self.lines)
            out["devices"] = self.device_counts()
        return out

    def device_counts(self) -> dict[str, dict[str, int]]:
        """Several devices: per device, the lines meant for it (``commands``: ON / OFF wishes),
        how often it was asked about, acted on (right / wrong), and missed."""
        out: dict[str, dict[str, int]] = {}
        for r in self.lines:
            if r.wants is None or not r.outcome.devices:
                continue
            for n, res in r.outcome.devices.items():
                c = out.setdefault(n, dict.fromkeys(
                    ("commands", "asked", "acted", "acted_right", "acted_wrong", "missed"), 0))
                want = r.wants[n] if r.wish is not None else None
                acted = res.decision is Decision.ACT
                c["commands"] += want is not None and want.state is not None
                c["asked"] += res.decision is Decision.ASK
                c["acted"] += acted
                c["acted_right"] += acted and want is not None and res.prediction == want.value
                c["acted_wrong"] += acted and want is not None and res.prediction != want.value
                c["missed"] += want is not None and want.state is not None and res.decision is Decision.IGNORE
        return out

    def parts(self, n: int = 4) -> list[dict[str, int]]:
        """Counts per consecutive part of the session (e.g. quarters) to show learning."""
        out = []
        size = len(self.lines)
        for k in range(n):
            chunk = self.lines[k * size // n:(k + 1) * size // n]
            out.append({"lines": len(chunk), "asked": sum(r.asked for r in chunk),
                        "acted_right": sum(r.acted_right for r in chunk),
                        "acted_wrong": sum(r.acted_wrong for r in chunk),
                        "missed": sum(r.missed for r in chunk),
                        "errors": sum(r.outcome.error is not None for r in chunk)})
        return out


def flip_switch(switch: PersonSwitch, factory_pin: Any, clock: SimClock) -> None:
    """Move the person's (mock) switch once, on its MockFactory pin `factory_pin`, as a hand
    would: the real PersonSwitch reacts."""
    if switch.cfg.mode == "momentary":
        factory_pin.drive_low() if switch.cfg.pull_up else factory_pin.drive_high()
        clock.advance(0.2)
        factory_pin.drive_high() if switch.cfg.pull_up else factory_pin.drive_low()
    elif factory_pin.state:
        factory_pin.drive_low()
    else:
        factory_pin.drive_high()


def run_session(lines: list[SessionLine], controller: Controller, clock: SimClock,
                person: SimulatedPerson | None = None, endpointer: Endpointer | None = None,
                gap_s: float | None = None, progress: Callable[[], None] | None = None,
                stop: StopFlag | None = None, answerer: Answerer | None = None) -> SessionResult:
    """Replay `lines` through `controller` (built on MockFactory pins and `clock`).

    Each line: the clock jumps `gap_s` (default: longer than both windows, so the previous
    interaction resolves by itself), the utterance is handled, and the simulated person puts
    each device where they want it (`wanted_actions`) with that device's own mock switch,
    after their reaction time. `stop` (SIGTERM/SIGINT, `edge_plm.loop.stopping`) is checked
    before each line: the lines played so far are the result, and the caller's
    `Controller.stop` saves what was learned. A line with ``answer="voice"`` that was asked
    about is answered by voice first (`_answer_by_voice`; `answerer` gives the samples,
    default `SpokenAnswers`).
    """
    person = person or SimulatedPerson()
    gap = gap_s if gap_s is not None else default_gap_s(controller.settings)
    devices = controller.devices
    names = devices.names
    check_devices(lines, names)
    result = SessionResult(silence_tail_ms=controller.settings.audio.silence_tail_ms,
                           talkback=controller.talkback is not None, several=controller.household.several)
    answer_ep = endpointer or Endpointer.from_config(controller.settings.audio)
    for i, line in enumerate(lines):
        if stop is not None and stop.is_set():
            break
        clock.advance(gap)
        controller.pump()
        before = {n: devices.relays[n].is_on for n in names}
        outcome = _handle_line(line, controller, endpointer, i, len(lines))
        wants = wanted_actions(line, names)
        if line.answer == "voice" and any(r.decision is Decision.ASK
                                          for r in (outcome.devices or {}).values()):
            _answer_by_voice(wants, controller, clock, answer_ep, answerer, result)
        after, said_at = {n: devices.relays[n].is_on for n in names}, clock()
        flips = 0
        for n in names if wants is not None else ():  # a delayed wish: nothing yet (wants_now)
            for flip in person.react(wants_now(line, wants)[n], before[n], after[n], clock()):
                clock.set(max(clock(), flip.at))
                switch = devices.switches[n]
                flip_switch(switch, devices.factory.pin(switch.cfg.pin), clock)
                flips += 1
                failures = controller.storage_failures
                controller.pump()
                if controller.storage_failures > failures:
                    raise ReplayStorageError(i + 1, len(lines), controller.last_storage_error or "")
                if devices.relays[n].is_on != flip.desired:
                    log.warning("line %d: after the simulated flip%s the relay is %s, the person "
                                "wanted %s", i + 1, controller.household.of(n, " of {!r}"),
                                devices.relays[n].is_on, flip.desired)
        result.timed += filter(None, [follow_line(i, line, wants, outcome, controller, clock, said_at,
                                                  before, after, lambda n: _hand(controller, n, clock))])
        first = names[0]
        wished = {n: w.state for n, w in (wants or {}).items() if w.state is not None}
        already = bool(wished) and all(before[n] == state for n, state in wished.items())
        result.lines.append(LineResult(i, line.wish, outcome, before[first], after[first], flips,
                                       devices.relays[first].is_on, wants, already))
        if progress:
            progress()
    return _finish(result, controller, clock, gap)


def _hand(controller: Controller, name: str, clock: SimClock) -> None:
    """The simulated person switches device `name` by hand (a timed line's wish, at its time)."""
    switch = controller.devices.switches[name]
    flip_switch(switch, controller.devices.factory.pin(switch.cfg.pin), clock)
    controller.pump()


def _finish(result: SessionResult, controller: Controller, clock: SimClock, gap: float) -> SessionResult:
    """The last windows close; the labels and versions of the session."""
    clock.advance(gap)
    controller.pump()
    return _tally(result, controller)


def _tally(result: SessionResult, controller: Controller) -> SessionResult:
    """The labels, versions and dropped echoes of the replayed lines, into `result`."""
    ids = {r.outcome.interaction_id for r in result.lines if r.outcome.interaction_id}
    labelled = controller.store.interactions(labeled=True)
    result.labels = sum(1 for row in labelled if row.id in ids)
    result.versions = [e.version for e in controller.learner.events]
    result.rollbacks = sum(e.status == "rolled_back" for e in controller.learner.events)
    if controller.talkback is not None:
        result.own_voice_dropped = controller.talkback.dropped
    return result


def wanted_actions(line: SessionLine, names: list[str]) -> dict[str, Action] | None:
    """The person's wish for each device: the configured devices the line names get its wish
    (it names none of them: the first device), the others NOOP (stay as they are); None for a
    line whose wish is not known. One device: every line is for it."""
    if line.wish is None:
        return None
    targets = set(line.devices or ()) & set(names) or set(names[:1])
    return {n: line.wish if n in targets else Action.NOOP for n in names}


def _handle_line(line: SessionLine, controller: Controller, endpointer: Endpointer | None,
                 i: int, n: int) -> Outcome:
    """Line `i` (of `n`) through the loop: its WAV (endpointed, transcribed) or its text; a
    line the loop could not store stops the replay (`ReplayStorageError`)."""
    if line.audio is not None:
        item = next(iter(wav_inputs([line.audio], endpointer, controller.asr)))
    else:
        item = text_utterance(line.text or "")
    failures = controller.storage_failures
    outcome = controller.handle(item)
    if controller.storage_failures > failures or not outcome.stored:
        raise ReplayStorageError(i + 1, n, controller.last_storage_error or outcome.error or "not stored")
    return outcome


#: The samples of the simulated person's answer: ``answerer(yes, n)`` for their n-th answer.
Answerer = Callable[[bool, int], np.ndarray]

PAD_S = 0.25  # quiet around a synthesised clip played into the loop (`spoken_input`)
ANSWER_REACTION_S = 0.6  # from the end of the question (and the echo guard) to the answer


class SpokenAnswers:
    """The simulated person's "yes" / "no", spoken by espeak-ng in a voice other than the
    device's (synthesised once each)."""

    def __init__(self, voice: str = "en-gb", rate: int = 160) -> None:
        from edge_plm.voice.speech import EspeakSpeech  # noqa: PLC0415

        self.speech = EspeakSpeech(voice, rate)
        self._cache: dict[bool, np.ndarray] = {}

    def __call__(self, yes: bool, n: int) -> np.ndarray:
        if yes not in self._cache:
            self._cache[yes] = self.speech.synthesize("yes" if yes else "no")
        return self._cache[yes]


def spoken_input(samples: np.ndarray, endpointer: Endpointer, asr: AsrBackend | None) -> Utterance:
    """Samples as the microphone would hand them over: with `PAD_S` of quiet around them (a
    microphone hears the room before and after; a synthesised clip starts at its first
    sound), trimmed by the endpointer and, with a streaming ASR, fed to it in 30 ms blocks
    (`wav_inputs` does the same for files)."""
    pad = np.zeros(int(PAD_S * endpointer.sample_rate), dtype=np.int16)
    trimmed = endpointer.trim_result(np.concatenate([pad, np.asarray(samples, np.int16), pad]))
    utt = Utterance(samples=trimmed.samples, source="voice", truncated=trimmed.truncated)
    if asr is not None and asr.streams and len(utt.samples):
        utt = stream_recording(utt, asr, endpointer.silence_tail_ms)
    elif len(utt.samples):
        utt.endpoint_at, utt.tail_ms = time.perf_counter(), float(endpointer.silence_tail_ms)
    return utt


@functools.lru_cache(maxsize=1)
def _default_answerer() -> SpokenAnswers:
    return SpokenAnswers()


def _answer_by_voice(wants: dict[str, Action] | None, controller: Controller, clock: SimClock,
                     endpointer: Endpointer, answerer: Answerer | None,
                     result: SessionResult) -> None:
    """The person answers the open ask (talk-back on, wish known) about the device the
    question is about (the first still in doubt, as the loop takes it): after the question
    and the echo guard, "yes" when the asked action is their wish for it, else "no", through
    the real loop (endpointer, ASR, answer recogniser)."""
    asking = [(n, o) for n, o in controller.policies.open.items()
              if o.decision is Decision.ASK and o.answer is None]
    if wants is None or controller.talkback is None or not asking:
        return
    name, o = asking[0]
    yes = o.prediction.action is wants[name]
    samples = (answerer or _default_answerer())(yes, result.spoken_answers)
    utt = spoken_input(samples, endpointer, controller.asr)
    quiet = controller.talkback.guard.quiet_at()
    heard_s = (utt.duration_ms + utt.tail_ms) / 1000.0
    clock.set(max(clock(), quiet if quiet is not None else clock()) + ANSWER_REACTION_S + heard_s)
    outcome = controller.handle(utt)
    result.answers.append((len(result.lines), yes, outcome.answer))
    result.spoken_answers += 1
    if outcome.answer is not yes:
        result.answer_errors += 1
        log.info("spoken %s heard as %r", "yes" if yes else "no", outcome.transcript)


def uses_talkback(lines: list[SessionLine]) -> bool:
    """A replay of `lines` needs talk-back when a line's person answers by voice."""
    return any(line.answer == "voice" for line in lines)


def default_gap_s(settings: Settings) -> float:
    """The simulated time between two lines: longer than both windows, so the previous
    interaction resolves by itself."""
    return max(settings.policy.ask_window_s, settings.policy.override_window_s) + 1.0


def session_span_s(n_lines: int, settings: Settings) -> float:
    """The simulated time `run_session` takes for `n_lines` lines when the person never has to
    flip the switch (a gap per line and one at the end). `build_replay` dates a row that much
    simulated time before the real time at its end; the few seconds each flip adds run into
    the real time, where the replay's clock stops at the real clock."""
    return (n_lines + 1) * default_gap_s(settings)


@dataclass
class Replay:
    """Everything a replay needs, built on MockFactory pins and a simulated clock."""

    controller: Controller
    clock: SimClock
    store: ReplayStore
    endpointer: Endpointer
    tmpdir: tempfile.TemporaryDirectory | None = None
    bridge: Any = None  # the MQTT bridge (``[mqtt] enabled``), else None

    def close(self) -> None:
        try:
            self.controller.stop()
        finally:
            stop_bridge(self.bridge)
            self.bridge = None
            self.store.close()
            if self.tmpdir is not None:
                self.tmpdir.cleanup()


def replay_asr(lines: list[SessionLine], settings: Settings) -> AsrBackend | None:
    """The ASR for replaying `lines`: PocketSphinx with the ear's configured language model
    (``asr.lm``) when any line has audio or answers by voice, else None (text only). A new
    decoder per replay, its cepstral mean carried from utterance to utterance as on the device:
    the same session gives the same words."""
    if not any(line.audio or line.answer == "voice" for line in lines):
        return None
    return make_pocketsphinx(settings.asr, adapt_cmn=True)


def build_replay(settings: Settings, db: str | Path | None, seed: int | None = None,
                 asr: AsrBackend | None = None, learner_cfg: LearnerConfig | None = None,
                 epoch: float | None = None, span_s: float = 0.0,
                 talkback: bool = False) -> Replay:
    """A controller for replays: given (or temporary) DB, mock GPIO, simulated clock.

    Checkpoints go to the DB's own folder (``<db stem>.checkpoints`` beside it). The
    store's timestamps are the simulated clock offset to `epoch`; without an
    `epoch`, the real time minus the simulated time still to come (``span_s`` - clock, see
    `session_span_s`), never later than the real time: a replay's rows end at the real time
    it ended, in the order they were made, none in the future.

    `talkback`: the controller asks out loud (``settings.talkback``'s speech backend, played
    nowhere) and takes spoken answers (`edge_plm.voice.talkback`); `uses_talkback` says when.
    """
    from gpiozero.pins.mock import MockFactory  # noqa: PLC0415

    tmp = None
    if db is None:
        tmp = tempfile.TemporaryDirectory(prefix="edge-plm-replay-")
        db = Path(tmp.name) / "edge-plm.db"
    db = Path(db).expanduser().resolve()
    paths = replace(settings.paths, database=str(db))
    model = settings.model if seed is None else replace(settings.model, seed=seed)
    settings = replace(settings, paths=paths, model=model,
                       gpio=replace(settings.gpio, pin_factory="mock"))
    clock = SimClock(0.0)
    if epoch is None:  # now minus the simulated time still to come: ends at the real end
        wall = lambda: min(time.time() - span_s + clock(), time.time())  # noqa: E731
    else:
        wall = lambda: epoch + clock()  # noqa: E731
    store = ReplayStore(db, clock=wall)
    try:
        learner = open_learner(settings, store, cfg=learner_cfg, clock=wall)
        devices = Devices.from_config(settings.gpio, clock=clock, factory=MockFactory(),
                                      install_exit_handlers=False, devices=settings.devices)
    except BaseException:
        store.close()
        if tmp is not None:
            tmp.cleanup()
        raise
    tb = None
    if talkback:
        from edge_plm.voice.talkback import make_talkback  # noqa: PLC0415
        from edge_plm.voice.speech import NullPlayer  # noqa: PLC0415

        tb = make_talkback(settings.talkback, clock, player=NullPlayer())
        tb.warm()
    controller = open_loop(settings, store, learner, devices, asr, clock=clock, wall=wall,
                           talkback=tb)
    controller.timed.follow(clock)  # simulated time runs the timers (`loop/timed_replay.py`)
    bridge = start_bridge(settings, devices, status_path(db), controller.watchers,  # None unless [mqtt] is on
                          model_version=lambda: controller.worker.version, timers=controller.timed.pending,
                          undo=undo_handler(controller.worker, controller.household))
    return Replay(controller, clock, store, Endpointer.from_config(settings.audio), tmp, bridge)


__all__ = ["ANSWER_WAYS", "Answerer", "LineResult", "Replay", "ReplayStorageError", "SessionError", "SessionLine",
           "SessionResult", "SimClock", "SpokenAnswers", "build_replay", "check_devices", "default_gap_s", "flip_switch",
           "read_session", "replay_asr", "run_session", "session_devices", "session_span_s", "spoken_input", "uses_talkback",
           "wanted_actions"]
