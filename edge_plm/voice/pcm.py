"""PCM conversions: WAV files in and out, resampling, clipping; everything as 16 kHz mono int16.

The ASR sees 16 kHz mono int16 whatever the file or the sound card delivers. Reading and
resampling are SciPy's (`scipy.io.wavfile`, `scipy.signal.resample_poly`); this module adds the
checks a device needs (clear errors naming the file, a length limit), the int16 scaling, and
block-wise decoding and resampling, so a long file never becomes one float array. SciPy's
modules are imported on first use (``scipy.signal`` alone adds ~80 MB of resident memory, which
a text replay or 16 kHz audio does not need).
"""

from __future__ import annotations

import logging
import math
import struct
import warnings
import wave
from pathlib import Path

import numpy as np

from edge_plm.errors import EdgePlmError

log = logging.getLogger(__name__)

TARGET_RATE = 16000
DEFAULT_MAX_SECONDS = 600.0  # a WAV longer than this is refused (memory on a 2 GB board)


class AudioError(EdgePlmError):
    """Audio could not be read, converted or captured; the message says which file/device and why."""


def clipped_fraction(samples: np.ndarray) -> float:
    """Fraction of int16 samples at (or within one step of) full scale: a sign of clipping."""
    if len(samples) == 0:
        return 0.0
    return float(np.count_nonzero(np.abs(samples.astype(np.int32)) >= 32767) / len(samples))


def to_int16(x: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(x), -32768, 32767).astype(np.int16)


def _wavfile():
    from scipy.io import wavfile  # noqa: PLC0415 - on first use (resident memory)

    return wavfile


def resample_poly(x: np.ndarray, up: int, down: int) -> np.ndarray:
    """`scipy.signal.resample_poly`, imported on first use (resident memory)."""
    from scipy.signal import resample_poly as poly  # noqa: PLC0415

    return poly(x, up, down)


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


#: Frames converted at a time (a few MB whatever the rate and channel count): a long file is
#: decoded and resampled block by block, never as one float array (docs/loop.md).
BLOCK_FRAMES = 1 << 18


class _Frames:
    """Random access to a WAV file's frames as mono float64 in int16 units, without holding the
    file in memory: `read(a, b)` reads frames a..b-1 from disk (``numpy.fromfile`` at the data
    chunk's offset, or `wave` for 24-bit PCM, which SciPy cannot memory-map)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._wave = None
        self._array: np.ndarray | None = None
        with warnings.catch_warnings(record=True) as caught:
            wavfile = _wavfile()
            warnings.simplefilter("always", wavfile.WavFileWarning)
            try:  # mmap: the header is parsed, the data is not read
                self.rate, data = wavfile.read(path, mmap=True)
            except ValueError as exc:
                if "mmap" not in str(exc):  # 24-bit and some layouts cannot be memory-mapped
                    raise
                self._open_wave(path)
                data = None
        for w in caught:
            log.debug("%s: %s", path, w.message)
        if data is not None:
            self.dtype, self.offset = data.dtype, int(data.offset)
            self.frames = data.shape[0]
            self.channels = 1 if data.ndim == 1 else data.shape[1]
            del data  # unmapped: blocks are read with fromfile, so no page stays resident

    def _open_wave(self, path: Path) -> None:
        try:
            w = wave.open(str(path), "rb")
        except (wave.Error, EOFError):  # e.g. 24-bit WAVE_FORMAT_EXTENSIBLE: read whole (rare)
            self.rate, data = _wavfile().read(path, mmap=False)
            self._array = data if data.ndim == 2 else data[:, None]
            self.frames, self.channels = self._array.shape
            return
        self._wave, self.rate = w, w.getframerate()
        self.frames, self.channels = w.getnframes(), w.getnchannels()
        self.dtype = None

    def read(self, a: int, b: int) -> np.ndarray:
        if self._array is not None:
            return _mono(_as_int16_units(self._array[a:b]))
        if self._wave is not None:
            return self._read_wave(a, b)
        count = (b - a) * self.channels
        data = np.fromfile(self.path, dtype=self.dtype, count=count,
                           offset=self.offset + a * self.channels * self.dtype.itemsize)
        if len(data) < count:
            raise EOFError(f"the data chunk ends after {a + len(data) // self.channels} of "
                           f"{self.frames} frames")
        return _mono(_as_int16_units(data.reshape(-1, self.channels)))

    def _read_wave(self, a: int, b: int) -> np.ndarray:
        w = self._wave
        w.setpos(a)
        raw = w.readframes(b - a)
        width = w.getsampwidth()
        if len(raw) < (b - a) * width * self.channels:
            raise EOFError(f"the data chunk ends before frame {b} of {self.frames}")
        if width == 3:  # 24-bit little-endian -> left-justified int32, as SciPy returns it
            b3 = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
            data = (b3[:, 0] << 8 | b3[:, 1] << 16 | b3[:, 2] << 24).astype(np.int32)
        else:
            data = np.frombuffer(raw, dtype={1: np.uint8, 2: "<i2", 4: "<i4"}[width])
        return _mono(_as_int16_units(data.reshape(-1, self.channels)))

    def close(self) -> None:
        if self._wave is not None:
            self._wave.close()


def _mono(x: np.ndarray) -> np.ndarray:
    return x.mean(axis=1) if x.shape[1] > 1 else x[:, 0]


def _convert(src: _Frames, dst_rate: int = TARGET_RATE, block: int = BLOCK_FRAMES) -> np.ndarray:
    """All of `src` as `dst_rate` mono int16, block by block: each block of input frames is
    made mono int16 and resampled with `pad` frames of its neighbours on each side (the
    filter's reach), and exactly its own output samples are kept. Blocks start at multiples of
    the decimation factor, so every output sample is the one `resample_poly` of the whole
    signal computes (to float rounding)."""
    n, rate = src.frames, src.rate
    if rate == dst_rate:
        out = np.empty(n, dtype=np.int16)
        for a in range(0, n, block):
            out[a:a + block] = to_int16(src.read(a, min(n, a + block)))
        return out
    g = math.gcd(rate, dst_rate)
    up, down = dst_rate // g, rate // g
    block = max(down, block // down * down)
    pad = down * math.ceil((10 * max(up, down) / up + 2) / down)  # resample_poly's half filter
    out = np.empty(-(-n * up // down), dtype=np.int16)
    for a in range(0, n, block):
        b = min(n, a + block)
        lo, hi = max(0, a - pad), min(n, b + pad)
        x = np.zeros(pad + (b - a) + pad, dtype=np.float64)  # zeros beyond the file's ends
        x[lo - (a - pad):hi - (a - pad)] = to_int16(src.read(lo, hi))
        y = resample_poly(x, up, down)
        first = a * up // down
        last = len(out) if b == n else b * up // down
        out[first:last] = to_int16(y[pad * up // down:pad * up // down + last - first])
    return out


def check_wav(path: str | Path) -> None:
    """Raise AudioError unless `path` is a readable file that starts like a WAV file (a RIFF,
    RF64 or BW64 header of type WAVE). Reads 12 bytes: a quick refusal up front, before a
    model is loaded; `read_wav` still judges the rest of the file."""
    path = Path(path)
    if not path.exists():
        raise AudioError(f"{path}: no such file or directory")
    if not path.is_file():
        raise AudioError(f"{path}: not a regular file")
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except OSError as exc:
        raise AudioError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    if not head:
        raise AudioError(f"{path}: empty file (0 bytes), not a WAV recording")
    if len(head) < 12 or head[:4] not in (b"RIFF", b"RF64", b"BW64") or head[8:12] != b"WAVE":
        raise AudioError(f"{path}: not a WAV file")


def read_wav(path: str | Path, max_seconds: float | None = DEFAULT_MAX_SECONDS) -> tuple[np.ndarray, int]:
    """Read a WAV file as 16 kHz mono int16. Returns (samples, original sample rate).

    Accepts what SciPy reads (8/16/24/32/64-bit PCM, 32/64-bit float, WAVE_FORMAT_EXTENSIBLE),
    any channel count (averaged to mono) and any rate (resampled). Decoded and resampled in
    blocks of `BLOCK_FRAMES`: memory is the 16 kHz result plus a few MB, whatever the file.
    Raises AudioError with the file name and the reason for a missing, empty, corrupt, non-WAV,
    unsupported, zero-length or over-long (> max_seconds) file.
    """
    path = Path(path)
    if not path.exists():
        raise AudioError(f"{path}: file not found")
    if not path.is_file():
        raise AudioError(f"{path}: not a regular file")
    if path.stat().st_size == 0:
        raise AudioError(f"{path}: empty file (0 bytes), not a WAV recording")
    src = None
    try:
        src = _Frames(path)
        rate, frames = src.rate, src.frames
        if rate < 1:
            raise AudioError(f"{path}: corrupt WAV header (rate={rate})")
        if max_seconds is not None and frames / rate > max_seconds:
            raise AudioError(f"{path}: {frames / rate:.0f} s long, more than the {max_seconds:.0f} s allowed")
        if frames == 0 or src.channels == 0:
            raise AudioError(f"{path}: WAV file contains no audio frames (zero length)")
        return _convert(src), rate
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
        if src is not None:
            src.close()


def write_wav(path: str | Path, samples: np.ndarray, rate: int = TARGET_RATE) -> None:
    """Write int16 mono samples as a PCM WAV (used for keeping audio, tests and tools)."""
    _wavfile().write(path, rate, np.asarray(samples, dtype=np.int16))
