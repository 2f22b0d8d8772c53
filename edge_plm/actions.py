"""The action registry: every action the switch can take, in one place.

An action is a class of the switch model (its position in `ACTIONS` is its class index), a
reserved token of the tokenizer, a label in the replay buffer and in labelled JSON-lines files,
and a relay state: ON drives the relay on, OFF drives it off, NOOP leaves it as it is.
Everything else (tokenizer, switch network, store constraints, JSONL reader, policy, settings,
evaluation) reads this module, so adding an action is one line here.

Adding or reordering actions changes the model: the reserved token ids and the class indices
move, so switch-model checkpoints of the old set (the shipped starting model too) would read
their character ids shifted. With such a change, bump ``MODEL_FORMAT`` in `edge_plm.switch.model_file`
(old checkpoints are then refused with a clear message) and rebuild the starting model; an
existing replay buffer keeps its old CHECK constraints until a store migration rebuilds them
(a new database gets the new ones).

A leaf module: it imports nothing from edge_plm (`edge_plm.plm` and `edge_plm.switch` may import it).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ActionSpec:
    """One action: its name (label and reserved token) and the relay state it drives."""

    name: str
    relay_state: bool | None  # True: relay on; False: relay off; None: no change

    @property
    def token(self) -> str:
        """The reserved token that stands for this action after ``DEVICE:``."""
        return self.name


#: The registry, in class-index order.
REGISTRY: tuple[ActionSpec, ...] = (
    ActionSpec("ON", True),
    ActionSpec("OFF", False),
    ActionSpec("NOOP", None),
)

#: Action names (= labels) in class-index order.
ACTIONS: tuple[str, ...] = tuple(a.name for a in REGISTRY)
N_ACTIONS: int = len(ACTIONS)
#: Class index of each action.
INDEX: dict[str, int] = {a: i for i, a in enumerate(ACTIONS)}
#: The reserved tokens of the actions, in class-index order.
TOKENS: tuple[str, ...] = tuple(a.token for a in REGISTRY)
#: The relay state each action drives (None: the relay is left as it is).
RELAY_STATE: dict[str, bool | None] = {a.name: a.relay_state for a in REGISTRY}
#: The actions that drive a relay (what the device can do), in class-index order.
DRIVING: tuple[str, ...] = tuple(a.name for a in REGISTRY if a.relay_state is not None)


def for_state(on: bool) -> str:
    """The action that drives the relay to `on` (ON for True, OFF for False)."""
    for a in REGISTRY:
        if a.relay_state is bool(on):
            return a.name
    raise LookupError(f"no action drives the relay {'on' if on else 'off'}")


def sql_in(names: tuple[str, ...]) -> str:
    """The SQL list literal of `names` for an ``IN (...)`` constraint: ``'ON', 'OFF'``."""
    for n in names:
        if not n.isalnum():  # names are plain words: nothing to quote or escape
            raise ValueError(f"action name {n!r} is not alphanumeric")
    return ", ".join(f"'{n}'" for n in names)


for _state in (True, False):  # the registry must drive the relay both ways, once each
    if sum(a.relay_state is _state for a in REGISTRY) != 1:
        raise RuntimeError(f"the action registry needs exactly one action with relay_state {_state}")
if len(set(ACTIONS)) != N_ACTIONS:
    raise RuntimeError("the action registry repeats a name")
