"""`SwitchModel.scrub`: after a forget, the unit and word strings of forgotten text are not in
the model's checkpoint, the remaining examples are predicted exactly as before, a forgotten
word heard again gets a fresh id, and checkpoints written before tombstones still load."""

import numpy as np

from edge_plm.switch.model import SwitchModel
from kit import PHRASES

SECRET = "xylofrump"
SECRET_TEXT = f"my bank pin is {SECRET} seven"


def _model(start_with_secret: bool = False) -> tuple[SwitchModel, int]:
    """An empty potato model; returns it and the key of the secret example. With
    `start_with_secret` the secret comes first, so its words are query words."""
    m = SwitchModel.empty("potato", seed=0)
    rows = list(PHRASES) * 2
    at = 0 if start_with_secret else 7
    rows.insert(at, (SECRET_TEXT, "NOOP"))
    for text, label in rows:
        m.learn(text, label)
    m.observe("kitchen fan on")  # unlabelled, kept
    return m, at


def _probe(m: SwitchModel) -> list[str]:
    return [t for t, _ in PHRASES] + ["kitchen fan on", "turn on the kitchen fan", "pin seven"]


def test_scrub_takes_forgotten_strings_out_and_keeps_predictions(tmp_path):
    for first in (False, True):
        m, key = _model(first)
        if first:  # the secret's words are among the query words
            assert SECRET in m.words.words[: m.config.query_words]
        m.forget_example(key)
        before = m.predict_many(_probe(m))
        n_units, n_words = len(m.units), len(m.words)
        gone = m.scrub(["kitchen fan on"])
        assert gone["units"] > 0 and gone["words"] >= 3  # my, bank, pin, is, xylofrump, seven
        assert len(m.units) == n_units and len(m.words) == n_words  # slots stay
        assert np.array_equal(m.predict_many(_probe(m)), before)
        assert not any(u is not None and SECRET[1:5] in u for u in m.units.units)
        assert SECRET not in m.words.index and f"w:{SECRET}" not in m.units.index
        assert "w:kitchen" in m.units.index and "kitchen" in m.words.index  # observed, kept
        path = m.save(tmp_path / f"scrubbed-{first}.npz")
        data = path.read_bytes()
        for s in (SECRET, "bank", "w:pin", "lofr"):
            assert s.encode() not in data, s
        again = SwitchModel.load(path)
        assert np.array_equal(again.predict_many(_probe(m)), before)
        assert again.units.units.count(None) == m.units.units.count(None)
        # heard again: fresh ids at the end, never the tombstoned slots
        again.learn(SECRET_TEXT, "NOOP")
        assert again.units.index[f"w:{SECRET}"] >= n_units
        assert again.words.index[SECRET] >= n_words


def test_scrub_keeps_what_remaining_examples_use(tmp_path):
    m, key = _model()
    m.scrub([])  # nothing forgotten: only the unlabelled transcript's own strings can go
    assert "w:kitchen" not in m.units.index
    for text, _ in PHRASES:
        for u in m.units.strings_of(text):
            assert u in m.units.index
    assert f"w:{SECRET}" in m.units.index  # the secret example is still learned


def test_checkpoints_without_tombstones_still_load(tmp_path):
    m, _ = _model()
    path = m.save(tmp_path / "plain.npz")
    again = SwitchModel.load(path)
    assert again.units.units == m.units.units and None not in again.units.units
    assert np.array_equal(again.predict_many(_probe(m)), m.predict_many(_probe(m)))


def test_forget_examples_at_once_takes_every_one_out():
    m, key = _model()
    keys = [key, key + 1, key + 2]
    m.forget_examples(keys)
    assert m.removed == set(keys)
    assert all(m.examples[k][0] == [] for k in keys)
    assert SECRET_TEXT not in m.memory
    one, k1 = _model()
    two, _ = _model()
    one.forget_example(k1)
    two.forget_examples([k1])
    assert np.array_equal(one.predict_many(_probe(one)), two.predict_many(_probe(two)))
