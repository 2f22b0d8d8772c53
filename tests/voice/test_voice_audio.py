"""Audio layer: WAV reading/conversion, resampling, endpointing, sources."""

from __future__ import annotations

import shutil
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from edge_plm.config.settings import AudioConfig
from edge_plm.voice.audio import (
    AudioError, MicrophoneSource, TextSource, WavSource, read_wav, resample, write_wav)
from edge_plm.voice.endpoint import Endpointer, block_dbfs

DEMO = Path(__file__).resolve().parents[2] / "edge_plm" / "data" / "demo"
RATE = 16000


def tone(freq: float, seconds: float, rate: int = RATE, amp: float = 8000.0) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.int16)


def silence(seconds: float, rate: int = RATE, noise_amp: float = 30.0, seed: int = 0) -> np.ndarray:
    """Quiet room noise (about -60 dBFS), well below the default -40 dBFS threshold."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(int(seconds * rate)) * noise_amp).astype(np.int16)


def dominant_freq(x: np.ndarray, rate: int) -> float:
    spec = np.abs(np.fft.rfft(x.astype(np.float64)))
    return float(np.argmax(spec) * rate / len(x))


def write_raw_wav(path: Path, frames: np.ndarray, rate: int, sampwidth: int) -> None:
    """Write a (frames, channels) array with the stdlib writer at the given sample width."""
    channels = frames.shape[1]
    if sampwidth == 1:
        data = (frames // 256 + 128).astype(np.uint8).tobytes()
    elif sampwidth == 2:
        data = frames.astype("<i2").tobytes()
    else:
        data = (frames.astype(np.int64) * 65536).astype("<i4").tobytes()
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(sampwidth)
        w.setframerate(rate)
        w.writeframes(data)


# --- read_wav ---------------------------------------------------------------------------------


def test_read_wav_stereo_44k_is_mono_16k_with_the_same_pitch(tmp_path):
    left = tone(440, 1.0, rate=44100)
    right = tone(440, 1.0, rate=44100)
    path = tmp_path / "stereo44.wav"
    write_raw_wav(path, np.stack([left, right], axis=1), 44100, 2)
    samples, rate = read_wav(path)
    assert rate == 44100
    assert samples.dtype == np.int16 and samples.ndim == 1
    assert abs(len(samples) - RATE) <= 1
    assert abs(dominant_freq(samples, RATE) - 440) < 3
    # level preserved (amplitude 8000 -> RMS ~5657)
    rms = np.sqrt(np.mean(samples[200:-200].astype(np.float64) ** 2))
    assert 5400 < rms < 5900


def test_stereo_channels_are_averaged(tmp_path):
    left = tone(440, 0.5, amp=8000)
    path = tmp_path / "lr.wav"
    write_raw_wav(path, np.stack([left, -left], axis=1), RATE, 2)  # cancels out when averaged
    samples, _ = read_wav(path)
    assert np.max(np.abs(samples)) <= 1


def test_read_wav_8k_is_upsampled(tmp_path):
    path = tmp_path / "tel.wav"
    write_raw_wav(path, tone(1000, 0.5, rate=8000)[:, None], 8000, 2)
    samples, rate = read_wav(path)
    assert rate == 8000 and len(samples) == 8000
    assert abs(dominant_freq(samples, RATE) - 1000) < 3


@pytest.mark.parametrize("sampwidth", [1, 2, 4])
def test_read_wav_sample_widths(tmp_path, sampwidth):
    path = tmp_path / f"w{sampwidth}.wav"
    write_raw_wav(path, tone(500, 0.25)[:, None], RATE, sampwidth)
    samples, _ = read_wav(path)
    ref = tone(500, 0.25)
    tol = 300 if sampwidth == 1 else 2  # 8-bit keeps 8 bits of precision
    assert np.max(np.abs(samples.astype(int) - ref.astype(int))) <= tol


def test_read_wav_extensible_32bit_from_sox(tmp_path):
    if shutil.which("sox") is None:
        pytest.skip("sox not installed")
    path = tmp_path / "ext.wav"
    subprocess.run(["sox", "-n", "-r", "22050", "-b", "32", "-c", "2", str(path),
                    "synth", "0.5", "sine", "440", "vol", "0.5"], check=True)
    samples, rate = read_wav(path)
    assert rate == 22050 and abs(len(samples) - 8000) <= 1
    assert abs(dominant_freq(samples, RATE) - 440) < 3


def test_resample_removes_content_above_the_new_nyquist():
    x = tone(10000, 1.0, rate=44100, amp=10000)  # would alias to 6 kHz with naive interpolation
    y = resample(x, 44100, RATE)
    assert np.sqrt(np.mean(y[500:-500].astype(np.float64) ** 2)) < 50


@pytest.mark.parametrize("content,needle", [
    (b"", "empty file"),
    (b"hello, this is not audio at all" * 10, "not a WAV"),
    (b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00", "corrupt"),
])
def test_bad_files_raise_audio_error_with_a_clear_message(tmp_path, content, needle):
    path = tmp_path / "bad.wav"
    path.write_bytes(content)
    with pytest.raises(AudioError, match=needle) as info:
        read_wav(path)
    assert str(path) in str(info.value)


def test_random_corruption_only_ever_raises_audio_error(tmp_path):
    """Truncated and bit-flipped versions of a real WAV: converted or AudioError, nothing else."""
    good = (DEMO / "what-time-is-it.slt.wav").read_bytes()
    rng = np.random.default_rng(0)
    path = tmp_path / "fuzz.wav"
    outcomes = {"ok": 0, "error": 0}
    for i in range(150):
        data = bytearray(good[: int(rng.integers(0, 400))] if i % 3 == 0 else good)
        for _ in range(int(rng.integers(1, 8))):
            if data:
                data[int(rng.integers(0, min(len(data), 64)))] = int(rng.integers(0, 256))
        path.write_bytes(bytes(data))
        try:
            samples, _ = read_wav(path, max_seconds=60)
            assert samples.dtype == np.int16
            outcomes["ok"] += 1
        except AudioError as exc:
            assert str(path) in str(exc)
            outcomes["error"] += 1
    assert outcomes["error"] > 0


def test_missing_and_zero_length_wavs(tmp_path):
    with pytest.raises(AudioError, match="not found"):
        read_wav(tmp_path / "nope.wav")
    empty = tmp_path / "zero.wav"
    write_wav(empty, np.zeros(0, dtype=np.int16))
    with pytest.raises(AudioError, match="no audio frames"):
        read_wav(empty)


def test_over_long_file_is_refused(tmp_path):
    path = tmp_path / "long.wav"
    write_wav(path, np.zeros(RATE * 3, dtype=np.int16))
    with pytest.raises(AudioError, match="more than"):
        read_wav(path, max_seconds=2)


# --- endpointing --------------------------------------------------------------------------------


def test_block_dbfs_levels():
    assert block_dbfs(np.zeros(480, dtype=np.int16)) == -120.0
    full = np.full(480, 32767, dtype=np.int16)
    assert abs(block_dbfs(full)) < 0.01
    assert abs(block_dbfs(tone(1000, 0.03, amp=32767 / 10)) - (-23.0)) < 0.5  # sine: -3 dB - 20 dB


def _burst_signal() -> np.ndarray:
    return np.concatenate([silence(1.0), tone(300, 1.0), silence(1.0, seed=1)])


def test_endpointer_finds_burst_boundaries():
    ep = Endpointer(pre_roll_ms=0, post_roll_ms=0)
    segs = ep.feed(_burst_signal()) + ep.flush()
    assert len(segs) == 1
    seg = segs[0]
    assert abs(seg.start_ms - 1000) <= 40 and abs(seg.end_ms - 2000) <= 40
    assert not seg.truncated


def test_endpointer_keeps_pre_and_post_roll_and_is_block_size_independent():
    sig = _burst_signal()
    one = Endpointer()
    whole = one.feed(sig) + one.flush()
    other = Endpointer()
    pieces = []
    for start in range(0, len(sig), 777):  # odd chunk sizes, not multiples of a block
        pieces += other.feed(sig[start : start + 777])
    pieces += other.flush()
    assert len(whole) == len(pieces) == 1
    np.testing.assert_array_equal(whole[0].samples, pieces[0].samples)
    assert abs(whole[0].start_ms - 850) <= 40 and abs(whole[0].end_ms - 2150) <= 40


def test_silence_only_gives_no_utterance():
    ep = Endpointer()
    assert ep.feed(silence(5.0)) + ep.flush() == []
    assert ep.trim(silence(2.0)).size == 0


def test_short_click_is_dropped():
    ep = Endpointer(min_utterance_ms=200)
    sig = np.concatenate([silence(0.5), tone(300, 0.06), silence(1.0)])
    assert ep.feed(sig) + ep.flush() == []


def test_stuck_microphone_is_cut_at_max_length_once_until_silence_returns():
    # the level VAD without the noise-floor gate: a stuck microphone's hum counts as speech
    ep = Endpointer(max_utterance_ms=3000, silence_tail_ms=300, vad="energy", floor_margin_db=None)
    rng = np.random.default_rng(3)
    hum = (rng.standard_normal(RATE * 20) * 3000).astype(np.int16)  # ~ -21 dBFS for 20 s
    segs = ep.feed(hum)
    assert len(segs) == 1
    assert segs[0].truncated and abs(segs[0].duration_ms - 3000) <= 30
    assert ep.cuts == 1
    # the room goes quiet, then someone speaks: a normal utterance again
    later = ep.feed(np.concatenate([silence(1.0), tone(300, 0.8), silence(1.0)])) + ep.flush()
    assert len(later) == 1 and not later[0].truncated


def test_clipped_audio_is_flagged():
    loud = np.clip(tone(300, 1.0, amp=60000.0 / 2).astype(np.int32) * 4, -32768, 32767).astype(np.int16)
    ep = Endpointer()
    segs = ep.feed(np.concatenate([silence(0.5), loud, silence(1.0)])) + ep.flush()
    assert len(segs) == 1 and segs[0].clipped > 0.3


def test_endpointer_rejects_bad_input():
    ep = Endpointer()
    with pytest.raises(AudioError, match="int16"):
        ep.feed(np.zeros(100, dtype=np.float32))
    with pytest.raises(AudioError, match="mono"):
        ep.feed(np.zeros((100, 2), dtype=np.int16))
    with pytest.raises(AudioError, match="min_utterance_ms"):
        Endpointer(min_utterance_ms=5000, max_utterance_ms=1000)


def test_from_config_and_with_rate():
    cfg = AudioConfig(energy_threshold_db=-30.0, silence_tail_ms=400, max_utterance_ms=5000)
    ep = Endpointer.from_config(cfg)
    assert (ep.threshold_db, ep.silence_tail_ms, ep.max_utterance_ms) == (-30.0, 400, 5000)
    ep48 = ep.with_rate(48000)
    assert ep48.block == 3 * ep.block and ep48.threshold_db == -30.0
    segs = ep48.feed(np.concatenate([silence(1.0, 48000), tone(300, 1.0, 48000), silence(1.0, 48000)]))
    assert len(segs + ep48.flush()) == 1


def test_trim_demo_recording_and_max_cut():
    samples, _ = read_wav(DEMO / "turn-on-the-light.slt.wav")
    ep = Endpointer()
    result = ep.trim_result(samples)
    assert 0 < len(result.samples) < len(samples)
    assert result.start > 0 and not result.truncated
    short = Endpointer(max_utterance_ms=500).trim_result(samples)
    assert short.truncated and len(short.samples) == 8000


# --- sources ------------------------------------------------------------------------------------


def test_wav_source_trims_and_skips_bad_files(tmp_path, caplog):
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"garbage" * 20)
    good = DEMO / "what-time-is-it.slt.wav"
    src = WavSource([good, bad, good], endpointer=Endpointer())
    utts = list(src)
    assert len(utts) == 2
    assert all(u.source == "wav" and u.path == str(good) and u.sample_rate == RATE for u in utts)
    assert utts[0].duration_ms < 1000 * read_wav(good)[0].size / RATE
    assert src.errors and src.errors[0][0] == str(bad) and "not a WAV" in src.errors[0][1]
    assert "skipping audio file" in caplog.text
    with pytest.raises(AudioError):
        list(WavSource([bad], skip_errors=False))


def test_text_source_handles_blank_lines_and_bad_utf8(caplog):
    utts = list(TextSource(["turn on the light", "  ", b"lights off \xff\xfe please"]))
    assert [u.text for u in utts] == ["turn on the light", "lights off \ufffd\ufffd please"]
    assert all(u.source == "text" and u.samples.size == 0 for u in utts)
    assert "not valid UTF-8" in caplog.text


def test_voice_modules_do_not_import_sounddevice():
    code = ("import sys, edge_plm.voice.audio, edge_plm.voice.endpoint, edge_plm.voice.asr, "
            "edge_plm.voice.models; assert 'sounddevice' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])


def test_microphone_without_device_gives_audio_error():
    src = MicrophoneSource(device="no-such-microphone-xyz")
    with pytest.raises(AudioError) as info:
        next(iter(src))
    assert "no-such-microphone-xyz" in str(info.value) or "PortAudio" in str(info.value)


def test_packaged_demo_session_is_consistent():
    import json

    lines = [json.loads(line) for line in (DEMO / "session.jsonl").read_text().splitlines() if line.strip()]
    assert 40 <= len(lines) <= 60
    assert {row["label"] for row in lines} == {"ON", "OFF", "NOOP"}
    for row in lines:
        samples, rate = read_wav(DEMO / row["audio"])
        assert rate == RATE and len(samples) > RATE // 2 and row["text"]
    wavs = list(DEMO.glob("*.wav"))
    assert {row["audio"] for row in lines} == {w.name for w in wavs}  # every clip is used
    assert len({w.name.split(".")[1] for w in wavs}) >= 3  # several voices
    assert sum(w.stat().st_size for w in wavs) < 3_000_000
