"""The explicit solution's smoothing (``solution.smoothing``, ``SwitchConfig.alpha_young``): a
model learning from empty starts at ``alpha_young`` and falls toward ``alpha`` with its labels;
a starting model's owner's part, the shipped model's recipe (``train switch --set``) and
checkpoints written before the field solve flat at ``alpha``, as before."""

from __future__ import annotations

import numpy as np
import pytest

from edge_plm.commands.switch_training import SwitchTrainConfig, SwitchTrainer, switch_overrides
from edge_plm.plm import checkpoint
from edge_plm.switch import solution
from edge_plm.switch.model import SwitchModel
from kit import PHRASES

LINES = [("turn on the light", "ON"), ("lights off please", "OFF"), ("what time is it", "NOOP"),
         ("switch the lamp on", "ON"), ("play some music", "NOOP"), ("kill the lights", "OFF")]


def test_the_smoothing_starts_young_and_falls_to_alpha():
    assert solution.smoothing(0.03, 0.1, 500.0, 0.0) == 0.1
    assert solution.smoothing(0.03, 0.1, 500.0, 500.0) == pytest.approx(0.065)
    values = [solution.smoothing(0.03, 0.1, 500.0, n) for n in (0, 10, 100, 1000, 10_000)]
    assert values == sorted(values, reverse=True) and values[-1] == pytest.approx(0.03, abs=0.004)
    for n in (0.0, 7.0, 7332.0):  # flat: exactly alpha, so a flat model solves bit for bit as before
        assert solution.smoothing(0.03, 0.03, 500.0, n) == 0.03
    assert solution.smoothing(0.03, 0.1, 0.0, 3.0) == 0.03


@pytest.mark.parametrize("bad", [(-0.1, 0.1, 500.0, 1.0), (0.03, -1.0, 500.0, 1.0), (0.03, 0.1, -5.0, 1.0),
                                 (0.03, 0.1, 500.0, -1.0)])
def test_the_smoothing_refuses_negative_settings(bad):
    with pytest.raises(ValueError, match="smoothing needs"):
        solution.smoothing(*bad)


def _solved_with(net, alpha: float) -> np.ndarray:
    c = net.config
    seen = np.flatnonzero(net.df[:net.n_active] > 0.5)
    return solution.explicit_solution(net.F, seen, net.class_mass, net.class_counts > 0.5, alpha, c.class_balance)


def test_a_model_from_empty_solves_with_the_smoothing_of_its_labels():
    m = SwitchModel.empty("potato")
    c = m.config
    assert c.alpha_young > c.alpha  # the default: a young model smooths more
    for k, (text, label) in enumerate(LINES, start=1):
        m.learn(text, label)
        seen = np.flatnonzero(m.net.df[:m.net.n_active] > 0.5)
        want = _solved_with(m.net, solution.smoothing(c.alpha, c.alpha_young, c.young_n, float(k)))
        np.testing.assert_array_equal(m.net.base[seen], want)
    flat = _solved_with(m.net, c.alpha)
    assert not np.allclose(m.net.base[np.flatnonzero(m.net.df[:m.net.n_active] > 0.5)], flat)


def test_a_starting_models_owner_part_solves_flat():
    m = SwitchModel.empty("potato")
    for text, label in LINES:
        m.learn(text, label)
    m.mark_start()
    assert m.config.alpha_young == m.config.alpha and m.net.config.alpha_young == m.config.alpha
    m.learn("abracadabra", "ON")
    m.learn("nox", "OFF")
    seen = np.flatnonzero(m.net.df[:m.net.n_active] > 0.5)
    np.testing.assert_array_equal(m.net.base[seen], _solved_with(m.net, m.config.alpha))


def test_a_checkpoint_from_before_the_young_smoothing_loads_flat(tmp_path):
    m = SwitchModel.empty("potato")
    for text, label in LINES:
        m.learn(text, label)
    m.save(tmp_path / "new.npz")
    kept = SwitchModel.load(tmp_path / "new.npz").config
    assert kept.alpha_young == m.config.alpha_young == 0.1  # kept as written
    arrays, meta = checkpoint.load(tmp_path / "new.npz")
    for name in ("alpha_young", "young_n"):
        del meta["config"][name]
    checkpoint.save(tmp_path / "old.npz", arrays, meta)
    old = SwitchModel.load(tmp_path / "old.npz").config
    assert old.alpha_young == old.alpha == 0.03


def test_the_starting_recipe_is_set_on_the_trainer(tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text("".join(f'{{"text": "{t}", "label": "{y}"}}\n' for t, y in PHRASES))
    recipe = switch_overrides(["alpha_young=0.03", "bigram_weight=0.5"])
    assert recipe == {"alpha_young": 0.03, "bigram_weight": 0.5}
    log = SwitchTrainer(SwitchTrainConfig(steps=0, overrides=recipe), data, tmp_path / "start").run()
    start = SwitchModel.load(log["summary"]["checkpoint"]).config
    assert start.alpha_young == start.alpha and start.bigram_weight == 0.5
    log = SwitchTrainer(SwitchTrainConfig(steps=0), data, tmp_path / "default").run()
    assert SwitchModel.load(log["summary"]["checkpoint"]).config.alpha_young == 0.1


def test_switch_overrides_are_typed_and_checked():
    assert switch_overrides(["attention=false", "attention_widths=8,16", "refine_steps=3"]) == {
        "attention": False, "attention_widths": (8, 16), "refine_steps": 3}
    for bad in ("nope=1", "name=orange", "alpha", "refine_steps=2.5", "attention=maybe"):
        with pytest.raises(ValueError):
            switch_overrides([bad])


def test_train_switch_refuses_a_bad_set(tmp_path):
    from typer.testing import CliRunner

    from edge_plm.cli import app

    data = tmp_path / "data.jsonl"
    data.write_text("".join(f'{{"text": "{t}", "label": "{y}"}}\n' for t, y in PHRASES))
    res = CliRunner().invoke(app, ["train", "switch", "--data", str(data), "--out", str(tmp_path / "o"),
                                   "--set", "no_such_field=1"])
    assert res.exit_code == 2 and res.stderr.startswith("error: --set:"), res.output
    assert "Traceback" not in res.output
