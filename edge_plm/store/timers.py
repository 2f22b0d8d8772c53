"""The pending actions of timed commands (``timers``, schema v10; mixed into ReplayStore).

A timer is one relay action at one wall time: "turn off the lights in twenty minutes" is one
``at`` timer; "turn on the fan for an hour" drives the fan now and leaves one ``for`` timer
(the way back). Rows are never deleted by the loop: a timer ends ``done`` (run),
``cancelled`` (by voice, by `edge-plm timers cancel`, or by the person's own switch),
``dropped`` (due while the device was off, later than ``timers.grace_s``) or ``refused``
(the relay could not be driven). `forget` deletes the timers of the interactions it deletes.
"""

from __future__ import annotations

from dataclasses import dataclass

#: What a timer row can end as (``pending`` until then).
TIMER_STATUSES = ("pending", "done", "cancelled", "dropped", "refused")
_COLUMNS = "id, interaction_id, device, action, kind, due_ts, created_ts, transcript, status, done_ts, note"


@dataclass(frozen=True)
class Timer:
    """One row of ``timers``."""

    id: int
    interaction_id: int | None
    device: str
    action: str  # ON / OFF: the state the relay is driven to at ``due_ts``
    kind: str  # at / for / until (for / until: this is the way back)
    due_ts: float
    created_ts: float
    transcript: str
    status: str
    done_ts: float | None
    note: str | None


class TimerRows:
    """Setting, listing, running and cancelling timers."""

    def has_timers(self) -> bool:
        """The database has the timers table (a file older than schema v10 opened read-only
        has not)."""
        with self._lock:
            return self.db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                   "name = 'timers'").fetchone() is not None

    def add_timer(self, device: str, action: str, kind: str, due_ts: float, transcript: str,
                  interaction_id: int | None = None) -> int:
        """A new pending timer; returns its id."""
        row = [interaction_id, str(device), str(action), str(kind), float(due_ts),
               float(self._clock()), str(transcript)]
        return int(self._write(lambda: self.db.execute(
            "INSERT INTO timers (interaction_id, device, action, kind, due_ts, created_ts, "
            "transcript) VALUES (?, ?, ?, ?, ?, ?, ?)", row).lastrowid))

    def timers(self, status: str | None = "pending", limit: int | None = None) -> list[Timer]:
        """Timers with `status` (None: every one), soonest due first (a status other than
        pending: latest first)."""
        where, args = ("WHERE status = ?", [status]) if status else ("", [])
        order = "due_ts ASC, id ASC" if status == "pending" else "id DESC"
        tail = f" LIMIT {int(limit)}" if limit else ""
        with self._lock:
            rows = self.db.execute(f"SELECT {_COLUMNS} FROM timers {where} ORDER BY {order}{tail}",
                                   args).fetchall()
        return [Timer(*r) for r in rows]

    def due_timers(self, now: float) -> list[Timer]:
        """Pending timers due at `now` or before, soonest first."""
        with self._lock:
            rows = self.db.execute(f"SELECT {_COLUMNS} FROM timers WHERE status = 'pending' AND "
                                   "due_ts <= ? ORDER BY due_ts, id", [float(now)]).fetchall()
        return [Timer(*r) for r in rows]

    def finish_timer(self, timer_id: int, status: str, note: str | None = None) -> bool:
        """A pending timer ends as `status`; False when it was no longer pending (cancelled by
        another process meanwhile, or an unknown id)."""
        if status not in TIMER_STATUSES[1:]:
            raise ValueError(f"a timer ends as one of {', '.join(TIMER_STATUSES[1:])}, got {status!r}")
        row = [status, float(self._clock()), note, int(timer_id)]
        return self._write(lambda: self.db.execute(
            "UPDATE timers SET status = ?, done_ts = ?, note = ? WHERE id = ? AND status = 'pending'",
            row).rowcount) == 1

    def cancel_timers(self, ids: list[int] | None = None, device: str | None = None,
                      note: str = "cancelled") -> list[int]:
        """Cancel the pending timers `ids` (None: every pending one), only `device`'s when given;
        returns the ids cancelled."""
        def cancel() -> list[int]:
            found = [t for t in self.timers("pending")
                     if (ids is None or t.id in ids) and (device is None or t.device == device)]
            for t in found:
                self.db.execute("UPDATE timers SET status = 'cancelled', done_ts = ?, note = ? "
                                "WHERE id = ?", [float(self._clock()), note, t.id])
            return [t.id for t in found]

        return self._write(cancel)

    def timer(self, timer_id: int) -> Timer | None:
        with self._lock:
            row = self.db.execute(f"SELECT {_COLUMNS} FROM timers WHERE id = ?",
                                  [int(timer_id)]).fetchone()
        return None if row is None else Timer(*row)

    def timers_of(self, interaction_ids: list[int]) -> dict[int, list[Timer]]:
        """The timers each of `interaction_ids` set (for ``log``)."""
        ids = [int(i) for i in interaction_ids]
        if not ids:
            return {}
        with self._lock:
            rows = self.db.execute(f"SELECT {_COLUMNS} FROM timers WHERE interaction_id IN "
                                   f"({', '.join('?' * len(ids))}) ORDER BY id", ids).fetchall()
        out: dict[int, list[Timer]] = {}
        for r in rows:
            out.setdefault(r[1], []).append(Timer(*r))
        return out
