"""The household: the configured devices, in order, with their names and aliases.

One frozen value, built once from the settings (`Household.from_settings`: the ``[[devices]]``
entries, or the one device of the ``[gpio]`` keys), handed to the learner and the loop. One
device is a household of one. It also says which device a log line, a question or a signal is
about: with one device it names none (every line reads as it did before there were several).
"""

from __future__ import annotations

from dataclasses import dataclass

from edge_plm.config.settings import DEFAULT_DEVICE, Settings, device_configs
from edge_plm.switch.addressing import DeviceName


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
        return len(self.devices) > 1

    def shown(self, name: str) -> str | None:
        """`name` where it must be said (several devices), else None: the device's signal,
        question and confirmation are then the plain ones (`Devices.ask`, `Talkback.ask`)."""
        return name if self.several else None

    def of(self, name: str, form: str = " ({})") -> str:
        """`form` filled with `name` for a log or printed line (several devices), else ""."""
        return form.format(name) if self.several else ""


__all__ = ["Household"]
