"""Is this block speech? The endpointer's per-block decision, by level or by a trained VAD.

* `EnergyVad`  the block's RMS level reaches `threshold_db` dBFS (no dependency; fails in a
               room whose noise is above the threshold: a fan at 10 dB SNR is "speech").
* `WebRtcVad`  the WebRTC voice activity detector (`webrtcvad-wheels`: a GMM on band energies,
               aggressiveness 0..3), gated by a low level floor so that near-digital silence
               never counts. Needs 10/20/30 ms blocks at 8, 16, 32 or 48 kHz.

With `floor_margin_db`, either is also gated by the room's noise floor: a block is speech only
if its level is at least `floor_margin_db` above a running floor estimate (`NoiseFloor`: follows
quiet blocks down at once and rises 2 dB/s), so steady noise louder than `threshold_db` (a fan)
or speech-like noise (a television) far below the talker stops counting as speech.

`make_vad(kind, ...)` builds one; an unknown kind, a missing `webrtcvad` module or a block
shape WebRTC cannot take is an `AudioError` that says so. benchmarks/bench_endpoint.py compares
them on spoken sessions with noise mixed in.
"""

from __future__ import annotations

import numpy as np

from edge_plm.voice.pcm import AudioError

FLOOR_DB = -120.0  # level reported for digital silence instead of -inf
WEBRTC_RATES = (8000, 16000, 32000, 48000)
WEBRTC_FLOOR_DB = -60.0  # below this level a block is silence whatever the VAD says


def block_dbfs(block: np.ndarray) -> float:
    """RMS level of an int16 block in dBFS (0 dB = full-scale square wave), FLOOR_DB for silence."""
    if len(block) == 0:
        return FLOOR_DB
    x = block.astype(np.float64)
    rms = float(np.sqrt(np.mean(x * x)))
    if rms <= 0.0:
        return FLOOR_DB
    return max(FLOOR_DB, 20.0 * np.log10(rms / 32768.0))


class NoiseFloor:
    """Running estimate of the noise level (dBFS): falls to any quieter block at once, rises
    `rise_db_per_s` otherwise (minimum tracking), so speech raises it only a little."""

    def __init__(self, block_ms: int, rise_db_per_s: float = 2.0, start_db: float = -90.0) -> None:
        self.rise = rise_db_per_s * block_ms / 1000.0
        self.db = start_db
        self._started = False

    def update(self, level_db: float) -> float:
        """Take one block's level; return the floor before it (what the block is judged by)."""
        if not self._started:
            self.db, self._started = level_db, True
        before = self.db
        self.db = level_db if level_db < self.db else self.db + self.rise
        return before


class _Gated:
    """`inner` and a level at least `margin_db` above the running noise floor."""

    def __init__(self, inner, block_ms: int, margin_db: float) -> None:
        self.inner, self.margin_db = inner, float(margin_db)
        self.name = f"{inner.name}+floor"
        self.floor = NoiseFloor(block_ms)

    def is_speech(self, block: np.ndarray) -> bool:
        level = block_dbfs(block)
        floor = self.floor.update(level)
        return level >= floor + self.margin_db and self.inner.is_speech(block)


class EnergyVad:
    """Speech when the block's level reaches `threshold_db` dBFS."""

    name = "energy"

    def __init__(self, threshold_db: float = -40.0) -> None:
        self.threshold_db = float(threshold_db)

    def is_speech(self, block: np.ndarray) -> bool:
        return block_dbfs(block) >= self.threshold_db


class WebRtcVad:
    """WebRTC's VAD on one block (int16, `block_ms` of 10/20/30 at a WebRTC rate)."""

    name = "webrtc"

    def __init__(self, sample_rate: int, block_ms: int, aggressiveness: int = 2,
                 floor_db: float = WEBRTC_FLOOR_DB) -> None:
        if sample_rate not in WEBRTC_RATES:
            raise AudioError(f"the webrtc VAD needs 8, 16, 32 or 48 kHz audio, not {sample_rate} Hz "
                             "(set audio.vad = \"energy\" or capture at 16 kHz)")
        if block_ms not in (10, 20, 30):
            raise AudioError(f"the webrtc VAD needs audio.block_ms of 10, 20 or 30, not {block_ms}")
        if not 0 <= int(aggressiveness) <= 3:
            raise AudioError(f"audio.vad_aggressiveness must be 0..3, not {aggressiveness}")
        try:
            import webrtcvad  # noqa: PLC0415 - optional dependency, only when chosen
        except ImportError as exc:
            raise AudioError(f"audio.vad = \"webrtc\" needs the webrtcvad-wheels package ({exc}); "
                             "pip install webrtcvad-wheels, or set audio.vad = \"energy\"") from exc
        self.sample_rate = sample_rate
        self.aggressiveness = int(aggressiveness)
        self.floor_db = float(floor_db)
        self._vad = webrtcvad.Vad(self.aggressiveness)

    def is_speech(self, block: np.ndarray) -> bool:
        if block_dbfs(block) < self.floor_db:
            return False
        return bool(self._vad.is_speech(np.ascontiguousarray(block, dtype="<i2").tobytes(),
                                        self.sample_rate))


VAD_KINDS = ("energy", "webrtc")


def make_vad(kind: str, sample_rate: int, block_ms: int, threshold_db: float = -40.0,
             aggressiveness: int = 2, floor_margin_db: float | None = None):
    """The block classifier `kind` ("energy" | "webrtc") for audio at `sample_rate`, gated by
    the noise floor when `floor_margin_db` is given."""
    if kind == "energy":
        vad = EnergyVad(threshold_db)
    elif kind == "webrtc":
        vad = WebRtcVad(sample_rate, block_ms, aggressiveness)
    else:
        raise AudioError(f"unknown audio.vad {kind!r} (energy | webrtc)")
    return vad if floor_margin_db is None else _Gated(vad, block_ms, floor_margin_db)


__all__ = ["EnergyVad", "NoiseFloor", "WebRtcVad", "VAD_KINDS", "block_dbfs", "make_vad", "FLOOR_DB"]
