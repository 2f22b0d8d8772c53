"""Timed commands in the loop: "turn off the lights in twenty minutes", "turn on the fan for an
hour", "cancel the fan timer" (docs/loop.md, "Timed commands").

`TimedCommands` is a collaborator of the `Controller`:

- `read(text)`: the time slot of a transcript (`edge_plm.decide.when`; None when
  ``timers.enabled`` is off or there is no time). The model predicts on the command without
  the time phrase; the row keeps the whole transcript.
- `hold(iid, slot, steps)`: an ``at`` command the policy would act on is not driven now: a
  timer is set for each device it would drive. ``for`` / ``until`` commands are driven now as
  ever and `after_drive` sets the way back (the other state) at the time.
- An ask about a timed command is asked as any other. Its answer: a spoken yes sets the ``at``
  timer instead of switching now (`holds_answer`); a flip of the switch has already switched
  now, so an ``at`` command gets no timer (the hand wins) and a ``for`` / ``until`` command gets
  its way back. An ask left alone is not learned as "not a command" (the person only did not
  want it now).
- `hand(device)`: the person's own switch (or a home hub's toggle) cancels that device's
  pending timers: the hand always wins.
- `run_due()` (every pump): due timers drive their relay through `Devices.drive` (its rate
  limit: a refusal is retried at the next pump); each ends as a row status the log shows.
- `start()`: timers that fell due while the device was off run at the first pump if at most
  ``timers.grace_s`` late, else they are dropped (status ``dropped``, logged).
- `voice_cancel(text)`: "cancel the timer", "cancel the fan timer" (the rule: `CANCEL`).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import replace

from edge_plm.config.settings import Settings
from edge_plm.decide.devices import DeviceResolution, Steps
from edge_plm.decide.policy import Action, LabelSource
from edge_plm.decide.when import TimeSlot, Unreadable, read_time
from edge_plm.device import Devices
from edge_plm.learning.household import Household
from edge_plm.store import ReplayStore, StorageError, Timer

log = logging.getLogger("edge_plm.loop.timers")

Clock = Callable[[], float]

ASKS_KEPT = 16  # asks about timed commands remembered for their answers (the latest)

#: The voice rule that cancels timers: a cancel verb, optionally a device word, "timer(s)".
CANCEL = re.compile(r"^(?:please )?(?:cancel|stop|delete|clear|remove|forget)(?: (?:the|my|all|all the))?"
                    r"(?: (?P<what>[a-z' ]+?))? timers?(?: please)?$")


class TimedCommands:
    """Timers of the loop over `store` for `devices` (`household`). ``wall``: the wall clock
    timers are due by; ``clock``: the loop's clock (the relay's rate limit)."""

    def __init__(self, settings: Settings, store: ReplayStore, devices: Devices,
                 household: Household, clock: Clock, wall: Clock = time.time) -> None:
        self.cfg = settings.timers
        self.store = store
        self.devices = devices
        self.household = household
        self.clock = clock
        self.wall = wall
        self.asked: dict[int, TimeSlot] = {}  # open asks about timed commands, by interaction

    def follow(self, clock: Clock) -> None:
        """Take wall time as `clock` plus the wall time now (replays: the simulated clock, so
        that simulated time runs the timers)."""
        base = self.wall() - clock()
        self.wall = lambda: base + clock()

    # --- reading --------------------------------------------------------------------------
    def read(self, text: str) -> TimeSlot | Unreadable | None:
        """The time slot of `text` (None: no time, or timers are off); a time further ahead
        than ``timers.max_delay_s`` is `Unreadable` (asked about, never acted on now)."""
        if not self.cfg.enabled:
            return None
        slot = read_time(text, self.wall())
        if isinstance(slot, TimeSlot) and slot.due - self.wall() > self.cfg.max_delay_s:
            return Unreadable(slot.phrase)
        return slot

    # --- setting --------------------------------------------------------------------------
    def hold(self, iid: int, slot: TimeSlot | Unreadable | None, steps: Steps) -> Steps:
        """`steps` without the drives of an ``at`` command (a timer is set for each instead);
        an ask about a timed command is remembered for its answer."""
        if not isinstance(slot, TimeSlot):
            return steps
        if steps.asks:
            self.asked[iid] = slot
            for old in list(self.asked)[:-ASKS_KEPT]:  # each device's window closes in its time
                del self.asked[old]
        if slot.kind != "at" or not steps.drives:
            return steps
        for name, action in steps.drives.items():
            self._set(iid, slot, name, action)
        held = {n: replace(s, drive=None) if s.drive is not None else s for n, s in steps.steps.items()}
        return Steps(held, steps.closed)

    def after_drive(self, iid: int, slot: TimeSlot | Unreadable | None,
                    driven: dict[str, Action]) -> None:
        """A ``for`` / ``until`` command drove `driven` now: the way back at its time."""
        if isinstance(slot, TimeSlot) and slot.kind != "at":
            for name, action in driven.items():
                self._set(iid, slot, name, action)

    def holds_answer(self, iid: int) -> bool:
        """A spoken yes to this ask sets a timer instead of switching now (``at`` commands)."""
        slot = self.asked.get(iid)
        return slot is not None and slot.kind == "at"

    def resolved(self, resolutions: list[DeviceResolution]) -> list[DeviceResolution]:
        """The answers to asks about timed commands set their timers (module docstring);
        returns the resolutions to label (an ask left alone: no label)."""
        out = []
        for r in resolutions:
            res = r.resolution
            slot = self.asked.get(res.key) if isinstance(res.key, int) else None
            if slot is None:
                out.append(r)
                continue
            if res.label is not None and res.label.state is not None:
                if res.source is LabelSource.SPOKEN and slot.kind == "at":
                    self._set(res.key, slot, r.device, res.label)
                elif res.source is not LabelSource.SPOKEN and slot.kind != "at":
                    self._set(res.key, slot, r.device, res.label)
            elif res.label is not None and res.source is LabelSource.ASKED:
                res = replace(res, label=None, source=None,
                              reason=f"{res.reason}; a timed command: not learned as no command")
            out.append(DeviceResolution(r.device, res))
        return out

    def _set(self, iid: int, slot: TimeSlot, name: str, action: Action) -> None:
        """A timer for device `name`: `action` at the time (``at``), or its opposite (the way
        back, ``for`` / ``until``)."""
        target = action if slot.kind == "at" else Action.from_state(not action.state)
        tid = self.store.add_timer(name, target.value, slot.kind, slot.due, slot.transcript, iid)
        log.info("#%d timer %d set: %s%s at %s (%s)", iid, tid, target.value,
                 self.household.of(name, " {}"), _clock_text(slot.due), slot.phrase)

    # --- the person, the time -------------------------------------------------------------
    def hand(self, name: str) -> None:
        """The person switched device `name` by hand: its pending timers are cancelled."""
        if not any(t.device == name for t in self.store.timers("pending")):
            return  # no write for a flip with nothing pending
        ids = self.store.cancel_timers(device=name, note="the person's switch")
        if ids:
            log.info("timer%s %s cancelled: the person switched%s by hand", "s" * (len(ids) > 1),
                     ", ".join(map(str, ids)), self.household.of(name, " {}"))

    def start(self) -> list[Timer]:
        """Timers due while the device was off: later than ``timers.grace_s`` they are dropped
        (and logged); the others run at the first pump. Returns the dropped ones."""
        now = self.wall()
        dropped = []
        for t in self.store.due_timers(now - self.cfg.grace_s):
            late = now - t.due_ts
            if self._finish(t, "dropped", f"due {late:.0f} s before the start "
                            f"(grace {self.cfg.grace_s:.0f} s)"):
                dropped.append(t)
                log.warning("timer %d (%s %s, due %s) dropped: due %.0f s before the device "
                            "started, more than timers.grace_s = %.0f", t.id, t.action, t.device,
                            _clock_text(t.due_ts), late, self.cfg.grace_s)
        return dropped

    def run_due(self) -> list[Timer]:
        """Drive the relays of the timers due now; returns those that ran."""
        ran = []
        for t in self.store.due_timers(self.wall()):
            if t.device not in self.devices.relays:
                self._finish(t, "refused", f"no device named {t.device!r}")
                log.error("timer %d refused: no device named %r", t.id, t.device)
            elif self.devices.drive(t.action, t.device, now=self.clock()):
                if self._finish(t, "done", f"{t.action} at {_clock_text(self.wall())}"):
                    ran.append(t)
                    log.info("timer %d ran: %s%s (due %s, set by #%s)", t.id, t.action,
                             self.household.of(t.device, " {}"), _clock_text(t.due_ts),
                             t.interaction_id)
        return ran

    def _finish(self, t: Timer, status: str, note: str) -> bool:
        """Timer `t` ends as `status`; a write that fails (disk full, read-only) is logged and
        the timer stays pending (tried again at the next pump)."""
        try:
            return self.store.finish_timer(t.id, status, note)
        except StorageError as exc:
            log.error("timer %d: its end (%s) not stored: %s", t.id, status, exc)
            return False

    def pending(self) -> dict:
        """The pending timers for Home Assistant's sensor: ``{"count", "timers": [{"id",
        "device", "action", "kind", "due"}]}`` (at most 10 listed)."""
        rows = self.store.timers("pending")
        return {"count": len(rows), "timers": [
            {"id": t.id, "device": t.device, "action": t.action, "kind": t.kind,
             "due": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t.due_ts))} for t in rows[:10]]}

    def voice_cancel(self, text: str) -> list[int] | None:
        """"cancel the timer" / "cancel the fan timer" with timers pending: the ids cancelled
        (a device's name or alias: its timers; another word: the timers whose command holds
        it; no word: every pending one). None: not such a command, or nothing to cancel."""
        found = CANCEL.match(" ".join(text.lower().split()))
        pending = self.store.timers("pending") if found else []
        if not pending:
            return None
        what = (found.group("what") or "").strip()
        chosen = pending
        if what:
            named = {d.name for d in self.household.devices
                     if what in (d.name.lower(), *(a.lower() for a in d.aliases))}
            words = set(what.split())
            chosen = ([t for t in pending if t.device in named] if named else
                      [t for t in pending if words & set(t.transcript.lower().split())])
        if not chosen:
            return None
        ids = self.store.cancel_timers([t.id for t in chosen], note=f"voice: {text}")
        log.info("timer%s %s cancelled by voice", "s" * (len(ids) > 1), ", ".join(map(str, ids)))
        return ids


def command_text(slot: TimeSlot | Unreadable | None, text: str) -> str:
    """What the model predicts on: the command without its time phrase (the whole transcript
    when it has no readable time, or nothing but the time)."""
    return (slot.command or text) if isinstance(slot, TimeSlot) else text


def _clock_text(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts))


__all__ = ["CANCEL", "TimedCommands", "TimeSlot", "Unreadable", "command_text"]
