"""The learner's part for several named devices (its prediction per device, its per-device
labels): one module so that `Learner` stays one job. Every function is given what it needs
(the configured devices, the store, the model); learning an interaction of several devices is
`LiveModel.learn_devices`. One device never reaches the functions below that need several
(`Learner` takes its plain `predict` / `learn` path then)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from edge_plm.config.settings import DeviceConfig
from edge_plm.switch.addressing import DeviceName

if TYPE_CHECKING:
    from edge_plm.learning.types import LearnerConfig
    from edge_plm.store import ReplayStore
    from edge_plm.switch.model import SwitchModel, SwitchPrediction

def device_names(configs: list[DeviceConfig]) -> list[DeviceName]:
    """The model's view of the configured devices (`settings.device_configs`): name and aliases."""
    return [DeviceName(d.name, tuple(d.aliases)) for d in configs]


def predict(model: SwitchModel, text: str, devices: Sequence[DeviceName],
            cfg: LearnerConfig) -> dict[str, SwitchPrediction]:
    """Each configured device's prediction by `model` (``SwitchModel.predict_devices``; one
    device: exactly ``SwitchModel.predict``) with the learner's priors."""
    if len(devices) == 1:
        return {devices[0].name: model.predict(text, prior_strength=cfg.prior_strength,
                                               evidence_prior=cfg.evidence_prior)}
    return model.predict_devices(text, list(devices), prior_strength=cfg.prior_strength,
                                 evidence_prior=cfg.evidence_prior)


def prime(model: SwitchModel, devices: Sequence[DeviceName]) -> None:
    """Several devices: the model's name queries made for `devices` now (their names' codes
    and comparison columns, ``NameQuery.register``), so that predicting afterwards only reads
    the model; one device: nothing to make (its prediction never reads the names)."""
    if len(devices) > 1:
        model.name_query.register(list(devices))


def stored_labels(store: ReplayStore, devices: Sequence[DeviceName],
                  interaction_id: int) -> dict[str, str] | None:
    """The devices' labels of a stored interaction (None: one device, or none stored)."""
    if len(devices) < 2:
        return None
    return store.device_labels([interaction_id]).get(interaction_id)


def known_labels(devices: Sequence[DeviceName], labels: dict[str, str] | None) -> dict[str, str] | None:
    """`labels` of the configured devices only (a row labelled under an older ``[[devices]]``
    may name others); None when there are none, or one device."""
    if not labels or len(devices) < 2:
        return None
    names = {d.name for d in devices}
    return {d: v for d, v in labels.items() if d in names} or None


__all__ = ["device_names", "known_labels", "predict", "prime", "stored_labels"]
