"""Act / ask / ignore for several named devices: one `policy.Policy` per device, and how the
devices' labels of one utterance become the utterance's label. No I/O, no gpiozero.

Each device has its own `Policy` (its own window, its own label rules): the utterance's
prediction for that device (``SwitchModel.predict_devices``) decides act / ask / ignore for it,
a flip of that device's switch inside the window labels the utterance *for that device*, and a
device left alone gets the label (or none) the single-device rules give it (docs/policy.md).
An utterance is resolved when every device's window has closed (`Resolved`): its per-device
labels, and the command's label for the interaction row and the model (`command_label`).

With one device this is exactly `Policy`: the same decisions, the same label, source and time.
The rate limit is the relay's own (per relay, `device.relay.Relay`), so it is per device too.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from edge_plm.decide.policy import Action, Decision, LabelSource, Policy, Prediction, Resolution, Step
from edge_plm.config.settings import PolicyConfig
from edge_plm.learning.household import several


@dataclass(frozen=True)
class DeviceResolution:
    """One device's window of one utterance closed (`Policy`'s resolution, for `device`)."""

    device: str
    resolution: Resolution


@dataclass(frozen=True)
class Resolved:
    """Every device's window of utterance `key` closed: its labels and the command's."""

    key: Hashable
    devices: dict[str, Resolution]  # in configuration order
    label: Action | None  # the command's label (None: nothing to learn)
    source: LabelSource | None
    ts: float  # when the last device's label was decided
    reason: str

    @property
    def decision(self) -> Decision:
        """The lead decision: act if any device acted, else ask if any asked, else ignore."""
        return lead_decision([r.decision for r in self.devices.values()])

    @property
    def device_labels(self) -> dict[str, str]:
        """The devices that got a label: ``{device: "ON" | "OFF" | "NOOP"}``."""
        return {d: r.label.value for d, r in self.devices.items() if r.label is not None}


@dataclass(frozen=True)
class Steps:
    """What the controller must do after an utterance, per device."""

    steps: dict[str, Step]  # in configuration order
    closed: list[DeviceResolution]  # earlier utterances' device windows closed by this one

    @property
    def drives(self) -> dict[str, Action]:
        """The devices to drive, and to what."""
        return {d: s.drive for d, s in self.steps.items() if s.drive is not None}

    @property
    def asks(self) -> list[str]:
        """The devices in doubt (the LED says which)."""
        return [d for d, s in self.steps.items() if s.ask]


def lead_decision(decisions: Sequence[Decision]) -> Decision:
    """ACT if any, else ASK if any, else IGNORE."""
    for d in (Decision.ACT, Decision.ASK):
        if d in decisions:
            return d
    return Decision.IGNORE


def command_label(devices: Mapping[str, Resolution]) -> tuple[Action | None, LabelSource | None]:
    """The command's label from the devices' labels, and its source.

    - a device labelled ON or OFF: the ON / OFF most devices were labelled (a tie: the earlier
      device's), the source that device's (this is ``addressing.command_label``'s rule);
    - every device labelled NOOP: NOOP (the first device's source);
    - otherwise (no label, or NOOP next to a device whose window said nothing): no label — a
      device that could not tell "S or NOOP" leaves the command unknown, as a single device's
      ambiguous window does.
    """
    label = command_of({d: r.label for d, r in devices.items()})
    if label is None:
        return None, None
    if label is Action.NOOP:
        return label, next(iter(devices.values())).source
    return label, next(r.source for r in devices.values() if r.label is label)


def command_of(labels: Mapping[str, Action | str | None]) -> Action | None:
    """`command_label`'s rule on the devices' labels alone (None: that device has none)."""
    got = {d: None if v is None else Action(v) for d, v in labels.items()}
    commands = [v for v in got.values() if v is not None and v.state is not None]
    if commands:
        return max(dict.fromkeys(commands), key=commands.count)
    if got and all(v is not None for v in got.values()):
        return Action.NOOP
    return None


class DevicePolicies:
    """One `Policy` per device (`names`, configuration order), one utterance key at a time per
    device; completed utterances come out of `completed`. ``spoken_answers``: talk-back can
    hear a yes / no (`Policy`)."""

    def __init__(self, cfg: PolicyConfig, names: Sequence[str], spoken_answers: bool = False) -> None:
        if not names:
            raise ValueError("need at least one device")
        if len(set(names)) != len(names):
            raise ValueError(f"device names must be unique, got {list(names)}")
        self.names = list(names)
        self.policies = {n: Policy(cfg, spoken_answers) for n in self.names}
        self._pending: dict[Hashable, dict[str, Resolution]] = {}

    @property
    def open(self) -> dict[str, object]:
        """The devices' open interactions (`Policy.open`), those that have one."""
        return {n: p.open for n, p in self.policies.items() if p.open is not None}

    @property
    def deadline(self) -> float | None:
        """The earliest deadline of an open window, or None."""
        times = [p.deadline for p in self.policies.values() if p.deadline is not None]
        return min(times) if times else None

    def on_utterance(self, key: Hashable, predictions: Mapping[str, Prediction],
                     relay_on: Mapping[str, bool], now: float, text: str | None = None) -> Steps:
        """Each device's step for a new utterance (closing its earlier windows); ``text``: its
        transcript (`Policy.on_utterance`)."""
        missing = set(self.names) - set(predictions)
        if missing:
            raise ValueError(f"no prediction for device(s) {sorted(missing)}")
        steps, closed = {}, []
        for n in self.names:
            step = self.policies[n].on_utterance(key, predictions[n], relay_on[n], now, text)
            closed += [DeviceResolution(n, r) for r in step.closed]
            steps[n] = step
        return Steps(steps, closed)

    def action_refused(self, device: str, key: Hashable) -> None:
        """Device `device`'s relay refused the ACT of `key` (rate limit, or stopping)."""
        self.policies[device].action_refused(key)

    def on_flip(self, device: str, desired: bool, now: float,
                remote: bool = False) -> list[DeviceResolution]:
        """Device `device`'s switch was flipped (`remote`: from the home hub): labels its
        window (others only expire)."""
        out = self.tick(now)
        out += [DeviceResolution(device, r)
                for r in self.policies[device].on_flip(desired, now, remote=remote)]
        return out

    def on_answer(self, device: str, yes: bool, now: float,
                  said: Action | None = None) -> list[DeviceResolution]:
        """A spoken yes/no to device `device`'s open ask (talk-back, `Policy.on_answer`;
        ``said``: the state the answer named, if any)."""
        out = self.tick(now)
        out += [DeviceResolution(device, r) for r in self.policies[device].on_answer(yes, now, said)]
        return out

    def tick(self, now: float) -> list[DeviceResolution]:
        """Close every expired window."""
        return [DeviceResolution(n, r) for n in self.names for r in self.policies[n].tick(now)]

    def close(self, now: float) -> list[DeviceResolution]:
        """Shut down: expire what has expired, close the rest without a label."""
        return [DeviceResolution(n, r) for n in self.names for r in self.policies[n].close(now)]

    def completed(self, resolutions: Sequence[DeviceResolution]) -> list[Resolved]:
        """Collect device resolutions; the utterances whose every device is now resolved."""
        out = []
        for dr in resolutions:
            got = self._pending.setdefault(dr.resolution.key, {})
            got[dr.device] = dr.resolution
            if len(got) == len(self.names):
                del self._pending[dr.resolution.key]
                out.append(_resolved(dr.resolution.key, {n: got[n] for n in self.names}))
        return out


def _resolved(key: Hashable, devices: dict[str, Resolution]) -> Resolved:
    """The utterance resolved for every device (one device: its own resolution, the command's
    label being that device's); the reason names each device only where there are several."""
    label, source = command_label(devices)
    ts = max(r.ts for r in devices.values())
    reasons = [(f"{d}: " if several(devices) else "") + r.reason for d, r in devices.items()]
    return Resolved(key, devices, label, source, ts, "; ".join(reasons))


__all__ = ["DevicePolicies", "DeviceResolution", "Resolved", "Steps", "command_label", "command_of",
           "lead_decision"]
