"""Audio in: the three utterance sources (conversions live in `edge_plm.voice.pcm`).

Sources share one tiny interface: iterate over them to get `Utterance`s.
  * `WavSource`        each WAV file is one utterance (optionally trimmed of silence);
  * `TextSource`       each line is an utterance with a transcript and no audio (tests, replay);
  * `MicrophoneSource` a live `sounddevice` stream cut into utterances by an `Endpointer`.

`sounddevice` is imported only inside `MicrophoneSource`, so a machine without PortAudio
runs everything else.
"""

from __future__ import annotations

import logging
import os
import select
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from edge_plm.voice.endpoint import Dropped, Endpointer, Segment, Speech
from edge_plm.voice.pcm import (  # noqa: F401 - re-exported: the audio API in one place
    DEFAULT_MAX_SECONDS, TARGET_RATE, AudioError, check_wav, clipped_fraction, read_wav, resample, write_wav)

log = logging.getLogger(__name__)


@dataclass
class Utterance:
    """One thing the person said: 16 kHz mono int16 samples, or a transcript for text sources.

    `audio_ms` is the time spent producing this utterance (reading + converting a file, or
    capturing + endpointing for the microphone), part of the per-interaction latency breakdown.
    `clipped` is the fraction of samples at full scale; `truncated` is True when the endpointer
    cut the utterance at the maximum length (long speech or a stuck microphone).

    Streaming: `stream` is the ASR session the samples were fed to while they arrived (None:
    not decoded yet); `endpoint_at` the `time.perf_counter()` when the endpoint was known and
    `tail_ms` the audio between the end of the last speech block and the endpoint (for a
    trimmed WAV file: the configured silence tail a microphone would have waited).
    """

    samples: np.ndarray
    sample_rate: int = TARGET_RATE
    source: str = ""
    path: str | None = None
    text: str | None = None
    audio_ms: float = 0.0
    clipped: float = 0.0
    truncated: bool = False
    stream: object | None = None  # edge_plm.voice.stream.AsrSession
    endpoint_at: float | None = None
    tail_ms: float = 0.0

    @property
    def duration_ms(self) -> float:
        return 1000.0 * len(self.samples) / self.sample_rate if self.sample_rate else 0.0


# ---------------------------------------------------------------------------------------------
# Sources


class WavSource:
    """Each WAV file is one utterance. With an endpointer, leading/trailing silence is trimmed.

    A bad file is logged (error level) and recorded in `self.errors` as (path, message), and
    iteration continues with the next file: one broken file must not stop a replay. Pass
    `skip_errors=False` to get the AudioError raised instead; `load(path)` always raises.
    """

    def __init__(self, paths: Iterable[str | Path], endpointer: Endpointer | None = None,
                 skip_errors: bool = True) -> None:
        self.paths = [Path(p) for p in paths]
        self.endpointer = endpointer
        self.skip_errors = skip_errors
        self.errors: list[tuple[str, str]] = []

    def load(self, path: str | Path) -> Utterance:
        """Read one file into an Utterance (trimmed if an endpointer was given)."""
        t0 = time.perf_counter()
        samples, _rate = read_wav(path)
        truncated = False
        if self.endpointer is not None:
            result = self.endpointer.trim_result(samples)
            samples, truncated = result.samples, result.truncated
        clip = clipped_fraction(samples)
        if clip > 0.01:
            log.warning("%s: %.1f%% of samples are clipped (input gain too high?)", path, 100 * clip)
        return Utterance(samples=samples, source="wav", path=str(path),
                         audio_ms=(time.perf_counter() - t0) * 1000.0, clipped=clip, truncated=truncated)

    def __iter__(self) -> Iterator[Utterance]:
        for path in self.paths:
            try:
                yield self.load(path)
            except AudioError as exc:
                if not self.skip_errors:
                    raise
                log.error("skipping audio file: %s", exc)
                self.errors.append((str(path), str(exc)))


class TextSource:
    """Each non-empty line is an utterance with a transcript and no audio (the `text` ASR
    backend passes it through). Bytes that are not UTF-8 are decoded with replacement
    characters and a warning, never a crash."""

    def __init__(self, lines: Iterable[str | bytes], stop: _Flag | None = None) -> None:
        self.lines = lines
        self.stop = stop

    def __iter__(self) -> Iterator[Utterance]:
        lines = self.lines
        if self.stop is not None and _fd_of(lines) is not None:
            lines = _lines_until(_fd_of(lines), self.stop)
        for n, line in enumerate(lines, 1):
            if isinstance(line, bytes):
                try:
                    line = line.decode("utf-8")
                except UnicodeDecodeError as exc:
                    log.warning("text line %d is not valid UTF-8 (%s); undecodable bytes replaced", n, exc.reason)
                    line = line.decode("utf-8", errors="replace")
            text = line.strip()
            if text:
                yield Utterance(samples=np.zeros(0, dtype=np.int16), source="text", text=text)


class _Flag(Protocol):
    def is_set(self) -> bool: ...


def _fd_of(stream: object) -> int | None:
    """The file descriptor of a real file / pipe / terminal (None for a list or StringIO)."""
    try:
        return stream.fileno()  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return None


def _lines_until(fd: int, stop: _Flag, poll_s: float = 0.1) -> Iterator[bytes]:
    """The lines read from `fd` until it ends or `stop` is set (checked every `poll_s` while
    nothing arrives): a blocking read of stdin cannot be woken by a signal, this can. What
    follows the last newline when `stop` is set is dropped (it came after the stop)."""
    pending = b""
    while not stop.is_set():
        ready, _, _ = select.select([fd], [], [], poll_s)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            if pending:
                yield pending
            return
        *complete, pending = (pending + chunk).split(b"\n")
        yield from complete


def _parse_device(device: str | int | None) -> str | int | None:
    if device is None or device == "":
        return None
    if isinstance(device, int):
        return device
    return int(device) if device.strip().isdigit() else device


class MicrophoneSource:
    """Live capture with `sounddevice.InputStream`, cut into utterances by an Endpointer.

    Captures at `rate` (16 kHz) when the device supports it, else at the device's default rate;
    endpointing then runs at the capture rate (its thresholds are in dBFS and milliseconds, so
    they do not depend on the rate) and each finished utterance is resampled to 16 kHz once.
    Iterates until `close()` is called or the stream fails (AudioError). `audio_ms` is the wall
    time from the first block of the utterance to its hand-over (speaking + silence tail).

    With `asr` (a backend with `session()`) and capture at 16 kHz, each utterance is decoded
    while it is spoken: the endpointer's `Speech` blocks go to an ASR session, and the utterance
    arrives with that `stream`, its `endpoint_at` and `tail_ms`, so only the finalisation is
    left. At another capture rate the utterance is resampled whole and decoded after the endpoint.
    """

    def __init__(self, device: str | int | None = None, rate: int = TARGET_RATE, block_ms: int = 30,
                 endpointer: Endpointer | None = None, asr=None) -> None:
        self.device = _parse_device(device)
        self.rate = rate
        self.block_ms = block_ms
        self.endpointer = endpointer
        self.asr = asr
        self.capture_rate: int | None = None
        self._closed = False
        self._sd = None

    @staticmethod
    def _import_sounddevice():
        try:
            import sounddevice  # noqa: PLC0415 - lazy on purpose: PortAudio may be missing
        except OSError as exc:  # raised when the PortAudio shared library is not installed
            raise AudioError(f"PortAudio library not available ({exc}); install libportaudio2 "
                             "or use the 'wav'/'text' audio source") from exc
        except ImportError as exc:
            raise AudioError(f"the 'sounddevice' package is not installed ({exc})") from exc
        return sounddevice

    def _choose_rate(self, sd) -> int:
        """The target rate if the device accepts it, else the device's default input rate."""
        try:
            sd.check_input_settings(device=self.device, samplerate=self.rate, channels=1, dtype="int16")
            return self.rate
        except Exception as exc:  # sounddevice raises PortAudioError or ValueError here
            try:
                info = sd.query_devices(self.device, "input")
            except Exception as exc2:
                raise AudioError(f"no usable input device {self.device!r}: {exc2}") from exc2
            fallback = int(info["default_samplerate"])
            log.info("input device %r does not take %d Hz (%s); capturing at %d Hz and resampling",
                     info.get("name", self.device), self.rate, exc, fallback)
            return fallback

    def open(self) -> None:
        """Import sounddevice and pick the capture rate; AudioError if no device is usable."""
        sd = self._import_sounddevice()
        try:
            sd.query_devices(self.device, "input")
        except Exception as exc:
            name = "(system default)" if self.device is None else repr(self.device)
            raise AudioError(f"no usable input device {name} ({exc}); "
                             "check `arecord -l` and audio.device in the config") from exc
        self.capture_rate = self._choose_rate(sd)
        self._sd = sd

    def close(self) -> None:
        self._closed = True

    def __iter__(self) -> Iterator[Utterance]:
        if self._sd is None:
            self.open()
        sd = self._sd
        if self.endpointer is None:
            # the settings' defaults (Endpointer's own are the same)
            endpointer = Endpointer(sample_rate=self.capture_rate, block_ms=self.block_ms)
        else:
            endpointer = self.endpointer.with_rate(self.capture_rate)
        block = max(1, int(self.capture_rate * self.block_ms / 1000))
        self._closed = False
        try:
            with sd.InputStream(device=self.device, samplerate=self.capture_rate, channels=1,
                                dtype="int16", blocksize=block) as stream:
                log.info("listening on %r at %d Hz", self.device or "default device", self.capture_rate)
                started: float | None = None
                streaming = self.asr is not None and self.capture_rate == TARGET_RATE
                session = None
                while not self._closed:
                    data, overflowed = stream.read(block)
                    if overflowed:
                        log.warning("audio input overflow: samples were dropped (CPU too busy?)")
                    events = endpointer.feed_events(np.asarray(data, dtype=np.int16).reshape(-1))
                    now = time.perf_counter()
                    for event in events:
                        if isinstance(event, Speech) and streaming:
                            session = session or self.asr.session()
                            session.feed(event.samples)
                        elif isinstance(event, Dropped) and session is not None:
                            session.cancel()
                            session = None
                        elif isinstance(event, Segment):
                            samples = resample(event.samples, self.capture_rate, TARGET_RATE)
                            t0 = started if started is not None else now - event.duration_ms / 1000.0
                            yield Utterance(samples=samples, source="microphone",
                                            audio_ms=(time.perf_counter() - t0) * 1000.0,
                                            clipped=event.clipped, truncated=event.truncated,
                                            stream=session, endpoint_at=now, tail_ms=event.tail_ms)
                            session, started = None, None
                    if started is None and endpointer.in_speech:
                        started = now - self.block_ms / 1000.0
        except sd.PortAudioError as exc:
            raise AudioError(f"audio capture failed on {self.device!r}: {exc}") from exc


def audio_files_in(directory: str | Path) -> list[Path]:
    """Sorted *.wav files of a directory (for `WavSource(audio_files_in(d))`)."""
    d = Path(directory)
    if not d.is_dir():
        raise AudioError(f"{d}: not a directory")
    return sorted(p for p in d.iterdir() if p.suffix.lower() == ".wav" and p.is_file())


__all__ = [
    "AudioError", "Utterance", "read_wav", "write_wav", "resample", "clipped_fraction",
    "WavSource", "TextSource", "MicrophoneSource", "audio_files_in", "TARGET_RATE",
]
