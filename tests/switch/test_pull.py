"""The refinement's pull toward the explicit solution (``UnitNet.l2``): ``l2`` while a label
refines on every example, ``replay_l2`` once the model holds more than one replay sample;
starting models and checkpoints written before the field keep one pull; a pull the gradient
steps cannot hold is refused."""

from __future__ import annotations

import numpy as np
import pytest

from edge_plm.plm import checkpoint
from edge_plm.switch.config import STARTING_OVERRIDES, SwitchConfig
from edge_plm.switch.model import SwitchModel

LINES = [("turn on the light", "ON"), ("lights off please", "OFF"), ("what time is it", "NOOP"),
         ("switch the lamp on", "ON"), ("play some music", "NOOP"), ("kill the lights", "OFF")]


def _learned(n: int, **overrides) -> SwitchModel:
    m = SwitchModel.empty("potato", **{"replay_rows": 4, **overrides})
    for i in range(n):
        text, label = LINES[i % len(LINES)]
        m.learn(f"{text} {i}", label)
    return m


def test_the_pull_firms_once_a_label_refines_on_a_sample():
    assert _learned(5).net.l2() == 0.02  # 5 examples = one sample of 4 + the label: every example
    assert _learned(6).net.l2() == 0.05  # beyond: a seeded sample of them
    assert _learned(6, replay_l2=0.0).net.l2() == 0.02  # 0: one pull throughout
    assert _learned(6, replay_rows=0).net.l2() == 0.02  # no replay sample: every label refines on all


def test_the_firmer_pull_changes_what_is_learned_from_the_sample_on():
    a, b = _learned(5), _learned(5, replay_l2=0.0)
    assert np.array_equal(a.net.delta, b.net.delta)  # the same until the samples start
    a, b = _learned(12), _learned(12, replay_l2=0.0)
    assert not np.array_equal(a.net.delta, b.net.delta)
    assert np.abs(a.net.delta).sum() < np.abs(b.net.delta).sum()  # pulled closer to the solution


def test_starting_models_and_old_checkpoints_keep_one_pull(tmp_path):
    assert STARTING_OVERRIDES["replay_l2"] == 0.0
    m = _learned(6)
    m.save(tmp_path / "new.npz")
    assert SwitchModel.load(tmp_path / "new.npz").config.replay_l2 == 0.05
    arrays, meta = checkpoint.load(tmp_path / "new.npz")
    del meta["config"]["replay_l2"]
    checkpoint.save(tmp_path / "old.npz", arrays, meta)
    old = SwitchModel.load(tmp_path / "old.npz")
    assert old.config.replay_l2 == 0.0 and old.net.l2() == 0.02


@pytest.mark.parametrize("bad", [{"l2": 0.2}, {"replay_l2": 0.25}, {"l2": -0.01}, {"refine_lr": 40.0}])
def test_a_pull_the_steps_cannot_hold_is_refused(bad):
    # at refine_lr x pull >= 2 each step grows an untouched delta instead of shrinking it: a
    # trial at l2 0.2 (x 10) ended at chance, .333 balanced accuracy, with no other sign
    with pytest.raises(ValueError, match="diverges"):
        SwitchConfig(name="potato", **bad)
