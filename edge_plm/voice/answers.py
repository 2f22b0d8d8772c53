"""Is what the person said inside an ask window a "yes", a "no", or neither?

`classify_answer(text, asked)` reads the loop's normal ASR transcript (the recogniser the device
uses: benchmarks/bench_answers.py compares it with a pocketsphinx JSGF grammar search,
`GrammarAnswers`, on flite and espeak-ng answers with noise mixed in; BENCHMARKS.md).

Rules (whole words, case-insensitive):
  * yes words: yes, yeah, yep, yup, sure, okay, ok, please, "do it", "go ahead";
  * no words: no, nope, nah, "leave it", "don't", "not", "stop";
  * "on" / "off": the word naming the asked action confirms, the other one rejects ("Lamp on?"
    "off" is a no); without an asked action, "on" confirms and "off" rejects;
  * both kinds in one answer ("yes no", "no, on" to "Off?"... is still consistent: both say
    the same), i.e. contradicting words, or none: not an answer (None) — the utterance is
    then handled as an ordinary one.
An answer of more than `MAX_ANSWER_WORDS` words is not an answer either: "yes, and turn on the
fan too" is a new command, not a yes.
"""

from __future__ import annotations

import re
import threading

import numpy as np

from edge_plm.voice.asr_base import AsrError, check_samples, is_marker, no_speech

YES_PHRASES = ("yes", "yeah", "yep", "yup", "sure", "okay", "ok", "please", "do it", "go ahead")
NO_PHRASES = ("no", "nope", "nah", "leave it", "don't", "dont", "not", "stop")
MAX_ANSWER_WORDS = 4

_WORD = re.compile(r"[a-z']+")


def _has(words: list[str], phrase: str) -> bool:
    p = phrase.split()
    return any(words[i:i + len(p)] == p for i in range(len(words) - len(p) + 1))


def classify_answer(text: str, asked: str | None = None) -> bool | None:
    """True (yes), False (no) or None (not an answer) for the transcript `text`; `asked` is
    the asked action's name ("ON" / "OFF"), which decides what "on" and "off" mean."""
    words = _WORD.findall(text.lower())
    if not words or len(words) > MAX_ANSWER_WORDS:
        return None
    verdicts = set()
    if any(_has(words, p) for p in YES_PHRASES):
        verdicts.add(True)
    if any(_has(words, p) for p in NO_PHRASES):
        verdicts.add(False)
    for word, state in (("on", "ON"), ("off", "OFF")):
        if word in words:
            verdicts.add(asked is None and state == "ON" or asked == state)
    return verdicts.pop() if len(verdicts) == 1 else None


#: The JSGF grammar of `GrammarAnswers`: the answer phrases, and a filler word loop that lets
#: other speech come out as neither (without it every sound would be forced to yes or no).
_FILLERS = ("the", "a", "it", "light", "lamp", "turn", "what", "i", "is", "that", "and", "to",
            "thanks", "oh", "you", "so", "then", "we", "he", "all", "if", "well", "now")


def answer_jsgf() -> str:
    yes = " | ".join(YES_PHRASES)
    no = " | ".join(p for p in NO_PHRASES if p != "dont")
    fill = " | ".join(_FILLERS)
    return ("#JSGF V1.0;\ngrammar answer;\n"
            f"public <answer> = [<filler>+] (<yes> | <no> | on | off) [<filler>+] | <filler>+;\n"
            f"<yes> = {yes};\n<no> = {no};\n<filler> = {fill};\n")


class GrammarAnswers:
    """A pocketsphinx decoder searching only the answer grammar (`answer_jsgf`): the
    alternative to reading the normal transcript (benchmarks/bench_answers.py). It decodes the
    utterance's samples a second time, so it costs one more decode per answer."""

    name = "pocketsphinx-jsgf"

    def __init__(self) -> None:
        try:
            from pocketsphinx import Decoder  # noqa: PLC0415 - heavy import only when used
        except ImportError as exc:
            raise AsrError(f"pocketsphinx is not installed ({exc})") from exc
        import os  # noqa: PLC0415

        try:
            self._decoder = Decoder(logfn=os.devnull, samprate=16000, fwdflat=False,
                                    bestpath=False)
            self._decoder.add_jsgf_string("answer", answer_jsgf())
            self._decoder.activate_search("answer")
        except (RuntimeError, ValueError) as exc:
            raise AsrError(f"pocketsphinx could not load the answer grammar: {exc}") from exc
        self._cmn = self._decoder.get_cmn(False)
        self._lock = threading.Lock()

    def words(self, samples: np.ndarray) -> str:
        """The grammar's best path through `samples` (int16, 16 kHz), fillers included."""
        samples = check_samples(samples)
        if no_speech(samples):
            return ""
        with self._lock:
            try:
                self._decoder.set_cmn(self._cmn)
                self._decoder.start_utt()
                self._decoder.process_raw(samples.astype("<i2").tobytes(), full_utt=True)
                self._decoder.end_utt()
                hyp = self._decoder.hyp()
            except RuntimeError as exc:
                raise AsrError(f"pocketsphinx answer grammar failed: {exc}") from exc
        if hyp is None:
            return ""
        return " ".join(w for w in hyp.hypstr.split() if not is_marker(w))

    def classify(self, samples: np.ndarray, asked: str | None = None) -> bool | None:
        return classify_answer(self.words(samples), asked)


__all__ = ["MAX_ANSWER_WORDS", "NO_PHRASES", "YES_PHRASES", "GrammarAnswers", "answer_jsgf",
           "classify_answer"]
