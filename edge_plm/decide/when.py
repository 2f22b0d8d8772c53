"""The time of a timed command ("in twenty minutes", "at seven thirty", "for an hour", "until
ten"): read by a small grammar of spoken time phrases, never guessed by the model. Pure: no I/O.

`read_time(transcript, now)` gives

- a `TimeSlot`: its kind (``at``: act at ``due``; ``for`` / ``until``: act now, go back at
  ``due``), the due wall time, and the phrase's place in the transcript, so that the model
  predicts on the rest (`TimeSlot.command`: "in twenty minutes please turn off all the lights"
  -> "please turn off all the lights");
- `Unreadable`: time words whose time cannot be read ("in a bit", "later", "tonight"): the
  device asks, it never acts now;
- None: no time in it (the command is what it was before timers existed).

The phrase is read from the words as an ASR writes them (lower case, numbers as words;
digits are taken too). Number words ("forty five") are read by text2num, the rest by the
grammar below; `benchmarks/time_slot_parsers.py` measured it against parsedatetime and
dateparser on spoken lines (BENCHMARKS.md, "Timed commands"). Clock times without am / pm are
the next time the clock shows them ("at seven" at 14:05 is 19:00, at 06:00 it is 07:00).
Idioms are not times: "in a minute", "for a second", "in a moment" give None.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from text_to_num import text2num

#: The kinds of a time slot: act at the time, or act now and go back at the time.
KINDS = ("at", "for", "until")
_TRIGGERS = {"in": "at", "at": "at", "for": "for", "until": "until", "till": "until"}

_NUMBER_WORDS = frozenset((
    "zero oh one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty "
    "ninety hundred").split())
_UNITS = {"second": 1, "seconds": 1, "sec": 1, "secs": 1, "minute": 60, "minutes": 60, "min": 60,
          "mins": 60, "hour": 3600, "hours": 3600, "hr": 3600, "hrs": 3600}
_IDIOMS = {"minute", "second", "sec", "moment", "jiffy", "tick"}  # "in a minute": not a time
#: Words after a trigger that mean a time no clock can be read from ("in a bit").
_VAGUE_AFTER = {("a", "bit"), ("a", "while"), ("a", "few"), ("a", "little"), ("a", "short"),
                ("the", "evening"), ("the", "morning"), ("the", "afternoon"), ("the", "night"),
                ("some", "time"), ("some", "point"), ("a", "moment's"), ("the", "next")}
_VAGUE_ANYWHERE = {"later", "soon", "tonight", "tomorrow", "afterwards", "shortly", "sometime"}
_VAGUE_AFTER_WORDS = {"dinner", "lunch", "breakfast", "work", "supper", "sunset", "sunrise"}
_POLITE = {"please", "thanks", "thank", "now", "ok", "okay"}
_DAYPART = {"am": "am", "a.m.": "am", "pm": "pm", "p.m.": "pm"}
_DAYPART_PHRASES = {("in", "the", "morning"): "am", ("in", "the", "afternoon"): "pm",
                    ("in", "the", "evening"): "pm", ("at", "night"): "pm", ("tonight",): "pm"}


@dataclass(frozen=True)
class TimeSlot:
    """A time read from a transcript. ``span``: the phrase's character offsets in it."""

    kind: str  # "at", "for" or "until" (`KINDS`)
    due: float  # wall-clock time (seconds since the epoch) of the action or of the way back
    span: tuple[int, int]
    transcript: str

    @property
    def phrase(self) -> str:
        return self.transcript[self.span[0]:self.span[1]]

    @property
    def command(self) -> str:
        """The transcript without the time phrase: what the model predicts on."""
        a, b = self.span
        return " ".join((self.transcript[:a] + " " + self.transcript[b:]).split())


@dataclass(frozen=True)
class Unreadable:
    """Time words whose time cannot be read: the command is asked about, never acted on now."""

    phrase: str


def read_time(transcript: str, now: float) -> TimeSlot | Unreadable | None:
    """The time slot of `transcript` at wall time `now` (module docstring)."""
    words, starts = _words(transcript)
    for i, w in enumerate(words):
        kind = _TRIGGERS.get(w)
        if kind is None:
            continue
        rest = words[i + 1:]
        read = (_clock(rest) if w in ("at", "until", "till") else _duration(rest, bare=w == "in"))
        if read is None:
            if tuple(rest[:2]) in _VAGUE_AFTER:
                return Unreadable(" ".join(words[i:i + 3]))
            continue
        n, value = read
        end = i + 1 + n
        span = (starts[i], starts[end - 1] + len(words[end - 1]))
        due = _due_clock(value, now) if isinstance(value, tuple) else now + value
        return TimeSlot(kind, due, span, transcript)
    for i, w in enumerate(words):
        if w in _VAGUE_ANYWHERE:
            return Unreadable(w)
        if w == "after" and i + 1 < len(words) and words[i + 1] in _VAGUE_AFTER_WORDS:
            return Unreadable(f"after {words[i + 1]}")
    return None


def _words(text: str) -> tuple[list[str], list[int]]:
    found = list(re.finditer(r"\S+", text.lower()))
    return [m.group(0) for m in found], [m.start() for m in found]


def _number(words: list[str]) -> tuple[int, int] | None:
    """The number at the start of `words` (digits, or a run of number words: text2num):
    (words used, value)."""
    if words and words[0].isdigit():
        return 1, int(words[0])
    n = 0
    while n < len(words) and words[n] in _NUMBER_WORDS:
        n += 1
    while n > 0:  # the longest run text2num reads ("forty five"; "seven thirty" is two numbers)
        try:
            return n, int(text2num(" ".join(words[:n]), "en"))
        except ValueError:
            n -= 1
    return None


def _duration(words: list[str], bare: bool) -> tuple[int, float] | None:
    """A duration at the start of `words`: (words used, seconds). ``bare``: a lone number at the
    end ("in five") is minutes."""
    if words[:4] == ["a", "quarter", "of", "an"] and words[4:5] == ["hour"]:
        return 5, 900.0
    if words[:3] == ["half", "an", "hour"]:
        return 3, 1800.0
    first = _amount(words)
    if first is None:
        if bare and (num := _number(words)) is not None and num[1] < 60 and (
                len(words) == num[0] or words[num[0]] in _POLITE):
            return num[0], num[1] * 60.0
        return None
    n, seconds = first
    if words[n:n + 3] == ["and", "a", "half"]:  # half of one unit: "two hours and a half"
        count = _number(words)
        unit = seconds / max(1, count[1]) if count else seconds  # "an hour": one unit
        return n + 3, seconds + unit / 2
    if words[n:n + 1] == ["and"] and (more := _amount(words[n + 1:])) is not None:
        return n + 1 + more[0], seconds + more[1]
    return n, seconds


def _amount(words: list[str]) -> tuple[int, float] | None:
    """"twenty minutes", "an hour", "two hours": (words used, seconds); "a minute" is an idiom."""
    if words[:1] in (["a"], ["an"]) and len(words) > 1 and words[1] in _UNITS:
        if words[1] in _IDIOMS:
            return None
        return 2, float(_UNITS[words[1]])
    num = _number(words)
    if num is None or num[0] >= len(words) or words[num[0]] not in _UNITS:
        return None
    return num[0] + 1, float(num[1] * _UNITS[words[num[0]]])


def _clock(words: list[str]) -> tuple[int, tuple[int, int, str | None]] | None:
    """A clock time at the start of `words`: (words used, (hour, minute, "am" / "pm" / None))."""
    if words[:1] in (["noon"], ["midday"]):
        return 1, (12, 0, "pm")
    if words[:1] == ["midnight"]:
        return 1, (0, 0, "am")
    n, hour, minute = _clock_words(words)
    if n == 0:
        return None
    if words[n:n + 1] in (["o'clock"], ["oclock"]):
        n += 1
    part = _DAYPART.get(words[n]) if n < len(words) else None
    if part is not None:
        return n + 1, (hour, minute, part)
    for phrase, part in _DAYPART_PHRASES.items():
        if tuple(words[n:n + len(phrase)]) == phrase:
            return n + len(phrase), (hour, minute, part)
    return n, (hour, minute, None)


def _clock_words(words: list[str]) -> tuple[int, int, int]:
    """"quarter past six", "half past eight", "ten to nine", "seven thirty", "7:30", "three":
    (words used, hour, minute); (0, 0, 0) when it is none of them."""
    if words and re.fullmatch(r"\d{1,2}:\d{2}", words[0]):
        h, m = map(int, words[0].split(":"))
        return (1, h, m) if h < 24 and m < 60 else (0, 0, 0)
    lead = {"quarter": 15, "half": 30}.get(words[0]) if words else None
    used = 1
    if lead is None and (num := _number(words)) is not None and words[num[0]:num[0] + 1] in (["past"], ["to"]):
        lead, used = num[1], num[0]
    if lead is not None and words[used:used + 1] in (["past"], ["to"]):
        hour = _number(words[used + 1:])
        if hour is None or not 1 <= hour[1] <= 12 or lead >= 60:
            return 0, 0, 0
        if words[used] == "past":
            return used + 1 + hour[0], hour[1], lead
        return used + 1 + hour[0], hour[1] - 1 if hour[1] > 1 else 12, 60 - lead
    if not words or not (words[0].isdigit() or words[0] in _NUMBER_WORDS) or words[0] in ("oh", "zero"):
        return 0, 0, 0
    hour = int(words[0]) if words[0].isdigit() else int(text2num(words[0], "en"))
    if hour > 23:
        return 0, 0, 0
    minute_words = words[1:]
    if minute_words[:1] == ["oh"] and (m := _number(minute_words[1:2])) is not None and m[1] < 10:
        return 3, hour, m[1]
    m = _number(minute_words)
    if m is not None and 10 <= m[1] < 60:
        return 1 + m[0], hour, m[1]
    return 1, hour, 0


def _due_clock(value: tuple[int, int, str | None], now: float) -> float:
    """The next wall time after `now` the clock shows ``(hour, minute, part)`` (no part and an
    hour of 1-12: the earlier of the morning's and the evening's)."""
    hour, minute, part = value
    base = dt.datetime.fromtimestamp(now)
    if part == "pm" and hour < 12:
        hours = [hour + 12]
    elif part == "am":
        hours = [0 if hour == 12 else hour]
    elif part == "pm" or hour == 0 or hour > 12:
        hours = [hour % 24]
    else:
        hours = [hour % 12, hour % 12 + 12]
    best = None
    for h in hours:
        t = base.replace(hour=h, minute=minute, second=0, microsecond=0)
        if t.timestamp() <= now:
            t += dt.timedelta(days=1)
        best = t if best is None or t < best else best
    return best.timestamp()


__all__ = ["KINDS", "TimeSlot", "Unreadable", "read_time"]
