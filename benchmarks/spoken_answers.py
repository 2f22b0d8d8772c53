#!/usr/bin/env python3
"""Spoken yes/no answers for the talk-back benchmarks: flite and espeak-ng voices at several
rates, with noise mixed in at a given SNR by sox.

`speak(text, voice)` renders one phrase as 16 kHz int16 (cached under --cache-dir): a voice is
``flite:<voice>`` (scripts/synth_speech.py) or ``espeak:<voice>:<wpm>``. `noisy(samples, snr_db,
seed)` makes pink noise of the same length with sox (``synth pinknoise``, seeded), scales it to
`snr_db` below the speech's RMS (measured over the speech, not the padding) and mixes the two
with ``sox -m``. `NoisyAnswerer` is the replay's simulated person (`edge_plm.loop.replay.Answerer`):
each answer in the next voice of a list, each phrase of the yes/no lists in turn, new noise
every time.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from synth_speech import synthesize  # noqa: E402

from edge_plm.voice.audio import read_wav, write_wav  # noqa: E402
from edge_plm.voice.speech import EspeakSpeech  # noqa: E402

CACHE = Path(tempfile.gettempdir()) / "edge-plm-answers"
FLITE_VOICES = ("flite:slt", "flite:rms", "flite:awb", "flite:kal16")
ESPEAK_VOICES = ("espeak:en-us:140", "espeak:en-gb:175", "espeak:en-us+f3:175",
                 "espeak:en-gb-scotland:210", "espeak:en-us+m3:210")
VOICES = FLITE_VOICES + ESPEAK_VOICES
YES = ("yes", "yeah", "do it", "yes please", "sure")
NO = ("no", "leave it", "no thanks", "nope")


def speak(text: str, voice: str, cache: Path = CACHE) -> np.ndarray:
    """`text` spoken by `voice` (``flite:slt``, ``espeak:en-gb:175``), 16 kHz int16, padded with
    a little silence as a recording would be."""
    return read_wav(speech_wav(text, voice, cache))[0]


def speech_wav(text: str, voice: str, cache: Path = CACHE) -> Path:
    """The WAV file of `speak` (16 kHz mono int16, cached under `cache`; made if missing)."""
    kind = voice.split(":")[0]
    if kind not in ("flite", "espeak") or (kind == "espeak" and len(voice.split(":")) != 3):
        raise ValueError(f"voice {voice!r}: use flite:<voice> or espeak:<voice>:<wpm>")
    key = hashlib.sha256(f"{voice}|{text}".encode()).hexdigest()[:16]
    path = cache / f"{key}.wav"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        kind, *rest = voice.split(":")
        if kind == "flite":
            synthesize(text, path, voice=rest[0])
        else:
            samples = EspeakSpeech(rest[0], int(rest[1])).synthesize(text)
            pad = np.zeros(int(0.15 * 16000), dtype=np.int16)
            write_wav(path, np.concatenate([pad, samples, pad]), 16000)
    return path


def _rms(x: np.ndarray) -> float:
    x = x.astype(np.float64)
    loud = x[np.abs(x) > 0.02 * max(1.0, np.abs(x).max())]  # the speech, not the padding
    return float(np.sqrt(np.mean((loud if len(loud) else x) ** 2)))


def noisy(samples: np.ndarray, snr_db: float, seed: int) -> np.ndarray:
    """`samples` with seeded pink noise `snr_db` below the speech, mixed by sox."""
    with tempfile.TemporaryDirectory(prefix="edge-plm-noise-") as tmp:
        speech, noise, out = (Path(tmp) / n for n in ("s.wav", "n.wav", "o.wav"))
        write_wav(speech, samples, 16000)
        dur = len(samples) / 16000
        subprocess.run(["sox", "-R", "-n", "-r", "16000", "-c", "1", "-b", "16", str(noise),
                        "synth", f"{dur:.4f}", "pinknoise", "vol", "0.5"], check=True,
                       capture_output=True, env={"SOX_OPTS": "", "PATH": "/usr/bin:/bin"})
        # sox -R is repeatable; the seed picks a different stretch of noise
        n = read_wav(noise)[0]
        n = np.roll(n, (seed * 7919) % max(1, len(n)))
        write_wav(noise, n, 16000)
        gain = _rms(samples) / max(_rms(n), 1e-9) / (10 ** (snr_db / 20))
        subprocess.run(["sox", "-m", "-v", "1", str(speech), "-v", f"{gain:.6f}", str(noise),
                        "-b", "16", str(out)], check=True, capture_output=True)
        return read_wav(out)[0]


class NoisyAnswerer:
    """The replay's simulated person: yes/no phrases in rotating voices with noise."""

    def __init__(self, voices=VOICES, snr_db: float = 20.0, seed: int = 0) -> None:
        self.voices, self.snr_db, self.seed = tuple(voices), snr_db, seed
        self.said: list[tuple[str, str]] = []

    def __call__(self, yes: bool, n: int) -> np.ndarray:
        phrases = YES if yes else NO
        voice = self.voices[(n + self.seed) % len(self.voices)]
        text = phrases[(n // len(self.voices)) % len(phrases)]
        self.said.append((voice, text))
        return noisy(speak(text, voice), self.snr_db, self.seed * 100_003 + n)
