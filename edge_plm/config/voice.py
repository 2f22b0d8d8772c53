"""The voice's sections: ``[audio]`` (the microphone and the endpointer), ``[asr]`` (the ear)
and ``[talkback]`` (the device's spoken questions), each with its checks (`problems`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from edge_plm.config.keys import Problems, setting


@dataclass
class AudioConfig:
    source: str = setting("microphone", "microphone | text (WAV files: edge-plm replay)")
    device: str = setting("", "sounddevice device name or index; empty = system default")
    sample_rate: int = setting(16000, "rate the ASR sees; capture at another rate is resampled")
    block_ms: int = 30
    vad: str = setting("webrtc", "webrtc | energy ; how a block is judged speech (benchmarks/bench_endpoint.py)")
    vad_aggressiveness: int = setting(2, "webrtc VAD: 0 (keeps most) .. 3 (drops most non-speech)")
    vad_floor_margin_db: float = setting(8.0, "speech must also be this far above the running noise floor; 0 = off")
    energy_threshold_db: float = setting(-40.0, "dBFS above which a block counts as speech (vad = energy)")
    silence_tail_ms: int = setting(300, "end the utterance after this much silence")
    max_utterance_ms: int = 8000
    min_utterance_ms: int = 200

    def problems(self) -> list[str]:
        """The [audio] checks (also `Endpointer.from_config`'s)."""
        out = Problems()
        out.need(self.source != "wav", "audio.source = 'wav' needs the files: `edge-plm run --audio FILE...` "
                                    "(or `edge-plm replay FILE`); the service listens to 'microphone' or 'text'")
        out.need(self.source in ("microphone", "wav", "text"),
                 "audio.source must be 'microphone' or 'text'")
        out.need(self.sample_rate > 0, f"audio.sample_rate must be > 0, got {self.sample_rate}")
        out.need(0 < self.block_ms <= 1000, f"audio.block_ms must be in 1..1000, got {self.block_ms}")
        out.need(self.energy_threshold_db <= 0,
                 f"audio.energy_threshold_db is in dBFS and must be <= 0, got {self.energy_threshold_db}")
        out.need(self.silence_tail_ms >= 0, f"audio.silence_tail_ms must be >= 0, got {self.silence_tail_ms}")
        out.need(self.vad in ("energy", "webrtc"), f"audio.vad must be 'energy' or 'webrtc', got {self.vad!r}")
        out.need(self.vad_floor_margin_db >= 0, f"audio.vad_floor_margin_db must be >= 0, got {self.vad_floor_margin_db}")
        out.need(0 <= self.vad_aggressiveness <= 3,
                 f"audio.vad_aggressiveness must be 0..3, got {self.vad_aggressiveness}")
        out.need(self.vad != "webrtc" or self.block_ms in (10, 20, 30),
                 f"audio.vad = 'webrtc' needs audio.block_ms of 10, 20 or 30, got {self.block_ms}")
        out.need(self.max_utterance_ms > 0, f"audio.max_utterance_ms must be > 0, got {self.max_utterance_ms}")
        out.need(0 <= self.min_utterance_ms < self.max_utterance_ms,
                 f"audio.min_utterance_ms must be >= 0 and below audio.max_utterance_ms "
                 f"({self.max_utterance_ms}), got {self.min_utterance_ms}")
        return out


#: The ear's language models (``asr.lm``; edge_plm/voice/ear_lm.py).
EAR_LMS = ("household", "shipped", "general")


@dataclass
class AsrConfig:
    backend: str = setting("auto", "auto | vosk | pocketsphinx | text ; auto = vosk if a model is installed")
    vosk_model: str = setting("", "model directory (or a name under paths.models_dir)")
    vosk_grammar: list[str] = setting([], "optional phrase list")
    language: str = "en"
    lm: str = setting("household", "household | shipped | general ; pocketsphinx's language model: the starting "
                      "model's commands and chatter, plus the household's names and labelled commands "
                      "(household), without them (shipped), or pocketsphinx's general English LM")
    min_fluency: float = setting(-4.5, "heard words less likely than this under the ear's LM (mean natural-log "
                                 "probability per word) are asked about, never acted on; -100 = off")
    max_transcript_chars: int = setting(500, "longer transcripts are cut (logged warning); 0 = no cap")

    def problems(self) -> list[str]:
        """The [asr] checks."""
        out = Problems()
        out.need(self.backend in ("auto", "vosk", "pocketsphinx", "text"),
                 "asr.backend must be 'auto', 'vosk', 'pocketsphinx' or 'text'")
        out.need(self.lm in EAR_LMS, f"asr.lm must be one of {', '.join(EAR_LMS)}, got {self.lm!r}")
        out.need(math.isfinite(self.min_fluency) and self.min_fluency <= 0,
                 f"asr.min_fluency must be a number <= 0 (a mean log-probability), got {self.min_fluency}")
        out.need(self.max_transcript_chars >= 0,
                 f"asr.max_transcript_chars must be >= 0 (0: no cap), got {self.max_transcript_chars}")
        return out


#: The speech output backends (`edge_plm.voice.speech.BACKENDS`; plain names, no import).
SPEECH_BACKENDS = ("espeak-ng", "piper", "none")


@dataclass
class TalkbackConfig:
    enabled: bool = setting(False, "say the question out loud when asking and take a spoken "
                                   "yes/no as the label (off: LED/buzzer only; docs/policy.md)")
    backend: str = setting("espeak-ng", "espeak-ng | piper | none ; the speech output")
    voice: str = setting("en-us", "espeak-ng voice (espeak-ng --voices)")
    rate_wpm: int = setting(175, "espeak-ng speaking rate, words per minute")
    piper_model: str = setting("", "piper voice model (.onnx, with its .onnx.json) for backend = piper")
    output_device: str = setting("", "sounddevice output device name or index; empty = system default")
    answers: str = setting("grammar", "grammar (pocketsphinx answer grammar over the audio, else "
                                      "the transcript) | transcript (the transcript only)")
    echo_guard_ms: int = setting(500, "after the device speaks, microphone input is dropped this long")
    confirm: bool = setting(False, 'say what was done after acting ("On.")')
    chime: bool = setting(False, "a short tone instead of words (question and confirmation)")

    def problems(self) -> list[str]:
        """The [talkback] checks."""
        t, out = self, Problems()
        out.need(t.backend in SPEECH_BACKENDS,
                 f"talkback.backend must be one of {', '.join(SPEECH_BACKENDS)}, got {t.backend!r}")
        out.need(t.answers in ("grammar", "transcript"),
                 f"talkback.answers must be one of grammar, transcript, got {t.answers!r}")
        out.need(80 <= t.rate_wpm <= 450, f"talkback.rate_wpm must be in 80..450, got {t.rate_wpm}")
        out.need(0 <= t.echo_guard_ms <= 5000,
                 f"talkback.echo_guard_ms must be in 0..5000, got {t.echo_guard_ms}")
        out.need(t.backend != "piper" or bool(t.piper_model),
                 "talkback.piper_model must name a voice model file when talkback.backend = piper")
        return out
