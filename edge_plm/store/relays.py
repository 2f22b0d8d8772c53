"""The relay-state queries of the replay buffer (``gpio.relay_restore``; mixed into ReplayStore)."""

from __future__ import annotations


class RelayRows:
    """The last state each relay was driven to, by relay name."""

    def set_relay_state(self, name: str, is_on: bool) -> None:
        """Record that relay `name` was driven to `is_on` (one transaction: after a crash the
        row holds either the previous state or this one, never a mix)."""
        row = [str(name), int(bool(is_on)), float(self._clock())]
        self._write(lambda: self.db.execute(
            "INSERT INTO relay_state (name, is_on, ts) VALUES (?, ?, ?) ON CONFLICT(name) DO "
            "UPDATE SET is_on = excluded.is_on, ts = excluded.ts", row))

    def relay_state(self, name: str) -> bool | None:
        """The last recorded state of relay `name` (None: never recorded)."""
        with self._lock:
            row = self.db.execute("SELECT is_on FROM relay_state WHERE name = ?",
                                  [str(name)]).fetchone()
        return None if row is None else bool(row[0])

    def set_relay_level(self, name: str, level: float) -> None:
        """Record the level dimmer `name` is lit at (its on / off is `set_relay_state`'s)."""
        row = [str(name), float(level), float(self._clock())]
        self._write(lambda: self.db.execute(
            "INSERT INTO relay_state (name, is_on, ts, level) VALUES (?, 1, ?, ?) ON CONFLICT(name) "
            "DO UPDATE SET level = excluded.level", [row[0], row[2], row[1]]))

    def relay_level(self, name: str) -> float | None:
        """The last recorded lit level of dimmer `name` (None: never recorded, or a database
        before schema v12 opened read-only)."""
        with self._lock:
            cols = {r[1] for r in self.db.execute("PRAGMA table_info(relay_state)")}
            if "level" not in cols:
                return None
            row = self.db.execute("SELECT level FROM relay_state WHERE name = ?", [str(name)]).fetchone()
        return None if row is None or row[0] is None else float(row[0])
