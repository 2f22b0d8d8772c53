"""What the data commands of the CLI compute, as plain dicts (what ``--json`` prints).

`status`, `log`, `stats`, `label`, `forget`, `export`, `model ...` and `db backup` ask the
store for the data and shape it here, so it can be tested without a terminal. Readers open the
database read-only (`open_store`); in WAL mode they never block the service, which keeps
writing meanwhile.

(Named ``inspection``, not ``inspect``: a module shadowing the standard library's ``inspect``
breaks ``dataclasses`` as soon as this directory lands on ``sys.path``.)
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import re
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any

from edge_plm.files import atomic_path
from edge_plm.errors import EdgePlmError
from edge_plm.store import (BUSY_TIMEOUT_MS, LABEL_SOURCES, LABELS, Interaction, ModelVersion,
                            ReplayStore, SchemaError, StoreError, copy_checkpoints, copy_database,
                            passes_quick_check, private_dir, read_only_fs)

SERVICE_DB = Path("/var/lib/edge-plm/edge-plm.db")
LATENCY_PARTS = ("audio", "asr", "model", "actuator", "total")
PERCENTILES = (50, 90, 95, 99)


class UserError(EdgePlmError, RuntimeError):
    """A problem the person can fix (missing database, bad argument, unknown id...)."""


# --- opening ------------------------------------------------------------------------------
def open_store(path: str | Path, write: bool = False,
               busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> ReplayStore:
    """The replay buffer at `path`: read-only unless `write`; never creates a database.

    Raises `UserError` (missing, unreadable) or `StoreError`/`SchemaError` (not an edge-plm
    database, newer schema) with a message meant for the person.
    """
    path = Path(path)
    if not path.exists():
        hint = ""
        if path != SERVICE_DB and SERVICE_DB.exists():
            hint = f"; the service's database is {SERVICE_DB} (use --db {SERVICE_DB})"
        raise UserError(f"no database at {path}: nothing recorded yet (has the service or a "
                        f"replay run?), or give its path with --db{hint}")
    if path.is_dir():
        raise UserError(f"{path} is a directory, not a database file")
    if write and read_only_fs(path):
        raise UserError(f"{path} is on a read-only file system: it cannot be changed here")
    if not os.access(path, os.R_OK | (os.W_OK if write else 0)):
        owner = _owner(path)
        raise UserError(f"permission denied: {path} (mode {path.stat().st_mode & 0o777:o}, "
                        f"owner {owner}); run the command as that user, e.g. "
                        f"`sudo -u {owner} edge-plm ...`")
    return ReplayStore(path, busy_timeout_ms=busy_timeout_ms, read_only=not write)


def _owner(path: Path) -> str:
    try:
        import pwd  # noqa: PLC0415 - POSIX only

        return pwd.getpwuid(path.stat().st_uid).pw_name
    except (ImportError, KeyError):
        return str(path.stat().st_uid)


def db_bytes(path: str | Path) -> int:
    """Size on disk of the database with its -wal and -shm files."""
    total = 0
    for suffix in ("", "-wal", "-shm"):
        p = Path(f"{path}{suffix}")
        if p.exists():
            total += p.stat().st_size
    return total


# --- time -----------------------------------------------------------------------------------
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


# --- rows -----------------------------------------------------------------------------------
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


# --- status ---------------------------------------------------------------------------------
def _counts(store: ReplayStore, column: str, keys: Iterable[str]) -> dict[str, int]:
    got = store.counts_by(column)
    out = {k: int(got.get(k, 0)) for k in keys}
    if None in got:
        out["none"] = int(got[None])
    return out


def versions_in_order(store: ReplayStore) -> list[ModelVersion]:
    """All model versions in the order they were made (insertion order, not ``created_ts``:
    a clock that steps back would misplace them)."""
    return store.model_versions()


def model_record(v: ModelVersion) -> dict[str, Any]:
    """A model version as JSON: its row, ``created`` (ISO) and the main metrics lifted out.
    ``pruned``: its checkpoint was deleted by the retention policy (docs/loop.md), or by
    `forget` (``forget_removed`` says why)."""
    m = v.metrics or {}
    return {"version": v.version, "parent": v.parent, "status": v.status,
            "created_ts": v.created_ts, "created": iso(v.created_ts), "n_train": v.n_train,
            "balanced_accuracy": m.get("balanced_accuracy"), "holdout_n": m.get("holdout_n"),
            "gate": m.get("gate"), "checkpoint": v.path,
            "checkpoint_exists": bool(v.path) and Path(v.path).is_file(),
            "pruned": bool(m.get("pruned")), "metrics": m, "sha256": v.sha256,
            "config": v.config, "n_examples": v.n_examples, "damaged": m.get("damaged"),
            "forget_removed": m.get("forget_removed")}


def false_rollback(v: ModelVersion) -> bool:
    """A rollback for a difference within the holdout's noise: the deficit is at most two
    binomial standard errors of a balanced accuracy on its holdout rows (per class p(1-p)/n,
    p add-one smoothed), or it is one holdout row of its smallest class or less. Decided from
    the stored metrics, so it applies to versions made by any edge-plm."""
    m = v.metrics or {}
    if v.status != "rolled_back" or m.get("gate") != "rolled back":
        return False
    if "noise" in m and "within_noise" in m["noise"]:
        return bool(m["noise"]["within_noise"])
    ba, parent = m.get("balanced_accuracy"), m.get("parent_balanced_accuracy")
    per_class = {k: n for k, n in (m.get("holdout_classes") or {}).items() if n}
    if ba is None or parent is None or not per_class:
        return False
    diff = parent - ba
    p = {k: ((ba + parent) / 2 * n + 1) / (n + 2) for k, n in per_class.items()}
    se = sum(p[k] * (1 - p[k]) / n for k, n in per_class.items()) ** 0.5 / len(per_class)
    one_row = 1.0 / (len(per_class) * min(per_class.values()))
    return diff <= 2 * se or diff <= one_row + 1e-12


def _label_origins(v: ModelVersion) -> dict[str, int | None]:
    """The examples the checkpoint of `v` holds, apart: the starting model's
    (``starting_examples``, frozen) and the ones learned on this device (``owner_labels``);
    None both when the file cannot be read."""
    from edge_plm.plm.checkpoint import CheckpointError  # noqa: PLC0415
    from edge_plm.switch.model_file import read_held  # noqa: PLC0415

    try:
        held = read_held(v.path) if v.path else None
    except CheckpointError:
        held = None
    if held is None:
        return {"owner_labels": None, "starting_examples": None}
    start = int((held.meta.get("counters") or {}).get("prior_examples", 0))
    live = len(held.examples) - len(held.removed)
    return {"owner_labels": live - start, "starting_examples": start}


def _unlearned(store: ReplayStore, settings: Any) -> int | None:
    from edge_plm.learning.state import unlearned_in_active  # noqa: PLC0415
    from edge_plm.config.settings import ModelConfig  # noqa: PLC0415

    model = getattr(settings, "model", None) or ModelConfig()
    return unlearned_in_active(store, model.holdout_fraction)


def checkpoint_state(path: str | None, record: dict[str, Any] | None = None
                     ) -> tuple[str | None, str | None]:
    """(state, problem) of a version's checkpoint file: None (no checkpoint), "ok",
    "missing" or "damaged" (it does not load: truncated, bad zip, failed checksum...; or,
    given its `record` (`model_record`), it is not the file that version wrote: another
    SHA-256, configuration or number of examples). The whole file is read and checked, as
    loading it would."""
    if not path:
        return None, None
    if not Path(path).is_file():
        return "missing", f"{path} does not exist"
    from edge_plm.learning import trust  # noqa: PLC0415
    from edge_plm.plm.checkpoint import CheckpointError, load  # noqa: PLC0415

    problem = trust.file_problem({**record, "path": path}) if record else None
    if problem:
        return "damaged", problem
    try:
        load(path)
    except CheckpointError as exc:
        return "damaged", str(exc)
    except (OSError, MemoryError) as exc:
        return "damaged", f"{path}: {exc}"
    return "ok", None


def trust_status(active: dict[str, Any] | None, versions: list[ModelVersion]) -> dict[str, Any]:
    """The checkpoint lines of `status`: the active version's file (state, problem) and the
    versions found damaged at a start (their file did not load or match its record; the
    service fell back to an earlier one)."""
    state, problem = (checkpoint_state(active["checkpoint"], active) if active
                      else (None, None))
    damaged = [{"version": v.version, "problem": (v.metrics or {})["damaged"]}
               for v in versions if (v.metrics or {}).get("damaged")]
    return {"active_checkpoint": state, "active_problem": problem, "damaged": damaged}


def status(store: ReplayStore, settings: Any = None) -> dict[str, Any]:
    """What `edge-plm status` shows."""
    from edge_plm.commands import device_inspection  # noqa: PLC0415
    n = store.count()
    labelled = store.count(labeled=True)
    errors = store.count(error=True)
    holdout = store.count(labeled=True, holdout=True)
    versions = versions_in_order(store)
    active = store.active_model_version()
    last = store.interactions(limit=1)
    last_backend = store.last_asr_backend()
    model = None
    if active is not None:
        model = {**model_record(active), **_label_origins(active)}
    out = {
        "database": {"path": str(store.path), "bytes": db_bytes(store.path),
                     "schema_version": store.stored_schema_version()},
        "model": {"active": model, "versions": len(versions),
                  "rolled_back": sum(v.status == "rolled_back" for v in versions),
                  # learnable labels of the database the active checkpoint lacks (docs/loop.md)
                  "unlearned_labels": _unlearned(store, settings),
                  "false_rollbacks": sum(false_rollback(v) for v in versions),
                  "pruned": sum(bool((v.metrics or {}).get("pruned")) for v in versions),
                  **trust_status(model, versions)},
        "holdout": {"labelled_rows": holdout,
                    "balanced_accuracy": model["balanced_accuracy"] if model else None,
                    "scored_on": model["holdout_n"] if model else None},
        "interactions": {"total": n, "labelled": labelled, "unlabelled": n - labelled,
                         "errors": errors},
        "labels": _counts(store, "label", LABELS),
        "label_sources": {k: v for k, v in _counts(store, "label_source", LABEL_SOURCES).items()
                          if k != "none"},
        "last_interaction": None,
        "asr": {"configured": getattr(getattr(settings, "asr", None), "backend", None),
                "last_used": last_backend},
        "gpio": {"pin_factory": getattr(getattr(settings, "gpio", None), "pin_factory", None)},
        "config": getattr(settings, "source", None),
        "devices": device_inspection.status_devices(store, settings),
    }
    out["labels"].pop("none", None)
    if last:
        r = last[0]
        out["last_interaction"] = {
            "id": r.id, "time": iso(r.ts), "ts": r.ts, "transcript": r.transcript,
            "prediction": r.prediction, "confidence": r.confidence, "decision": r.decision,
            "action": r.action, "label": r.label, "label_source": r.label_source,
            "error": r.error}
    if getattr(getattr(settings, "mqtt", None), "enabled", False):  # [mqtt] on: its last report
        from edge_plm.bridge.status import bridge_status  # noqa: PLC0415 - no paho

        out["bridge"] = bridge_status(settings, store.path)
    return out


# --- stats ----------------------------------------------------------------------------------
def _percentiles(values: list[float]) -> dict[str, float | int | None]:
    import numpy as np  # noqa: PLC0415

    out: dict[str, float | int | None] = {"n": len(values)}
    for p in PERCENTILES:
        out[f"p{p}"] = float(np.percentile(values, p)) if values else None
    out["max"] = float(max(values)) if values else None
    return out


def stats(store: ReplayStore, recent_wrong: int = 10) -> dict[str, Any]:
    """What `edge-plm stats` shows (and ``--json`` prints)."""
    rows = all_rows(store)
    n = len(rows)
    by_day: dict[str, Counter] = {}
    for r in rows:
        day = datetime.fromtimestamp(r.ts).date().isoformat()
        c = by_day.setdefault(day, Counter())
        c["interactions"] += 1
        c[r.decision or "error"] += 1
    acted = [r for r in rows if r.action is not None]
    judged = [r for r in acted if r.label is not None]
    wrong = [r for r in judged if r.label != r.action]
    ok = [r for r in rows if r.error is None]
    latency = {part: _percentiles([v for r in ok if (v := getattr(r, f"latency_{part}_ms"))
                                   is not None]) for part in LATENCY_PARTS}
    return {
        "interactions": n,
        "classes": {
            "label": _counts(store, "label", LABELS),
            "prediction": _counts(store, "prediction", LABELS),
            "decision": _counts(store, "decision", ("act", "ask", "ignore")),
            "label_source": _counts(store, "label_source", LABEL_SOURCES),
        },
        "versions": [
            {k: v for k, v in model_record(m).items() if k not in ("metrics", "checkpoint",
                                                                   "checkpoint_exists")}
            for m in versions_in_order(store)],
        "per_day": [{"date": day, "interactions": c["interactions"], "asked": c["ask"],
                     "acted": c["act"], "ignored": c["ignore"], "errors": c["error"]}
                    for day, c in sorted(by_day.items())],
        "wrong_actions": {
            "acted": len(acted), "acted_labelled": len(judged), "wrong": len(wrong),
            "rate": len(wrong) / len(judged) if judged else None,
            "recent": [{"id": r.id, "time": iso(r.ts), "transcript": r.transcript,
                        "action": r.action, "label": r.label, "label_source": r.label_source}
                       for r in wrong[-recent_wrong:]],
        },
        "latency_ms": latency,
        **({"devices": per_device} if (per_device := store.device_stats()) else {}),
    }


def learning_curve(store: ReplayStore, window: int = 10) -> dict[str, Any]:
    """Per interaction (in order) and per model version: the data of ``stats --plot``.

    For each interaction: whether the device asked, acted right (label == action), acted
    wrong, ignored it rightly (no ON/OFF label), or let a wish pass (ignored, then labelled
    ON/OFF by the person); rolling shares
    over `window` interactions, and ``agreement``: how often the prediction was the label,
    over the last `window` labelled interactions. Versions are placed at the number of interactions recorded
    before they started serving.
    """
    rows = all_rows(store)
    kinds = []
    for r in rows:
        if r.error is not None:
            kinds.append("error")
        elif r.decision == "ask":
            kinds.append("asked")
        elif r.decision == "act" and r.action is not None:
            kinds.append("acted_wrong" if r.label is not None and r.label != r.action
                         else "acted_right")
        elif r.label in ("ON", "OFF"):
            kinds.append("missed")
        else:
            kinds.append("ignored")
    series: dict[str, list[float]] = {}
    for kind in ("asked", "acted_right", "acted_wrong", "ignored", "missed"):
        flags = [k == kind for k in kinds]
        series[kind] = [sum(flags[max(0, i + 1 - window):i + 1]) / min(window, i + 1)
                        for i in range(len(flags))]
    # where each version starts: just before the first interaction it predicted; a version
    # that never served (rolled back, or superseded at once) sits after the last interaction
    # of its window, else by time (ids, not timestamps, give the order: clocks step back)
    first_served: dict[str, int] = {}
    position = {r.id: i for i, r in enumerate(rows)}
    for i, r in enumerate(rows):
        if r.model_version is not None:
            first_served.setdefault(r.model_version, i)
    versions = []
    for v in versions_in_order(store):
        span = (v.metrics or {}).get("interactions") or [None, None]
        if v.version in first_served:
            at = first_served[v.version]
        elif span[1] is not None and span[1] in position:
            at = position[span[1]] + 1
        else:
            at = sum(1 for r in rows if r.ts <= v.created_ts)
        versions.append({**{k: x for k, x in model_record(v).items()
                            if k in ("version", "status", "balanced_accuracy", "holdout_n",
                                     "gate")}, "at": at})
    return {"n": len(rows), "window": window, "kinds": kinds, "rolling": series,
            "agreement": _rolling_agreement(rows, window), "versions": versions}


def _rolling_agreement(rows: list, window: int) -> list[float | None]:
    """Per interaction: the share of the last `window` labelled interactions (up to it) whose
    prediction was their label; None before the first labelled one."""
    hits: list[bool] = []
    out: list[float | None] = []
    for r in rows:
        if r.label is not None and r.prediction is not None:
            hits.append(r.prediction == r.label)
        last = hits[-window:]
        out.append(sum(last) / len(last) if last else None)
    return out


# --- export ---------------------------------------------------------------------------------
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


# --- forget ---------------------------------------------------------------------------------
def select_for_forget(store: ReplayStore, ids: list[int], before: float | None,
                      everything: bool) -> list[int]:
    """The ids `forget` would delete (all of `ids` must exist)."""
    if sum(bool(x) for x in (ids, before is not None, everything)) != 1:
        raise UserError("say what to forget: interaction IDs, --before TIME or --all "
                        "(exactly one of them)")
    if everything or before is not None:
        return store.ids_in_order(before=before)
    wanted = sorted(set(ids))
    found = store.interaction_ids(among=wanted)
    missing = [i for i in wanted if i not in found]
    if missing:
        raise UserError(f"no interaction with id {', '.join(map(str, missing))}")
    return wanted


def forget(store: ReplayStore, ids: list[int],
           delete: Callable[[list[int]], Any] | None = None) -> dict[str, Any]:
    """Delete rows and their audio files; what was learned from them is reported.
    ``delete(ids)`` does the deleting (default `ReplayStore.delete_interactions`; the CLI
    passes `Learner.forget_interactions`, which takes the model's part in the same
    transaction); its result is returned under ``"outcome"``."""
    if not ids:
        return {"deleted": 0, "ids": [], "audio_removed": 0, "audio_missing": 0,
                "labelled": 0, "learned_by_models": 0}
    labelled, learnable = store.label_counts(ids)
    paths = store.audio_paths(ids)
    existed = {p for p in paths if os.path.exists(p)}
    outcome = (delete or (lambda i: store.delete_interactions(i, remove_audio=True)))(ids)
    removed = sum(1 for p in existed if not os.path.exists(p))
    return {"deleted": len(ids), "ids": ids, "audio_removed": removed,
            "audio_missing": len(paths) - len(existed), "labelled": labelled,
            "learned_by_models": learnable, "outcome": outcome}


# --- models ---------------------------------------------------------------------------------
def find_version(store: ReplayStore, version: str) -> ModelVersion:
    for v in versions_in_order(store):
        if v.version == version:
            return v
    known = ", ".join(v.version for v in versions_in_order(store)) or "none yet"
    raise UserError(f"no model version {version!r} (versions: {known})")


def model_detail(store: ReplayStore, version: str) -> dict[str, Any]:
    """`model show`: the version, its children, and how its predictions fared."""
    v = find_version(store, version)
    out = model_record(v)
    out["children"] = [c.version for c in versions_in_order(store) if c.parent == v.version]
    out["checkpoint_bytes"] = (Path(v.path).stat().st_size
                               if v.path and Path(v.path).is_file() else None)
    p = store.prediction_summary(version)
    out["predictions"] = {"interactions": p["interactions"], "labelled": p["labelled"],
                          "correct": p["correct"],
                          "accuracy": p["correct"] / p["labelled"] if p["labelled"] else None,
                          "first": iso(p["first_ts"]), "last": iso(p["last_ts"])}
    return out


def checkpoints_dir(store: ReplayStore, db_path: Path | None = None) -> Path:
    """Where new checkpoints go: the database's own folder (``<stem>.checkpoints`` beside
    it, `ReplayStore.checkpoints_home`), created 0700. Older versions' files stay where they
    are (read; rewritten only inside the database's directory)."""
    return private_dir(store.checkpoints_home())


# --- backup ---------------------------------------------------------------------------------
def backup(src: str | Path, dest: str | Path, overwrite: bool = False,
           busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> dict[str, Any]:
    """A consistent copy of the live database (SQLite's online backup API), verified.

    One snapshot while the service keeps writing (`store.copy_database`), written to a
    temporary file in the destination directory (0600), checked (``PRAGMA integrity_check``,
    schema version, row counts), given its own copy of every checkpoint file
    (``<dest stem>.checkpoints/`` beside it, `store.copy_checkpoints`: the copy never writes a
    file the original refers to), fsynced and renamed into place; the copy in place must then
    pass ``quick_check``. `UserError` for what the person can fix, `StoreError` when the copy
    fails its integrity check.
    """
    src = Path(src)
    dest = _backup_destination(src, Path(dest), overwrite)
    started = time.perf_counter()
    try:
        with atomic_path(dest, prefix=f".{dest.name}.partial-{os.getpid()}-", suffix="") as tmp:
            verified = copy_database(src, tmp, busy_timeout_ms)
            files = copy_checkpoints(src, tmp, dest)  # the copy owns its files (independent)
    except sqlite3.DatabaseError as exc:
        raise UserError(f"backup of {src} failed: {exc}") from exc
    if not passes_quick_check(dest, busy_timeout_ms):  # the copy in place opens on its own
        raise UserError(f"{dest}: the copy does not pass quick_check")
    return {"source": str(src), "backup": str(dest), "bytes": dest.stat().st_size,
            "seconds": round(time.perf_counter() - started, 3), **verified,
            "checkpoints": str(dest.parent / f"{dest.stem}.checkpoints"),
            "checkpoints_copied": files["copied"], "checkpoints_missing": files["missing"]}


def _backup_destination(src: Path, dest: Path, overwrite: bool) -> Path:
    """The file a backup of `src` goes to (`dest`, or `src`'s name inside directory `dest`)."""
    if not src.exists():
        raise UserError(f"no database at {src}: nothing to back up (give its path with --db)")
    if dest.is_dir():
        dest = dest / src.name
    if dest.exists():
        if dest.resolve() == src.resolve():
            raise UserError(f"{dest} is the database itself")
        if not overwrite:
            raise UserError(f"{dest} exists; not overwritten (use --force)")
    if not dest.parent.is_dir():
        raise UserError(f"directory {dest.parent} does not exist")
    if (dest.parent.resolve() / dest.stem) == (src.parent.resolve() / src.stem):
        raise UserError(f"{dest} would share the checkpoint folder {src.stem}.checkpoints of "
                        f"{src}; give the copy another name")
    return dest


__all__ = ["UserError", "SchemaError", "StoreError", "all_rows", "backup", "checkpoints_dir",
           "db_bytes", "export_csv", "export_jsonl", "find_version", "forget", "iso",
           "labels_of", "learning_curve", "log_rows", "max_id", "model_detail", "model_record",
           "open_store", "parse_time", "record", "rows_after", "select_for_forget",
           "short_time", "stats", "status", "versions_in_order"]
