"""Policy: decisions at the threshold boundaries, every label rule, the ambiguous cases."""

from __future__ import annotations

import pytest

from edge_plm.decide.policy import (
    Action, Decision, LabelSource, Policy, PolicyError, Prediction, decide,
)
from edge_plm.config.settings import PolicyConfig

CFG = PolicyConfig(act_threshold=0.8, ask_threshold=0.4, ask_window_s=8.0, override_window_s=10.0)
ON, OFF, NOOP = Action.ON, Action.OFF, Action.NOOP


def p(action: Action, confidence: float, **dist: float) -> Prediction:
    """A prediction; keyword arguments (ON=, OFF=, NOOP=) give its distribution."""
    return Prediction(action, confidence, dist or None)


@pytest.fixture
def policy() -> Policy:
    return Policy(CFG)


def only(resolutions):
    assert len(resolutions) == 1, resolutions
    return resolutions[0]


# --- decisions ---------------------------------------------------------------------------
@pytest.mark.parametrize("action,confidence,expected", [
    (ON, 0.80, Decision.ACT),  # act threshold is inclusive
    (ON, 0.7999, Decision.ASK),
    (OFF, 1.0, Decision.ACT),
    (OFF, 0.40, Decision.ASK),  # ask threshold is inclusive
    (OFF, 0.3999, Decision.IGNORE),
    (ON, 0.0, Decision.IGNORE),
    (NOOP, 0.80, Decision.IGNORE),  # confident NOOP
    (NOOP, 0.7999, Decision.IGNORE),  # a likely non-command: no blink (a flip still labels it)
    (NOOP, 0.34, Decision.IGNORE),
    (NOOP, 0.3999, Decision.IGNORE),
])
def test_decide_at_threshold_boundaries(action, confidence, expected):
    assert decide(p(action, confidence), CFG) is expected


@pytest.mark.parametrize("action,confidence,expected", [
    (ON, 0.99, Decision.ASK),  # a command the ear was unsure it heard: asked, never acted on
    (OFF, 0.80, Decision.ASK),
    (ON, 0.5, Decision.ASK),
    (ON, 0.2, Decision.IGNORE),
    (NOOP, 0.99, Decision.IGNORE),
])
def test_unsure_hearing_makes_an_act_an_ask(action, confidence, expected):
    assert decide(Prediction(action, confidence, unsure_hearing=True), CFG) is expected


def test_equal_thresholds_never_ask():
    cfg = PolicyConfig(act_threshold=0.6, ask_threshold=0.6)
    assert decide(p(ON, 0.5999), cfg) is Decision.IGNORE
    assert decide(p(ON, 0.6), cfg) is Decision.ACT


def test_a_likely_non_command_never_blinks():
    """Chatter the model believes is NOOP is ignored at any confidence: no ask, no LED."""
    for c in (0.34, 0.5, 0.79, 0.99):
        step = Policy(CFG).on_utterance("x", p(NOOP, c), relay_on=False, now=0.0)
        assert step.decision is Decision.IGNORE and not step.ask


def test_junk_is_never_acted_on_nor_learned_as_a_command():
    pol = Policy(CFG)
    junk = Prediction(ON, 0.99, {ON: 0.99, OFF: 0.005, NOOP: 0.005}, junk="too little content")
    step = pol.on_utterance("the", junk, relay_on=False, now=0.0)
    assert step.decision is Decision.IGNORE and step.drive is None
    r = only(pol.on_flip(True, 1.0))  # the person flips after garble: no ON label for "the"
    assert r.label is None and "not learned as a command" in r.reason


@pytest.mark.parametrize("bad", [-0.01, 1.01, float("nan"), "0.5"])
def test_prediction_rejects_bad_confidence(bad):
    with pytest.raises(ValueError, match="confidence"):
        Prediction(ON, bad)


def test_prediction_accepts_action_strings():
    assert Prediction("OFF", 0.5).action is OFF
    with pytest.raises(ValueError):
        Prediction("MAYBE", 0.5)


def test_bad_config_is_rejected():
    with pytest.raises(ValueError, match="ask_threshold"):
        Policy(PolicyConfig(act_threshold=0.3, ask_threshold=0.5))
    with pytest.raises(ValueError, match="window"):
        Policy(PolicyConfig(ask_window_s=0))


def test_step_for_act_ask_ignore(policy):
    step = policy.on_utterance(1, p(ON, 0.9), relay_on=False, now=0.0)
    assert (step.decision, step.drive, step.ask, step.deadline) == (Decision.ACT, ON, False, 10.0)
    step = policy.on_utterance(2, p(OFF, 0.5), relay_on=True, now=100.0)
    assert (step.decision, step.drive, step.ask, step.deadline) == (Decision.ASK, None, True, 108.0)
    step = policy.on_utterance(3, p(NOOP, 0.95), relay_on=True, now=200.0)
    assert (step.decision, step.drive, step.ask, step.deadline) == (
        Decision.IGNORE, None, False, 210.0)


# --- the label rules: one interaction, then the person's flip or the window's end -------------
def flip(desired: bool, at: float):
    return lambda policy: policy.on_flip(desired, now=at)


def tick(at: float):
    return lambda policy: policy.tick(at)


def refused(then):
    """The relay refused the action (rate limit), then `then`."""
    def run(policy):
        policy.action_refused("a")
        return then(policy)
    return run


ASKED, CONFIRMED, OVERRIDE, MANUAL = (LabelSource.ASKED, LabelSource.CONFIRMED,
                                      LabelSource.OVERRIDE, LabelSource.MANUAL)
THIRD = 1 / 3
LABEL_RULES = {  # what happened: (prediction, relay on, then, label, source, in the reason)
    # ASK
    "asked, flip exactly at the window's end counts": (p(OFF, 0.6), True, flip(False, 8.0), OFF, ASKED, ""),
    "asked, no flip, relay state plausible: unlabelled":  # the person may have meant OFF
        (p(ON, 0.5, ON=0.5, OFF=0.3, NOOP=0.2), False, tick(8.001), None, None, "ambiguous (p(OFF)=0.30"),
    "ignored unsure NOOP, no flip: NOOP": (p(NOOP, 0.6, NOOP=0.6, ON=0.1, OFF=0.3), True, tick(20.0), NOOP,
                                           CONFIRMED, ""),
    "ignored unsure NOOP, no flip: the likelier of NOOP and the relay state":  # p(OFF) >= floor
        (p(NOOP, 0.6, NOOP=0.6, ON=0.1, OFF=0.3), False, tick(20.0), NOOP, CONFIRMED,
         "p(NOOP)=0.60 >= p(OFF)=0.30"),
    "asked, no flip, the relay state is likelier: ambiguous":
        (p(ON, 0.5, ON=0.5, OFF=0.4, NOOP=0.1), False, tick(20.0), None, None, "ambiguous"),
    # unsure of the state the relay has: not asked (no spoken answers), closes as that ask would
    "not asked about the state the relay has, no flip: unlabelled":
        (p(ON, 0.5), True, tick(10.001), None, None, "not asked about ON (already in that state)"),
    "not asked about the state the relay has, flip: the flipped-to state, manual":
        (p(ON, 0.5), True, flip(False, 1.0), OFF, MANUAL, "ignored; person flipped to OFF"),
    # ACT
    "acted, reverted within the override window: NOOP":  # the window's end is inclusive
        (p(ON, 0.9), False, flip(False, 10.0), NOOP, OVERRIDE, ""),
    "acted OFF, reverted: NOOP": (p(OFF, 0.99), True, flip(True, 2.0), NOOP, OVERRIDE, ""),
    "confident ON that switched the relay, left alone: ON": (p(ON, 0.9), False, tick(11.0), ON, CONFIRMED, ""),
    "confident ON while already ON, then flip OFF: OFF": (p(ON, 0.9), True, flip(False, 2.0), OFF, OVERRIDE, ""),
    "acted, then flip to the same state: confirmed":  # a switch read by position can disagree
        (p(ON, 0.9), False, flip(True, 1.0), ON, CONFIRMED, ""),
    "rate-limited act, then flip: manual": (p(OFF, 0.9), True, refused(flip(False, 2.0)), OFF, MANUAL, ""),
    "rate-limited act, no flip: unlabelled": (p(OFF, 0.9), True, refused(tick(11.0)), None, None, "rate limit"),
    # IGNORE
    "ignored, flipped within the window: manual": (p(ON, 0.2), False, flip(True, 5.0), ON, MANUAL, ""),
    "confident NOOP ignored, then flip: manual": (p(NOOP, 0.95), True, flip(False, 1.0), OFF, MANUAL, ""),
    "ignored, nothing: NOOP confirmed":  # p(OFF) <= 0.05
        (p(NOOP, 0.95), False, tick(10.001), NOOP, CONFIRMED, ""),
    "ignored by an empty model, no flip: NOOP":  # ties go to NOOP, or it would never get a NOOP label
        (p(ON, THIRD, ON=THIRD, OFF=THIRD, NOOP=THIRD), False, tick(20.0), NOOP, CONFIRMED, ""),
    # "turn off the light" while off, too unsure to act or ask, the person (rightly) does
    # nothing: that is no evidence for NOOP
    "ignored OFF wish while OFF: not NOOP":
        (p(OFF, 0.35, OFF=0.35, NOOP=0.33, ON=0.32), False, tick(10.001), None, None, "ambiguous"),
}


@pytest.mark.parametrize("prediction, relay_on, then, label, source, reason",
                         LABEL_RULES.values(), ids=LABEL_RULES.keys())
def test_label_rule(policy, prediction, relay_on, then, label, source, reason):
    step = policy.on_utterance("a", prediction, relay_on=relay_on, now=0.0)
    r = only(then(policy))
    assert (r.key, r.label, r.source, r.decision) == ("a", label, source, step.decision)
    assert reason in r.reason


# --- ASK -----------------------------------------------------------------------------------
@pytest.mark.parametrize("action, relay_on", [(ON, True), (OFF, False)])
def test_unsure_of_the_state_the_relay_has_it_does_not_ask(action, relay_on):
    """"Lamp on?" with the lamp on: without spoken answers only a flip could reply, and a flip
    labels an ignored utterance the same way; so no question and no LED."""
    pol = Policy(CFG)
    step = pol.on_utterance("a", p(action, 0.6), relay_on=relay_on, now=0.0)
    assert (step.decision, step.ask, step.drive) == (Decision.IGNORE, False, None)
    assert pol.open.unsaid_ask
    other = Policy(CFG).on_utterance("b", p(action, 0.6), relay_on=not relay_on, now=0.0)
    assert (other.decision, other.ask) == (Decision.ASK, True)  # the other state: asked as before


def test_with_spoken_answers_it_asks_about_the_state_the_relay_has():
    """With talk-back a spoken yes labels it, so the question is worth asking."""
    pol = Policy(CFG, spoken_answers=True)
    step = pol.on_utterance("a", p(ON, 0.5), relay_on=True, now=0.0)
    assert (step.decision, step.ask) == (Decision.ASK, True)
    r = only(pol.on_flip(False, 1.0))  # flipped to the other state: the label, asked
    assert (r.label, r.source) == (OFF, ASKED)
    pol.on_utterance("b", p(ON, 0.5), relay_on=True, now=2.0)
    assert pol.tick(10.0) == []  # the ask window (8 s) is still open
    r = only(pol.tick(10.001))  # no flip: "ON or nothing"
    assert (r.label, r.source) == (None, None) and "ambiguous" in r.reason
    pol.on_utterance("c", p(ON, 0.5), relay_on=True, now=20.0)
    r = only(pol.on_answer(True, 21.0) + pol.tick(28.001))
    assert (r.label, r.source) == (ON, LabelSource.SPOKEN)


def test_a_wording_not_asked_about_with_the_relay_on_and_asked_with_it_off_is_noop():
    """The unsaid ask is "the relay's state, or no command" as the ask was (`LeftAlone`)."""
    pol = Policy(CFG)
    pol.on_utterance("a", p(ON, 0.5, ON=0.5, OFF=0.1, NOOP=0.4), relay_on=True, now=0.0, text="set the mood")
    assert only(pol.tick(10.001)).label is None
    step = pol.on_utterance("b", p(ON, 0.5, ON=0.5, OFF=0.4, NOOP=0.1), relay_on=False, now=20.0,
                            text="set the mood")
    assert step.ask  # ON while OFF: asked; no flip says "OFF or nothing", and ON-or-nothing before
    r = only(pol.tick(28.001))
    assert (r.label, r.source) == (NOOP, ASKED) and "left alone before while ON" in r.reason


def test_asked_and_flipped_within_window_labels_flipped_state(policy):
    policy.on_utterance("a", p(ON, 0.5), relay_on=False, now=0.0)
    r = only(policy.on_flip(True, now=3.0))
    assert (r.key, r.label, r.source, r.ts, r.decision) == ("a", ON, LabelSource.ASKED, 3.0,
                                                            Decision.ASK)
    assert policy.open is None


def test_asked_and_no_flip_is_noop_when_relay_state_was_unlikely(policy):
    # relay OFF, the model gave OFF 0.1 < floor 0.2: "no flip" means NOOP, not "yes, OFF"
    policy.on_utterance("a", p(ON, 0.5, ON=0.5, OFF=0.1, NOOP=0.4), relay_on=False, now=0.0)
    assert policy.tick(8.0) == []  # window still open at its end
    r = only(policy.tick(8.001))
    assert (r.label, r.source, r.ts) == (NOOP, LabelSource.ASKED, 8.0)


def test_asked_flip_after_window_is_noop_then_plain_manual_use(policy):
    policy.on_utterance("a", p(ON, 0.5, ON=0.5, OFF=0.05, NOOP=0.45), relay_on=False, now=0.0)
    r = only(policy.on_flip(True, now=8.5))
    assert (r.key, r.label, r.source) == ("a", NOOP, LabelSource.ASKED)
    assert policy.on_flip(False, now=9.0) == []


# --- ACT -----------------------------------------------------------------------------------
def test_acted_and_left_alone_is_confirmed_action(policy):
    policy.on_utterance("a", p(ON, 0.9), relay_on=False, now=0.0)
    assert policy.tick(10.0) == []
    r = only(policy.tick(10.5))
    assert (r.label, r.source, r.ts) == (ON, LabelSource.CONFIRMED, 10.0)


def test_acted_flip_after_override_window_confirms_then_is_manual_use(policy):
    policy.on_utterance("a", p(ON, 0.9), relay_on=False, now=0.0)
    r = only(policy.on_flip(False, now=10.01))
    assert (r.label, r.source) == (ON, LabelSource.CONFIRMED)
    assert policy.open is None


def test_confident_on_while_already_on_left_alone_is_unlabeled(policy):
    step = policy.on_utterance("a", p(ON, 0.9), relay_on=True, now=0.0)
    assert step.decision is Decision.ACT and step.drive is ON  # relay.set(True) is a no-op
    r = only(policy.tick(11.0))
    assert (r.label, r.source) == (None, None)  # "ON or nothing": ambiguous
    assert "ambiguous" in r.reason


def test_action_refused_for_wrong_interaction_is_an_error(policy):
    with pytest.raises(PolicyError, match="no open ACT"):
        policy.action_refused("a")
    policy.on_utterance("a", p(OFF, 0.5), relay_on=True, now=0.0)  # an ASK, not an ACT
    with pytest.raises(PolicyError):
        policy.action_refused("a")


# --- IGNORE --------------------------------------------------------------------------------
@pytest.mark.parametrize("p_state,labelled", [(0.0, True), (0.1999, True), (0.2, False),
                                               (0.5, False)])
def test_ignored_no_flip_both_sides_of_the_floor(policy, p_state, labelled):
    noop = p_state / 2  # below p(ON): NOOP is not the likelier of the two consistent labels
    policy.on_utterance("a", p(OFF, 0.3, ON=p_state, OFF=1.0 - p_state - noop, NOOP=noop),
                        relay_on=True, now=0.0)
    r = only(policy.tick(10.001))
    assert (r.label, r.source) == ((NOOP, LabelSource.CONFIRMED) if labelled else (None, None))


def test_a_device_not_given_the_command_is_not_labelled_noop_by_its_silence(policy):
    # several devices: the plug was not given "turn on wemo" (the lamp was), so its own
    # distribution is mostly NOOP ("for another device"); the plug was already ON, so its
    # switch left alone says "ON or no command", and no command (.1) is the less likely
    plug = Prediction(NOOP, 0.7, {ON: 0.3, OFF: 0.0, NOOP: 0.7}, not_command=0.1)
    policy.on_utterance("k", plug, relay_on=True, now=0.0)
    r = only(policy.tick(100.0))
    assert r.label is None and "ambiguous" in r.reason
    # the same distribution without the command's NOOP: the device's NOOP decides, as for one device
    policy.on_utterance("k2", Prediction(NOOP, 0.7, {ON: 0.3, OFF: 0.0, NOOP: 0.7}), relay_on=True, now=200.0)
    assert only(policy.tick(300.0)).label is NOOP
    # a likely non-command stays NOOP
    policy.on_utterance("k3", Prediction(NOOP, 0.7, {ON: 0.3, OFF: 0.0, NOOP: 0.7}, not_command=0.6),
                        relay_on=True, now=400.0)
    assert only(policy.tick(500.0)).label is NOOP
    with pytest.raises(ValueError, match="not_command"):
        Prediction(NOOP, 0.7, None, not_command=1.5)


def test_floor_is_configurable():
    pred = p(OFF, 0.34, ON=0.33, OFF=0.34, NOOP=0.33)  # ignored (< ask 0.35); relay OFF, p(OFF) = 0.34
    for floor, label in [(0.0, None), (0.34, None), (0.35, NOOP), (1.0, NOOP)]:
        policy = Policy(PolicyConfig(ambiguity_floor=floor))
        policy.on_utterance("a", pred, relay_on=False, now=0.0)
        assert only(policy.tick(100.0)).label is label, floor
    with pytest.raises(ValueError, match="ambiguity_floor"):
        Policy(PolicyConfig(ambiguity_floor=1.5))


def test_without_a_distribution_the_bound_comes_from_the_confidence(policy):
    assert p(NOOP, 0.9).prob_bound(ON) == pytest.approx(0.1)
    assert p(ON, 0.7).prob_bound(ON) == 0.7
    assert p(ON, 0.7, ON=0.7, OFF=0.2, NOOP=0.1).prob_bound(OFF) == 0.2
    # unsure top action: p(relay state) may be up to 0.6, so no NOOP label
    policy.on_utterance("a", p(ON, 0.4), relay_on=False, now=0.0)
    assert only(policy.tick(100.0)).label is None


def test_prediction_distribution_is_validated_and_keyed_by_action():
    pred = Prediction("ON", 0.6, {"ON": 0.6, "OFF": 0.3, "NOOP": 0.1})
    assert pred.distribution[ON] == 0.6 and pred.prob_bound(Action.OFF) == 0.3
    with pytest.raises(ValueError, match="distribution"):
        Prediction(ON, 0.6, {"ON": 1.2})
    with pytest.raises(ValueError):
        Prediction(ON, 0.6, {"MAYBE": 0.2})


def test_ignored_window_is_the_override_window(policy):
    policy.on_utterance("a", p(ON, 0.1), relay_on=False, now=0.0)
    assert policy.deadline == 10.0
    r = only(policy.on_flip(True, now=9.0))  # after the ask window, inside the override window
    assert r.source is LabelSource.MANUAL


# --- ambiguous cases -----------------------------------------------------------------------
def test_flip_with_no_open_interaction_labels_nothing(policy):
    assert policy.on_flip(True, now=1.0) == []
    assert policy.tick(100.0) == []


def test_second_utterance_closes_previous_without_label(policy):
    policy.on_utterance("a", p(ON, 0.5), relay_on=False, now=0.0)
    step = policy.on_utterance("b", p(ON, 0.9), relay_on=False, now=2.0)
    r = only(step.closed)
    assert (r.key, r.label, r.source) == ("a", None, None)
    assert "superseded" in r.reason
    assert policy.open.key == "b"
    r = only(policy.on_flip(False, now=3.0))  # the flip belongs to "b" only
    assert (r.key, r.label, r.source) == ("b", NOOP, LabelSource.OVERRIDE)


def test_second_utterance_after_expired_window_resolves_previous_normally(policy):
    policy.on_utterance("a", p(ON, 0.9), relay_on=False, now=0.0)
    step = policy.on_utterance("b", p(NOOP, 0.9), relay_on=True, now=30.0)
    r = only(step.closed)
    assert (r.key, r.label, r.source) == ("a", ON, LabelSource.CONFIRMED)


def test_close_at_shutdown(policy):
    policy.on_utterance("a", p(ON, 0.9), relay_on=False, now=0.0)
    r = only(policy.close(now=1.0))
    assert r.label is None and "shutdown" in r.reason
    assert policy.close(now=2.0) == []


# --- a wording left alone in both relay states ---------------------------------------------
def test_a_wording_left_alone_with_the_relay_on_and_off_is_not_a_command(policy):
    """"S or no command" with the relay on, then with it off: only "no command" fits both."""
    even = p(ON, 0.3, ON=0.35, OFF=0.35, NOOP=0.3)  # ignored; either state likelier than NOOP
    policy.on_utterance("a", even, relay_on=True, now=0.0, text="Lights down to seven")
    first = only(policy.tick(100.0))
    assert first.label is None and "ambiguous" in first.reason
    # another wording, and the same one in the same state, stay ambiguous
    policy.on_utterance("b", even, relay_on=False, now=200.0, text="play my playlist")
    assert only(policy.tick(300.0)).label is None
    policy.on_utterance("c", even, relay_on=True, now=400.0, text="lights down to seven")
    assert only(policy.tick(500.0)).label is None
    # the same wording (case and spaces aside) with the relay off: NOOP
    policy.on_utterance("d", even, relay_on=False, now=600.0, text="lights  DOWN to seven")
    r = only(policy.tick(700.0))
    assert (r.label, r.source) == (NOOP, LabelSource.CONFIRMED)
    assert "left alone before while ON" in r.reason
    # and "play my playlist", left alone while OFF before, is settled with the relay on
    policy.on_utterance("e", even, relay_on=True, now=800.0, text="play my playlist")
    assert only(policy.tick(900.0)).label is NOOP


def test_a_label_clears_what_the_silences_said(policy):
    even = p(ON, 0.3, ON=0.35, OFF=0.35, NOOP=0.3)
    policy.on_utterance("a", even, relay_on=True, now=0.0, text="toggle the light")
    assert only(policy.tick(100.0)).label is None
    policy.on_utterance("b", even, relay_on=True, now=200.0, text="toggle the light")
    assert only(policy.on_flip(False, now=201.0)).label is OFF  # the person flipped: a command
    policy.on_utterance("c", even, relay_on=False, now=300.0, text="toggle the light")
    r = only(policy.tick(400.0))
    assert r.label is None and "left alone before" not in r.reason


def test_asked_and_answered_no_remember_the_state_too(policy):
    """An ask about the relay's own state left alone, and a bare "no" to the other state, both
    say "S or no command"; with the relay in the other state next time: NOOP."""
    policy.on_utterance("a", p(ON, 0.6, ON=0.6, OFF=0.1, NOOP=0.3), relay_on=True, now=0.0,
                        text="lights up")
    assert only(policy.tick(100.0)).label is None  # asked ON while ON, no flip
    policy.on_utterance("b", p(ON, 0.6, ON=0.6, OFF=0.3, NOOP=0.1), relay_on=False, now=200.0,
                        text="lights up")
    assert only(policy.tick(300.0)).label is NOOP  # asked ON while OFF, no flip
    policy.on_utterance("c", p(OFF, 0.6, ON=0.3, OFF=0.6, NOOP=0.1), relay_on=True, now=400.0,
                        text="dim it")
    policy.on_answer(False, now=401.0)
    assert only(policy.tick(500.0)).label is None  # "no" to OFF while ON: ON or no command
    policy.on_utterance("d", p(ON, 0.6, ON=0.6, OFF=0.3, NOOP=0.1), relay_on=False, now=600.0,
                        text="dim it")
    policy.on_answer(False, now=601.0)
    assert only(policy.tick(700.0)).label is NOOP


def test_without_a_transcript_nothing_is_remembered(policy):
    even = p(ON, 0.3, ON=0.35, OFF=0.35, NOOP=0.3)
    for i, on in enumerate((True, False, True)):
        policy.on_utterance(i, even, relay_on=on, now=200.0 * i)
        assert only(policy.tick(200.0 * i + 100.0)).label is None
