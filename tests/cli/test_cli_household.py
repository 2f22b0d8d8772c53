"""Every command that learns opens the same household as the loop: on a two-device household,
`model rebuild`, `forget --rebuild`, `model import` and `model rollback` leave a model that
predicts for each device what the loop's own model predicts (none of them falls back to a
household of one, which threw away what the second device's switch taught it)."""

from __future__ import annotations

import json
import shutil

import pytest

from _data_util import cli, js
from edge_plm.store import ReplayStore
from edge_plm.switch.addressing import DeviceName
from edge_plm.switch.model import SwitchModel

CONFIG = """
[model]
start = "empty"
version_every = 8

[gpio]
min_toggle_interval_ms = 0

[[devices]]
name = "lights"
aliases = ["lamp"]
relay_pin = 17
switch_pin = 27

[[devices]]
name = "plug"
aliases = ["socket"]
relay_pin = 23
switch_pin = 24
"""

DEVICES = [DeviceName("lights", ("lamp",)), DeviceName("plug", ("socket",))]

# the plug learns wordings of its own ("kettle", "charger"): only its switch teaches those
LINES = [
    ("turn on the lights", "ON", "lights"), ("lights off", "OFF", "lights"),
    ("plug on please", "ON", "plug"), ("switch the plug off", "OFF", "plug"),
    ("boil the kettle", "ON", "plug"), ("kettle done", "OFF", "plug"),
    ("charge my phone", "ON", "plug"), ("stop charging", "OFF", "plug"),
    ("lamp on", "ON", "lights"), ("it is dark in here", "ON", "lights"),
    ("what a nice day", "NOOP", None), ("good night lamp", "OFF", "lights"),
]
PROBES = ["boil the kettle", "kettle done", "charge my phone", "stop charging",
          "turn on the lights", "lights off", "plug on", "it is dark in here",
          "what a nice day", "put the kettle on", "good night"]


def _session(path, rounds: int = 5) -> None:
    rows = []
    for _ in range(rounds):
        for text, label, device in LINES:
            rows.append({"text": text, "label": label, **({"device": device} if device else {})})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def predictions(db) -> dict:
    """The active version's prediction for each device, for every probe."""
    with ReplayStore(db) as store:
        model = SwitchModel.load(store.active_model_version().path)
    out = {}
    for text in PROBES:
        for name, p in model.predict_devices(text, DEVICES).items():
            out[(text, name)] = (p.action, round(float(p.confidence), 6))
    return out


@pytest.fixture(scope="module")
def household(tmp_path_factory):
    """A two-device household after the loop learned its session: (config, database, the loop's
    predictions)."""
    tmp = tmp_path_factory.mktemp("house")
    cfg = tmp / "house.toml"
    cfg.write_text(CONFIG)
    session = tmp / "s.jsonl"
    _session(session)
    db = tmp / "edge-plm.db"
    out = js(cli("replay", str(session), "--config", cfg, "--db", db, "--json"))
    assert set(out["devices"]) == {"lights", "plug"}
    return cfg, db, predictions(db)


@pytest.fixture
def copy(household, tmp_path):
    """An independent copy of the household's database (`db backup`): (config, copy, the loop's
    predictions)."""
    cfg, db, loop = household
    dest = tmp_path / "copy.db"
    js(cli("db", "backup", str(dest), "--db", db, "--config", cfg, "--json"))
    assert predictions(dest) == loop
    return cfg, dest, loop


def test_the_loop_taught_the_second_device(household):
    _, _, loop = household
    assert loop[("boil the kettle", "plug")][0] == "ON"
    assert loop[("stop charging", "plug")][0] == "OFF"


def test_rebuild_reproduces_the_loops_model(copy):
    cfg, db, loop = copy
    js(cli("model", "rebuild", "--db", db, "--config", cfg, "--json"))
    assert predictions(db) == loop


def test_forget_rebuild_keeps_the_other_devices_lessons(copy):
    cfg, db, loop = copy
    with ReplayStore(db) as store:
        chatter = [r.id for r in store.interactions() if r.transcript == "what a nice day"]
    js(cli("forget", str(chatter[0]), "--rebuild", "--yes", "--db", db, "--config", cfg, "--json"))
    after = predictions(db)
    # one chatter line of five forgotten: every device's decision stays the loop's
    assert {k: v[0] for k, v in after.items()} == {k: v[0] for k, v in loop.items()}
    js(cli("model", "rebuild", "--db", db, "--config", cfg, "--json"))
    assert predictions(db) == after  # and it is what a rebuild of what remains gives


def test_rollback_reproduces_the_loops_model(copy):
    cfg, db, loop = copy
    with ReplayStore(db) as store:
        newest = store.active_model_version().version
    js(cli("model", "rebuild", "--db", db, "--config", cfg, "--json"))
    out = js(cli("model", "rollback", newest, "--db", db, "--config", cfg, "--json"))
    assert out["changed"] and predictions(db) == loop


def test_import_reproduces_the_loops_model(copy, tmp_path):
    cfg, db, loop = copy
    with ReplayStore(db) as store:
        exported = tmp_path / "exported.npz"
        shutil.copyfile(store.active_model_version().path, exported)
    js(cli("model", "rebuild", "--db", db, "--config", cfg, "--json"))
    js(cli("model", "import", str(exported), "--force", "--db", db, "--config", cfg, "--json"))
    assert predictions(db) == loop


def test_a_command_that_rebuilds_on_its_way_in_rebuilds_the_household(copy, tmp_path):
    """Every checkpoint lost: `model import` opens the household by re-learning the database
    first (a version of its own), then imports; rolling back to that version gives the loop's
    model, both devices' lessons in it."""
    cfg, db, loop = copy
    with ReplayStore(db) as store:
        exported = tmp_path / "exported.npz"
        shutil.copyfile(store.active_model_version().path, exported)
        before = {v.version for v in store.model_versions()}
    for f in (db.parent / f"{db.stem}.checkpoints").glob("*.npz"):
        f.unlink()
    out = js(cli("model", "import", str(exported), "--force", "--db", db, "--config", cfg, "--json"))
    assert predictions(db) == loop
    with ReplayStore(db) as store:
        made = sorted({v.version for v in store.model_versions()} - before - {out["version"]})
    assert len(made) == 1, made  # the re-learned version the import started from
    js(cli("model", "rollback", made[0], "--db", db, "--config", cfg, "--json"))
    assert predictions(db) == loop
