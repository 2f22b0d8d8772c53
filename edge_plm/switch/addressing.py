"""Which configured device an utterance addresses (several named devices, docs/devices-model.md).

The switch model decides the *action* of a command (ON / OFF / NOOP, ``model.py``); this module
decides which devices it is for. A device is a name with aliases (``DeviceName``, from the
config's ``[[devices]]``). An utterance addresses (``naming.py``: the name is the query of an
attention over the transcript's words, compared by their codes and, for ASR garble and
plurals, their character n-grams):

- the devices whose name or an alias it says (a plural or a near spelling counts, with a
  smaller share when the name is only half there);
- every device when it says "all", "every" or "everything" and names none;
- otherwise the default device (the first configured one): "turn it on" goes where a single
  device's switch always went; with several devices at the share ``naming.default_share``
  (asked about until the owner's switches show unnamed commands are the default device's);
  a model whose owner's switches answered more unnamed commands for another device gives them
  to that one (``naming.unnamed_device``).

``addressed`` returns the share p_d in [0, 1] of each device from the names alone (a model adds
the names its devices' switches taught it: ``SwitchModel.predict_devices``);
``device_distribution`` turns the
command's action distribution into device d's: ON and OFF scaled by p_d, the rest NOOP. With one
device p = 1 and the distribution is the model's own, so a single-device setup decides exactly
as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from edge_plm.actions import INDEX
from edge_plm.switch.config import get_config
from edge_plm.switch.naming import ADDRESS_FLOOR, ALL_WORDS, NameQuery  # noqa: F401 - ALL_WORDS: part of this API
from edge_plm.switch.tokenizer import normalize


@dataclass(frozen=True)
class DeviceName:
    """A device as the model knows it: its name and the other names it answers to."""

    name: str
    aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "aliases", tuple(self.aliases))  # hashable, whatever was passed
        if not normalize(self.name):
            raise ValueError(f"a device name needs a letter or digit, got {self.name!r}")
        for alias in self.aliases:
            if not normalize(alias):
                raise ValueError(f"device {self.name!r}: an alias needs a letter or digit, got {alias!r}")

    def phrases(self) -> tuple[tuple[str, ...], ...]:
        """Its name and aliases as normalised word sequences (read at every utterance: made
        once per name and aliases)."""
        return _phrases(self.name, self.aliases)


@lru_cache(maxsize=256)
def _phrases(name: str, aliases: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(normalize(p).split()) for p in (name, *aliases))


def _query() -> NameQuery:
    cfg = get_config("potato")
    return NameQuery(None, cfg.unit_min_n, cfg.unit_max_n)


def named(transcript: str, devices: Sequence[DeviceName]) -> list[bool]:
    """For each device: does the transcript say its name or an alias (``naming.py``)?"""
    scores = _query().address(normalize(transcript).split(), devices).scores
    return [bool(s >= ADDRESS_FLOOR) for s in scores]


def addressed(transcript: str, devices: Sequence[DeviceName]) -> np.ndarray:
    """p_d: the share of the command that is for device d (module docstring)."""
    if not devices:
        raise ValueError("need at least one device")
    return _query().address(normalize(transcript).split(), devices).shares


def command_label(labels: dict[str, str], devices: Sequence[DeviceName]) -> str:
    """The action of an utterance labelled per device: the ON / OFF the devices' labels agree
    on (the most common; a tie goes to the earlier device), NOOP when every device's is NOOP."""
    names = [d.name for d in devices]
    unknown = set(labels) - set(names)
    if unknown:
        raise ValueError(f"labels for unknown devices {sorted(unknown)} (devices: {', '.join(names)})")
    for label in labels.values():
        if label not in INDEX:
            raise ValueError(f"label must be one of {', '.join(INDEX)}, got {label!r}")
    wanted = [labels[n] for n in names if labels.get(n, "NOOP") != "NOOP"]
    if not wanted:
        return "NOOP"
    return max(dict.fromkeys(wanted), key=wanted.count)


def device_distribution(action: np.ndarray, p: float) -> np.ndarray:
    """Device d's distribution over the actions: ON and OFF of the command's distribution
    scaled by p (the share addressed to d), the remainder NOOP."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"an addressed share must be in [0, 1], got {p}")
    out = np.asarray(action, dtype=float) * p
    noop = INDEX["NOOP"]
    out[noop] = 1.0 - (out.sum() - out[noop])
    return out
