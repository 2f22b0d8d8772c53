"""The device-side adjustments of the model's distribution: the tempered class prior and the
evidence weighting (``SwitchModel.predict``), and their config checks."""

import numpy as np
import pytest

from edge_plm.switch.model import SwitchModel
from edge_plm.config.settings import ConfigError, parse


def one_label_model() -> SwitchModel:
    m = SwitchModel.empty("potato", kernel="numpy")
    m.learn("turn on the light", "ON")
    return m


def test_one_labelled_action_knows_nothing_and_evidence_weighting_keeps_the_ranking():
    m = one_label_model()
    raw = m.predict("turn off the light")  # one action labelled: nothing to tell apart yet
    # NOOP at the labels' add-one shares: one ON label gives NOOP (0 + 1) / (1 + 3), never acts
    assert raw.action == "NOOP" and raw.confidence == pytest.approx(1 / 4)
    assert raw.distribution["ON"] == pytest.approx(2 / 4)
    chatter = SwitchModel.empty("potato", kernel="numpy")
    for text in ("what time is it", "play some jazz", "is it raining"):
        chatter.learn(text, "NOOP")
    assert chatter.predict("what is the time").confidence == pytest.approx(4 / 6)
    m.learn("what time is it", "NOOP")
    raw = m.predict("turn on the lamp")
    k = 3.0
    tempered = m.predict("turn on the lamp", evidence_prior=k)
    assert tempered.action == raw.action  # a mix with uniform keeps the ranking
    n = 2
    for a, p in raw.distribution.items():  # p' = (n p + k/3) / (n + k)
        assert tempered.distribution[a] == pytest.approx((n * p + k / 3) / (n + k))
    assert sum(tempered.distribution.values()) == pytest.approx(1.0)


def test_evidence_weighting_fades_as_labels_accumulate():
    m = one_label_model()
    first = m.predict("turn on the light", evidence_prior=3.0).confidence
    for _ in range(3):
        m.learn("turn off the light", "OFF")
        m.learn("what time is it", "NOOP")
        m.learn("turn on the light", "ON")
    raw = m.predict("turn on the light")
    later = m.predict("turn on the light", evidence_prior=3.0)
    n = float(m.net.class_counts.sum())
    assert n == 10
    assert later.confidence == pytest.approx((n * raw.confidence + 1.0) / (n + 3.0))
    assert later.confidence > first
    assert m.predict("turn on the light", evidence_prior=0.0) == raw


def test_negative_evidence_prior_is_refused():
    with pytest.raises(ValueError, match="evidence_prior"):
        one_label_model().predict("x", evidence_prior=-1.0)


@pytest.mark.parametrize("key", ["evidence_prior", "prior_strength"])
def test_config_refuses_negative_prior_settings(key):
    with pytest.raises(ConfigError, match=key):
        parse(f"[model]\n{key} = -0.5\n")


def test_config_reads_evidence_prior():
    assert parse("[model]\nevidence_prior = 5.0\n").model.evidence_prior == 5.0
    assert np.isclose(parse("").model.evidence_prior, 3.0)


def test_a_state_nobody_taught_shares_the_top_state_and_is_not_acted_on():
    from edge_plm.switch.confidence import untaught_states
    m = SwitchModel.empty("potato", kernel="numpy")
    for text in ("turn the lights on in the kitchen", "switch on the lamp", "lights on please"):
        m.learn(text, "ON")
    for text in ("what time is it", "play some jazz", "is it raining", "set a timer"):
        m.learn(text, "NOOP")
    young = m.predict("turn the lights off in the kitchen")  # OFF never labelled
    assert young.action == "ON"
    assert young.distribution["ON"] == pytest.approx(young.distribution["OFF"])
    assert young.confidence <= 0.5 + 1e-12 and sum(young.distribution.values()) == pytest.approx(1.0)
    m.learn("turn off the lamp", "OFF")  # both states taught: the network's own split
    taught = m.predict("turn the lights on in the hall")
    assert taught.distribution["ON"] != pytest.approx(taught.distribution["OFF"])
    y = np.array([0.7, 0.1, 0.2])
    assert untaught_states(np.array([3.0, 0.0, 4.0]), 0, y).tolist() == pytest.approx([0.4, 0.4, 0.2])
    assert untaught_states(np.array([3.0, 1.0, 4.0]), 0, y) is y  # every state labelled
    assert untaught_states(np.array([3.0, 0.0, 4.0]), 2, y) is y  # NOOP on top: nothing to share
