"""The ``kinds`` table and its queries (schema v11)."""

from __future__ import annotations

import sqlite3

import pytest

from edge_plm.store import SCHEMA_VERSION, ReplayStore
from edge_plm.store.schema import migrate


def test_record_label_and_relabel(tmp_path):
    with ReplayStore(tmp_path / "db") as s:
        assert s.stored_schema_version() == SCHEMA_VERSION >= 11 and s.has_kinds()
        a = s.add_interaction(transcript="dim the lamp")
        b = s.add_interaction(transcript="what a day")
        s.record_kind(a, "lamp", "DIM", 0.93, "dimmed", 1.0, 0.75)
        row = s.kind(a)
        assert (row.predicted, row.done, row.level_before, row.level_after, row.label) == \
            ("DIM", "dimmed", 1.0, 0.75, None)
        assert s.label_kind(a, "BRIGHTEN", "control", 5.0) is None  # the first label
        assert s.label_kind(a, "DIM", "remote", 6.0) == "BRIGHTEN"  # replaced
        assert s.kind(a).device == "lamp" and s.kind(a).label_source == "remote"
        s.label_kind(b, "PLAIN", "control", 7.0, device="lamp")  # no call before: a row is made
        assert s.kind_labels() == [(a, "dim the lamp", "DIM"), (b, "what a day", "PLAIN")]
        assert set(s.kinds_of([a, b, 99])) == {a, b}
        assert s.kind_tally("done") == {"dimmed": 1} and s.kind_tally("label") == {"DIM": 1, "PLAIN": 1}
        with pytest.raises(ValueError, match="label source"):
            s.label_kind(a, "DIM", "guess", 8.0)


def test_forget_deletes_the_kind_rows_of_its_interactions(tmp_path):
    with ReplayStore(tmp_path / "db") as s:
        iid = s.add_interaction(transcript="turn the lamp down")
        s.record_kind(iid, "lamp", "DIM", 0.9, "dimmed", 1.0, 0.75)
        s.label_kind(iid, "DIM", "control", 1.0)
        s.delete_interactions([iid])
        assert s.kind(iid) is None and s.kind_labels() == []
        rows = s.db.execute("SELECT COUNT(*) FROM kinds").fetchone()[0]
        assert rows == 0


def test_a_v10_database_gains_the_empty_kinds_table(tmp_path):
    import sqlite_utils

    path = tmp_path / "old.db"
    db = sqlite_utils.Database(sqlite3.connect(path))
    assert migrate(db, target=10) == 10
    db.execute("INSERT INTO interactions (ts, transcript) VALUES (1.0, 'lamp on')")
    db.conn.commit()
    db.conn.close()
    with ReplayStore(path) as s:
        assert s.stored_schema_version() == SCHEMA_VERSION and s.has_kinds()
        assert s.kind_labels() == [] and len(s.interactions()) == 1
