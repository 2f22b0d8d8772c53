"""No traceback reaches a person: every command given a bad database, a bad config or a bad
archive answers with one ``error: ...`` line and a non-zero exit code (through `cli.main`, as
the installed `edge-plm` script runs it)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from edge_plm.store import SCHEMA_VERSION, ReplayStore

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "edge_plm.cli"]
COMMANDS = ("replay", "run", "status", "log", "stats", "label", "forget", "export",
            "model-list", "db-backup")
WRITERS = ("replay", "run", "label", "forget")  # db backup writes elsewhere: it reads here


def cli(*args: str, cwd: Path = ROOT, stdin: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    env.pop("EDGE_PLM_DEBUG", None)
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=cwd, env=env,
                          input=stdin, timeout=300)


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """Non-zero exit, exactly one `error:` line on stderr, no traceback anywhere."""
    assert proc.returncode != 0, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


# --- databases that are not what they should be --------------------------------------------
def _garbage(d: Path) -> Path:
    p = d / "garbage.db"
    p.write_bytes(os.urandom(8192))
    return p


def _newer(d: Path) -> Path:
    p = d / "newer.db"
    ReplayStore(p).close()
    with sqlite3.connect(p) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                     [str(SCHEMA_VERSION + 7)])
    conn.close()
    return p


def _foreign(d: Path) -> Path:
    p = d / "foreign.db"
    with sqlite3.connect(p) as conn:
        conn.execute("CREATE TABLE recipes (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO recipes (name) VALUES ('soup')")
    conn.close()
    return p


def _directory(d: Path) -> Path:
    p = d / "a-directory.db"
    p.mkdir()
    return p


def _dev_null(d: Path) -> Path:
    return Path("/dev/null")


DB_KINDS = {"garbage": (_garbage, "not a database"),
            "newer-schema": (_newer, "newer"),
            "foreign": (_foreign, "not an edge-plm database"),
            "directory": (_directory, "directory"),
            "dev-null": (_dev_null, "not a regular file")}


def _args(command: str, db: Path, tmp: Path) -> list[str]:
    if command == "replay":
        session = tmp / "session.jsonl"
        session.write_text('{"text": "turn on the light", "label": "ON"}\n')
        return ["replay", str(session), "--db", str(db), "--json"]
    if command == "run":
        config = tmp / "run.toml"
        config.write_text(f'[paths]\nstate_dir = "{tmp / "state"}"\ndatabase = "{db}"\n'
                          '[audio]\nsource = "text"\n[gpio]\npin_factory = "mock"\n')
        return ["run", "--config", str(config)]
    if command == "model-list":
        return ["model", "list", "--db", str(db)]
    if command == "db-backup":
        return ["db", "backup", str(tmp / "backup.db"), "--db", str(db)]
    extra = {"label": ["1", "ON"], "forget": ["1", "--yes"]}.get(command, [])
    return [command, *extra, "--db", str(db)]


@pytest.mark.parametrize("kind", sorted(DB_KINDS))
@pytest.mark.parametrize("command", COMMANDS)
def test_bad_database_is_one_line_error(command, kind, tmp_path):
    make, needle = DB_KINDS[kind]
    db = make(tmp_path)
    before = db.read_bytes() if db.is_file() else None
    proc = cli(*_args(command, db, tmp_path), stdin="turn on the light\n")
    assert_one_line_error(proc, needle)
    if before is not None:
        assert db.read_bytes() == before  # a file we refused is not changed
    assert not Path("/dev/checkpoints").exists()


@pytest.fixture(scope="module")
def read_only_dir(tmp_path_factory):
    """A directory holding a valid replay buffer (3 interactions) that cannot be written:
    a read-only tmpfs when root (root ignores file modes), else mode 0500."""
    d = tmp_path_factory.mktemp("ro") / "state"
    d.mkdir()
    mounted = False
    if os.geteuid() == 0:
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(d)],
                          capture_output=True).returncode != 0:
            pytest.skip("root without mount: cannot make a read-only directory")
        mounted = True
    with ReplayStore(d / "edge-plm.db") as s:
        for t in ("turn on the light", "lights off", "hello"):
            s.add_interaction(transcript=t, prediction="ON", confidence=0.5, decision="ask")
    if mounted:
        subprocess.run(["mount", "-o", "remount,ro", str(d)], check=True)
    else:
        d.chmod(0o500)
    yield d
    if mounted:
        subprocess.run(["umount", str(d)], check=True)
    else:
        d.chmod(0o700)


@pytest.mark.parametrize("command", COMMANDS)
def test_read_only_directory(command, read_only_dir, tmp_path):
    """Writers fail with one line; readers still read (a database nobody can write is opened
    immutable: no -shm file needed), never with a traceback."""
    db = read_only_dir / "edge-plm.db"
    proc = cli(*_args(command, db, tmp_path), stdin="turn on the light\n")
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    if command in WRITERS:
        assert_one_line_error(proc)
    else:
        assert proc.returncode == 0, proc.stderr


def test_replay_new_database_in_read_only_directory(read_only_dir, tmp_path):
    proc = cli(*_args("replay", read_only_dir / "new.db", tmp_path))
    assert_one_line_error(proc, "new.db")


# --- configs ----------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["config check", "run", "status"])
def test_non_utf8_config_is_one_line_error(command, tmp_path):
    config = tmp_path / "latin1.toml"
    config.write_bytes('[model]\nconfig = "caf\u00e9"\n'.encode("latin-1"))
    proc = cli(*command.split(), "--config", str(config))
    assert_one_line_error(proc, "UTF-8")


def test_doctor_names_a_database_path_that_is_not_a_file(tmp_path):
    for db in (Path("/dev/null"), _directory(tmp_path)):
        config = tmp_path / "doctor.toml"
        config.write_text(f'[paths]\nstate_dir = "{tmp_path / "state"}"\ndatabase = "{db}"\n')
        proc = cli("doctor", "--config", str(config), "--json")
        assert "Traceback" not in proc.stderr
        check = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}["database"]
        assert check["status"] == "fail" and "not a database file" in check["detail"]


def test_config_that_is_a_directory(tmp_path):
    proc = cli("config", "check", "--config", str(tmp_path))
    assert_one_line_error(proc, str(tmp_path))


# --- asr install ------------------------------------------------------------------------------
def test_asr_install_zip_with_a_file_and_a_directory_at_one_path(tmp_path):
    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("model/am", "a file")
        zf.writestr("model/am/final.mdl", "and a directory at the same path")
        zf.writestr("model/conf/model.conf", "x")
    import hashlib

    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    proc = cli("asr", "install", str(archive), "--sha256", digest,
               "--models-dir", str(tmp_path / "models"))
    assert_one_line_error(proc, "both a file and a directory")
    assert not any((tmp_path / "models").iterdir())  # nothing left behind


# --- the handler itself -----------------------------------------------------------------------
def test_unknown_exception_is_one_line_with_a_debug_hint_and_debug_shows_it(tmp_path):
    """A bug (here: an injected TypeError) is reported, not hidden: its type and message on one
    line with the --debug hint; with --debug the traceback is shown."""
    script = ("import sys; import edge_plm.cli as c\n"
              "@c.app.command('boom')\n"
              "def boom():\n    raise TypeError('injected bug')\n"
              "c.main()\n")
    env = {**os.environ}
    env.pop("EDGE_PLM_DEBUG", None)
    proc = subprocess.run([sys.executable, "-c", script, "boom"], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=120)
    line = assert_one_line_error(proc, "internal error: TypeError: injected bug", "--debug")
    assert proc.returncode == 1, line
    proc = subprocess.run([sys.executable, "-c", script, "boom", "--debug"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode != 0 and "Traceback" in proc.stderr and "injected bug" in proc.stderr


def test_status_json_still_works_on_a_good_database(tmp_path):
    """The handler changes nothing for a command that succeeds."""
    db = tmp_path / "ok.db"
    with ReplayStore(db) as s:
        s.add_interaction(transcript="hello")
    proc = cli("status", "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["interactions"]["total"] == 1


#: error classes defined in edge_plm that are not a person's to fix: reaching the CLI, they are
#: reported as internal errors (a bug), so they do not inherit from EdgePlmError
NOT_FOR_A_PERSON = {
    "edge_plm.decide.policy.PolicyError",  # the state machine was driven out of order
    "edge_plm.plm.warmstart.NegativeInputError",  # the warm start's assumptions (fails loudly)
}
#: person-facing errors whose names do not end in "Error"
ALSO_FOR_A_PERSON = ("edge_plm.commands.model_transfer.ImportRefused", "edge_plm.loop.service.CannotStart",
                     "edge_plm.commands.plots.PlotUnavailable")


def _package_errors() -> dict[str, type]:
    import importlib
    import pkgutil

    import edge_plm

    found = {}
    for info in pkgutil.walk_packages(edge_plm.__path__, "edge_plm."):
        if info.name.endswith("__main__"):
            continue
        mod = importlib.import_module(info.name)
        for name, obj in vars(mod).items():
            if (isinstance(obj, type) and issubclass(obj, BaseException) and obj.__module__ == info.name
                    and name.endswith("Error") and not name.startswith("_")):
                found[f"{info.name}.{name}"] = obj
    return found


def test_every_error_a_person_sees_is_an_edge_plm_error():
    """`describe` shows the message of an EdgePlmError: each module's own error class is one,
    with the built-in base it always had (existing `except ValueError` etc. still catch it)."""
    import importlib

    from edge_plm.cli.common import describe
    from edge_plm.errors import EdgePlmError

    errors = _package_errors()
    assert {"edge_plm.loop.session_file.SessionError", "edge_plm.plm.checkpoint.CheckpointError",
            "edge_plm.voice.asr_base.AsrError", "edge_plm.store.base.StoreError"} <= set(errors)
    assert NOT_FOR_A_PERSON <= set(errors)  # an exclusion that no longer exists comes off the list
    assert sorted(n for n, cls in errors.items()
                  if n not in NOT_FOR_A_PERSON and not issubclass(cls, EdgePlmError)) == []
    for path in ALSO_FOR_A_PERSON:
        module, _, name = path.rpartition(".")
        errors[path] = getattr(importlib.import_module(module), name)
        assert issubclass(errors[path], EdgePlmError), path
    for name, cls in errors.items():
        if name not in NOT_FOR_A_PERSON:
            code, line = describe(cls.__new__(cls))
            assert not line.startswith("internal error"), name
    assert issubclass(errors["edge_plm.plm.checkpoint.CheckpointError"], ValueError)
    assert describe(errors["edge_plm.decide.policy.PolicyError"]("x"))[1].startswith("internal error")
