"""The shipped starting model (models/switch-en.npz) and `model.start`: the file loads, matches
its model card, is installed with the package, and `run`, `replay` and `demo` start from it."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from edge_plm.learning.learner import LearnerConfig
from edge_plm.switch.model import SwitchModel
from edge_plm.config.settings import ConfigError, ModelConfig, parse
from edge_plm.config.starting_model import StartError, resolve, shipped_path
from kit import PHRASES
from edge_plm.learning.household import Household

ONE_DEVICE = Household.of_one()

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "models" / "switch-en.npz"
CLI = [sys.executable, "-c", "from edge_plm.cli import main; main()"]


def cli(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=600, **kw)


def test_shipped_model_loads_and_matches_its_card():
    blob = SHIPPED.read_bytes()
    card = (REPO / "models" / "README.md").read_text(encoding="utf-8")
    sha = re.search(r"<!-- sha256 -->`([0-9a-f]{64})`", card)
    size = re.search(r"<!-- bytes -->([0-9,]+)", card)
    assert sha and size, "models/README.md must state the file's SHA-256 and size"
    assert hashlib.sha256(blob).hexdigest() == sha.group(1), "rebuilt? run models/build_switch_en.py"
    assert len(blob) == int(size.group(1).replace(",", ""))
    model = SwitchModel.load(SHIPPED)
    assert model.config.name == "potato" and model.meta["trained_by"] == "edge-plm train switch"
    assert "switch-dev-test" not in json.dumps(model.meta["training"])  # the evaluation set stays out
    for text, action in [("turn on the light", "ON"), ("switch the lamp off", "OFF"),
                         ("what's the weather like today", "NOOP")]:
        assert model.predict(text).action == action, text


def test_the_shipped_model_has_the_starting_recipes_structure():
    """models/switch-en.npz was built with STARTING_OVERRIDES (no word pairs, a flat smoothing),
    which models/build_switch_en.py passes to `train switch`; a model from empty differs."""
    import importlib.util

    from edge_plm.commands.switch_training import switch_overrides
    from edge_plm.switch.config import CONFIGS, STARTING_OVERRIDES

    shipped = SwitchModel.load(SHIPPED).config
    assert {k: getattr(shipped, k) for k in STARTING_OVERRIDES} == STARTING_OVERRIDES
    assert {k: getattr(CONFIGS["potato"], k) for k in STARTING_OVERRIDES} != STARTING_OVERRIDES
    spec = importlib.util.spec_from_file_location("build_switch_en", REPO / "models" / "build_switch_en.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    assert build.STARTING_RECIPE[::2] == ["--set"] * len(STARTING_OVERRIDES)
    assert switch_overrides(build.STARTING_RECIPE[1::2]) == STARTING_OVERRIDES


def test_the_installed_copy_is_the_shipped_file():
    """`pip install .` installs edge_plm/data/models/switch-en.npz (package data): it must be
    byte for byte models/switch-en.npz (models/build_switch_en.py writes both)."""
    assert shipped_path("switch-en").read_bytes() == SHIPPED.read_bytes()
    assert resolve("switch-en") == shipped_path("switch-en")


def test_model_start_setting():
    assert ModelConfig().start == "switch-en"
    assert resolve("empty") is None
    assert LearnerConfig.from_settings(ModelConfig(start="empty")).start == ""
    assert LearnerConfig.from_settings(ModelConfig()).start == str(shipped_path("switch-en"))
    with pytest.raises(StartError, match="no such checkpoint"):
        resolve("/nonexistent/model.npz")
    with pytest.raises(ConfigError, match="is a potato model"):
        parse('[model]\nconfig = "orange"\n')  # the shipped model is potato: say what to do
    assert parse('[model]\nconfig = "orange"\nstart = "empty"\n').model.config == "orange"
    with pytest.raises(ConfigError, match="model.start"):
        parse('[model]\nstart = ""\n')


@pytest.fixture()
def own_start(tmp_path) -> Path:
    """A starting model that says OFF to "abracadabra" (the shipped one says NOOP, an empty one
    ON: argmax of a uniform guess), so the prediction shows which model a command started from."""
    model = SwitchModel.empty("potato")
    for _ in range(3):
        for text, label in [("abracadabra", "OFF"), ("turn on the lamp", "ON"), ("play music", "NOOP")]:
            model.learn(text, label)
    return model.save(tmp_path / "own.npz")


def _session(tmp_path, rows):
    p = tmp_path / "s.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_replay_starts_from_model_start(tmp_path, own_start):
    rows = [{"text": t, "label": y} for t, y in PHRASES[:3]] * 2
    session = _session(tmp_path, rows)
    shipped = json.loads(cli("replay", session, "--json").stdout)  # default: switch-en
    empty = json.loads(cli("replay", session, "--start", "empty", "--json").stdout)
    assert shipped["asked"] < empty["asked"] and shipped["acted_wrong"] == 0
    assert shipped["acted"] >= 4  # understands the commands from the first word
    db = tmp_path / "own.db"
    proc = cli("replay", _session(tmp_path, [{"text": "abracadabra", "label": "OFF"}]), "--start", own_start,
               "--db", db, "--json")
    assert proc.returncode == 0, proc.stderr
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT prediction FROM interactions").fetchone()[0] == "OFF"
    bad = cli("replay", session, "--start", tmp_path / "missing.npz", "--json")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --start") and "Traceback" not in bad.stderr


def test_demo_starts_from_model_start(tmp_path):
    out = {}
    for start in ("switch-en", "empty"):
        proc = cli("demo", "--rounds", "1", "--limit", "4", "--start", start,
                   env={**os.environ, "XDG_DATA_HOME": str(tmp_path)})
        assert proc.returncode == 0, proc.stderr
        text = " ".join(proc.stdout.split())
        assert ("starts empty" if start == "empty" else "starts from switch-en") in text
        out[start] = int(re.search(r"acted (\d+)", text).group(1))
    assert out["switch-en"] > out["empty"]  # the shipped model acts from the first word


def test_run_starts_from_model_start(tmp_path, own_start):
    state = tmp_path / "state"
    config = tmp_path / "config.toml"
    config.write_text(f'[paths]\nstate_dir = "{state}"\n[audio]\nsource = "text"\n'
                      f'[gpio]\npin_factory = "mock"\n[model]\nstart = "{own_start}"\n')
    proc = subprocess.run([*CLI, "run", "--config", str(config)], input="abracadabra\n",
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert f"starting from {own_start}" in proc.stdout
    with sqlite3.connect(state / "edge-plm.db") as conn:
        assert conn.execute("SELECT prediction FROM interactions").fetchone()[0] == "OFF"
    config.write_text(f'[paths]\nstate_dir = "{state}2"\n[audio]\nsource = "text"\n'
                      f'[gpio]\npin_factory = "mock"\n[model]\nstart = "{tmp_path / "gone.npz"}"\n')
    proc = subprocess.run([*CLI, "run", "--config", str(config)], input="", capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 2 and "no such checkpoint file" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_a_damaged_starting_model_is_a_one_line_error(tmp_path, monkeypatch):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"PK\x03\x04 not really")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[paths]\nstate_dir = "{tmp_path / "state"}"\n[model]\nstart = "{bad}"\n')
    monkeypatch.setenv("EDGE_PLM_CONFIG", str(cfg))
    from typer.testing import CliRunner

    from edge_plm.cli import app
    from edge_plm.store import ReplayStore

    (tmp_path / "state").mkdir(mode=0o700)
    ReplayStore(tmp_path / "state" / "edge-plm.db").close()  # a device that has recorded nothing yet
    res = CliRunner().invoke(app, ["model", "rebuild"])
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert res.exit_code == 1 and len(errors) == 1 and errors[0].startswith("error: model.start:"), res.output
    assert "Traceback" not in res.output
    res = cli("replay", _session(tmp_path, [{"text": "lamp on", "label": "ON"}]), "--start", bad, "--json")
    assert res.returncode == 2 and res.stderr.startswith("error:") and "Traceback" not in res.stderr


def test_a_device_with_versions_does_not_need_its_starting_model(tmp_path, own_start):
    """Once the database has a saved version, the service starts from it even if the
    starting-model file has gone (a path that was moved); without any it must exist."""
    from edge_plm.learning.learner import Learner
    from edge_plm.store import ReplayStore

    start = tmp_path / "start.npz"
    start.write_bytes(own_start.read_bytes())
    cfg = LearnerConfig.from_settings(ModelConfig(start=str(start)), version_every=2, holdout_fraction=0.0)
    store = ReplayStore(tmp_path / "db.sqlite")
    try:
        learner = Learner.open(store, cfg, tmp_path / "ckpt", household=ONE_DEVICE)
        assert learner.predict("abracadabra").action == "OFF"  # from the starting model
        for text, label in [("abracadabra", "ON"), ("lamp off", "OFF")]:
            iid = store.add_interaction(transcript=text)
            store.set_label(iid, label, "manual")
            learner.on_label(iid, text, label)
        assert store.active_model_version() is not None
        start.unlink()
        cfg = LearnerConfig.from_settings(ModelConfig(start=str(start)), version_every=2, holdout_fraction=0.0)
        again = Learner.open(store, cfg, tmp_path / "ckpt", household=ONE_DEVICE)
        assert again.version == store.active_model_version().version
        assert again.model.n_examples == learner.model.n_examples
    finally:
        store.close()
