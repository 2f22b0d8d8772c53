"""Learner on a real SQLite replay buffer and real checkpoints: holdout, versions, rollback."""

from __future__ import annotations

import pytest

from edge_plm.plm.dialogue import SwitchModel
from edge_plm.learner import HoldoutScore, Learner, LearnerConfig, is_holdout_id
from edge_plm.settings import ConfigError, ModelConfig, parse
from edge_plm.store import ReplayStore

PHRASES = [("turn on the light", "ON"), ("turn off the light", "OFF"),
           ("what time is it", "NOOP")]
FLIP = {"ON": "OFF", "OFF": "NOOP", "NOOP": "ON"}


class Clock:
    def __init__(self) -> None:
        self.t = 1_700_000_000.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


@pytest.fixture
def store(tmp_path):
    s = ReplayStore(tmp_path / "db" / "edge-plm.db", clock=Clock())
    yield s
    s.close()


def cfg(**kw) -> LearnerConfig:
    base = dict(version_every=6, holdout_min=4, holdout_fraction=0.2)
    base.update(kw)
    return LearnerConfig(**base)


def feed(learner: Learner, store: ReplayStore, n: int, flip: bool = False) -> list:
    """n labelled interactions cycling through PHRASES, stored then given to the learner.

    flip: every label that will be learned is wrong (a bad stretch of labels); the holdout
    slice keeps the true labels, so a model that learned the wrong ones scores worse on it.
    """
    outcomes = []
    for i in range(n):
        text, label = PHRASES[i % len(PHRASES)]
        iid = store.add_interaction(transcript=text)
        if flip and not is_holdout_id(iid, learner.cfg.holdout_fraction):
            label = FLIP[label]
        store.set_label(iid, label, "asked")
        outcomes.append(learner.on_label(iid, text, label))
    return outcomes


def test_holdout_is_deterministic_and_about_the_fraction():
    picks = [i for i in range(1, 101) if is_holdout_id(i, 0.2)]
    assert picks == [i for i in range(1, 101) if is_holdout_id(i, 0.2)]
    assert 17 <= len(picks) <= 23
    assert any(is_holdout_id(i, 0.2) for i in range(1, 6))  # from the first labels on
    assert not any(is_holdout_id(i, 0.0) for i in range(1, 101))


def test_holdout_labels_are_marked_and_not_learned(store, tmp_path):
    learner = Learner(store, cfg(version_every=1000), tmp_path / "ckpt")
    outcomes = feed(learner, store, 20)
    held = [o for o in outcomes if o.holdout]
    assert held and all(o.loss is None for o in held)
    assert len(learner.model.examples) == 20 - len(held)
    rows = store.interactions(oldest_first=True)
    assert [r.holdout for r in rows] == [o.holdout for o in outcomes]
    assert [r.holdout for r in rows] == [is_holdout_id(r.id, 0.2) for r in rows]


def test_learns_an_easy_pattern(store, tmp_path):
    learner = Learner(store, cfg(version_every=1000), tmp_path / "ckpt")
    feed(learner, store, 24)
    for text, label in PHRASES:
        assert learner.predict(text).action == label


def test_versions_checkpoint_and_parent(store, tmp_path):
    learner = Learner(store, cfg(), tmp_path / "ckpt")
    feed(learner, store, 30)
    versions = store.model_versions()
    assert len(versions) >= 3
    assert versions[0].parent is None and versions[0].metrics["gate"] == "first version"
    for prev, v in zip(versions, versions[1:]):
        assert v.parent == prev.version
    active = store.active_model_version()
    assert active.version == learner.version == versions[-1].version
    assert (tmp_path / "ckpt" / f"{active.version}.npz").is_file()
    assert active.metrics["holdout_n"] == len(store.labeled_examples(holdout=True))
    assert active.n_train == len(learner.model.examples) - learner.pending_labels
    assert all(v.status == "retired" for v in versions[:-1])


def test_worse_candidate_is_rolled_back_automatically(store, tmp_path):
    learner = Learner(store, cfg(), tmp_path / "ckpt")
    feed(learner, store, 36)
    assert store.active_model_version().metrics["balanced_accuracy"] == 1.0
    outcomes = feed(learner, store, 40, flip=True)  # deliberately wrong labels
    events = [o.event for o in outcomes if o.event is not None]
    rolled_events = [e for e in events if e.status == "rolled_back"]
    assert rolled_events, [e.reason for e in events]
    for e in rolled_events:
        assert e.candidate.balanced_accuracy < e.baseline.balanced_accuracy
    rolled = [v for v in store.model_versions() if v.status == "rolled_back"]
    assert [v.version for v in rolled] == [e.version for e in rolled_events]
    assert all(v.path is None and v.metrics["gate"] == "rolled back" for v in rolled)
    assert all(v.parent == e.parent for v, e in zip(rolled, rolled_events))
    active = store.active_model_version()
    assert learner.version == active.version
    # the wrong labels never reached an active version: it still gets the holdout right
    assert learner.score(SwitchModel.load(active.path)).balanced_accuracy == 1.0
    if outcomes[-1].event is not None and outcomes[-1].event.status == "rolled_back":
        live = {t: learner.predict(t).distribution for t, _ in PHRASES}
        saved = SwitchModel.load(active.path)
        assert live == {t: saved.predict(t).distribution for t, _ in PHRASES}


def test_manual_rollback(store, tmp_path):
    learner = Learner(store, cfg(), tmp_path / "ckpt")
    feed(learner, store, 30)
    first = store.model_versions()[0].version
    learner.rollback(first)
    assert learner.version == first
    assert store.active_model_version().version == first
    assert len(learner.model.examples) == store.model_versions()[0].n_train
    with pytest.raises(LookupError):
        learner.rollback("v9999")


def test_start_up_loads_active_and_falls_back_from_a_corrupt_checkpoint(store, tmp_path, caplog):
    learner = Learner(store, cfg(), tmp_path / "ckpt")
    feed(learner, store, 30)
    versions = store.model_versions()
    again = Learner.open(store, cfg(), tmp_path / "ckpt")
    assert again.version == learner.version
    saved = SwitchModel.load(store.active_model_version().path)
    assert again.predict("turn on the light") == saved.predict("turn on the light")
    assert len(again.model.examples) == store.active_model_version().n_train
    # damage the active checkpoint: the previous good one takes over, and the log says so
    active_path = store.active_model_version().path
    with open(active_path, "r+b") as f:
        f.seek(100)
        f.write(b"\x00" * 200)
    fallback = Learner.open(store, cfg(), tmp_path / "ckpt")
    assert fallback.version == versions[-2].version
    assert store.active_model_version().version == versions[-2].version
    statuses = {v.version: v.status for v in store.model_versions()}
    assert statuses[versions[-1].version] == "rolled_back"
    assert any("cannot be loaded" in r.getMessage() for r in caplog.records)


def test_no_loadable_checkpoint_rebuilds_from_the_database(store, tmp_path):
    learner = Learner(store, cfg(), tmp_path / "ckpt")
    feed(learner, store, 30)
    for v in store.model_versions():
        with open(v.path, "wb") as f:
            f.write(b"not a checkpoint")
    rebuilt = Learner.open(store, cfg(), tmp_path / "ckpt")
    active = store.active_model_version()
    assert active.metrics["gate"] == "rebuild" and rebuilt.version == active.version
    non_holdout = len(store.labeled_examples(holdout=False))
    assert len(rebuilt.model.examples) == non_holdout
    for text, label in PHRASES:
        assert rebuilt.predict(text).action == label


def test_rebuild_skips_holdout_and_rolled_back_windows(store, tmp_path):
    learner = Learner(store, cfg(), tmp_path / "ckpt")
    feed(learner, store, 36)
    feed(learner, store, 40, flip=True)
    rolled = [v for v in store.model_versions() if v.status == "rolled_back"]
    assert rolled
    skipped = sum(v.metrics["labels_in_window"] for v in rolled)
    learner.rebuild_from_store()
    metrics = store.active_model_version().metrics
    assert metrics["skipped_rolled_back"] == skipped
    assert len(learner.model.examples) == metrics["labels_in_window"]
    for text, label in PHRASES:
        assert learner.predict(text).action == label


# --- the gate: margin and holdout coverage ----------------------------------------------------
def scripted_scores(learner, cand_ba: float, base_ba: float, per_class: dict):
    """Make `score` return fixed holdout scores: `cand_ba` for the live model, `base_ba` for
    the active one (the gate logic is what is under test, not the model)."""
    n = sum(per_class.values())

    def score(model):
        ba = cand_ba if model is learner.model else base_ba
        return HoldoutScore(n, ba, dict(per_class))
    learner.score = score


def first_version(store, tmp_path, **kw):
    learner = Learner(store, cfg(holdout_fraction=0.0, **kw), tmp_path / "ckpt")
    feed(learner, store, 6)  # all three classes learned; v0001 = "first version"
    assert store.active_model_version().metrics["gate"] == "first version"
    return learner


@pytest.mark.parametrize("cand,status,gate", [
    (0.80, "active", "passed"),
    (0.775, "active", "passed"),  # 0.025 lower: within the 0.03 margin (noise)
    (0.76, "rolled_back", "rolled back"),  # 0.04 lower: clearly worse
])
def test_rollback_margin(store, tmp_path, cand, status, gate):
    learner = first_version(store, tmp_path, rollback_margin=0.03)
    scripted_scores(learner, cand, 0.80, {"ON": 3, "OFF": 3, "NOOP": 4})
    event = feed(learner, store, 6)[-1].event
    assert event.status == status
    assert store.model_versions()[-1].metrics["gate"] == gate


@pytest.mark.parametrize("per_class,why", [
    ({"ON": 1, "OFF": 5, "NOOP": 6}, "ON=1"),  # a trained class with one holdout row
    ({"ON": 0, "OFF": 6, "NOOP": 6}, "ON=0"),
])
def test_holdout_lacking_a_trained_class_cannot_roll_back(store, tmp_path, per_class, why):
    learner = first_version(store, tmp_path)
    scripted_scores(learner, 0.1, 0.9, per_class)  # would be a clear rollback if judged
    event = feed(learner, store, 6)[-1].event
    assert event.status == "active" and why in event.reason
    metrics = store.model_versions()[-1].metrics
    assert metrics["gate"] == "holdout lacks classes" and why in metrics["gate_reason"]
    assert metrics["holdout_classes"] == per_class
    assert metrics["trained_classes"] == ["ON", "OFF", "NOOP"]


def test_holdout_too_small_is_recorded(store, tmp_path):
    learner = first_version(store, tmp_path, holdout_min=20)
    scripted_scores(learner, 0.1, 0.9, {"ON": 5, "OFF": 5, "NOOP": 5})
    event = feed(learner, store, 6)[-1].event
    assert event.status == "active" and "15 < 20" in event.reason
    assert store.model_versions()[-1].metrics["gate"] == "holdout too small"


def test_untrained_class_does_not_need_holdout_rows(store, tmp_path):
    learner = Learner(store, cfg(holdout_fraction=0.0), tmp_path / "ckpt")
    for i in range(6):  # ON and OFF only
        text, label = PHRASES[i % 2]
        iid = store.add_interaction(transcript=text)
        store.set_label(iid, label, "asked")
        learner.on_label(iid, text, label)
    scripted_scores(learner, 0.1, 0.9, {"ON": 3, "OFF": 3, "NOOP": 0})
    for i in range(6):
        text, label = PHRASES[i % 2]
        iid = store.add_interaction(transcript=text)
        store.set_label(iid, label, "asked")
        event = learner.on_label(iid, text, label).event
    assert event.status == "rolled_back"


def test_config_comes_from_model_settings():
    m = ModelConfig(version_every=7, rollback_margin=0.05, holdout_min=12)
    lc = LearnerConfig.from_settings(m)
    assert (lc.version_every, lc.rollback_margin, lc.holdout_min) == (7, 0.05, 12)
    assert LearnerConfig.from_settings(m, version_every=3).version_every == 3
    assert LearnerConfig.from_settings(ModelConfig()).rollback_margin == ModelConfig().rollback_margin
    with pytest.raises(ConfigError, match="rollback_margin"):
        parse("[model]\nrollback_margin = -0.1\n")
    assert parse("[model]\nversion_every = 5\n").model.version_every == 5
