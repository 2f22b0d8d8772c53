"""`edge-plm train switch`: deterministic, a device checkpoint, --resume continues the run."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from edge_plm.cli import app
from edge_plm.switch.model import SwitchModel
from edge_plm.commands.switch_training import SwitchTrainConfig, SwitchTrainer, gradient_epoch
from kit import PHRASES

ROWS = [*PHRASES, ("heard nothing", None)]  # a row without a label: observed, not learned
VAL = [("turn the lamp on", "ON"), ("switch off the light", "OFF"), ("what's the weather", "NOOP")]


def _write(path, rows):
    path.write_text("".join(json.dumps({"text": t, "label": lab}) + "\n" for t, lab in rows))
    return path


@pytest.fixture()
def files(tmp_path):
    return _write(tmp_path / "data.jsonl", ROWS), _write(tmp_path / "val.jsonl", VAL)


def _train(out, data, val, *extra):
    args = ["train", "switch", "--model-config", "potato", "--data", str(data), "--out", str(out),
            "--epochs", "3", "--patience", "10", "--json", *map(str, extra)]
    if val is not None:
        args += ["--val", str(val)]
    return CliRunner().invoke(app, args)


def _arrays(path):
    with np.load(path) as z:
        return {k: z[k].copy() for k in z.files if k != "__meta__"}


def _same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_train_switch_is_deterministic_and_writes_a_device_checkpoint(tmp_path, files):
    data, val = files
    r1, r2 = _train(tmp_path / "a", data, val), _train(tmp_path / "b", data, val)
    assert r1.exit_code == 0 and r2.exit_code == 0, r1.output + r2.output
    s = json.loads(r1.stdout)
    assert s["config"] == "potato" and s["labelled"] == 9 and s["steps"] == 60 and s["finished"]
    _same(_arrays(tmp_path / "a" / "checkpoint.npz"), _arrays(tmp_path / "b" / "checkpoint.npz"))
    model = SwitchModel.load(tmp_path / "a" / "checkpoint.npz")  # the device's loader
    assert model.n_examples == 9 and model.unlabeled_seen == 1
    assert model.predict("turn on the light").action == "ON"
    assert model.meta["trained_by"] == "edge-plm train switch"
    log = json.loads((tmp_path / "a" / "train_log.json").read_text())
    assert [e["phase"] for e in log["epochs"]] == ["frozen"] * 3  # the unit network cannot thaw
    assert log["warm_start"]["val"]["balanced_accuracy"] is not None


def test_gradient_epoch_lowers_the_training_objective():
    model = SwitchModel.empty("potato")
    for t, lab in ROWS[:-1]:
        model.learn(t, lab)
    before = model.net.objective()[0]
    assert gradient_epoch(model, 20) == (pytest.approx(before, rel=0.5), 20)
    assert model.net.objective()[0] < before


def test_resume_continues_the_run(tmp_path, files):
    """A run cut by --steps and continued with --resume ends where one uninterrupted run ends."""
    data, val = files
    assert _train(tmp_path / "whole", data, val).exit_code == 0
    part = _train(tmp_path / "cut", data, val, "--steps", "20")
    assert part.exit_code == 0, part.output
    first = json.loads(part.stdout)
    assert first["steps"] == 20 and not first["finished"]
    rest = _train(tmp_path / "cut", data, val, "--resume")
    assert rest.exit_code == 0, rest.output
    assert json.loads(rest.stdout)["steps"] == 60
    _same(_arrays(tmp_path / "whole" / "checkpoint.npz"), _arrays(tmp_path / "cut" / "checkpoint.npz"))
    _same(_arrays(tmp_path / "whole" / "last.npz"), _arrays(tmp_path / "cut" / "last.npz"))


def test_train_switch_without_val_and_bad_input(tmp_path, files):
    data, _ = files
    res = _train(tmp_path / "nv", data, None)
    assert res.exit_code == 0, res.output
    assert SwitchModel.load(tmp_path / "nv" / "checkpoint.npz").n_examples == 9
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "hi", "label": "MAYBE"}\n')
    res = _train(tmp_path / "x", bad, None)
    assert res.exit_code == 2 and res.stderr.startswith("error:") and "MAYBE" in res.stderr
    res = CliRunner().invoke(app, ["train", "switch", "--model-config", "banana", "--data", str(data)])
    assert res.exit_code == 2 and res.stderr.startswith("error:") and "'banana' is not one of" in res.stderr
    res = CliRunner().invoke(app, ["train", "switch", "--config", "orange", "--data", str(data)])
    assert res.exit_code == 2 and "--model-config" in res.stderr


def test_trainer_time_budget_zero_keeps_the_warm_start(tmp_path, files):
    data, val = files
    log = SwitchTrainer(SwitchTrainConfig(time_budget=0.0), data, tmp_path / "t", val=val).run()
    assert log["summary"]["steps"] == 0 and not log["epochs"]


def test_export_lines_holdout_left_out_and_unlabelled_observed(tmp_path):
    """Lines as `edge-plm export --format jsonl` writes them: the device's holdout rows are not
    learned (the device judges an imported model on them), null labels are observed."""
    from edge_plm.commands.switch_training import read_training_lines

    rows = [{"text": "lamp on", "label": "ON", "id": 1, "holdout": False},
            {"text": "lamp off", "label": "OFF", "id": 2, "holdout": True},
            {"text": "hello there", "label": None, "id": 3, "holdout": False},
            {"text": "   ", "label": "NOOP", "id": 4}]
    p = tmp_path / "export.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read_training_lines(p) == [("lamp on", "ON"), ("hello there", None)]
    log = SwitchTrainer(SwitchTrainConfig(steps=0), p, tmp_path / "o").run()
    assert log["summary"]["labelled"] == 1


def test_train_switch_slot_word(tmp_path, files):
    data, val = files
    res = _train(tmp_path / "s", data, val, "--slot-word", "xqz")
    assert res.exit_code == 0, res.output
    assert SwitchModel.load(tmp_path / "s" / "checkpoint.npz").config.slot_word == "xqz"
    assert SwitchModel.load(tmp_path / "s" / "last.npz").config.slot_word == "xqz"  # a resume keeps it
    for bad in ("Two Words", "XQZ", "x-q"):
        res = _train(tmp_path / "b", data, val, "--slot-word", bad)
        assert res.exit_code == 2 and res.stderr.startswith("error: --slot-word"), res.output
