"""The one way in to a household's learning: the service, replays and every command that learns
(`label`, `forget`, `model rebuild|rollback|import`) open the learner here, with the household
the settings configure (`Household.from_settings`), the database's own checkpoint folder and
the learner's configuration, so a command changes the model exactly as the loop would.

`open_learner` gives the `Learner`; `open_loop` gives the `Controller` on a learner opened here
and the household's devices (checked to be the same devices, in the same order).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from edge_plm.config.settings import Settings
from edge_plm.device import Devices
from edge_plm.learning import forgetting
from edge_plm.learning.household import Household
from edge_plm.learning.learner import Learner, LearnerConfig
from edge_plm.loop.controller import Controller
from edge_plm.loop.household_ear import make_household_ear
from edge_plm.store import ReplayStore, private_dir
from edge_plm.voice.asr import AsrBackend

if TYPE_CHECKING:
    from edge_plm.voice.talkback import Talkback

Clock = Callable[[], float]


def open_learner(settings: Settings, store: ReplayStore, *, load: bool = True,
                 cfg: LearnerConfig | None = None, clock: Clock = time.time) -> Learner:
    """The household's learner on `store`. ``load``: opened as at start-up (`Learner.open`: the
    active version, its catch-up, or a rebuild); else not loaded, for a command that replaces
    the model (a rebuild, a rollback), after what an interrupted `forget` still owes is
    finished (`forgetting.complete_owed`). ``cfg``: the learner's configuration when not
    the settings' (`edge-plm replay` with its own)."""
    cfg = cfg or LearnerConfig.from_settings(settings.model)
    household = Household.from_settings(settings)
    checkpoints = private_dir(store.checkpoints_home())
    if load:
        return Learner.open(store, cfg, checkpoints, household, clock=clock)
    forgetting.complete_owed(store)
    return Learner(store, cfg, checkpoints, household, clock=clock)


def open_loop(settings: Settings, store: ReplayStore, learner: Learner, devices: Devices,
              asr: AsrBackend | None, *, background: bool = False, clock: Clock = time.monotonic,
              wall: Clock = time.time, talkback: Talkback | None = None) -> Controller:
    """The loop on `learner` (from `open_learner`) and the household's `devices`. ``background``:
    learning on its own thread, as the service runs (replays learn inline: reproducible)."""
    ear = make_household_ear(settings, asr, synchronous=not background,
                             private=private_dir(store.checkpoints_home()))
    from edge_plm.switch.kinds import load_shipped  # noqa: PLC0415 - read only when the household uses it

    return Controller(settings, store, learner, devices, asr, clock=clock, wall=wall,
                      talkback=talkback, background=background, ear=ear, load_head=load_shipped)


__all__ = ["open_learner", "open_loop"]
