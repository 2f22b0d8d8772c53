"""A database owns its files (docs/loop.md "What forget reaches on disk", docs/deploy.md):
two databases in one folder never share a checkpoint, a `db backup` copy or a copied state dir
is independent of the original, and a forget killed between its checkpoint rewrites is
finished at the next start (issue 27, items 1-3)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from _data_util import cli, demo_text_lines, js, populate, query
from edge_plm.learning import forgetting, trust
from edge_plm.store import SCHEMA_VERSION, ReplayStore
from edge_plm.learning.household import Household

ONE_DEVICE = Household.of_one()

ROOT = Path(__file__).resolve().parents[2]


def _files(directory: Path) -> dict[str, bytes]:
    """The checkpoint files under `directory` (and any other file but SQLite's -wal/-shm,
    which a read-only look at the database creates)."""
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*"))
            if p.is_file() and not p.name.endswith(("-wal", "-shm", ".lock"))}


def _damaged(db: Path) -> list[str]:
    """Versions `model list` shows damaged, or whose file is not the one their record says."""
    return [d["version"] for d in js(cli("model", "list", "--db", db, "--json"))
            if d.get("damaged") or (d["checkpoint_exists"] and trust.file_problem(d))]


def _secret_hits(directory: Path, words: list[str]) -> list[str]:
    return [name for name, data in _files(directory).items()
            if name.endswith(".npz") and any(w.encode() in data for w in words)]


def test_two_databases_in_one_folder_each_keep_their_own_checkpoints(tmp_path):
    a, b = tmp_path / "two" / "a.db", tmp_path / "two" / "b.db"
    populate(a, demo_text_lines())
    populate(b, demo_text_lines())
    st = cli("status", "--db", a)
    assert st.exit_code == 0 and "damaged" not in st.output, st.output
    assert js(cli("status", "--db", a, "--json"))["model"]["active"]["version"]
    assert _damaged(a) == [] and _damaged(b) == []
    for db in (a, b):
        paths = [p for p, in query(db, "SELECT path FROM model_versions WHERE path IS NOT NULL")]
        assert paths and all(p.startswith(f"{db.stem}.checkpoints/") for p in paths), paths
        assert (db.parent / f"{db.stem}.checkpoints").is_dir()
    assert not (tmp_path / "two" / "checkpoints").exists()
    assert cli("model", "rebuild", "--db", b).exit_code == 0  # and using one leaves the other
    assert _damaged(a) == [] and _damaged(b) == []


def _folder(db: Path) -> Path:
    """The checkpoint folder the database recorded as its own."""
    (name,), = query(db, "SELECT value FROM meta WHERE key = 'checkpoints_folder'")
    return db.parent / name


def _versions(db: Path) -> dict[str, tuple]:
    return {d["version"]: (d["status"], d["checkpoint_exists"])
            for d in js(cli("model", "list", "--db", db, "--json"))}


@pytest.mark.parametrize("other", ["s.old", "s.sqlite"])
def test_a_renamed_copy_in_the_same_folder_never_touches_the_originals_files(db, other):
    """Issue 47, item 6: ``cp s.db s.old`` (or ``s.sqlite``): a database's checkpoint folder
    is its own by identity (owner mark + meta), not by stem; the copy takes its own."""
    s = db.parent / "s.db"
    db.rename(s)
    assert cli("model", "rebuild", "--db", s).exit_code == 0  # s.db claims its folder
    mine = _folder(s)  # a renamed database keeps (adopts) its folder
    assert json.loads((mine / "owner.json").read_text())["database"] == "s.db"
    copy = s.parent / other
    shutil.copyfile(s, copy)
    before, listed = _files(mine), _versions(s)
    assert js(cli("forget", "-y", "5", "--db", copy, "--json"))["deleted"] == 1
    assert cli("model", "rebuild", "--db", copy).exit_code == 0
    assert _files(mine) == before  # not one byte of the original's
    assert _versions(s) == listed and _damaged(s) == [] and _damaged(copy) == []
    own = _folder(copy)
    assert own != mine
    paths = [p for p, in query(copy, "SELECT path FROM model_versions WHERE path IS NOT NULL")]
    assert paths and all(p.startswith(own.name + "/") for p in paths), paths
    assert json.loads((own / "owner.json").read_text())["database"] == other
    assert oct(own.stat().st_mode & 0o777) == "0o700"
    # and the original in its turn leaves the copy alone
    copied = _files(own)
    assert js(cli("forget", "-y", "6", "--db", s, "--json"))["deleted"] == 1
    assert cli("model", "rebuild", "--db", s).exit_code == 0
    assert _files(own) == copied and _damaged(s) == [] and _damaged(copy) == []
    assert js(cli("status", "--db", s, "--json"))["model"]["unlearned_labels"] == 0
    assert js(cli("status", "--db", copy, "--json"))["model"]["unlearned_labels"] == 0


def test_two_fresh_databases_of_one_stem_never_overwrite_each_others_versions(tmp_path):
    x, y = tmp_path / "d" / "x.db", tmp_path / "d" / "x.sqlite"
    populate(x, demo_text_lines()[:20])
    before = _files(x.parent / "x.checkpoints")
    populate(y, demo_text_lines()[20:])
    assert _files(x.parent / "x.checkpoints") == before
    assert (x.parent / "x.sqlite.checkpoints").is_dir()
    assert _damaged(x) == [] and _damaged(y) == []


def test_an_older_layout_shared_by_stem_is_adopted_by_one_and_copied_by_the_other(db):
    """A folder from before the owner mark, shared by ``s.db`` and its copy ``s.old``: the
    file named ``<stem>.db`` adopts it whichever opens first; the other copies its files."""
    s = db.parent / "s.db"
    db.rename(s)
    _folder(s).rename(db.parent / "s.checkpoints")
    (db.parent / "s.checkpoints" / "owner.json").unlink()  # as an older edge-plm left it
    conn = sqlite3.connect(s)
    with conn:
        conn.execute("DELETE FROM meta WHERE key IN ('checkpoints_folder', 'database_id')")
        conn.execute("UPDATE model_versions SET path = replace(path, ?, 's.checkpoints/')",
                     [f"{db.stem}.checkpoints/"])
    conn.close()
    shutil.copyfile(s, s.parent / "s.old")
    before, listed = _files(s.parent / "s.checkpoints"), _versions(s)
    assert js(cli("forget", "-y", "5", "--db", s.parent / "s.old", "--json"))["deleted"] == 1
    assert _files(s.parent / "s.checkpoints") == before
    assert _versions(s) == listed and _damaged(s) == [] and _damaged(s.parent / "s.old") == []
    assert cli("model", "rebuild", "--db", s).exit_code == 0
    assert json.loads((s.parent / "s.checkpoints" / "owner.json").read_text())["database"] == "s.db"
    assert _damaged(s.parent / "s.old") == []


def test_a_backup_is_independent_of_the_original(db, tmp_path):
    state = db.parent
    before = _files(state)
    listed = js(cli("model", "list", "--db", db, "--json"))
    (tmp_path / "bk").mkdir()
    r = js(cli("db", "backup", tmp_path / "bk" / "backup.db", "--db", db, "--json"))
    assert r["checkpoints_copied"] >= 1 and r["checkpoints_missing"] == 0
    copy = tmp_path / "bk" / "backup.db"
    assert _damaged(copy) == []
    assert js(cli("forget", "--all", "--yes", "--db", copy, "--json"))["deleted"] == 48
    assert cli("model", "rebuild", "--db", copy).exit_code == 0
    assert _files(state) == before  # every file of the original byte-identical
    assert js(cli("model", "list", "--db", db, "--json")) == listed
    assert _damaged(db) == []
    assert js(cli("status", "--db", db, "--json"))["model"]["unlearned_labels"] == 0
    copied = _files(tmp_path / "bk" / "backup.checkpoints")
    assert copied and not any("state" in p for p, in query(copy, "SELECT path FROM model_versions "
                                                             "WHERE path IS NOT NULL"))


def test_a_copied_state_dir_works_where_it_is_and_leaves_the_original_alone(db, tmp_path):
    moved = tmp_path / "moved"
    shutil.copytree(db.parent, moved, symlinks=True)  # cp -a
    original = db.parent.rename(tmp_path / "gone")  # nothing may still point there
    before = _files(original)
    copy = moved / db.name
    assert _damaged(copy) == []
    versions = [d["version"] for d in js(cli("model", "list", "--db", copy, "--json"))
                if d["checkpoint_exists"] and d["status"] == "retired"]
    assert cli("model", "rollback", versions[-1], "--db", copy).exit_code == 0
    assert js(cli("forget", "1", "2", "--yes", "--db", copy, "--json"))["deleted"] == 2
    assert _damaged(copy) == [] and _files(original) == before


def test_the_migration_makes_paths_inside_the_folder_relative_and_only_reads_others(db, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (v_out, p_out), = query(db, "SELECT version, path FROM model_versions WHERE status = 'retired' "
                                "AND path IS NOT NULL ORDER BY rowid LIMIT 1")
    shutil.copy2(db.parent / p_out, outside / Path(p_out).name)
    conn = sqlite3.connect(db)  # the file an older edge-plm left: v6, absolute paths
    with conn:
        conn.execute("UPDATE model_versions SET path = ? || '/' || path", [str(db.parent)])
        conn.execute("UPDATE model_versions SET path = ? WHERE version = ?",
                     [str(outside / Path(p_out).name), v_out])
        conn.execute("DROP TABLE forget_owed")
        conn.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    conn.close()
    with ReplayStore(db) as store:
        assert store.stored_schema_version() == SCHEMA_VERSION
    stored = dict(query(db, "SELECT version, path FROM model_versions WHERE path IS NOT NULL"))
    assert stored.pop(v_out) == str(outside / Path(p_out).name)  # outside: stays absolute
    assert all(not os.path.isabs(p) for p in stored.values())
    kept = _files(outside)
    r = js(cli("forget", "--all", "--yes", "--db", db, "--json"))
    assert v_out in r["checkpoints"]["rewritten"]
    assert _files(outside) == kept  # another database's file is never written
    (new,), = query(db, "SELECT path FROM model_versions WHERE version = ?", [v_out])
    assert new.startswith(f"{db.stem}.checkpoints/")  # its rewrite is in the own folder
    assert _damaged(db) == []


# --- a killed forget still forgets -----------------------------------------------------------
SECRET = "hovercraft"


def _secret_db(db: Path) -> tuple[list[int], list[str]]:
    """The demo database with SECRET in every labelled row's transcript (and in every kept
    checkpoint, rebuilt three times): (its ids, the retired versions with a file)."""
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE interactions SET transcript = transcript || ' ' || ? "
                     "WHERE id IN (SELECT id FROM interactions WHERE label = 'ON' LIMIT 5)",
                     [SECRET])
    conn.close()
    for _ in range(3):
        assert cli("model", "rebuild", "--db", db).exit_code == 0
    ids = [i for i, in query(db, "SELECT id FROM interactions WHERE transcript LIKE ?",
                             [f"%{SECRET}%"])]
    retired = [v for v, in query(db, "SELECT version FROM model_versions WHERE status = 'retired' "
                                     "AND path IS NOT NULL AND metrics NOT LIKE '%pruned%'")]
    return ids, retired


class Killed(BaseException):
    pass


def test_a_forget_killed_after_the_first_rewrite_is_finished_at_the_next_start(db, monkeypatch):
    from edge_plm.learning.learner import Learner, LearnerConfig  # noqa: PLC0415

    ids, retired = _secret_db(db)
    assert len(retired) >= 3 and len(_secret_hits(db.parent, [SECRET])) >= 3
    done = []

    def kill_after_one(version: str) -> None:
        done.append(version)
        raise Killed(version)

    monkeypatch.setattr(forgetting, "after_rewrite", kill_after_one)
    with pytest.raises(Killed):
        cli("forget", *ids, "--yes", "--db", db)
    monkeypatch.setattr(forgetting, "after_rewrite", None)
    with ReplayStore(db) as store:
        owed = store.owed_rewrites()
        assert owed and done[0] not in owed and all(set(ids) == o for o in owed.values())
        assert _secret_hits(db.parent, [SECRET])  # the files still hold it
        target = sorted(owed)[0]
        cfg = LearnerConfig(start="")
        with pytest.raises(Exception, match="still holds interactions a `forget` deleted"):
            Learner(store, cfg, store.checkpoints_home(), household=ONE_DEVICE).rollback(target)
        assert store.active_model_version().version != target
    monkeypatch.setattr(forgetting, "complete_owed", lambda store: None)  # not finished yet
    refused = cli("model", "rollback", target, "--db", db)
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.exit_code == 1 and len(lines) == 1 and lines[0].startswith("error: ")
    monkeypatch.undo()
    with ReplayStore(db) as store:  # the next start: the service, forget, a model command
        Learner.open(store, LearnerConfig(start=""), store.checkpoints_home(), household=ONE_DEVICE)
        assert store.owed_rewrites() == {}
    assert _secret_hits(db.parent, [SECRET]) == []
    assert cli("model", "rollback", target, "--db", db).exit_code == 0
    (path,), = query(db, "SELECT path FROM model_versions WHERE status = 'active'")
    from edge_plm.switch.model import SwitchModel  # noqa: PLC0415

    held = {i for i, _ in SwitchModel.load(db.parent / path).meta["interaction_keys"]}
    assert held and not held & set(ids)  # the rollback target holds no forgotten example


KILLER = """
import os, signal, sys
from edge_plm.learning import forgetting, trust
def hook(version):
    os.kill(os.getpid(), signal.SIGKILL)
forgetting.after_rewrite = hook
from edge_plm.cli import app
sys.argv = ["edge-plm"] + sys.argv[1:]
app()
"""


def test_a_forget_killed_by_sigkill_is_finished_by_the_next_command(db):
    ids, _ = _secret_db(db)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, "-c", KILLER, "forget", *map(str, ids), "--yes",
                        "--db", str(db)], env=env, capture_output=True, timeout=600)
    assert p.returncode == -signal.SIGKILL, p.stderr.decode()
    assert query(db, "SELECT count(*) FROM interactions WHERE transcript LIKE ?",
                 [f"%{SECRET}%"])[0][0] == 0  # the rows went in the first transaction
    assert query(db, "SELECT count(*) FROM forget_owed")[0][0] >= 1
    assert _secret_hits(db.parent, [SECRET])
    r = js(cli("forget", "--before", "1970-01-02", "--yes", "--db", db, "--json"))  # nothing
    assert r["deleted"] == 0
    assert cli("model", "rebuild", "--db", db).exit_code == 0  # a model command finishes it
    assert query(db, "SELECT count(*) FROM forget_owed")[0][0] == 0
    assert _secret_hits(db.parent, [SECRET]) == []
    assert _damaged(db) == []
    assert json.loads(cli("status", "--db", db, "--json").stdout)["model"]["unlearned_labels"] == 0


INTERRUPTER = """
import os, signal, sys
from edge_plm.learning import forgetting, version_registry
SIG = getattr(signal, sys.argv.pop(1))  # SIGINT: Ctrl-C; SIGTERM: kill, systemd
def hook(*args, **kwargs):
    os.kill(os.getpid(), SIG)
    return real(*args, **kwargs)
if sys.argv[1] == "forget":
    real = lambda version: None
    forgetting.after_rewrite = hook
else:  # model rebuild: while the model is re-learned
    real = version_registry.VersionRegistry.rebuilt_model
    version_registry.VersionRegistry.rebuilt_model = hook
from edge_plm.cli import app
sys.argv = ["edge-plm"] + sys.argv[1:]
app()
"""


def _interrupted(*args: str, sig: str = "SIGINT") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", INTERRUPTER, sig, *args], env=env,
                          capture_output=True, text=True, timeout=600,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


@pytest.mark.parametrize("sig, code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_ctrl_c_and_sigterm_stop_forget_and_rebuild_cleanly(db, sig, code):
    ids, _ = _secret_db(db)
    active = js(cli("status", "--db", db, "--json"))["model"]["active"]["version"]
    p = _interrupted("model", "rebuild", "--db", str(db), sig=sig)
    assert p.returncode == code, p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    assert f"interrupted: nothing changed ({active} stays active)" in p.stderr
    assert js(cli("status", "--db", db, "--json"))["model"]["active"]["version"] == active
    p = _interrupted("forget", *map(str, ids), "--yes", "--db", str(db), sig=sig)
    assert p.returncode == code, p.stderr
    (line,) = [x for x in p.stderr.splitlines() if x.startswith("interrupted")]
    assert "the interactions are forgotten" in line and "still owed" in line
    assert query(db, "SELECT count(*) FROM forget_owed")[0][0] >= 1  # the journal is intact
    assert cli("model", "rebuild", "--db", db).exit_code == 0
    assert query(db, "SELECT count(*) FROM forget_owed")[0][0] == 0
    assert _secret_hits(db.parent, [SECRET]) == []


def test_audio_paths_are_stored_relative_to_the_database_like_checkpoints(tmp_path):
    """A kept recording inside the database's folder is stored relative to it (a copy of the
    state dir refers to its own files), one elsewhere (`paths.audio_dir`) absolute; both are
    read back as paths to open."""
    state = tmp_path / "state"
    inside, outside = state / "audio" / "00000001.wav", tmp_path / "elsewhere" / "00000002.wav"
    for p in (inside, outside):
        p.parent.mkdir(parents=True)
        p.write_bytes(b"RIFF")
    with ReplayStore(state / "edge-plm.db") as store:
        a = store.add_interaction(transcript="one", audio_path=str(inside))
        b = store.add_interaction(transcript="two")
        store.update_interaction(b, audio_path=str(outside))
        assert store.get(a).audio_path == str(inside) and store.get(b).audio_path == str(outside)
        assert sorted(store.audio_paths([a, b])) == sorted([str(inside), str(outside)])
    assert dict(query(state / "edge-plm.db", "SELECT id, audio_path FROM interactions")) == {
        a: "audio/00000001.wav", b: str(outside)}
    copy = tmp_path / "copy"
    shutil.copytree(state, copy)
    with ReplayStore(copy / "edge-plm.db") as store:
        assert store.get(a).audio_path == str(copy / "audio" / "00000001.wav")
        store.delete_interactions([a], remove_audio=True)
    assert inside.exists() and not (copy / "audio" / "00000001.wav").exists()


def test_a_forget_killed_while_the_service_runs_is_finished_by_the_service(db):
    """Issue 47, item 7: the running service finishes what a killed `forget` owes at its next
    look for deleted rows (not at a restart); `status`, `model list` and `doctor` show what is
    owed until then."""
    from edge_plm.learning.learner import Learner, LearnerConfig  # noqa: PLC0415

    ids, _ = _secret_db(db)
    with ReplayStore(db) as store:
        learner = Learner.open(store, LearnerConfig(start="", forget_check_s=0.0, sync_every_s=0.0),
                               store.checkpoints_home(), household=ONE_DEVICE)  # the service, up
        env = {**os.environ,
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        p = subprocess.run([sys.executable, "-c", KILLER, "forget", *map(str, ids), "--yes",
                            "--db", str(db)], env=env, capture_output=True, timeout=600)
        assert p.returncode == -signal.SIGKILL, p.stderr.decode()
        owed = js(cli("status", "--db", db, "--json"))["model"]["forget_owed"]
        assert owed["versions"] and owed["interactions"] == len(ids)
        listed = {d["version"]: d["forget_owed"]
                  for d in js(cli("model", "list", "--db", db, "--json"))}
        assert {v for v, n in listed.items() if n} == set(owed["versions"])
        text = cli("status", "--db", db).output
        assert "still hold" in text and "forgotten" in text
        assert _secret_hits(db.parent, [SECRET])
        learner.poll()  # its next look
        assert store.owed_rewrites() == {}
    assert _secret_hits(db.parent, [SECRET]) == []
    assert js(cli("status", "--db", db, "--json"))["model"]["forget_owed"] == {
        "versions": [], "interactions": 0}
    assert _damaged(db) == []


def test_importing_an_export_made_before_a_forget_brings_nothing_back(db, tmp_path):
    """Issue 47, item 8: `forget` leaves keyed digests (never the text) that `model import`
    checks: the imported checkpoint is scrubbed of every forgotten example and word."""
    ids, _ = _secret_db(db)
    (active,), = query(db, "SELECT version FROM model_versions WHERE status = 'active'")
    old = tmp_path / "old.npz"
    assert cli("model", "export", active, old, "--db", db).exit_code == 0
    assert SECRET.encode() in old.read_bytes()
    r = js(cli("forget", "-y", *ids, "--db", db, "--json"))
    assert r["deleted"] == len(ids) and _secret_hits(db.parent, [SECRET]) == []
    digests = [d for d, in query(db, "SELECT digest FROM forgotten")]
    assert len(digests) >= 1 and not any(SECRET in d for d in digests)
    assert SECRET.encode() not in db.read_bytes()
    imp = js(cli("model", "import", old, "--force", "--db", db, "--json"))
    assert imp["forgotten_removed"] >= 1  # the labelled ones it held (holdout rows: none)
    assert _secret_hits(db.parent, [SECRET]) == []  # not in the imported version's file
    assert _damaged(db) == []
    assert js(cli("forget", "--all", "-y", "--db", db, "--json"))["deleted"] >= 1
    assert _secret_hits(db.parent, [SECRET]) == []


def test_a_copy_not_opened_yet_keeps_its_versions_when_the_original_forgets(db):
    """The original changes first: ``cp s.db s.old`` then `forget` and `rebuild` in s.db
    (s.old not opened read-write since): s.old gets its own copies before any file of the
    original's folder is rewritten or deleted, and lists none missing."""
    s = db.parent / "s.db"
    db.rename(s)
    copy = s.parent / "s.old"
    shutil.copyfile(s, copy)
    listed = _versions(copy)
    assert js(cli("forget", "-y", "5", "6", "--db", s, "--json"))["deleted"] == 2
    for _ in range(2):
        assert cli("model", "rebuild", "--db", s).exit_code == 0
    states = {d["version"]: d["checkpoint_state"] for d in js(cli("model", "list", "--db", copy, "--json"))
              if not d["pruned"]}
    assert states and all(st == "ok" for st in states.values()), states
    assert _versions(copy) == listed and _damaged(copy) == [] and _damaged(s) == []
    assert _folder(copy) != _folder(s)
