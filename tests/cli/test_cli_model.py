"""`edge-plm model list|show|rollback|rebuild` on a replay buffer populated by the real loop."""

from __future__ import annotations


import pytest

from _data_util import cli, js, query
from edge_plm.learning.learner import Learner, LearnerConfig
from edge_plm.config.settings import ModelConfig
from edge_plm.store import ReplayStore
from edge_plm.learning.household import Household

ONE_DEVICE = Household.of_one()

pytestmark = pytest.mark.usefixtures("no_user_config")


def active(db) -> str:
    return query(db, "SELECT version FROM model_versions WHERE status = 'active'")[0][0]


def open_learner(db):
    store = ReplayStore(db)
    return store, Learner.open(store, LearnerConfig.from_settings(ModelConfig(start="empty")),
                               db.parent / f"{db.stem}.checkpoints", household=ONE_DEVICE)


def test_list_json_and_table(demo_dir):
    path = demo_dir / "edge-plm.db"
    versions = js(cli("model", "list", "--db", path, "--json"))
    assert isinstance(versions, list) and len(versions) >= 2
    assert [v["version"] for v in versions] == [r[0] for r in query(
        path, "SELECT version FROM model_versions ORDER BY rowid")]
    first, second = versions[0], versions[1]
    assert set(first) >= {"version", "parent", "status", "created", "n_train",
                          "balanced_accuracy", "holdout_n", "gate", "checkpoint", "metrics"}
    assert first["parent"] is None and second["parent"] == first["version"]
    assert sum(v["status"] == "active" for v in versions) == 1
    assert all(v["checkpoint_exists"] for v in versions if v["status"] != "rolled_back")
    table = cli("model", "list", "--db", path)
    assert table.exit_code == 0 and "active" in table.stdout and first["version"] in table.stdout


def test_show(demo_dir):
    path = demo_dir / "edge-plm.db"
    d = js(cli("model", "show", "v0001", "--db", path, "--json"))
    assert d["version"] == "v0001" and d["children"] == ["v0002"]
    assert d["checkpoint_bytes"] > 0
    p = d["predictions"]
    served = query(path, "SELECT count(*) FROM interactions WHERE model_version = 'v0001'")[0][0]
    assert p["interactions"] == served and 0 <= p["correct"] <= p["labelled"] <= served
    text = cli("model", "show", "v0002", "--db", path)
    assert text.exit_code == 0 and "parent" in text.stdout and "v0001" in text.stdout
    missing = cli("model", "show", "v9999", "--db", path)
    assert missing.exit_code == 1 and "no model version 'v9999'" in missing.stderr
    assert "v0001" in missing.stderr  # lists the known ones


def test_rollback_makes_an_older_version_active(db):
    newest = active(db)
    assert newest != "v0001"
    r = js(cli("model", "rollback", "v0001", "--db", db, "--json"))
    assert r == {"version": "v0001", "previous": newest, "changed": True}
    assert active(db) == "v0001"
    assert query(db, "SELECT status FROM model_versions WHERE version = ?", [newest]) == [
        ("retired",)]
    again = js(cli("model", "rollback", "v0001", "--db", db, "--json"))
    assert again["changed"] is False
    store, learner = open_learner(db)  # what the service loads at its next start: v0001,
    try:  # plus the labels of the database it lacks (a rollback never drops labels)
        caught_up = store.active_model_version()
        assert caught_up.parent == "v0001" and caught_up.metrics["catch_up"]["missing"] > 0
        assert learner.version == caught_up.version and learner.unlearned() == 0
    finally:
        store.close()
    cli("model", "rollback", "v0001", "--db", db)
    back = cli("model", "rollback", newest, "--db", db)  # and forward again
    assert back.exit_code == 0 and f"model {newest} is active (was v0001)" in back.stdout
    assert active(db) == newest


def test_retention_keeps_the_rollback_target(db):
    """`model rollback v0001` chose v0001: later versions do not prune it (they used to, as
    soon as it was neither active nor the active version's parent)."""
    n_versions = len(query(db, "SELECT version FROM model_versions"))
    assert js(cli("model", "rollback", "v0001", "--db", db, "--json"))["changed"]
    for _ in range(7):  # more new versions than model.keep_checkpoints (5)
        js(cli("model", "rebuild", "--db", db, "--json"))
    rows = dict(query(db, "SELECT version, metrics FROM model_versions"))
    assert len(rows) == n_versions + 7
    assert '"pruned": true' not in rows["v0001"] and (db.parent / f"{db.stem}.checkpoints" / "v0001.npz").exists()
    assert sum('"pruned": true' in (m or "") for m in rows.values()) >= 1  # retention still runs
    assert js(cli("model", "rollback", "v0001", "--db", db, "--json"))["changed"]


def test_rollback_names_the_version_it_really_replaced(db):
    """The replaced version is read in the transaction that activates the target: a version
    the service made active meanwhile is the one named."""
    newest = active(db)
    assert newest not in ("v0001", "v0002")
    with ReplayStore(db) as store:
        assert store.activate_model_version("v0002") == newest
        assert store.activate_model_version("v0002") is None  # already active
        assert store.activate_model_version("v0001") == "v0002"
    out = cli("model", "rollback", "v0002", "--db", db)
    assert out.exit_code == 0 and "model v0002 is active (was v0001)" in out.stdout


def test_rollback_refusals_change_nothing(db):
    with ReplayStore(db) as store:
        store.add_model_version("v0099", parent=active(db), status="rolled_back",
                                metrics={"gate": "rolled back"})
    before = active(db)
    out = cli("model", "rollback", "v0099", "--db", db)
    assert out.exit_code == 1 and "no checkpoint" in out.stderr and "nothing changed" in out.stderr
    assert active(db) == before
    (db.parent / f"{db.stem}.checkpoints" / "v0001.npz").write_bytes(b"damaged")
    out = cli("model", "rollback", "v0001", "--db", db)
    assert out.exit_code == 1 and "cannot roll back to v0001" in out.stderr
    assert "Traceback" not in out.output and active(db) == before
    out = cli("model", "rollback", "v7777", "--db", db)
    assert out.exit_code == 1 and "no model version" in out.stderr


def test_rebuild_from_the_database_alone(db):
    before = active(db)
    for f in (db.parent / f"{db.stem}.checkpoints").iterdir():  # the checkpoints are lost: the DB is enough
        f.unlink()
    r = js(cli("model", "rebuild", "--db", db, "--json"))
    assert r["status"] == "active" and r["previous"] == before and r["version"] != before
    assert r["gate"] == "rebuild" and r["checkpoint_exists"]
    learnable = query(db, "SELECT count(*) FROM interactions WHERE label IS NOT NULL "
                          "AND holdout = 0 AND error IS NULL AND transcript != ''")[0][0]
    assert r["metrics"]["labels_in_window"] + r["metrics"]["skipped_rolled_back"] == learnable
    assert r["n_train"] == r["metrics"]["labels_in_window"]
    store, learner = open_learner(db)
    try:
        assert learner.version == r["version"]
        assert learner.predict("turn off the light").action == "OFF"
    finally:
        store.close()
    text = cli("model", "rebuild", "--db", db)
    assert text.exit_code == 0 and "rebuilt and active" in text.stdout


def test_checkpoints_go_to_the_databases_own_folder(db):
    r = js(cli("model", "rebuild", "--db", db, "--json"))
    assert r["checkpoint"] == str(db.parent / f"{db.stem}.checkpoints" / f"{r['version']}.npz")
    (stored,), = query(db, "SELECT path FROM model_versions WHERE version = ?", [r["version"]])
    assert stored == f"{db.stem}.checkpoints/{r['version']}.npz"  # relative to the database
    assert cli("model", "rebuild", "--db", db, "--checkpoints", db.parent / "x").exit_code == 2


def test_versions_listed_in_the_order_they_were_made_when_the_clock_steps_back(db):
    """An SBC without RTC: the clock may jump back between two versions."""
    with ReplayStore(db) as store:
        store.add_model_version("v0050", parent=active(db), status="rolled_back",
                                metrics={"gate": "rolled back"}, created_ts=1000.0)
    versions = js(cli("model", "list", "--db", db, "--json"))
    assert versions[-1]["version"] == "v0050"
    stats = js(cli("stats", "--db", db, "--json"))
    assert stats["versions"][-1]["version"] == "v0050"
