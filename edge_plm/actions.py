"""The action registries: every action the switch can take, and the kinds beyond ON / OFF / NOOP.

  ON        the switch model's class 0: drive the relay on
  OFF       the switch model's class 1: drive the relay off
  NOOP      the switch model's class 2: leave the relay as it is
  DIM       the kind head's class: a step down of a dimmable light (step -1)
  BRIGHTEN  the kind head's class: a step up of a dimmable light (step +1)
  LEVEL     the kind head's class: set a dimmer to the level the words name (step 0;
            ``edge_plm.decide.level.read_level``)
  QUERY     the kind head's class: a question about a device's state (no step)

The first registry (``REGISTRY``) is the switch model's. An action is a class of the switch
model (its position in `ACTIONS` is its class index), a reserved token of the tokenizer, a label
in the replay buffer and in labelled JSON-lines files, and a relay state: ON drives the relay
on, OFF drives it off, NOOP leaves it as it is.
Everything else (tokenizer, switch network, store constraints, JSONL reader, policy, settings,
evaluation) reads this module, so adding an action is one line here.

Adding or reordering actions changes the model: the reserved token ids and the class indices
move, so switch-model checkpoints of the old set (the shipped starting model too) would read
their character ids shifted. With such a change, bump ``MODEL_FORMAT`` in `edge_plm.switch.model_file`
(old checkpoints are then refused with a clear message) and rebuild the starting model; an
existing replay buffer keeps its old CHECK constraints until a store migration rebuilds them
(a new database gets the new ones).

The second registry (``KIND_REGISTRY``) is the kind head's (`edge_plm.switch.kinds`, docs/method.md
"The kind head"): a separate, small head over the same units whose classes are ``KINDS`` — PLAIN
(everything the switch model decides: ON, OFF, NOOP) and the kinds. It leaves the first registry,
the switch model and its format untouched: a household with only relays keeps exactly the switch
model's behaviour. Adding a kind is one line in ``KIND_REGISTRY`` and a rebuilt kind head
(``models/build_kinds_en.py``; bump ``KIND_FORMAT`` in `edge_plm.switch.kinds`).

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


@dataclass(frozen=True)
class KindSpec:
    """One kind of the kind head: its name (label) and the dimmer step it stands for."""

    name: str
    step: int | None  # -1: a step down (DIM); +1: a step up (BRIGHTEN); 0: a named level (LEVEL); None: no step (QUERY)


#: The kind head's kinds beyond PLAIN, in class-index order (after PLAIN).
KIND_REGISTRY: tuple[KindSpec, ...] = (
    KindSpec("DIM", -1),
    KindSpec("BRIGHTEN", +1),
    KindSpec("LEVEL", 0),
    KindSpec("QUERY", None),
)
#: The kind head's class for everything else: what the switch model decides (ON / OFF / NOOP).
PLAIN = "PLAIN"
#: The kind head's classes in class-index order.
KINDS: tuple[str, ...] = (PLAIN, *(k.name for k in KIND_REGISTRY))
N_KINDS: int = len(KINDS)
#: Class index of each kind.
KIND_INDEX: dict[str, int] = {k: i for i, k in enumerate(KINDS)}
#: The dimmer step of each kind (PLAIN and QUERY: None).
KIND_STEP: dict[str, int | None] = {PLAIN: None, **{k.name: k.step for k in KIND_REGISTRY}}
#: The kinds that set a dimmer's level (a step or a named level).
LEVEL_KINDS: tuple[str, ...] = tuple(k.name for k in KIND_REGISTRY if k.step is not None)

if len(set(KINDS)) != N_KINDS or set(KINDS) & set(ACTIONS):
    raise RuntimeError("the kind registry repeats a name or reuses an action's name")
if LEVEL_KINDS != ("DIM", "BRIGHTEN", "LEVEL"):
    raise RuntimeError(f"the level kinds are DIM, BRIGHTEN, LEVEL, got {LEVEL_KINDS}")
