"""The device's loop: each input becomes one stored interaction; resolved ones teach the learner.

`Controller.handle` takes one `Utterance` (or `InputFailure`) through listen -> transcribe ->
predict -> decide -> act/ask -> record; `Controller.pump` (about every 100 ms) applies the
person's switch flips and expired windows, whose labels go to the store and the learner.
Its stages are its collaborators: the `Dialogue` (the person's side: flips, windows, asks,
talk-back's answers) and the `Recorder` (everything stored, and the labels handed to the
learner). The learner runs behind a `LearnerWorker`: the relay is driven before the previous
interaction's label is learned, and (with an asynchronous worker, `edge-plm run`) learning
never delays an utterance. One device or several take the same path (N = 1 is one device).
Bad input, storage failures, kept audio and stopping: docs/loop.md. Replaying a labelled
session through this loop: `edge_plm.loop.replay`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from edge_plm.config.settings import Settings
from edge_plm.decide.devices import DevicePolicies, DeviceResolution, Resolved
from edge_plm.decide.policy import Policy
from edge_plm.device import Devices
from edge_plm.learning.learner import Learner
from edge_plm.learning.worker import LearnerWorker
from edge_plm.loop import outcomes as device_outcomes
from edge_plm.loop.dialogue import Dialogue
from edge_plm.loop.household_ear import HouseholdEar
from edge_plm.loop.kinds import KindActions
from edge_plm.loop.recorder import Recorder, keep_audio
from edge_plm.loop.records import Latency, Outcome, Rejected, Stopwatch, storage_failure
from edge_plm.loop.stopping import StopFlag
from edge_plm.loop.timers import TimedCommands, Unreadable, command_text
from edge_plm.store import ReplayStore
from edge_plm.voice.asr import AsrBackend, AsrError, TextASR, Transcript
from edge_plm.voice.audio import AudioError, Utterance, WavSource
from edge_plm.voice.endpoint import Endpointer
from edge_plm.voice.stream import stream_recording
from edge_plm.voice.transcript import cap_transcript

if TYPE_CHECKING:
    from edge_plm.switch.kinds import KindHead
    from edge_plm.voice.talkback import Talkback

log = logging.getLogger(__name__)

Clock = Callable[[], float]


# --- inputs ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class InputFailure:
    """An input that could not be turned into an utterance (e.g. a corrupt WAV file)."""

    source: str
    error: str
    path: str | None = None
    audio_ms: float = 0.0


Item = Utterance | InputFailure


def wav_inputs(paths: Iterable[str | Path], endpointer: Endpointer | None = None,
               asr: AsrBackend | None = None) -> Iterator[Item]:
    """Each WAV file as an `Utterance` (silence trimmed), or an `InputFailure` if unreadable.

    With a streaming `asr`, each file is fed to an ASR session in 30 ms blocks as a microphone
    would deliver it (`stream_recording`), its endpoint the configured silence tail after it;
    with one that does not stream, the endpoint is when the file was read (it is decoded whole
    in the ASR stage), so `Latency.after_speech` is defined for both."""
    reader = WavSource([], endpointer=endpointer)
    tail = endpointer.silence_tail_ms if endpointer is not None else 0.0
    for path in paths:
        t0 = time.perf_counter()
        try:
            utt = reader.load(path)
        except AudioError as exc:
            yield InputFailure("wav", str(exc), str(path), (time.perf_counter() - t0) * 1e3)
            continue
        if asr is not None and asr.streams and len(utt.samples):
            try:
                utt = stream_recording(utt, asr, tail)
            except AsrError as exc:  # the controller's ASR stage decodes it again and says why
                log.error("streaming ASR failed for %s: %s", path, exc)
                utt.stream = None
        elif asr is not None and len(utt.samples):  # decoded whole after the endpoint: now
            utt.endpoint_at, utt.tail_ms = time.perf_counter(), float(tail)
        yield utt


def text_utterance(text: str) -> Utterance:
    """An utterance whose transcript is given (the text source's shape)."""
    import numpy as np  # noqa: PLC0415 - tiny, only for the empty sample array

    return Utterance(samples=np.zeros(0, dtype=np.int16), source="text", text=text)


# --- the stages before the model -------------------------------------------------------------
def transcribe(asr: AsrBackend, utt: Utterance) -> Transcript:
    """The utterance's transcript (a streamed utterance: only its finalisation); an ASR error
    rejects the utterance (its audio is kept when configured)."""
    try:
        return asr.transcribe_utterance(utt)
    except AsrError as exc:
        log.error("ASR failed (%s): %s", asr.name, exc)
        raise Rejected(f"ASR error: {exc}", asr.name, keep_audio=True) from exc


def usable_text(tr: Transcript, utt: Utterance, max_chars: int) -> str:
    """The transcript cut to ``max_chars`` (``asr.max_transcript_chars``); rejects an empty one."""
    text = cap_transcript(tr.text, max_chars)
    if not text:
        msg = "empty transcript" if utt.text is not None else "empty utterance: nothing recognised"
        log.error("%s (%s)", msg, utt.path or utt.source)
        raise Rejected(msg, tr.backend, keep_audio=True)
    return text


# --- the controller -------------------------------------------------------------------------
class Controller:
    """The device's loop (one device or several). Thread-safe: `handle`, `pump` and `stop`
    share one lock. `worker` runs the learner (default: a synchronous one, as replays need;
    ``background``: its own asynchronous one, as the service runs; a worker handed in is used
    as it is, never rewired)."""

    def __init__(self, settings: Settings, store: ReplayStore, learner: Learner,
                 devices: Devices, asr: AsrBackend | None, clock: Clock = time.monotonic,
                 wall: Clock = time.time, worker: LearnerWorker | None = None,
                 talkback: Talkback | None = None, background: bool = False,
                 ear: HouseholdEar | None = None,
                 load_head: Callable[[], KindHead] | None = None) -> None:
        self.settings = settings
        self.store = store
        self.learner = learner
        # its own worker (started below, once `_learning_failed` can count), or the one handed
        self.worker = worker if worker is not None else LearnerWorker(
            learner, synchronous=not background, on_error=self._learning_failed, start=False)
        self.devices = devices
        self.asr = asr
        self.text_asr = TextASR()
        self.ear = ear  # None: the ear's LM does not learn the household's words
        self.household = device_outcomes.check_devices(devices, learner.household)
        self.names = list(self.household.names)  # the devices, in order
        # with talk-back a spoken yes can label an ask about the relay's own state (`Policy`)
        self.policies = DevicePolicies(settings.policy, self.names, spoken_answers=talkback is not None)
        self.talkback = talkback  # None: talk-back off (edge_plm.voice.talkback)
        self.clock = clock  # the loop's clock (policy windows, the switch, talk-back)
        self.wall = wall  # wall-clock time stored with rows and labels
        self.recorder = Recorder(settings, store, self.worker, self.household, clock, wall)
        # timed commands ("in twenty minutes", "for an hour"): docs/loop.md, "Timed commands"
        self.timed = TimedCommands(settings, store, devices, self.household, clock, wall)
        self.dialogue = Dialogue(settings, devices, self.policies, self.household, clock,
                                 talkback, self.worker.predict, self.recorder,
                                 on_hand=self.timed.hand, holds_answer=self.timed.holds_answer)
        self.timed.start()
        # dimmers and questions (the kind head; docs/loop.md, "Dimmers and questions")
        self.kinds = KindActions(settings, store, devices, self.household, clock, wall, talkback,
                                 load_head, self._addressed)
        self._lock = threading.RLock()
        self._stopped = False
        self.stop_flag: threading.Event | StopFlag = threading.Event()  # `run`'s stop flag
        self.handled = 0  # inputs handled (stored or not)
        #: told each utterance's `Outcome` (`_tell`; e.g. the MQTT bridge's last-decision sensor)
        self.watchers: list[Callable[[Outcome], None]] = []
        self.worker.start()

    @property
    def policy(self) -> Policy:
        """The first device's policy (the only one with one device)."""
        return self.policies.policies[self.names[0]]

    @property
    def storage_failures(self) -> int:
        """Interactions or labels that could not be stored (`Recorder`)."""
        return self.recorder.storage_failures

    @property
    def last_storage_error(self) -> str | None:
        return self.recorder.last_storage_error

    @property
    def resolutions(self) -> deque[Resolved]:
        """The latest resolved utterances, in order (`Recorder.resolutions`)."""
        return self.recorder.resolutions

    # --- inputs -------------------------------------------------------------------------
    def handle(self, item: Item) -> Outcome:
        """Process one input end to end; never raises for bad input."""
        with self._lock:
            watch = Stopwatch()
            self.handled += 1
            # flips and expired windows reach the policy now; their labels after the relay
            self.dialogue.defer()
            try:
                watch.record("audio", float(item.audio_ms))
                if isinstance(item, InputFailure):
                    log.error("input failed (%s): %s", item.source, item.error)
                    return self.recorder.error_row(Rejected(item.error), watch)
                return self._tell(self._handle_utterance(item, watch))
            except Exception as exc:
                if storage_failure(exc):  # disk full, I/O error, read-only: say so, do nothing
                    self.recorder.storage_failed("interaction", exc)
                    return Outcome(None, "", Latency(), error=f"not stored: {exc}", stored=False)
                # a bug or a failing component: record it, keep running
                log.exception("interaction failed unexpectedly")
                watch.ms.clear()  # the stages may not have finished: only the total is known
                return self.recorder.error_row(
                    Rejected(f"internal error: {type(exc).__name__}: {exc}"), watch)
            finally:
                self._resolve_all(self.dialogue.take_deferred())  # when no relay step took them
                self.worker.poll()  # rows deleted by `forget` leave the model within 1 s
                self._follow_ear()

    def _handle_utterance(self, utt: Utterance, watch: Stopwatch) -> Outcome:
        """listen -> transcribe -> predict -> decide -> act/ask -> record (docs/loop.md)."""
        if self.dialogue.is_echo(utt):
            return self.dialogue.own_voice(utt, watch)
        try:
            asr = self._listen(utt)
            with watch.stage("asr"):
                transcript = transcribe(asr, utt)
            text = usable_text(transcript, utt, self.settings.asr.max_transcript_chars)
        except Rejected as rejected:
            if utt.stream is not None:
                utt.stream.cancel()
            return self.recorder.error_row(rejected, watch, utt)
        answered = self.dialogue.spoken_answer(text, utt, watch, self.stop_flag.is_set())
        if answered is not None:
            return answered
        said = None if self.stop_flag.is_set() else self.kinds.answer(text, self.clock())
        if said is not None:  # a yes / no to "Dim the lamp?": no row of its own
            return Outcome(said[0], text, watch.stop(), answer=said[1])
        if self.timed.voice_cancel(text) is not None:  # "cancel the fan timer": no row, no model
            return Outcome(None, text, watch.stop())
        slot = self.timed.read(text)  # a time: the model predicts on the command without it
        command = command_text(slot, text)
        levels = self.kinds.levels()  # the dimmers before this utterance (what a turn teaches)
        with watch.stage("model"):
            predicted = self.worker.predict_all(command)  # one snapshot
            preds = predicted.devices
            call = self.kinds.read(command, preds)  # dim / brighten / a level / a question, or None
        lead = device_outcomes.lead_device(preds)
        iid = self.recorder.prediction(text, transcript, preds, lead, predicted.version, watch)
        unsure = transcript.fluency is not None and transcript.fluency < self.settings.asr.min_fluency
        unsure = unsure or isinstance(slot, Unreadable)  # a time it cannot read: asked, never acted
        steps, now = self.dialogue.decide(iid, text, preds, unsure_hearing=unsure,
                                          held=call.reason if call is not None else None)
        self.recorder.open_texts[iid] = text
        held = self.timed.hold(iid, slot, steps)  # "in twenty minutes": a timer, not the relay
        with watch.stage("actuator"):
            driven = self.dialogue.act_or_ask(iid, held, now, self.stop_flag.is_set())
            moved = (not self.stop_flag.is_set()) and self.kinds.carry_out(iid, command, call, now)
        self.kinds.heard(iid, command, now, levels)
        self.timed.after_drive(iid, slot, driven)  # "for an hour": the way back
        if (driven or moved) and utt.endpoint_at is not None:
            watch.after_speech = utt.tail_ms + (time.perf_counter() - utt.endpoint_at) * 1e3
        # the relay first: what this input closed is labelled (and learned) after it
        self._resolve_all(self.dialogue.take_deferred() + steps.closed)
        return self.recorder.decision(iid, utt, text, preds, lead, steps, driven, watch.stop())

    def _addressed(self, text: str) -> tuple[str, ...]:
        """The devices the published model reads as addressed by `text` (several devices; the
        kind head's calls)."""
        model = self.worker.predictor.model
        a = model.address(text, list(self.household.devices))
        if a.unnamed:
            return ()
        return tuple(d.name for d, share in zip(self.household.devices, a.shares) if share > 0)

    def _listen(self, utt: Utterance) -> AsrBackend:
        """The ASR for this utterance (the text source's own for text); rejects empty audio."""
        if utt.text is not None:
            return self.text_asr
        if len(utt.samples) == 0:
            msg = f"empty utterance: no speech in the audio ({utt.path or utt.source})"
            log.error(msg)
            raise Rejected(msg)
        if self.asr is None:
            msg = "no ASR backend configured for audio input"
            log.error(msg)
            raise Rejected(msg)
        if utt.truncated:
            log.warning("utterance was cut at max_utterance_ms; transcribing what was kept")
        return self.asr

    def _tell(self, outcome: Outcome) -> Outcome:
        """Tell each watcher the outcome (each must return at once; a failing one is logged)."""
        for watcher in list(self.watchers):
            try:
                watcher(outcome)
            except Exception:
                log.exception("a watcher of the loop's outcomes failed")
        return outcome

    # --- time and the switch --------------------------------------------------------------
    def pump(self) -> list[DeviceResolution]:
        """Apply the person's flips and expire windows; returns what it resolved."""
        with self._lock:
            if self._stopped:
                return []
            resolved = self.dialogue.switch_and_time()
            self.timed.run_due()
            self.kinds.pump()  # a turn of a dimmer's knob teaches the utterance before it
            self._resolve_all(resolved)
            self.worker.poll()  # rows deleted by `forget` leave the model within 1 s
            self._follow_ear()
            return resolved

    def _follow_ear(self) -> None:
        """Let the ear's LM follow the household's labelled words (after the relay, never
        before it; `HouseholdEar.follow` looks at most every half minute)."""
        if self.ear is not None:
            self.ear.follow(self.clock(), self.store.person_labelled_commands, self.worker.predictor.model,
                            self.store.kind_labels)

    def _resolve_all(self, resolutions: list[DeviceResolution]) -> None:
        """Label (the database, then the learner) or observe each resolved interaction
        (`Recorder.resolve_all`)."""
        self.recorder.resolve_all(self.policies, self.timed.resolved(resolutions))

    def label_time(self, ts: float) -> float:
        """The wall-clock time of loop-clock time ``ts`` (when a label was given)."""
        return self.recorder.label_time(ts)

    def _learning_failed(self, what: str, exc: BaseException) -> None:
        """A learner task failed on the worker thread (asynchronous worker)."""
        if storage_failure(exc):  # the label is in the database; the checkpoint is not on disk
            self.recorder.storage_failed(f"model checkpoint after the {what}", exc)
        else:
            log.error("learning failed (%s): %s: %s", what, type(exc).__name__, exc,
                      exc_info=exc)

    # --- running --------------------------------------------------------------------------
    def run(self, source: Iterable[Item], stop: threading.Event | StopFlag | None = None,
            pump_interval_s: float = 0.1, heartbeat: Callable[[], None] | None = None) -> int:
        """Handle every input of `source` until it ends or `stop` is set (`run_loop`); `stop` is
        checked before each input and before the relay is driven."""
        return run_loop(self, source, stop, pump_interval_s, heartbeat)

    def stop(self) -> None:
        """Close the open interaction (expired ones get their label), release the devices."""
        with self._lock:
            if self._stopped:
                return
            try:
                self.pump()
                self._resolve_all(self.dialogue.close(self.clock()))
                try:  # the queue drained; labels learned since the last version saved now
                    self.worker.close()
                except Exception:
                    log.exception("could not save the labels learned since the last model "
                                  "version; they are re-learned from the database at the next "
                                  "start")
            finally:
                self._stopped = True
                self.devices.close()  # relay to its safe state last, even if the above failed
            log.info("controller stopped; relay in its safe state")


def run_loop(controller: Controller, source: Iterable[Item], stop: threading.Event | StopFlag | None = None,
             pump_interval_s: float = 0.1, heartbeat: Callable[[], None] | None = None) -> int:
    """Handle every input of `source` until it ends or `stop` is set; returns the count.

    A background thread pumps flips and window expiry while the source blocks (live use).
    `heartbeat` (e.g. systemd's WATCHDOG=1) is called after every pump and every input:
    a loop stuck in `handle` (which holds the lock `pump` needs) stops calling it.
    """
    stop = stop if stop is not None else threading.Event()
    controller.stop_flag = stop
    done = threading.Event()

    def pumper() -> None:
        while not (done.is_set() or stop.is_set()):
            try:
                controller.pump()
                if heartbeat is not None:
                    heartbeat()
            except Exception:
                log.exception("pump failed; continuing")
            done.wait(pump_interval_s)

    thread = threading.Thread(target=pumper, name="edge-plm-pump", daemon=True)
    thread.start()
    n = 0
    try:
        for item in source:
            if stop.is_set():  # between inputs: the one read after the stop is not handled
                break
            controller.handle(item)
            n += 1
            if heartbeat is not None:
                heartbeat()
            if stop.is_set():
                break
    finally:
        done.set()
        thread.join(timeout=2.0)
    return n


__all__ = ["Controller", "InputFailure", "Latency", "Outcome", "keep_audio", "run_loop",
           "storage_failure", "text_utterance", "wav_inputs"]
