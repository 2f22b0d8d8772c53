"""What the loop records per device when several are configured (the controller's helpers).

The interaction's own row holds the *lead* device's prediction, decision and action
(`lead_device`): the device the utterance most confidently asks to switch, else the first one.
With one device that is the device itself, so the row holds exactly what it always held, and no
per-device rows are written. With several, each device's outcome goes to
``interaction_devices`` (`edge_plm.store.devices`) and `DeviceResult` carries it to the caller
(``Outcome.devices``, replays and their counts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from edge_plm.device_policies import DeviceResolution, Steps
from edge_plm.policy import Action, Decision

if TYPE_CHECKING:
    from edge_plm.store import ReplayStore
    from edge_plm.switch.model import SwitchPrediction


@dataclass(frozen=True)
class DeviceResult:
    """One device's part of an utterance's outcome."""

    prediction: str
    confidence: float
    decision: Decision
    action: Action | None  # the relay state driven (an ACT that reached the relay)


def _clamp(p: float) -> float:
    return min(1.0, max(0.0, float(p)))


def lead_device(preds: Mapping[str, SwitchPrediction]) -> str:
    """The device whose predicted ON / OFF is the most confident (a tie: the earlier one);
    the first device when none is predicted ON or OFF."""
    names = list(preds)
    commands = [n for n in names if preds[n].action != "NOOP"]
    if not commands:
        return names[0]
    return max(commands, key=lambda n: (preds[n].confidence, -names.index(n)))


def record_predictions(store: ReplayStore, iid: int, preds: Mapping[str, SwitchPrediction]) -> None:
    """Each device's prediction of interaction `iid` (several devices only)."""
    if len(preds) < 2:
        return
    store.add_device_outcomes(iid, {n: {"prediction": p.action, "confidence": _clamp(p.confidence),
                                        "distribution": {a: _clamp(v) for a, v in (p.distribution or {}).items()}
                                        or None}
                                    for n, p in preds.items()})


def record_decisions(store: ReplayStore, iid: int, steps: Steps, driven: Mapping[str, Action]) -> None:
    """Each device's decision and what was driven (several devices only)."""
    if len(steps.steps) < 2:
        return
    store.update_device_outcomes(iid, {n: {"decision": s.decision.value,
                                           "action": driven[n].value if n in driven else None}
                                       for n, s in steps.steps.items()})


def record_label(store: ReplayStore, dr: DeviceResolution, ts: float, n_devices: int) -> None:
    """A device's label of an utterance (several devices; none: only the command's is kept)."""
    r = dr.resolution
    if n_devices < 2 or r.label is None or r.source is None:
        return
    store.set_device_label(int(r.key), dr.device, r.label.value, r.source.value, ts=ts)


def results(preds: Mapping[str, SwitchPrediction], steps: Steps,
            driven: Mapping[str, Action]) -> dict[str, DeviceResult]:
    """Every device's `DeviceResult` of one utterance."""
    return {n: DeviceResult(preds[n].action, _clamp(preds[n].confidence), s.decision, driven.get(n))
            for n, s in steps.steps.items()}


__all__ = ["DeviceResult", "lead_device", "record_decisions", "record_label", "record_predictions",
           "results"]
