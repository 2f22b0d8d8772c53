"""The replay buffer's named queries (what inspection, the learner and the CLI ask the store)
and its whole-file operations, on real SQLite files."""

from __future__ import annotations

import sqlite3

import pytest

from edge_plm.store import (SCHEMA_VERSION, NotFoundError, ReplayStore, SchemaError,
                            StorageError, StoreError, copy_database, file_schema_version,
                            passes_quick_check)


@pytest.fixture
def store(tmp_path):
    s = ReplayStore(tmp_path / "state" / "edge-plm.db")
    yield s
    s.close()


def _add(store: ReplayStore, ts: float, **fields) -> int:
    return store.add_interaction(ts=ts, **{"transcript": f"row at {ts}", **fields})


@pytest.fixture
def rows(store):
    """Ids of a small history: labels from several sources, a holdout row, an error, audio,
    two model versions, and timestamps that step back (a clock set back)."""
    ids = {
        "on": _add(store, 10.0, label="ON", label_source="asked", prediction="ON",
                   model_version="v1", asr_backend="vosk", audio_path="/a/1.wav"),
        "off_manual": _add(store, 20.0, label="OFF", label_source="manual", prediction="ON",
                           model_version="v1", asr_backend="pocketsphinx"),
        "held": _add(store, 5.0, label="NOOP", label_source="asked", holdout=True,
                     prediction="NOOP", model_version="v2", audio_path="/a/3.wav"),
        "error": _add(store, 30.0, error="asr failed", model_version="v2"),
        "blank": _add(store, 40.0, transcript="  ", label="NOOP", label_source="override"),
        "open": _add(store, 50.0, prediction="OFF", audio_path="/a/6.wav"),
    }
    return ids


def test_count_filters(store, rows):
    assert store.count() == 6
    assert store.count(labeled=True) == 4
    assert store.count(labeled=False) == 2
    assert store.count(labeled=True, holdout=True) == 1
    assert store.count(holdout=False) == 5
    assert store.count(error=True) == 1
    assert store.count(error=False, labeled=True) == 4


def test_counts_by_keeps_nulls_and_refuses_other_columns(store, rows):
    assert store.counts_by("label") == {"ON": 1, "OFF": 1, "NOOP": 2, None: 2}
    assert store.counts_by("prediction") == {"ON": 2, "NOOP": 1, "OFF": 1, None: 2}
    with pytest.raises(ValueError, match="cannot count by"):
        store.counts_by("transcript; DROP TABLE interactions")


def test_last_id_and_backend(store):
    assert store.last_interaction_id() == 0 and store.last_asr_backend() is None
    first = _add(store, 100.0, asr_backend="vosk")
    second = _add(store, 1.0, asr_backend="pocketsphinx")  # newest by id, not by ts
    _add(store, 200.0)  # no backend: not "the last used"
    assert store.last_asr_backend() == "pocketsphinx"
    assert store.last_interaction_id() == second + 1 > first


def test_ids_in_order_before_a_time(store, rows):
    assert store.ids_in_order() == sorted(rows.values())
    assert store.ids_in_order(before=20.0) == [rows["on"], rows["held"]]
    assert store.ids_in_order(before=0.0) == []


def test_interaction_ids_among(store, rows):
    assert store.interaction_ids() == set(rows.values())
    assert store.interaction_ids(among=[rows["on"], 999, rows["open"]]) == {rows["on"],
                                                                             rows["open"]}
    assert store.interaction_ids(among=[]) == set()


def test_interactions_after_an_id_with_a_label_filter(store, rows):
    after = store.interactions(after_id=rows["on"], oldest_first=True)
    assert [r.id for r in after] == sorted(rows.values())[1:]
    unlabelled = store.interactions(after_id=rows["on"], labeled=False, oldest_first=True)
    assert [r.id for r in unlabelled] == [rows["error"], rows["open"]]
    assert [r.id for r in store.interactions(after_id=rows["on"], label="NOOP")] == [
        rows["blank"], rows["held"]]


def test_labels_audio_and_label_counts_of_some_rows(store, rows):
    some = [rows["on"], rows["held"], rows["open"], 999]
    assert store.labels_of(some) == {rows["on"]: ("ON", "asked"),
                                     rows["held"]: ("NOOP", "asked")}
    assert store.audio_paths(some) == ["/a/1.wav", "/a/3.wav", "/a/6.wav"]
    assert store.audio_paths([rows["off_manual"]]) == []
    assert store.label_counts(some) == (2, 1)  # the holdout row is labelled, not learnable
    assert store.label_counts([]) == (0, 0) and store.labels_of([]) == {}


def test_count_label_sources(store, rows):
    everything = list(rows.values())
    assert store.count_label_sources(everything, ("override", "manual")) == 2
    assert store.count_label_sources([rows["on"]], ("override", "manual")) == 0
    assert store.count_label_sources(everything, ()) == 0


def test_holdout_rows_and_labelled_transcripts(store, rows):
    assert store.holdout_rows() == [(rows["held"], "row at 5.0", "NOOP")]
    # labelled, with a transcript and no error, in id order
    assert store.labelled_transcripts() == [
        (rows["on"], "row at 10.0", "ON", "asked", False),
        (rows["off_manual"], "row at 20.0", "OFF", "manual", False),
        (rows["held"], "row at 5.0", "NOOP", "asked", True)]


def test_prediction_summary(store, rows):
    assert store.prediction_summary("v1") == {"interactions": 2, "labelled": 2, "correct": 1,
                                              "first_ts": 10.0, "last_ts": 20.0}
    assert store.prediction_summary("v2") == {"interactions": 2, "labelled": 1, "correct": 1,
                                              "first_ts": 5.0, "last_ts": 30.0}
    assert store.prediction_summary("nope") == {"interactions": 0, "labelled": 0,
                                                "correct": 0, "first_ts": None,
                                                "last_ts": None}


def test_schema_version_of_the_open_store(store):
    assert store.stored_schema_version() == SCHEMA_VERSION


def test_model_metrics_and_debris_rows(store):
    store.add_model_version("v0001", status="active", metrics={"a": 1})
    store.add_model_version("v0002", status="candidate")
    store.set_model_metrics("v0001", {"a": 1, "pruned": True})
    assert store.active_model_version().metrics == {"a": 1, "pruned": True}
    with pytest.raises(NotFoundError):
        store.set_model_metrics("v0009", {})
    store.delete_model_version("v0001")  # not a candidate: kept
    store.delete_model_version("v0002")
    assert [v.version for v in store.model_versions()] == ["v0001"]


def _full_disk_on(store: ReplayStore, table: str) -> None:
    """SQLite answers 'disk is full' to every UPDATE/DELETE of `table` (a full SD card)."""
    real = store.db.execute

    def execute(sql, *args, **kw):
        words = "".join(c for c in sql if c not in '[]"').split()
        if words[0].upper() in ("UPDATE", "DELETE") and table in words[1:4]:
            raise sqlite3.OperationalError("database or disk is full")
        return real(sql, *args, **kw)

    store.db.execute = execute  # type: ignore[method-assign]


def test_model_row_writes_on_a_full_disk_are_storage_errors(store):
    store.add_model_version("v0001", status="active", metrics={"a": 1})
    store.add_model_version("v0002", status="candidate")
    _full_disk_on(store, "model_versions")
    with pytest.raises(StorageError, match="disk is full"):
        store.set_model_metrics("v0001", {"pruned": True})
    with pytest.raises(StorageError, match="disk is full"):
        store.delete_model_version("v0002")
    with pytest.raises(StorageError, match="disk is full"):
        store.set_model_status("v0002", "retired")
    assert not store.db.conn.in_transaction
    assert [(v.version, v.status, v.metrics) for v in store.model_versions()] == [
        ("v0001", "active", {"a": 1}), ("v0002", "candidate", None)]


def test_label_on_a_full_disk_is_a_storage_error_and_not_stored(store):
    iid = _add(store, 1.0)
    _full_disk_on(store, "interactions")
    with pytest.raises(StorageError, match="disk is full"):
        store.set_label(iid, "ON", "asked")
    with pytest.raises(StorageError, match="disk is full"):
        store.delete_interactions([iid])
    assert store.get(iid).label is None and store.count() == 1


# --- whole files ----------------------------------------------------------------------------
def test_copy_database_is_a_checked_snapshot(store, rows, tmp_path):
    store.add_model_version("v0001", status="active")
    copy = tmp_path / "copy.db"
    found = copy_database(store.path, copy)
    assert found == {"integrity_check": "ok", "schema_version": SCHEMA_VERSION,
                     "interactions": 6, "model_versions": 1}
    assert file_schema_version(copy) == SCHEMA_VERSION and passes_quick_check(copy)
    with ReplayStore(copy, read_only=True) as again:
        assert [r.transcript for r in again.interactions(oldest_first=True)] == [
            r.transcript for r in store.interactions(oldest_first=True)]
    conn = sqlite3.connect(copy)
    try:  # self-contained: no -wal needed next to it
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    finally:
        conn.close()


def _sqlite_file(path, *statements: str):
    """A plain SQLite file (not opened by the store) made by `statements`."""
    conn = sqlite3.connect(path)
    try:
        for sql in statements:
            conn.execute(sql)
        conn.commit()
    finally:
        conn.close()
    return path


def test_copy_of_a_foreign_database_is_a_schema_error(tmp_path):
    foreign = _sqlite_file(tmp_path / "recipes.db", "CREATE TABLE recipes (name TEXT)")
    with pytest.raises(SchemaError, match="not an edge-plm database"):
        copy_database(foreign, tmp_path / "copy.db")
    with pytest.raises(SchemaError, match="not an edge-plm database"):
        file_schema_version(foreign)


def test_file_schema_version_of_garbage_and_of_an_old_file(tmp_path):
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all" * 100)
    with pytest.raises(sqlite3.DatabaseError):
        file_schema_version(garbage)
    old = _sqlite_file(tmp_path / "old.db", "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)",
                       "INSERT INTO meta VALUES ('schema_version', '1')")
    before = old.read_bytes()
    assert file_schema_version(old) == 1
    assert old.read_bytes() == before  # read only: not migrated, not switched to WAL
    assert not (tmp_path / "old.db-wal").exists()


def _break_an_index(path) -> None:
    """Point an index of ``interactions`` at the (empty) pages of one of ``model_versions``:
    the file still opens and copies, but ``PRAGMA integrity_check`` fails (a damaged SD
    card's kind of file)."""
    conn = sqlite3.connect(path)
    try:
        root = conn.execute("SELECT rootpage FROM sqlite_master "
                            "WHERE name = 'idx_one_active_model'").fetchone()[0]
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute("UPDATE sqlite_master SET rootpage = ? WHERE name = 'idx_interactions_ts'",
                     [root])
        conn.commit()
    finally:
        conn.close()


def test_a_copy_that_fails_integrity_check_is_refused_and_not_left_behind(store, rows,
                                                                          tmp_path):
    from edge_plm.commands.backup import backup

    store.close()
    _break_an_index(store.path)
    with pytest.raises(StoreError, match="integrity_check of the copy failed"):
        copy_database(store.path, tmp_path / "copy.db")
    out = tmp_path / "backups"
    out.mkdir()
    with pytest.raises(StoreError, match="integrity_check of the copy failed"):
        backup(store.path, out / "b.db")
    assert list(out.iterdir()) == []  # neither the backup nor its temporary file
