"""Interactions as `edge-plm log` and `export` show them: one row's record, the filtered lists,
and the JSONL and CSV exports (docs/contracts.md)."""

from __future__ import annotations

import csv
import dataclasses
import json
from collections.abc import Iterable
from typing import IO, Any

from edge_plm.commands.opening import UserError
from edge_plm.commands.times import iso
from edge_plm.store import LABELS, Interaction, ReplayStore

def record(row: Interaction) -> dict[str, Any]:
    """An interaction as JSON: the database columns plus ``time`` (ISO, local)."""
    d = dataclasses.asdict(row)
    d["time"] = iso(row.ts)
    return d


def _label_filter(label: str | None) -> dict[str, Any]:
    """`ReplayStore.interactions` filters for ``--label`` (a label, or ``none``)."""
    if label is None:
        return {}
    if label.lower() == "none":
        return {"labeled": False}
    if label.upper() not in LABELS:
        raise UserError(f"--label must be one of {', '.join(LABELS)} or none, got {label!r}")
    return {"label": label.upper()}


def log_rows(store: ReplayStore, limit: int | None = 20, label: str | None = None,
             since: float | None = None) -> list[Interaction]:
    """The `limit` most recent interactions (filters: label or ``none``, since), oldest first.

    Recent by id (the order they happened in), not by timestamp: an SBC's clock may step
    back (no RTC, NTP), ids only grow.
    """
    rows = store.interactions(limit=int(limit) if limit and limit > 0 else None, since=since,
                              **_label_filter(label))
    return list(reversed(rows))


def all_rows(store: ReplayStore, since: float | None = None) -> list[Interaction]:
    """Every interaction (since a time), in the order they happened (by id)."""
    return store.interactions(since=since, oldest_first=True)


def rows_after(store: ReplayStore, last_id: int, label: str | None = None) -> list[Interaction]:
    """Interactions with an id above `last_id`, in id order (new rows for ``log --follow``).

    By id, not time: ids only grow, while an SBC's clock may step back (no RTC, NTP).
    """
    return store.interactions(after_id=last_id, oldest_first=True, **_label_filter(label))


def labels_of(store: ReplayStore, ids: Iterable[int]) -> dict[int, tuple[str, str]]:
    """(label, source) of those of `ids` that are labelled now."""
    return store.labels_of(ids)


def max_id(store: ReplayStore) -> int:
    return store.last_interaction_id()


CSV_COLUMNS = ("id", "time", "ts", "transcript", "label", "label_source", "label_ts",
               "prediction", "confidence", "decision", "action", "model_version", "holdout",
               "asr_backend", "asr_confidence", "latency_audio_ms", "latency_asr_ms",
               "latency_model_ms", "latency_actuator_ms", "latency_total_ms", "error",
               "audio_path", "distribution")


def export_jsonl(rows: Iterable[Interaction], out: IO[str],
                 include_unlabelled: bool = True, devices: dict | None = None) -> tuple[int, int]:
    """Lines `edge-plm replay` accepts (``text``, ``label``: null where the device never
    learned one) plus what happened; returns (written, skipped unlabelled). Without
    `include_unlabelled` (``export --labelled``) only labelled rows are written. The audio file
    is ``audio_path``, not ``audio``: a replay of the export plays the transcripts.
    `devices` (several devices: `device_inspection.outcomes_of`): a row that has per-device
    outcomes also gets ``devices`` and, for an ON / OFF label, ``device``."""
    from edge_plm.commands import device_inspection  # noqa: PLC0415

    devices = devices or {}
    written = skipped = 0
    for r in rows:
        if r.label is None and not include_unlabelled:
            skipped += 1
            continue
        line = {"text": r.transcript, "label": r.label, "id": r.id, "time": iso(r.ts),
                "label_source": r.label_source, "prediction": r.prediction,
                "confidence": r.confidence, "decision": r.decision, "action": r.action,
                "model_version": r.model_version, "holdout": r.holdout,
                "asr_backend": r.asr_backend}
        if r.audio_path:
            line["audio_path"] = r.audio_path
        if r.error:
            line["error"] = r.error
        if r.id in devices:
            target = device_inspection.export_device(r.label, devices[r.id])
            if target is not None:
                line["device"] = target
            line["devices"] = device_inspection.device_record(devices[r.id])
        out.write(json.dumps(line, ensure_ascii=False) + "\n")
        written += 1
    return written, skipped


def export_csv(rows: Iterable[Interaction], out: IO[str],
               include_unlabelled: bool = True) -> tuple[int, int]:
    """Every interaction, one CSV row each (``holdout`` 0/1, ``distribution`` as JSON); returns
    (written, skipped unlabelled). Without `include_unlabelled` (``export --labelled``) only
    labelled rows are written."""
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    n = skipped = 0
    for r in rows:
        if r.label is None and not include_unlabelled:
            skipped += 1
            continue
        d = dataclasses.asdict(r)
        d["time"] = iso(r.ts)
        d["holdout"] = int(r.holdout)
        d["distribution"] = (json.dumps(r.distribution, sort_keys=True)
                             if r.distribution is not None else None)
        writer.writerow({k: d.get(k) for k in CSV_COLUMNS})
        n += 1
    return n, skipped


__all__ = ["CSV_COLUMNS", "all_rows", "export_csv", "export_jsonl", "labels_of", "log_rows", "max_id", "record", "rows_after"]
