"""The session file of ``edge-plm replay`` / ``demo`` (docs/contracts.md): one JSON object a
line, what was said (``"text"`` or ``"audio"``) and what the person wanted (``"label"``), with
the optional ``"device"``, ``"answer"``, ``"delay"`` / ``"for"`` keys (`timed_replay.timing_of`)
and ``"kind"`` / ``"level"`` (a dimmer or question line, `kind_replay.kind_of`).

`read_session` reads and checks the lines; `check_devices`, `session_devices` and
`wanted_actions` fit them to the devices a replay runs with.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from edge_plm.config.settings import DeviceConfig, Settings
from edge_plm.decide.policy import Action
from edge_plm.errors import EdgePlmError
from edge_plm.jsonl import JsonlError, label_of, read_objects
from edge_plm.learning.household import several
from edge_plm.loop.kind_replay import kind_of
from edge_plm.loop.timed_replay import timing_of


class SessionError(EdgePlmError, ValueError):
    """A session file is missing or has a bad line."""


@dataclass(frozen=True)
class SessionLine:
    """One line of a session: what was said (text or a WAV) and what the person wanted
    (None: not known, e.g. an exported interaction the device never got a label for; the
    simulated person then does nothing)."""

    wish: Action | None
    text: str | None = None
    audio: Path | None = None
    # several devices: the devices the wish is for (None: the first device; the others are
    # to stay as they are)
    devices: tuple[str, ...] | None = None
    answer: str | None = None  # "voice": the person answers an ask by voice (else the switch)
    delay: float | None = None  # the wish is for this many seconds later ("in twenty minutes")
    hold: float | None = None  # "for": the wish now, the relay back this many seconds later
    kind: str | None = None  # DIM / BRIGHTEN / LEVEL / QUERY (`loop/kind_replay.py`)
    level: float | None = None  # LEVEL: the level the person wants (0..1)


#: How a session line's person answers an ask (``"answer"``): by voice or (default) the switch.
ANSWER_WAYS = ("voice", "switch")


def read_session(path: str | Path) -> list[SessionLine]:
    """Lines ``{"text": ...}`` or ``{"audio": "x.wav"}`` (relative to the file) + ``"label"``,
    optionally ``"answer": "voice"`` (the person answers an ask by voice: `run_session`).

    With both keys the audio is what is played (the text is the reference transcript).
    ``"device"`` (several devices): the device the wish is for, or a list of them
    ("everything off"); absent: the first device. The devices not named are to stay as they
    are (the simulated person puts them back if the device switched them).
    ``"label": null`` (what `edge-plm export` writes for an interaction without a label) or
    no "label" is accepted: the simulated person does nothing after that line. A label is
    taken in any case (``"on"`` is ``ON``), as on the command line.
    """
    path = Path(path)
    lines = []
    try:
        for no, row in read_objects(path, "session file"):
            label = None if row.get("label") is None else label_of(path, no, row)
            audio = row.get("audio")
            text = row.get("text")
            if audio is not None and not isinstance(audio, str):
                raise SessionError(f'{path}:{no}: "audio" must be a file name')
            if text is not None and not isinstance(text, str):
                raise SessionError(f'{path}:{no}: "text" must be a string')
            if audio is None and text is None:
                raise SessionError(f'{path}:{no}: needs "text" or "audio"')
            answer = row.get("answer")
            if answer is not None and answer not in ANSWER_WAYS:
                raise SessionError(f'{path}:{no}: "answer" must be one of '
                                   f'{", ".join(ANSWER_WAYS)}, got {answer!r}')
            kind, level = kind_of(row, f"{path}:{no}", SessionError)
            if kind is not None and label not in (None, "NOOP"):
                raise SessionError(f'{path}:{no}: a "kind" line wants no relay moved: its '
                                   f'"label" is NOOP or absent, got {label!r}')
            wish = Action(label) if label is not None else (Action.NOOP if kind else None)
            lines.append(SessionLine(wish, text, (path.parent / audio) if audio else None,
                                     _devices_of(path, no, row.get("device")), answer,
                                     *timing_of(row, f"{path}:{no}", SessionError), kind, level))
    except JsonlError as exc:
        raise SessionError(str(exc)) from exc
    if not lines:
        raise SessionError(f"{path}: no lines")
    return lines


def _devices_of(path: Path, no: int, value: object) -> tuple[str, ...] | None:
    """A line's ``"device"``: a name or a non-empty list of names (None: absent)."""
    if value is None:
        return None
    names = [value] if isinstance(value, str) else value
    if (not isinstance(names, list) or not names
            or not all(isinstance(n, str) and n.strip() for n in names)):
        raise SessionError(f'{path}:{no}: "device" must be a device name or a list of names')
    return tuple(names)


def check_devices(lines: list[SessionLine], names: list[str]) -> None:
    """Every device a line names is configured (`SessionError` naming the line, else). One
    device: every line is for it, whatever device a line names (`wanted_actions`)."""
    if not several(names):
        return
    for i, line in enumerate(lines, 1):
        unknown = [d for d in line.devices or () if d not in names]
        if unknown:
            raise SessionError(f"session line {i}: unknown device {unknown[0]!r} "
                               f"(configured: {', '.join(names)})")


def session_devices(lines: list[SessionLine], settings: Settings) -> Settings:
    """`settings` for replaying `lines`: as given when they configure ``[[devices]]`` or no line
    names a device; else one mock device per name the lines give, in order of first mention
    (the first is the default device), on pins of their own, the rest of `settings` kept (a
    session from another household replays without writing its config first)."""
    if settings.devices:
        return settings
    names = list(dict.fromkeys(d for line in lines for d in line.devices or ()))
    if not names:
        return settings
    g = settings.gpio
    free = iter(p for p in range(2, 28) if p not in (g.led_pin, g.buzzer_pin))
    try:
        devices = [DeviceConfig(n, [], relay_pin=next(free), relay_active_high=g.relay_active_high,
                                relay_restore=g.relay_restore, switch_pin=next(free),
                                switch_mode=g.switch_mode, switch_pull_up=g.switch_pull_up,
                                switch_bounce_ms=g.switch_bounce_ms) for n in names]
    except StopIteration:
        raise SessionError(f"the session names {len(names)} devices; at most 12 can be replayed "
                           "without a config (give one with [[devices]])") from None
    return replace(settings, devices=devices)


def wanted_actions(line: SessionLine, names: list[str]) -> dict[str, Action] | None:
    """The person's wish for each device: the configured devices the line names get its wish
    (it names none of them: the first device), the others NOOP (stay as they are); None for a
    line whose wish is not known. One device: every line is for it."""
    if line.wish is None:
        return None
    targets = set(line.devices or ()) & set(names) or set(names[:1])
    return {n: line.wish if n in targets else Action.NOOP for n in names}


def uses_talkback(lines: list[SessionLine]) -> bool:
    """A replay of `lines` needs talk-back when a line's person answers by voice."""
    return any(line.answer == "voice" for line in lines)

