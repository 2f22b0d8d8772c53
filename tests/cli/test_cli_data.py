"""`edge-plm status`, `log`, `stats`, `label`, `forget`, `export`, `db backup` on a replay
buffer populated by the real loop (tests/_data_util.py)."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import sys
import threading
import time
from datetime import datetime, timedelta

import pytest

from _data_util import cli, copy_db, js, populate, query
from edge_plm.commands.opening import UserError, open_store
from edge_plm.commands.rows import all_rows
from edge_plm.commands.stats import learning_curve
from edge_plm.commands.times import parse_time
from edge_plm.loop.replay import SessionLine
from edge_plm.store import SCHEMA_VERSION
from edge_plm.learning.learner import Learner, LearnerConfig
from edge_plm.decide.policy import Action
from edge_plm.config.settings import ModelConfig
from edge_plm.store import ReplayStore
from edge_plm.learning.household import Household

ONE_DEVICE = Household.of_one()

pytestmark = pytest.mark.usefixtures("no_user_config")


# --- status ---------------------------------------------------------------------------------
def test_status_json_and_text(demo_dir):
    path = demo_dir / "edge-plm.db"
    s = js(cli("status", "--db", path, "--json"))
    assert set(s) >= {"database", "model", "holdout", "interactions", "labels",
                      "last_interaction", "asr", "gpio"}
    assert s["interactions"]["total"] == 48
    n_labelled = query(path, "SELECT count(*) FROM interactions WHERE label IS NOT NULL")[0][0]
    assert s["interactions"]["labelled"] == n_labelled
    assert sum(s["labels"].values()) == n_labelled
    active = query(path, "SELECT version FROM model_versions WHERE status = 'active'")[0][0]
    assert s["model"]["active"]["version"] == active
    assert s["model"]["versions"] >= 2
    assert s["asr"] == {"configured": "auto", "last_used": "text", "lm": "household"}
    assert s["gpio"] == {"pin_factory": "auto"}
    assert s["database"]["bytes"] > 0 and s["database"]["schema_version"] == SCHEMA_VERSION
    assert s["last_interaction"]["id"] == 48
    assert 0.0 <= s["holdout"]["balanced_accuracy"] <= 1.0
    text = cli("status", "--db", path)
    assert text.exit_code == 0
    for word in ("model", active, "holdout", "interactions", "ASR", "GPIO", "#48"):
        assert word in text.stdout


@pytest.mark.parametrize("command", [("status", "--json"), ("log",), ("stats", "--json"), ("model", "list")])
def test_read_only_commands_do_not_load_the_model(demo_dir, monkeypatch, command):
    """status counts the unlearned labels from the checkpoint's labels alone (``SwitchModel.held``)."""
    from edge_plm.switch.model import SwitchModel

    def refuse(*_a, **_k):
        raise AssertionError("a read-only command loaded the model")

    monkeypatch.setattr(SwitchModel, "load", refuse)
    result = cli(*command, "--db", demo_dir / "edge-plm.db")
    assert result.exit_code == 0, result.output
    if command[0] == "status":
        assert json.loads(result.stdout)["model"]["unlearned_labels"] == 0


# --- log ------------------------------------------------------------------------------------
def test_log_json_filters(demo_dir):
    path = demo_dir / "edge-plm.db"
    rows = js(cli("log", "--db", path, "--limit", "5", "--json"))
    assert isinstance(rows, list) and [r["id"] for r in rows] == [44, 45, 46, 47, 48]
    assert set(rows[0]) >= {"id", "time", "transcript", "prediction", "confidence", "decision",
                            "action", "label", "label_source", "latency_total_ms",
                            "model_version"}
    offs = js(cli("log", "--db", path, "--label", "off", "-n", "0", "--json"))
    assert offs and all(r["label"] == "OFF" for r in offs)
    assert len(offs) == query(path, "SELECT count(*) FROM interactions WHERE label='OFF'")[0][0]
    none = js(cli("log", "--db", path, "--label", "none", "-n", "0", "--json"))
    assert all(r["label"] is None for r in none)
    assert len(js(cli("log", "--db", path, "--since", "2h", "-n", "0", "--json"))) == 48
    tomorrow = (datetime.now() + timedelta(days=1)).date().isoformat()
    assert js(cli("log", "--db", path, "--since", tomorrow, "--json")) == []
    bad = cli("log", "--db", path, "--since", "last tuesday")
    assert bad.exit_code == 2 and "cannot read the time" in bad.stderr
    bad = cli("log", "--db", path, "--label", "MAYBE")
    assert bad.exit_code == 2 and "--label" in bad.stderr


def test_log_table(demo_dir):
    out = cli("log", "--db", demo_dir / "edge-plm.db", "-n", "3")
    assert out.exit_code == 0
    assert "transcript" in out.stdout and "turn on the light" in out.stdout


def test_log_follow_prints_new_rows_and_their_labels(db):
    def writer():
        time.sleep(0.3)
        with ReplayStore(db) as store:
            iid = store.add_interaction(transcript="lamp on now", prediction="ON",
                                        confidence=0.6, decision="ask")
            time.sleep(0.3)
            store.set_label(iid, "ON", "asked")

    t = threading.Thread(target=writer)
    t.start()
    out = cli("log", "--db", db, "-n", "1", "--follow", "--interval", "0.1", "--max-polls",
              "15", "--json")
    t.join()
    assert out.exit_code == 0, out.output
    events = [json.loads(s) for s in out.stdout.splitlines()]
    assert events[0]["event"] == "interaction" and events[0]["id"] == 48
    new = [e for e in events if e["event"] == "interaction" and e["id"] == 49]
    assert new and new[0]["transcript"] == "lamp on now" and new[0]["label"] is None
    assert {"event": "label", "id": 49, "label": "ON", "label_source": "asked"} in events
    plain = cli("log", "--db", db, "-n", "2", "--follow", "--interval", "0.01",
                "--max-polls", "2")
    assert plain.exit_code == 0 and "#49" in plain.stdout and '"lamp on now"' in plain.stdout


def test_parse_time_forms():
    now = 1_700_000_000.0
    assert parse_time("2h", now) == now - 7200
    assert parse_time("1d", now) == now - 86400
    assert parse_time("90s", now) == now - 90
    assert parse_time("1w", now) == now - 7 * 86400
    assert parse_time("2024-05-01T00:00:00+00:00") == 1714521600.0
    assert parse_time("2024-05-01T00:00:00Z") == 1714521600.0
    assert parse_time("2024-05-01") == datetime(2024, 5, 1).timestamp()
    assert parse_time("today", now) <= now
    with pytest.raises(UserError):
        parse_time("soon")


# --- stats ----------------------------------------------------------------------------------
def test_stats_json_shape(demo_dir):
    s = js(cli("stats", "--db", demo_dir / "edge-plm.db", "--json"))
    assert s["interactions"] == 48
    assert set(s["classes"]) == {"label", "prediction", "decision", "label_source"}
    assert sum(s["classes"]["decision"].values()) == 48
    assert s["versions"] and {"version", "parent", "status", "balanced_accuracy",
                              "holdout_n", "gate", "n_train"} <= set(s["versions"][0])
    assert sum(d["asked"] for d in s["per_day"]) == s["classes"]["decision"]["ask"]
    w = s["wrong_actions"]
    assert 0 <= w["wrong"] <= w["acted_labelled"] <= w["acted"]
    for r in w["recent"]:
        assert r["label"] != r["action"]
    lat = s["latency_ms"]
    assert set(lat) == {"audio", "asr", "model", "actuator", "total"}
    assert lat["total"]["n"] == 48 and lat["total"]["p50"] <= lat["total"]["p95"] <= lat["total"]["max"]
    text = cli("stats", "--db", demo_dir / "edge-plm.db")
    assert text.exit_code == 0 and "model versions" in text.stdout and "p95" in text.stdout


def test_stats_plot(demo_dir, tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "learning.png"
    out = cli("stats", "--db", demo_dir / "edge-plm.db", "--plot", png)
    assert out.exit_code == 0, out.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


@pytest.mark.parametrize("name,needle", [("x.txt", "cannot draw a 'txt' plot"),
                                         ("x", "without an extension"),
                                         ("nodir/x.png", "no such directory")])
def test_stats_plot_refuses_a_file_it_cannot_write_before_any_work(demo_dir, tmp_path, monkeypatch, name, needle):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    out = cli("stats", "--db", demo_dir / "edge-plm.db", "--plot", name)
    assert out.exit_code == 2 and out.stdout == "", out.output  # no tables printed first
    assert out.stderr.startswith("error: --plot") and needle in out.stderr and ".png" in out.stderr
    assert len(out.stderr.splitlines()) == 1


def test_learning_curve_agreement_follows_predictions_and_labels(demo_dir):
    store = open_store(demo_dir / "edge-plm.db")
    try:
        curve = learning_curve(store, window=5)
        rows = all_rows(store)
    finally:
        store.close()
    hits = []
    for i, r in enumerate(rows):
        if r.label is not None and r.prediction is not None:
            hits.append(r.prediction == r.label)
        expect = sum(hits[-5:]) / len(hits[-5:]) if hits else None
        assert curve["agreement"][i] == expect
    assert len(curve["agreement"]) == curve["n"] == 48 and hits


def test_plot_draws_acted_wrong_on_top_of_the_lines_that_share_zero():
    from edge_plm.commands.plots import STYLES

    wrong = STYLES["acted_wrong"]
    others = [k for k in STYLES if k != "acted_wrong"]
    assert all(wrong["zorder"] > STYLES[k]["zorder"] for k in others)
    assert wrong["linewidth"] < STYLES["missed"]["linewidth"]  # the wide line under it shows too


def test_stats_plot_without_matplotlib(demo_dir, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    out = cli("stats", "--db", demo_dir / "edge-plm.db", "--plot", tmp_path / "x.png")
    assert out.exit_code == 1
    assert "matplotlib" in out.stderr and "pip install" in out.stderr
    assert "Traceback" not in out.output and not (tmp_path / "x.png").exists()


# --- export ---------------------------------------------------------------------------------
def test_export_jsonl_replays(demo_dir, tmp_path):
    """Every interaction by default (label null where none was learned), and the export
    replays: a null label means the simulated person does nothing."""
    path = demo_dir / "edge-plm.db"
    out_file = tmp_path / "session.jsonl"
    out = cli("export", "--db", path, "--format", "jsonl", "--output", out_file)
    assert out.exit_code == 0, out.output
    n_labelled = query(path, "SELECT count(*) FROM interactions WHERE label IS NOT NULL")[0][0]
    assert 0 < n_labelled < 48
    lines = [json.loads(s) for s in out_file.read_text().splitlines()]
    assert len(lines) == 48 and "skipped" not in out.stderr
    assert all(isinstance(r["text"], str) and r["label"] in ("ON", "OFF", "NOOP", None)
               for r in lines)
    assert sum(r["label"] is not None for r in lines) == n_labelled
    assert [r["id"] for r in lines] == sorted(r["id"] for r in lines)
    assert (out_file.stat().st_mode & 0o777) == 0o600
    # the round trip: the exported session is a replay fixture
    replayed = js(cli("replay", out_file, "--db", tmp_path / "again" / "edge-plm.db", "--json"))
    assert replayed["interactions"] == 48
    # --labelled: the old behaviour
    out = cli("export", "--db", path, "--labelled")
    assert len(out.stdout.splitlines()) == n_labelled
    assert f"skipped {48 - n_labelled} unlabelled" in out.stderr
    assert cli("export", "--db", path, "--include-unlabelled").stdout.count("\n") == 48
    assert cli("export", "--db", path, "--labelled", "--include-unlabelled").exit_code == 2


def test_export_csv_has_every_row(demo_dir):
    out = cli("export", "--db", demo_dir / "edge-plm.db", "--format", "csv")
    assert out.exit_code == 0
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert len(rows) == 48
    assert rows[0]["id"] == "1" and rows[-1]["id"] == "48"
    assert {"transcript", "label", "label_source", "prediction", "latency_total_ms",
            "holdout"} <= set(rows[0])
    assert any(r["label"] == "" for r in rows)  # unlabelled rows are included
    only = cli("export", "--db", demo_dir / "edge-plm.db", "--format", "csv", "--labelled")
    assert only.exit_code == 0, only.stderr
    labelled = list(csv.DictReader(io.StringIO(only.stdout)))
    assert labelled == [r for r in rows if r["label"] != ""] and labelled  # --labelled applies
    assert f"skipped {48 - len(labelled)} unlabelled (--labelled)" in only.stderr
    assert cli("export", "--db", demo_dir / "edge-plm.db", "--format", "xml").exit_code == 2


# --- label ----------------------------------------------------------------------------------
def _learner(db):
    store = ReplayStore(db)
    return store, Learner.open(store, LearnerConfig.from_settings(ModelConfig(start="empty")),
                               db.parent / f"{db.stem}.checkpoints", household=ONE_DEVICE)


def test_label_correction_changes_the_next_prediction(tmp_path):
    phrase = "lamp please"
    # a session in which the person wanted ON every time they said the phrase (the light is
    # off before each time, so that an action on it changes the relay and gets a label)
    lines = [SessionLine(Action.OFF, text="lights off"), SessionLine(Action.ON, text=phrase),
             SessionLine(Action.NOOP, text="what time is it")] * 8
    db = tmp_path / "state" / "edge-plm.db"
    populate(db, lines)
    store, learner = _learner(db)
    assert learner.predict(phrase).action == "ON"
    rows = query(db, "SELECT id, holdout FROM interactions WHERE transcript = ? "
                     "AND label IS NOT NULL ORDER BY holdout DESC, id", [phrase])
    learned = [iid for iid, h in rows if not h and iid in learner.keys]
    store.close()
    assert len(learned) >= 3, rows
    # ... but it meant OFF. Each correction replaces the earlier ON in the model (no
    # rebuild) and goes through the gate; the holdout rows are corrected first, so the
    # gate judges the corrected model on corrected labels.
    results = []
    for iid, holdout in rows:
        r = js(cli("label", iid, "OFF", "--db", db, "--json"))
        assert r["label"] == "OFF" and r["label_source"] == "manual"
        assert r["previous"]["label"] == "ON" and r["holdout"] == bool(holdout)
        if not holdout:
            assert r["learned"] and r["replaced"] == (iid in learned)
            assert r["version"]["status"] == "active", r["version"]
        results.append(r)
    assert results[0]["prediction_before"]["action"] == "ON"
    assert results[-1]["prediction_after"]["action"] == "OFF"
    assert query(db, "SELECT DISTINCT label, label_source FROM interactions WHERE id IN "
                     f"({', '.join(str(i) for i, _ in rows)})") == [("OFF", "manual")]
    # the next prediction, by a freshly started learner (as the service would after a restart)
    store, learner = _learner(db)
    try:
        assert learner.predict(phrase).action == "OFF"
        assert learner.version == results[-1]["version"]["version"]
        n_labels = query(db, "SELECT count(*) FROM interactions WHERE label IS NOT NULL "
                             "AND holdout = 0")[0][0]
        assert learner.model.n_examples <= n_labels  # replaced, never added twice
    finally:
        store.close()
    text = cli("label", learned[0], "NOOP", "--db", db)
    assert text.exit_code == 0 and "taken out of the model and replaced" in text.stdout


def test_label_holdout_unchanged_and_errors(db):
    holdout_id = query(db, "SELECT id, label FROM interactions WHERE holdout = 1 "
                           "AND label IS NOT NULL LIMIT 1")[0]
    new = "NOOP" if holdout_id[1] != "NOOP" else "ON"
    versions_before = query(db, "SELECT count(*) FROM model_versions")[0][0]
    r = js(cli("label", holdout_id[0], new.lower(), "--db", db, "--json"))
    assert r["holdout"] and not r["learned"] and r["version"] is None
    assert query(db, "SELECT count(*) FROM model_versions")[0][0] == versions_before
    assert query(db, "SELECT label, label_source FROM interactions WHERE id = ?",
                 [holdout_id[0]]) == [(new, "manual")]
    same = cli("label", holdout_id[0], new, "--db", db)
    assert same.exit_code == 0 and "nothing changed" in same.stdout
    missing = cli("label", 999, "ON", "--db", db)
    assert missing.exit_code == 1 and "no interaction with id 999" in missing.stderr
    bad = cli("label", 1, "MAYBE", "--db", db)
    assert bad.exit_code == 2 and "ACTION" in bad.stderr
    text = cli("label", 2, "NOOP", "--db", db)  # human output of a learned correction
    assert text.exit_code == 0 and "-> NOOP (manual)" in text.stdout


# --- forget ---------------------------------------------------------------------------------
def test_forget_ids_removes_rows_and_audio(db, tmp_path):
    audio = tmp_path / "audio"
    audio.mkdir()
    files = {}
    conn = sqlite3.connect(db)
    for iid in (3, 4, 5):
        f = audio / f"{iid:08d}.wav"
        f.write_bytes(b"RIFF....WAVE")
        files[iid] = f
        conn.execute("UPDATE interactions SET audio_path = ? WHERE id = ?", [str(f), iid])
    conn.commit()
    conn.close()
    files[5].unlink()  # already gone: not an error
    r = js(cli("forget", 3, 5, "--yes", "--db", db, "--json"))
    assert r["deleted"] == 2 and r["ids"] == [3, 5]
    assert r["audio_removed"] == 1 and r["audio_missing"] == 1
    assert not files[3].exists() and files[4].exists()
    assert query(db, "SELECT count(*) FROM interactions")[0][0] == 46
    assert query(db, "SELECT count(*) FROM interactions WHERE id IN (3, 5)")[0][0] == 0
    missing = cli("forget", 3, "--yes", "--db", db)
    assert missing.exit_code == 2 and "no interaction with id 3" in missing.stderr


def test_forget_asks_and_needs_a_selection(db):
    no = cli("forget", 1, "--db", db, input="n\n")
    assert no.exit_code == 1 and query(db, "SELECT count(*) FROM interactions")[0][0] == 48
    yes = cli("forget", 1, "--db", db, input="y\n")
    assert yes.exit_code == 0 and "forgot 1 interaction" in yes.stdout
    assert query(db, "SELECT count(*) FROM interactions")[0][0] == 47
    none = cli("forget", "--db", db, "--yes")
    assert none.exit_code == 2 and "exactly one" in none.stderr
    both = cli("forget", 2, "--all", "--db", db, "--yes")
    assert both.exit_code == 2
    assert cli("forget", "--all", "--db", db, "--json").exit_code == 2  # --json needs --yes


def test_forget_before_and_all_with_rebuild(db):
    ts10, ts11 = (r[0] for r in query(db, "SELECT ts FROM interactions WHERE id IN (10, 11) "
                                          "ORDER BY id"))
    cut = (ts10 + ts11) / 2  # ISO text has microseconds: not exactly a row's time
    r = js(cli("forget", "--before", datetime.fromtimestamp(cut).isoformat(), "--yes",
               "--db", db, "--json"))
    assert r["deleted"] == 10 and r["ids"] == list(range(1, 11))
    assert r["rebuilt"] is None
    assert js(cli("forget", "--before", "2000-01-01", "--yes", "--db", db, "--json"))[
        "deleted"] == 0
    r = js(cli("forget", "--all", "--yes", "--rebuild", "--db", db, "--json"))
    assert r["deleted"] == 38
    assert query(db, "SELECT count(*) FROM interactions")[0][0] == 0
    active = query(db, "SELECT version, metrics, path FROM model_versions "
                       "WHERE status = 'active'")[0]
    assert active[0] == r["rebuilt"]
    m = json.loads(active[1])
    assert m["gate"] == "rebuild" and m["labels_in_window"] == 0
    store, learner = _learner(db)
    try:
        assert learner.version == r["rebuilt"] and len(learner.model.examples) == 0
    finally:
        store.close()


def test_forget_takes_the_rows_out_of_the_active_model(db):
    store, learner = _learner(db)
    ids = sorted(learner.keys)[:4]
    n = learner.model.n_examples
    version = learner.version
    store.close()
    r = js(cli("forget", *ids, "--yes", "--db", db, "--json"))
    assert r["deleted"] == 4 and r["rebuilt"] is None
    assert r["model"]["forgotten"] == 4 and r["model"]["version"] not in (None, version)
    store, learner = _learner(db)
    try:
        assert learner.version == r["model"]["version"]
        assert learner.model.n_examples == n - 4 and not set(ids) & set(learner.keys)
        assert store.active_model_version().metrics["gate"] == "forget"
    finally:
        store.close()
    text = cli("forget", sorted(learner.keys)[0], "--yes", "--db", db)
    assert text.exit_code == 0 and "took back the 1" in text.stdout


# --- backup ---------------------------------------------------------------------------------
def test_backup_while_the_service_writes(db, tmp_path):
    stop = threading.Event()
    written = []

    def service():
        with ReplayStore(db) as store:
            while not stop.is_set():
                written.append(store.add_interaction(transcript="turn on the light",
                                                     prediction="ON", confidence=0.9,
                                                     decision="act", action="ON"))

    t = threading.Thread(target=service)
    t.start()
    try:
        while len(written) < 20:
            time.sleep(0.01)
        counts = []
        for k in range(3):
            dest = tmp_path / f"backup-{k}.db"
            r = js(cli("db", "backup", dest, "--db", db, "--json"))
            assert r["integrity_check"] == "ok" and r["schema_version"] == SCHEMA_VERSION
            counts.append(r["interactions"])
            # the copy opens on its own: a self-contained file, not WAL, 0600
            conn = sqlite3.connect(f"file:{dest}?mode=ro", uri=True)
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
            assert conn.execute("SELECT count(*) FROM interactions").fetchone()[0] == counts[-1]
            conn.close()
            assert (dest.stat().st_mode & 0o777) == 0o600
            with ReplayStore(dest, read_only=True) as copy:
                assert copy.count() == counts[-1]
    finally:
        stop.set()
        t.join()
    assert 48 < counts[0] <= counts[-1] <= 48 + len(written)
    assert len(written) > counts[0] - 48  # the service kept writing during the backups


def test_every_writer_refuses_an_existing_file_unless_force(db, tmp_path):
    """One rule for -o FILE, DEST and OUT: an existing file is refused, --force replaces it."""
    version = query(db, "SELECT version FROM model_versions WHERE path IS NOT NULL "
                        "AND status != 'pruned' ORDER BY rowid DESC")[0][0]
    writers = {"export": ["export", "--db", db, "--output"],
               "config defaults": ["config", "defaults", "-o"],
               "db backup": ["db", "backup", "--db", db],
               "model export": ["model", "export", version, "--db", db]}
    for name, args in writers.items():
        dest = tmp_path / f"{name.replace(' ', '-')}.out"
        dest.write_text("precious")
        out = cli(*args, dest)
        assert out.exit_code == 1, (name, out.output)
        assert out.stderr.strip() == f"error: {dest} exists; not overwritten (use --force)", name
        assert dest.read_text() == "precious", name
        out = cli(*args, dest, "--force")
        assert out.exit_code == 0, (name, out.output)
        assert dest.read_bytes() != b"precious", name


def test_backup_refuses_to_overwrite(db, tmp_path):
    dest = tmp_path / "b.db"
    dest.write_text("precious")
    out = cli("db", "backup", dest, "--db", db)
    assert out.exit_code == 1 and "not overwritten" in out.stderr
    assert dest.read_text() == "precious"
    out = cli("db", "backup", dest, "--db", db, "--force")
    assert out.exit_code == 0 and "integrity_check ok" in out.stdout
    out = cli("db", "backup", tmp_path / "nodir" / "b.db", "--db", db)
    assert out.exit_code == 1 and "does not exist" in out.stderr
    into_dir = cli("db", "backup", tmp_path, "--db", db, "--json")
    assert json.loads(into_dir.stdout)["backup"] == str(tmp_path / "edge-plm.db")


# --- missing, newer, foreign databases ------------------------------------------------------
COMMANDS = [["status"], ["log"], ["stats"], ["label", "1", "ON"], ["forget", "--all", "--yes"],
            ["export"], ["db", "backup", "BACKUP"], ["model", "list"], ["model", "show", "v0001"],
            ["model", "rollback", "v0001"], ["model", "rebuild"]]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a))
def test_missing_database_is_a_clear_error(tmp_path, args):
    path = tmp_path / "nothing" / "edge-plm.db"
    args = [str(tmp_path / "b.db") if a == "BACKUP" else a for a in args]
    out = cli(*args, "--db", path)
    assert out.exit_code == 1, out.output
    assert f"no database at {path}" in out.stderr and "Traceback" not in out.output
    assert not path.exists() and not path.parent.exists()  # nothing created


def test_default_database_comes_from_the_config(tmp_path, monkeypatch, demo_dir):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[paths]\nstate_dir = "{tmp_path / "state"}"\n')
    out = cli("status", "--config", cfg)
    assert out.exit_code == 1 and str(tmp_path / "state" / "edge-plm.db") in out.stderr
    copy_db(demo_dir, tmp_path / "state")
    monkeypatch.setenv("EDGE_PLM_CONFIG", str(cfg))
    assert js(cli("status", "--json"))["interactions"]["total"] == 48
    bad = tmp_path / "bad.toml"
    bad.write_text("[nope]\n")
    out = cli("status", "--config", bad)
    assert out.exit_code == 2 and "configuration" in out.stderr


@pytest.mark.parametrize("args", [a for a in COMMANDS if a[0] != "db"], ids=lambda a: " ".join(a))
def test_newer_schema_is_refused_untouched(db, args):
    conn = sqlite3.connect(db)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    before = db.read_bytes()
    out = cli(*args, "--db", db)
    assert out.exit_code == 1, out.output
    assert "schema v99 is newer" in out.stderr and "upgrade edge-plm" in out.stderr
    assert "Traceback" not in out.output
    assert db.read_bytes() == before


def test_not_a_database(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    out = cli("status", "--db", junk)
    assert out.exit_code == 1 and "junk.db" in out.stderr and "Traceback" not in out.output
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE x (a)")
    conn.close()
    out = cli("log", "--db", other)
    assert out.exit_code == 1 and "not an edge-plm database" in out.stderr
