"""Replay buffer on real SQLite files (sqlite-utils): schema, migrations, API, safety."""

from __future__ import annotations

import os
import sqlite3
import stat
import threading

import pytest
import sqlite_utils

from edge_plm.decide.policy import Action, LabelSource
from edge_plm.store import (BUSY_TIMEOUT_MS, BusyError,
    SCHEMA_VERSION, NotFoundError, ReplayStore, SchemaError, StoreError, clean_text,
    row_to_interaction, schema_version,
)
from kit import FakeClock


@pytest.fixture
def path(tmp_path):
    return tmp_path / "state" / "edge-plm.db"


@pytest.fixture
def store(path):
    s = ReplayStore(path, clock=FakeClock(tick=1.0))
    yield s
    s.close()


# A frozen copy of the schema as version 1 shipped it: the migration test must start from a
# file written by that release, not from whatever migration 1 says today.
V1_SQL = """
CREATE TABLE [meta] ([key] TEXT PRIMARY KEY, [value] TEXT);
CREATE TABLE interactions (
    id INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL NOT NULL, transcript TEXT NOT NULL DEFAULT '',
    asr_backend TEXT, asr_confidence REAL, audio_path TEXT,
    prediction TEXT CHECK (prediction IN ('ON', 'OFF', 'NOOP')), confidence REAL,
    distribution TEXT, decision TEXT CHECK (decision IN ('act', 'ask', 'ignore')),
    action TEXT CHECK (action IN ('ON', 'OFF')), label TEXT CHECK (label IN ('ON', 'OFF', 'NOOP')),
    label_source TEXT CHECK (label_source IN ('asked', 'override', 'confirmed', 'manual')),
    label_ts REAL, model_version TEXT,
    holdout INTEGER NOT NULL DEFAULT 0 CHECK (holdout IN (0, 1)),
    latency_audio_ms REAL, latency_asr_ms REAL, latency_model_ms REAL,
    latency_actuator_ms REAL, error TEXT);
CREATE INDEX idx_interactions_ts ON interactions (ts);
CREATE INDEX idx_interactions_label ON interactions (label);
CREATE TABLE model_versions (
    version TEXT PRIMARY KEY, parent TEXT, created_ts REAL NOT NULL, path TEXT,
    status TEXT NOT NULL CHECK (status IN ('candidate', 'active', 'rolled_back', 'retired')),
    metrics TEXT, n_train INTEGER NOT NULL DEFAULT 0);
CREATE UNIQUE INDEX idx_one_active_model ON model_versions(status) WHERE status = 'active';
INSERT INTO meta VALUES ('schema_version', '1');
INSERT INTO interactions (ts, transcript, label, label_source, latency_audio_ms, latency_asr_ms,
    latency_model_ms, latency_actuator_ms) VALUES (1.0, 'lights on', 'ON', 'asked', 10, 200, 1, 5);
INSERT INTO interactions (ts, transcript, latency_asr_ms) VALUES (2.0, 'hm', 150);
"""


def columns(path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [r[1] for r in conn.execute("PRAGMA table_info(interactions)")]
    finally:
        conn.close()


def test_fresh_schema(store, path):
    names = set(store.db.table_names())
    assert {"meta", "interactions", "model_versions"} <= names
    assert store.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] \
        == str(SCHEMA_VERSION)
    assert "latency_total_ms" in columns(path)
    indexed = {tuple(i.columns) for i in store.db["interactions"].indexes}
    assert ("ts",) in indexed and ("label",) in indexed


def test_wal_and_synchronous_full(store):
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert store.db.execute("PRAGMA busy_timeout").fetchone()[0] == BUSY_TIMEOUT_MS


def test_migration_to_v3_keeps_versions_and_leaves_their_record_empty(tmp_path):
    from edge_plm.store import migrate

    path = tmp_path / "v2.db"
    with ReplayStore(path) as s:  # a v2 file with one version, as an older edge-plm left it
        s.db.execute("ALTER TABLE model_versions DROP COLUMN sha256")
        s.db.execute("ALTER TABLE model_versions DROP COLUMN config")
        s.db.execute("ALTER TABLE model_versions DROP COLUMN n_examples")
        s.db.execute("DROP TABLE relay_state")
        s.db.execute("DROP TABLE interaction_devices")
        s.db.execute("DROP TABLE forget_owed")
        s.db.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
        s.add_model_version("v0001", path="/x/v0001.npz", status="active", n_train=7)
        assert s.model_versions()[0].sha256 is None
    with ReplayStore(path) as s:
        assert s.stored_schema_version() == SCHEMA_VERSION
        v = s.active_model_version()
        assert (v.version, v.n_train, v.sha256, v.config, v.n_examples) == ("v0001", 7, None, None, None)
        s.set_checkpoint_record("v0001", "ab" * 32, "potato", 7)
        v = s.active_model_version()
        assert (v.sha256, v.config, v.n_examples) == ("ab" * 32, "potato", 7)
        assert migrate(s.db) == SCHEMA_VERSION  # idempotent


def test_migration_v1_to_v2_on_a_real_v1_file(tmp_path):
    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path)
    conn.executescript(V1_SQL)
    conn.close()
    assert "latency_total_ms" not in columns(path)
    with ReplayStore(path) as s:
        first, second = s.interactions(oldest_first=True)
        assert first.transcript == "lights on" and first.label == "ON"
        assert first.latency_total_ms == pytest.approx(216.0)  # backfilled from the parts
        assert second.latency_total_ms is None  # parts missing: unknown
        new_id = s.add_interaction(transcript="off please", latency_total_ms=99.5)
        assert s.get(new_id).latency_total_ms == 99.5
    fresh = tmp_path / "fresh.db"
    ReplayStore(fresh).close()
    assert columns(path) == columns(fresh)  # migrated file == freshly created file
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    conn.close()


def test_newer_schema_is_refused_and_file_untouched(tmp_path):
    path = tmp_path / "future.db"
    conn = sqlite3.connect(path)
    conn.executescript(V1_SQL.replace("('schema_version', '1')", "('schema_version', '99')"))
    conn.close()
    before = path.read_bytes()
    mode = stat.S_IMODE(path.stat().st_mode)
    with pytest.raises(SchemaError, match="v99 is newer.*not changed"):
        ReplayStore(path)
    assert path.read_bytes() == before
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert not os.path.exists(str(path) + "-wal")  # not switched to WAL


def test_foreign_database_is_refused(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE photos (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaError, match="not an edge-plm database"):
        ReplayStore(path)


def test_schema_version_decides_on_one_look_at_the_tables():
    """Another process may create the schema between two looks at the table list (a
    second look at it made a new file "not an edge-plm database"); one look decides."""
    db = sqlite_utils.Database(memory=True)
    looks = iter([[], ["meta", "interactions", "model_versions"]])
    db.table_names = lambda *a, **k: next(looks)  # type: ignore[method-assign]
    assert schema_version(db) == 0


def test_garbage_file_is_a_clear_error(tmp_path):
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="cannot open replay buffer"):
        ReplayStore(path)


def test_file_and_directory_permissions(store, path):
    store.add_interaction(transcript="x")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    wal = path.with_name(path.name + "-wal")
    assert wal.exists() and stat.S_IMODE(wal.stat().st_mode) == 0o600


def test_round_trip(store):
    i = store.add_interaction(
        ts=12.5, transcript="turn the lamp on", asr_backend="vosk", asr_confidence=0.93,
        audio_path=None, prediction=Action.ON, confidence=0.85,
        distribution={"ON": 0.85, "OFF": 0.05, "NOOP": 0.1}, decision="act", action="ON",
        model_version="v3", holdout=True, latency_audio_ms=30.0, latency_asr_ms=180.0,
        latency_model_ms=1.2, latency_actuator_ms=0.4, latency_total_ms=215.0)
    r = store.get(i)
    assert (r.id, r.ts, r.transcript, r.prediction, r.decision, r.action) == (
        i, 12.5, "turn the lamp on", "ON", "act", "ON")
    assert r.distribution == {"ON": 0.85, "OFF": 0.05, "NOOP": 0.1}
    assert r.holdout is True and r.label is None and r.error is None
    store.set_label(i, Action.ON, LabelSource.CONFIRMED, ts=20.0)
    r = store.get(i)
    assert (r.label, r.label_source, r.label_ts) == ("ON", "confirmed", 20.0)
    store.update_interaction(i, error="relay refused", action=None)
    assert store.get(i).error == "relay refused" and store.get(i).action is None


FULL_ROW = dict(
    ts=12.5, transcript="turn the lamp on", asr_backend="vosk", asr_confidence=0.93,
    audio_path="/a/1.wav", prediction="ON", confidence=0.85,
    distribution={"ON": 0.85, "OFF": 0.05, "NOOP": 0.1}, decision="act", action="ON",
    label="ON", label_source="confirmed", label_ts=20.0, model_version="v3", holdout=False,
    latency_audio_ms=30.0, latency_asr_ms=180.0, latency_model_ms=1.2, latency_actuator_ms=0.4,
    latency_total_ms=215.0, error="e")


@pytest.mark.parametrize("field,value", [
    ("holdout", True), ("error", None), ("latency_total_ms", 99.0), ("action", None),
    ("decision", "ask"), ("audio_path", "/b/2.wav"), ("model_version", "v4"),
    ("transcript", "lamp on please"), ("distribution", {"ON": 1.0}),
])
def test_update_changes_only_the_given_field(store, field, value):
    """Regression: update_interaction used to fill defaults for missing keys, so e.g.
    set_holdout reset the transcript to ''."""
    i = store.add_interaction(**FULL_ROW)
    before = store.get(i)
    store.update_interaction(i, **{field: value})
    after = store.get(i)
    for name in FULL_ROW:
        expected = value if name == field else getattr(before, name)
        assert getattr(after, name) == expected, name


def test_set_holdout_keeps_the_transcript(store):
    i = store.add_interaction(**FULL_ROW)
    store.set_holdout(i, True)
    assert store.get(i).holdout is True
    assert store.get(i).transcript == "turn the lamp on"
    assert store.labeled_examples(holdout=True) == [("turn the lamp on", "ON")]


def test_partial_update_rejects_half_a_label_and_a_null_transcript(store):
    i = store.add_interaction(**FULL_ROW)
    with pytest.raises(ValueError, match="together"):
        store.update_interaction(i, label_source=None)
    with pytest.raises(ValueError, match="together"):
        store.update_interaction(i, label="OFF")
    with pytest.raises(ValueError, match="transcript"):
        store.update_interaction(i, transcript=None)
    r = store.get(i)
    assert (r.label, r.label_source, r.transcript) == ("ON", "confirmed", "turn the lamp on")
    store.update_interaction(i, label=None, label_source=None)  # both: clears the label
    assert (store.get(i).label, store.get(i).label_source) == (None, None)
    with pytest.raises(NotFoundError):
        store.update_interaction(i + 100, error="x")


def test_validation_errors(store):
    with pytest.raises(ValueError, match="label must be one of ON, OFF, NOOP"):
        store.add_interaction(transcript="x", label="MAYBE", label_source="asked")
    with pytest.raises(ValueError, match="label_source"):
        store.add_interaction(transcript="x", label="ON", label_source="guessed")
    with pytest.raises(ValueError, match="together"):
        store.add_interaction(transcript="x", label="ON")
    with pytest.raises(ValueError, match="unknown interaction field.*colour"):
        store.add_interaction(transcript="x", colour="red")
    with pytest.raises(ValueError, match="confidence"):
        store.add_interaction(transcript="x", confidence=1.5)
    i = store.add_interaction(transcript="x")
    with pytest.raises(ValueError, match="label"):
        store.set_label(i, "on", "asked")
    with pytest.raises(ValueError, match="label_source"):
        store.set_label(i, "ON", "missed")
    with pytest.raises(NotFoundError, match="12345"):
        store.set_label(12345, "ON", "asked")
    with pytest.raises(NotFoundError):
        store.get(12345)
    assert store.count() == 1


def test_non_utf8_text_is_stored_with_replacement(store):
    i = store.add_interaction(transcript=b"lights \xff\xfe on", asr_backend=b"vo\xc3sk",
                              error="bad name \udcff")
    r = store.get(i)
    assert r.transcript == "lights \ufffd\ufffd on"
    assert r.asr_backend == "vo\ufffdsk"
    assert r.error == "bad name \ufffd"
    assert clean_text("\ud800x") == "\ufffd\ufffd\ufffdx"  # a lone surrogate, not from escape


def test_interactions_filters_and_order(store):
    ids = [store.add_interaction(ts=float(t), transcript=f"u{t}") for t in range(1, 6)]
    store.set_label(ids[1], "ON", "asked")
    store.set_label(ids[3], "NOOP", "confirmed")
    assert [r.ts for r in store.interactions()] == [5, 4, 3, 2, 1]
    assert [r.ts for r in store.interactions(oldest_first=True, limit=2)] == [1, 2]
    assert [r.id for r in store.interactions(labeled=True)] == [ids[3], ids[1]]
    assert [r.id for r in store.interactions(labeled=False)] == [ids[4], ids[2], ids[0]]
    assert [r.ts for r in store.interactions(since=3.0)] == [5, 4, 3]
    assert [r.id for r in store.interactions(label=Action.ON)] == [ids[1]]
    assert store.count(labeled=True) == 2 and store.count(labeled=False) == 3


def test_interactions_are_in_id_order_whatever_their_ts(store):
    # a clock set back (or a replay's simulated clock): the order is the order stored in
    ids = [store.add_interaction(ts=ts, transcript=f"u{ts}") for ts in (50.0, 10.0, 30.0)]
    assert [r.id for r in store.interactions(oldest_first=True)] == ids
    assert [r.id for r in store.interactions()] == ids[::-1]
    assert [r.id for r in store.interactions(limit=1)] == [ids[-1]]


def test_row_to_interaction_is_public(store):
    iid = store.add_interaction(transcript="x", distribution={"ON": 1.0}, holdout=1)
    raw = next(store.db.query("SELECT * FROM interactions WHERE id = ?", [iid]))
    r = row_to_interaction(raw)
    assert r == store.get(iid) and r.holdout is True and r.distribution == {"ON": 1.0}


@pytest.mark.parametrize("name", ["a?b", "a#b", "a%20b", "50%"])
def test_read_only_open_quotes_the_path(tmp_path, name):
    path = tmp_path / name / "edge-plm.db"
    with ReplayStore(path) as writer:
        iid = writer.add_interaction(transcript="hello")
    with ReplayStore(path, read_only=True) as reader:
        assert reader.get(iid).transcript == "hello"
        with pytest.raises(sqlite3.OperationalError):
            reader.db.execute("INSERT INTO meta VALUES ('x', 'y')")


def test_labeled_examples_time_order_and_holdout(store):
    # inserted out of time order on purpose
    store.add_interaction(ts=30.0, transcript="c", label="OFF", label_source="asked", holdout=True)
    store.add_interaction(ts=10.0, transcript="a", label="ON", label_source="manual")
    store.add_interaction(ts=20.0, transcript="b", label="NOOP", label_source="confirmed")
    store.add_interaction(ts=15.0, transcript="unlabeled")
    store.add_interaction(ts=5.0, transcript="h", label="ON", label_source="override",
                          holdout=True)
    assert store.labeled_examples() == [("h", "ON"), ("a", "ON"), ("b", "NOOP"), ("c", "OFF")]
    assert store.labeled_examples(holdout=True) == [("h", "ON"), ("c", "OFF")]
    assert store.labeled_examples(holdout=False) == [("a", "ON"), ("b", "NOOP")]


def test_delete_returns_and_removes_audio(store, tmp_path):
    wav = tmp_path / "a.wav"
    wav.write_bytes(b"RIFF")
    gone = tmp_path / "gone.wav"  # referenced, but already missing
    a = store.add_interaction(transcript="a", audio_path=str(wav))
    b = store.add_interaction(transcript="b", audio_path=str(gone))
    c = store.add_interaction(transcript="c")
    keep = store.add_interaction(transcript="keep")
    assert sorted(store.delete_interactions([a, b, c])) == sorted([str(wav), str(gone)])
    assert not wav.exists()
    assert [r.id for r in store.interactions()] == [keep]
    assert store.delete_interactions([]) == []
    new = store.add_interaction(transcript="new")
    assert new > c  # ids are never reused


def test_model_versions(store):
    assert store.active_model_version() is None
    store.add_model_version("v1", parent=None, path="/m/v1.npz", metrics={"bacc": 0.7},
                            n_train=10, status="active")
    store.add_model_version("v2", parent="v1", path="/m/v2.npz", metrics={"bacc": 0.6},
                            n_train=20)
    assert store.active_model_version().version == "v1"
    store.set_model_status("v2", "active")
    assert [(m.version, m.status) for m in store.model_versions()] == [
        ("v1", "retired"), ("v2", "active")]
    store.set_model_status("v2", "rolled_back")
    store.set_model_status("v1", "active")
    active = store.active_model_version()
    assert (active.version, active.parent, active.metrics, active.n_train) == (
        "v1", None, {"bacc": 0.7}, 10)
    with pytest.raises(ValueError, match="status"):
        store.set_model_status("v1", "deleted")
    with pytest.raises(NotFoundError):
        store.set_model_status("v9", "retired")
    with pytest.raises(ValueError, match="already exists"):
        store.add_model_version("v1")


def test_model_versions_in_the_order_they_were_made(store):
    # created_ts comes from the maker's clock (a replay's simulated time, a clock set back)
    for name, ts in (("v0001", 500.0), ("v0002", 900.0), ("v0003", 100.0)):
        store.add_model_version(name, created_ts=ts)
    assert [v.version for v in store.model_versions()] == ["v0001", "v0002", "v0003"]


def test_reader_in_another_connection_while_writer_writes(path):
    writer = ReplayStore(path)
    writer.add_interaction(transcript="first")
    reader = ReplayStore(path, read_only=True)
    # a write transaction is open and uncommitted: the reader still reads (WAL), unblocked
    writer.db.execute("BEGIN")
    writer.db.execute("INSERT INTO interactions (ts, transcript) VALUES (1, 'pending')")
    assert reader.count() == 1
    writer.db.execute("COMMIT")
    assert reader.count() == 2
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        reader.db.execute("DELETE FROM interactions")

    errors: list[BaseException] = []

    def write_many():
        try:
            for n in range(200):
                writer.add_interaction(transcript=f"t{n}")
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    thread = threading.Thread(target=write_many)
    thread.start()
    seen = []
    while thread.is_alive():
        seen.append(reader.count())
    thread.join()
    assert errors == []
    assert seen == sorted(seen)  # the reader only ever sees committed, growing snapshots
    assert reader.count() == 202
    reader.close()
    writer.close()


def test_second_writer_waits_for_busy_lock(path):
    a = ReplayStore(path)
    b = ReplayStore(path, busy_timeout_ms=100)
    a.db.execute("BEGIN IMMEDIATE")
    with pytest.raises(BusyError, match="locked"):
        b.add_interaction(transcript="blocked")
    a.db.execute("COMMIT")
    b.add_interaction(transcript="now fine")
    assert a.count() == 1
    a.close(), b.close()


def test_read_only_refuses_missing_or_old_file(tmp_path):
    with pytest.raises(StoreError, match="not found"):
        ReplayStore(tmp_path / "none.db", read_only=True)
    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path)
    conn.executescript(V1_SQL)
    conn.close()
    with pytest.raises(SchemaError, match="needs migrating"):
        ReplayStore(path, read_only=True)
