"""What the utterance path predicts with: a `Predictor`, one frozen value of a model, the version
it descends from, the household and the prediction priors, published by the learner's worker
(`learning/worker.py`). The utterance thread reads nothing else: not the learner, its settings
or its store. Predicting only reads the model (`SwitchModel.predict` changes nothing in it; the
household's name queries are made once, by `Predictor.publish`, before anyone can read it); it
never polls the database or writes a checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from edge_plm.learning.household import Household
from edge_plm.switch.model import SwitchModel, SwitchPrediction


@dataclass(frozen=True)
class Priors:
    """The prediction priors (``model.prior_strength``, ``model.evidence_prior``)."""

    strength: float = 0.0
    evidence: float = 0.0


@dataclass(frozen=True)
class Predicted:
    """One utterance's predictions, by device, and the version of the model that made them."""

    devices: Mapping[str, SwitchPrediction]
    version: str | None


@dataclass(frozen=True)
class Predictor:
    """A published model and what predicting with it needs; only read once published."""

    model: SwitchModel
    version: str | None
    household: Household
    priors: Priors

    @classmethod
    def publish(cls, model: SwitchModel, version: str | None, household: Household,
                priors: Priors) -> Predictor:
        """`model` made ready for the household (``SwitchModel.prepare_devices``: what
        predicting for its devices reads is made now, so that predicting afterwards only reads
        the model), as a predictor. `model` must not be learned on by anyone while it is read."""
        model.prepare_devices(household.devices)
        return cls(model, version, household, priors)

    def predict(self, text: str) -> Predicted:
        """Each device's prediction (``SwitchModel.predict_devices``; one device: exactly
        ``SwitchModel.predict``) and this model's version."""
        return Predicted(self.model.predict_devices(
            text, list(self.household.devices), prior_strength=self.priors.strength,
            evidence_prior=self.priors.evidence), self.version)

    def command(self, text: str) -> SwitchPrediction:
        """The command's prediction, devices aside (one device: its prediction)."""
        return self.model.predict(text, prior_strength=self.priors.strength,
                                  evidence_prior=self.priors.evidence)


__all__ = ["Predicted", "Predictor", "Priors"]
