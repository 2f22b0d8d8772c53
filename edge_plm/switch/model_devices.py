"""Several devices on one switch model: predict / learn / relabel per device (``SwitchModel``'s
``predict_devices``, ``learn_devices``, ``relabel_devices``, from ``SeveralDevices``; docs/method.md,
"Several devices"), and ``DeviceNaming``, the part of the model that holds what it learned of the
devices' names.

The devices' name queries (``naming.py``) decide which devices an utterance addresses and which
of its words are the device's name (the slot); the command's action is the model's prediction
of the transcript without the slot; device d's distribution is that action distribution
scaled by its share (``addressing.device_distribution``). Learning goes the same way round: the
command without the slot is learned with the action the devices' labels agree on
(``addressing.command_label``), and the labels teach each device's word evidence
(``device_evidence.py``). With one device every method is exactly the single-device one. A transcript is normalised once,
at the entry (``predict_devices``, ``learn_devices``); what is passed down is normalised text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from edge_plm.actions import ACTIONS
from edge_plm.switch import addressing
from edge_plm.switch.device_evidence import DeviceEvidence
from edge_plm.switch.naming import Addressing, NameQuery
from edge_plm.switch.tokenizer import normalize
from edge_plm.switch.words import WordVocab


def _full_labels(labels: dict[str, str], devices: Sequence) -> dict[str, str]:
    addressing.command_label(labels, devices)  # validates names and labels
    return {d.name: labels.get(d.name, "NOOP") for d in devices}


@dataclass
class DeviceNaming:
    """What the model knows of the devices' names: their name queries over the model's word
    vocabulary (``naming.NameQuery``, made at first use) and the word evidence the per-device
    labels taught (``DeviceEvidence``)."""

    words: WordVocab | None
    min_n: int
    max_n: int
    evidence: DeviceEvidence = field(default_factory=DeviceEvidence)
    _query: NameQuery | None = field(default=None, repr=False)

    @property
    def query(self) -> NameQuery:
        if self._query is None:
            self._query = NameQuery(self.words, self.min_n, self.max_n)
        return self._query

    def address(self, text: str, devices: Sequence, slot_word: str) -> Addressing:
        """Shares, scores, slot and command of the normalised transcript ``text`` for ``devices``
        (``naming.py``)."""
        return self.query.address(text.split(), devices, self.evidence, slot_word)

    def prepare(self, devices: Sequence) -> None:
        """Several devices: register their name queries now (``NameQuery.register``)."""
        if len(devices) > 1:
            self.query.register(list(devices))

    def teach(self, key: int, text: str, full: dict[str, str], a: Addressing, devices: Sequence) -> None:
        """Example ``key`` (normalised transcript ``text``, addressed as ``a``) labelled ``full``
        per device teaches each device's words."""
        self.evidence.add(key, text.split(), full, unnamed=a.unnamed, explained=a.named(devices))


class SeveralDevices:
    """``SwitchModel``'s methods for several devices (module docstring); they read and teach
    the model's ``naming`` part and predict and learn through the model's own methods."""

    def prepare_devices(self, devices: Sequence) -> None:
        """Make what predicting for `devices` reads, now (several devices: their name queries,
        ``NameQuery.register``), so that ``predict_devices`` afterwards only reads the model; one
        device: nothing (its prediction never reads the names)."""
        self.naming.prepare(devices)

    def address(self, transcript: str, devices: Sequence) -> Addressing:
        """Shares, scores, slot and command of ``transcript`` for ``devices`` (``naming.py``)."""
        return self.naming.address(normalize(transcript), devices, self.config.slot_word)

    def command_of(self, a: Addressing) -> str:
        """The words the command's action is read from: the transcript without the devices' names
        (``a.command``); with several devices named, without the whole span from the first name to
        the last when each word between them says nothing by itself (the model predicts NOOP for
        it: "and", "the" in "turn on the lamp and the fan") and the command reads the same action
        without the span, so the joining words do not blur the command. "turn on the lamp and turn
        off the fan" and "switch the lamp on and the fan off" keep their words ("off", "on" are
        not NOOP): one action for several devices cannot say both, so they are asked about."""
        if not (a.between and a.around):
            return a.command
        if any(self.predict_normalised(w).action != "NOOP" for w in a.between.split()):
            return a.command  # the span holds a command word ("the lamp on and the fan off")
        if self.predict_normalised(a.around).action != self.predict_normalised(a.command).action:
            return a.command
        return a.around

    def read_command(self, text: str, a: Addressing, prior_strength: float = 0.0, evidence_prior: float = 0.0):
        """The command's action distribution (``SwitchPrediction``) of the normalised transcript
        ``text``: the model's prediction of it without the devices' names (``command_of``), or
        of the whole transcript when that reads the same action more surely. The starting model
        heard "the lights" and "the plug" in commands, so keeping a name it knows keeps its
        confidence ("make the lights off" OFF .96, "make the off" .53); a name it never heard, or
        heard as something not switched ("turn on the fan": NOOP in the starting model), reads
        another action, and the command without it is taken. A predicted NOOP is never replaced,
        so an owner's NOOP label on the command (which is learned without the names) wins."""
        command = self.command_of(a)
        pred = self.predict_normalised(command, prior_strength, evidence_prior)
        if pred.action == "NOOP" or command == text:
            return pred
        whole = self.predict_normalised(text, prior_strength, evidence_prior)
        return whole if whole.action == pred.action and whole.confidence > pred.confidence else pred

    def predict_devices(self, transcript: str, devices: Sequence, prior_strength: float = 0.0,
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
            return {devices[0].name: self.predict(transcript, prior_strength, evidence_prior)}
        text = normalize(transcript)
        a = self.naming.address(text, devices, self.config.slot_word)
        pred = self.read_command(text, a, prior_strength, evidence_prior)
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

    def learn_devices(self, transcript: str, labels: dict[str, str], devices: Sequence) -> float | None:
        """One labelled interaction of several devices: ``labels`` holds what each device's switch
        said (ON / OFF / NOOP; a device left out: NOOP). The command without the device names is
        learned (``SwitchModel.learn``) with the action the labels agree on (``command_label``) and
        the labels teach each device's words (not the device's whose name the example already said:
        ``DeviceEvidence``). One device: exactly ``learn``. Returns ``learn``'s loss."""
        if len(devices) == 1:
            return self.learn(transcript, addressing.command_label(labels, devices))
        full = _full_labels(labels, devices)
        text = normalize(transcript)
        a = self.naming.address(text, devices, self.config.slot_word)  # before the label: as it was predicted
        key = len(self.store)
        loss = self.learn_normalised(self.command_of(a), addressing.command_label(full, devices))
        self.naming.teach(key, text, full, a, devices)
        return loss

    def relabel_devices(self, key: int, labels: dict[str, str], devices: Sequence) -> bool:
        """New per-device labels of example ``key``: its device evidence and its command's action
        change (``SwitchModel.relabel``). True when something changed."""
        key = self.check_key(key)
        ev = self.naming.evidence
        if len(devices) == 1 and key not in ev.entries:
            return self.relabel(key, addressing.command_label(labels, devices))
        full = _full_labels(labels, devices)
        changed = False
        if key in ev.entries:
            changed = ev.entries[key][1] != full
            ev.relabel(key, full)
        else:
            text = self.text_of(key)
            self.naming.teach(key, text, full, self.naming.address(text, devices, self.config.slot_word), devices)
            changed = True
        return self.relabel(key, addressing.command_label(full, devices)) or changed
