"""Talk-back: what the device says when, and what it takes as a spoken answer (docs/policy.md).

The controller calls `Talkback.ask` where an ask starts (the question, "On?" or "Lamp on?",
plays from the prompt cache), `Talkback.acted` after it drove the relay (a confirmation "On."
or a chime, when configured), `Talkback.is_echo` for every microphone utterance (one heard
while the device spoke or within ``talkback.echo_guard_ms`` after is dropped: the device never
learns from its own voice), and `Talkback.answer` for a transcript heard while an ask is open
(`edge_plm.voice.answers.classify_answer`: yes / no / not an answer).
"""

from __future__ import annotations

import logging
from collections import deque
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from edge_plm.config.settings import TalkbackConfig
from edge_plm.voice.answers import MAX_ANSWER_WORDS, classify_answer, stated_state
from edge_plm.voice.asr_base import AsrError
from edge_plm.voice.audio import Utterance
from edge_plm.voice.echo import EchoGuard
from edge_plm.voice.speech import (NullPlayer, PromptCache, SoundDevicePlayer, SpeechBackend,
                                   SpeechError, chime, make_speech)

log = logging.getLogger(__name__)

Clock = Callable[[], float]
_WORDS = {"ON": "on", "OFF": "off"}


def prompt_text(action: str, device_name: str | None = None) -> str:
    """The question for `action` ("ON" / "OFF"): "On?" or, naming the device, "Lamp on?"."""
    word = _WORDS[str(action).upper()]
    if device_name:
        return f"{device_name.strip().capitalize()} {word}?"
    return f"{word.capitalize()}?"


def confirmation_text(action: str, device_name: str | None = None) -> str:
    """What is said after acting: "On." / "Lamp on."."""
    return prompt_text(action, device_name)[:-1] + "."


class Talkback:
    """The dialogue glue for one device loop; `clock` is the controller's clock."""

    def __init__(self, cfg: TalkbackConfig, speech: SpeechBackend, player, clock: Clock,
                 cache_dir: str | Path | None = None) -> None:
        self.cfg = cfg
        self.speech = speech
        self.player = player
        self.clock = clock
        self.cache = PromptCache(speech, cache_dir)
        self.guard = EchoGuard(cfg.echo_guard_ms / 1000.0)
        self._chime = chime()
        self._grammar = None  # GrammarAnswers, created at the first answer (or `warm`)
        self.asks = 0
        self.told: deque[str] = deque(maxlen=100)  # the latest answers `tell` said, in order
        self.answers = 0
        self.unclear_answers = 0  # short non-answers during an ask (`unclear`)
        self.ask_start_ms: list[float] = []  # call to playback started, per question (bounded)

    @property
    def dropped(self) -> int:
        """Utterances dropped as the device's own voice."""
        return self.guard.dropped

    def warm(self, device_names: list[str | None] | None = None) -> None:
        """Synthesise every question (and confirmation) now, so asking only plays."""
        if self.cfg.answers == "grammar":
            try:
                self._grammar_answers()
            except AsrError as exc:
                log.error("talk-back: %s; answers are read from the transcript", exc)
        for name in device_names or [None]:
            for action in _WORDS:
                self.cache.get(prompt_text(action, name))
                if self.cfg.confirm:
                    self.cache.get(confirmation_text(action, name))

    def _say(self, samples: np.ndarray, now: float) -> float:
        seconds = self.player.play(samples)
        self.guard.speaking(now, seconds)
        return seconds

    def ask(self, action: str, device_name: str | None = None, now: float | None = None) -> float:
        """Say the question for `action`; returns the seconds it plays (0: nothing said)."""
        t0 = time.perf_counter()
        now = self.clock() if now is None else now
        samples = self._chime if self.cfg.chime else self._samples(prompt_text(action, device_name))
        seconds = self._say(samples, now) if len(samples) else 0.0
        self.asks += 1
        if len(self.ask_start_ms) < 10_000:
            self.ask_start_ms.append((time.perf_counter() - t0) * 1e3)
        return seconds

    def acted(self, action: str, device_name: str | None = None, now: float | None = None) -> float:
        """After acting: a confirmation or a chime when ``talkback.confirm`` is on, else nothing."""
        if not self.cfg.confirm:
            return 0.0
        now = self.clock() if now is None else now
        samples = self._chime if self.cfg.chime else self._samples(confirmation_text(action, device_name))
        return self._say(samples, now) if len(samples) else 0.0

    def tell(self, text: str, now: float | None = None) -> float:
        """Say `text` (an answer to a question: "The heater is on."); returns the seconds it
        plays (0: nothing said). Synthesised once per text (the prompt cache)."""
        now = self.clock() if now is None else now
        samples = self._samples(text)
        self.told.append(text)
        return self._say(samples, now) if len(samples) else 0.0

    def _samples(self, text: str) -> np.ndarray:
        try:
            return self.cache.get(text)
        except SpeechError as exc:  # the LED still shows the ask; say why once per failure
            log.error("talk-back could not synthesise %r: %s", text, exc)
            return np.zeros(0, dtype=np.int16)

    def is_echo(self, utt: Utterance, now: float) -> bool:
        """A microphone utterance that overlaps the device's own speech (or its guard)."""
        if utt.text is not None or len(utt.samples) == 0:
            return False  # a text input is not heard through the microphone
        end = now
        start = end - utt.duration_ms / 1000.0 - utt.tail_ms / 1000.0
        return self.guard.is_echo(start, end)

    def _grammar_answers(self):
        if self._grammar is None:
            from edge_plm.voice.answers import GrammarAnswers  # noqa: PLC0415

            self._grammar = GrammarAnswers()
        return self._grammar

    def unclear(self, text: str, predicted: str) -> bool:
        """Heard during an ask, not an answer: a short one (at most `MAX_ANSWER_WORDS` words)
        the model does not take for ON/OFF is a misheard answer ("us" for "yes"), counted;
        anything else is a new utterance."""
        if len(text.split()) <= MAX_ANSWER_WORDS and predicted not in _WORDS:
            self.unclear_answers += 1
            return True
        return False

    def answer(self, text: str, asked: str, utt: Utterance | None = None) -> bool | None:
        """yes (True) / no (False) / not an answer (None) for what was heard during an ask:
        with ``talkback.answers = "grammar"`` and audio, the answer grammar's reading of the
        samples, else (or when it hears no answer) the transcript's."""
        verdict = None
        if self.cfg.answers == "grammar" and utt is not None and len(utt.samples):
            try:
                verdict = self._grammar_answers().classify(utt.samples, asked)
            except AsrError as exc:
                log.error("answer grammar failed (%s); reading the transcript", exc)
        if verdict is None:
            verdict = classify_answer(text, asked)
        if verdict is not None:
            self.answers += 1
        return verdict


    def said(self, text: str) -> str | None:
        """The state ("ON" / "OFF") an answer heard in transcript `text` names, if one
        (`stated_state`; the grammar's "on" / "off" are not trusted, so the transcript's)."""
        return stated_state(text)


def make_player(cfg: TalkbackConfig):
    """The player for `cfg`: sounddevice on the configured device, or a NullPlayer (with an
    ERROR line saying why) when there is no usable output device or backend ``none``."""
    if cfg.backend == "none":
        return NullPlayer()
    try:
        return SoundDevicePlayer(cfg.output_device or None)
    except SpeechError as exc:
        log.error("talk-back: %s; questions are not spoken (the LED still shows them)", exc)
        return NullPlayer()


def make_talkback(cfg: TalkbackConfig, clock: Clock, cache_dir: str | Path | None = None,
                  player=None) -> Talkback:
    """The configured talk-back (`player`: None = `make_player`); raises SpeechError when the
    backend cannot be created (e.g. espeak-ng not installed)."""
    speech = make_speech(cfg.backend, cfg.voice, cfg.rate_wpm, cfg.piper_model)
    return Talkback(cfg, speech, player if player is not None else make_player(cfg), clock,
                    cache_dir)


__all__ = ["Talkback", "confirmation_text", "make_player", "make_talkback", "prompt_text"]
