"""`edge-plm status`, `model list` and `model show`: the versions' records, the checkpoint files'
trust, and the counts of the replay buffer. `status` is a `Status` (its sections as plain dicts,
``to_dict``: what ``--json`` prints, docs/contracts.md); the version records are plain dicts."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_plm.commands.opening import UserError, db_bytes
from edge_plm.commands.times import iso
from edge_plm.store import LABEL_SOURCES, LABELS, ModelVersion, ReplayStore

def counts(store: ReplayStore, column: str, keys: Iterable[str]) -> dict[str, int]:
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


def forget_owed(store: ReplayStore) -> dict[str, Any]:
    """What a stopped `forget` still owes: the versions whose kept checkpoint must still be
    rewritten (``versions``) and the forgotten interactions they hold (``interactions``)."""
    owed = store.owed_rewrites()
    return {"versions": sorted(owed), "interactions": len(set().union(*owed.values()))
            if owed else 0}


def trust_status(active: dict[str, Any] | None, versions: list[ModelVersion]) -> dict[str, Any]:
    """The checkpoint lines of `status`: the active version's file (state, problem) and the
    versions found damaged at a start (their file did not load or match its record; the
    service fell back to an earlier one)."""
    state, problem = (checkpoint_state(active["checkpoint"], active) if active
                      else (None, None))
    damaged = [{"version": v.version, "problem": (v.metrics or {})["damaged"]}
               for v in versions if (v.metrics or {}).get("damaged")]
    return {"active_checkpoint": state, "active_problem": problem, "damaged": damaged}


@dataclass(frozen=True)
class Status:
    """What `edge-plm status` shows, section by section (``to_dict``: its ``--json`` document,
    docs/contracts.md; the sections' keys are listed there)."""

    database: dict[str, Any]  # path, bytes, schema_version
    model: dict[str, Any]  # the active version's record (None: none), counts, checkpoints' trust
    holdout: dict[str, Any]  # labelled_rows, balanced_accuracy, scored_on
    interactions: dict[str, int]  # total, labelled, unlabelled, errors
    labels: dict[str, int]  # by label
    label_sources: dict[str, int]  # by source
    last_interaction: dict[str, Any] | None  # the newest row (None: none yet)
    asr: dict[str, Any]  # configured, last_used, lm
    gpio: dict[str, Any]  # pin_factory
    config: str | None  # the config file read
    devices: list[dict[str, Any]]  # the configured devices (`device_inspection.status_devices`)
    timers: list[dict[str, Any]]  # pending timed commands (`commands.timers.timer_records`)
    kinds: dict[str, Any]  # dimmers and questions: calls done and kind labels (`kind_counts`)
    bridge: dict[str, Any] | None = None  # [mqtt] on: the bridge's last report (else no key)

    def to_dict(self) -> dict[str, Any]:
        out = {"database": self.database, "model": self.model, "holdout": self.holdout,
               "interactions": self.interactions, "labels": self.labels,
               "label_sources": self.label_sources, "last_interaction": self.last_interaction,
               "asr": self.asr, "gpio": self.gpio, "config": self.config, "devices": self.devices,
               "timers": self.timers, "kinds": self.kinds}
        return out if self.bridge is None else out | {"bridge": self.bridge}


def status(store: ReplayStore, settings: Any = None) -> Status:
    """What `edge-plm status` shows."""
    from edge_plm.commands import device_inspection  # noqa: PLC0415
    from edge_plm.commands.kinds import kind_counts  # noqa: PLC0415
    from edge_plm.commands.timers import timer_records  # noqa: PLC0415
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
                  # checkpoint rewrites a stopped `forget` still owes (done by the service)
                  "forget_owed": forget_owed(store),
                  **trust_status(model, versions)},
        "holdout": {"labelled_rows": holdout,
                    "balanced_accuracy": model["balanced_accuracy"] if model else None,
                    "scored_on": model["holdout_n"] if model else None},
        "interactions": {"total": n, "labelled": labelled, "unlabelled": n - labelled,
                         "errors": errors},
        "labels": counts(store, "label", LABELS),
        "label_sources": {k: v for k, v in counts(store, "label_source", LABEL_SOURCES).items()
                          if k != "none"},
        "last_interaction": None,
        "asr": {"configured": getattr(getattr(settings, "asr", None), "backend", None),
                "last_used": last_backend,
                # the ear's language model (asr.lm: household | shipped | general; pocketsphinx)
                "lm": getattr(getattr(settings, "asr", None), "lm", None)},
        "gpio": {"pin_factory": getattr(getattr(settings, "gpio", None), "pin_factory", None)},
        "config": getattr(settings, "source", None),
        "devices": device_inspection.status_devices(store, settings),
        "timers": timer_records(store),  # pending timed commands (docs/contracts.md)
        "kinds": kind_counts(store),  # dimmers and questions (docs/contracts.md)
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
    return Status(**out)


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


__all__ = ["Status", "checkpoint_state", "counts", "false_rollback", "find_version", "model_detail", "model_record",
           "status", "trust_status", "versions_in_order"]
