"""Checkpoint files are checked against their version's record (SHA-256, configuration,
examples): a file copied over another version's is refused at start-up, and `status`,
`model list` and the log say so."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from dataclasses import replace

from edge_plm.learning.learner import Learner, LearnerConfig
from edge_plm.decide.policy import Action
from edge_plm.loop.replay import SessionLine, build_replay, run_session
from edge_plm.config.settings import Settings
from edge_plm.store import ReplayStore
from edge_plm.learning.household import Household

ONE_DEVICE = Household.of_one()

CLI = [sys.executable, "-m", "edge_plm.cli"]
PHRASES = [("turn on the light", "ON"), ("switch the light off", "OFF"),
           ("what time is it", "NOOP"), ("lights on please", "ON"), ("lights off", "OFF")]


def _replayed(tmp_path, config: str, rounds: int):
    settings = Settings()
    settings = replace(settings, model=replace(settings.model, config=config, start="empty",
                                               version_every=5))
    db = tmp_path / config / "edge-plm.db"
    replay = build_replay(settings, db)
    try:
        run_session([SessionLine(Action(y), t) for t, y in PHRASES * rounds], replay.controller,
                    replay.clock)
        replay.controller.stop()
        versions = replay.store.model_versions()
    finally:
        replay.close()
    return db, settings, versions


def _cli_json(*args):
    proc = subprocess.run([*CLI, *args, "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


def test_versions_record_their_checkpoint(tmp_path):
    db, _, versions = _replayed(tmp_path, "potato", 4)
    written = [v for v in versions if v.path]
    assert written and all(v.sha256 and len(v.sha256) == 64 for v in written)
    assert {v.config for v in written} == {"potato"}
    assert all(v.n_examples == v.n_train for v in written)
    listed, _ = _cli_json("model", "list", "--db", str(db))
    assert {v["checkpoint_state"] for v in listed if v["checkpoint"]} == {"ok"}


def test_a_swapped_checkpoint_is_refused_and_reported(tmp_path, caplog):
    db, settings, versions = _replayed(tmp_path, "potato", 6)
    orange_db, _, orange_versions = _replayed(tmp_path, "orange", 2)
    with ReplayStore(db) as store:
        active = store.active_model_version()
    orange = next(v for v in reversed(orange_versions) if v.status == "active")
    assert len([v for v in versions if v.path]) >= 2  # an earlier good version to fall back to
    shutil.copyfile(orange.path, active.path)

    # before a start: `model list` and `status` see the file is not the one v wrote
    listed, err = _cli_json("model", "list", "--db", str(db))
    row = next(v for v in listed if v["version"] == active.version)
    assert row["checkpoint_state"] == "damaged" and "sha256" in row["checkpoint_problem"]
    status, _ = _cli_json("status", "--db", str(db))
    assert status["model"]["active_checkpoint"] == "damaged"
    assert status["model"]["unlearned_labels"] is None  # what the file holds is unknown

    # the start refuses it, falls back to the previous good version, and says so
    store = ReplayStore(db)
    try:
        with caplog.at_level(logging.ERROR, logger="edge_plm.learning.learner"):
            learner = Learner.open(store, LearnerConfig.from_settings(settings.model),
                                   db.parent / f"{db.stem}.checkpoints", household=ONE_DEVICE)
        now = store.active_model_version()
        swapped = next(v for v in store.model_versions() if v.version == active.version)
    finally:
        store.close()
    assert learner.model.config.name == "potato"
    assert now.version != active.version and swapped.status == "rolled_back"
    assert "treated as damaged" in swapped.metrics["damaged"]
    assert any(active.version in r.getMessage() and "cannot be loaded" in r.getMessage()
               for r in caplog.records)
    status, _ = _cli_json("status", "--db", str(db))
    assert [d["version"] for d in status["model"]["damaged"]] == [active.version]
    proc = subprocess.run([*CLI, "model", "list", "--db", str(db)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and f"{active.version}: " in proc.stderr
    assert "not the file model version" in proc.stderr
