"""What `edge-plm timers` shows and cancels, and the ``timers`` key of `status --json`: the
pending actions of timed commands (docs/loop.md, "Timed commands")."""

from __future__ import annotations

from typing import Any

from edge_plm.commands.opening import UserError
from edge_plm.commands.times import iso
from edge_plm.store import ReplayStore, Timer


def timer_record(t: Timer) -> dict[str, Any]:
    """One timer as `timers --json` and `status --json` print it."""
    return {"id": t.id, "device": t.device, "action": t.action, "kind": t.kind,
            "due": iso(t.due_ts), "due_ts": t.due_ts, "transcript": t.transcript,
            "interaction_id": t.interaction_id, "status": t.status, "note": t.note}


def timer_records(store: ReplayStore, status: str | None = "pending") -> list[dict[str, Any]]:
    """The timers with `status` (None: all), soonest due first; [] for a database made before
    timers existed (schema < 10, opened read-only)."""
    if not store.has_timers():
        return []
    return [timer_record(t) for t in store.timers(status)]


def timers_of(store: ReplayStore, ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """The timers each interaction of `ids` set (`log`: a new key ``timers`` on those rows)."""
    if not store.has_timers():
        return {}
    return {i: [timer_record(t) for t in ts] for i, ts in store.timers_of(ids).items()}


def timer_line(iid: int, t: dict[str, Any]) -> str:
    """`log`'s line for a timer interaction `iid` set."""
    from edge_plm.commands.times import short_time  # noqa: PLC0415

    return (f"#{iid} timer {t['id']}: {t['device']} {t['action']} due {short_time(t['due_ts'])} "
            f"({t['kind']}) {t['status']}" + (f": {t['note']}" if t["note"] else ""))


def cancel_timers(store: ReplayStore, ids: list[int], every: bool) -> list[int]:
    """Cancel the pending timers `ids` (or `every` pending one); an id that is not a pending
    timer is a `UserError` and nothing is cancelled."""
    if every == bool(ids):
        raise UserError("give timer ids or --all (not both)")
    if not every:
        pending = {t.id for t in store.timers("pending")}
        missing = [i for i in ids if i not in pending]
        if missing:
            raise UserError(f"no pending timer with id {missing[0]} (`edge-plm timers` lists them)")
    return store.cancel_timers(None if every else ids, note="edge-plm timers cancel")


__all__ = ["cancel_timers", "timer_line", "timer_record", "timer_records", "timers_of"]
