"""The controller's per-device helpers: how it names a device, what it stores, drives and
signals per device. One device is the case N = 1 of the same code.

The interaction's own row holds the *lead* device's prediction, decision and action
(`lead_device`): the device the utterance most confidently asks to switch, else the first one.
With one device that is the device itself, so the row holds exactly what it always held.
Each device's outcome goes to ``interaction_devices`` (`edge_plm.store.devices`) when there are
several (`DeviceRows`: with one device that row would repeat the interaction's own, so none is
written) and `DeviceResult` carries it to the caller (``Outcome.devices``, replays and their
counts). The `Household` (`edge_plm.learning.household`) says which device a log line or a
question is about: with one device it says none. Signals are by name, one device's too
(`Devices.ask`: the first device's is a plain blink). `drive_and_ask`
drives the relays the policies decided on and asks about the devices in doubt; `light_out`
puts the ask signals out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from edge_plm.learning.household import Household
from edge_plm.decide.devices import DevicePolicies, DeviceResolution, Resolved, Steps
from edge_plm.decide.policy import Action, Decision, Prediction
from edge_plm.store.base import StorageError

if TYPE_CHECKING:
    from edge_plm.device import Devices
    from edge_plm.store import ReplayStore
    from edge_plm.switch.model import SwitchPrediction

log = logging.getLogger("edge_plm.loop.controller")


@dataclass(frozen=True)
class DeviceResult:
    """One device's part of an utterance's outcome."""

    prediction: str
    confidence: float
    decision: Decision
    action: Action | None  # the relay state driven (an ACT that reached the relay)


def _clamp(p: float) -> float:
    return min(1.0, max(0.0, float(p)))


def check_devices(devices: Devices, household: Household) -> Household:
    """`household` once `devices` are checked to be its devices, in its order."""
    if list(household.names) != list(devices.names):
        raise ValueError(f"the devices {devices.names} are not the household's "
                         f"{list(household.names)}")
    return household


def policy_predictions(preds: Mapping[str, SwitchPrediction], junk: str | None,
                       unsure_hearing: bool = False) -> dict[str, Prediction]:
    """Each device's model prediction as the policy's `Prediction` (values clamped to [0, 1])."""
    out = {}
    for name, p in preds.items():
        dist = {a: _clamp(v) for a, v in (p.distribution or {}).items()}
        not_command = None if p.not_command is None else _clamp(p.not_command)
        out[name] = Prediction(Action(p.action), _clamp(p.confidence), dist or None, junk, not_command,
                               unsure_hearing)
    return out


def drive_and_ask(devices: Devices, policies: DevicePolicies, names: Household, iid: int,
                  steps: Steps, now: float, stopping: bool) -> dict[str, Action]:
    """Drive the relays the steps ask for (a refusal, by the rate limit or because the loop is
    `stopping`, is told to that device's policy) and signal the devices in doubt; returns the
    states driven, by device."""
    driven: dict[str, Action] = {}
    for name, drive in steps.drives.items():
        where = names.of(name, " ({})")
        if stopping:
            policies.action_refused(name, iid)
            log.info("interaction %d: stopping, relay%s not driven %s", iid, where, drive.value)
        elif devices.drive(drive.value, name, now=now):
            driven[name] = drive
        else:
            policies.action_refused(name, iid)
            log.warning("interaction %d: relay%s refused %s (rate limit)", iid, where, drive.value)
    for name in steps.asks:
        devices.ask(name)
    return driven


def light_out(devices: Devices, policies: DevicePolicies, resolutions: list[DeviceResolution]) -> None:
    """An asked window closed: that device's signal goes out, the shared LED moves on to a
    device still in doubt, and everything goes out (the buzzer too) when none is."""
    asked = [r.device for r in resolutions if r.resolution.decision is Decision.ASK]
    if not asked or not devices.led.asking:
        return
    for name in asked:
        devices.done(name)
    still = [n for n, o in policies.open.items() if o.decision is Decision.ASK]
    for name in still:  # the shared LED moves on to the next device in doubt
        devices.ask(name, beep=False)
    if not still:
        devices.done()


def lead_device(preds: Mapping[str, SwitchPrediction]) -> str:
    """The device whose predicted ON / OFF is the most confident (a tie: the earlier one);
    the first device when none is predicted ON or OFF."""
    names = list(preds)
    commands = [n for n in names if preds[n].action != "NOOP"]
    if not commands:
        return names[0]
    return max(commands, key=lambda n: (preds[n].confidence, -names.index(n)))


class DeviceRows:
    """Each device's outcome of an utterance in ``interaction_devices``: written when there
    are several devices (with one, the interaction's own row is that device's outcome)."""

    def __init__(self, store: ReplayStore, names: Household) -> None:
        self.store = store
        self.per_device = names.several

    def _write(self, write: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        if self.per_device:
            write(*args, **kwargs)

    def predictions(self, iid: int, preds: Mapping[str, SwitchPrediction]) -> None:
        """Each device's prediction of interaction `iid`."""
        self._write(self.store.add_device_outcomes, iid, {
            n: {"prediction": p.action, "confidence": _clamp(p.confidence),
                "distribution": {a: _clamp(v) for a, v in (p.distribution or {}).items()} or None}
            for n, p in preds.items()})

    def decisions(self, iid: int, steps: Steps, driven: Mapping[str, Action]) -> None:
        """Each device's decision and what was driven."""
        self._write(self.store.update_device_outcomes, iid, {
            n: {"decision": s.decision.value, "action": driven[n].value if n in driven else None}
            for n, s in steps.steps.items()})

    def label(self, dr: DeviceResolution, ts: float) -> None:
        """A device's label of an utterance (none: only the command's is kept)."""
        r = dr.resolution
        if r.label is not None and r.source is not None:
            self._write(self.store.set_device_label, int(r.key), dr.device, r.label.value,
                        r.source.value, ts=ts)

    def labels(self, policies: DevicePolicies, resolutions: list[DeviceResolution],
               label_time: Callable[[float], float],
               storage_failed: Callable[[str, Exception], None]) -> list[Resolved]:
        """Each device's label as its window closes (a device label that cannot be stored is
        told to ``storage_failed``, the utterance still resolves); returns the utterances now
        resolved for every device (`DevicePolicies.completed`). ``label_time``: the
        wall-clock time of a resolution's loop-clock time."""
        done: list[Resolved] = []
        for dr in resolutions:
            r = dr.resolution
            try:
                self.label(dr, label_time(r.ts))
            except StorageError as exc:
                storage_failed(f"label of interaction {r.key} for {dr.device!r}", exc)
            except Exception:  # e.g. the row was deleted meanwhile
                log.exception("could not store the label of interaction %s for %r", r.key, dr.device)
            done += policies.completed([dr])
        return done


def results(preds: Mapping[str, SwitchPrediction], steps: Steps,
            driven: Mapping[str, Action]) -> dict[str, DeviceResult]:
    """Every device's `DeviceResult` of one utterance."""
    return {n: DeviceResult(preds[n].action, _clamp(preds[n].confidence), s.decision, driven.get(n))
            for n, s in steps.steps.items()}


__all__ = ["DeviceResult", "DeviceRows", "check_devices", "drive_and_ask", "lead_device",
           "light_out", "policy_predictions", "results"]
