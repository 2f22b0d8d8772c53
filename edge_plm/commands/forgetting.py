"""`edge-plm forget`: which interactions go, the rows and their audio deleted, and what the model
learned from them taken back in the same transaction (the active version without them, or a
model re-learned from what remains), every other kept checkpoint rewritten without them. The
learner's part is `Learner.forget_interactions` (`learning/sync.py`, `learning/forgetting.py`);
the model's, `switch/scrub.py`. What it did is a `Forgotten` (``to_dict``: the ``--json``
document, docs/contracts.md)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge_plm.commands.opening import UserError
from edge_plm.learning import forgetting
from edge_plm.loop.house import open_learner
from edge_plm.store import ReplayStore


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


def delete_rows(store: ReplayStore, ids: list[int],
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


@dataclass(frozen=True)
class Forgotten:
    """What `forget` did (``to_dict``: its ``--json`` document, docs/contracts.md)."""

    deleted: int = 0  # interactions deleted
    ids: list[int] = field(default_factory=list)
    audio_removed: int = 0
    audio_missing: int = 0  # audio files already gone
    labelled: int = 0  # of the deleted, those with a label
    learned_by_models: int = 0  # ... that a model could have learned
    rebuilt: str | None = None  # with --rebuild: the version re-learned from what remains
    # the active model's part: {"forgotten", "not_in_model", "version"} (None: no active
    # model, --rebuild, or nothing selected)
    model: dict[str, Any] | None = None
    other_copies: list[str] = field(default_factory=list)  # SQLite files next to the database
    # the other kept checkpoints: {"rewritten", "removed", "clean"} (None: nothing selected)
    checkpoints: dict[str, list[str]] | None = None

    def to_dict(self) -> dict[str, Any]:
        rows = {"deleted": self.deleted, "ids": self.ids, "audio_removed": self.audio_removed,
                "audio_missing": self.audio_missing, "labelled": self.labelled,
                "learned_by_models": self.learned_by_models, "rebuilt": self.rebuilt}
        if not self.ids:  # nothing selected: no model part to speak of
            return rows | {"checkpoints": self.checkpoints, "other_copies": self.other_copies}
        return rows | {"model": self.model, "other_copies": self.other_copies,
                       "checkpoints": self.checkpoints}


def audio_count(store, ids: list[int]) -> int:
    """How many of these interactions have an audio file."""
    return len(store.audio_paths(ids))


def forget(store, settings, db_path: Path, ids: list[int], *, rebuild: bool = False
           ) -> Forgotten:
    """Delete the interactions `ids` and their audio files. The active model takes back what
    it learned from them (a new active version without them); with `rebuild` a model is
    re-learned from what remains instead. Every other kept checkpoint is rewritten without
    them (``"checkpoints"``: rewritten / removed / clean versions); ``"other_copies"``: SQLite
    files next to the database (backups) that forget does not change."""
    copies = [str(p) for p in forgetting.other_copies(db_path)]
    if not ids:
        return Forgotten(other_copies=copies)
    # no model yet: rows only (the first model is made from what remains); the files of
    # any other versions are still owed their rewrite, journalled with the delete
    delete = lambda ids: store.delete_interactions(  # noqa: E731
        ids, owe=lambda: forgetting.owed_versions(store), tombstone=forgetting.tombstone_form)
    modelled = False
    if rebuild or store.active_model_version() is not None:
        # the model as it must be (the active version plus what it lacks), then rows and
        # the model's part in one transaction (Learner.forget_interactions)
        learner = open_learner(settings, store, load=not rebuild)
        delete = lambda ids: learner.forget_interactions(ids, rebuild=rebuild)  # noqa: E731
        modelled = True
    result = delete_rows(store, ids, delete=delete)
    out = result.pop("outcome")
    if not modelled:  # no active version: the files of any other versions (owed)
        files = forgetting.complete_owed(store) or {"rewritten": [], "removed": [], "clean": []}
    else:
        files = out.files
    model = None
    if modelled and not rebuild:
        model = {"forgotten": len(out.forgotten), "not_in_model": len(out.not_in_model),
                 "version": out.version}
    return Forgotten(**result, rebuilt=out.version if rebuild else None, model=model,
                     other_copies=copies, checkpoints=files)


__all__ = ["Forgotten", "audio_count", "delete_rows", "forget", "select_for_forget"]
