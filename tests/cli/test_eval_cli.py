"""`edge-plm eval --json`: the docs/design.md §4 contract, through the real CLI app."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from edge_plm.cli import app
from kit import PHRASES

ROWS = [{"text": t, "label": y} for t, y in PHRASES[:6]]
ROWS[0]["intent"] = "iot_hue_lighton"  # other keys are ignored
ACTIONS = ["ON", "OFF", "NOOP"]


@pytest.fixture()
def small(tmp_path):
    p = tmp_path / "small.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n\n")  # a trailing blank line is fine
    return p


def _run(*args):
    return CliRunner().invoke(app, ["eval", *map(str, args)])


def test_eval_json_contract(small):
    res = _run("--train", small, "--test", small, "--budgets", "2,4,1000", "--json")
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1, f"stdout must be exactly one JSON object, got: {res.stdout!r}"
    out = json.loads(lines[0])
    assert set(out) == {"config", "params", "budgets", "predict_ms", "update_ms"}
    assert out["config"] == "potato" and isinstance(out["config"], str)
    assert type(out["params"]) is int and 0 < out["params"] <= 200_000
    assert isinstance(out["budgets"], list)
    # a budget beyond the file means "all" (6 examples)
    assert [b["n"] for b in out["budgets"]] == [2, 4, 6]
    for b in out["budgets"]:
        assert set(b) == {"n", "balanced_accuracy", "accuracy", "confusion", "ece"}
        assert isinstance(b["ece"], float) and 0.0 <= b["ece"] <= 1.0
        assert type(b["n"]) is int
        assert isinstance(b["balanced_accuracy"], float) and 0.0 <= b["balanced_accuracy"] <= 1.0
        assert isinstance(b["accuracy"], float) and 0.0 <= b["accuracy"] <= 1.0
        conf = b["confusion"]
        assert list(conf) == ACTIONS
        for truth in ACTIONS:
            assert list(conf[truth]) == ACTIONS
            assert all(type(v) is int and v >= 0 for v in conf[truth].values())
            assert sum(conf[truth].values()) == sum(r["label"] == truth for r in ROWS)
        # the numbers are consistent with the confusion table
        correct = sum(conf[t][t] for t in ACTIONS)
        assert b["accuracy"] == pytest.approx(correct / len(ROWS))
        recalls = [conf[t][t] / sum(conf[t].values()) for t in ACTIONS]
        assert b["balanced_accuracy"] == pytest.approx(sum(recalls) / 3)
    for key in ("predict_ms", "update_ms"):
        assert set(out[key]) == {"median", "p95"}
        assert all(isinstance(v, float) and v > 0 for v in out[key].values())
        assert out[key]["p95"] >= out[key]["median"]


def test_eval_budget_beyond_file_collapses(small):
    res = _run("--train", small, "--test", small, "--budgets", "50,1000", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert [b["n"] for b in out["budgets"]] == [6]


def test_eval_is_deterministic(small):
    outs = []
    for _ in range(2):
        res = _run("--train", small, "--test", small, "--budgets", "3,6", "--seed", "5", "--json")
        assert res.exit_code == 0, res.output
        d = json.loads(res.stdout)
        outs.append([(b["n"], b["confusion"]) for b in d["budgets"]])
    assert outs[0] == outs[1]


@pytest.mark.parametrize("bad,expect", [
    ('{"text": "turn on", "label": "ON"', "not valid JSON"),
    ('{"text": "turn on", "label": "MAYBE"}', '"label" must be one of ON, OFF, NOOP'),
    ('{"label": "ON"}', '"text" string'),
    ('["turn on", "ON"]', '"text" string'),
])
def test_eval_bad_jsonl_line(tmp_path, small, bad, expect):
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps(ROWS[1]) + "\n" + bad + "\n")
    res = _run("--train", p, "--test", small, "--json")
    assert res.exit_code == 2
    assert res.stdout == "", "nothing on stdout when the input is bad"
    assert f"{p}:3:" in res.stderr, res.stderr
    assert expect in res.stderr
    assert "Traceback" not in res.output


def test_eval_missing_file_and_bad_budgets(tmp_path, small):
    res = _run("--train", tmp_path / "nope.jsonl", "--test", small, "--json")
    assert res.exit_code == 2 and "file not found" in res.stderr
    res = _run("--train", small, "--test", small, "--budgets", "10,x", "--json")
    assert res.exit_code == 2 and "--budgets" in res.stderr
    res = _run("--train", small, "--test", small, "--budgets", "-1", "--json")
    assert res.exit_code == 2 and ">= 0" in res.stderr
    res = _run("--train", small, "--test", small, "--model-config", "banana", "--json")
    assert res.exit_code == 2 and res.stderr.startswith("error:") and "'banana' is not one of 'potato', 'orange'" in res.stderr
    # --config is the TOML file in every command: a configuration's name there is refused
    for name in ("banana", "potato"):
        res = _run("--train", small, "--test", small, "--budgets", "2", "--config", name, "--json")
        assert res.exit_code == 2 and res.stdout == ""
        assert res.stderr.startswith("error:") and "--model-config" in res.stderr


def test_eval_budget_zero_scores_the_start(tmp_path, small):
    """Budget 0: an empty model scores a uniform guess (every prediction the first action);
    from --init the checkpoint's own predictions, before any label of TRAIN."""
    from edge_plm.switch.model import SwitchModel

    res = _run("--train", small, "--test", small, "--budgets", "0,6", "--json")
    assert res.exit_code == 0, res.output
    first = json.loads(res.stdout)["budgets"][0]
    assert first["n"] == 0 and first["balanced_accuracy"] == pytest.approx(1 / 3)
    model = SwitchModel.empty("potato")
    for r in ROWS:
        model.learn(r["text"], r["label"])
    ckpt = model.save(tmp_path / "start.npz")
    res = _run("--train", small, "--test", small, "--budgets", "0", "--init", ckpt, "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["budgets"][0]["n"] == 0 and out["budgets"][0]["balanced_accuracy"] == 1.0
    assert out["update_ms"] == {"median": 0.0, "p95": 0.0}  # nothing learned at budget 0
    res = _run("--train", small, "--test", small, "--init", ckpt, "--model-config", "orange", "--json")
    assert res.exit_code == 2 and "not orange" in res.stderr
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a checkpoint")
    res = _run("--train", small, "--test", small, "--init", bad, "--json")
    assert res.exit_code == 2 and res.stderr.startswith("error: --init") and "Traceback" not in res.output


def test_eval_table_output(small):
    res = _run("--train", small, "--test", small, "--budgets", "3,6")
    assert res.exit_code == 0, res.output
    assert "balanced accuracy" in res.stdout and "predict ms" in res.stdout


DEVICE_ROWS = [
    {"text": "turn on the lamp", "label": "ON", "device": "lamp"},
    {"text": "turn off the fan", "label": "OFF", "device": "fan"},
    {"text": "what time is it", "label": "NOOP", "device": "lamp"},
    {"text": "fan on please", "label": "ON", "device": "fan"},
    {"text": "lamp off now", "label": "OFF", "device": "lamp"},
    {"text": "play some music", "label": "NOOP", "device": "fan"},
] * 2


def test_eval_lines_with_devices_add_per_device_figures(tmp_path):
    p = tmp_path / "devices.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in DEVICE_ROWS) + "\n")
    res = _run("--train", p, "--test", p, "--budgets", "0,12", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert set(out) == {"config", "params", "budgets", "predict_ms", "update_ms", "devices"}
    assert out["devices"] == ["lamp", "fan"]
    for b in out["budgets"]:
        assert {"n", "balanced_accuracy", "accuracy", "confusion", "ece"} < set(b)
        assert set(b["devices"]) == {"lamp", "fan"} and b["devices"]["fan"]["lines"] == 6
        assert 0.0 <= b["other_device_acted"] <= 1.0
    last = out["budgets"][-1]
    assert last["devices"]["lamp"]["balanced_accuracy"] == 1.0 and last["devices"]["fan"]["balanced_accuracy"] == 1.0
    assert last["other_device_acted"] == 0.0


def test_eval_refuses_a_line_without_device_among_several(tmp_path):
    p = tmp_path / "mixed.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in [*DEVICE_ROWS[:2], {"text": "lamp on", "label": "ON"}]) + "\n")
    res = _run("--train", p, "--test", p, "--json")
    assert res.exit_code == 2 and "no \"device\"" in res.output and "Traceback" not in res.output
