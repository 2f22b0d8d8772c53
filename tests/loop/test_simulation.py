"""The replays' simulated person: the flips it makes, and the labels the policy gives them."""

from __future__ import annotations

import pytest

from edge_plm.config.settings import PolicyConfig
from edge_plm.decide.policy import Action, LabelSource, Policy, Prediction
from edge_plm.loop.simulation import SimulatedFlip, SimulatedPerson

CFG = PolicyConfig(act_threshold=0.8, ask_threshold=0.4, ask_window_s=8.0, override_window_s=10.0)
ON, OFF, NOOP = Action.ON, Action.OFF, Action.NOOP


def p(action: Action, confidence: float, **dist: float) -> Prediction:
    """A prediction; keyword arguments (ON=, OFF=, NOOP=) give its distribution."""
    return Prediction(action, confidence, dist or None)


def only(resolutions):
    assert len(resolutions) == 1, resolutions
    return resolutions[0]


@pytest.mark.parametrize("wants,before,after,flips", [
    (ON, False, True, []),  # device acted right
    (ON, False, False, [SimulatedFlip(11.5, True)]),  # asked/ignored/missed: person does it
    (OFF, True, False, []),
    (OFF, True, True, [SimulatedFlip(11.5, False)]),
    (NOOP, False, True, [SimulatedFlip(11.5, False)]),  # acted wrongly: person reverts
    (NOOP, True, True, []),
    (ON, True, True, []),  # already as wanted: nothing to do
])
def test_simulated_person(wants, before, after, flips):
    assert SimulatedPerson(reaction_s=1.5).react(wants, before, after, now=10.0) == flips


def test_simulated_person_drives_policy_to_expected_labels():
    """The person + policy loop gives the right label for each kind of outcome."""
    person = SimulatedPerson(reaction_s=1.0)
    cases = [  # wants, prediction, relay before -> label, source
        (ON, p(ON, 0.9), False, ON, LabelSource.CONFIRMED),
        (NOOP, p(ON, 0.9), False, NOOP, LabelSource.OVERRIDE),
        (OFF, p(OFF, 0.5), True, OFF, LabelSource.ASKED),
        (NOOP, p(ON, 0.5, ON=0.5, OFF=0.1, NOOP=0.4), False, NOOP, LabelSource.ASKED),
        (OFF, p(ON, 0.5, ON=0.5, OFF=0.3, NOOP=0.2), False, None, None),  # nothing to flip
        (ON, p(NOOP, 0.95), False, ON, LabelSource.MANUAL),
        (NOOP, p(NOOP, 0.95), True, NOOP, LabelSource.CONFIRMED),
    ]
    t = 0.0
    for i, (wants, pred, before, label, source) in enumerate(cases):
        policy = Policy(CFG)
        step = policy.on_utterance(i, pred, relay_on=before, now=t)
        after = step.drive.state if step.drive is not None else before
        resolved = []
        for flip in person.react(wants, before, after, now=t):
            resolved += policy.on_flip(flip.desired, flip.at)
        resolved += policy.tick(t + 100.0)
        r = only(resolved)
        assert (r.label, r.source) == (label, source), (i, r)


def test_simulated_person_rejects_bad_reaction_time():
    with pytest.raises(ValueError):
        SimulatedPerson(reaction_s=0)
