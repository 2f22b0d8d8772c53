"""What a person changes in the household's data (`edge-plm label`, `edge-plm forget`): a
corrected label that the model learns, and interactions deleted together with what the model
learned from them. The results are typed (`Relabelled`, `forgetting.Forgotten`); their
``to_dict`` is the commands' JSON document (docs/contracts.md)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

from edge_plm.commands.opening import UserError
from edge_plm.decide.devices import command_of
from edge_plm.config.settings import device_configs
from edge_plm.learning.learner import Learner
from edge_plm.loop.house import open_learner


def _pred(p) -> dict:
    return {"action": p.action, "confidence": float(p.confidence)}


@dataclass(frozen=True)
class Relabelled:
    """What `label` did (``to_dict``: its ``--json`` document, docs/contracts.md)."""

    id: int
    transcript: str
    label: str  # the interaction's (the command's) label now, source "manual"
    previous: dict[str, Any]  # {"label", "label_source"} before
    changed: bool
    device: str | None = None  # several devices: whose label was given ...
    device_label: str | None = None  # ... and that label
    holdout: bool = False  # a holdout row: nothing learned
    learned: bool = False
    replaced: bool = False  # the model's earlier example of it was taken out
    version: dict[str, Any] | None = None  # the version the correction made (None: none)
    prediction_before: dict[str, Any] | None = None  # {"action", "confidence"}
    prediction_after: dict[str, Any] | None = None
    label_source: str = "manual"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "transcript": self.transcript, "label": self.label,
                               "label_source": self.label_source, "previous": self.previous,
                               "changed": self.changed}
        if self.device is not None:
            out |= {"device": self.device, "device_label": self.device_label}
        return out | {"holdout": self.holdout, "learned": self.learned, "replaced": self.replaced,
                      "version": self.version, "prediction_before": self.prediction_before,
                      "prediction_after": self.prediction_after}


def relabel(store, settings, interaction: int, label: str, *,
            rebuild: bool = False, device: Optional[str] = None) -> Relabelled:
    """Give `interaction` the label `label` (source "manual") and learn it: the active model
    takes the correction as one gated update (or, with `rebuild`, a model is re-learned from
    the database). An interaction without a transcript is a `UserError`. An interaction of
    several devices needs `device`: that device's label becomes `label`, and the interaction's
    (the command's) label follows from the devices' labels (`decide.devices.command_of`;
    a device without a label counts as NOOP: the person has reviewed the interaction)."""
    row = store.get(interaction)
    if row.error is not None or not row.transcript.strip():
        raise UserError(f"interaction {interaction} has no transcript"
                          + (f" (error: {row.error})" if row.error else "") + ": nothing to label")
    command, device_labels, device_changed = _device_relabel(store, settings, row, label, device)
    result = Relabelled(row.id, row.transcript, command,
                        {"label": row.label, "label_source": row.label_source},
                        row.label != command or device_changed,
                        *((device, label) if device_labels is not None else (None, None)),
                        holdout=row.holdout)
    if not result.changed:
        return result
    learner = open_learner(settings, store)
    before = learner.predict(row.transcript)
    if device_labels is not None:
        store.set_device_label(row.id, device, label, "manual")
    store.set_label(row.id, command, "manual")
    if rebuild:
        name = learner.rebuild_from_store()
        holdout = store.get(row.id).holdout
        learned, replaced = not holdout, False
        version = {"version": name, "status": "active", "reason": "rebuilt from the database"}
    else:
        holdout, learned, replaced, version = _learn_correction(learner, row.id, command, device_labels)
    after = learner.predict(row.transcript)
    return replace(result, holdout=holdout, learned=learned, replaced=replaced, version=version,
                   prediction_before=_pred(before), prediction_after=_pred(after))


def _device_relabel(store, settings, row, label: str, device: Optional[str]):
    """(the interaction's new label, its devices' labels or None, whether `device`'s changed)."""
    outcomes = store.device_outcomes([row.id]).get(row.id)
    if not outcomes:
        names = [d.name for d in device_configs(settings)]
        if device is not None and names != [device]:
            raise UserError(f"interaction {row.id} was decided for one device: --device "
                              f"{device!r} does not apply (leave it out)")
        return label, None, False
    names = list(outcomes)
    if device is None:
        raise UserError(f"interaction {row.id} was decided for several devices "
                          f"({', '.join(names)}): say which with --device NAME")
    if device not in outcomes:
        raise UserError(f"interaction {row.id} has no device {device!r} (its devices: {', '.join(names)})")
    labels = {d: o.label for d, o in outcomes.items()}
    changed = labels[device] != label or outcomes[device].label_source != "manual"
    labels[device] = label
    command = command_of({d: v or "NOOP" for d, v in labels.items()})
    return command.value, {d: v for d, v in labels.items() if v is not None}, changed


def _learn_correction(learner: Learner, interaction: int, label: str,
                      device_labels: Optional[dict[str, str]] = None):
    """(holdout, learned, replaced, version) of one gated update with the corrected label."""
    outcome = learner.on_relabel(interaction, label, device_labels)
    holdout, learned = outcome.holdout, not outcome.holdout
    version = None
    if learned:
        event = outcome.event or learner.new_version()
        version = {"version": event.version, "status": event.status,
                   "parent": event.parent, "reason": event.reason,
                   "balanced_accuracy": event.candidate.balanced_accuracy,
                   "holdout_n": event.candidate.n}
    return holdout, learned, outcome.relabelled, version
