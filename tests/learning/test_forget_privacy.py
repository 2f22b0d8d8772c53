"""What `forget` leaves on disk and in the log: deleted transcripts are not readable in the
database file or its write-ahead log, and transcripts reach the log only when asked for."""

import json
import logging
from dataclasses import replace

from edge_plm.loop.replay import run_session
from edge_plm.config.settings import Settings
from edge_plm.store import ReplayStore
from edge_plm.switch.model import SwitchModel
from kit import PHRASES, make_replay, session
from edge_plm.learning.household import Household

ONE_DEVICE = Household.of_one()

SECRET = "xylofrump"


def _bytes_of(db) -> bytes:
    return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))


def test_deleted_transcripts_leave_neither_the_file_nor_the_wal(tmp_path):
    db = tmp_path / "edge-plm.db"
    with ReplayStore(db) as store:
        keep = store.add_interaction(transcript="turn on the light", asr_backend="text")
        gone = [store.add_interaction(transcript=f"my bank pin is {SECRET} {i}", asr_backend="text")
                for i in range(20)]
        assert SECRET.encode() in _bytes_of(db)
        store.delete_interactions(gone)
        assert SECRET.encode() not in _bytes_of(db)  # still open: main file and -wal both clean
        assert store.get(keep).transcript == "turn on the light"
    assert SECRET.encode() not in _bytes_of(db)


def test_transcripts_reach_the_log_only_when_asked_for(tmp_path, caplog):
    for wanted in (False, True):
        s = Settings()
        s = replace(s, paths=replace(s.paths, log_transcripts=wanted))
        r = make_replay(tmp_path / f"db-{wanted}.db", settings=s)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="edge_plm.loop.controller"):
            try:
                run_session(session([(f"{SECRET} turn on the light", "ON")]), r.controller, r.clock,
                            endpointer=r.endpointer)
            finally:
                r.close()
        info = " ".join(rec.getMessage() for rec in caplog.records if rec.levelno >= logging.INFO)
        assert (SECRET in info) is wanted


# --- every kept file, also after a rollback (issue 19) ----------------------------------------
OTHER, UNHEARD = "quandoberry", "zwiblet"


def _device_with_secrets(tmp_path):
    """A state dir (database + checkpoints, several versions) whose household said SECRET
    (labelled), OTHER (labelled) and UNHEARD (no label: observed only)."""
    lines = []
    for i in range(6):
        lines += session(PHRASES[:6] + [(f"my bank pin is {SECRET} {i}", "NOOP"),
                                        (f"{OTHER} turn on the light", "ON"),
                                        (f"remind me about {UNHEARD} {i}", None)])
    db = tmp_path / "state" / "edge-plm.db"
    r = make_replay(db, start="empty", version_every=9)
    try:
        run_session(lines, r.controller, r.clock, endpointer=r.endpointer)
    finally:
        r.close()
    return db


def _hits(state_dir, words) -> dict[str, list[str]]:
    """Files under `state_dir` whose bytes hold any of `words`."""
    found = {}
    for p in sorted(state_dir.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            held = [w for w in words if w.encode() in data]
            if held:
                found[str(p.relative_to(state_dir))] = held
    return found


def test_forget_leaves_no_word_in_any_kept_file_even_after_rollbacks(tmp_path, caplog):
    from _data_util import cli, js, query  # noqa: PLC0415

    db = _device_with_secrets(tmp_path)
    state = db.parent
    words = [SECRET, OTHER, UNHEARD]
    assert set(sum(_hits(state, words).values(), [])) == set(words)
    versions = [v for v, in query(db, "SELECT version FROM model_versions WHERE path IS NOT NULL")]
    assert len(versions) >= 4
    secret_ids = [i for i, in query(db, "SELECT id FROM interactions WHERE transcript LIKE ?",
                                    [f"%{SECRET}%"])]
    caplog.set_level(logging.INFO)
    r = js(cli("forget", *secret_ids, "--yes", "--db", db, "--json"))
    assert r["deleted"] == 6 and r["checkpoints"]["rewritten"] and not r["checkpoints"]["removed"]
    assert SECRET not in sum(_hits(state, words).values(), [])
    assert js(cli("status", "--db", db, "--json"))["model"]["unlearned_labels"] == 0
    for v in r["checkpoints"]["rewritten"]:  # the record says what the file holds now
        (n_train, n_examples, metrics), = query(
            db, "SELECT n_train, n_examples, metrics FROM model_versions WHERE version = ?", [v])
        assert n_train == n_examples and "forget_rewritten" in json.loads(metrics)
    kept = [v for v, in query(db, "SELECT version FROM model_versions WHERE path IS NOT NULL")]
    listed = js(cli("model", "list", "--db", db, "--json"))
    for v in [d["version"] for d in listed if d["checkpoint_exists"]]:
        assert cli("model", "rollback", v, "--db", db).exit_code == 0
        assert SECRET not in sum(_hits(state, words).values(), []), v
        (path,), = query(db, "SELECT path FROM model_versions WHERE status = 'active'")
        held = {i for i, _ in SwitchModel.load(db.parent / path).meta["interaction_keys"]}
        assert held and not held & set(secret_ids), v  # rollback revives no forgotten example
    assert set(kept) >= set(versions) - {d["version"] for d in listed if d["pruned"]}
    text = cli("forget", "--all", "--yes", "--db", db)
    assert text.exit_code == 0 and "backups:" in text.stdout
    assert _hits(state, words) == {}
    for v in [d["version"] for d in js(cli("model", "list", "--db", db, "--json"))
              if d["checkpoint_exists"]]:
        assert cli("model", "rollback", v, "--db", db).exit_code == 0
        assert _hits(state, words) == {}, v
    assert not any(w in rec.getMessage() for rec in caplog.records for w in words)


def test_a_running_service_scrubs_its_live_model_when_another_process_forgets(tmp_path):
    from edge_plm.learning.learner import Learner, LearnerConfig  # noqa: PLC0415
    from kit import FakeClock  # noqa: PLC0415

    clock = FakeClock(tick=1.0)
    cfg = LearnerConfig(version_every=1000, holdout_fraction=0.0, forget_check_s=0.0,
                        sync_every_s=0.0)
    with ReplayStore(tmp_path / "edge-plm.db", clock=clock) as store:
        service = Learner(store, cfg, tmp_path / "ckpt", clock=clock, household=ONE_DEVICE)
        def label(text, action):
            iid = store.add_interaction(transcript=text)
            store.set_label(iid, action, "asked")
            service.on_label(iid, text, action)
            return iid

        for text, action in PHRASES[:6]:
            label(text, action)
        service.new_version()
        gone = label(f"my bank pin is {SECRET}", "NOOP")
        service.new_version()
        heard = store.add_interaction(transcript=f"remind me about {OTHER}")
        service.observe(f"remind me about {OTHER}")  # unlabelled: its units join the vocabulary
        assert f"w:{SECRET}" in service.model.units.index and OTHER in service.model.words.index
        # `edge-plm forget` in its own process: the unlabelled row first (the active version
        # never saw it, so no version is made), then the labelled one
        Learner.open(store, cfg, tmp_path / "ckpt", household=ONE_DEVICE).forget_interactions([heard])
        service.new_version()  # saved before it noticed: from a live model that holds OTHER
        assert _hits(tmp_path, [OTHER])
        clock.advance(10.0)
        service.poll()
        assert _hits(tmp_path, [OTHER]) == {}  # the version it saved was rewritten
        assert f"w:{OTHER}" not in service.model.units.index
        assert f"w:{SECRET}" in service.model.units.index
        Learner.open(store, cfg, tmp_path / "ckpt", household=ONE_DEVICE).forget_interactions([gone])
        clock.advance(10.0)
        service.poll()
        assert gone not in service.keys
        for s in (SECRET, OTHER):
            assert f"w:{s}" not in service.model.units.index and s not in service.model.words.index
        service.new_version()  # what the service saves later holds neither
        assert _hits(tmp_path, [SECRET, OTHER]) == {}


def test_a_checkpoint_forget_cannot_rewrite_is_deleted_and_rollback_to_it_refuses(tmp_path):
    from _data_util import cli, js, query  # noqa: PLC0415

    db = _device_with_secrets(tmp_path)
    retired = [(v, p) for v, p in query(
        db, "SELECT version, path FROM model_versions WHERE status = 'retired' AND path IS NOT NULL")]
    version, path = retired[-1]
    path = db.parent / path  # stored relative to the database's directory
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF  # damaged: it can no longer be loaded, so not rewritten
    open(path, "wb").write(bytes(data))
    ids = [i for i, in query(db, "SELECT id FROM interactions WHERE transcript LIKE ?", [f"%{SECRET}%"])]
    r = js(cli("forget", *ids, "--yes", "--db", db, "--json"))
    assert r["checkpoints"]["removed"] == [version]
    assert not path.exists()
    listed = cli("model", "list", "--db", db)
    row = next(line for line in listed.stdout.splitlines() if line.strip().startswith(version))
    assert "removed by forget" in row
    assert f"{version}: checkpoint deleted by `forget`" in listed.stderr
    back = cli("model", "rollback", version, "--db", db)
    assert back.exit_code != 0
    lines = [line for line in back.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "deleted by `forget`" in lines[0]
    assert "Traceback" not in back.output
