"""Each device's outcome of an utterance (``interaction_devices``, several named devices).

One row per (interaction, device), written only when more than one device is configured: the
device's prediction, the policy's decision for it, what was driven, and the label its own switch
gave (docs/devices.md "The data"). The interaction's own row keeps the utterance and, in its
prediction / decision / action / label columns, the lead device's outcome and the command's
label (what the model learns). Deleting an interaction deletes its device rows in the same
transaction (`InteractionRows.delete_interactions`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import sqlite_utils

from edge_plm.store.records import _enum_value, _marks, check_outcome

_COLUMNS = ("prediction", "confidence", "distribution", "decision", "action", "label",
            "label_source", "label_ts")


@dataclass(frozen=True)
class DeviceOutcome:
    """One row of ``interaction_devices``."""

    interaction_id: int
    device: str
    prediction: str | None
    confidence: float | None
    distribution: dict[str, float] | None
    decision: str | None
    action: str | None
    label: str | None
    label_source: str | None
    label_ts: float | None


def _values(fields_: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(fields_) - set(_COLUMNS)
    if unknown:
        raise ValueError(f"unknown device outcome field(s): {', '.join(sorted(unknown))}")
    row = {k: _enum_value(v) for k, v in fields_.items()}
    check_outcome(row)
    if row.get("distribution") is not None:
        row["distribution"] = json.dumps(row["distribution"], sort_keys=True)
    return row


def _outcome(r: Mapping[str, Any]) -> DeviceOutcome:
    dist = json.loads(r["distribution"]) if r["distribution"] is not None else None
    return DeviceOutcome(int(r["interaction_id"]), r["device"], r["prediction"], r["confidence"],
                         dist, r["decision"], r["action"], r["label"], r["label_source"], r["label_ts"])


class DeviceRows:
    """The per-device queries of `ReplayStore` (a mixin over `StoreConnection`)."""

    db: sqlite_utils.Database
    _lock: threading.RLock
    _clock: Callable[[], float]
    _write: Callable[[Callable[[], Any]], Any]

    def add_device_outcomes(self, interaction_id: int, outcomes: Mapping[str, Mapping[str, Any]]) -> None:
        """The devices' rows of a new interaction: ``{device: {prediction, confidence, ...}}``."""
        rows = [(str(d), _values(v)) for d, v in outcomes.items()]

        def write() -> None:
            for device, row in rows:
                cols = ["interaction_id", "device", *row]
                self.db.execute(f"INSERT INTO interaction_devices ({', '.join(cols)}) VALUES "
                                f"({_marks(cols)})", [int(interaction_id), device, *row.values()])
        self._write(write)

    def update_device_outcomes(self, interaction_id: int, outcomes: Mapping[str, Mapping[str, Any]]) -> None:
        """Set the given fields of existing device rows (e.g. the decision and action)."""
        rows = [(str(d), _values(v)) for d, v in outcomes.items() if v]

        def write() -> None:
            for device, row in rows:
                sets = ", ".join(f"{k} = ?" for k in row)
                cur = self.db.execute(f"UPDATE interaction_devices SET {sets} WHERE interaction_id = ? "
                                      "AND device = ?", [*row.values(), int(interaction_id), device])
                if cur.rowcount == 0:
                    raise ValueError(f"interaction {interaction_id} has no outcome for device {device!r}")
        self._write(write)

    def set_device_label(self, interaction_id: int, device: str, label: Any, source: Any,
                         ts: float | None = None) -> None:
        """The label device `device`'s switch gave interaction `interaction_id` (None: none)."""
        label, source = _enum_value(label), _enum_value(source)
        if (label is None) != (source is None):
            raise ValueError("label and label_source must be given together")
        values = {"label": label, "label_source": source,
                  "label_ts": None if label is None else (self._clock() if ts is None else ts)}
        self.update_device_outcomes(interaction_id, {device: values})

    def device_outcomes(self, ids: Iterable[int] | None = None) -> dict[int, dict[str, DeviceOutcome]]:
        """``{interaction id: {device: outcome}}`` of `ids` (None: all), devices in the order
        they were written (the configuration's)."""
        where, params = "", []
        if ids is not None:
            params = [int(i) for i in ids]
            if not params:
                return {}
            where = f"WHERE interaction_id IN ({_marks(params)})"
        out: dict[int, dict[str, DeviceOutcome]] = {}
        with self._lock:
            cur = self.db.execute(f"SELECT * FROM interaction_devices {where} ORDER BY interaction_id, rowid",
                                  params)
            names = [c[0] for c in cur.description]
            for values in cur.fetchall():
                o = _outcome(dict(zip(names, values)))
                out.setdefault(o.interaction_id, {})[o.device] = o
        return out

    def device_labels(self, ids: Iterable[int]) -> dict[int, dict[str, str]]:
        """``{interaction id: {device: label}}``: the devices of `ids` that have a label."""
        return {i: {d: o.label for d, o in devs.items() if o.label is not None}
                for i, devs in self.device_outcomes(ids).items()}

    def device_stats(self) -> dict[str, dict[str, Any]]:
        """Per device: interactions, decisions, actions and labels by value, and its wrong
        actions (acted, and its own label says otherwise) (``edge-plm stats``)."""
        out: dict[str, dict[str, Any]] = {}
        with self._lock:
            for column in ("decision", "action", "label"):
                for device, value, n in self.db.execute(
                        f"SELECT device, {column}, count(*) FROM interaction_devices "
                        f"GROUP BY device, {column} ORDER BY min(rowid)"):
                    d = out.setdefault(device, {"interactions": 0, "decision": {}, "action": {}, "label": {}})
                    if column == "decision":
                        d["interactions"] += int(n)
                    if value is not None:
                        d[column][value] = int(n)
            for device, acted, judged, wrong in self.db.execute(
                    "SELECT device, count(action), count(CASE WHEN action IS NOT NULL THEN label END), "
                    "coalesce(sum(action IS NOT NULL AND label IS NOT NULL AND label != action), 0) "
                    "FROM interaction_devices GROUP BY device"):
                out[device]["wrong_actions"] = {"acted": int(acted), "acted_labelled": int(judged),
                                                "wrong": int(wrong)}
        return out


__all__ = ["DeviceOutcome", "DeviceRows"]
