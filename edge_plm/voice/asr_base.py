"""What every ASR backend and streaming session shares: the error, the transcript, the input
check and the filters (imported by `asr` and `stream`, which import nothing of each other's
internals beyond the backends' attributes)."""

from __future__ import annotations

import math

from dataclasses import dataclass

import numpy as np

from edge_plm.errors import EdgePlmError


class AsrError(EdgePlmError):
    """An ASR backend could not be created or could not decode; the message says why."""


@dataclass
class Transcript:
    """What the recogniser heard. `confidence` is in [0, 1] when the backend provides one."""

    text: str
    backend: str
    decode_ms: float  # streamed: the time finish() took (after the endpoint)
    confidence: float | None = None
    stream_ms: float = 0.0  # streamed: decode time spent while the audio arrived
    # how likely the heard words are under the ear's language model: the mean natural-log
    # probability per word (and the sentence's end), None when the backend has no such LM (vosk,
    # text, pocketsphinx's general LM). Garble forced into command words scores low
    # (edge_plm/voice/ear_lm.py `fluency`; the policy asks rather than acts below asr.min_fluency)
    fluency: float | None = None


STREAM_BLOCK = 480  # samples per block when a whole recording is streamed (30 ms at 16 kHz)


def check_samples(samples) -> np.ndarray:
    """Validate the ASR input: a 1-D int16 array (anything else is a caller bug, said clearly)."""
    arr = np.asarray(samples)
    if arr.ndim != 1:
        raise AsrError(f"ASR expects mono 1-D samples, got shape {arr.shape}")
    if arr.dtype != np.int16:
        raise AsrError(f"ASR expects int16 samples at 16 kHz, got dtype {arr.dtype}")
    return arr


SILENCE_DBFS = -75.0  # quieter than this (RMS) cannot hold speech


def no_speech(samples: np.ndarray) -> bool:
    """True for empty or (near-)digitally silent audio: decoders hallucinate words on zeros
    (pocketsphinx hears "i'm" in one second of zeros), so such input is not decoded at all."""
    if len(samples) == 0:
        return True
    energy = 0.0
    for a in range(0, len(samples), 1 << 16):  # in blocks: a long recording is not copied whole
        x = samples[a:a + (1 << 16)].astype(np.float64)
        energy += float(x @ x)
    return 20.0 * np.log10(max(math.sqrt(energy / len(samples)), 1e-9) / 32768.0) < SILENCE_DBFS


def is_marker(word: str) -> bool:
    """Non-word tokens some models emit ([noise], [unk], <sil>, ...)."""
    return (word.startswith("[") and word.endswith("]")) or (word.startswith("<") and word.endswith(">"))


__all__ = ["AsrError", "Transcript", "STREAM_BLOCK", "SILENCE_DBFS", "check_samples", "is_marker", "no_speech"]
