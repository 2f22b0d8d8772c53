"""The transcript cap: what the model and the store see of one utterance is bounded.

A transcript longer than ``asr.max_transcript_chars`` is cut there, at the last word boundary
when there is one, with a logged warning (docs/loop.md says why). Used by the loop (`run`,
`replay`), `eval` and the training readers. `printable` is a transcript (or any stored text)
made safe to print on a terminal.
"""

from __future__ import annotations

import logging
import re

log = logging.getLogger(__name__)

DEFAULT_MAX_CHARS = 500


def cap_transcript(text: str, max_chars: int = DEFAULT_MAX_CHARS, where: str = "") -> str:
    """`text` with whitespace collapsed, cut to at most `max_chars` characters (0: no cap)."""
    if not max_chars:
        return " ".join(text.split())
    text = text.lstrip()
    original = len(text)
    # never split a huge string in full: what could survive the cap is in its first part
    text = " ".join(text[:8 * max_chars + 1].split())
    if len(text) <= max_chars and original <= 8 * max_chars:
        return text
    cut = text[:max_chars + 1]
    if len(cut) > max_chars:
        cut = cut[:max_chars]
        if text[max_chars] != " " and " " in cut:  # do not keep half a word
            cut = cut[:cut.rindex(" ")]
    cut = cut.rstrip()
    log.warning("%stranscript of %d characters is longer than asr.max_transcript_chars = %d: "
                "cut to %d", f"{where}: " if where else "", original, max_chars, len(cut))
    return cut


# C0 controls (but tab), DEL, C1 controls, and the bidirectional overrides and isolates
_UNPRINTABLE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str | None) -> str:
    """`text` with its control characters shown as escapes (``\\x1b``, ``\\n``): a stored
    transcript printed by `log`, `status` or `stats` cannot move the cursor, recolour the
    terminal or reorder what is shown (``turn\\x1b[31m on`` prints as typed)."""
    if not text:
        return text or ""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
