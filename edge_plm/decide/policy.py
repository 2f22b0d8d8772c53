"""Act / ask / ignore: the decision state machine and the label rules. No I/O, no gpiozero.

The `Policy` takes events (an utterance's prediction, the relay's state, switch flips, the
passage of time) and returns decisions and labels; the controller does the I/O. Times are plain
float seconds from whatever clock the controller uses. `decide` is the decision table; the label
rules (which outcome gives which label, from which source) are in `Policy.on_flip`,
`Policy.on_answer` (a spoken yes/no, talk-back), `Policy.tick` and `Policy._no_flip`, which
reads what earlier no-flips of the same wording said (`decide/left_alone.py`). The tables,
the reasons for each rule and the replays that chose them are in docs/policy.md.

The simulated person of replays lives in `edge_plm.loop.simulation`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from types import MappingProxyType

from edge_plm import actions
from edge_plm.config.settings import PolicyConfig
from edge_plm.decide.left_alone import LeftAlone


class _Action(str, Enum):
    """What an utterance asks of the switch: one member per action of `edge_plm.actions`."""

    @classmethod
    def from_state(cls, on: bool) -> Action:
        """The action that drives the relay to `on` (ON for True, OFF for False)."""
        return cls(actions.for_state(on))

    @property
    def state(self) -> bool | None:
        """The relay state this action asks for (None: leave the relay as it is, NOOP)."""
        return actions.RELAY_STATE[self.value]


#: The actions of the registry as an enum: ``Action.ON``, ``Action.OFF``, ``Action.NOOP``.
Action = _Action("Action", [(a, a) for a in actions.ACTIONS], module=__name__, qualname="Action")
Action.__doc__ = "What an utterance asks of the switch (the actions of `edge_plm.actions`)."


class Decision(str, Enum):
    ACT = "act"
    ASK = "ask"
    IGNORE = "ignore"


class LabelSource(str, Enum):
    ASKED = "asked"
    OVERRIDE = "override"
    CONFIRMED = "confirmed"
    MANUAL = "manual"
    SPOKEN = "spoken"  # a spoken yes/no inside the ask window (talk-back, `Policy.on_answer`)
    REMOTE = "remote"  # a home hub's ON/OFF inside the window (MQTT, `Policy.on_flip(remote=True)`)


class PolicyError(RuntimeError):
    """An event arrived that the policy's state does not allow (a controller bug)."""


@dataclass(frozen=True)
class Prediction:
    """The model's best action, its confidence in [0, 1] and (optionally) the whole distribution.

    The distribution is needed by the no-flip label rules (the probability of the action the
    relay already matches); without it they fall back to a bound from `confidence` alone.
    """

    action: Action
    confidence: float
    distribution: Mapping[Action, float] | None = None
    # why the transcript is junk (``edge_plm.decide.content``): never acted on, never labelled ON/OFF
    junk: str | None = None
    # several devices: p(no command at all), the command's NOOP (the distribution's NOOP also
    # holds "a command for another device"); None: the distribution's NOOP
    not_command: float | None = None
    # the ear was unsure of the words (`Transcript.fluency` below ``asr.min_fluency``): a command
    # it would act on is asked about instead
    unsure_hearing: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.action, Action):
            object.__setattr__(self, "action", Action(self.action))
        if not _is_prob(self.confidence):
            raise ValueError(f"confidence must be a number in [0, 1], got {self.confidence!r}")
        if self.not_command is not None and not _is_prob(self.not_command):
            raise ValueError(f"not_command must be a number in [0, 1], got {self.not_command!r}")
        if self.distribution is not None:
            dist = {Action(k): v for k, v in dict(self.distribution).items()}
            bad = {k.value: v for k, v in dist.items() if not _is_prob(v)}
            if bad:
                raise ValueError(f"distribution values must be numbers in [0, 1], got {bad}")
            object.__setattr__(self, "distribution", MappingProxyType(dist))

    def no_command(self) -> float | None:
        """p(no command at all): ``not_command`` (several devices), else the distribution's
        NOOP; None without either."""
        if self.not_command is not None:
            return self.not_command
        return None if self.distribution is None else self.distribution.get(Action.NOOP)

    def prob_bound(self, action: Action) -> float:
        """p(action) from the distribution; without one, the most it can be given the top
        action's confidence (``confidence`` for the top action, else ``1 - confidence``)."""
        if self.distribution is not None:
            return float(self.distribution.get(action, 0.0))
        return self.confidence if action is self.action else 1.0 - self.confidence


def _is_prob(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and 0.0 <= value <= 1.0)


@dataclass(frozen=True)
class Resolution:
    """The outcome of one closed interaction: its label (or None) and how it was obtained."""

    key: Hashable  # the controller's interaction id
    decision: Decision
    label: Action | None
    source: LabelSource | None
    ts: float  # when the label was decided
    reason: str  # one human-readable line for logs and `edge-plm log`


@dataclass(frozen=True)
class Step:
    """What the controller must do after an utterance."""

    decision: Decision
    drive: Action | None  # ON/OFF: drive the relay to this state (ACT only), else None
    ask: bool  # signal "I'm not sure" until this interaction resolves
    deadline: float  # when this interaction's window expires
    closed: list[Resolution]  # earlier interactions closed by this utterance


@dataclass
class OpenInteraction:
    """The interaction whose window is open."""

    key: Hashable
    decision: Decision
    prediction: Prediction
    relay_before: bool
    opened: float
    deadline: float
    applied: bool = True  # False when the relay refused the ACT (rate limit)
    answer: bool | None = None  # ASK: the person's spoken yes (True) / no (False), if any
    answered_at: float | None = None
    said: Action | None = None  # ASK: the state the answer named ("off" to "On?"), if any
    text: str | None = None  # the transcript (for `LeftAlone`), if the controller gave it
    # an ask left unsaid: the likely command was for the state the relay already had
    # (`Policy.on_utterance`); it closes as that ask would have, with no question and no LED
    unsaid_ask: bool = False


def decide(prediction: Prediction, cfg: PolicyConfig) -> Decision:
    """The decision table (docs/policy.md), as a pure function: a predicted NOOP (the model
    believes it is not a command) and a junk transcript are ignored — no blink; a likely command
    is acted on at ``act_threshold`` (asked about when the ear was unsure of the words), asked
    about from ``ask_threshold``, else ignored."""
    if prediction.junk or prediction.action.state is None:
        return Decision.IGNORE
    c = prediction.confidence
    if c >= cfg.act_threshold:
        return Decision.ASK if prediction.unsure_hearing else Decision.ACT
    return Decision.ASK if c >= cfg.ask_threshold else Decision.IGNORE


class Policy:
    """One interaction window at a time; every event method returns what it resolved.

    ``spoken_answers``: a spoken yes / no can answer an ask (talk-back on). Without it the
    device does not ask about the state the relay already has: "Lamp on?" with the lamp on can
    only be answered with the switch, and a flip then labels the utterance as it does after an
    ignore, so the question (a blink) would tell the person nothing and the device nothing."""

    def __init__(self, cfg: PolicyConfig, spoken_answers: bool = False) -> None:
        found = cfg.problems()  # the checks of `config check`: one rule for both
        if found:
            raise ValueError("; ".join(found))
        self.cfg = cfg
        self.spoken_answers = spoken_answers
        self._open: OpenInteraction | None = None
        self._left_alone = LeftAlone()

    @property
    def open(self) -> OpenInteraction | None:
        """The interaction waiting for the person's reaction, if any."""
        return self._open

    @property
    def deadline(self) -> float | None:
        """When the open window expires (call `tick` after it), or None."""
        return self._open.deadline if self._open else None

    def on_utterance(self, key: Hashable, prediction: Prediction, relay_on: bool,
                     now: float, text: str | None = None) -> Step:
        """Decide for a new utterance; closes (expired or superseded) earlier interactions.
        ``text``: its transcript, so that a wording left alone with the relay on and with it
        off is labelled NOOP (`LeftAlone`)."""
        closed = self.tick(now)
        if self._open is not None and self._open.answer is not None:
            closed.append(self._answered(self._open))
        elif self._open is not None:
            closed.append(self._resolve(None, None, now, "superseded by a new utterance "
                                        "before its window ended"))
        decision = decide(prediction, self.cfg)
        unsaid = (decision is Decision.ASK and not self.spoken_answers
                  and prediction.action.state == bool(relay_on))
        if unsaid:  # nothing to do, and only a voice could answer: do not ask (class docstring)
            decision = Decision.IGNORE
        window = self.cfg.ask_window_s if decision is Decision.ASK else self.cfg.override_window_s
        self._open = OpenInteraction(key, decision, prediction, bool(relay_on), now, now + window,
                                     text=text, unsaid_ask=unsaid)
        drive = prediction.action if decision is Decision.ACT else None
        return Step(decision, drive, decision is Decision.ASK, now + window, closed)

    def action_refused(self, key: Hashable) -> None:
        """The relay refused the ACT of interaction `key` (rate limit): nothing was switched."""
        if self._open is None or self._open.key != key or self._open.decision is not Decision.ACT:
            raise PolicyError(f"action_refused({key!r}): no open ACT interaction with that key")
        self._open.applied = False

    def on_flip(self, desired: bool, now: float, remote: bool = False) -> list[Resolution]:
        """The person used the switch and wants the relay `desired`; returns what it resolved.

        `remote`: the person switched it from the home hub (an MQTT command, `edge_plm.bridge`):
        the same rules give the same label, from source ``remote``."""
        resolved = self.tick(now)
        if self._open is None:
            return resolved  # plain manual (or remote) use: labels nothing
        flipped = self._flipped(desired, now)
        if remote and flipped.source is not None:
            flipped = replace(flipped, source=LabelSource.REMOTE,
                              reason=f"{flipped.reason} (remote: from the home hub)")
        return resolved + [flipped]

    def _flipped(self, desired: bool, now: float) -> Resolution:
        """The open interaction's resolution by a flip to `desired` (`on_flip`)."""
        o = self._open
        flipped = Action.from_state(desired)
        if o.decision is Decision.ASK:
            return self._resolve(flipped, LabelSource.ASKED, now,
                                 f"asked; person flipped to {flipped.value}")
        if o.decision is Decision.IGNORE or not o.applied:
            why = "ignored" if o.decision is Decision.IGNORE else "action refused by rate limit"
            return self._resolve(flipped, LabelSource.MANUAL, now,
                                 f"{why}; person flipped to {flipped.value}")
        return self._after_act(o, flipped, now)

    def on_answer(self, yes: bool, now: float, said: Action | None = None) -> list[Resolution]:
        """A spoken yes/no to the open ask (talk-back); returns what `tick` resolved. ``said``:
        the state the answer named, if it named one ("off" to "On?" is a no that says OFF).

        The answer is kept on the interaction and becomes its label (source ``spoken``) when
        the window ends or a new utterance supersedes it; a flip before then wins (`on_flip`).
        No open ask, or one already answered: the answer labels nothing.
        """
        resolved = self.tick(now)
        o = self._open
        if o is None or o.decision is not Decision.ASK or o.answer is not None:
            return resolved
        o.answer, o.answered_at = bool(yes), now
        o.said = said if said is not None and said.state is not None else None
        return resolved

    def _answered(self, o: OpenInteraction) -> Resolution:
        """The label of an answered ask (docs/policy.md, "Talk-back"): yes -> the asked action;
        an answer naming a state ("off" to "On?") -> that state; a bare no -> "not that":
        NOOP when the relay already was in the asked state (a person who wanted the other
        state flips, and the flip wins); with the relay in the other state S the person
        wanted S (already so) or nothing, so NOOP only when the model finds NOOP at least as
        likely as S (`_no_flip`), else no label: a no never teaches an S command "not a
        command"."""
        at = o.answered_at if o.answered_at is not None else o.deadline
        action = o.prediction.action
        if o.answer:
            return self._resolve(action, LabelSource.SPOKEN, at,
                                 f"asked {action.value}; person said yes")
        if o.said is not None:
            return self._resolve(o.said, LabelSource.SPOKEN, at,
                                 f"asked {action.value}; person said {o.said.value}")
        if action.state == o.relay_before:
            return self._resolve(Action.NOOP, LabelSource.SPOKEN, at, f"asked {action.value} "
                                 "while already in that state; person said no")
        s = Action.from_state(o.relay_before)
        p_s, p_noop = o.prediction.prob_bound(s), o.prediction.no_command()
        settled = self._left_alone.other_state_seen(o.text, o.relay_before)  # `_no_flip` says NOOP
        if (p_noop is None or p_s > p_noop) and not settled:
            return self._left_alone_unlabelled(at, f"asked {action.value}; person said no: "
                                 f"{s.value} (as it is) or not a command, p({s.value})={p_s:.2f} "
                                 f"> p(NOOP): no label")
        return self._no_flip(o, LabelSource.SPOKEN, at, f"asked {action.value}; person said no")

    def _after_act(self, o: OpenInteraction, flipped: Action, now: float) -> Resolution:
        action = o.prediction.action
        if flipped is action:
            return self._resolve(action, LabelSource.CONFIRMED, now,
                                 f"acted {action.value}; person flipped to the same state")
        if action.state != o.relay_before:  # the act changed the relay: the flip reverts it
            return self._resolve(Action.NOOP, LabelSource.OVERRIDE, now,
                                 f"acted {action.value}; person reverted to {flipped.value}")
        return self._resolve(flipped, LabelSource.OVERRIDE, now,
                             f"relay already {action.value}; person flipped to {flipped.value}")

    def tick(self, now: float) -> list[Resolution]:
        """Close the open interaction if its window has expired (``now > deadline``)."""
        o = self._open
        if o is None or now <= o.deadline:
            return []
        at = o.deadline
        action = o.prediction.action
        if o.decision is Decision.ASK:
            if o.answer is not None:
                return [self._answered(o)]
            if action.state is not None and action.state == o.relay_before:
                return [self._left_alone_unlabelled(at, f"asked about {action.value} while "
                                      "already in that state; no flip: ambiguous")]
            return [self._no_flip(o, LabelSource.ASKED, at, "asked")]
        if o.unsaid_ask:
            return [self._left_alone_unlabelled(at, f"not asked about {action.value} (already in that "
                                                "state); no flip: ambiguous")]
        if o.decision is Decision.IGNORE:
            return [self._no_flip(o, LabelSource.CONFIRMED, at, "ignored")]
        if not o.applied:
            return [self._resolve(None, None, at, "action refused by rate limit; no flip")]
        if action.state == o.relay_before:
            return [self._left_alone_unlabelled(at, f"acted {action.value} while already in that "
                                  "state; left alone: ambiguous")]
        return [self._resolve(action, LabelSource.CONFIRMED, at,
                              f"acted {action.value}; left alone")]

    def _no_flip(self, o: OpenInteraction, source: LabelSource, at: float,
                 what: str) -> Resolution:
        """ASK / IGNORE left alone: NOOP only if the model found the relay's state unlikely.

        With the relay in S the person had no reason to flip for a wish of S either, so the
        outcome is "S or NOOP"; NOOP is recorded when p(S) < ``ambiguity_floor``, or when no
        command at all is at least as likely as S. With several devices the rule is the second
        alone, on the command's NOOP (``Prediction.not_command``), not the device's: a device's
        p(S) is small also when the command went to another device, and a command that names
        no device, given to the lamp, may have been the plug's; the plug already in that state
        is then no evidence that it was no command (docs/benchmarks-log.md, "A plug left alone").
        First of all: the same wording left alone before with the relay in the other state
        leaves only NOOP (`LeftAlone`); every "S or NOOP" left unlabelled is remembered so.
        """
        s = Action.from_state(o.relay_before)
        if self._left_alone.other_state_seen(o.text, o.relay_before):
            other = Action.from_state(not o.relay_before)
            return self._resolve(Action.NOOP, source, at, f"{what}; no flip while {s.value}, and "
                                 f"left alone before while {other.value}: not a command")
        p_s, p_noop = o.prediction.prob_bound(s), o.prediction.no_command()
        if o.prediction.not_command is not None:  # several devices: "for another device" is not NOOP
            if p_noop >= p_s:
                return self._resolve(Action.NOOP, source, at, f"{what}; no flip; relay {s.value} and "
                                     f"p(no command)={p_noop:.2f} >= p({s.value})={p_s:.2f}")
            return self._left_alone_unlabelled(at, f"{what}; no flip while {s.value}: ambiguous "
                                 f"(p({s.value})={p_s:.2f} > p(no command)={p_noop:.2f})")
        if p_s < self.cfg.ambiguity_floor:
            return self._resolve(Action.NOOP, source, at, f"{what}; no flip; relay {s.value} "
                                 f"and p({s.value})={p_s:.2f} < {self.cfg.ambiguity_floor}")
        if p_noop is not None and p_noop >= p_s:
            # the two labels consistent with "no flip" are S and NOOP: take the one the model
            # finds at least as likely, ties to NOOP (most of what a device hears is not a
            # command). Without this an empty model (1/3 each) never gets a NOOP label.
            return self._resolve(Action.NOOP, source, at, f"{what}; no flip; relay {s.value} "
                                 f"and p(NOOP)={p_noop:.2f} >= p({s.value})={p_s:.2f}")
        return self._left_alone_unlabelled(at, f"{what}; no flip while {s.value}: ambiguous "
                             f"(p({s.value})={p_s:.2f} >= {self.cfg.ambiguity_floor})")

    def close(self, now: float) -> list[Resolution]:
        """Shut down: expire what has expired, close the rest without a label."""
        resolved = self.tick(now)
        if self._open is not None and self._open.answer is not None:
            resolved.append(self._answered(self._open))
        elif self._open is not None:
            resolved.append(self._resolve(None, None, now, "closed at shutdown"))
        return resolved

    def _left_alone_unlabelled(self, ts: float, reason: str) -> Resolution:
        """The switch was left alone and that says "the relay's state, or no command": no
        label now; the wording and the relay's state are remembered (`LeftAlone`)."""
        o = self._open
        if o is not None:
            self._left_alone.record(o.text, o.relay_before)
        return self._resolve(None, None, ts, reason)

    def _resolve(self, label: Action | None, source: LabelSource | None, ts: float,
                 reason: str) -> Resolution:
        o = self._open
        if o is None:
            raise PolicyError("no open interaction to resolve")
        self._open = None
        if label is not None:
            self._left_alone.drop(o.text)
        if o.prediction.junk and label is not None and label.state is not None:
            # a flip after garble labels nothing: "the" must never become a command
            return Resolution(o.key, o.decision, None, None, ts,
                              f"{reason}; {o.prediction.junk}: not learned as a command")
        return Resolution(o.key, o.decision, label, source, ts, reason)
