"""Budgeted online evaluation (the `edge-plm eval` contract, docs/design.md §4).

Starts from an empty model (or a checkpoint: ``init``), feeds TRAIN in file order through
``SwitchModel.learn`` (the same online-update path the device uses: explicit re-solve plus the
bounded refinement steps it runs after every label) and, after each budget n, scores TEST. Also times every
prediction and every update.

Lines may name a device (``"device"``: several named devices, docs/contracts.md): a line is
then that device's label and every other device's NOOP. It is learned through
``SwitchModel.learn_devices`` and scored by ``predict_devices`` (the line's device's action),
and each budget adds the balanced accuracy per device and the share of lines on which another
device was predicted ON / OFF. The devices are the names in the lines, in order of first
appearance (TRAIN, then TEST); a line without one is the only device's, and is refused when
the lines name several.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from edge_plm.actions import ACTIONS
from edge_plm.jsonl import JsonlError, label_of, read_objects
from edge_plm.voice.transcript import DEFAULT_MAX_CHARS, cap_transcript
from edge_plm.learning.household import several
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.switch.addressing import DeviceName
from edge_plm.switch.calibration import expected_calibration_error
from edge_plm.switch.model import SwitchModel
from edge_plm.errors import EdgePlmError


class EvalDataError(EdgePlmError, ValueError):
    """A JSONL file is missing or has a bad line."""


def read_labelled_jsonl(path: str | Path) -> list[dict]:
    """Lines {"text": str, "label": an action such as "ON"}; other keys ignored. A text longer than
    the transcript cap (`edge_plm.voice.transcript`) is cut as the loop would cut it."""
    rows = []
    try:
        for no, row in read_objects(path, shape='an object with a "text" string'):
            if not isinstance(row.get("text"), str):
                raise EvalDataError(f'{path}:{no}: expected an object with a "text" string')
            label_of(path, no, row)
            if "device" in row and (not isinstance(row["device"], str) or not row["device"].strip()):
                raise EvalDataError(f'{path}:{no}: "device" must be a non-empty string (a device name)')
            if len(row["text"]) > DEFAULT_MAX_CHARS:  # as the loop would see it
                row["text"] = cap_transcript(row["text"], DEFAULT_MAX_CHARS, f"{path}:{no}")
            rows.append(row)
    except JsonlError as exc:
        raise EvalDataError(str(exc)) from exc
    if not rows:
        raise EvalDataError(f"{path}: no examples")
    return rows


def confusion(y_true: list[str], y_pred: list[str]) -> dict[str, dict[str, int]]:
    table = {t: {p: 0 for p in ACTIONS} for t in ACTIONS}
    for t, p in zip(y_true, y_pred):
        table[t][p] += 1
    return table


def balanced_accuracy(table: dict[str, dict[str, int]]) -> float:
    """Mean recall over the classes present in the test set."""
    recalls = [row[t] / sum(row.values()) for t, row in table.items() if sum(row.values())]
    return float(np.mean(recalls))


def accuracy(table: dict[str, dict[str, int]]) -> float:
    total = sum(sum(row.values()) for row in table.values())
    return sum(table[t][t] for t in table) / total


def percentiles(ms: list[float]) -> dict[str, float]:
    if not ms:
        return {"median": 0.0, "p95": 0.0}
    return {"median": float(np.median(ms)), "p95": float(np.percentile(ms, 95))}


def parse_budgets(text: str) -> list[int]:
    try:
        budgets = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError as exc:
        raise EvalDataError(f"--budgets must be comma-separated integers, got {text!r}") from exc
    if not budgets or budgets[0] < 0:
        raise EvalDataError("--budgets must be integers >= 0 (0: score before any label)")
    return budgets


def load_init(path: str | Path, model_config: str | None = None) -> SwitchModel:
    """The starting model of ``eval --init``: a switch-model checkpoint (of `model_config`, when
    given). Raises EvalDataError with a one-line reason when it cannot be used."""
    try:
        model = SwitchModel.load(path)
    except CheckpointError as exc:
        raise EvalDataError(f"--init: {exc}") from exc
    if model_config is not None and model.config.name != model_config:
        raise EvalDataError(f"--init: {path} is a {model.config.name} model, not {model_config}")
    model.mark_start()  # the lines fed are the owner's: they go to the owner's part (switch/owner.py)
    return model


def devices_of(train: list[dict], test: list[dict]) -> list[DeviceName]:
    """The devices the lines name (first appearance, TRAIN then TEST); [] when none does.
    Raises EvalDataError when a line has no device but the lines name several."""
    names = list(dict.fromkeys(r["device"].strip() for r in (*train, *test) if "device" in r))
    if several(names) and any("device" not in r for r in (*train, *test)):
        raise EvalDataError(f'a line has no "device" but the lines name several ({", ".join(names)})')
    try:
        return [DeviceName(n) for n in names]
    except ValueError as exc:
        raise EvalDataError(f"bad device name: {exc}") from exc


def _per_device(rows: list[dict], preds: list[str], devices: list[DeviceName]) -> dict:
    out = {}
    for d in devices:
        mine = [(r["label"], p) for r, p in zip(rows, preds) if r.get("device", devices[0].name).strip() == d.name]
        if mine:
            table = confusion([t for t, _ in mine], [p for _, p in mine])
            out[d.name] = {"lines": len(mine), "balanced_accuracy": balanced_accuracy(table),
                           "accuracy": accuracy(table)}
    return out


def run_eval(train: list[dict], test: list[dict], budgets: list[int], config: str = "potato",
             seed: int = 0, progress=None, init: SwitchModel | None = None, **overrides) -> dict:
    """``init``: start from this model (it is changed: pass a copy to keep it); its own seed
    is replaced by `seed`. Budget 0 scores it as it is."""
    if init is not None:
        if overrides:
            raise ValueError("config overrides apply to an empty model only")
        model = init
        model.seed = seed
    else:
        model = SwitchModel.empty(config, seed=seed, **overrides)
    truth = [r["label"] for r in test]
    devices = devices_of(train, test)

    def learn(row: dict) -> None:
        if devices:
            model.learn_devices(row["text"], {row.get("device", devices[0].name).strip(): row["label"]}, devices)
        else:
            model.learn(row["text"], row["label"])

    def predict(row: dict):
        """(the line's device's prediction, another device predicted ON / OFF)."""
        if not devices:
            return model.predict(row["text"]), False
        name = row.get("device", devices[0].name).strip()
        out = model.predict_devices(row["text"], devices)
        return out[name], any(p.action != "NOOP" for n, p in out.items() if n != name)
    # a budget beyond the file means "all"; several such budgets collapse into one
    stops = sorted({min(b, len(train)) for b in budgets})
    results, predict_ms, update_ms = [], [], []
    done = 0
    for stop in stops:
        for row in train[done:stop]:
            t0 = time.perf_counter()
            learn(row)
            update_ms.append((time.perf_counter() - t0) * 1e3)
            if progress:
                progress()
        done = stop
        preds, conf, others = [], [], 0
        for row in test:
            t0 = time.perf_counter()
            p, other = predict(row)
            predict_ms.append((time.perf_counter() - t0) * 1e3)
            preds.append(p.action)
            conf.append(p.confidence)
            others += other
        table = confusion(truth, preds)
        ece = expected_calibration_error(np.array(conf), np.array([a == t for a, t in zip(preds, truth)]))
        result = {"n": stop, "balanced_accuracy": balanced_accuracy(table),
                  "accuracy": accuracy(table), "confusion": table, "ece": ece}
        if devices:
            result["devices"] = _per_device(test, preds, devices)
            result["other_device_acted"] = others / len(test)
        results.append(result)
    out = {"config": model.config.name, "params": model.params, "budgets": results,
           "predict_ms": percentiles(predict_ms), "update_ms": percentiles(update_ms)}
    if devices:
        out["devices"] = [d.name for d in devices]
    return out
