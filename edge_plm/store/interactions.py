"""Writing and reading the rows of ``interactions`` (labels: `labels.py`)."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac

import json
import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

import sqlite_utils

from edge_plm.store.base import NotFoundError
from edge_plm.store.records import (_GROUPABLE, _TEXT_FIELDS, _WRITABLE, LABEL_SOURCES, Interaction, _check_prob,
                                    _enum_value, _interaction_filter, _marks, clean_text,
                                    check_outcome, row_to_interaction)

log = logging.getLogger("edge_plm.store")


class InteractionRows:
    """The interaction queries of `ReplayStore` (a mixin over `StoreConnection`)."""

    db: sqlite_utils.Database
    _lock: threading.RLock
    _clock: Callable[[], float]
    _write: Callable[[Callable[[], Any]], Any]
    _update_row: Callable[..., None]
    _retire_active: Callable[..., None]
    _owe: Callable[..., None]

    def _normalise(self, values: dict[str, Any], partial: bool = False) -> dict[str, Any]:
        """Validate and convert `values` for SQLite.

        With `partial` (an update), only the given keys are returned: filling defaults for
        missing keys would overwrite stored values (an update that set ``holdout`` once reset
        the transcript to ''). Cross-field rules that need both fields (label + label_source)
        are then checked only when both are given.
        """
        unknown = set(values) - set(_WRITABLE)
        if unknown:
            raise ValueError(f"unknown interaction field(s): {', '.join(sorted(unknown))} "
                             f"(known: {', '.join(_WRITABLE)})")
        row = {k: _enum_value(v) for k, v in values.items()}
        for name in _TEXT_FIELDS:
            if name in row:
                row[name] = clean_text(row[name])
        if not partial and row.get("transcript") is None:
            row["transcript"] = ""
        elif partial and "transcript" in row and row["transcript"] is None:
            raise ValueError("transcript cannot be set to None (use '' for no transcript)")
        if row.get("audio_path"):  # relative to the database's directory when inside it
            row["audio_path"] = self.stored_path(row["audio_path"])
        check_outcome(row)
        _check_prob("asr_confidence", row.get("asr_confidence"))
        label_keys = {"label", "label_source"} & set(row)
        if partial and label_keys and label_keys != {"label", "label_source"}:
            raise ValueError("label and label_source must be given together (or use set_label)")
        if (row.get("label") is None) != (row.get("label_source") is None):
            raise ValueError("label and label_source must be given together")
        if "holdout" in row:
            row["holdout"] = int(bool(row["holdout"]))
        if row.get("distribution") is not None:
            row["distribution"] = json.dumps(row["distribution"], sort_keys=True)
        return row

    def add_interaction(self, **fields_: Any) -> int:
        """Insert one interaction (`ts` defaults to the clock); return its id."""
        row = self._normalise(fields_)
        row.setdefault("ts", self._clock())
        if row.get("label") is not None:
            row.setdefault("label_ts", row["ts"])
        cols = ", ".join(f"[{k}]" for k in row)
        marks = ", ".join("?" for _ in row)
        sql = f"INSERT INTO interactions ({cols}) VALUES ({marks})"
        return self._write(lambda: int(self.db.execute(sql, list(row.values())).lastrowid))

    def update_interaction(self, interaction_id: int, **fields_: Any) -> None:
        """Set the given fields of an existing interaction (e.g. latencies, error, action).

        Only the named columns change; every other column keeps its stored value.
        """
        row = self._normalise(fields_, partial=True)
        if not row:
            return
        self._write(lambda: self._update_row("interactions", interaction_id, row,
                                             f"no interaction with id {interaction_id}"))

    def get(self, interaction_id: int) -> Interaction:
        """One interaction; `NotFoundError` when there is none with that id."""
        with self._lock:
            try:
                row = self.db["interactions"].get(interaction_id)
            except sqlite_utils.db.NotFoundError:
                raise NotFoundError(f"no interaction with id {interaction_id}") from None
        return self._interaction(row)

    def interactions(self, limit: int | None = None, labeled: bool | None = None,
                     since: float | None = None, label: Any = None,
                     oldest_first: bool = False, after_id: int | None = None
                     ) -> list[Interaction]:
        """Interactions, newest first (or oldest first), filtered (`after_id`: ids above it).
        Order is by id: the order they were stored in (``ts`` may come from a replay's
        simulated clock or a clock that was set back)."""
        where, params = _interaction_filter(labeled=labeled, since=since, label=label,
                                            after_id=after_id)
        if limit is not None and limit < 0:
            raise ValueError("limit must be >= 0")
        with self._lock:
            return [self._interaction(r) for r in self.db["interactions"].rows_where(
                where, params, order_by="id ASC" if oldest_first else "id DESC",
                limit=None if limit is None else int(limit))]

    def count(self, labeled: bool | None = None, holdout: bool | None = None,
              error: bool | None = None) -> int:
        """Number of interactions: all, or labelled / in the holdout / with an error (or not)."""
        where, params = _interaction_filter(labeled=labeled, holdout=holdout, error=error)
        with self._lock:
            return int(self.db["interactions"].count_where(where, params))

    def counts_by(self, column: str) -> dict[Any, int]:
        """Number of interactions per value of `column` (a ``None`` key counts NULLs)."""
        if column not in _GROUPABLE:
            raise ValueError(f"cannot count by {column!r} (one of {', '.join(_GROUPABLE)})")
        with self._lock:
            return {r[0]: int(r[1]) for r in self.db.execute(
                f"SELECT [{column}], count(*) FROM interactions GROUP BY [{column}]")}

    def last_interaction_id(self) -> int:
        """The highest interaction id stored (0 when there is none)."""
        with self._lock:
            return int(self.db.execute(
                "SELECT coalesce(max(id), 0) FROM interactions").fetchone()[0])

    def person_labelled_commands(self) -> list[str]:
        """Transcripts the person labelled ON or OFF themselves (a flip, an answer, a remote
        toggle, `edge-plm label`; not the device's own unchallenged action, ``confirmed``), for
        any device, oldest first: the household's words for the ear (edge_plm/loop/household_ear.py)."""
        person = tuple(s for s in LABEL_SOURCES if s != "confirmed")
        marks = ", ".join("?" * len(person))
        sql = (f"SELECT transcript FROM interactions WHERE (label IN ('ON', 'OFF') AND label_source IN ({marks})) "
               f"OR id IN (SELECT interaction_id FROM interaction_devices WHERE label IN ('ON', 'OFF') "
               f"AND label_source IN ({marks})) ORDER BY id")
        with self._lock:
            return [row[0] for row in self.db.execute(sql, person + person).fetchall() if row[0]]

    def last_asr_backend(self) -> str | None:
        """The ASR backend of the newest interaction that names one."""
        with self._lock:
            rows = list(self.db["interactions"].rows_where(
                "asr_backend IS NOT NULL", select="asr_backend", order_by="id DESC", limit=1))
        return rows[0]["asr_backend"] if rows else None

    def ids_in_order(self, before: float | None = None) -> list[int]:
        """Interaction ids in id order; with `before`, those stored with ``ts`` before it."""
        where, params = _interaction_filter(before=before)
        with self._lock:
            return [int(r["id"]) for r in self.db["interactions"].rows_where(
                where, params, select="id", order_by="id")]

    def audio_paths(self, ids: Iterable[int]) -> list[str]:
        """The audio files the interactions `ids` refer to (rows without one left out)."""
        ids = [int(i) for i in ids]
        if not ids:
            return []
        with self._lock:
            return [self.resolve_path(r["audio_path"]) for r in self.db["interactions"].rows_where(
                f"id IN ({_marks(ids)}) AND audio_path IS NOT NULL", ids, select="audio_path")]

    def _interaction(self, row: dict[str, Any]) -> Interaction:
        """A row as an `Interaction`, its audio path as a path to open (a stored relative one
        is resolved against the database's directory, as checkpoint paths are)."""
        it = row_to_interaction(row)
        return dataclasses.replace(it, audio_path=self.resolve_path(it.audio_path)) if it.audio_path else it

    def interaction_ids(self, among: Iterable[int] | None = None) -> set[int]:
        """Every stored interaction id (only those `among` the given ids, if given)."""
        where, params = None, []
        if among is not None:
            params = [int(i) for i in among]
            if not params:
                return set()
            where = f"id IN ({_marks(params)})"
        with self._lock:
            return {int(r["id"]) for r in self.db["interactions"].rows_where(
                where, params, select="id")}

    def delete_interactions(self, ids: Iterable[int], remove_audio: bool = True,
                            activate_version: str | None = None,
                            owe: Callable[[], Iterable[str]] | None = None,
                            tombstone: Callable[[str], str] | None = None) -> list[str]:
        """Delete rows; return the audio paths they referenced.

        The same transaction bumps ``meta.forget_seq`` (a running service polls it and takes
        the deleted rows out of its live model) and, with `activate_version`, makes that
        (already written) model version active: rows and the model's contribution go
        together, or neither does. `owe` (read inside the transaction): the versions whose
        checkpoints must still be rewritten without the rows, journalled in ``forget_owed``
        by the same transaction (`owed_rewrites`; a killed `forget` is finished later).
        `tombstone` (the model's normalisation of a transcript): each row's keyed digest goes
        into ``forgotten`` in the same transaction (`tombstoned`: what `model import` checks).

        With `remove_audio`, those files are deleted too (a file already gone is logged, not an
        error). Rows go first, so a crash in between leaves an orphan file, never a row
        pointing at nothing.
        """
        ids = [int(i) for i in ids]
        if not ids:
            return []
        def delete() -> list[str]:
            found = self.audio_paths(ids)
            if tombstone is not None:
                texts = [r[0] for r in self.db.execute(
                    f"SELECT transcript FROM interactions WHERE id IN ({_marks(ids)})", ids)]
                for digest in self._digests(tombstone(t) for t in texts if t and t.strip()):
                    self.db.execute("INSERT OR IGNORE INTO forgotten (digest) VALUES (?)", [digest])
            self.db["interactions"].delete_where(f"id IN ({_marks(ids)})", ids)
            self.db.execute(f"DELETE FROM interaction_devices WHERE interaction_id IN ({_marks(ids)})", ids)
            self.db.execute(f"DELETE FROM timers WHERE interaction_id IN ({_marks(ids)})", ids)
            self.db.execute(f"DELETE FROM kinds WHERE interaction_id IN ({_marks(ids)})", ids)
            self.db.execute(
                "INSERT INTO meta (key, value) VALUES ('forget_seq', '1') ON CONFLICT(key) "
                "DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)")
            if activate_version is not None:
                self._retire_active(except_version=activate_version)
                self._update_row("model_versions", activate_version, {"status": "active"},
                                 f"no model version {activate_version!r}")
            if owe is not None:
                self._owe(owe(), ids)
            return found

        paths = self._write(delete)
        self._truncate_wal()
        if remove_audio:
            for p in paths:
                try:
                    os.remove(p)
                except FileNotFoundError:
                    log.warning("audio file of a deleted interaction was already gone: %s", p)
        return paths

    def _digests(self, forms: Iterable[str]) -> list[str]:
        """The keyed digests (HMAC-SHA256 with ``meta.forget_key``) of normalised transcripts."""
        key = self.db.execute("SELECT value FROM meta WHERE key = 'forget_key'").fetchone()
        secret = bytes.fromhex(key[0]) if key else b""
        return [hmac.new(secret, f.encode("utf-8"), hashlib.sha256).hexdigest() for f in forms]

    def tombstoned(self, forms: Iterable[str]) -> set[str]:
        """Which of the normalised transcripts `forms` a `forget` deleted (``forgotten``)."""
        forms = list(dict.fromkeys(forms))
        with self._lock:
            digests = self._digests(forms)
            found = set()
            for i in range(0, len(digests), 500):
                chunk = digests[i:i + 500]
                found.update(r[0] for r in self.db.execute(
                    f"SELECT digest FROM forgotten WHERE digest IN ({_marks(chunk)})", chunk))
        return {f for f, d in zip(forms, digests) if d in found}

    def _truncate_wal(self) -> None:
        """After a delete: copy the WAL into the main file and truncate it, so the deleted
        transcripts do not stay readable in the -wal file (with secure_delete the main file's
        pages are zeroed). A reader holding an old snapshot can keep it from completing; that
        is logged, and the next delete or the next checkpoint finishes it."""
        with self._lock:
            busy, _, _ = self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            log.warning("the write-ahead log could not be truncated after a delete (a reader is "
                        "active); deleted text may stay in it until the next checkpoint")

