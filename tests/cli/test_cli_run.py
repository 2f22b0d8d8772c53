"""`edge-plm replay`, `demo` and `run` as a user runs them (subprocesses of the real CLI)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from kit import PHRASES  # noqa: E402
from notified_service import notified_service, text_service_config, wait_for_interactions  # noqa: E402

DEMO = Path(__file__).resolve().parents[2] / "edge_plm" / "data" / "demo"
CLI = [sys.executable, "-c", "from edge_plm.cli import main; main()"]


def cli(*args, timeout=600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, **kw)


def write_session(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def check_schema(out: dict) -> None:
    assert set(out) == {"interactions", "asked", "acted", "acted_wrong", "missed", "labels",
                        "latency_ms", "silence_tail_ms"}
    assert type(out["silence_tail_ms"]) is int
    for key in ("interactions", "asked", "acted", "acted_wrong", "missed", "labels"):
        assert type(out[key]) is int, key
    assert set(out["latency_ms"]) == {"asr", "model", "total", "after_speech"}
    for part in out["latency_ms"].values():
        assert set(part) == {"median", "p95"}
        assert all(type(v) is float for v in part.values())


def test_replay_json_text_session(tmp_path):
    rows = [{"text": t, "label": y} for t, y in PHRASES[:3]] * 5
    session = write_session(tmp_path / "s.jsonl", rows)
    db = tmp_path / "out" / "replay.db"
    proc = cli("replay", str(session), "--db", str(db), "--seed", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1  # exactly one JSON object on stdout
    out = json.loads(lines[0])
    check_schema(out)
    assert out["interactions"] == 15
    assert out["acted_wrong"] <= out["acted"] and out["asked"] + out["acted"] <= 15
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM interactions").fetchone()[0] == 15
        labelled = conn.execute("SELECT count(*) FROM interactions WHERE label IS NOT NULL")
        assert labelled.fetchone()[0] == out["labels"]


def test_replay_json_audio_relative_paths_and_a_corrupt_file(tmp_path):
    for name in ("turn-on-the-light.slt.wav", "turn-off-the-light.awb.wav"):
        shutil.copy(DEMO / name, tmp_path / name)
    (tmp_path / "broken.wav").write_bytes(b"not audio at all")
    session = write_session(tmp_path / "s.jsonl", [
        {"audio": "turn-on-the-light.slt.wav", "label": "ON"},
        {"audio": "broken.wav", "label": "OFF"},
        {"audio": "turn-off-the-light.awb.wav", "label": "OFF"},
        {"text": "what time is it", "label": "NOOP"}])
    proc = cli("replay", str(session), "--json", cwd=str(Path.home()))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    check_schema(out)
    assert out["interactions"] == 4
    assert out["missed"] >= 1  # the broken file's OFF wish got neither action nor question
    assert out["latency_ms"]["asr"]["p95"] > 0.0
    if out["acted"]:  # the relay was driven: the person waited the tail and then some
        assert out["latency_ms"]["after_speech"]["median"] > out["silence_tail_ms"]
    assert "broken.wav" in proc.stderr  # logged clearly


def test_replay_bad_session_file_is_a_clear_error(tmp_path):
    bad = write_session(tmp_path / "bad.jsonl", [{"text": "hi", "label": "MAYBE"}])
    proc = cli("replay", str(bad), "--json")
    assert proc.returncode == 2 and "label" in proc.stderr and proc.stdout == ""


def test_replay_readable_summary(tmp_path):
    session = write_session(tmp_path / "s.jsonl", [{"text": "lights on", "label": "ON"}] * 4)
    proc = cli("replay", str(session))
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())  # rich wraps to the terminal width
    assert "4 interactions" in text and "part" in text


def test_replay_summary_tells_misses_already_as_wished(tmp_path):
    """An OFF wish said with the lamp off that got neither action nor question counts as missed
    (the contract's key), and the readable line says the lamp already was as wished."""
    session = write_session(tmp_path / "s.jsonl", [{"text": "switch the lamp off", "label": "OFF"}] * 2)
    out = json.loads(cli("replay", str(session), "--db", str(tmp_path / "a.db"), "--start", "empty",
                         "--json").stdout)
    assert (out["missed"], out["acted"], out["asked"]) == (2, 0, 0)  # an empty model ignores it
    proc = cli("replay", str(session), "--db", str(tmp_path / "b.db"), "--start", "empty")
    assert proc.returncode == 0, proc.stderr
    assert "missed 2 (2 of them already as wished)" in " ".join(proc.stdout.split())


def test_demo_runs_and_prints_its_summary(tmp_path):
    """Without --db the demo keeps its database under the state dir (not the device's own),
    says where and how to look at it; its rows are in the past, versions in order."""
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    env.pop("STATE_DIRECTORY", None)
    db = tmp_path / "data" / "edge-plm" / "demo" / "edge-plm.db"
    before = time.time()
    proc = cli("demo", "--rounds", "2", "--limit", "3", env=env)
    after = time.time()
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())  # rich wraps to the terminal width
    assert "played 2 time(s)" in text and "6 interactions" in text
    assert "acted" in text and "1/4" in text and "4/4" in text
    assert f"interactions stored in {db}" in text and f"edge-plm status --db {db}" in text
    with sqlite3.connect(db) as conn:
        backends = {r[0] for r in conn.execute("SELECT asr_backend FROM interactions")}
        times = [r[0] for r in conn.execute("SELECT ts FROM interactions ORDER BY id")]
        labels = [r[0] for r in conn.execute("SELECT label_ts FROM interactions WHERE label_ts IS NOT NULL")]
        made = [r[0] for r in conn.execute("SELECT created_ts FROM model_versions ORDER BY rowid")]
    assert backends == {"pocketsphinx"}
    assert times == sorted(times) and made == sorted(made) and made
    assert max(times + labels + made) <= after  # nothing in the future
    assert max(times + made) > after - 60  # the simulated offsets end at the real end
    assert min(times) > before - 3600
    status = cli("status", "--db", str(db), env=env)
    assert status.returncode == 0 and "6" in status.stdout, status.stderr
    again = cli("demo", "--rounds", "1", "--limit", "2", env=env)  # a fresh demo database
    assert again.returncode == 0, again.stderr
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM interactions").fetchone()[0] == 2


def test_demo_keeps_to_demo_databases_and_the_configured_state_dir(tmp_path):
    """Issue 27 item 15: `demo --db` of a database the demo did not make is refused (it would
    add synthetic rows to a real one) and leaves it untouched; a demo database is used again;
    without --db the demo's database is in the state dir of the config (`--config`); the help
    names the default."""
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    env.pop("STATE_DIRECTORY", None)
    real = tmp_path / "device" / "edge-plm.db"
    session = write_session(tmp_path / "s.jsonl", [{"text": "turn on the light", "label": "ON"}])
    assert cli("replay", str(session), "--db", str(real), env=env).returncode == 0
    before = real.read_bytes()
    refused = cli("demo", "--db", str(real), "--rounds", "1", "--limit", "1", env=env)
    assert refused.returncode == 2
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "the demo did not make" in errors[0], refused.stderr
    assert "Traceback" not in refused.stderr and real.read_bytes() == before
    mine = tmp_path / "mine" / "demo.db"
    for n in (1, 2):  # made by the demo: used again, rows added
        proc = cli("demo", "--db", str(mine), "--rounds", "1", "--limit", "1", env=env)
        assert proc.returncode == 0, proc.stderr
        with sqlite3.connect(mine) as conn:
            assert conn.execute("SELECT COUNT(*) FROM interactions").fetchone()[0] == n
    state = tmp_path / "configured"
    config = tmp_path / "c.toml"
    config.write_text(f'[paths]\nstate_dir = "{state}"\n')
    proc = cli("demo", "--config", str(config), "--rounds", "1", "--limit", "1", env=env)
    assert proc.returncode == 0, proc.stderr
    assert (state / "demo" / "edge-plm.db").exists() and not (tmp_path / "data" / "edge-plm" / "demo").exists()
    shown = cli("demo", "--help", env={**env, "COLUMNS": "200"}).stdout
    assert "default: demo/edge-plm.db in the configured state dir" in shown and "/demo/edge-plm.db," not in shown


def test_run_refuses_simulated_pins_unless_configured(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text(f'[paths]\nstate_dir = "{tmp_path / "state"}"\n[audio]\nsource = "text"\n')
    env = {k: v for k, v in os.environ.items() if k != "GPIOZERO_PIN_FACTORY"}
    proc = subprocess.run([*CLI, "run", "--config", str(config)], input="turn on the light\n",
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr  # the service logs to stdout (journald)
    assert out.count("no GPIO hardware found") == 1 and "Traceback" not in out  # once, as error:
    assert proc.stderr.startswith("error: cannot start:") and "no GPIO hardware found" not in proc.stdout
    assert 'gpio.pin_factory = "mock"' in out


def test_run_service_text_source_notify_and_sigterm(tmp_path):
    state = tmp_path / "state"
    config = text_service_config(tmp_path / "config.toml", state)
    with notified_service(config, tmp_path / "notify.sock") as (proc, sock):
        assert sock.recv(64) == b"READY=1"
        proc.stdin.write("turn on the light\n\nwhat time is it\n")
        proc.stdin.flush()
        wait_for_interactions(state / "edge-plm.db", 2, timeout_s=120)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "relay closed in safe state OFF" in out  # logs go to stdout (journald)
    assert "model no version yet: the starting model switch-en" in out  # what it predicts with
    with sqlite3.connect(state / "edge-plm.db") as conn:
        texts = [r[0] for r in conn.execute("SELECT transcript FROM interactions ORDER BY id")]
    assert texts == ["turn on the light", "what time is it"]


def test_run_summary_when_stopped_before_the_database_existed(tmp_path):
    """SIGTERM during start-up can come before the replay buffer is created: the closing
    line says nothing was stored instead of failing to open a missing database."""
    from edge_plm.cli.run_cmd import _run_summary

    missing = tmp_path / "state" / "edge-plm.db"
    line = _run_summary(missing, 0)
    assert line.startswith("run ended before the replay buffer was opened: nothing stored")
    assert not missing.exists()
