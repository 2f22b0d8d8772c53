"""Reading JSON-lines files of utterances (`eval`, `replay`): one object per line, blank lines
skipped, undecodable bytes replaced (a transcript with bad bytes must not lose its line), and
every problem reported as ``JsonlError`` naming the file and line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from edge_plm.actions import ACTIONS as LABELS
from edge_plm.errors import EdgePlmError


class JsonlError(EdgePlmError, ValueError):
    """A JSON-lines file is missing or has a bad line."""


def read_objects(path: str | Path, what: str = "file",
                 shape: str = "a JSON object") -> Iterator[tuple[int, dict]]:
    """(line number, object) for every non-blank line of `path`; `shape` describes the
    expected object in the error for a line that is not one."""
    path = Path(path)
    if not path.is_file():
        raise JsonlError(f"{path}: {what} not found")
    with open(path, "rb") as f:
        for no, raw in enumerate(f, 1):
            line = raw.decode("utf-8", errors="replace").strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise JsonlError(f"{path}:{no}: not valid JSON ({exc.msg})") from exc
            except RecursionError:  # the decoder stops cleanly; the traceback says nothing more
                raise JsonlError(f"{path}:{no}: JSON nested too deeply (an utterance is one "
                                 "flat object)") from None
            if not isinstance(row, dict):
                raise JsonlError(f"{path}:{no}: expected {shape}")
            yield no, row


def label_of(path: str | Path, no: int, row: dict) -> str:
    """The line's "label", which must be one of the actions (`edge_plm.actions`) in any case,
    as on the command line (``on`` is ``ON``); `row` gets the upper-case spelling."""
    label = row.get("label")
    if isinstance(label, str) and label.upper() in LABELS:
        row["label"] = label.upper()
        return row["label"]
    raise JsonlError(f'{path}:{no}: "label" must be one of {", ".join(LABELS)} (any case), got {label!r}')
