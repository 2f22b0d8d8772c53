"""PCM conversions: WAV files in and out, resampling, clipping; everything as 16 kHz mono int16.

The ASR sees 16 kHz mono int16 whatever the file or the sound card delivers. Reading and
resampling are SciPy's (`scipy.io.wavfile`, `scipy.signal.resample_poly`); this module adds the
checks a device needs (clear errors naming the file, a length limit) and the int16 scaling.
"""

from __future__ import annotations

import logging
import math
import struct
import warnings
from pathlib import Path

import numpy as np
from scipy.io import wavfile
from scipy.signal import resample_poly

log = logging.getLogger(__name__)

TARGET_RATE = 16000
DEFAULT_MAX_SECONDS = 600.0  # a WAV longer than this is refused (memory on a 2 GB board)


class AudioError(Exception):
    """Audio could not be read, converted or captured; the message says which file/device and why."""


def clipped_fraction(samples: np.ndarray) -> float:
    """Fraction of int16 samples at (or within one step of) full scale: a sign of clipping."""
    if len(samples) == 0:
        return 0.0
    return float(np.count_nonzero(np.abs(samples.astype(np.int32)) >= 32767) / len(samples))


def to_int16(x: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(x), -32768, 32767).astype(np.int16)


def resample(samples: np.ndarray, src_rate: int, dst_rate: int = TARGET_RATE) -> np.ndarray:
    """Band-limited resampling of int16 mono audio (SciPy's polyphase `resample_poly`).

    The anti-aliasing low-pass sits at the lower of the two Nyquist frequencies, so
    44.1 kHz -> 16 kHz does not fold high frequencies into the speech band (which hurts ASR)."""
    if src_rate <= 0 or dst_rate <= 0:
        raise AudioError(f"invalid sample rates for resampling: {src_rate} -> {dst_rate}")
    samples = np.asarray(samples)
    if src_rate == dst_rate or len(samples) == 0:
        return samples.astype(np.int16, copy=False)
    g = math.gcd(src_rate, dst_rate)
    return to_int16(resample_poly(samples.astype(np.float64), dst_rate // g, src_rate // g))


def _as_int16_units(data: np.ndarray) -> np.ndarray:
    """SciPy's WAV dtypes -> float64 in int16 units (8-bit is unsigned; 24-bit arrives as
    left-justified int32)."""
    if data.dtype == np.uint8:
        return (data.astype(np.float64) - 128.0) * 256.0
    if data.dtype == np.int16:
        return data.astype(np.float64)
    if data.dtype == np.int32:
        return data.astype(np.float64) / 65536.0
    if data.dtype == np.int64:
        return data.astype(np.float64) / 2.0**48
    if data.dtype.kind == "f":
        return data.astype(np.float64) * 32768.0
    raise AudioError(f"unsupported sample format {data.dtype}")


def _scipy_read(path: Path) -> tuple[int, np.ndarray]:
    """scipy.io.wavfile.read, memory-mapped where SciPy can (so a huge file is not loaded
    before its length is checked), with its non-fatal warnings logged."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", wavfile.WavFileWarning)
        try:
            rate, data = wavfile.read(path, mmap=True)
        except ValueError as exc:
            if "mmap" not in str(exc):  # 24-bit and some layouts cannot be memory-mapped
                raise
            rate, data = wavfile.read(path, mmap=False)
    for w in caught:
        log.debug("%s: %s", path, w.message)
    return rate, data


def read_wav(path: str | Path, max_seconds: float | None = DEFAULT_MAX_SECONDS) -> tuple[np.ndarray, int]:
    """Read a WAV file as 16 kHz mono int16. Returns (samples, original sample rate).

    Accepts what SciPy reads (8/16/24/32/64-bit PCM, 32/64-bit float, WAVE_FORMAT_EXTENSIBLE),
    any channel count (averaged to mono) and any rate (resampled). Raises AudioError with the
    file name and the reason for a missing, empty, corrupt, non-WAV, unsupported, zero-length
    or over-long (> max_seconds) file.
    """
    path = Path(path)
    if not path.exists():
        raise AudioError(f"{path}: file not found")
    if not path.is_file():
        raise AudioError(f"{path}: not a regular file")
    if path.stat().st_size == 0:
        raise AudioError(f"{path}: empty file (0 bytes), not a WAV recording")
    try:
        rate, data = _scipy_read(path)
        if rate < 1:
            raise AudioError(f"{path}: corrupt WAV header (rate={rate})")
        frames = data.shape[0]
        if max_seconds is not None and frames / rate > max_seconds:
            raise AudioError(f"{path}: {frames / rate:.0f} s long, more than the {max_seconds:.0f} s allowed")
        if frames == 0 or (data.ndim == 2 and data.shape[1] == 0):
            raise AudioError(f"{path}: WAV file contains no audio frames (zero length)")
        x = _as_int16_units(np.asarray(data))
    except AudioError as exc:
        raise AudioError(str(exc) if str(exc).startswith(str(path)) else f"{path}: {exc}") from exc
    except ValueError as exc:
        msg = str(exc)
        if "RIFF" in msg or "not a WAV" in msg or "Not a WAV" in msg:
            raise AudioError(f"{path}: not a WAV file ({msg})") from exc
        if "Unknown wave file format" in msg or "Unsupported" in msg:
            raise AudioError(f"{path}: unsupported WAV encoding ({msg}); need PCM or float") from exc
        raise AudioError(f"{path}: corrupt WAV file ({msg})") from exc
    except UnboundLocalError as exc:  # SciPy 1.17 reaches its return without a 'data' chunk
        raise AudioError(f"{path}: corrupt WAV file (no 'data' chunk)") from exc
    except (EOFError, struct.error, IndexError, MemoryError, ArithmeticError) as exc:
        # what SciPy's chunk parser raises on damaged headers (e.g. ZeroDivisionError for a
        # zero block align)
        raise AudioError(f"{path}: corrupt or truncated WAV file ({exc or type(exc).__name__})") from exc
    except OSError as exc:
        raise AudioError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    finally:
        data = None  # release the memory map
    mono = x.mean(axis=1) if x.ndim == 2 else x
    samples = to_int16(mono)
    if rate != TARGET_RATE:
        samples = resample(samples, rate, TARGET_RATE)
    return samples, rate


def write_wav(path: str | Path, samples: np.ndarray, rate: int = TARGET_RATE) -> None:
    """Write int16 mono samples as a PCM WAV (used for keeping audio, tests and tools)."""
    wavfile.write(path, rate, np.asarray(samples, dtype=np.int16))
