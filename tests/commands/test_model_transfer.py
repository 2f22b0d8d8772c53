"""`edge-plm model import|export`: a checkpoint trained elsewhere becomes a version only if it is
compatible and not worse on the holdout (unless --force); export copies a version out."""

from __future__ import annotations


import numpy as np
import pytest
from _data_util import cli, js, query

from edge_plm.switch.model import SwitchModel

pytestmark = pytest.mark.usefixtures("no_user_config")  # tests use conftest's demo database (db)


def _labelled(db):
    return query(db, "SELECT transcript, label FROM interactions WHERE label IS NOT NULL ORDER BY id")


def _trained(tmp_path, rows, name, config="potato"):
    model = SwitchModel.empty(config)
    for text, label in rows:
        model.learn(text, label)
    return model.save(tmp_path / name, extra={"trained_by": "test"})


def _active(db):
    return query(db, "SELECT version FROM model_versions WHERE status = 'active'")[0][0]


def test_import_a_better_model_then_export_it(db, tmp_path):
    before = _active(db)
    good = _trained(tmp_path, _labelled(db), "good.npz")  # learned every label, holdout included
    r = js(cli("model", "import", str(good), "--db", db, "--json"))
    assert r["previous"] == before and r["version"] == _active(db) != before
    assert r["balanced_accuracy"] >= r["previous_balanced_accuracy"] and not r["forced"]
    shown = js(cli("model", "show", r["version"], "--db", db, "--json"))
    m = shown["metrics"]
    assert m["gate"] == "import" and m["source"] == str(good.resolve()) and m["trained_by"] == "test"
    assert shown["parent"] == before
    out = js(cli("model", "export", r["version"], str(tmp_path / "out.npz"), "--db", db, "--json"))
    from edge_plm.files import sha256_of

    assert out["sha256"] == sha256_of(shown["checkpoint"])  # the version's own file, byte for byte
    back = SwitchModel.load(tmp_path / "out.npz")
    assert back.predict("lights off please").action == "OFF"


def test_import_refuses_a_worse_model_unless_forced(db, tmp_path):
    flip = {"ON": "OFF", "OFF": "ON", "NOOP": "ON"}
    bad = _trained(tmp_path, [(t, flip[lab]) for t, lab in _labelled(db)], "bad.npz")
    before = _active(db)
    n_versions = len(query(db, "SELECT version FROM model_versions"))
    res = cli("model", "import", str(bad), "--db", db)
    assert res.exit_code == 1
    assert res.stderr.startswith("error: refused:") and "--force" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.output
    assert _active(db) == before and len(query(db, "SELECT version FROM model_versions")) == n_versions
    r = js(cli("model", "import", str(bad), "--db", db, "--force", "--json"))
    assert r["forced"] and _active(db) == r["version"] != before


def test_import_an_orange_model_into_a_potato_device(db, tmp_path):
    """The round trip of docs/deploy.md: a potato device imports an orange model trained on a
    desktop; it runs orange from then on, and is told that model.config still says potato."""
    orange = _trained(tmp_path, _labelled(db), "orange.npz", config="orange")
    res = cli("model", "import", str(orange), "--db", db)
    assert res.exit_code == 0, res.output
    assert "(orange) imported" in res.stdout and 'model.config = "orange"' in res.stderr
    r = js(cli("model", "show", _active(db), "--db", db, "--json"))
    assert SwitchModel.load(r["checkpoint"]).config.name == "orange"


@pytest.mark.parametrize("recipe", ["empty", "starting"])
def test_import_takes_both_potato_structures(db, tmp_path, recipe):
    """A potato grown from empty reads word pairs; a starting model (the shipped one, and what
    is learned on it) does not (``STARTING_OVERRIDES``): a device takes either."""
    from edge_plm.switch.config import STARTING_OVERRIDES

    model = SwitchModel.empty("potato", **(STARTING_OVERRIDES if recipe == "starting" else {}))
    for text, label in _labelled(db):
        model.learn(text, label)
    assert (model.config.bigram_weight > 0) == (recipe == "empty")
    r = js(cli("model", "import", str(model.save(tmp_path / "m.npz")), "--db", db, "--force", "--json"))
    shown = js(cli("model", "show", r["version"], "--db", db, "--json"))
    assert r["version"] == _active(db) and SwitchModel.load(shown["checkpoint"]).config == model.config


def test_import_rejects_foreign_checkpoints(db, tmp_path):
    before = _active(db)
    odd = SwitchModel.empty("potato", unit_max_n=4)  # a potato of another structure
    odd.learn("lamp on", "ON")
    res = cli("model", "import", str(odd.save(tmp_path / "odd.npz")), "--db", db)
    assert res.exit_code == 2 and "another potato structure: unit_max_n=4" in res.stderr
    from edge_plm.switch.config import SwitchConfig

    banana = SwitchModel.empty(SwitchConfig(name="banana")).save(tmp_path / "banana.npz")
    res = cli("model", "import", str(banana), "--db", db)
    assert res.exit_code == 2 and "'banana', which this edge-plm does not run" in res.stderr
    lm = tmp_path / "lm.npz"  # another kind of edge-plm checkpoint
    from edge_plm.plm import checkpoint

    checkpoint.save(lm, {"w": np.zeros(2)}, {"kind": "edge-plm language model"})
    res = cli("model", "import", str(lm), "--db", db)
    assert res.exit_code == 2 and "not a switch-model checkpoint" in res.stderr
    junk = tmp_path / "junk.npz"
    np.savez(junk, a=np.zeros(3))
    res = cli("model", "import", str(junk), "--db", db)
    assert res.exit_code == 2 and "not an edge-plm checkpoint" in res.stderr
    text = tmp_path / "README.md"  # not a checkpoint at all: no advice about pickle
    text.write_text("# edge-plm\n\nA voice-controlled relay switch.\n")
    as_text = cli("model", "import", str(text), "--db", db)
    assert as_text.exit_code == 2 and "not an edge-plm checkpoint" in as_text.stderr
    assert "pickle" not in as_text.stderr
    res = cli("model", "import", str(tmp_path / "missing.npz"), "--db", db)
    assert res.exit_code == 2 and "not found" in res.stderr
    for r in (as_text, res):
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.output
    assert _active(db) == before


def test_export_errors(db, tmp_path):
    res = cli("model", "export", "v9999", str(tmp_path / "x.npz"), "--db", db)
    assert res.exit_code == 1 and "no model version" in res.stderr


def test_a_model_trained_on_the_exported_data_holds_the_device_labels_once(db, tmp_path):
    """The round trip of docs/deploy.md: export -> train switch -> import. The imported model
    already holds every learnable label of the database (the trainer leaves holdout lines out),
    so nothing is unlearned right after the import and nothing is learned twice on the next
    start; `forget` takes a matched row's example out of the model again."""
    data = tmp_path / "household.jsonl"
    cli("export", "--db", db, "--format", "jsonl", "--labelled", "--output", str(data))
    res = cli("train", "switch", "--model-config", "potato", "--data", str(data), "--out", str(tmp_path / "run"),
              "--epochs", "1", "--json")
    assert res.exit_code == 0, res.output
    learnable = js(cli("status", "--db", db, "--json"))
    r = js(cli("model", "import", str(tmp_path / "run" / "checkpoint.npz"), "--db", db, "--force", "--json"))
    held = SwitchModel.load(tmp_path / "run" / "checkpoint.npz").n_examples
    assert 0 < r["labels_matched"] <= held
    status = js(cli("status", "--db", db, "--json"))
    assert status["model"]["active"]["version"] == r["version"]
    assert status["model"]["unlearned_labels"] == 0  # before: every label of the database
    assert learnable["model"]["unlearned_labels"] == 0
    shown = js(cli("model", "show", r["version"], "--db", db, "--json"))
    assert shown["metrics"]["labels_matched"] == r["labels_matched"]
    model = SwitchModel.load(shown["checkpoint"])
    assert model.n_examples == held  # the device's labels were not added a second time

    matched = [i for i, _ in model.meta["interaction_keys"]]
    res = cli("forget", str(matched[0]), "--db", db, "--yes", "--json")
    assert res.exit_code == 0, res.output
    after = js(cli("status", "--db", db, "--json"))
    assert after["model"]["unlearned_labels"] == 0
    assert SwitchModel.load(js(cli("model", "show", after["model"]["active"]["version"], "--db", db,
                                   "--json"))["checkpoint"]).n_examples == held - 1


def test_import_onto_a_new_device_creates_its_database(tmp_path):
    """The desktop path's first step: a trained model onto a board that has recorded nothing."""
    good = _trained(tmp_path, [("turn on the light", "ON"), ("lights off", "OFF"),
                               ("what time is it", "NOOP")], "good.npz")
    db = tmp_path / "device" / "state" / "edge-plm.db"
    r = js(cli("model", "import", str(good), "--db", db, "--json"))
    assert r["previous"] is None and _active(db) == r["version"]
    status = js(cli("status", "--db", db, "--json"))
    assert status["model"]["active"]["version"] == r["version"] and status["interactions"]["total"] == 0
    assert (db.parent.stat().st_mode & 0o777) == 0o700
    failed = cli("model", "import", str(tmp_path / "missing.npz"), "--db", tmp_path / "other" / "edge-plm.db")
    assert failed.exit_code == 2 and "cannot import" in failed.stderr
    assert not (tmp_path / "other").exists()  # a failed import leaves no empty database behind


def test_a_reimported_starting_model_checkpoint_can_still_forget_everything(tmp_path):
    """A device that started from switch-en exports a version and imports it again: the
    database's rows are matched to the owner's examples only, never to the starting model's
    frozen ones with the same words, so `forget --all` takes them out (it had failed on a
    frozen example; issue 27)."""
    session = tmp_path / "s.jsonl"
    session.write_text("".join(f'{{"text": "{t}", "label": "{y}"}}\n' for t, y in [
        ("turn on the light", "ON"), ("turn off the light", "OFF"), ("lights on", "ON"),
        ("what time is it", "NOOP"), ("lights off", "OFF"), ("play some music", "NOOP")] * 4))
    db = tmp_path / "state" / "edge-plm.db"
    assert cli("replay", session, "--db", db).exit_code == 0
    version = _active(db)
    assert cli("model", "export", version, tmp_path / "out.npz", "--db", db).exit_code == 0
    r = js(cli("model", "import", tmp_path / "out.npz", "--force", "--db", db, "--json"))
    model = SwitchModel.load(js(cli("model", "show", r["version"], "--db", db, "--json"))["checkpoint"])
    frozen = model.prior_examples
    assert frozen > 1000 and r["labels_matched"] > 0
    assert all(k >= frozen for _, k in model.meta["interaction_keys"])
    forgot = cli("forget", "--all", "--yes", "--db", db, "--json")
    assert forgot.exit_code == 0, forgot.output
    assert js(cli("status", "--db", db, "--json"))["model"]["unlearned_labels"] == 0
