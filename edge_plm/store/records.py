"""The rows of the replay buffer as records, and the checks and conversions of their values."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from typing import Any

from edge_plm import actions

LABELS = actions.ACTIONS
LABEL_SOURCES = ("asked", "override", "confirmed", "manual", "spoken", "remote")
DECISIONS = ("act", "ask", "ignore")
ACTIONS = actions.DRIVING  # what the device can do to the relay
MODEL_STATUSES = ("candidate", "active", "rolled_back", "retired")


@dataclass(frozen=True)
class Interaction:
    """One row of `interactions`."""

    id: int
    ts: float
    transcript: str
    asr_backend: str | None
    asr_confidence: float | None
    audio_path: str | None
    prediction: str | None
    confidence: float | None
    distribution: dict[str, float] | None
    decision: str | None
    action: str | None
    label: str | None
    label_source: str | None
    label_ts: float | None
    model_version: str | None
    holdout: bool
    latency_audio_ms: float | None
    latency_asr_ms: float | None
    latency_model_ms: float | None
    latency_actuator_ms: float | None
    latency_total_ms: float | None
    error: str | None


@dataclass(frozen=True)
class ModelVersion:
    """One row of `model_versions`."""

    version: str
    parent: str | None
    created_ts: float
    path: str | None
    status: str
    metrics: dict[str, Any] | None
    n_train: int
    sha256: str | None = None  # of the checkpoint file as written (None: not recorded)
    config: str | None = None  # the model configuration's name
    n_examples: int | None = None  # examples the checkpoint holds


INTERACTION_FIELDS = tuple(f.name for f in fields(Interaction))
_WRITABLE = tuple(f for f in INTERACTION_FIELDS if f != "id")
_TEXT_FIELDS = ("transcript", "asr_backend", "audio_path", "model_version", "error")


def clean_text(value: str | bytes | None) -> str | None:
    """Text safe to store: bytes decoded as UTF-8 with replacement, lone surrogates replaced."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    if not isinstance(value, str):
        raise TypeError(f"expected text, got {type(value).__name__}")
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:  # surrogates, e.g. from os.fsdecode of a non-UTF-8 name
        raw = value.encode("utf-8", errors="surrogateescape" if _escape_only(value)
                           else "surrogatepass")
        return raw.decode("utf-8", errors="replace")


def _escape_only(value: str) -> bool:
    return all(not 0xD800 <= ord(c) <= 0xDFFF or 0xDC80 <= ord(c) <= 0xDCFF for c in value)


def _check(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value is not None and value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)} (or None), got {value!r}")


def _check_prob(name: str, value: Any) -> None:
    if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value)
                                  and 0.0 <= value <= 1.0):
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")


def check_outcome(row: dict[str, Any]) -> None:
    """The outcome fields of an interaction row or of a device's row: each in its allowed values
    (or None), the confidence in [0, 1]; ValueError naming the field otherwise."""
    _check("prediction", row.get("prediction"), LABELS)
    _check("decision", row.get("decision"), DECISIONS)
    _check("action", row.get("action"), ACTIONS)
    _check("label", row.get("label"), LABELS)
    _check("label_source", row.get("label_source"), LABEL_SOURCES)
    _check_prob("confidence", row.get("confidence"))


def _enum_value(value: Any) -> Any:
    """Accept str-Enums (e.g. policy.Action) as their value."""
    return getattr(value, "value", value)


#: Columns `ReplayStore.counts_by` may group by.
_GROUPABLE = ("label", "label_source", "prediction", "decision", "action", "asr_backend",
              "model_version")


def _marks(values: list[Any]) -> str:
    """``?, ?, ...``: one parameter mark per value."""
    return ", ".join("?" for _ in values)


def _interaction_filter(labeled: bool | None = None, since: float | None = None,
                        label: Any = None, after_id: int | None = None,
                        holdout: bool | None = None, error: bool | None = None,
                        before: float | None = None) -> tuple[str | None, list[Any]]:
    """A WHERE fragment over ``interactions`` and its parameters (None: no condition)."""
    where: list[str] = []
    params: list[Any] = []
    if labeled is not None:
        where.append("label IS NOT NULL" if labeled else "label IS NULL")
    if since is not None:
        where.append("ts >= ?")
        params.append(since)
    if before is not None:
        where.append("ts < ?")
        params.append(before)
    if label is not None:
        label = _enum_value(label)
        _check("label", label, LABELS)
        where.append("label = ?")
        params.append(label)
    if after_id is not None:
        where.append("id > ?")
        params.append(int(after_id))
    if holdout is not None:
        where.append("holdout = ?")
        params.append(int(bool(holdout)))
    if error is not None:
        where.append("error IS NOT NULL" if error else "error IS NULL")
    return (" AND ".join(where) or None), params



def row_to_interaction(row: dict[str, Any]) -> Interaction:
    """An `Interaction` from a raw ``interactions`` row (a dict of column values)."""
    row = dict(row)
    row["holdout"] = bool(row["holdout"])
    if row.get("distribution") is not None:
        row["distribution"] = json.loads(row["distribution"])
    return Interaction(**{name: row.get(name) for name in INTERACTION_FIELDS})


def _model(row: dict[str, Any]) -> ModelVersion:
    row = dict(row)
    if row.get("metrics") is not None:
        row["metrics"] = json.loads(row["metrics"])
    return ModelVersion(**{f.name: row.get(f.name) for f in fields(ModelVersion)})
