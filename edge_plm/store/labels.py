"""Labels and the labelled examples of ``interactions``: what the learner and the evaluation read."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

import sqlite_utils

from edge_plm.store.records import (LABEL_SOURCES, LABELS, _check, _enum_value,
                                    _interaction_filter, _marks)


class LabelRows:
    """The label queries of `ReplayStore` (a mixin over `StoreConnection`)."""

    db: sqlite_utils.Database
    _lock: threading.RLock
    _clock: Callable[[], float]
    _write: Callable[[Callable[[], Any]], Any]
    _update_row: Callable[..., None]
    update_interaction: Callable[..., None]

    def set_label(self, interaction_id: int, label: Any, source: Any,
                  ts: float | None = None) -> None:
        """Record the label of an interaction and how it was obtained."""
        label, source = _enum_value(label), _enum_value(source)
        _check("label", label, LABELS)
        _check("label_source", source, LABEL_SOURCES)
        if label is None or source is None:
            raise ValueError("set_label needs a label and a source")
        values = {"label": label, "label_source": source,
                  "label_ts": self._clock() if ts is None else ts}
        self._write(lambda: self._update_row("interactions", interaction_id, values,
                                             f"no interaction with id {interaction_id}"))

    def labels_of(self, ids: Iterable[int]) -> dict[int, tuple[str, str]]:
        """(label, label source) of those of `ids` that are labelled now."""
        ids = [int(i) for i in ids]
        if not ids:
            return {}
        with self._lock:
            return {r["id"]: (r["label"], r["label_source"])
                    for r in self.db["interactions"].rows_where(
                        f"id IN ({_marks(ids)}) AND label IS NOT NULL", ids,
                        select="id, label, label_source")}

    def label_counts(self, ids: Iterable[int]) -> tuple[int, int]:
        """Among the interactions `ids`: (labelled, labelled outside the holdout slice)."""
        ids = [int(i) for i in ids]
        if not ids:
            return 0, 0
        with self._lock:
            labelled, learnable = self.db.execute(
                "SELECT count(label), coalesce(sum(label IS NOT NULL AND holdout = 0), 0) "
                f"FROM interactions WHERE id IN ({_marks(ids)})", ids).fetchone()
        return int(labelled), int(learnable)

    def count_label_sources(self, ids: Iterable[int], sources: Iterable[str]) -> int:
        """How many of the interactions `ids` have a label from one of `sources`."""
        ids, sources = [int(i) for i in ids], list(sources)
        if not ids or not sources:
            return 0
        with self._lock:
            return int(self.db["interactions"].count_where(
                f"id IN ({_marks(ids)}) AND label_source IN ({_marks(sources)})",
                [*ids, *sources]))

    def holdout_rows(self) -> list[tuple[int, str, str]]:
        """(id, transcript, label) of the labelled holdout rows, in id order."""
        with self._lock:
            return [(int(r["id"]), r["transcript"], r["label"])
                    for r in self.db["interactions"].rows_where(
                        "label IS NOT NULL AND holdout = 1", select="id, transcript, label",
                        order_by="id")]

    def labelled_transcripts(self) -> list[tuple[int, str, str, str | None, bool]]:
        """(id, transcript, label, label source, holdout) of the labelled rows with a
        transcript and no error, in id order."""
        with self._lock:
            return [(int(r["id"]), r["transcript"], r["label"], r["label_source"],
                     bool(r["holdout"])) for r in self.db["interactions"].rows_where(
                "label IS NOT NULL AND error IS NULL AND trim(transcript) != ''",
                select="id, transcript, label, label_source, holdout", order_by="id")]

    def prediction_summary(self, version: str) -> dict[str, Any]:
        """What model `version` predicted: interactions, labelled ones, correct ones (label
        = prediction), and the first and last ``ts``."""
        with self._lock:
            n, labelled, correct, first, last = self.db.execute(
                "SELECT count(*), count(label), coalesce(sum(label = prediction), 0), "
                "min(ts), max(ts) FROM interactions WHERE model_version = ?",
                [version]).fetchone()
        return {"interactions": int(n), "labelled": int(labelled), "correct": int(correct),
                "first_ts": first, "last_ts": last}

    def labeled_examples(self, holdout: bool | None = None) -> list[tuple[str, str]]:
        """(transcript, label) of labeled interactions in time order; holdout filter if given."""
        where, params = _interaction_filter(labeled=True, holdout=holdout)
        with self._lock:
            return [(r["transcript"], r["label"]) for r in self.db["interactions"].rows_where(
                where, params, select="transcript, label", order_by="ts, id")]

    def set_holdout(self, interaction_id: int, holdout: bool) -> None:
        """Put an interaction into (or take it out of) the holdout slice."""
        self.update_interaction(interaction_id, holdout=holdout)
