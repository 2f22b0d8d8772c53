"""Is what the person said inside an ask window a "yes", a "no", or neither?

Two readers (benchmarks/bench_answers.py compares them on flite and espeak-ng answers with
noise mixed in; docs/benchmarks-log.md "Talk-back (issue 21)"):
  * `classify_answer(text, asked)` reads a transcript (the loop's normal ASR output);
  * `GrammarAnswers` decodes the utterance's audio again with a pocketsphinx JSGF grammar of the
    answer phrases (and a short filler loop, so other speech can come out as neither) and reads
    its words the same way, except "on" / "off" (see `GrammarAnswers.classify`).
The loop uses the grammar first and the transcript when the grammar hears no answer
(`edge_plm.voice.talkback.Talkback.answer`).

Rules (whole words, case-insensitive):
  * yes words: yes, yeah, yep, yup, sure, okay, ok, please, "do it", "go ahead";
  * no words: no, nope, nah, "leave it", "don't", "not", "stop";
  * "on" / "off": the word naming the asked action confirms, the other one rejects (to "On?",
    "off" is a no); without an asked action, "on" confirms and "off" rejects; an answer that
    says one of them also says which state the person wants (`stated_state`: to "On?", "off"
    or "no, off" is a no that asks for OFF);
  * words that contradict each other ("yes no"; "no, on" to "On?"), no answer word at all, or
    more than `MAX_ANSWER_WORDS` words ("yes, and turn on the fan too" is a new command): not
    an answer (None); the utterance is then handled as an ordinary one.
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


def classify_answer(text: str, asked: str | None = None, states: bool = True) -> bool | None:
    """True (yes), False (no) or None (not an answer) for the transcript `text`; `asked` is
    the asked action's name ("ON" / "OFF"), which decides what "on" and "off" mean
    (`states=False`: "on" / "off" do not count)."""
    words = _WORD.findall(text.lower())
    if not words or len(words) > MAX_ANSWER_WORDS:
        return None
    verdicts = set()
    if any(_has(words, p) for p in YES_PHRASES):
        verdicts.add(True)
    if any(_has(words, p) for p in NO_PHRASES):
        verdicts.add(False)
    for word, state in (("on", "ON"), ("off", "OFF")) if states else ():
        if word in words:
            verdicts.add(asked is None and state == "ON" or asked == state)
    return verdicts.pop() if len(verdicts) == 1 else None


def stated_state(text: str) -> str | None:
    """"ON" / "OFF" when the (short) answer `text` names exactly one of the two states ("off",
    "no, off", "yes on"), else None (a bare "yes" / "no", or both words)."""
    words = _WORD.findall(text.lower())
    if not words or len(words) > MAX_ANSWER_WORDS:
        return None
    named = {state for word, state in (("on", "ON"), ("off", "OFF")) if word in words}
    return named.pop() if len(named) == 1 else None


#: The JSGF grammar of `GrammarAnswers`: the answer phrases, and a filler word loop that lets
#: other speech come out as neither (without it every sound would be forced to yes or no).
#: "ok" / "okay" sound too much like "off" to the grammar: they count in transcripts only
_NOT_IN_GRAMMAR = ("ok", "okay")
FILLERS = ("the", "it")  # more fillers swallow answers (benchmarks/bench_answers.py)


def answer_jsgf(fillers: tuple[str, ...] = FILLERS, states: bool = True) -> str:
    yes = " | ".join(p for p in YES_PHRASES if p not in _NOT_IN_GRAMMAR)
    no = " | ".join(p for p in NO_PHRASES if p != "dont")
    fill = " | ".join(fillers)
    return ("#JSGF V1.0;\ngrammar answer;\n"
            f"public <answer> = [<filler>+] (<yes> | <no>{' | on | off' if states else ''}) "
            "[<filler>+] | <filler>+;\n"
            f"<yes> = {yes};\n<no> = {no};\n<filler> = {fill};\n")


class GrammarAnswers:
    """A pocketsphinx decoder searching only the answer grammar (`answer_jsgf`): the
    alternative to reading the normal transcript (benchmarks/bench_answers.py). It decodes the
    utterance's samples a second time, so it costs one more decode per answer."""

    name = "pocketsphinx-jsgf"

    def __init__(self, fillers: tuple[str, ...] = FILLERS, states: bool = True) -> None:
        try:
            from pocketsphinx import Decoder  # noqa: PLC0415 - heavy import only when used
        except ImportError as exc:
            raise AsrError(f"pocketsphinx is not installed ({exc})") from exc
        import os  # noqa: PLC0415

        try:
            self._decoder = Decoder(logfn=os.devnull, samprate=16000, fwdflat=False,
                                    bestpath=False)
            self._decoder.add_jsgf_string("answer", answer_jsgf(fillers, states))
            self._decoder.activate_search("answer")
        except (RuntimeError, ValueError) as exc:
            raise AsrError(f"pocketsphinx could not load the answer grammar: {exc}") from exc
        self._lock = threading.Lock()

    def words(self, samples: np.ndarray) -> str:
        """The grammar's best path through `samples` (int16, 16 kHz), fillers included."""
        samples = check_samples(samples)
        if no_speech(samples):
            return ""
        with self._lock:
            try:
                self._decoder.reinit_feat()  # the same samples always give the same words
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
        """The answer in `samples`; "on" / "off" in the grammar's words do not count: the
        grammar hears "off" as "on" too often (benchmarks/bench_answers.py), so such answers
        are left to the transcript (`edge_plm.voice.talkback.Talkback.answer`)."""
        return classify_answer(self.words(samples), asked, states=False)


__all__ = ["FILLERS", "MAX_ANSWER_WORDS", "NO_PHRASES", "YES_PHRASES", "GrammarAnswers", "answer_jsgf",
           "classify_answer", "stated_state"]
