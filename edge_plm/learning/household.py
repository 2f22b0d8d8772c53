"""The household: the configured devices, in order, with their names and aliases.

One frozen value, built once from the settings (`Household.from_settings`: the ``[[devices]]``
entries, or the one device of the ``[gpio]`` keys), handed to the learner and the loop. One
device is a household of one. It also says which device a log line or a question is about:
with one device it names none (every line reads as it did before there were several).

`several` (and `Household.several`, the same rule) is the one place outside the switch model
where one device and several part ways. Everything else takes the general path (N = 1 is a
household of one); what still differs is what a person, a file or a JSON reader was promised
with one device (tests/test_layout.py lists the places and forbids new ad-hoc checks):

- the words: a log line, a question or a confirmation names no device (`shown`, `of`);
- the data: per-device rows (``interaction_devices``, `loop.outcomes.DeviceRows`) and the
  per-device labels the learner reads back (`learning.devices`, `relearn_devices`) exist only
  with several, the interaction's own row being the one device's;
- ``edge-plm replay --json`` adds per-device counts only with several
  (`SessionResult.several`); a session line naming an unknown device is an error only with
  several (`replay.check_devices`);
- the home hub's *undo last lesson* button is offered with one device only (`loop.undo`);
- ``run --audio``'s number keys flip devices 1-9 only with several (`loop.tryout`);
- a resolution's reason is prefixed with each device's name only with several
  (`decide.devices`);
- ``eval``: lines without ``"device"`` are refused only when the lines name several;
- a question about several devices is answered with those that are on ("Everything is off."
  when none is), and shown on the shared LED; about one device, that device's state on its
  own LED (`decide.kinds.answer_text`, `loop.kinds`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from edge_plm.config.settings import DEFAULT_DEVICE, Settings, device_configs
from edge_plm.switch.addressing import DeviceName


def several(devices: Collection) -> bool:
    """Whether `devices` (a household's devices, or their names) are more than one: the one
    rule for where one device and several still part ways (the module's docstring lists where)."""
    return len(devices) > 1


@dataclass(frozen=True)
class Household:
    """The configured devices, in order (at least one, names unique)."""

    devices: tuple[DeviceName, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "devices", tuple(self.devices))
        if not self.devices:
            raise ValueError("a household needs at least one device")
        names = [d.name for d in self.devices]
        if len(set(names)) != len(names):
            raise ValueError(f"device names must be unique, got {names}")

    @classmethod
    def from_settings(cls, settings: Settings) -> Household:
        """The household the settings configure (`settings.device_configs`)."""
        return cls(tuple(DeviceName(d.name, tuple(d.aliases)) for d in device_configs(settings)))

    @classmethod
    def of_one(cls, name: str = DEFAULT_DEVICE) -> Household:
        """A household of one device named `name` (no aliases)."""
        return cls((DeviceName(name),))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.devices)

    @property
    def several(self) -> bool:
        """More than one device (`several`)."""
        return several(self.devices)

    def shown(self, name: str) -> str | None:
        """`name` where it must be said (several devices), else None: the device's signal,
        question and confirmation are then the plain ones (`Devices.ask`, `Talkback.ask`)."""
        return name if self.several else None

    def of(self, name: str, form: str = " ({})") -> str:
        """`form` filled with `name` for a log or printed line (several devices), else ""."""
        return form.format(name) if self.several else ""


__all__ = ["Household"]
