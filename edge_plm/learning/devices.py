"""The learner's part for several named devices (their stored labels): one module so that
`Learner` stays one job. Every function is given what it needs (the household's devices, the
store); learning an interaction of several devices is `LiveModel.learn_devices`, predicting for
each device `Predictor.predict` (`learning/predictor.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from edge_plm.learning.household import several
from edge_plm.switch.addressing import DeviceName

if TYPE_CHECKING:
    from edge_plm.store import ReplayStore


def stored_labels(store: ReplayStore, interaction_id: int) -> dict[str, str] | None:
    """The devices' labels of a stored interaction (None: none stored; a household of one
    stores none), for `known_labels`, which alone decides whether they count."""
    return store.device_labels([interaction_id]).get(interaction_id)


def known_labels(devices: Sequence[DeviceName], labels: dict[str, str] | None) -> dict[str, str] | None:
    """`labels` of the configured devices only (a row labelled under an older ``[[devices]]``
    may name others); None when there are none, or one device."""
    if not labels or not several(devices):
        return None
    names = {d.name for d in devices}
    return {d: v for d, v in labels.items() if d in names} or None


__all__ = ["known_labels", "stored_labels"]
