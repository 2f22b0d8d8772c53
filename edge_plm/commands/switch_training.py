"""Desktop training of a switch model (`edge-plm train switch`).

The recipe, on a labelled JSONL file (lines as `edge-plm replay` / `export` write them):

1. **Explicit warm start**: every labelled line goes through ``SwitchModel.learn`` in file
   order (the device's own online path); lines without a label are ``observe``d.
2. **Refinement**: epochs of ``epoch_steps`` full-batch refinement steps (``SwitchModel.refine``,
   through ``gradient_epoch``), far more than a board spends, with early stopping on ``--val``
   (balanced accuracy, ties broken by the lower class-weighted loss): the run ends after
   ``patience`` epochs without improvement or ``max_epochs`` epochs, with the best model.

3. **Calibration**: with ``--val``, when the run ends, the best model's confidence map is fitted
   on the validation lines (a run cut by ``--steps`` / ``--time-budget`` is calibrated when it is
   resumed to its end) (``SwitchModel.calibrate_on``): they are held out, so its confidence means "right on
   wording it has not learned"; that map is the prior the device's own held-out rows refine.

``OUT/checkpoint.npz`` is the best model so far (the device's checkpoint format); without
``--val`` it is the last epoch's. ``OUT/last.npz`` and ``OUT/train_log.json`` hold the run's
position, so ``resume=True`` continues it; refinement is full batch, so a run cut by ``--steps``
and resumed ends with the same model as an uninterrupted one.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from edge_plm.files import atomic_file
from edge_plm.config.overrides import typed_overrides
from edge_plm.learning.evaluation import balanced_accuracy, confusion
from edge_plm.jsonl import JsonlError, read_objects
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.switch.config import SwitchConfig
from edge_plm.switch.model import LABEL_INDEX, SwitchModel
from edge_plm.switch.tokenizer import ACTIONS
from edge_plm.errors import EdgePlmError

PHASE = "frozen"  # the epoch records' phase: refinement with the embeddings as they are
LOG_NAME = "train_log.json"


class TrainDataError(EdgePlmError, ValueError):
    """A training or validation file is missing or has a bad line."""


@dataclass(frozen=True)
class SwitchTrainConfig:
    model_config: str = "potato"
    seed: int = 0
    epoch_steps: int = 20  # full-batch refinement steps per epoch
    max_epochs: int = 30  # most epochs of refinement
    patience: int = 4  # epochs without a better validation score before training stops
    steps: int | None = None  # total gradient steps (checked at epoch boundaries)
    time_budget: float | None = None  # seconds, warm start included (checked at epoch boundaries)
    slot_word: str = ""  # SwitchConfig.slot_word of the model: the word its data uses as a device's name
    # other SwitchConfig fields of the model (``train switch --set``): the shipped starting model's
    # recipe is STARTING_OVERRIDES of switch/config.py (models/build_switch_en.py)
    overrides: dict = field(default_factory=dict)


def switch_overrides(items: list[str]) -> dict:
    """``KEY=VALUE`` items as typed fields of the switch-model configuration (``SwitchConfig``;
    ``config/overrides.py``); ValueError with a one-line reason."""
    return typed_overrides(SwitchConfig(name="potato"), items, fixed=("name", "slot_word"))


def read_training_lines(path: str | Path) -> list[tuple[str, str | None]]:
    """(text, label or None) for every line with a non-empty "text"; labels ON/OFF/NOOP or
    null (an unlabelled interaction of `edge-plm export`). Lines marked ``"holdout": true``
    (`edge-plm export` marks the device's holdout slice) are left out: the device judges an
    imported model on them, so it must not have learned them."""
    rows: list[tuple[str, str | None]] = []
    try:
        for no, row in read_objects(path, shape='an object with a "text" string'):
            text, label = row.get("text"), row.get("label")
            if not isinstance(text, str):
                raise TrainDataError(f'{path}:{no}: expected an object with a "text" string')
            if label is not None and label not in ACTIONS:
                raise TrainDataError(f'{path}:{no}: "label" must be one of {", ".join(ACTIONS)} or null, got {label!r}')
            if text.strip() and row.get("holdout") is not True:
                rows.append((text, label))
    except JsonlError as exc:
        raise TrainDataError(str(exc)) from exc
    if not any(label for _, label in rows):
        raise TrainDataError(f"{path}: no labelled lines")
    return rows


# --- the one function that touches the model's gradient machinery ------------------------

def gradient_epoch(model: SwitchModel, steps: int) -> tuple[float, int]:
    """One epoch: `steps` full-batch refinement steps over every labelled example of `model`
    (``SwitchModel.refine``). Returns (the objective before the last step, steps taken)."""
    loss = model.refine(steps)
    return (0.0 if loss is None else float(loss)), (steps if loss is not None else 0)


# --- scoring ----------------------------------------------------------------------------

def score(model: SwitchModel, rows: list[tuple[str, str]]) -> dict:
    """Balanced accuracy and class-weighted mean cross-entropy on labelled rows."""
    texts = [t for t, _ in rows]
    truth = [lab for _, lab in rows]
    y = model.predict_many(texts)
    preds = [ACTIONS[int(i)] for i in np.argmax(y, axis=1)]
    idx = np.array([LABEL_INDEX[lab] for lab in truth])
    counts = np.bincount(idx, minlength=len(ACTIONS)).astype(float)
    w = (1.0 / np.maximum(counts, 1.0))[idx]
    nll = -np.log(y[np.arange(len(idx)), idx] + 1e-300)
    return {"balanced_accuracy": balanced_accuracy(confusion(truth, preds)),
            "loss": float((w * nll).sum() / w.sum())}


def better(a: dict, b: dict | None) -> bool:
    """Score `a` beats `b`: higher balanced accuracy, ties broken by a lower loss."""
    if b is None:
        return True
    if a["balanced_accuracy"] != b["balanced_accuracy"]:
        return a["balanced_accuracy"] > b["balanced_accuracy"]
    return a["loss"] < b["loss"]


# --- the run ----------------------------------------------------------------------------

def _write_json(path: Path, obj: dict) -> None:
    with atomic_file(path, "w") as f:
        json.dump(obj, f, indent=1)


class SwitchTrainer:
    def __init__(self, cfg: SwitchTrainConfig, data: str | Path, out: str | Path,
                 val: str | Path | None = None, resume: bool = False, progress=None,
                 data_label: str | None = None, val_label: str | None = None) -> None:
        self.cfg, self.out, self.resume, self.progress = cfg, Path(out), resume, progress
        self.rows = read_training_lines(data)
        self.val = None
        if val is not None:
            self.val = [(t, lab) for t, lab in read_training_lines(val) if lab is not None]
        self.sources = {"data": data_label or str(data), "val": (val_label or str(val)) if val else None}

    def _meta(self) -> dict:
        return {"trained_by": "edge-plm train switch", "training": {
            **self.sources, "recipe": asdict(self.cfg),
            "data_lines": len(self.rows), "val_lines": len(self.val) if self.val else 0}}

    def _save(self, model: SwitchModel, name: str) -> None:
        model.save(self.out / name, extra=self._meta())

    def run(self) -> dict:
        """Warm start (or resume), refinement epochs until early stopping or the budget, summary."""
        t0 = time.perf_counter()
        self.out.mkdir(parents=True, exist_ok=True)
        if self.resume and (self.out / LOG_NAME).exists() and (self.out / "last.npz").exists():
            model, log = self._resumed()
        else:
            model, log = self._warm_start(t0)
        start = time.perf_counter() - float(log["state"]["seconds"])
        st = log["state"]
        while not st["done"] and not self._budget_spent(st, start):
            model = self._epoch(model, log, start)
        return self._finish(log, start)

    def _resumed(self) -> tuple[SwitchModel, dict]:
        log = json.loads((self.out / LOG_NAME).read_text(encoding="utf-8"))
        previous = log.get("recipe", {}).get("model_config")
        if previous != self.cfg.model_config:
            raise ValueError(f"{self.out} holds a {previous} run, not {self.cfg.model_config}; "
                             "use another --out")
        if log["state"]["phase"] >= 1:  # refinement ended before the run marked itself done
            log["state"]["done"] = True
        return SwitchModel.load(self.out / "last.npz"), log

    def _warm_start(self, t0: float) -> tuple[SwitchModel, dict]:
        """Every labelled line learned in file order (the device's online path), the rest observed."""
        model = SwitchModel.empty(self.cfg.model_config, seed=self.cfg.seed, slot_word=self.cfg.slot_word,
                                  **self.cfg.overrides)
        replay = model.config.replay_rows
        model.reconfigure(replay_rows=0)  # full-batch steps per label: a desktop has no latency budget
        if model.words is not None:  # a frequency-ordered word vocabulary (the query: the commonest words)
            model.words.register(text for text, _ in self.rows)
        for text, label in self.rows:
            if label is None:
                model.observe(text)
            else:
                model.learn(text, label)
        model.reconfigure(replay_rows=replay)  # the device's bounded update from here on
        log = {"recipe": asdict(self.cfg), **self.sources, "params": model.params,
               "data_lines": len(self.rows), "labelled": model.n_examples, "epochs": [],
               "state": {"phase": 0, "epoch": 0, "steps": 0, "best": None, "stale": 0,
                         "seconds": 0.0, "done": False}}
        warm = score(model, self.val) if self.val else None
        log["warm_start"] = {"val": warm, "seconds": time.perf_counter() - t0}
        log["state"]["best"] = warm
        self._save(model, "checkpoint.npz")
        self._save(model, "last.npz")
        log["state"]["seconds"] = time.perf_counter() - t0
        _write_json(self.out / LOG_NAME, log)
        return model, log

    def _budget_spent(self, st: dict, start: float) -> bool:
        """``--steps`` / ``--time-budget`` reached (checked between epochs)."""
        cfg = self.cfg
        return ((cfg.steps is not None and st["steps"] >= cfg.steps)
                or (cfg.time_budget is not None and time.perf_counter() - start >= cfg.time_budget))

    def _epoch(self, model: SwitchModel, log: dict, start: float) -> SwitchModel:
        """One epoch of refinement, scored and logged; returns the model to continue from."""
        st = log["state"]
        loss, n = gradient_epoch(model, self.cfg.epoch_steps)
        st["steps"] += n
        st["epoch"] += 1
        rec = {"phase": PHASE, "epoch": st["epoch"], "steps": st["steps"], "train_loss": loss}
        improved = self._keep_if_best(model, st, rec)
        stop = st["epoch"] >= self.cfg.max_epochs or (not improved and st["stale"] >= self.cfg.patience)
        rec["seconds"] = time.perf_counter() - start
        log["epochs"].append(rec)
        if self.progress:
            self.progress(rec)
        if stop:  # the run ends with the best model so far
            st["phase"], st["epoch"], st["stale"], st["done"] = 1, 0, 0, True
            model = SwitchModel.load(self.out / "checkpoint.npz")
        self._save(model, "last.npz")
        st["seconds"] = time.perf_counter() - start
        _write_json(self.out / LOG_NAME, log)
        return model

    def _keep_if_best(self, model: SwitchModel, st: dict, rec: dict) -> bool:
        """Save `model` as the checkpoint when it beats the best ``--val`` score (always without
        ``--val``); returns whether it did."""
        if not self.val:
            self._save(model, "checkpoint.npz")
            return True
        s = score(model, self.val)
        rec["val"] = s
        if not better(s, st["best"]):
            st["stale"] += 1
            return False
        st["best"], st["stale"] = s, 0
        self._save(model, "checkpoint.npz")
        rec["best"] = True
        return True

    def _finish(self, log: dict, start: float) -> dict:
        st = log["state"]
        st["seconds"] = time.perf_counter() - start
        final = SwitchModel.load(self.out / "checkpoint.npz")
        if self.val and st["done"]:  # the confidence's map, fitted on --val once the run ends
            log["calibration"] = final.calibrate_on(self.val)
            self._save(final, "checkpoint.npz")
        log["summary"] = {"checkpoint": str(self.out / "checkpoint.npz"), "config": final.config.name,
                          "params": final.params, "labelled": final.n_examples,
                          "steps": st["steps"], "finished": st["done"], "val": st["best"],
                          "seconds": st["seconds"]}
        _write_json(self.out / LOG_NAME, log)
        return log


__all__ = ["CheckpointError", "SwitchTrainConfig", "SwitchTrainer", "TrainDataError", "gradient_epoch",
           "read_training_lines", "score"]
