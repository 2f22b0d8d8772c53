"""The service (`edge-plm run`): the input from the settings (microphone or stdin), GPIO, the
learning loop, and systemd's notifications (READY, WATCHDOG, STATUS, STOPPING), until SIGTERM
or SIGINT."""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_plm.bridge import start_bridge, stop_bridge
from edge_plm.loop.undo import undo_handler
from edge_plm.bridge.status import status_path
from edge_plm.loop import stopping
from edge_plm.learning.learner import Learner
from edge_plm.loop.controller import Controller
from edge_plm.loop.house import open_learner, open_loop
from edge_plm.device import Devices, PinFactoryError
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.config.starting_model import StartError
from edge_plm.loop.stopping import StopFlag
from edge_plm.store import ReplayStore, StorageError
from edge_plm.loop.household_ear import CMN_FILE, keep_cepstral_mean, restore_cepstral_mean
from edge_plm.voice.asr import AsrBackend, AsrError, make_asr
from edge_plm.voice.audio import AudioError, MicrophoneSource, TextSource
from edge_plm.voice.endpoint import Endpointer
from edge_plm.errors import EdgePlmError

log = logging.getLogger("edge_plm.loop.service")

# what keeps the service from starting (or running on): the person has something to fix
_CANNOT_RUN = (AsrError, AudioError, PinFactoryError, StartError, CheckpointError)


class CannotStart(EdgePlmError):
    """The service cannot run with these settings; `code` is the exit code (2: a bad setting)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def sd_notify(message: str) -> bool:
    """Send `message` (e.g. ``READY=1``) to systemd's $NOTIFY_SOCKET; False if not set."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):  # abstract namespace socket
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(message.encode())
    except OSError as exc:
        log.error("sd_notify(%s) to %s failed: %s", message, os.environ["NOTIFY_SOCKET"], exc)
        return False
    return True


class Notifier:
    """systemd's watchdog and status line for the loop (called on every turn of it).

    ``WATCHDOG=1`` at least every ``WatchdogSec/4`` (systemd sets $WATCHDOG_USEC; at most once a
    second when it is not set), and ``STATUS=`` whenever the status line changes: what the loop
    listens to, how many inputs it handled, the model version, and storage failures (disk full,
    read-only database) when there are any. Called from the pump thread (every 100 ms) and after
    every input, so a loop stuck in one input (which holds the lock the pump needs) stops the
    heartbeat and systemd restarts the service.
    """

    def __init__(self, controller, source_name: str, clock=time.monotonic) -> None:
        self.controller = controller
        self.source_name = source_name
        self._clock = clock
        self._lock = threading.Lock()
        usec = os.environ.get("WATCHDOG_USEC", "")
        watchdog_s = int(usec) / 1e6 if usec.isdigit() and int(usec) > 0 else None
        self.interval = min(1.0, watchdog_s / 4) if watchdog_s else 1.0
        self._last_beat = -float("inf")
        self._last_status: str | None = None
        self._broken = False

    def status(self) -> str:
        c = self.controller
        text = (f"listening ({self.source_name}); {c.handled} inputs handled; model "
                f"{c.learner.version or 'empty'}")
        if c.storage_failures:
            text += f"; ERROR: {c.storage_failures} not stored (last: {c.last_storage_error})"
        return " ".join(text.split())

    def __call__(self) -> None:
        with self._lock:
            now = self._clock()
            status = self.status()
            parts = []
            if now - self._last_beat >= self.interval:
                parts.append("WATCHDOG=1")
                self._last_beat = now
            if status != self._last_status:
                parts.append(f"STATUS={status}")
                self._last_status = status
            if parts and not self._broken and not sd_notify("\n".join(parts)):
                self._broken = bool(os.environ.get("NOTIFY_SOCKET"))  # logged once, not per beat


@dataclass
class Opened:
    """What the service's start-up opened so far, in order (closed in reverse on the way out);
    None: not opened (yet)."""

    learner: Learner | None = None
    asr: AsrBackend | None = None
    source: Any = None  # TextSource, MicrophoneSource or tryout.FileSession
    devices: Devices | None = None
    controller: Controller | None = None
    bridge: Any = None  # the MQTT bridge (None: off)
    cmn_path: Path | None = None  # where the ear's cepstral mean is kept across restarts


def run_service(settings, stop: StopFlag | None = None, audio_files: list | None = None,
                audio_gap_s: float = 3.0) -> None:
    """Listen, act and learn until a signal (or the end of stdin for the text source, or of
    `audio_files`, played `audio_gap_s` apart: a `tryout.FileSession` source, on simulated pins,
    recording no relay state).

    `stop` is the flag SIGTERM/SIGINT set (`edge_plm.loop.stopping.install`; installed here when not
    given). It is checked between the start-up steps (a signal during start-up is a clean
    stop), by the loop between inputs and before it drives the relay; after it, the open
    interaction is closed, the labels learned since the last version are saved and the relay
    goes to its stop state (`Controller.stop`). Raises `CannotStart` when the settings cannot
    run (no microphone, no GPIO, a bad starting model, ...) and `StorageError` when the loop
    ran but some inputs could not be stored."""
    if stop is None:
        with stopping.handling() as flag:
            return run_service(settings, flag, audio_files, audio_gap_s)
    if _stopped_starting(stop, "opening the replay buffer"):
        return
    store = ReplayStore(settings.paths.database_path())
    parts = Opened()  # what start-up opened so far, closed in reverse on the way out
    try:
        _start_up(settings, store, stop, parts, audio_files, audio_gap_s)
        if parts.controller is not None:
            if audio_files:
                parts.source.attach(parts.controller)
            _listen(parts.controller, parts.source, stop, "wav" if audio_files else settings.audio.source)
            if stop.is_set():
                log.info("%s: stopping (no input is handled and nothing driven after it)",
                         stop.reason())
    except _CANNOT_RUN as exc:  # `edge-plm run` prints it once, as `error: ...`
        raise CannotStart(f"cannot start: {exc}") from exc
    finally:
        sd_notify("STOPPING=1")
        _shut_down(parts)
        store.close()
    controller = parts.controller
    if controller is not None and controller.storage_failures:
        # the loop kept the switch working, but must not end as if all was stored
        raise StorageError(f"{controller.storage_failures} interaction(s) or label(s) of "
                           f"{controller.handled} input(s) could not be stored (last: "
                           f"{controller.last_storage_error})")


def _stopped_starting(stop: StopFlag, before: str) -> bool:
    if stop.is_set():
        log.info("%s during start-up (before %s): stopping", stop.reason(), before)
    return stop.is_set()


def _start_up(settings, store: ReplayStore, stop: StopFlag, parts: Opened, audio_files: list | None = None,
              audio_gap_s: float = 3.0) -> None:
    """The slow start-up, step by step, each step skipped once `stop` is set."""
    parts.learner = open_learner(settings, store)
    if _stopped_starting(stop, "opening the input"):
        return
    parts.asr, parts.source = _open_input(settings, stop, audio_files, audio_gap_s)
    parts.cmn_path = settings.paths.state() / CMN_FILE
    restore_cepstral_mean(parts.asr, parts.cmn_path)  # the room and microphone stay
    if hasattr(parts.source, "close"):
        stop.on_set(parts.source.close)  # the microphone loop ends at its next block
    if _stopped_starting(stop, "opening the GPIO"):
        return
    parts.devices = Devices.from_config(settings.gpio, mock_fallback=False,
                                           state_store=None if audio_files else store,
                                           devices=settings.devices)
    if _stopped_starting(stop, "starting the loop"):
        return
    talkback = _talkback(settings)  # before the learner's thread: a failure here leaves none behind
    # learning on its own thread: the relay never waits for it (docs/loop.md)
    parts.controller = open_loop(settings, store, parts.learner, parts.devices, parts.asr,
                                    background=True, talkback=talkback)
    # the optional home-hub bridge (``[mqtt]``): None when off; never in the loop's way
    parts.bridge = start_bridge(settings, parts.devices,
                                   status_path(settings.paths.database_path()),
                                   parts.controller.watchers,
                                   model_version=lambda: parts.controller.worker.version,
                                   timers=parts.controller.timed.pending,
                                   undo=undo_handler(parts.controller.worker, parts.controller.household))


def _talkback(settings):
    """The spoken questions (``[talkback] enabled``), prompts synthesised now and cached under
    the state dir; None when off. A backend that cannot start is a start-up error."""
    if not settings.talkback.enabled:
        return None
    from edge_plm.voice.talkback import make_talkback  # noqa: PLC0415
    from edge_plm.voice.speech import SpeechError  # noqa: PLC0415

    try:
        tb = make_talkback(settings.talkback, time.monotonic,
                           cache_dir=settings.paths.state() / "prompts")
        tb.warm()
    except SpeechError as exc:
        raise CannotStart(f"cannot start: talk-back: {exc} (or set [talkback] enabled = false)") from exc
    return tb


def _shut_down(parts: Opened) -> None:
    """Close what start-up opened: the controller (open interaction, pending labels saved,
    relay to its stop state), or, stopped before it existed, the devices and the learner."""
    if parts.cmn_path is not None:
        keep_cepstral_mean(parts.asr, parts.cmn_path)
    if parts.controller is not None:
        try:
            parts.controller.stop()
        finally:
            stop_bridge(parts.bridge)
        return
    try:
        if parts.learner is not None:
            parts.learner.checkpoint_pending()
    finally:
        if parts.devices is not None:
            parts.devices.close()


def _open_input(settings, stop: StopFlag | None = None, audio_files: list | None = None, gap_s: float = 3.0):
    """(ASR or None, input source) of ``audio.source``: stdin text (read so that `stop` ends
    it), the microphone, or the given WAV files."""
    if audio_files:
        from edge_plm.loop.tryout import FileSession  # noqa: PLC0415 - only for run --audio

        asr = make_asr(settings.asr, settings.paths.models_path())
        return asr, FileSession(audio_files, Endpointer.from_config(settings.audio),
                                gap_s, sys.stdin, sys.stdout)
    if settings.audio.source == "text":
        return None, TextSource(sys.stdin, stop=stop)
    if settings.audio.source == "microphone":
        asr = make_asr(settings.asr, settings.paths.models_path())
        source = MicrophoneSource(settings.audio.device, settings.audio.sample_rate,
                                  settings.audio.block_ms, Endpointer.from_config(settings.audio),
                                  asr=asr)
        source.open()
        return asr, source
    raise CannotStart("audio.source = 'wav' needs the files: `edge-plm run --audio FILE...` "
                      "(or `edge-plm replay SESSION.jsonl`)", code=2)


def model_in_use(controller) -> str:
    """The model the loop predicts with, as the start-up log line names it."""
    if controller.learner.version:
        return f"version {controller.learner.version}"
    start = controller.settings.model.start
    return ("no version yet: an empty model" if start == "empty"
            else f"no version yet: the starting model {start}")


def _listen(controller, source, stop: threading.Event, source_name: str) -> None:
    """The loop, with systemd told it is ready; a failing microphone is retried every 5 s."""
    sd_notify("READY=1")
    notifier = Notifier(controller, source_name)
    notifier()
    log.info("ready: listening (%s source, model %s)", source_name, model_in_use(controller))
    while not stop.is_set():
        try:
            controller.run(source, stop, heartbeat=notifier)
            if source_name in ("text", "wav"):
                break  # stdin ended
        except AudioError as exc:  # the microphone failed: say so, retry
            log.error("audio input failed: %s; retrying in 5 s", exc)
            stop.wait(5.0)
            notifier()
