"""Learner on a real SQLite replay buffer and real checkpoints: holdout, versions, rollback."""

from __future__ import annotations

import pytest

from edge_plm.learning import gate as gate_module
from edge_plm.switch.model import SwitchModel
from edge_plm.learning.learner import HoldoutScore, Learner, LearnerConfig, is_holdout_id
from edge_plm.config.settings import ConfigError, ModelConfig, parse
from edge_plm.store import ReplayStore
from kit import PHRASES as KIT_PHRASES, FakeClock
from edge_plm.learning.household import Household

ONE_DEVICE = Household.of_one()

PHRASES = KIT_PHRASES[:3]
FLIP = {"ON": "OFF", "OFF": "NOOP", "NOOP": "ON"}


@pytest.fixture
def store(tmp_path):
    s = ReplayStore(tmp_path / "db" / "edge-plm.db", clock=FakeClock(tick=1.0))
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
    learner = Learner(store, cfg(version_every=1000), tmp_path / "ckpt", household=ONE_DEVICE)
    outcomes = feed(learner, store, 20)
    held = [o for o in outcomes if o.holdout]
    assert held and all(o.loss is None for o in held)
    assert len(learner.model.examples) == 20 - len(held)
    rows = store.interactions(oldest_first=True)
    assert [r.holdout for r in rows] == [o.holdout for o in outcomes]
    assert [r.holdout for r in rows] == [is_holdout_id(r.id, 0.2) for r in rows]


def test_learns_an_easy_pattern(store, tmp_path):
    learner = Learner(store, cfg(version_every=1000), tmp_path / "ckpt", household=ONE_DEVICE)
    feed(learner, store, 24)
    for text, label in PHRASES:
        assert learner.predict(text).action == label


def test_versions_checkpoint_and_parent(store, tmp_path):
    learner = Learner(store, cfg(), tmp_path / "ckpt", household=ONE_DEVICE)
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


def test_worse_candidate_is_rolled_back_but_its_labels_are_kept(store, tmp_path):
    """A rollback rejects the model, never the person's labels: the candidate is recorded
    rolled back (no checkpoint), and its labels are learned again onto the last good model,
    saved as the next active version (gate "relearned")."""
    learner = Learner(store, cfg(holdout_fraction=0.5), tmp_path / "ckpt", household=ONE_DEVICE)
    feed(learner, store, 60)
    assert store.active_model_version().metrics["balanced_accuracy"] == 1.0
    outcomes = feed(learner, store, 60, flip=True)  # labels the holdout disagrees with
    events = [o.event for o in outcomes if o.event is not None]
    rolled_events = [e for e in events if e.status == "rolled_back"]
    assert rolled_events, [e.reason for e in events]
    for e in rolled_events:
        assert e.candidate.balanced_accuracy < e.baseline.balanced_accuracy
    versions = store.model_versions()
    rolled = [v for v in versions if v.status == "rolled_back"]
    assert [v.version for v in rolled] == [e.version for e in rolled_events]
    assert all(v.path is None and v.metrics["gate"] == "rolled back" for v in rolled)
    assert all(v.parent == e.parent for v, e in zip(rolled, rolled_events))
    relearned = [v for v in versions if (v.metrics or {}).get("gate") == "relearned"]
    assert [v.metrics["rolled_back_candidate"] for v in relearned] == [v.version for v in rolled]
    assert all(v.parent == r.parent for v, r in zip(relearned, rolled))
    active = store.active_model_version()
    assert learner.version == active.version
    # every learnable label is in the live model and in the active checkpoint
    assert learner.unlearned() == 0
    learner.checkpoint_pending()
    from edge_plm.learning.state import unlearned_in_active
    assert unlearned_in_active(store, learner.cfg.holdout_fraction) == 0


def test_manual_rollback(store, tmp_path):
    learner = Learner(store, cfg(), tmp_path / "ckpt", household=ONE_DEVICE)
    feed(learner, store, 30)
    first = store.model_versions()[0].version
    learner.rollback(first)
    assert learner.version == first
    assert store.active_model_version().version == first
    assert len(learner.model.examples) == store.model_versions()[0].n_train
    with pytest.raises(LookupError):
        learner.rollback("v9999")


def test_start_up_loads_active_and_falls_back_from_a_corrupt_checkpoint(store, tmp_path, caplog):
    learner = Learner(store, cfg(), tmp_path / "ckpt", household=ONE_DEVICE)
    feed(learner, store, 30)
    learner.checkpoint_pending()  # a clean stop saves what was learned since the last version
    versions = store.model_versions()
    again = Learner.open(store, cfg(), tmp_path / "ckpt", household=ONE_DEVICE)
    assert again.version == learner.version
    saved = SwitchModel.load(store.active_model_version().path)
    assert again.predict("turn on the light") == saved.predict(
        "turn on the light", prior_strength=again.cfg.prior_strength, evidence_prior=again.cfg.evidence_prior)
    assert len(again.model.examples) == store.active_model_version().n_train
    # damage the active checkpoint: the previous good one takes over, and the log says so
    active_path = store.active_model_version().path
    with open(active_path, "r+b") as f:
        f.seek(100)
        f.write(b"\x00" * 200)
    fallback = Learner.open(store, cfg(), tmp_path / "ckpt", household=ONE_DEVICE)
    # the previous good version is loaded, and what it lacks is learned again on top of it
    active = store.active_model_version()
    assert active.version == fallback.version and active.parent == versions[-2].version
    assert active.metrics["catch_up"]["missing"] > 0 and fallback.unlearned() == 0
    statuses = {v.version: v.status for v in store.model_versions()}
    assert statuses[versions[-1].version] == "rolled_back"
    assert any("cannot be loaded" in r.getMessage() for r in caplog.records)


def test_no_loadable_checkpoint_rebuilds_from_the_database(store, tmp_path):
    learner = Learner(store, cfg(), tmp_path / "ckpt", household=ONE_DEVICE)
    feed(learner, store, 30)
    for v in store.model_versions():
        with open(v.path, "wb") as f:
            f.write(b"not a checkpoint")
    rebuilt = Learner.open(store, cfg(), tmp_path / "ckpt", household=ONE_DEVICE)
    active = store.active_model_version()
    assert active.metrics["gate"] == "rebuild" and rebuilt.version == active.version
    non_holdout = len(store.labeled_examples(holdout=False))
    assert len(rebuilt.model.examples) == non_holdout
    for text, label in PHRASES:
        assert rebuilt.predict(text).action == label


@pytest.fixture()
def after_rollbacks(store, tmp_path):
    """A learner taught 60 right labels, then 60 flipped ones (rolled back), with the
    rolled-back versions."""
    learner = Learner(store, cfg(holdout_fraction=0.5), tmp_path / "ckpt", household=ONE_DEVICE)
    feed(learner, store, 60)
    feed(learner, store, 60, flip=True)
    rolled = [v for v in store.model_versions() if v.status == "rolled_back"]
    assert rolled
    return learner, rolled


def test_rebuild_skips_holdout_but_keeps_labels_of_rolled_back_windows(store, after_rollbacks):
    learner, _ = after_rollbacks
    learner.rebuild_from_store()
    metrics = store.active_model_version().metrics
    assert metrics["skipped_rolled_back"] == 0
    assert len(learner.model.examples) == metrics["labels_in_window"]
    assert metrics["labels_in_window"] == len(store.labeled_examples(holdout=False))
    assert learner.unlearned() == 0


# --- the gate: margin and holdout coverage ----------------------------------------------------
def scripted_scores(monkeypatch, learner, cand_ba: float, base_ba: float, per_class: dict):
    """Make the gate's scores fixed: `cand_ba` for the live model, `base_ba` for the active
    one (the gate logic is what is under test, not the model)."""
    n = sum(per_class.values())

    def score(model, rows=None, preds=None):
        ba = cand_ba if model is learner.model else base_ba
        return HoldoutScore(n, ba, dict(per_class))
    monkeypatch.setattr(gate_module, "score", score)
    monkeypatch.setattr(gate_module, "score_preds", lambda preds, rows: HoldoutScore(n, base_ba, dict(per_class)))


def first_version(store, tmp_path, **kw):
    learner = Learner(store, cfg(holdout_fraction=0.0, **kw), tmp_path / "ckpt", household=ONE_DEVICE)
    feed(learner, store, 6)  # all three classes learned; v0001 = "first version"
    assert store.active_model_version().metrics["gate"] == "first version"
    return learner


@pytest.mark.parametrize("cand,status,gate", [
    (0.80, "active", "passed"),
    (0.775, "active", "passed"),  # 0.025 lower: within the 0.03 margin (noise)
    (0.76, "active", "passed (within noise)"),  # 0.04 lower, but 10 holdout rows: noise
    (0.30, "rolled_back", "rolled back"),  # 0.5 lower: clearly worse
])
def test_rollback_margin(monkeypatch, store, tmp_path, cand, status, gate):
    learner = first_version(store, tmp_path, rollback_margin=0.03)
    scripted_scores(monkeypatch, learner, cand, 0.80, {"ON": 3, "OFF": 3, "NOOP": 4})
    event = feed(learner, store, 6)[-1].event
    assert event.status == status
    row = next(v for v in store.model_versions() if v.version == event.version)
    assert row.metrics["gate"] == gate


@pytest.mark.parametrize("per_class,why", [
    ({"ON": 1, "OFF": 5, "NOOP": 6}, "ON=1"),  # a trained class with one holdout row
    ({"ON": 0, "OFF": 6, "NOOP": 6}, "ON=0"),
])
def test_holdout_lacking_a_trained_class_cannot_roll_back(monkeypatch, store, tmp_path, per_class, why):
    learner = first_version(store, tmp_path)
    scripted_scores(monkeypatch, learner, 0.1, 0.9, per_class)  # would be a clear rollback if judged
    event = feed(learner, store, 6)[-1].event
    assert event.status == "active" and why in event.reason
    metrics = store.model_versions()[-1].metrics
    assert metrics["gate"] == "holdout lacks classes" and why in metrics["gate_reason"]
    assert metrics["holdout_classes"] == per_class
    assert metrics["trained_classes"] == ["ON", "OFF", "NOOP"]


def test_holdout_too_small_is_recorded(monkeypatch, store, tmp_path):
    learner = first_version(store, tmp_path, holdout_min=20)
    scripted_scores(monkeypatch, learner, 0.1, 0.9, {"ON": 5, "OFF": 5, "NOOP": 5})
    event = feed(learner, store, 6)[-1].event
    assert event.status == "active" and "15 < 20" in event.reason
    assert store.model_versions()[-1].metrics["gate"] == "holdout too small"


def test_untrained_class_does_not_need_holdout_rows(monkeypatch, store, tmp_path):
    learner = Learner(store, cfg(holdout_fraction=0.0), tmp_path / "ckpt", household=ONE_DEVICE)
    for i in range(6):  # ON and OFF only
        text, label = PHRASES[i % 2]
        iid = store.add_interaction(transcript=text)
        store.set_label(iid, label, "asked")
        learner.on_label(iid, text, label)
    scripted_scores(monkeypatch, learner, 0.1, 0.9, {"ON": 3, "OFF": 3, "NOOP": 0})
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


# --- corrections, forgetting, several processes ------------------------------------------------
def learned_ids(learner: Learner, store: ReplayStore, text: str) -> list[int]:
    return [r.id for r in store.interactions(oldest_first=True)
            if r.transcript == text and r.id in learner.keys]


def test_relabel_replaces_the_label_in_the_model_without_rebuild(store, tmp_path):
    learner = Learner(store, cfg(version_every=1000), tmp_path / "ckpt", household=ONE_DEVICE)
    feed(learner, store, 24)
    assert learner.predict("turn on the light").action == "ON"
    ids = learned_ids(learner, store, "turn on the light")
    assert len(ids) >= 5
    n = len(learner.model.examples)
    for iid in ids:
        store.set_label(iid, "NOOP", "manual")
        out = learner.on_relabel(iid, "NOOP")
        assert out.relabelled and out.previous == "ON" and not out.holdout
    assert len(learner.model.examples) == n  # replaced, not added
    assert learner.predict("turn on the light").action == "NOOP"
    # the same label again changes nothing
    assert not learner.on_relabel(ids[0], "NOOP").relabelled


def test_the_key_map_is_saved_with_the_checkpoint(store, tmp_path):
    learner = Learner(store, cfg(), tmp_path / "ckpt", household=ONE_DEVICE)
    feed(learner, store, 24)  # several versions, maybe pending labels: save them too
    learner.new_version()
    again = Learner.open(store, cfg(), tmp_path / "ckpt", household=ONE_DEVICE)
    assert again.keys == learner.keys and again.keys
    ids = learned_ids(again, store, "turn off the light")
    for iid in ids:
        store.set_label(iid, "ON", "manual")
        assert again.on_relabel(iid, "ON").relabelled
    assert again.predict("turn off the light").action == "ON"
    # an interaction the model never learned (unlabelled so far) is learned
    iid = store.add_interaction(transcript="dim the hallway")
    while is_holdout_id(iid, 0.2):
        iid = store.add_interaction(transcript="dim the hallway")
    store.set_label(iid, "NOOP", "manual")
    out = again.on_relabel(iid, "NOOP")
    assert not out.relabelled and out.loss is not None and iid in again.keys


def test_forget_takes_interactions_out_of_the_live_and_the_active_model(store, tmp_path):
    learner = Learner(store, cfg(), tmp_path / "ckpt", household=ONE_DEVICE)
    feed(learner, store, 24)
    learner.new_version()
    before = learner.version
    ids = learned_ids(learner, store, "turn on the light")
    unlabelled = store.add_interaction(transcript="hello")
    store.delete_interactions(ids + [unlabelled])  # what `forget` does first
    out = learner.on_forget(ids + [unlabelled])
    assert out.forgotten == ids and out.not_in_model == [unlabelled]
    assert out.version is not None and out.version != before
    active = store.active_model_version()
    assert active.version == out.version == learner.version
    assert active.metrics["gate"] == "forget" and active.parent == before
    assert learner.model.net.class_counts[0] == 0
    assert learner.predict("turn on the light").action != "ON"
    again = Learner.open(store, cfg(), tmp_path / "ckpt", household=ONE_DEVICE)
    assert not set(ids) & set(again.keys)
    assert again.model.n_examples == learner.model.n_examples == active.n_train
    assert again.model.removed == learner.model.removed
    assert all(again.model.examples[k][0] == [] for k in again.model.removed)


def test_the_service_notices_another_process_made_a_version_active(store, tmp_path):
    clock = FakeClock(tick=1.0)
    service = Learner(store, cfg(version_every=1000, sync_every_s=30), tmp_path / "ckpt",
                      clock=clock, household=ONE_DEVICE)
    feed(service, store, 12)
    service.new_version()
    mine = service.version
    ids = learned_ids(service, store, "turn on the light")
    # another process (`edge-plm label`): corrects labels, makes a new active version
    other_store = ReplayStore(store.path)
    try:
        other = Learner.open(other_store, cfg(), tmp_path / "ckpt", household=ONE_DEVICE)
        for iid in ids:
            other_store.set_label(iid, "OFF", "manual")
            other.on_relabel(iid, "OFF")
        event = other.new_version()
        assert event.status == "active" and event.version != mine
    finally:
        other_store.close()
    # a label the service learned after that version was made (pending in its window)
    feed(service, store, 3)
    pending = list(service.window.learned)
    assert not service.poll()  # not checked again yet
    assert service.predict("turn on the light").action == "ON"
    clock.t += 31
    assert service.predict("turn on the light").action == "ON"  # predicting never polls
    assert service.version == mine
    assert service.poll()  # checks, reloads
    p = service.predict("turn on the light")
    assert service.version == event.version and p.action == "OFF"
    assert all(i in service.keys for i in pending)  # pending labels learned again
    assert service.window.learned == pending


def test_version_boundary_syncs_first(store, tmp_path):
    service = Learner(store, cfg(version_every=1000, sync_every_s=1e9), tmp_path / "ckpt", household=ONE_DEVICE)
    feed(service, store, 12)
    service.new_version()
    other = Learner.open(store, cfg(), tmp_path / "ckpt", household=ONE_DEVICE)
    other.rebuild_from_store()
    event = service.new_version()
    assert event.parent == other.version  # the candidate descends from the other's version


def test_version_names_are_claimed_in_the_database_before_the_checkpoint(store, tmp_path, monkeypatch):
    learner = Learner(store, cfg(version_every=1000), tmp_path / "ckpt", household=ONE_DEVICE)
    feed(learner, store, 12)
    seen = {}
    save = SwitchModel.save

    def checking_save(self, path, extra=None):
        rows = {v.version: v.status for v in store.model_versions()}
        seen[extra["version"]] = rows.get(extra["version"])
        return save(self, path, extra)
    monkeypatch.setattr(SwitchModel, "save", checking_save)
    # another process took the name this one computes first
    store.add_model_version("v0001", status="rolled_back")
    names = iter(["v0001"])
    real = learner.registry.next_name
    monkeypatch.setattr(learner.registry, "next_name", lambda: next(names, None) or real())
    event = learner.new_version()
    assert event.version == "v0002" and seen == {"v0002": "candidate"}
    assert store.active_model_version().version == "v0002"


def test_rebuild_learns_rows_of_a_rolled_back_window_with_their_current_label(store, after_rollbacks):
    learner, rolled = after_rollbacks
    a, b = rolled[0].metrics["interactions"]
    in_window = [r for r in store.interactions(oldest_first=True)
                 if a <= r.id <= b and r.label is not None and not r.holdout]
    text, label = next((t, y) for t, y in PHRASES if t == in_window[0].transcript)
    store.set_label(in_window[0].id, label, "manual")  # corrected after the rollback
    learner.rebuild_from_store()
    assert store.active_model_version().metrics["skipped_rolled_back"] == 0
    key = learner.keys[in_window[0].id]
    assert learner.model.examples[key][1] == ["ON", "OFF", "NOOP"].index(label)


@pytest.mark.parametrize("source, held_out", [("override", False), ("manual", False),
                                              ("asked", True), ("confirmed", True), (None, True)])
def test_corrections_are_always_learned_other_labels_follow_the_holdout_hash(store, tmp_path, source, held_out):
    learner = Learner(store, cfg(), tmp_path / "ckpt", household=ONE_DEVICE)
    iid = store.add_interaction(transcript="turn on the light")
    while not is_holdout_id(iid, learner.cfg.holdout_fraction):
        iid = store.add_interaction(transcript="turn on the light")
    store.set_label(iid, "ON", source or "manual")
    outcome = learner.on_label(iid, "turn on the light", "ON", source=source)
    assert outcome.holdout is held_out
    assert store.get(iid).holdout is held_out
    assert (iid in learner.keys) is not held_out
    assert learner.model.n_examples == (0 if held_out else 1)
