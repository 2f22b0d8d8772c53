"""Replaying a labelled session through the real loop (``edge-plm replay`` / ``demo``, tests
and benchmarks): the runner and the assembly. Its parts: the session file
(`edge_plm.loop.session_file`), the simulated clock (`edge_plm.loop.sim_clock`), the simulated
person and their hand on the switch (`edge_plm.loop.simulation`), their spoken answers
(`edge_plm.loop.sim_answers`), timed lines (`edge_plm.loop.timed_replay`) and the scoring
(`edge_plm.loop.replay_score`); their public names are importable from here too.

`run_session` drives a `Controller` on gpiozero MockFactory pins with a `SimulatedPerson` and a
`SimClock` (nothing sleeps): the person's corrections are made by driving the mock pin of their
switch, so the real `PersonSwitch` code path labels them. `build_replay` assembles the store,
learner, devices and controller a replay runs on.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from edge_plm.bridge import start_bridge, stop_bridge
from edge_plm.bridge.status import status_path
from edge_plm.config.settings import Settings
from edge_plm.decide.policy import Decision
from edge_plm.device import Devices
from edge_plm.learning.learner import LearnerConfig
from edge_plm.loop.controller import Controller, Outcome, text_utterance, wav_inputs
from edge_plm.loop.house import open_learner, open_loop
from edge_plm.loop.kind_replay import follow_kind_line
from edge_plm.loop.replay_score import LineResult, SessionResult
from edge_plm.loop.session_file import (ANSWER_WAYS, SessionError, SessionLine, check_devices, read_session,
                                        session_devices, uses_talkback, wanted_actions)
from edge_plm.loop.sim_answers import Answerer, SpokenAnswers, answer_by_voice, spoken_input
from edge_plm.loop.sim_clock import SimClock
from edge_plm.loop.simulation import SimulatedPerson, flip_switch
from edge_plm.loop.stopping import StopFlag
from edge_plm.loop.timed_replay import follow_line, wants_now
from edge_plm.loop.undo import undo_handler
from edge_plm.store import ReplayStore, StorageError
from edge_plm.voice.asr import AsrBackend, make_pocketsphinx
from edge_plm.voice.endpoint import Endpointer

log = logging.getLogger(__name__)


class ReplayStorageError(StorageError):
    """A replay stopped because an interaction or a label could not be stored."""

    def __init__(self, line: int, total: int, reason: str) -> None:
        self.line, self.total = line, total
        super().__init__(f"replay stopped at line {line} of {total}: {reason} (the lines "
                         "before it were stored)")


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
    about is answered by voice first (`answer_by_voice`; `answerer` gives the samples,
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
        levels = controller.kinds.levels()
        outcome = _handle_line(line, controller, endpointer, i, len(lines))
        wants = wanted_actions(line, names)
        if line.answer == "voice" and any(r.decision is Decision.ASK
                                          for r in (outcome.devices or {}).values()):
            answer_by_voice(wants, controller, clock, answer_ep, answerer, result)
        after, said_at = {n: devices.relays[n].is_on for n in names}, clock()
        levels_after = controller.kinds.levels()
        flips = _react(person, controller, clock, wants_now(line, wants), before, after, (i + 1, len(lines)))
        result.kinds += filter(None, [follow_kind_line(i, line, outcome, controller, (before, after),
                                                       (levels, levels_after), clock())])
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


def _react(person: SimulatedPerson, controller: Controller, clock: SimClock, wants: dict | None,
           before: dict[str, bool], after: dict[str, bool], where: tuple[int, int]) -> int:
    """The simulated person puts each device where they want it now (`wants`; None: not
    known) with its own switch; returns the flips. A label that could not be stored stops the
    replay at line ``where[0]`` of ``where[1]``."""
    devices, flips = controller.devices, 0
    for n in devices.names if wants is not None else ():
        for flip in person.react(wants[n], before[n], after[n], clock()):
            clock.set(max(clock(), flip.at))
            switch = devices.switches[n]
            flip_switch(switch, devices.factory.pin(switch.cfg.pin), clock)
            flips += 1
            failures = controller.storage_failures
            controller.pump()
            if controller.storage_failures > failures:
                raise ReplayStorageError(*where, controller.last_storage_error or "")
            if devices.relays[n].is_on != flip.desired:
                log.warning("line %d: after the simulated flip%s the relay is %s, the person "
                            "wanted %s", where[0], controller.household.of(n, " of {!r}"),
                            devices.relays[n].is_on, flip.desired)
    return flips


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
    result.kind_labels = controller.kinds.labels
    return result


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
    from gpiozero.pins.mock import MockFactory, MockPWMPin  # noqa: PLC0415

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
        dimmers = any(d.kind == "dimmer" for d in settings.devices)  # PWM pins only where needed
        factory = MockFactory(pin_class=MockPWMPin) if dimmers else MockFactory()
        devices = Devices.from_config(settings.gpio, clock=clock, factory=factory,
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
