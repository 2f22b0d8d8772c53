"""The learner's live state as one value: the model it predicts and learns with, the version it
descends from, what it learned from which interaction, the labels since the last version, and
what the active version holds and predicted on the holdout (`LiveModel`).

Only `Learner` assigns its ``live`` value (a new `LiveModel` whenever the model or its version
changes). Learning changes the model, key map and window in place (`learn_label`,
`apply_difference`, `drop`); the learner's helpers (`StoreSync`) are handed the value and
return the new one when a version changed, which the learner then assigns. docs/loop.md ("Versions and automatic rollback").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from collections.abc import Sequence

from edge_plm.learning import devices as device_learning
from edge_plm.learning import state
from edge_plm.learning.gate import Rows, predict_rows
from edge_plm.learning.types import Window, keys_of
from edge_plm.store import ReplayStore
from edge_plm.switch.addressing import DeviceName
from edge_plm.switch.model import SwitchModel
from edge_plm.switch.tokenizer import ACTIONS

log = logging.getLogger("edge_plm.learning.learner")


@dataclass(frozen=True)
class LiveModel:
    """One state of the learner's live model (frozen: a change of model or version is a new
    value; learning changes the model, ``keys`` and ``window`` in place).

    ``keys``: interaction id -> example key in ``model`` (what it learned, to correct/forget).
    The active version is not kept in memory (a copy per version cost more than the loop
    itself on a long soak): its key map ``good_keys`` and its predictions on the holdout rows
    that existed when it was made, ``good_preds``, are enough to judge the next candidate."""

    model: SwitchModel
    version: str | None = None  # the active version the model descends from (None: none yet)
    keys: dict[int, int] = field(default_factory=dict)
    good_keys: dict[int, int] = field(default_factory=dict)
    good_preds: dict[int, str] = field(default_factory=dict)  # id -> action
    window: Window = field(default_factory=Window)  # labels learned since the last version

    @classmethod
    def loaded(cls, model: SwitchModel, version: str | None, holdout: Rows) -> LiveModel:
        """`model`, loaded from `version`'s checkpoint, as the live and the active model
        (its key map from the checkpoint, its predictions on the `holdout` rows)."""
        keys = keys_of(model)
        return cls(model, version, keys, dict(keys), predict_rows(model, holdout))

    def saved(self, version: str, preds: dict[int, str]) -> LiveModel:
        """This model saved as the active `version`, its holdout predictions `preds`: a new
        window."""
        return replace(self, version=version, good_keys=dict(self.keys), good_preds=dict(preds),
                       window=Window())

    def learn_label(self, interaction_id: int, text: str, label: str, devices: Sequence[DeviceName],
                    device_labels: dict[str, str] | None = None) -> tuple[float | None, str | None]:
        """Learn a label, or relabel what the model holds; (loss or None, previous label or
        None). Several `devices` with their ``device_labels``: `learn_devices`."""
        if (known := device_learning.known_labels(devices, device_labels)) is not None:
            return self.learn_devices(devices, interaction_id, text, label, known)
        return self.learn(interaction_id, text, label)

    def difference(self, store: ReplayStore, fraction: float) -> state.Difference:
        """What the model holds against the learnable labels of `store` (`state.difference`)."""
        return state.difference(store, state.model_labels(self.model, self.keys), fraction)

    def apply_difference(self, store: ReplayStore, fraction: float,
                         devices: Sequence[DeviceName]) -> state.Difference:
        """Make the model hold exactly the learnable labels of `store`: examples of rows no
        longer learnable (deleted, moved to the holdout) are taken out, changed labels
        replaced, missing ones learned in interaction order (they count towards the window
        like any label). Rows the holdout hash (`fraction`) claims are marked holdout."""
        diff = self.difference(store, fraction)
        if diff.extra:
            self.drop(diff.extra)
        for row in sorted(diff.missing + diff.changed, key=lambda r: r.id):
            self.learn_label(row.id, row.transcript, row.label, devices,
                             device_learning.stored_labels(store, row.id))
        for row in state.labelled_rows(store):
            if (row.id not in self.keys and not row.holdout
                    and not state.should_learn(row, fraction, False)):
                store.set_holdout(row.id, True)
        return diff

    def learn(self, interaction_id: int, text: str, label: str) -> tuple[float | None, str | None]:
        """One device: learn a label, or relabel what the model holds for this interaction;
        (loss or None, previous label or None)."""
        model, key = self.model, self.keys.get(interaction_id)
        if key is not None and key not in model.removed and key < len(model.examples):
            previous = ACTIONS[model.examples[key][1]]
            if model.relabel(key, label):
                self.window.relabel(interaction_id)
                log.info("interaction %d relabelled in the model: %s -> %s", interaction_id,
                         previous, label)
                return None, previous
            return None, None  # the model already holds this label
        self.keys[interaction_id] = len(model.examples)
        loss = model.learn(text, label)
        self.window.add(interaction_id)
        return float(loss), None

    def learn_devices(self, devices: Sequence[DeviceName], interaction_id: int, text: str,
                      label: str, device_labels: dict[str, str]) -> tuple[float | None, str | None]:
        """Several devices: ``SwitchModel.learn_devices``; what the model held for this
        interaction is taken out first (a relabel of a multi-device interaction is forget +
        learn again). The model's example then holds `label` (the database's, the command's).
        (loss or None, previous label or None), as `learn`."""
        model = self.model
        key = self.keys.pop(interaction_id, None)
        previous = None
        if key is not None and key not in model.removed and key < len(model.examples):
            previous = ACTIONS[model.examples[key][1]]
            model.forget_example(key)
        new_key = len(model.examples)
        self.keys[interaction_id] = new_key
        loss = model.learn_devices(text, device_labels, list(devices))
        if ACTIONS[model.examples[new_key][1]] != label:  # the database's label is the truth
            model.relabel(new_key, label)
        if previous is None:
            self.window.add(interaction_id)
        else:
            self.window.relabel(interaction_id)
            log.info("interaction %d relearned for its devices: %s -> %s", interaction_id, previous, label)
        return (None if loss is None else float(loss)), previous

    def drop(self, ids: list[int]) -> list[int]:
        """Take interactions `ids` out of the model, its key map and window (one solve for all
        of them); returns those the model held."""
        forgotten, keys = [], []
        for iid in ids:
            key = self.keys.pop(int(iid), None)
            if key is None or key in self.model.removed:
                continue
            keys.append(key)
            forgotten.append(int(iid))
        self.model.forget_examples(keys)
        self.window.drop(set(forgotten))
        return forgotten


__all__ = ["LiveModel"]
