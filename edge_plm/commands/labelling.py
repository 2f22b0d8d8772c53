"""What a person changes in the household's data (`edge-plm label`, `edge-plm forget`): a
corrected label that the model learns, and interactions deleted together with what the model
learned from them. The results are the commands' JSON documents (docs/contracts.md)."""

from __future__ import annotations

from typing import Any, Optional

from edge_plm.commands.opening import UserError
from edge_plm.decide.devices import command_of
from edge_plm.config.settings import device_configs
from edge_plm.learning.learner import Learner
from edge_plm.loop.house import open_learner


def _pred(p) -> dict:
    return {"action": p.action, "confidence": float(p.confidence)}


def relabel(store, settings, interaction: int, label: str, *,
            rebuild: bool = False, device: Optional[str] = None) -> dict[str, Any]:
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
    result: dict[str, Any] = {
        "id": row.id, "transcript": row.transcript, "label": command, "label_source": "manual",
        "previous": {"label": row.label, "label_source": row.label_source},
        "changed": row.label != command or device_changed}
    if device_labels is not None:
        result["device"] = device
        result["device_label"] = label
    if not result["changed"]:
        result.update(holdout=row.holdout, learned=False, replaced=False, version=None,
                      prediction_before=None, prediction_after=None)
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
    result.update(holdout=holdout, learned=learned, replaced=replaced, version=version,
                  prediction_before=_pred(before), prediction_after=_pred(after))
    return result


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
