"""Times as the commands read and print them: `--before 2d` or an ISO date, ISO output, short
relative output for tables."""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta

from edge_plm.commands.opening import UserError


_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d|w)\s*$", re.IGNORECASE)
_UNIT_S = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_time(text: str, now: float | None = None) -> float:
    """A point in time as epoch seconds: ISO date/time (local unless it has an offset),
    a relative age (``90s``, ``15m``, ``2h``, ``1d``, ``1w`` ago), ``today`` or ``yesterday``."""
    now = time.time() if now is None else now
    s = text.strip()
    m = _RELATIVE.match(s)
    if m:
        return now - float(m.group(1)) * _UNIT_S[m.group(2).lower()]
    midnight = datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0)
    if s.lower() == "today":
        return midnight.timestamp()
    if s.lower() == "yesterday":
        return (midnight - timedelta(days=1)).timestamp()
    try:
        return datetime.fromisoformat(s.replace("Z", "+00:00") if s.endswith("Z") else s
                                      ).timestamp()
    except ValueError:
        raise UserError(f"cannot read the time {text!r}: use an ISO date or time "
                        "(2024-05-01, 2024-05-01T18:30, 2024-05-01 18:30:00+02:00) or an age "
                        "(90s, 15m, 2h, 1d, 1w), today, yesterday") from None


def iso(ts: float | None) -> str | None:
    """Local time with its UTC offset, to the second."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds")


def short_time(ts: float | None, now: float | None = None) -> str:
    """``HH:MM:SS`` today, else ``YYYY-MM-DD HH:MM``."""
    if ts is None:
        return "-"
    t = datetime.fromtimestamp(ts)
    today = datetime.fromtimestamp(time.time() if now is None else now).date()
    return t.strftime("%H:%M:%S") if t.date() == today else t.strftime("%Y-%m-%d %H:%M")


__all__ = ["iso", "parse_time", "short_time"]
