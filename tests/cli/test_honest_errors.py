"""Issue 47, items 10, 12, 13, 15, 16: honest errors and private files, as a user would expect."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from _data_util import cli, js, query

ROOT = Path(__file__).resolve().parents[2]


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error:")]


def _run(*args: str, env: dict | None = None, stdin: str | None = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edge_plm.cli", *map(str, args)], input=stdin,
                          capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, **(env or {})})


def test_model_export_is_0600_and_makes_no_folder(db, tmp_path):
    (active,), = query(db, "SELECT version FROM model_versions WHERE status = 'active'")
    out = tmp_path / "out" / "m.npz"
    r = cli("model", "export", active, out, "--db", db)
    assert r.exit_code == 1 and _lines(r.stderr) and "does not exist" in r.stderr
    assert not out.parent.exists()
    out.parent.mkdir()
    old = os.umask(0o022)  # the usual umask: a plain copy would be 0644
    try:
        assert cli("model", "export", active, out, "--db", db).exit_code == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert [p.name for p in out.parent.iterdir()] == ["m.npz"]  # no temp file left


def test_a_missing_edge_plm_config_is_an_error(tmp_path):
    r = _run("config", "check", env={"EDGE_PLM_CONFIG": str(tmp_path / "missing.toml")})
    assert r.returncode != 0 and len(_lines(r.stderr)) == 1, r.stderr
    assert "missing.toml" in r.stderr and "EDGE_PLM_CONFIG" in r.stderr


def test_tilde_is_expanded_in_every_db(db, tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "st").mkdir(parents=True)
    for p in db.parent.iterdir():
        os.rename(p, home / "st" / p.name)
    monkeypatch.setenv("HOME", str(home))
    where = f"~/st/{db.name}"
    assert js(cli("status", "--db", where, "--json"))["model"]["active"]
    assert cli("export", "--db", where, "--format", "jsonl").exit_code == 0
    (tmp_path / "bk").mkdir()
    assert cli("db", "backup", tmp_path / "bk" / "b.db", "--db", where).exit_code == 0
    (active,), = query(home / "st" / db.name, "SELECT version FROM model_versions WHERE status = 'active'")
    assert cli("model", "export", active, "~/m.npz", "--db", where).exit_code == 0
    assert (home / "m.npz").is_file() and not Path("~").exists()


@pytest.mark.parametrize("args", [["label", "99999999999999999999999", "on"],
                                  ["forget", "-y", "99999999999999999999999"],
                                  ["label", "0", "on"]])
def test_an_impossible_id_is_one_line(db, args):
    r = cli(*args, "--db", db)
    assert r.exit_code == 2 and len(_lines(r.stderr)) == 1 and "Traceback" not in r.stderr, r.stderr


def test_replay_refuses_a_negative_seed_like_model_seed(tmp_path):
    session = tmp_path / "s.jsonl"
    session.write_text('{"text": "lamp on", "label": "ON"}\n')
    r = cli("replay", session, "--seed", "-1", "--json")
    assert r.exit_code == 2 and len(_lines(r.stderr)) == 1 and "--seed" in r.stderr


def test_forget_from_a_pipe_without_yes_says_so(db):
    r = _run("forget", "1", "--db", db, stdin="")
    assert r.returncode == 1 and len(_lines(r.stderr)) == 1 and "-y" in r.stderr, r.stderr
    assert query(db, "SELECT count(*) FROM interactions WHERE id = 1")[0][0] == 1


def test_the_demo_makes_its_folders_0700(tmp_path):
    state = tmp_path / "a" / "b" / "state"
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[paths]\nstate_dir = "{state}"\n')
    old = os.umask(0o022)
    try:
        r = cli("demo", "--config", cfg, "--limit", "3", "--rounds", "1")
    finally:
        os.umask(old)
    assert r.exit_code == 0, r.stderr
    for d in (tmp_path / "a", tmp_path / "a" / "b", state, state / "demo"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d


def test_a_full_disk_during_forget_is_one_plain_line(db, monkeypatch):
    import errno  # noqa: PLC0415

    from edge_plm.commands import forgetting as labelling  # noqa: PLC0415 - forget lives there

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(db.parent / "x.npz"))

    monkeypatch.setattr(labelling, "forget", full)
    r = cli("forget", "-y", "1", "--db", db)
    assert r.exit_code == 1 and len(_lines(r.stderr)) == 1, r.stderr
    line = _lines(r.stderr)[0]
    assert "[Errno" not in line and "No space left on device" in line and "disk is full" in line
    assert query(db, "SELECT count(*) FROM interactions WHERE id = 1")[0][0] == 1
