"""The first line of a slow command: ``loading ...`` on stderr before the CLI imports the rest
(0.5-1 s here, several seconds on a Pi) and before the model and the speech recognition load
(10-70 s on a Pi), so that a person sees at once that the command runs (issue 27). Standard
library only: it runs before every other import of the CLI."""

from __future__ import annotations

import sys

SPEECH_AND_MODEL = "loading speech recognition and the model..."
MODEL = "loading the model..."
#: the command (its first word, or its first two) -> the line it prints first
LOADING = {"run": SPEECH_AND_MODEL, "replay": SPEECH_AND_MODEL, "demo": SPEECH_AND_MODEL,
           "eval": MODEL, "label": MODEL, "forget": MODEL, ("model", "rollback"): MODEL,
           ("model", "rebuild"): MODEL, ("model", "import"): MODEL}
NOT_RUN = ("--help", "-h", "--version", "--install-completion", "--show-completion")


def loading_line(argv: list[str]) -> str | None:
    """The line the command line `argv` prints first (None: a fast command, or only its help)."""
    args = argv[1:]
    if any(a in NOT_RUN for a in args):
        return None
    words = [a for a in args if not a.startswith("-")]
    if not words:
        return None
    return LOADING.get(words[0]) or LOADING.get(tuple(words[:2]))


def announce(argv: list[str]) -> None:
    line = loading_line(argv)
    if line is not None:
        print(line, file=sys.stderr, flush=True)


__all__ = ["LOADING", "announce", "loading_line"]
