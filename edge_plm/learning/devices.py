"""The learner's part for several named devices (its prediction per device, its per-device
labels): one module so that `Learner` stays one job. One device never reaches the functions
below that need several (`Learner` calls its plain `predict` / `learn` path then)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from edge_plm.config.settings import DeviceConfig
from edge_plm.switch.addressing import DeviceName
from edge_plm.switch.tokenizer import ACTIONS

if TYPE_CHECKING:
    from edge_plm.switch.model import SwitchPrediction

#: an `edge_plm.learning.learner.Learner` (not imported: the learner imports this module)
Learner = Any

log = logging.getLogger("edge_plm.learning.learner")


def device_names(configs: list[DeviceConfig]) -> list[DeviceName]:
    """The model's view of the configured devices (`settings.device_configs`): name and aliases."""
    return [DeviceName(d.name, tuple(d.aliases)) for d in configs]


def set_devices(lr: Learner, devices: list[DeviceName]) -> None:
    """The configured devices of `lr`, in order (at least one)."""
    if not devices:
        raise ValueError("need at least one device")
    lr.devices = list(devices)


def predict_devices(lr: Learner, text: str) -> dict[str, SwitchPrediction]:
    """The learner's prediction for each configured device (``SwitchModel.predict_devices``
    on the live model; one device: exactly `Learner.predict`), after the same poll."""
    if len(lr.devices) == 1:
        return {lr.devices[0].name: lr.predict(text)}
    lr.poll()
    return lr.model.predict_devices(text, lr.devices, prior_strength=lr.cfg.prior_strength,
                                    evidence_prior=lr.cfg.evidence_prior)


def relabel(lr: Learner, interaction_id: int, label: str, device_labels: dict[str, str]) -> Any:
    """`Learner.on_relabel` of an interaction of several devices: its devices' labels are
    learned again with the command's `label` (a holdout row: only the judging changes)."""
    from edge_plm.learning.types import LabelOutcome  # noqa: PLC0415

    row = lr.store.get(interaction_id)
    if not row.transcript.strip() or row.error is not None:
        raise ValueError(f"interaction {interaction_id} has no transcript to learn from")
    if row.holdout:
        return LabelOutcome(holdout=True, loss=None)
    source = "manual" if interaction_id in lr.keys else row.label_source
    return lr.on_label(interaction_id, row.transcript, label, source=source, device_labels=device_labels)


def stored_labels(lr: Learner, interaction_id: int) -> dict[str, str] | None:
    """The devices' labels of a stored interaction (None: one device, or none stored)."""
    if len(lr.devices) < 2:
        return None
    return lr.store.device_labels([interaction_id]).get(interaction_id)


def known_labels(lr: Learner, labels: dict[str, str] | None) -> dict[str, str] | None:
    """`labels` of the configured devices only (a row labelled under an older ``[[devices]]``
    may name others); None when there are none, or one device."""
    if not labels or len(lr.devices) < 2:
        return None
    names = {d.name for d in lr.devices}
    return {d: v for d, v in labels.items() if d in names} or None


def learn(lr: Learner, interaction_id: int, text: str, label: str,
          device_labels: dict[str, str]) -> tuple[float | None, str | None]:
    """Several devices: ``SwitchModel.learn_devices``; what the model held for this
    interaction is taken out first (a relabel of a multi-device interaction is forget + learn
    again). The model's example then holds `label` (the database's, the command's).
    (loss or None, previous label or None), as `Learner._learn`."""
    key = lr.keys.pop(interaction_id, None)
    previous = None
    if key is not None and key not in lr.model.removed and key < len(lr.model.examples):
        previous = ACTIONS[lr.model.examples[key][1]]
        lr.model.forget_example(key)
    new_key = len(lr.model.examples)
    lr.keys[interaction_id] = new_key
    loss = lr.model.learn_devices(text, device_labels, lr.devices)
    if ACTIONS[lr.model.examples[new_key][1]] != label:  # the database's label is the truth
        lr.model.relabel(new_key, label)
    if previous is None:
        lr.window.add(interaction_id)
    else:
        lr.window.relabel(interaction_id)
        log.info("interaction %d relearned for its devices: %s -> %s", interaction_id, previous, label)
    return (None if loss is None else float(loss)), previous


__all__ = ["device_names", "known_labels", "learn", "predict_devices", "relabel", "set_devices",
           "stored_labels"]
