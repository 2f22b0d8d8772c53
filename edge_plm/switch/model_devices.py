"""Several devices on one switch model: predict / learn / relabel per device (``SwitchModel``'s
``predict_devices``, ``learn_devices``, ``relabel_devices``; docs/method.md, "Several devices").

The devices' name queries (``naming.py``) decide which devices an utterance addresses and which
of its words are the device's name (the slot); the command's action is the model's prediction
of the transcript without the slot; device d's distribution is that action distribution
scaled by its share (``addressing.device_distribution``). Learning goes the same way round: the
command without the slot is learned with the action the devices' labels agree on
(``addressing.command_label``), and the labels teach each device's word evidence
(``device_evidence.py``). With one device every function is exactly the single-device one.
"""

from __future__ import annotations

import numpy as np

from edge_plm.actions import ACTIONS
from edge_plm.switch import addressing
from edge_plm.switch.naming import Addressing, NameQuery
from edge_plm.switch.tokenizer import normalize


def _full_labels(labels: dict[str, str], devices) -> dict[str, str]:
    addressing.command_label(labels, devices)  # validates names and labels
    return {d.name: labels.get(d.name, "NOOP") for d in devices}


def name_query(model) -> NameQuery:
    """The devices' name queries over the model's word vocabulary (``naming.py``; the model's
    ``name_query``, made once)."""
    return NameQuery(model.words, model.config.unit_min_n, model.config.unit_max_n)


def address(model, transcript: str, devices) -> Addressing:
    """Shares, scores, slot and command of ``transcript`` for ``devices`` (``naming.py``)."""
    return model.name_query.address(normalize(transcript).split(), devices, model.device_evidence,
                                    model.config.slot_word)


def command_of(model, a: Addressing) -> str:
    """The words the command's action is read from: the transcript without the devices' names
    (``a.command``); with several devices named, without the whole span from the first name to
    the last when each word between them says nothing by itself (the model predicts NOOP for
    it: "and", "the" in "turn on the lamp and the fan") and the command reads the same action
    without the span, so the joining words do not blur the command. "turn on the lamp and turn
    off the fan" and "switch the lamp on and the fan off" keep their words ("off", "on" are
    not NOOP): one action for several devices cannot say both, so they are asked about."""
    if not (a.between and a.around):
        return a.command
    if any(model.predict(w).action != "NOOP" for w in a.between.split()):
        return a.command  # the span holds a command word ("the lamp on and the fan off")
    if model.predict(a.around).action != model.predict(a.command).action:
        return a.command
    return a.around


def read_command(model, transcript: str, a: Addressing, prior_strength: float = 0.0,
                 evidence_prior: float = 0.0):
    """The command's action distribution (``SwitchPrediction``): the model's prediction of the
    transcript without the devices' names (``command_of``), or of the whole transcript when
    that reads the same action more surely. The starting model heard "the lights" and "the
    plug" in commands, so keeping a name it knows keeps its confidence ("make the lights off"
    OFF .96, "make the off" .53); a name it never heard, or heard as something not switched
    ("turn on the fan": NOOP in the starting model), reads another action, and the command
    without it is taken. A predicted NOOP is never replaced, so an owner's NOOP label on the
    command (which is learned without the names) wins."""
    command = command_of(model, a)
    pred = model.predict(command, prior_strength, evidence_prior)
    if pred.action == "NOOP" or command == normalize(transcript):
        return pred
    whole = model.predict(transcript, prior_strength, evidence_prior)
    return whole if whole.action == pred.action and whole.confidence > pred.confidence else pred


def prepare_devices(model, devices) -> None:
    """Make what predicting for `devices` reads, now (several devices: their name queries,
    ``NameQuery.register``), so that ``predict_devices`` afterwards only reads the model; one
    device: nothing (its prediction never reads the names)."""
    if len(devices) > 1:
        model.name_query.register(list(devices))


def predict_devices(model, transcript: str, devices, prior_strength: float = 0.0,
                    evidence_prior: float = 0.0) -> dict:
    """Each configured device's action and confidence (``SwitchPrediction``, by name): the
    devices' name queries say which devices the transcript addresses and which words name them;
    the command (``read_command``) is shared out: an addressed device's action is the
    command's, its confidence the command's times its share (the rest of its distribution is
    NOOP: not for it, or not a command), so a device addressed less than surely is asked about
    rather than passed over; a device not addressed gets NOOP. A device not given a command that
    names no device keeps its own share of it in its distribution (``Addressing.possible``:
    what its switch's silence can mean) and is still NOOP. Each device's ``not_command`` is the
    command's NOOP: a switch left alone labels NOOP only when "no command" is likelier than
    "the state the relay is in" (``decide/policy.py``, ``Policy._no_flip``). One device:
    exactly ``predict``."""
    if len(devices) == 1:
        return {devices[0].name: model.predict(transcript, prior_strength, evidence_prior)}
    a = address(model, transcript, devices)
    pred = read_command(model, transcript, a, prior_strength, evidence_prior)
    y = np.array([pred.distribution[x] for x in ACTIONS])
    possible = a.possible if a.possible is not None else a.shares
    out = {}
    for d, p, q in zip(devices, a.shares.tolist(), possible.tolist()):
        if p > 0:
            yd = addressing.device_distribution(y, float(p))
            i = ACTIONS.index(pred.action)
        else:  # not given the command: NOOP, with what its switch's silence can mean
            yd = addressing.device_distribution(y, float(q))
            i = ACTIONS.index("NOOP")
        out[d.name] = type(pred)(ACTIONS[i], float(yd[i]), {x: float(v) for x, v in zip(ACTIONS, yd)},
                                 not_command=float(y[ACTIONS.index("NOOP")]))
    return out


def learn_devices(model, transcript: str, labels: dict[str, str], devices) -> float | None:
    """One labelled interaction of several devices: ``labels`` holds what each device's switch
    said (ON / OFF / NOOP; a device left out: NOOP). The command without the device names is
    learned (``SwitchModel.learn``) with the action the labels agree on (``command_label``) and
    the labels teach each device's words (not the device's whose name the example already said:
    ``DeviceEvidence``). One device: exactly ``learn``. Returns ``learn``'s loss."""
    if len(devices) == 1:
        return model.learn(transcript, addressing.command_label(labels, devices))
    full = _full_labels(labels, devices)
    a = address(model, transcript, devices)  # before the label: as it was predicted
    key = len(model.examples)
    loss = model.learn(command_of(model, a), addressing.command_label(full, devices))
    model.device_evidence.add(key, normalize(transcript).split(), full, unnamed=a.unnamed,
                              explained=a.named(devices))
    return loss


def relabel_devices(model, key: int, labels: dict[str, str], devices) -> bool:
    """New per-device labels of example ``key``: its device evidence and its command's action
    change (``SwitchModel.relabel``). True when something changed."""
    key = model.check_key(key)
    if len(devices) == 1 and key not in model.device_evidence.entries:
        return model.relabel(key, addressing.command_label(labels, devices))
    full = _full_labels(labels, devices)
    ev = model.device_evidence
    changed = False
    if key in ev.entries:
        changed = ev.entries[key][1] != full
        ev.relabel(key, full)
    else:
        words = model.text_of(key)
        a = address(model, words, devices)
        ev.add(key, words.split(), full, unnamed=a.unnamed, explained=a.named(devices))
        changed = True
    return model.relabel(key, addressing.command_label(full, devices)) or changed
