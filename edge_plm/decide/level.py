"""The level a transcript names for a dimmer ("set the lamp to thirty percent" -> 0.30, "half
brightness" -> 0.5, "all the way up" -> 1.0): read by a small grammar, never guessed by a model.
Pure: no I/O.

`read_level(transcript)` gives a level in [0, 1], or None when the words name none. The words are
read as an ASR writes them (lower case, numbers as words; digits and "%" are taken too), number
words by `text_to_num.alpha2digit`. In order:

1. a number followed by "percent" / "per cent" / "%": that share of full ("to thirty percent",
   "twenty five percent brightness"); above 100 percent is no level;
2. a number 0..100 after "to" / "at" / "by" or before "brightness" / "percent", in a transcript
   with a brightness word ("brightness", "bright", "brighter", "level", "dim", "dimmer"):
   "brightness to fifty", "dim the lights to ten" -> 0.50, 0.10 (a number followed by a time
   unit, "o'clock", "am" or "pm" is a time, not a level: "in twenty minutes", "at seven");
3. words: "full", "maximum", "max", "highest", "brightest", "all the way up" -> 1.0; "half",
   "halfway" -> 0.5; "a quarter" -> 0.25; "three quarters" -> 0.75; "minimum", "min", "lowest",
   "dimmest", "all the way down" -> ``MIN_LEVEL``. "half", "quarter" and "full" count only as a
   level's word: after "to" / "at" / "on" / "by", before "brightness" / "power" / "way" / "level"
   / "blast" / "strength" / "please", or alone ("half brightness", "lamp at half", "full
   please"), and never before "past" / "to" / "of" / "an" / "hour", so "in half an hour", "at a
   quarter past seven" and "the kettle is full" are no level.
"""

from __future__ import annotations

import re

from text_to_num import alpha2digit

from edge_plm.switch.tokenizer import normalize

#: The level of "minimum", "lowest", "all the way down": 1 %, the lowest a dimmer shows while it
#: stays on (Home Assistant's brightness "minimum" is 1 % too); 0 would be off, which is OFF's.
MIN_LEVEL = 0.01

_PERCENT = re.compile(r"(\d+(?:\.\d+)?) ?(?:percent|per cent)\b")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_BRIGHTNESS_WORDS = frozenset("brightness bright brighter level dim dimmer dimmed".split())
_NUMBER_BEFORE = frozenset("to at by".split())
_NUMBER_AFTER = frozenset("brightness percent".split())
_TIME_AFTER = frozenset("second seconds sec secs minute minutes min mins hour hours hr hrs o'clock oclock am pm "
                        "past days day".split())
_WORD_BEFORE = frozenset("to at on by".split())
_WORD_AFTER = frozenset("brightness power way level blast strength please".split())
_FREE_WORDS = {"maximum": 1.0, "max": 1.0, "highest": 1.0, "brightest": 1.0, "minimum": MIN_LEVEL,
               "min": MIN_LEVEL, "lowest": MIN_LEVEL, "dimmest": MIN_LEVEL, "halfway": 0.5}
_TIME_WORDS = frozenset("past to of an hour after before".split())
_SLOT_WORDS = {"full": 1.0, "half": 0.5, "quarter": 0.25, "quarters": 0.75}


def _words(text: str) -> list[str]:
    """The transcript's words, normalised as the switch reads them, with "%" kept as "percent"."""
    return normalize(text.replace("%", " percent ")).split()


def percent_level(digits: str) -> float | None:
    """Rule 1: a number followed by "percent" in the digit-written text."""
    m = _PERCENT.search(digits)
    if m is None:
        return None
    value = float(m.group(1))
    return value / 100.0 if value <= 100 else None


def context_number_level(words: list[str]) -> float | None:
    """Rule 2: a number 0..100 after "to" / "at" / "by" or before "brightness", with a
    brightness word in the transcript and no time unit after it."""
    if not _BRIGHTNESS_WORDS & set(words):
        return None
    for i, w in enumerate(words):
        if not _NUMBER.fullmatch(w):
            continue
        before = words[i - 1] if i else ""
        after = words[i + 1] if i + 1 < len(words) else ""
        if after in _TIME_AFTER or not (before in _NUMBER_BEFORE or after in _NUMBER_AFTER):
            continue
        value = float(w)
        if value <= 100:
            return value / 100.0
    return None


def _phrase_at(words: list[str], phrase: str) -> int:
    """The index of the first word of ``phrase`` in ``words``, -1 when absent."""
    p = phrase.split()
    for i in range(len(words) - len(p) + 1):
        if words[i:i + len(p)] == p:
            return i
    return -1


def _slot_word(words: list[str], i: int) -> bool:
    """Is words[i] ("half", "quarter", "full") used as a level: after to/at/on/by (or "a" after
    them), before a level word, or the whole transcript ("a quarter"); never before a time word."""
    before = words[i - 1] if i else ""
    if before in ("a", "three") and i >= 2:
        before = words[i - 2]
    elif before in ("a", "three"):
        before = ""
    after = words[i + 1] if i + 1 < len(words) else ""
    if after in _TIME_WORDS:  # "a quarter past seven", "half an hour": a time
        return False
    return before in _WORD_BEFORE or after in _WORD_AFTER or (before == "" and after == "")


def word_level(words: list[str]) -> float | None:
    """Rule 3: the level words."""
    for phrase in ("all the way up", "all the way down", "half way"):
        if _phrase_at(words, phrase) >= 0:
            return {"all the way up": 1.0, "all the way down": MIN_LEVEL, "half way": 0.5}[phrase]
    for i, w in enumerate(words):
        if w in _FREE_WORDS:
            return _FREE_WORDS[w]
        if w in _SLOT_WORDS and _slot_word(words, i):
            if w == "quarters" and not (i and words[i - 1] == "three"):
                continue
            if w == "quarter" and i and words[i - 1] == "three":  # "three quarter brightness"
                return 0.75
            return _SLOT_WORDS[w]
    return None


def read_level(text: str) -> float | None:
    """The level in [0, 1] the transcript names (module docstring), None when it names none."""
    words = _words(text)
    if not words:
        return None
    digits = alpha2digit(" ".join(words), "en")
    level = percent_level(digits)
    if level is None:
        level = context_number_level(digits.split())
    if level is None:
        level = word_level(words)
    return level


__all__ = ["MIN_LEVEL", "read_level"]
