"""The device's loop: each input becomes one stored interaction; resolved ones teach the learner.

`Controller.handle` takes one `Utterance` (or `InputFailure`) through listen -> transcribe ->
predict -> decide -> act/ask -> record; `Controller.pump` (about every 100 ms) applies the
person's switch flips and expired windows, whose labels go to the store and the learner.
The learner runs behind a `LearnerWorker`: the relay is driven before the previous
interaction's label is learned, and (with an asynchronous worker, `edge-plm run`) learning
never delays an utterance.
Bad input, storage failures, kept audio and stopping: docs/loop.md. Replaying a labelled
session through this loop: `edge_plm.loop.replay`.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from edge_plm.loop import outcomes as device_outcomes
from edge_plm.device import Devices
from edge_plm.loop.outcomes import DeviceResult
from edge_plm.decide.devices import DevicePolicies, DeviceResolution, Resolved, Steps
from edge_plm.learning.learner import Learner
from edge_plm.learning.worker import LearnerWorker
from edge_plm.decide.content import too_little_content
from edge_plm.decide.policy import Action, Decision, Policy
from edge_plm.config.settings import Settings
from edge_plm.loop.stopping import StopFlag
from edge_plm.store import ReplayStore, StorageError
from edge_plm.voice.transcript import cap_transcript
from edge_plm.voice.asr import AsrBackend, AsrError, TextASR, Transcript
from edge_plm.voice.audio import AudioError, Utterance, WavSource, write_wav
from edge_plm.voice.endpoint import Endpointer
from edge_plm.voice.stream import stream_recording

if TYPE_CHECKING:
    from edge_plm.switch.model import SwitchPrediction
    from edge_plm.voice.talkback import Talkback

log = logging.getLogger(__name__)

Clock = Callable[[], float]


# --- inputs ---------------------------------------------------------------------------------
_DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS}


def storage_failure(exc: BaseException) -> bool:
    """`StorageError`, or an OSError that means "could not be written" (disk full, quota, I/O
    error, read-only file system), e.g. from writing a checkpoint."""
    return isinstance(exc, StorageError) or (isinstance(exc, OSError)
                                              and exc.errno in _DISK_ERRNOS)


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


# --- records --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Latency:
    """Per-interaction latency breakdown in milliseconds (None: that stage did not run).

    `after_speech` (not stored in the database): for an utterance with a known endpoint that
    drove the relay, the silence tail plus the time from the endpoint until the relay call
    returned (what the person waits after their last word)."""

    audio: float | None = None
    asr: float | None = None
    model: float | None = None
    actuator: float | None = None
    total: float | None = None
    after_speech: float | None = None

    def columns(self) -> dict[str, float | None]:
        return {"latency_audio_ms": self.audio, "latency_asr_ms": self.asr,
                "latency_model_ms": self.model, "latency_actuator_ms": self.actuator,
                "latency_total_ms": self.total}


@dataclass(frozen=True)
class Outcome:
    """What `Controller.handle` did with one input."""

    interaction_id: int | None  # None only if even storing the row failed
    transcript: str
    decision: Decision | None  # None for an input with an error
    prediction: str | None
    confidence: float | None
    action: Action | None  # the relay state driven (ACT that reached the relay)
    error: str | None
    latency: Latency
    stored: bool = True  # False: the interaction (or part of it) could not be stored
    # several devices: each device's part (the fields above are the lead device's); one: None
    devices: dict[str, DeviceResult] | None = None
    answer: bool | None = None  # talk-back: a spoken yes/no to the open ask (no row of its own)


class Stopwatch:
    """The latency breakdown of one input in ms, filled stage by stage."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.ms: dict[str, float] = {}
        self.after_speech: float | None = None  # set when the relay was driven (Latency)

    def record(self, stage: str, ms: float) -> None:
        self.ms[stage] = ms

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the block as stage `name` (also when it raises)."""
        t = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = (time.perf_counter() - t) * 1e3

    def stop(self) -> Latency:
        """The breakdown, with the total: the audio plus everything since the input arrived."""
        total = self.ms.get("audio", 0.0) + (time.perf_counter() - self.start) * 1e3
        return Latency(**self.ms, total=total, after_speech=self.after_speech)


class _Rejected(Exception):
    """An input without a usable transcript: stored as an error row, never seen by the policy."""

    def __init__(self, error: str, asr_backend: str | None = None, keep_audio: bool = False):
        super().__init__(error)
        self.error = error
        self.asr_backend = asr_backend
        self.keep_audio = keep_audio


def _clamp(p: float) -> float:
    return min(1.0, max(0.0, float(p)))


def transcribe(asr: AsrBackend, utt: Utterance) -> Transcript:
    """The utterance's transcript (a streamed utterance: only its finalisation); an ASR error
    rejects the utterance (its audio is kept when configured)."""
    try:
        return asr.transcribe_utterance(utt)
    except AsrError as exc:
        log.error("ASR failed (%s): %s", asr.name, exc)
        raise _Rejected(f"ASR error: {exc}", asr.name, keep_audio=True) from exc


def usable_text(tr: Transcript, utt: Utterance, max_chars: int) -> str:
    """The transcript cut to ``max_chars`` (``asr.max_transcript_chars``); rejects an empty one."""
    text = cap_transcript(tr.text, max_chars)
    if not text:
        msg = "empty transcript" if utt.text is not None else "empty utterance: nothing recognised"
        log.error("%s (%s)", msg, utt.path or utt.source)
        raise _Rejected(msg, tr.backend, keep_audio=True)
    return text


# --- the controller -------------------------------------------------------------------------
class Controller:
    """One device's loop. Thread-safe: `handle`, `pump` and `stop` share one lock. `worker`
    runs the learner (default: a synchronous one, as replays need; the service passes an
    asynchronous one)."""

    def __init__(self, settings: Settings, store: ReplayStore, learner: Learner,
                 devices: Devices, asr: AsrBackend | None, clock: Clock = time.monotonic,
                 wall: Clock = time.time, worker: LearnerWorker | None = None,
                 talkback: Talkback | None = None) -> None:
        self.settings = settings
        self.store = store
        self.learner = learner
        self.worker = worker or LearnerWorker(learner, synchronous=True)
        if self.worker.on_error is None:
            self.worker.on_error = self._learning_failed
        self.devices = devices
        self.asr = asr
        self.text_asr = TextASR()
        self.names = device_outcomes.attach(settings, devices, learner)  # the devices, in order
        self.policies = DevicePolicies(settings.policy, self.names)
        self.talkback = talkback  # None: talk-back off (edge_plm.voice.talkback)
        self.clock = clock  # the loop's clock (policy windows, the switch, talk-back)
        self.wall = wall  # wall-clock time stored with rows and labels
        self._lock = threading.RLock()
        self._open_texts: dict[int, str] = {}
        self._pending_manual: dict[str, bool] = {}  # flips the rate limit delayed, by device
        # resolved before an input's relay step, labelled after it (a spoken answer adds to it)
        self.deferred: list[DeviceResolution] = []
        self._stopped = False
        self.stop_flag: threading.Event | StopFlag = threading.Event()  # `run`'s stop flag
        self.storage_failures = 0  # interactions or labels that could not be stored
        self.last_storage_error: str | None = None
        self.handled = 0  # inputs handled (stored or not)
        # the latest resolved utterances, in order (for replay/tests; bounded: the service runs for months)
        self.resolutions: deque[Resolved] = deque(maxlen=1000)
        #: told each utterance's `Outcome` (`told`; e.g. the MQTT bridge's last-decision sensor)
        self.watchers: list[Callable[[Outcome], None]] = []

    @property
    def policy(self) -> Policy:
        """The first device's policy (the only one with one device)."""
        return self.policies.policies[self.names[0]]

    # --- inputs -------------------------------------------------------------------------
    def handle(self, item: Item) -> Outcome:
        """Process one input end to end; never raises for bad input."""
        with self._lock:
            watch = Stopwatch()
            self.handled += 1
            # flips and expired windows reach the policy now; their labels after the relay
            self.deferred = self._switch_and_time()
            try:
                watch.record("audio", float(item.audio_ms))
                if isinstance(item, InputFailure):
                    log.error("input failed (%s): %s", item.source, item.error)
                    return error_row(self, _Rejected(item.error), watch)
                return told(self.watchers, self._handle_utterance(item, watch))
            except Exception as exc:
                if storage_failure(exc):  # disk full, I/O error, read-only: say so, do nothing
                    self.storage_failed("interaction", exc)
                    return Outcome(None, "", None, None, None, None, f"not stored: {exc}",
                                   Latency(), stored=False)
                # a bug or a failing component: record it, keep running
                log.exception("interaction failed unexpectedly")
                watch.ms.clear()  # the stages may not have finished: only the total is known
                return error_row(self,
                    _Rejected(f"internal error: {type(exc).__name__}: {exc}"), watch)
            finally:
                self._resolve_all(self._take_deferred())  # when no relay step took them
                self.worker.poll()  # rows deleted by `forget` leave the model within 1 s

    def _handle_utterance(self, utt: Utterance, watch: Stopwatch) -> Outcome:
        """listen -> transcribe -> predict -> decide -> act/ask -> record (docs/loop.md)."""
        if self.talkback is not None and self.talkback.is_echo(utt, self.clock()):
            return own_voice(self, utt, watch)
        try:
            asr = self._listen(utt)
            with watch.stage("asr"):
                transcript = transcribe(asr, utt)
            text = usable_text(transcript, utt, self.settings.asr.max_transcript_chars)
        except _Rejected as rejected:
            if utt.stream is not None:
                utt.stream.cancel()
            return error_row(self, rejected, watch, utt)
        if self.talkback is not None and (answered := spoken_answer(self, text, utt, watch)):
            return answered
        with watch.stage("model"):
            predicted = self.worker.predict_all(text)  # one snapshot: predictions and version
        preds = predicted.devices
        lead = device_outcomes.lead_device(preds)
        iid = self._record_prediction(text, transcript, preds[lead], predicted.version, watch)
        device_outcomes.record_predictions(self.store, iid, preds)
        steps, now = self._decide(iid, text, preds)
        with watch.stage("actuator"):
            driven = self._act_or_ask(iid, steps, now)
        if driven and utt.endpoint_at is not None:
            watch.after_speech = utt.tail_ms + (time.perf_counter() - utt.endpoint_at) * 1e3
        # the relay first: what this input closed is labelled (and learned) after it
        self._resolve_all(self._take_deferred() + steps.closed)
        return self._record_decision(iid, utt, text, preds, lead, steps, driven, watch.stop())

    def _listen(self, utt: Utterance) -> AsrBackend:
        """The ASR for this utterance (the text source's own for text); rejects empty audio."""
        if utt.text is not None:
            return self.text_asr
        if len(utt.samples) == 0:
            msg = f"empty utterance: no speech in the audio ({utt.path or utt.source})"
            log.error(msg)
            raise _Rejected(msg)
        if self.asr is None:
            msg = "no ASR backend configured for audio input"
            log.error(msg)
            raise _Rejected(msg)
        if utt.truncated:
            log.warning("utterance was cut at max_utterance_ms; transcribing what was kept")
        return self.asr

    def _record_prediction(self, text: str, tr: Transcript, pred: SwitchPrediction,
                           version: str | None, watch: Stopwatch) -> int:
        """The interaction's row, stored before the policy runs (an unstored one is not acted
        on); ``version``: the model version `pred` came from."""
        return self.store.add_interaction(
            ts=self.wall(), transcript=text, asr_backend=tr.backend,
            asr_confidence=tr.confidence, prediction=pred.action,
            confidence=_clamp(pred.confidence), distribution=pred.distribution,
            model_version=version, latency_audio_ms=watch.ms["audio"],
            latency_asr_ms=watch.ms["asr"], latency_model_ms=watch.ms["model"])

    def _decide(self, iid: int, text: str, preds: dict[str, SwitchPrediction]) -> tuple[Steps, float]:
        """Each device's policy step for this utterance (closing the previous interaction: its
        ask light goes out now, its labels are stored and learned after the relay), and when."""
        now = self.clock()
        junk = too_little_content(text, min_letters=self.settings.policy.min_content_letters)
        predictions = device_outcomes.policy_predictions(preds, junk)
        relays = {n: self.devices.relays[n].is_on for n in self.names}
        steps = self.policies.on_utterance(iid, predictions, relays, now)
        self._light_out(steps.closed)
        self._open_texts[iid] = text
        return steps, now

    def _act_or_ask(self, iid: int, steps: Steps, now: float) -> dict[str, Action]:
        """Drive the relays and/or ask (and say so, with talk-back); returns the states driven,
        by device (refused: left out; nothing is driven after a stop)."""
        driven = device_outcomes.drive_and_ask(self.devices, self.policies, iid, steps, now,
                                               stopping=self.stop_flag.is_set())
        if self.talkback is not None:
            speak(self, steps, driven, now)
        return driven

    def _record_decision(self, iid: int, utt: Utterance, text: str, preds: dict[str, SwitchPrediction],
                         lead: str, steps: Steps, driven: dict[str, Action], latency: Latency) -> Outcome:
        """The decision, the action and the rest of the latency into the (lead device's) row."""
        audio_path = keep_audio(self.settings, iid, utt)
        decision, action = steps.steps[lead].decision, driven.get(lead)
        self.store.update_interaction(
            iid, decision=decision.value, action=action.value if action else None,
            latency_actuator_ms=latency.actuator, latency_total_ms=latency.total,
            **({"audio_path": audio_path} if audio_path else {}))
        device_outcomes.record_decisions(self.store, iid, steps, driven)
        pred = preds[lead]
        confidence = _clamp(pred.confidence)
        # transcripts reach the log (journald) only when asked for: `forget` cannot reach it
        shown = repr(text) if self.settings.paths.log_transcripts else f"({len(text)} characters)"
        several = len(self.names) > 1
        log.info("#%d %s -> %s%s %.2f -> %s%s", iid, shown, f"{lead} " if several else "", pred.action,
                 confidence, decision.value, f" {action.value}" if action else "")
        log.debug("#%d transcript %r", iid, text)
        return Outcome(iid, text, decision, pred.action, confidence, action, None, latency,
                       devices=device_outcomes.results(preds, steps, driven) if several else None)

    def storage_failed(self, what: str, exc: Exception) -> None:
        """One ERROR line (no traceback: nothing is wrong with the code), counted."""
        self.storage_failures += 1
        self.last_storage_error = f"{what} not stored: {exc}"
        log.error("%s", self.last_storage_error)

    # --- time and the switch --------------------------------------------------------------
    def pump(self) -> list[DeviceResolution]:
        """Apply the person's flips and expire windows; returns what it resolved."""
        with self._lock:
            if self._stopped:
                return []
            resolved = self._switch_and_time()
            self._resolve_all(resolved)
            self.worker.poll()  # rows deleted by `forget` leave the model within 1 s
            return resolved

    def _switch_and_time(self) -> list[DeviceResolution]:
        """The person's flips (they drive their device's relay) and expired windows, into the
        policies; returns what that resolved (to label with `_resolve_all`)."""
        if self._stopped:
            return []
        now = self.clock()
        resolved: list[DeviceResolution] = []
        several = len(self.names) > 1
        for name in self.names:
            for flip in self.devices.switches[name].poll(until=now):
                log.info("%s%s: person wants %s", "remote command" if flip.remote else "switch flipped",
                         f" of {name!r}" if several else "", "ON" if flip.desired else "OFF")
                resolved += self.policies.on_flip(name, flip.desired, flip.ts, remote=flip.remote)
                self._manual(name, flip.desired, flip.ts)
        resolved += self.policies.tick(now)
        for name, desired in list(self._pending_manual.items()):
            if now >= self.devices.relays[name].next_allowed(now):
                self._manual(name, desired, now)
        self._light_out(resolved)
        return resolved

    def _take_deferred(self) -> list[DeviceResolution]:
        out, self.deferred = self.deferred, []
        return out

    def _light_out(self, resolutions: list[DeviceResolution]) -> None:
        """The ask light goes out when an asked interaction is resolved (several devices: that
        device's signal, and every signal once no device's window asks any more)."""
        device_outcomes.light_out(self.devices, self.policies, resolutions)

    def _manual(self, name: str, desired: bool, now: float) -> None:
        """The person's switch drives its relay (retried later if the rate limit refuses)."""
        if self.devices.relays[name].set(desired, now):
            self._pending_manual.pop(name, None)
        else:
            self._pending_manual[name] = desired
            log.warning("switch flip to %s delayed by the relay rate limit",
                        "ON" if desired else "OFF")

    def _resolve_all(self, resolutions: list[DeviceResolution]) -> None:
        """Label (the database, then the learner) or observe each resolved interaction: each
        device's label as its window closes, the utterance's when every device's has."""
        for res in device_outcomes.record_labels(self.store, self.policies, resolutions,
                                                 self.label_time, self.storage_failed):
            try:
                self._resolve(res)
            except StorageError as exc:  # the label was not stored, so not learned either
                self.storage_failed(f"label of interaction {res.key}", exc)
            except Exception as exc:  # one failing label must not stop the loop
                if storage_failure(exc):
                    # the label is in the database; the model version it led to is not on disk
                    self.storage_failed(f"model checkpoint after the label of interaction "
                                         f"{res.key}", exc)
                    continue
                log.exception("could not apply the resolution of interaction %s", res.key)

    def _resolve(self, r: Resolved) -> None:
        self.resolutions.append(r)
        text = self._open_texts.pop(r.key, None)
        log.info("#%s resolved: %s (%s)", r.key,
                 r.label.value if r.label else "no label", r.reason)
        if text is None:
            text = self.store.get(r.key).transcript
        if r.label is None or r.source is None:
            self.worker.observe(text)
            return
        label_ts = self.label_time(r.ts)
        # the database first (the source of truth), then the learner (maybe on its thread)
        self.store.set_label(r.key, r.label.value, r.source.value, ts=label_ts)
        device_labels = r.device_labels if len(self.names) > 1 else None
        self.worker.label(int(r.key), text, r.label.value, r.source.value, device_labels=device_labels)

    def label_time(self, ts: float) -> float:
        """The wall-clock time of loop-clock time ``ts`` (when a label was given)."""
        return self.wall() - (self.clock() - ts)

    def _learning_failed(self, what: str, exc: BaseException) -> None:
        """A learner task failed on the worker thread (asynchronous worker)."""
        if storage_failure(exc):  # the label is in the database; the checkpoint is not on disk
            self.storage_failed(f"model checkpoint after the {what}", exc)
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
                closed = self.policies.close(self.clock())
                self._light_out(closed)
                self._resolve_all(closed)
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


def told(watchers: list[Callable[[Outcome], None]], outcome: Outcome) -> Outcome:
    """Tell each watcher the outcome (each must return at once; a failing one is logged)."""
    for watcher in list(watchers):
        try:
            watcher(outcome)
        except Exception:
            log.exception("a watcher of the loop's outcomes failed")
    return outcome


def keep_audio(settings: Settings, iid: int, utt: Utterance) -> str | None:
    """Write the utterance's audio (0600 in a 0700 dir) only when configured."""
    if not settings.paths.keep_audio or len(utt.samples) == 0:
        return None
    try:
        directory = settings.paths.audio_path()
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        if stat.S_IMODE(directory.stat().st_mode) != 0o700:
            directory.chmod(0o700)
        path = directory / f"{iid:08d}.wav"
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600))
        os.chmod(path, 0o600)
        write_wav(path, utt.samples, utt.sample_rate)
        return str(path)
    except OSError as exc:
        log.error("could not keep the audio of interaction %d: %s", iid, exc)
        return None


def error_row(controller: Controller, rejected: _Rejected, watch: Stopwatch,
              utt: Utterance | None = None) -> Outcome:
    """An input without a usable transcript: stored with its error, never seen by the policy."""
    latency = watch.stop()
    error = rejected.error
    iid: int | None = None
    try:
        iid = controller.store.add_interaction(ts=controller.wall(), transcript="",
                                         asr_backend=rejected.asr_backend, error=error,
                                         model_version=controller.worker.version,
                                         **latency.columns())
        if utt is not None and rejected.keep_audio:
            path = keep_audio(controller.settings, iid, utt)
            if path:
                controller.store.update_interaction(iid, audio_path=path)
    except StorageError as exc:
        controller.storage_failed("failed interaction", exc)
        return Outcome(iid, "", None, None, None, None, error, latency, stored=False)
    except Exception:
        log.exception("could not store the failed interaction (%s)", error)
        return Outcome(iid, "", None, None, None, None, error, latency, stored=False)
    return Outcome(iid, "", None, None, None, None, error, latency)


# --- talk-back (edge_plm.voice.talkback) ----------------------------------------------------
def speak(controller: Controller, steps: Steps, driven: dict[str, Action], now: float) -> None:
    """The question for each device the steps ask about ("Lamp on?" where there are several
    devices); the confirmation (if configured) for each device driven."""
    several = len(controller.names) > 1
    open_ = controller.policies.open
    for name in steps.asks:
        o = open_.get(name)
        if o is not None and o.decision is Decision.ASK:
            controller.talkback.ask(o.prediction.action.value, name if several else None, now)
    for name, action in driven.items():
        controller.talkback.acted(action.value, name if several else None, now)


def own_voice(controller: Controller, utt: Utterance, watch: Stopwatch) -> Outcome:
    """Heard while the device spoke (or in the guard after): dropped, counted, no row."""
    if utt.stream is not None:
        utt.stream.cancel()
    log.info("dropped %.0f ms of audio heard while the device spoke (own voice; %d so far)",
             utt.duration_ms, controller.talkback.dropped)
    return Outcome(None, "", None, None, None, None, "own voice: dropped", watch.stop())


def spoken_answer(controller: Controller, text: str, utt: Utterance,
                  watch: Stopwatch) -> Outcome | None:
    """A yes/no while an ask is open: the policy keeps it as the ask's label (a flip before
    the window ends wins); a yes drives the relay to the asked state. A short utterance that
    is neither an answer nor a likely command (`Talkback.unclear`) is a misheard answer: no
    row, the ask stays open. None: an ordinary utterance (it supersedes the ask)."""
    asking = [(n, o) for n, o in controller.policies.open.items()
              if o.decision is Decision.ASK and o.answer is None]
    if not asking:
        return None
    name, o = asking[0]  # the device the question was about (the first still in doubt)
    several = len(controller.names) > 1
    yes = controller.talkback.answer(text, o.prediction.action.value, utt)
    if yes is None:
        if not controller.talkback.unclear(text, controller.worker.predict(text).action):
            return None
        log.info("#%s: not understood as an answer; the ask stays open", o.key)
        return Outcome(o.key, text, None, None, None, None, "unclear answer", watch.stop())
    now = controller.clock()
    controller.deferred += controller.policies.on_answer(name, yes, now)
    driven = None
    if controller.devices.led.asking:
        controller.devices.done(name if several else None)
    with watch.stage("actuator"):
        if yes and not controller.stop_flag.is_set():
            if controller.devices.drive(o.prediction.action.value, name, now=now):
                driven = o.prediction.action
            else:
                log.warning("interaction %s: relay %s refused %s after a spoken yes (rate "
                            "limit)", o.key, name, o.prediction.action.value)
    if driven is not None:
        if several:  # that device's outcome row
            controller.store.update_device_outcomes(o.key, {name: {"action": driven.value}})
        else:
            controller.store.update_interaction(o.key, action=driven.value)
    log.info("#%s spoken answer%s: %s", o.key, f" ({name})" if several else "", "yes" if yes else "no")
    return Outcome(o.key, text, None, None, None, driven, None, watch.stop(), answer=yes)


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
