"""Speech output behind one small interface, like the ASR backends (`edge_plm.voice.asr`).

    backend.synthesize(text) -> np.ndarray   16 kHz mono int16 samples of `text` spoken
    player.play(samples) -> float            starts playing (does not wait); the duration in s

* `EspeakSpeech` the `espeak-ng` program (Debian package; install.sh installs it): the default.
* `PiperSpeech`  piper-tts and a voice model (.onnx), when the user installs them; optional.
* `NoSpeech`     ``none``: nothing is said (no output device); synthesize gives no samples.

`PromptCache` keeps every synthesised text in memory (and, with a directory, as a WAV file under
the state dir, so a restart does not synthesise again): the question "On?" is synthesised once.
`SoundDevicePlayer` plays through `sounddevice`, imported only when it is created, so a machine
without PortAudio runs everything else; `NullPlayer` plays nothing (replays, no device).
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from edge_plm.voice.pcm import TARGET_RATE, AudioError, read_wav, resample, write_wav
from edge_plm.errors import EdgePlmError

log = logging.getLogger(__name__)

BACKENDS = ("espeak-ng", "piper", "none")


class SpeechError(EdgePlmError, RuntimeError):
    """A speech backend could not be created or could not synthesise; the message says why."""


class SpeechBackend:
    """Base class: `synthesize` returns 16 kHz mono int16 samples; `name` identifies it."""

    name = "base"

    def synthesize(self, text: str) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    @property
    def key(self) -> str:
        """What distinguishes this backend's audio (the cache keys on it)."""
        return self.name


class NoSpeech(SpeechBackend):
    """``none``: the device says nothing (no output device)."""

    name = "none"

    def synthesize(self, text: str) -> np.ndarray:
        return np.zeros(0, dtype=np.int16)


class EspeakSpeech(SpeechBackend):
    """The `espeak-ng` program: `voice` (e.g. ``en-us``), `rate` in words per minute."""

    name = "espeak-ng"

    def __init__(self, voice: str = "en-us", rate: int = 175, program: str = "espeak-ng") -> None:
        self.program = shutil.which(program)
        if self.program is None:
            raise SpeechError(f"'{program}' not found on PATH (Debian: apt-get install espeak-ng)")
        self.voice, self.rate = voice, int(rate)

    @property
    def key(self) -> str:
        return f"{self.name}:{self.voice}:{self.rate}"

    def synthesize(self, text: str) -> np.ndarray:
        text = " ".join(text.split())
        if not text:
            raise SpeechError("nothing to say: empty text")
        with tempfile.TemporaryDirectory(prefix="edge-plm-say-") as tmp:
            out = Path(tmp) / "say.wav"
            run = subprocess.run([self.program, "-v", self.voice, "-s", str(self.rate),
                                  "-w", str(out), "--", text], capture_output=True, text=True)
            if run.returncode != 0 or not out.exists():
                raise SpeechError(f"espeak-ng failed (voice {self.voice!r}): "
                                  f"{run.stderr.strip() or 'no output'}")
            try:
                samples, _rate = read_wav(out)
            except AudioError as exc:
                raise SpeechError(f"espeak-ng wrote an unreadable WAV: {exc}") from exc
        return samples


class PiperSpeech(SpeechBackend):
    """piper-tts (``pip install piper-tts``) with a voice model file (``<voice>.onnx`` and its
    ``.onnx.json``); its output (usually 22.05 kHz) is resampled to 16 kHz."""

    name = "piper"

    def __init__(self, model: str | Path) -> None:
        model = Path(model).expanduser()
        if not model.is_file():
            raise SpeechError(f"piper voice model not found: {model} (download a voice, e.g. "
                              "en_US-lessac-low.onnx with its .onnx.json)")
        try:
            from piper import PiperVoice  # noqa: PLC0415 - optional, heavy
        except ImportError as exc:
            raise SpeechError(f"piper-tts is not installed ({exc}); pip install piper-tts") from exc
        try:
            self._voice = PiperVoice.load(str(model))
        except Exception as exc:  # onnxruntime raises its own types
            raise SpeechError(f"piper could not load {model}: {exc}") from exc
        self.model = model

    @property
    def key(self) -> str:
        return f"{self.name}:{self.model.name}"

    def synthesize(self, text: str) -> np.ndarray:
        text = " ".join(text.split())
        if not text:
            raise SpeechError("nothing to say: empty text")
        parts, rate = [], TARGET_RATE
        try:
            for chunk in self._voice.synthesize(text):
                parts.append(np.frombuffer(chunk.audio_int16_bytes, dtype=np.int16))
                rate = int(chunk.sample_rate)
        except Exception as exc:
            raise SpeechError(f"piper failed to synthesise {text!r}: {exc}") from exc
        samples = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int16)
        return resample(samples, rate, TARGET_RATE) if rate != TARGET_RATE else samples


def make_speech(backend: str, voice: str = "en-us", rate: int = 175,
                piper_model: str = "") -> SpeechBackend:
    """The backend named `backend` (one of `BACKENDS`); raises SpeechError when unusable."""
    if backend == "espeak-ng":
        return EspeakSpeech(voice, rate)
    if backend == "piper":
        return PiperSpeech(piper_model)
    if backend == "none":
        return NoSpeech()
    raise SpeechError(f"unknown speech backend {backend!r} (one of {', '.join(BACKENDS)})")


class PromptCache:
    """Synthesised texts by (backend key, text), in memory and optionally as WAV files in
    `directory`. `cold_ms` / `hits` say what synthesis cost and how often it was avoided."""

    def __init__(self, backend: SpeechBackend, directory: str | Path | None = None) -> None:
        self.backend = backend
        self.directory = Path(directory) if directory else None
        self._mem: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.cold_ms: list[float] = []

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.backend.key}\n{text}".encode()).hexdigest()[:24]

    def get(self, text: str) -> np.ndarray:
        """The samples of `text`, synthesised at most once per process (and per directory)."""
        key = self._key(text)
        with self._lock:
            if key in self._mem:
                self.hits += 1
                return self._mem[key]
        samples = self._from_disk(key)
        if samples is None:
            t0 = time.perf_counter()
            samples = self.backend.synthesize(text)
            self.cold_ms.append((time.perf_counter() - t0) * 1e3)
            self._to_disk(key, samples)
        with self._lock:
            self._mem[key] = samples
        return samples

    def _from_disk(self, key: str) -> np.ndarray | None:
        if self.directory is None:
            return None
        path = self.directory / f"{key}.wav"
        if not path.exists():
            return None
        try:
            return read_wav(path)[0]
        except AudioError as exc:
            log.warning("cached prompt unreadable, synthesising again: %s", exc)
            return None

    def _to_disk(self, key: str, samples: np.ndarray) -> None:
        if self.directory is None or len(samples) == 0:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            write_wav(self.directory / f"{key}.wav", samples, TARGET_RATE)
        except OSError as exc:  # the prompt still plays; only the next start re-synthesises
            log.warning("could not cache a prompt in %s: %s", self.directory, exc)


class NullPlayer:
    """Plays nothing (no output device, replays); remembers what it was given."""

    name = "none"

    def __init__(self) -> None:
        self.played: list[np.ndarray] = []

    def play(self, samples: np.ndarray) -> float:
        self.played.append(samples)
        return len(samples) / TARGET_RATE


class SoundDevicePlayer:
    """Plays through `sounddevice` (PortAudio) on `device` (name, index or "" for the default);
    `play` starts the sound and returns at once."""

    name = "sounddevice"

    def __init__(self, device: str | int | None = None) -> None:
        try:
            import sounddevice as sd  # noqa: PLC0415 - PortAudio only where audio is played
        except (ImportError, OSError) as exc:
            raise SpeechError(f"sounddevice/PortAudio unavailable ({exc})") from exc
        self._sd = sd
        self.device = device if device not in ("", None) else None
        try:
            sd.check_output_settings(device=self.device, samplerate=TARGET_RATE, channels=1,
                                     dtype="int16")
        except Exception as exc:  # PortAudioError or ValueError: no such device / rate
            raise SpeechError(f"no usable audio output device ({exc})") from exc

    def play(self, samples: np.ndarray) -> float:
        if len(samples):
            self._sd.play(samples, TARGET_RATE, device=self.device, blocking=False)
        return len(samples) / TARGET_RATE


def chime(ms: int = 150, freq: float = 880.0, level: float = 0.3) -> np.ndarray:
    """A short sine tone with 10 ms fades (the "chime instead of words" setting)."""
    n = int(TARGET_RATE * ms / 1000)
    t = np.arange(n) / TARGET_RATE
    x = level * np.sin(2 * np.pi * freq * t)
    fade = min(n // 2, TARGET_RATE // 100)
    if fade:
        ramp = np.linspace(0.0, 1.0, fade)
        x[:fade] *= ramp
        x[-fade:] *= ramp[::-1]
    return (x * 32767).astype(np.int16)


__all__ = ["BACKENDS", "EspeakSpeech", "NoSpeech", "NullPlayer", "PiperSpeech", "PromptCache",
           "SoundDevicePlayer", "SpeechBackend", "SpeechError", "chime", "make_speech"]
