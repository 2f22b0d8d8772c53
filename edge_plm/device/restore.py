"""Relay restore after a restart (``gpio.relay_restore``), the way a smart plug does it.

On start every relay is first driven to its safe state (`Relay` does that when it is built);
`restore_relays` then drives it to the restored state and, from then on, records every change
the relay makes (`Relay.on_change`) in a `RelayStateStore` (the replay buffer), keyed by the
relay's name:

- ``"last"``: the state recorded before the restart (the safe state when none was recorded);
- ``"off"`` / ``"on"``: always that state; the record is not read.

A record is written right after the pin write, in one database transaction. A crash (kill -9,
power loss) between the pin write and its record therefore loses only that last change: the next
start restores the state recorded before it, a state the relay really was in, and with ``"off"``
or ``"on"`` the record does not matter at all. `Relay.close` (a stop) is not recorded, so a clean
stop followed by a start restores the state the relay had before the stop.

A dimmer (`edge_plm.device.dimmer.Dimmer`, a relay on a PWM output) is restored the same way:
its on / off is recorded and restored as a relay's, and the level it was last lit at is
recorded too (``relay_state.level``, at every change of level while lit): with ``"last"`` or
``"on"`` it comes back at that level (never dimmed: full), as a smart dimmer does. A knob turned
quickly writes a row per detent (a write is about a millisecond).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Protocol

from edge_plm.device.dimmer import Dimmer
from edge_plm.device.relay import Relay
from edge_plm.config.settings import RELAY_RESTORE as POLICIES

log = logging.getLogger(__name__)


class RelayStateStore(Protocol):
    """Where relay states are recorded (`edge_plm.store.ReplayStore` is one)."""

    def relay_state(self, name: str) -> bool | None: ...

    def set_relay_state(self, name: str, is_on: bool) -> None: ...

    def relay_level(self, name: str) -> float | None: ...

    def set_relay_level(self, name: str, level: float) -> None: ...


def restored_state(policy: str, recorded: bool | None, safe_state: bool) -> bool:
    """The state a relay takes after the safe state on start."""
    if policy == "on":
        return True
    if policy == "off":
        return False
    if policy == "last":
        return safe_state if recorded is None else recorded
    raise ValueError(f"relay_restore must be one of {', '.join(POLICIES)}, got {policy!r}")


def restore_relays(relays: Mapping[str, Relay], policies: Mapping[str, str],
                   store: RelayStateStore) -> dict[str, bool]:
    """Drive each relay (already in its safe state) to its restored state, and record every
    later change in `store`. Returns the restored state by relay name."""
    out: dict[str, bool] = {}
    for name, relay in relays.items():
        policy = policies[name]
        recorded = store.relay_state(name) if policy == "last" else None
        target = restored_state(policy, recorded, relay.safe_state)
        relay.on_change = _recorder(store, name)
        if isinstance(relay, Dimmer):
            _restore_level(relay, name, policy, store)
        if relay.is_on != target and not relay.set(target):
            raise RuntimeError(f"relay {name!r} refused its restored state")  # no toggle before it
        if store.relay_state(name) != relay.is_on:
            relay.record_state()  # e.g. "off" after ON: the record follows what the start did
        out[name] = relay.is_on
        log.info("relay %r: safe state %s, then %s (relay_restore = %s%s)", name,
                 _word(relay.safe_state), _word(relay.is_on), policy,
                 "" if policy != "last" else f", recorded {_word(recorded)}")
    return out


def _restore_level(dimmer: Dimmer, name: str, policy: str, store: RelayStateStore) -> None:
    """A dimmer lights at the level it was last lit at (``"last"`` / ``"on"``), and every later
    lit level is recorded."""
    level = store.relay_level(name) if policy != "off" else None
    if level is not None and level > 0:
        dimmer.set_lit_level(level)

    def record(level: float) -> None:
        if level > 0:
            store.set_relay_level(name, level)
    dimmer.level_watchers.append(record)


def _recorder(store: RelayStateStore, name: str):
    def record(is_on: bool) -> None:
        store.set_relay_state(name, is_on)
    return record


def _word(state: bool | None) -> str:
    return "nothing" if state is None else ("ON" if state else "OFF")
