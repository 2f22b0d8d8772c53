"""The ear's language model: which word sequences the recogniser expects to hear.

pocketsphinx's bundled general English LM hears crowd commands badly ("turn off the lights in
the bedroom" -> "donato what about it and") and costs most of the loop's CPU. The starting model
ships its own LM for the ear instead, ``edge_plm/data/models/switch-en.ear.arpa``: a trigram
ARPA model built with pocketsphinx's own builder (``pocketsphinx.lm.ArpaBoLM``, fixed discount
mass 0.5) over the starting model's clean training text (models/build_switch_en.py): its
commands **and** its chatter. A command LM alone turns garble into commands; the chatter gives
ordinary talk a path of its own (BENCHMARKS.md, "The ear"). Sentences with a word the bundled
pronunciation dictionary lacks are left out (the recogniser could not say them).

The household's words join it (``household_sentences``): the configured device names and
aliases in a few command frames, and the command transcripts the household itself labelled.
`build_arpa` over the shipped sentences (``switch-en.ear.txt.gz``) plus those gives the
household's LM; the recogniser swaps it in between utterances (``PocketSphinxASR.use_lm``).

A household with a dimmer also hears dim, brighten and level phrasings of that dimmer's names
(`dimmer_sentences`): the kind head's own DIM / BRIGHTEN / LEVEL templates
(models/build_kinds_en.py writes them to ``switch-en.kinds.txt.gz``), ``{name}`` filled with each
of the dimmer's names and aliases, ``{pct}`` with a small fixed set of levels in words
(`LEVEL_WORDS`, in turn), the templates naming no device ("dim it", "a little brighter") as
they are. A household without a dimmer holds exactly what it held before.

Timed commands ("turn off the lights in twenty minutes", edge_plm/decide/when.py) are spoken
with time phrases the starting model's text never has: `time_phrases` writes them from a small
grammar (numbers as words, as the recogniser writes them), and `timed_sentences` joins them to
every `TIMED_EVERY`-th of the starting model's ON/OFF command sentences, before or after the
command, plus the voice rule's "cancel the timer" sentences (`cancel_sentences`,
edge_plm/loop/timers.py). The build script adds them to the shipped sentences.

Everything here is a pure function of its inputs: the same sentences give the same bytes.
"""

from __future__ import annotations

import functools
import gzip
import io
import re
from collections.abc import Iterable
from pathlib import Path

from edge_plm.config.starting_model import SHIPPED_DIR
from edge_plm.errors import EdgePlmError

EAR_LM = SHIPPED_DIR / "switch-en.ear.arpa"  # the shipped LM the ear loads
EAR_SENTENCES = SHIPPED_DIR / "switch-en.ear.txt.gz"  # the sentences it was built from
KIND_TEMPLATES = SHIPPED_DIR / "switch-en.kinds.txt.gz"  # the kind head's dimmer templates (`dimmer_sentences`)
DISCOUNT_MASS = 0.5  # ArpaBoLM's fixed back-off mass (its default)
# How many times a household sentence counts against one shipped sentence: enough that "fan on"
# beats the shipped chatter's n-grams, bounded so that no household phrase takes over the ear.
HOUSEHOLD_WEIGHT = 3
# A heard transcript counts at most this many times however often it was labelled: a phrase the
# ear already hears well cannot snowball into the only thing it hears.
MAX_REPEATS = 2
#: Every TIMED_EVERY-th ON/OFF command sentence of the ear's text gets a time phrase (the weight of
#: time phrases in the LM). Measured 3, 6 and 12: 12 read fewer spoken times, 3 two more than 6 but
#: with two more wrong actions on spoken crowd commands (docs/benchmarks-log.md §23).
TIMED_EVERY = 6
_MINUTES = ("two", "five", "ten", "fifteen", "twenty", "twenty five", "thirty", "forty", "forty five", "ninety")
_HOURS = ("two", "three", "four", "five", "six", "eight")
_SECONDS = ("ten", "twenty", "thirty", "forty five")
_CLOCK = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
#: The devices a cancel sentence names (the voice rule takes any words before "timer").
_TIMER_NAMES = ("light", "lights", "lamp", "fan", "heater", "plug")
#: How many times a dimmer sentence counts (`dimmer_sentences`): they are many (about 100 per
#: name), so each counts once against a name frame's `HOUSEHOLD_WEIGHT`.
DIMMER_WEIGHT = 1
#: The levels a LEVEL template's ``{pct}`` is filled with, in turn (as the recogniser writes them).
LEVEL_WORDS = ("ten", "twenty", "twenty five", "thirty", "forty", "fifty", "sixty", "seventy", "seventy five",
               "eighty", "ninety", "one hundred")
# Frames for a device name: what a person says to a switch, so that a new name is heard at once.
NAME_FRAMES = ("turn on the {n}", "turn off the {n}", "turn the {n} on", "turn the {n} off",
               "switch on the {n}", "switch off the {n}", "{n} on", "{n} off")


class EarLmError(EdgePlmError, ValueError):
    """The ear's LM cannot be built from what it was given (the message says why)."""


@functools.lru_cache(maxsize=1)
def dictionary_words() -> frozenset[str]:
    """The words of pocketsphinx's bundled pronunciation dictionary (alternates folded)."""
    from pocketsphinx import get_model_path  # noqa: PLC0415 - heavy import only when used

    path = Path(get_model_path()) / "en-us" / "cmudict-en-us.dict"
    words = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                words.add(re.sub(r"\(\d+\)$", "", line.split(maxsplit=1)[0]))
    return frozenset(words)


def ear_words(text: str) -> list[str]:
    """`text` as the recogniser's words: lower case, letters and apostrophes only."""
    return re.sub(r"[^a-z' ]+", " ", text.lower()).split()


def unknown_words(text: str) -> list[str]:
    """The words of `text` that the bundled dictionary cannot pronounce (config check warns)."""
    known = dictionary_words()
    return [w for w in ear_words(text) if w not in known]


def sentence(text: str) -> str | None:
    """`text` as one LM sentence, or None when it is empty or has a word the dictionary lacks."""
    words = ear_words(text)
    if not words or any(w not in dictionary_words() for w in words):
        return None
    return " ".join(words)


def build_arpa(sentences: Iterable[str]) -> str:
    """The ARPA text of a trigram LM over `sentences` (one per item, already `sentence`-clean),
    built by pocketsphinx's ArpaBoLM: deterministic (its output is sorted)."""
    from pocketsphinx.lm import ArpaBoLM  # noqa: PLC0415

    text = "\n".join(sentences)
    if not text.strip():
        raise EarLmError("the ear's language model needs at least one sentence")
    lm = ArpaBoLM(text=text, add_start=True, discount_mass=DISCOUNT_MASS)
    lm.compute()
    out = io.StringIO()
    lm.write(out)
    return out.getvalue()


def fluency(lm, text: str) -> float | None:
    """The mean natural-log probability per word of `text` (and of its sentence end) under the
    pocketsphinx ``NGramModel`` `lm` (trigram back-off, as the decoder scores it); None for no
    words. A command the LM knows scores about -2 to -4; garble that the decoder forced into
    command words ("all on you light up dot our want cool") about -5 to -6."""
    import math  # noqa: PLC0415

    words = ["<s>", *ear_words(text), "</s>"]
    if len(words) == 2:
        return None
    # NGramModel.prob takes the n-gram newest word first; its result is in log base 1.0001
    scores = [lm.prob(list(reversed(words[max(0, i - 2):i + 1]))) for i in range(1, len(words))]
    return sum(scores) / len(scores) * math.log(1.0001)


def read_sentences(path: Path = EAR_SENTENCES) -> list[str]:
    """The shipped sentences (gzip, one per line)."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def write_sentences(sentences: list[str], path: Path) -> None:
    """Gzip them reproducibly (no time stamp, no file name in the header)."""
    data = "".join(s + "\n" for s in sentences).encode("utf-8")
    path.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))


def time_phrases() -> list[str]:
    """The spoken time phrases the ear learns, in a fixed order: durations after "in" / "for",
    clock times after "at" / "until" / "till" (the forms `read_time` reads)."""
    out: list[str] = []
    for lead in ("in", "for"):
        out += [f"{lead} {m} minutes" for m in _MINUTES]
        out += [f"{lead} {h} hours" for h in _HOURS]
        out += [f"{lead} {p}" for p in ("an hour", "half an hour", "a quarter of an hour", "an hour and a half",
                                         "one minute", "one hour")]
    out += [f"in {s} seconds" for s in _SECONDS]
    for h in _CLOCK:
        out += [f"at {h}", f"at {h} o'clock", f"at {h} thirty", f"at {h} fifteen", f"at {h} forty five",
                f"at quarter past {h}", f"at half past {h}", f"at quarter to {h}", f"until {h}",
                f"until {h} o'clock", f"until {h} thirty", f"till {h}"]
    out += [f"{lead} {h} in the {part}" for lead in ("at", "until") for h in ("six", "seven", "eight", "nine")
            for part in ("morning", "evening")]
    out += ["at noon", "at midnight", "until noon", "until midnight"]
    return out


def cancel_sentences() -> list[str]:
    """What cancels timers by voice (the words of edge_plm/loop/timers.py's CANCEL rule)."""
    out = []
    for verb in ("cancel", "stop", "delete", "clear"):
        out += [f"{verb} the timer", f"{verb} the timers", f"{verb} all the timers", f"{verb} my timer"]
        out += [f"{verb} the {n} timer" for n in _TIMER_NAMES]
    return out


def timed_sentences(commands: list[str], every: int = TIMED_EVERY) -> list[str]:
    """Every `every`-th sentence of `commands` (the ear's ON/OFF command sentences, in order)
    with a time phrase of `time_phrases`, in turn, after the command for two of three and
    before it for the third; then `cancel_sentences`. Deterministic: no randomness."""
    phrases = time_phrases()
    out = []
    for i, command in enumerate(commands[::every]):
        phrase = phrases[i % len(phrases)]
        s = sentence(f"{phrase} {command}" if i % 3 == 2 else f"{command} {phrase}")
        if s:
            out.append(s)
    return out + [s for s in map(sentence, cancel_sentences()) if s]


def read_kind_templates(path: Path = KIND_TEMPLATES) -> list[tuple[str, str]]:
    """The shipped (kind, template) pairs of the ear's dimmer phrasings (gzip, ``KIND<TAB>template``)."""
    return _kind_templates(str(path))


@functools.lru_cache(maxsize=2)
def _kind_templates(path: str) -> list[tuple[str, str]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [tuple(line.rstrip("\n").split("\t", 1)) for line in f if line.strip()]  # type: ignore[misc]


def dimmer_sentences(names: Iterable[str], templates: list[tuple[str, str]] | None = None) -> list[str]:
    """Dim, brighten and level sentences for the dimmer names `names` (a dimmer's name and
    aliases), in a fixed order: each template of `templates` (default: the shipped ones,
    `read_kind_templates`) with ``{name}`` filled by each name in turn (sorted), ``{pct}`` by
    the next of `LEVEL_WORDS`; a template naming no device once. Each distinct sentence once;
    words the dictionary lacks leave their sentence out. Empty without a name."""
    clean = sorted({" ".join(ear_words(n)) for n in names} - {""})
    if not clean:
        return []
    out: list[str] = []
    seen: set[str] = set()
    level = 0
    for _, template in (read_kind_templates() if templates is None else templates):
        for name in clean if "{name}" in template else [None]:
            text = template if name is None else template.replace("{name}", name)
            while "{pct}" in text:
                text = text.replace("{pct}", LEVEL_WORDS[level % len(LEVEL_WORDS)], 1)
                level += 1
            s = sentence(text.replace("the the ", "the "))
            if s and s not in seen:
                seen.add(s)
                out.append(s)
    return out


def household_sentences(names: Iterable[str], heard: Iterable[str], dimmers: Iterable[str] = ()) -> list[str]:
    """The household's own sentences, in a fixed order: every device name and alias in
    `NAME_FRAMES`, each repeated `HOUSEHOLD_WEIGHT` times; the `dimmer_sentences` of the dimmer
    names and aliases `dimmers` (none: nothing), each `DIMMER_WEIGHT` times; then each labelled
    transcript of `heard` (at most `MAX_REPEATS` times), each `HOUSEHOLD_WEIGHT` times. Words
    the dictionary lacks are left out (a name with such a word is reported by `edge-plm config
    check`)."""
    out: list[str] = []
    for name in sorted({" ".join(ear_words(n)) for n in names} - {""}):
        for frame in NAME_FRAMES:
            s = sentence(frame.format(n=name))
            if s:
                out.extend([s] * HOUSEHOLD_WEIGHT)
    for s in dimmer_sentences(dimmers):
        out.extend([s] * DIMMER_WEIGHT)
    counts: dict[str, int] = {}
    for text in heard:
        s = sentence(text)
        if s and counts.get(s, 0) < MAX_REPEATS:
            counts[s] = counts.get(s, 0) + 1
            out.extend([s] * HOUSEHOLD_WEIGHT)
    return out


__all__ = ["DIMMER_WEIGHT", "EAR_LM", "EAR_SENTENCES", "KIND_TEMPLATES", "LEVEL_WORDS", "TIMED_EVERY", "EarLmError",
           "build_arpa", "cancel_sentences", "dictionary_words", "dimmer_sentences", "ear_words", "fluency",
           "household_sentences", "read_kind_templates", "read_sentences", "sentence",
           "time_phrases", "timed_sentences", "unknown_words", "write_sentences"]
