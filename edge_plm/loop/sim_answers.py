"""The simulated person's spoken answers in a replay (a session line's ``"answer": "voice"``):
"yes" / "no" synthesised in a voice other than the device's and played into the real loop
(endpointer, ASR, answer recogniser)."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable

import numpy as np

from edge_plm.decide.policy import Action, Decision
from edge_plm.loop.controller import Controller
from edge_plm.loop.replay_score import SessionResult
from edge_plm.loop.sim_clock import SimClock
from edge_plm.voice.asr import AsrBackend
from edge_plm.voice.audio import Utterance
from edge_plm.voice.endpoint import Endpointer
from edge_plm.voice.stream import stream_recording

log = logging.getLogger(__name__)


#: The samples of the simulated person's answer: ``answerer(yes, n)`` for their n-th answer.
Answerer = Callable[[bool, int], np.ndarray]

PAD_S = 0.25  # quiet around a synthesised clip played into the loop (`spoken_input`)
ANSWER_REACTION_S = 0.6  # from the end of the question (and the echo guard) to the answer


class SpokenAnswers:
    """The simulated person's "yes" / "no", spoken by espeak-ng in a voice other than the
    device's (synthesised once each)."""

    def __init__(self, voice: str = "en-gb", rate: int = 160) -> None:
        from edge_plm.voice.speech import EspeakSpeech  # noqa: PLC0415

        self.speech = EspeakSpeech(voice, rate)
        self._cache: dict[bool, np.ndarray] = {}

    def __call__(self, yes: bool, n: int) -> np.ndarray:
        if yes not in self._cache:
            self._cache[yes] = self.speech.synthesize("yes" if yes else "no")
        return self._cache[yes]


def spoken_input(samples: np.ndarray, endpointer: Endpointer, asr: AsrBackend | None) -> Utterance:
    """Samples as the microphone would hand them over: with `PAD_S` of quiet around them (a
    microphone hears the room before and after; a synthesised clip starts at its first
    sound), trimmed by the endpointer and, with a streaming ASR, fed to it in 30 ms blocks
    (`wav_inputs` does the same for files)."""
    pad = np.zeros(int(PAD_S * endpointer.sample_rate), dtype=np.int16)
    trimmed = endpointer.trim_result(np.concatenate([pad, np.asarray(samples, np.int16), pad]))
    utt = Utterance(samples=trimmed.samples, source="voice", truncated=trimmed.truncated)
    if asr is not None and asr.streams and len(utt.samples):
        utt = stream_recording(utt, asr, endpointer.silence_tail_ms)
    elif len(utt.samples):
        utt.endpoint_at, utt.tail_ms = time.perf_counter(), float(endpointer.silence_tail_ms)
    return utt


@functools.lru_cache(maxsize=1)
def _default_answerer() -> SpokenAnswers:
    return SpokenAnswers()


def answer_by_voice(wants: dict[str, Action] | None, controller: Controller, clock: SimClock,
                     endpointer: Endpointer, answerer: Answerer | None,
                     result: SessionResult) -> None:
    """The person answers the open ask (talk-back on, wish known) about the device the
    question is about (the first still in doubt, as the loop takes it): after the question
    and the echo guard, "yes" when the asked action is their wish for it, else "no", through
    the real loop (endpointer, ASR, answer recogniser)."""
    asking = [(n, o) for n, o in controller.policies.open.items()
              if o.decision is Decision.ASK and o.answer is None]
    if wants is None or controller.talkback is None or not asking:
        return
    name, o = asking[0]
    yes = o.prediction.action is wants[name]
    samples = (answerer or _default_answerer())(yes, result.spoken_answers)
    utt = spoken_input(samples, endpointer, controller.asr)
    quiet = controller.talkback.guard.quiet_at()
    heard_s = (utt.duration_ms + utt.tail_ms) / 1000.0
    clock.set(max(clock(), quiet if quiet is not None else clock()) + ANSWER_REACTION_S + heard_s)
    outcome = controller.handle(utt)
    result.answers.append((len(result.lines), yes, outcome.answer))
    result.spoken_answers += 1
    if outcome.answer is not yes:
        result.answer_errors += 1
        log.info("spoken %s heard as %r", "yes" if yes else "no", outcome.transcript)

