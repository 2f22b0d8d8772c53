"""Long audio is decoded and resampled block by block (edge_plm/voice/pcm.py): the result is
the whole-signal `resample_poly` result, and memory stays a few MB above the 16 kHz output."""

from __future__ import annotations

import subprocess
import tracemalloc
import wave

import numpy as np
import pytest
from scipy.io import wavfile

from edge_plm.voice import pcm


def _whole(path) -> np.ndarray:
    """The reference: the whole file as one float array, made mono, then resampled."""
    _, data = wavfile.read(path, mmap=False)
    x = pcm._as_int16_units(data if data.ndim == 2 else data[:, None])
    mono = pcm.to_int16(x.mean(axis=1))
    return pcm.resample(mono, pcm._Frames(path).rate)


@pytest.mark.parametrize("rate, channels, bits", [
    (44100, 2, 16), (48000, 1, 16), (8000, 3, 16), (22050, 2, 24), (96000, 2, 32),
    (16000, 2, 16), (11025, 1, 8)])
@pytest.mark.parametrize("block", [1000, 4096, pcm.BLOCK_FRAMES])
def test_block_wise_conversion_equals_the_whole_signal(tmp_path, rate, channels, bits, block):
    rng = np.random.default_rng(rate + channels)
    x = (rng.standard_normal((int(rate * 1.7) + 7, channels)) * 3000).astype(np.int16)
    wavfile.write(tmp_path / "src.wav", rate, x)
    path = tmp_path / "f.wav"
    subprocess.run(["sox", str(tmp_path / "src.wav"), "-b", str(bits), str(path)], check=True)
    src = pcm._Frames(path)
    try:
        got = pcm._convert(src, block=block)
    finally:
        src.close()
    assert np.array_equal(got, _whole(path))


def test_plain_24_bit_pcm_is_read_in_blocks_through_wave(tmp_path):
    rng = np.random.default_rng(3)
    x = rng.integers(-2**23, 2**23, size=(5000, 2)).astype(np.int32)
    path = tmp_path / "w24.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(3)
        w.setframerate(16000)
        w.writeframes(b"".join(int(v).to_bytes(3, "little", signed=True) for v in x.reshape(-1)))
    src = pcm._Frames(path)
    assert src._wave is not None  # streamed, not loaded whole
    got = src.read(100, 4100)
    src.close()
    assert np.array_equal(got, (x[100:4100].astype(np.float64) * 256 / 65536.0).mean(axis=1))


def test_reading_a_long_stereo_file_allocates_a_few_mb_above_its_output(tmp_path):
    rate, seconds = 44100, 60
    rng = np.random.default_rng(0)
    path = tmp_path / "long.wav"
    wavfile.write(path, rate, (rng.standard_normal((rate * seconds, 2)) * 2000).astype(np.int16))
    tracemalloc.start()
    try:
        samples, got_rate = pcm.read_wav(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got_rate == rate and len(samples) == 16000 * seconds
    # the whole file as float64 would be 42 MB (its mono half 21 MB); the output is 1.9 MB
    assert peak < samples.nbytes + 16e6, peak


def test_a_truncated_data_chunk_is_a_clear_error(tmp_path):
    path = tmp_path / "t.wav"
    wavfile.write(path, 44100, np.zeros((44100, 2), dtype=np.int16))
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(pcm.AudioError, match=str(path)):
        pcm.read_wav(path)
