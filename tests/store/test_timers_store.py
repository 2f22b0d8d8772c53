"""The ``timers`` table and its queries (schema v10)."""

from __future__ import annotations

import pytest

from edge_plm.store import SCHEMA_VERSION, ReplayStore


def test_timers_pending_due_finish_cancel(tmp_path):
    with ReplayStore(tmp_path / "db") as s:
        assert s.stored_schema_version() == SCHEMA_VERSION >= 10
        iid = s.add_interaction(transcript="turn on the fan for an hour")
        a = s.add_timer("fan", "OFF", "for", 200.0, "turn on the fan for an hour", iid)
        b = s.add_timer("lamp", "ON", "at", 100.0, "turn on the lamp in a minute")
        assert [t.id for t in s.timers()] == [b, a]  # soonest first
        assert [t.id for t in s.due_timers(150.0)] == [b]
        assert s.finish_timer(b, "done", "ran") and not s.finish_timer(b, "dropped")
        assert s.cancel_timers(device="lamp") == [] and s.cancel_timers() == [a]
        assert s.timer(a).status == "cancelled" and s.timers() == []
        assert s.timers_of([iid])[iid][0].id == a
        with pytest.raises(ValueError):
            s.finish_timer(a, "pending")


def test_forget_deletes_the_timers_of_its_interactions(tmp_path):
    with ReplayStore(tmp_path / "db") as s:
        iid = s.add_interaction(transcript="turn off the lights in twenty minutes")
        s.add_timer("main", "OFF", "at", 10.0, "turn off the lights in twenty minutes", iid)
        s.delete_interactions([iid])
        assert s.timers(None) == []
