"""The learning state around the database: which labels the live model must hold, what it
lacks, and a checkpoints directory kept bounded and clean (lock, debris, retention).

The invariant (every learnable label of the database is in the live model) and its rules:
docs/loop.md "Nothing lost, nothing unbounded".
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_plm.store import ModelVersion, ReplayStore

log = logging.getLogger(__name__)

GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
CORRECTION_SOURCES = ("override", "manual")
LOCK_NAME = ".lock"


def hash_holdout(interaction_id: int, fraction: float) -> bool:
    """The holdout hash (same rule as `learner.is_holdout_id`)."""
    if fraction <= 0.0:
        return False
    return (interaction_id * GOLDEN) % 1.0 < fraction


@dataclass(frozen=True)
class LabelRow:
    id: int
    transcript: str
    label: str
    source: str | None
    holdout: bool


def labelled_rows(store: ReplayStore) -> list[LabelRow]:
    """Labelled rows with a transcript and no error, in interaction order."""
    return [LabelRow(*r) for r in store.labelled_transcripts()]


def should_learn(row: LabelRow, fraction: float, held: bool) -> bool:
    """Whether `row` belongs in the model (is *learnable*): not in the holdout slice, and for
    a row the model never saw, not claimed by the holdout hash unless it is a correction
    (sources `override`/`manual`). `held`: the model already holds it (then only the stored
    holdout flag counts; the hash was applied when it was learned). `labelled_rows` already
    leaves out rows without a transcript or with an error."""
    if row.holdout:
        return False
    if held or row.source in CORRECTION_SOURCES:
        return True
    return not hash_holdout(row.id, fraction)


def model_labels(model: Any, keys: dict[int, int]) -> dict[int, str]:
    """interaction id -> label the model holds for it (forgotten examples left out)."""
    from edge_plm.switch.tokenizer import ACTIONS  # noqa: PLC0415

    live = set(model.live_keys())
    return {iid: ACTIONS[model.examples[k][1]] for iid, k in keys.items() if k in live}


@dataclass(frozen=True)
class Difference:
    """What a model lacks against the database."""

    missing: list[LabelRow]  # learnable, not in the model (interaction order)
    changed: list[LabelRow]  # in the model with another label
    extra: list[int]  # in the model, no longer learnable (deleted, holdout, label cleared)

    @property
    def count(self) -> int:
        return len(self.missing) + len(self.changed) + len(self.extra)


def match_examples(store: ReplayStore, model: Any, fraction: float) -> dict[int, int]:
    """interaction id -> key of a live example of `model` with the same transcript (as the model
    encodes it) and the same label, for the database's learnable labels; each example matches
    one row at most, both taken in order. A model trained elsewhere on this device's exported
    data (`model import`) holds these labels already: mapping them to their rows keeps them
    from being learned a second time and lets `forget` take them out again."""
    from edge_plm.switch.tokenizer import ACTIONS  # noqa: PLC0415

    free: dict[tuple[tuple[int, ...], int], list[int]] = {}
    frozen = model.prior_examples if model.start is not None else 0  # the starting model's
    for key in reversed(model.live_keys()):  # pop() then yields them in learning order
        if key < frozen:  # never a row of this device's: `forget` could not take it out
            continue
        seq, y = model.examples[key]
        free.setdefault((tuple(seq), y), []).append(key)
    keys = {}
    for row in labelled_rows(store):
        if not should_learn(row, fraction, False):
            continue
        slot = free.get((tuple(model.encode(row.transcript, grow=False)), ACTIONS.index(row.label)))
        if slot:
            keys[row.id] = slot.pop()
    return keys


def difference(store: ReplayStore, held: dict[int, str], fraction: float) -> Difference:
    """Compare the database with the labels a model holds (`model_labels`)."""
    missing, changed, learnable = [], [], set()
    for row in labelled_rows(store):
        if not should_learn(row, fraction, row.id in held):
            continue
        learnable.add(row.id)
        if row.id not in held:
            missing.append(row)
        elif held[row.id] != row.label:
            changed.append(row)
    extra = sorted(i for i in held if i not in learnable)
    return Difference(missing, changed, extra)


def unlearned_in_active(store: ReplayStore, fraction: float) -> int | None:
    """Learnable labels of the database that the active checkpoint does not hold, plus
    examples it holds that are no longer learnable (None: no active version or it cannot be
    read). With no version at all, every learnable label counts."""
    from edge_plm.learning import trust  # noqa: PLC0415
    from edge_plm.plm.checkpoint import CheckpointError  # noqa: PLC0415
    from edge_plm.switch.model_file import read_held  # noqa: PLC0415

    active = store.active_model_version()
    if active is None:
        return difference(store, {}, fraction).count
    if not active.path:
        return None
    try:
        trust.check_file(active)  # another file copied over it: what it holds is unknown
        model = read_held(active.path)  # its labels: the model is not built
        trust.check_model(active, model)
    except CheckpointError:
        return None
    keys = {int(i): int(k) for i, k in (model.meta.get("interaction_keys") or [])}
    return difference(store, model_labels(model, keys), fraction).count


# --- the checkpoint directory -------------------------------------------------------------
def ensure_dir(directory: Path) -> None:
    """The checkpoints directory, created 0700 (its files are 0600)."""
    if not directory.exists():
        directory.mkdir(parents=True, mode=0o700)
        directory.chmod(0o700)  # mkdir's mode is filtered by the umask


@contextlib.contextmanager
def checkpoint_lock(directory: Path, exclusive: bool = False,
                    blocking: bool = True) -> Iterator[bool]:
    """Advisory ``flock`` on ``<directory>/.lock``; yields whether it was taken. Writers of a
    checkpoint hold it shared from claiming the version row to activating it; `clean_debris`
    takes it exclusively without waiting, so it never removes a file another process is
    writing. A killed writer's lock goes with it."""
    ensure_dir(directory)
    fd = os.open(directory / LOCK_NAME, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        flags = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | (
            0 if blocking else fcntl.LOCK_NB)
        try:
            fcntl.flock(fd, flags)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def clean_debris(store: ReplayStore, directory: Path) -> dict[str, int]:
    """Remove half-written checkpoints (``*.tmp``), stale ``candidate`` rows (with their
    file, if the database owns it) and, in the database's own folder, checkpoint files no
    version refers to (a rewrite `forget` was killed before recording), when no other
    process is writing a checkpoint. Returns what was removed."""
    removed = {"tmp_files": 0, "candidates": 0, "unreferenced": 0}
    if not directory.exists():
        return removed
    with checkpoint_lock(directory, exclusive=True, blocking=False) as locked:
        if not locked:
            log.info("another process is writing a checkpoint; debris cleaning skipped")
            return removed
        for tmp in directory.glob("*.tmp"):
            try:
                tmp.unlink()
                removed["tmp_files"] += 1
            except FileNotFoundError:
                pass
        for v in store.model_versions():
            if v.status != "candidate":
                continue
            if v.path and store.owns_checkpoint(v.path):
                Path(v.path).unlink(missing_ok=True)
            store.delete_model_version(v.version)
            removed["candidates"] += 1
        if Path(os.path.abspath(directory)) == store.checkpoints_home():
            referenced = {os.path.abspath(v.path) for v in store.model_versions() if v.path}
            for f in directory.glob("*.npz"):
                if os.path.abspath(f) not in referenced:
                    f.unlink(missing_ok=True)
                    removed["unreferenced"] += 1
    if any(removed.values()):
        log.warning("removed debris of an interrupted checkpoint write: %d temp file(s), %d "
                    "candidate version row(s), %d unreferenced checkpoint file(s)",
                    removed["tmp_files"], removed["candidates"], removed["unreferenced"])
    return removed


def is_pruned(v: ModelVersion) -> bool:
    return bool((v.metrics or {}).get("pruned"))


def prune_checkpoints(store: ReplayStore, keep: int, max_bytes: float) -> list[str]:
    """Retention: the active version, its parent, the newest manual rollback target
    (``metrics.rollback_target``: when `edge-plm model rollback` chose it) and the newest `keep`
    saved versions keep their files; older files are deleted, then more (oldest first, never
    the protected ones) while the directory holds more than `max_bytes`. Pruned rows stay,
    with ``metrics.pruned = true``. Returns the versions pruned now."""
    versions = store.model_versions()
    saved = [v for v in versions if v.path and v.status in ("active", "retired")
             and not is_pruned(v)]
    active = next((v for v in versions if v.status == "active"), None)
    protected = {active.version, active.parent} if active else set()
    chosen = sorted((float(v.metrics["rollback_target"]), v.version) for v in saved
                    if (v.metrics or {}).get("rollback_target"))
    protected.update(version for _, version in chosen[-1:])
    newest = {v.version for v in saved[-keep:]}
    prune = [v for v in saved if v.version not in protected and v.version not in newest]
    kept = [v for v in saved if v not in prune]

    def size(v: ModelVersion) -> int:
        try:
            return Path(v.path).stat().st_size
        except OSError:
            return 0

    total = sum(size(v) for v in kept)
    for v in kept:  # oldest first
        if total <= max_bytes:
            break
        if v.version in protected:
            continue
        prune.append(v)
        total -= size(v)
    if prune:
        store.settle_copies()  # a copy still referring to these files gets its own first
    for v in prune:
        if store.owns_checkpoint(v.path):  # another database's file is never deleted
            Path(v.path).unlink(missing_ok=True)
        store.set_model_metrics(v.version, {**(v.metrics or {}), "pruned": True})
    if prune:
        log.info("checkpoints pruned (retention): %s", ", ".join(v.version for v in prune))
    return [v.version for v in prune]


__all__ = ["Difference", "LabelRow", "checkpoint_lock", "clean_debris", "difference",
           "ensure_dir", "is_pruned", "labelled_rows", "model_labels", "prune_checkpoints",
           "should_learn", "unlearned_in_active"]
