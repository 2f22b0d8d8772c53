"""Audio in: WAV reading, resampling and the three utterance sources.

Everything the ASR sees is 16 kHz mono int16, whatever the file or the sound card delivers,
so this module owns the conversions (channels, sample width, rate) in one place.

Sources share one tiny interface: iterate over them to get `Utterance`s.
  * `WavSource`        each WAV file is one utterance (optionally trimmed of silence);
  * `TextSource`       each line is an utterance with a transcript and no audio (tests, replay);
  * `MicrophoneSource` a live `sounddevice` stream cut into utterances by an `Endpointer`.

`sounddevice` is imported only inside `MicrophoneSource`, so a machine without PortAudio
runs everything else.
"""

from __future__ import annotations

import logging
import math
import struct
import time
import wave
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # imported lazily at run time (endpoint.py imports this module)
    from edge_plm.voice.endpoint import Endpointer

log = logging.getLogger(__name__)

TARGET_RATE = 16000
DEFAULT_MAX_SECONDS = 600.0  # a WAV longer than this is refused (memory on a 2 GB board)


class AudioError(Exception):
    """Audio could not be read, converted or captured; the message says which file/device and why."""


@dataclass
class Utterance:
    """One thing the person said: 16 kHz mono int16 samples, or a transcript for text sources.

    `audio_ms` is the time spent producing this utterance (reading + converting a file, or
    capturing + endpointing for the microphone), part of the per-interaction latency breakdown.
    `clipped` is the fraction of samples at full scale; `truncated` is True when the endpointer
    cut the utterance at the maximum length (long speech or a stuck microphone).
    """

    samples: np.ndarray
    sample_rate: int = TARGET_RATE
    source: str = ""
    path: str | None = None
    text: str | None = None
    audio_ms: float = 0.0
    clipped: float = 0.0
    truncated: bool = False

    @property
    def duration_ms(self) -> float:
        return 1000.0 * len(self.samples) / self.sample_rate if self.sample_rate else 0.0


# ---------------------------------------------------------------------------------------------
# Conversions


def clipped_fraction(samples: np.ndarray) -> float:
    """Fraction of int16 samples at (or within one step of) full scale: a sign of clipping."""
    if len(samples) == 0:
        return 0.0
    return float(np.count_nonzero(np.abs(samples.astype(np.int32)) >= 32767) / len(samples))


def _to_float(samples: np.ndarray) -> np.ndarray:
    return samples.astype(np.float64)


def _to_int16(x: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(x), -32768, 32767).astype(np.int16)


def resample(samples: np.ndarray, src_rate: int, dst_rate: int = TARGET_RATE) -> np.ndarray:
    """Band-limited resampling of int16 mono audio by windowed-sinc interpolation.

    Each output sample is a Kaiser-windowed sinc sum spanning 16 zero crossings either side, with
    the low-pass cutoff at the lower of the two Nyquist frequencies, i.e. a polyphase filter
    (one precomputed row per output phase) without materialising the upsampled signal. So
    44.1 kHz -> 16 kHz does not alias, which plain linear interpolation would (and that hurts
    ASR). Any pair of rates; cost O(len * 32 * max(1, src/dst)), in chunks to bound memory.
    """
    if src_rate <= 0 or dst_rate <= 0:
        raise AudioError(f"invalid sample rates for resampling: {src_rate} -> {dst_rate}")
    samples = np.asarray(samples)
    if src_rate == dst_rate or len(samples) == 0:
        return samples.astype(np.int16, copy=False)
    x = _to_float(samples)
    n_out = int(round(len(x) * dst_rate / src_rate))
    cutoff = min(1.0, dst_rate / src_rate)  # fraction of the input Nyquist kept
    half_taps = int(np.ceil(16 / cutoff))  # 16 zero crossings of the (widened) sinc each side
    offsets = np.arange(-half_taps, half_taps + 1)
    # Output n sits at input position n*src/dst = base + phase/dst (integer arithmetic), and
    # only dst/gcd distinct phases exist: precompute one filter row per phase (polyphase table).
    g = math.gcd(src_rate, dst_rate)
    n_phases = dst_rate // g
    dist = (np.arange(n_phases) * g / dst_rate)[:, None] - offsets[None, :]
    beta, r = 8.6, half_taps + 1  # Kaiser window, evaluated continuously over +-r samples
    window = np.i0(beta * np.sqrt(np.clip(1.0 - (dist / r) ** 2, 0.0, None))) / np.i0(beta)
    table = cutoff * np.sinc(cutoff * dist) * window  # (n_phases, taps)
    pad = half_taps + 1
    padded = np.concatenate([np.zeros(pad), x, np.zeros(pad)])
    out = np.empty(n_out, dtype=np.float64)
    chunk = 8192
    for start in range(0, n_out, chunk):
        idx = np.arange(start, min(n_out, start + chunk), dtype=np.int64)
        num = idx * src_rate
        base, phase = num // dst_rate, (num % dst_rate) // g
        taps = np.clip(base[:, None] + offsets[None, :] + pad, 0, len(padded) - 1)
        out[idx] = np.einsum("ij,ij->i", padded[taps], table[phase])
    return _to_int16(out)


def _pcm_to_float(raw: bytes, sampwidth: int, channels: int, fmt: str = "pcm") -> np.ndarray:
    """Decode interleaved PCM/float bytes into a (frames, channels) float array in int16 units."""
    frame_bytes = sampwidth * channels
    usable = len(raw) - len(raw) % frame_bytes
    raw = raw[:usable]
    if fmt == "float":
        if sampwidth == 4:
            data = np.frombuffer(raw, dtype="<f4").astype(np.float64) * 32768.0
        elif sampwidth == 8:
            data = np.frombuffer(raw, dtype="<f8") * 32768.0
        else:
            raise AudioError(f"unsupported float sample width: {sampwidth * 8} bits")
    elif sampwidth == 1:  # 8-bit WAV is unsigned
        data = (np.frombuffer(raw, dtype=np.uint8).astype(np.float64) - 128.0) * 256.0
    elif sampwidth == 2:
        data = np.frombuffer(raw, dtype="<i2").astype(np.float64)
    elif sampwidth == 3:
        b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        v = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        v = np.where(v >= 1 << 23, v - (1 << 24), v)
        data = v.astype(np.float64) / 256.0
    elif sampwidth == 4:
        data = np.frombuffer(raw, dtype="<i4").astype(np.float64) / 65536.0
    else:
        raise AudioError(f"unsupported PCM sample width: {sampwidth * 8} bits")
    return data.reshape(-1, channels)


_WAVE_FORMAT_PCM = 0x0001
_WAVE_FORMAT_FLOAT = 0x0003
_WAVE_FORMAT_EXTENSIBLE = 0xFFFE


def _read_riff(path: Path) -> tuple[bytes, int, int, int, str]:
    """Minimal RIFF reader for what `wave` (Python 3.11) refuses: WAVE_FORMAT_EXTENSIBLE and
    IEEE float files, which sox and many recorders write for 24/32-bit audio.
    Returns (raw data, sample width in bytes, channels, rate, "pcm"|"float")."""
    data = path.read_bytes()
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise AudioError(f"{path}: not a WAV file (no RIFF/WAVE header)")
    pos, fmt_chunk, pcm = 12, None, None
    while pos + 8 <= len(data):
        cid, size = data[pos : pos + 4], struct.unpack("<I", data[pos + 4 : pos + 8])[0]
        body = data[pos + 8 : pos + 8 + size]
        if cid == b"fmt ":
            fmt_chunk = body
        elif cid == b"data":
            pcm = body
        pos += 8 + size + (size & 1)
    if fmt_chunk is None or len(fmt_chunk) < 16:
        raise AudioError(f"{path}: corrupt WAV file (no valid 'fmt ' chunk)")
    if pcm is None:
        raise AudioError(f"{path}: corrupt WAV file (no 'data' chunk)")
    tag, channels, rate, _, _, bits = struct.unpack("<HHIIHH", fmt_chunk[:16])
    if tag == _WAVE_FORMAT_EXTENSIBLE:
        if len(fmt_chunk) < 26:
            raise AudioError(f"{path}: corrupt WAV file (short extensible 'fmt ' chunk)")
        tag = struct.unpack("<H", fmt_chunk[24:26])[0]  # first two bytes of the subformat GUID
    if tag == _WAVE_FORMAT_PCM:
        kind = "pcm"
    elif tag == _WAVE_FORMAT_FLOAT:
        kind = "float"
    else:
        raise AudioError(f"{path}: unsupported WAV encoding (format tag 0x{tag:04x}); need PCM or float")
    if channels < 1 or rate < 1 or bits % 8 or bits == 0:
        raise AudioError(f"{path}: corrupt WAV header (channels={channels}, rate={rate}, bits={bits})")
    return pcm, bits // 8, channels, rate, kind


def read_wav(path: str | Path, max_seconds: float | None = DEFAULT_MAX_SECONDS) -> tuple[np.ndarray, int]:
    """Read a WAV file as 16 kHz mono int16. Returns (samples, original sample rate).

    Accepts 8/16/24/32-bit PCM and 32/64-bit float, any channel count (averaged to mono) and any
    rate (resampled with `resample`). Raises AudioError with the file name and the reason for a
    missing, empty, corrupt, non-WAV, zero-length or over-long (> max_seconds) file.
    """
    path = Path(path)
    if not path.exists():
        raise AudioError(f"{path}: file not found")
    if not path.is_file():
        raise AudioError(f"{path}: not a regular file")
    if path.stat().st_size == 0:
        raise AudioError(f"{path}: empty file (0 bytes), not a WAV recording")
    try:
        with wave.open(str(path), "rb") as w:
            channels, sampwidth, rate, nframes = (
                w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes())
            if max_seconds is not None and rate > 0 and nframes / rate > max_seconds:
                raise AudioError(f"{path}: {nframes / rate:.0f} s long, more than the {max_seconds:.0f} s allowed")
            raw = w.readframes(nframes)
        kind = "pcm"
    except wave.Error as exc:
        if "unknown format" not in str(exc):
            msg = str(exc)
            if "RIFF" in msg or "WAVE" in msg:
                raise AudioError(f"{path}: not a WAV file ({msg})") from exc
            raise AudioError(f"{path}: corrupt WAV file ({msg})") from exc
        raw, sampwidth, channels, rate, kind = _read_riff(path)  # extensible / float WAV
    except (EOFError, struct.error, RuntimeError) as exc:  # wave's chunk reader raises a bare RuntimeError
        raise AudioError(f"{path}: corrupt or truncated WAV header ({exc or type(exc).__name__})") from exc
    except OSError as exc:
        raise AudioError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    if channels < 1 or rate < 1:
        raise AudioError(f"{path}: corrupt WAV header (channels={channels}, rate={rate})")
    try:
        frames = _pcm_to_float(raw, sampwidth, channels, kind)
    except AudioError as exc:
        raise AudioError(f"{path}: {exc}") from exc
    if frames.shape[0] == 0:
        raise AudioError(f"{path}: WAV file contains no audio frames (zero length)")
    if max_seconds is not None and frames.shape[0] / rate > max_seconds:
        raise AudioError(f"{path}: {frames.shape[0] / rate:.0f} s long, more than the {max_seconds:.0f} s allowed")
    mono = frames.mean(axis=1) if channels > 1 else frames[:, 0]
    samples = _to_int16(mono)
    if rate != TARGET_RATE:
        samples = resample(samples, rate, TARGET_RATE)
    return samples, rate


def write_wav(path: str | Path, samples: np.ndarray, rate: int = TARGET_RATE) -> None:
    """Write int16 mono samples as a PCM WAV (used for keeping audio, tests and tools)."""
    samples = np.asarray(samples, dtype=np.int16)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples.astype("<i2").tobytes())


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

    def __init__(self, lines: Iterable[str | bytes]) -> None:
        self.lines = lines

    def __iter__(self) -> Iterator[Utterance]:
        for n, line in enumerate(self.lines, 1):
            if isinstance(line, bytes):
                try:
                    line = line.decode("utf-8")
                except UnicodeDecodeError as exc:
                    log.warning("text line %d is not valid UTF-8 (%s); undecodable bytes replaced", n, exc.reason)
                    line = line.decode("utf-8", errors="replace")
            text = line.strip()
            if text:
                yield Utterance(samples=np.zeros(0, dtype=np.int16), source="text", text=text)


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
    """

    def __init__(self, device: str | int | None = None, rate: int = TARGET_RATE, block_ms: int = 30,
                 endpointer: Endpointer | None = None) -> None:
        self.device = _parse_device(device)
        self.rate = rate
        self.block_ms = block_ms
        self.endpointer = endpointer
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
            from edge_plm.voice.endpoint import Endpointer  # noqa: PLC0415 - avoids an import cycle
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
                while not self._closed:
                    data, overflowed = stream.read(block)
                    if overflowed:
                        log.warning("audio input overflow: samples were dropped (CPU too busy?)")
                    segments = endpointer.feed(np.asarray(data, dtype=np.int16).reshape(-1))
                    now = time.perf_counter()
                    for seg in segments:
                        samples = resample(seg.samples, self.capture_rate, TARGET_RATE)
                        t0 = started if started is not None else now - seg.duration_ms / 1000.0
                        yield Utterance(samples=samples, source="microphone",
                                        audio_ms=(time.perf_counter() - t0) * 1000.0,
                                        clipped=seg.clipped, truncated=seg.truncated)
                        started = None
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
