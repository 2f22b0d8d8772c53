"""What a replayed session got (`edge_plm.loop.replay.run_session`): each line's `LineResult`
and the session's `SessionResult`, whose `summary` is the ``edge-plm replay --json`` object
(docs/contracts.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from edge_plm.decide.policy import Action, Decision
from edge_plm.learning.evaluation import percentiles
from edge_plm.loop.records import Outcome
from edge_plm.loop import kind_replay
from edge_plm.loop.timed_replay import summary_keys


@dataclass(frozen=True)
class LineResult:
    """One replayed line: the wish, what the device did, and the stored row's id."""

    index: int
    wish: Action | None  # None: the person's wish is not known (they do nothing)
    outcome: Outcome
    relay_before: bool
    relay_after: bool  # right after the device responded
    flips: int
    relay_final: bool  # after the person's reaction
    # what the person wanted of each device (None: not known; one device: the wish)
    wants: dict[str, Action] | None = None
    # an ON/OFF wish that every device it was for already met when it was said
    already_so: bool = False

    def _devices(self) -> dict:
        """Each device's `DeviceResult` ({} for an input that never reached the policies)."""
        return self.outcome.devices or {}

    def _acts(self) -> dict[str, Action | None]:
        """The action each device was acted on with (None: not acted)."""
        return {n: Action(r.prediction) if r.decision is Decision.ACT else None
                for n, r in self._devices().items()}

    @property
    def asked(self) -> bool:
        """The device asked (several devices: about any of them)."""
        return any(r.decision is Decision.ASK for r in self._devices().values())

    @property
    def acted(self) -> bool:
        """The device acted (several devices: on any of them)."""
        return any(a is not None for a in self._acts().values())

    @property
    def acted_wrong(self) -> bool:
        """Acted, and the action was not what the person wanted (unknown wish: never):
        some device was acted on with an action the person did not want of it (several
        devices: a device they did not name, anything but NOOP)."""
        if self.wish is None or self.wants is None:
            return False
        return any(a is not None and a is not self.wants[n] for n, a in self._acts().items())

    @property
    def acted_wrong_device(self) -> bool:
        """A device the person wanted left as it was was acted on with ON / OFF (counted in the
        summary with several devices only; one device: a NOOP wish acted on, also `acted_wrong`)."""
        if self.wish is None or self.wants is None:
            return False
        return any(a is not None and a.state is not None and self.wants[n] is Action.NOOP
                   for n, a in self._acts().items())

    @property
    def acted_right(self) -> bool:
        """Acted, and every action was what the person wanted."""
        return self.acted and not self.acted_wrong

    @property
    def missed(self) -> bool:
        """An ON/OFF wish that got neither an action nor a question (incl. input errors) on
        one of the devices it was for."""
        if self.wish not in (Action.ON, Action.OFF) or self.wants is None:
            return False
        devs = self._devices()
        return any(w.state is not None and (n not in devs or devs[n].decision is Decision.IGNORE)
                   for n, w in self.wants.items())

    @property
    def missed_already_so(self) -> bool:
        """Missed, but the relays already were as wished: nothing was left undone."""
        return self.missed and self.already_so


@dataclass
class SessionResult:
    """All replayed lines plus the store rows they produced."""

    lines: list[LineResult] = field(default_factory=list)
    labels: int = 0
    versions: list[str] = field(default_factory=list)
    rollbacks: int = 0
    silence_tail_ms: int = 0  # the endpointer's tail the after_speech latency includes
    talkback: bool = False  # the replay spoke its asks (some line answers by voice)
    spoken_answers: int = 0  # answers the simulated person said
    answer_errors: int = 0  # ... not heard as what was said (the other answer, or none)
    own_voice_dropped: int = 0  # utterances dropped as the device's own voice
    answers: list[tuple[int, bool, bool | None]] = field(default_factory=list)  # (line, said, heard)
    several: bool = False  # several devices: the summary adds per-device counts
    timed: list = field(default_factory=list)  # timed lines' results (`loop/timed_replay.py`)
    kinds: list = field(default_factory=list)  # dimmer and question lines (`loop/kind_replay.py`)
    kind_labels: int = 0  # kind labels the session taught

    def summary(self) -> dict:
        """The ``edge-plm replay --json`` object (docs/contracts.md), exact keys and types;
        with several devices also ``acted_wrong_device`` and ``devices`` (per-device counts)."""
        ok = [r.outcome.latency for r in self.lines if r.outcome.error is None]
        after = [x.after_speech for x in ok if x.after_speech is not None]
        out = {
            "interactions": len(self.lines),
            "asked": sum(r.asked for r in self.lines),
            "acted": sum(r.acted for r in self.lines),
            "acted_wrong": sum(r.acted_wrong for r in self.lines),
            "missed": sum(r.missed for r in self.lines),
            "labels": int(self.labels),
            "latency_ms": {
                "asr": percentiles([x.asr for x in ok if x.asr is not None]),
                "model": percentiles([x.model for x in ok if x.model is not None]),
                "total": percentiles([x.total for x in ok if x.total is not None]),
                "after_speech": percentiles(after),
            },
            "silence_tail_ms": self.silence_tail_ms,
            # talk-back replays only: a replay without voice answers prints what it always did
            **({"spoken_answers": self.spoken_answers, "answer_errors": self.answer_errors,
                "own_voice_dropped": self.own_voice_dropped} if self.talkback else {}),
            **summary_keys(self.timed),  # sessions with timed lines only
            **kind_replay.summary_keys(self.kinds, self.kind_labels),  # ... dimmer / question lines only
        }
        if self.several and any(r.wants is not None for r in self.lines):
            out["acted_wrong_device"] = sum(r.acted_wrong_device for r in self.lines)
            out["devices"] = self.device_counts()
        return out

    def device_counts(self) -> dict[str, dict[str, int]]:
        """Several devices: per device, the lines meant for it (``commands``: ON / OFF wishes),
        how often it was asked about, acted on (right / wrong), and missed."""
        out: dict[str, dict[str, int]] = {}
        for r in self.lines:
            if r.wants is None or not r.outcome.devices:
                continue
            for n, res in r.outcome.devices.items():
                c = out.setdefault(n, dict.fromkeys(
                    ("commands", "asked", "acted", "acted_right", "acted_wrong", "missed"), 0))
                want = r.wants[n] if r.wish is not None else None
                acted = res.decision is Decision.ACT
                c["commands"] += want is not None and want.state is not None
                c["asked"] += res.decision is Decision.ASK
                c["acted"] += acted
                c["acted_right"] += acted and want is not None and res.prediction == want.value
                c["acted_wrong"] += acted and want is not None and res.prediction != want.value
                c["missed"] += want is not None and want.state is not None and res.decision is Decision.IGNORE
        return out

    def parts(self, n: int = 4) -> list[dict[str, int]]:
        """Counts per consecutive part of the session (e.g. quarters) to show learning."""
        out = []
        size = len(self.lines)
        for k in range(n):
            chunk = self.lines[k * size // n:(k + 1) * size // n]
            out.append({"lines": len(chunk), "asked": sum(r.asked for r in chunk),
                        "acted_right": sum(r.acted_right for r in chunk),
                        "acted_wrong": sum(r.acted_wrong for r in chunk),
                        "missed": sum(r.missed for r in chunk),
                        "errors": sum(r.outcome.error is not None for r in chunk)})
        return out

