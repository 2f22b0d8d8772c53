"""`edge-plm stats`: latencies, decisions and labels of the replay buffer, and the learning curve
of the stored predictions against their labels."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from edge_plm.commands.rows import all_rows
from edge_plm.commands.status import counts, model_record, versions_in_order
from edge_plm.commands.times import iso
from edge_plm.store import LABEL_SOURCES, LABELS, ReplayStore

LATENCY_PARTS = ("audio", "asr", "model", "actuator", "total")
PERCENTILES = (50, 90, 95, 99)


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
            "label": counts(store, "label", LABELS),
            "prediction": counts(store, "prediction", LABELS),
            "decision": counts(store, "decision", ("act", "ask", "ignore")),
            "label_source": counts(store, "label_source", LABEL_SOURCES),
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


__all__ = ["LATENCY_PARTS", "PERCENTILES", "learning_curve", "stats"]
