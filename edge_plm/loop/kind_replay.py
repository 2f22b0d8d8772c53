"""Dimmer and question lines in a replayed session (``edge-plm replay``; docs/contracts.md).

A session line may carry ``"kind"``: ``"DIM"``, ``"BRIGHTEN"``, ``"LEVEL"`` (with ``"level"``,
0..1: the level the person wants) or ``"QUERY"`` (a question; its ``"label"`` is NOOP or
absent: no relay is to move). For a dimmer line the simulated person looks at the dimmer
(the line's ``"device"``, else the household's first dimmer) right after the device
responded: it is ``right`` when it moved the way they wanted (DIM: lower, BRIGHTEN: higher,
LEVEL: within `LEVEL_TOLERANCE` of the level) and no relay moved; ``wrong`` when a relay
moved or the dimmer went the other way or to another level; else ``missed`` (``asked`` when
the device asked). Where it is not right, the person turns the dimmer's own knob to what they
wanted (one `level_step` from where it was, or the level), which is what teaches the device.
A question is ``right`` when it was answered and no relay moved. The summary adds
``kind_lines``, ``kind_right``, ``kind_asked``, ``kind_wrong``, ``kind_missed``,
``relays_moved_by_kind`` and ``kind_labels`` (only for sessions with such lines).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from edge_plm.actions import KINDS, PLAIN
from edge_plm.loop.simulation import turn_knob

if TYPE_CHECKING:
    from edge_plm.loop.controller import Controller, Outcome

#: What `per_kind` counts of each kind's lines.
COUNTS = ("right", "asked", "wrong", "missed", "relays_moved")

#: A LEVEL line is right when the dimmer ends this close to the level asked for.
LEVEL_TOLERANCE = 0.05


@dataclass(frozen=True)
class KindLine:
    """What one dimmer or question line got."""

    index: int
    kind: str
    right: bool
    asked: bool
    wrong: bool
    relays_moved: bool

    @property
    def missed(self) -> bool:
        return not (self.right or self.asked or self.wrong)


def kind_of(row: dict, where: str, error: type[Exception]) -> tuple[str | None, float | None]:
    """A line's ``"kind"`` and ``"level"`` (checked)."""
    kind, level = row.get("kind"), row.get("level")
    if kind is None:
        if level is not None:
            raise error(f'{where}: "level" needs "kind": "LEVEL"')
        return None, None
    if not isinstance(kind, str) or kind.upper() not in KINDS or kind.upper() == PLAIN:
        raise error(f'{where}: "kind" must be one of {", ".join(k for k in KINDS if k != PLAIN)}, got {kind!r}')
    kind = kind.upper()
    if kind == "LEVEL":
        if isinstance(level, bool) or not isinstance(level, (int, float)) or not math.isfinite(level) \
                or not 0 <= level <= 1:
            raise error(f'{where}: a LEVEL line needs "level", a number in 0..1, got {level!r}')
        return kind, float(level)
    if level is not None:
        raise error(f'{where}: "level" belongs to "kind": "LEVEL" lines only')
    return kind, None


def follow_kind_line(i: int, line, outcome: Outcome, controller: Controller,
                     relays: tuple[dict[str, bool], dict[str, bool]],
                     levels: tuple[dict[str, float], dict[str, float]], now: float) -> KindLine | None:
    """Judge a dimmer or question line from the relays and dimmer levels before it and right
    after the device responded, and let the person turn the knob where it is not right (module
    docstring). None for a line without ``"kind"``."""
    kind = getattr(line, "kind", None)
    if kind is None:
        return None
    devices = controller.devices
    (relays_before, relays_after), (levels_before, levels_after) = relays, levels
    moved = any(relays_after[n] != relays_before[n] for n in relays_before if not devices.is_dimmer(n))
    row = controller.store.kind(outcome.interaction_id) if outcome.interaction_id else None
    done = row.done if row is not None else None
    if kind == "QUERY":
        right = done == "answered" and not moved
        return KindLine(i, kind, right, False, moved, moved)
    dimmers = [n for n in devices.names if devices.is_dimmer(n)]
    named = [n for n in (line.devices or ()) if n in dimmers]
    target = named[0] if named else (dimmers[0] if dimmers else None)
    if target is None:
        return KindLine(i, kind, False, False, moved, moved)
    dimmer = devices.dimmers[target]
    before, after = levels_before[target], levels_after[target]
    want = _wanted(kind, before, line.level, dimmer)
    if kind == "LEVEL":
        went_right = abs(after - want) <= LEVEL_TOLERANCE
    elif kind == "DIM":  # a dim never turns the light off; an off light stays off
        went_right = 0 < after < before or before == after == 0
    else:
        went_right = after > before
    changed = abs(after - before) > 1e-9
    others = any(abs(levels_after[n] - levels_before[n]) > 1e-9 for n in dimmers if n != target)
    right = went_right and not moved and not others
    wrong = moved or others or (changed and not went_right)
    asked = not right and not wrong and done == "asked"
    if not right and abs(dimmer.level - want) > 1e-9:
        control = devices.controls.get(target)
        if control is not None:  # the person's own knob: what teaches the device
            turn_knob(control, devices.factory, dimmer.level, want)
        else:  # no knob: they set it from the home hub's app
            devices.remote_level(target, want, now)
        controller.pump()
    return KindLine(i, kind, right, asked, wrong, moved)


def _wanted(kind: str, before: float, level: float | None, dimmer) -> float:
    """Where the person wants the dimmer: one step down / up from `before`, or the level."""
    if kind == "LEVEL":
        return float(level)
    if kind == "DIM":
        return max(before - dimmer.level_step, dimmer.min_level) if before > 0 else 0.0
    return min(before + dimmer.level_step, 1.0)


def per_kind(lines: list[KindLine]) -> dict[str, dict[str, int]]:
    """The kind lines' counts by kind (``lines``, ``right``, ``asked``, ``wrong``, ``missed``,
    ``relays_moved``), for benchmarks that report each kind."""
    out: dict[str, dict[str, int]] = {}
    for k in lines:
        c = out.setdefault(k.kind, dict.fromkeys(("lines", *COUNTS), 0))
        c["lines"] += 1
        for key in COUNTS:
            c[key] += getattr(k, key)
    return out


def summary_keys(lines: list[KindLine], labels: int) -> dict[str, int]:
    """The keys a session with dimmer or question lines adds to the replay summary."""
    if not lines:
        return {}
    return {"kind_lines": len(lines), "kind_right": sum(k.right for k in lines),
            "kind_asked": sum(k.asked for k in lines), "kind_wrong": sum(k.wrong for k in lines),
            "kind_missed": sum(k.missed for k in lines),
            "relays_moved_by_kind": sum(k.relays_moved for k in lines), "kind_labels": int(labels)}


__all__ = ["KindLine", "LEVEL_TOLERANCE", "follow_kind_line", "kind_of", "per_kind", "summary_keys"]
