"""Undo the last lesson from the home hub (the MQTT bridge's *undo last lesson* button).

The last lesson is the newest interaction labelled a command (ON or OFF): it is relabelled
NOOP ("that was not a command"), source ``manual``, exactly as `edge-plm label ID NOOP` would:
the row's label changes and the live model replaces the example it holds
(`Learner.on_relabel`). A NOOP lesson is never "undone" (there is no single right command to
put back). Offered with one device only (with several, a lesson is per device:
`edge-plm label --device` says whose)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from edge_plm.learning.household import Household

log = logging.getLogger("edge_plm.loop")


def undo_last_lesson(learner: Any) -> int | None:
    """Relabel NOOP the newest interaction labelled ON or OFF; its id (None: none)."""
    found = [row for label in ("ON", "OFF")
             for row in learner.store.interactions(limit=1, labeled=True, label=label)]
    if not found:
        log.info("undo last lesson: no command learned yet; nothing to undo")
        return None
    row = max(found, key=lambda r: r.id)
    learner.store.set_label(row.id, "NOOP", "manual")
    learner.on_relabel(row.id, "NOOP")
    log.warning("undo last lesson (home hub): interaction %d relabelled %s -> NOOP", row.id,
                row.label)
    return row.id


def undo_handler(worker: Any, household: Household) -> Callable[[], None] | None:
    """What the bridge calls on a press: the undo queued on the learner's worker; None (no
    button) where the household has several devices."""
    if household.several:
        return None
    return lambda: worker.submit(undo_last_lesson, "undo the last lesson")


__all__ = ["undo_handler", "undo_last_lesson"]
