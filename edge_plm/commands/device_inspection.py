"""What `status`, `log`, `stats` and `export` show of several devices (docs/devices.md).

With one device nothing here adds to a command's output except `status`'s device list: the
interaction rows hold everything, as before. With several, each interaction's per-device
outcomes (``interaction_devices``) are added to the JSON records and export lines (``devices``)
and an export line says which device(s) the label is for (``device``), so that `edge-plm replay`
plays it back for the same devices.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from edge_plm.config.settings import device_configs
from edge_plm.store import DeviceOutcome, Interaction, ReplayStore


def outcomes_of(store: ReplayStore, rows: Iterable[Interaction]) -> dict[int, dict[str, DeviceOutcome]]:
    """The per-device outcomes of `rows` (only the rows that have them)."""
    ids = [r.id for r in rows]
    return store.device_outcomes(ids) if ids else {}


def device_record(outcomes: Mapping[str, DeviceOutcome]) -> dict[str, dict[str, Any]]:
    """``{device: {prediction, confidence, decision, action, label, label_source}}``."""
    return {d: {"prediction": o.prediction, "confidence": o.confidence, "decision": o.decision,
                "action": o.action, "label": o.label, "label_source": o.label_source}
            for d, o in outcomes.items()}


def export_device(label: str | None, outcomes: Mapping[str, DeviceOutcome]) -> str | list[str] | None:
    """An export line's ``"device"``: the device(s) whose own label is the interaction's ON /
    OFF, or that got no label after being driven to it (already in that state, left alone:
    "everything off" with the heater already off) — one name, or a list; None (no key) for a
    NOOP or unlabelled line."""
    if label not in ("ON", "OFF"):
        return None
    names = [d for d, o in outcomes.items() if o.label == label or (o.label is None and o.action == label)]
    if not names:
        return None
    return names[0] if len(names) == 1 else names


def status_devices(store: ReplayStore, settings: Any) -> list[dict[str, Any]]:
    """The configured devices with their pins and last recorded relay state."""
    if settings is None:
        return []
    return [{"name": d.name, "aliases": list(d.aliases), "relay_pin": d.relay_pin,
             "switch_pin": d.switch_pin, "led_pin": d.led_pin, "relay_restore": d.relay_restore,
             "relay_state": store.relay_state(d.name)} for d in device_configs(settings)]


def short(outcomes: Mapping[str, DeviceOutcome]) -> str:
    """One cell of `log`: what was done to each device and what its switch said, e.g.
    ``fan act ON ✓ON · lamp ignore ·NOOP``; devices predicted NOOP, ignored and labelled NOOP
    (or not at all) are left out."""
    parts = []
    for d, o in outcomes.items():
        quiet = o.decision == "ignore" and o.prediction == "NOOP" and o.label in (None, "NOOP")
        if quiet:
            continue
        did = f"act {o.action}" if o.action else (o.decision or "-")
        parts.append(f"{d} {did}" + (f" → {o.label}" if o.label else ""))
    return "; ".join(parts) or "-"


__all__ = ["device_record", "export_device", "outcomes_of", "short", "status_devices"]
