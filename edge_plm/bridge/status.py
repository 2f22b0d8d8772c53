"""What the bridge last knew about its broker, for `edge-plm status` (another process).

The running bridge writes a small JSON file next to the database
(``<database>.mqtt.json``, mode 0600): whether it is connected, the broker, the base topic, the
last problem and when it changed. No transcript is ever written to it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from edge_plm.files import atomic_file


def status_path(database: str | Path) -> Path:
    """The bridge's status file of a database."""
    database = Path(database)
    return database.with_name(database.name + ".mqtt.json")


def write_status(path: Path | None, **values: Any) -> None:
    """Replace the status file (atomically; a failure is ignored: it is only a report)."""
    if path is None:
        return
    values["updated"] = time.time()
    try:
        with atomic_file(path, "w", durable=False, prefix=".mqtt-", suffix="") as f:
            json.dump(values, f, sort_keys=True)
    except OSError:
        pass


def read_status(path: Path) -> dict[str, Any] | None:
    """The last status the bridge wrote (None: none, or unreadable)."""
    try:
        out = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return out if isinstance(out, dict) else None


def bridge_status(settings: Any, database: str | Path) -> dict[str, Any] | None:
    """`edge-plm status`'s ``bridge`` object (None when ``[mqtt]`` is off): the configured
    broker and base topic and what the bridge last reported."""
    m = settings.mqtt
    if not m.enabled:
        return None
    from edge_plm.bridge.topics import Topics  # noqa: PLC0415

    topics = Topics.of(m, [])
    last = read_status(status_path(database)) or {}
    return {"enabled": True, "broker": f"{m.host}:{m.port}", "base": topics.base,
            "connected": last.get("connected"), "last_error": last.get("last_error"),
            "updated": last.get("updated")}


__all__ = ["bridge_status", "read_status", "status_path", "write_status"]
