"""What `log` shows of the kind head's calls and labels (dimmers, questions; the ``kinds``
table, docs/loop.md "Dimmers and questions")."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from edge_plm.store import ReplayStore


def kinds_of(store: ReplayStore, ids: list[int]) -> dict[int, dict[str, Any]]:
    """Each interaction of `ids` with a kind row: the row as a record (``log --json``: a new key
    ``kind`` on those rows); {} for a database made before the table (schema < 11)."""
    return {i: {k: v for k, v in asdict(row).items() if k != "interaction_id"}
            for i, row in store.kinds_of(ids).items()}


def kind_line(iid: int, k: dict[str, Any]) -> str:
    """`log`'s line for the kind call or label of interaction `iid`."""
    parts = [f"#{iid} {k['predicted'] or 'kind'}"]
    if k["confidence"] is not None:
        parts[0] += f" {k['confidence']:.2f}"
    if k["done"]:
        parts.append(k["done"] + (f" {k['device']}" if k["device"] else ""))
    if k["level_before"] is not None and k["level_after"] is not None:
        parts.append(f"{k['level_before']:.0%} -> {k['level_after']:.0%}")
    if k["label"]:
        parts.append(f"labelled {k['label']} ({k['label_source']})")
    return ": ".join(parts[:1]) + (" " + ", ".join(parts[1:]) if parts[1:] else "")


def kind_counts(store: ReplayStore) -> dict[str, Any]:
    """``status``'s ``kinds``: what the kind head's calls did (``done``: dimmed, answered, ...)
    and the kind labels the person taught, by kind (empty for a database before schema v11)."""
    if not store.has_kinds():
        return {"done": {}, "labels": {}}
    return {"done": store.kind_tally("done"), "labels": store.kind_tally("label")}


__all__ = ["kind_counts", "kind_line", "kinds_of"]
