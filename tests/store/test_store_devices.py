"""Schema v5: each device's outcome of an utterance (``interaction_devices``), migrated from v4."""

from __future__ import annotations

import sqlite3

import pytest

from edge_plm.store import SCHEMA_VERSION, ReplayStore


def make_v4(path) -> None:
    """The file edge-plm wrote before several devices: schema 4, one labelled interaction."""
    with ReplayStore(path) as s:
        s.add_interaction(transcript="lamp on", prediction="ON", confidence=0.9, decision="act",
                          action="ON", label="ON", label_source="confirmed")
        s.set_relay_state("main", True)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DROP TABLE interaction_devices")
        conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    conn.close()


def tables(path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()


def test_a_v4_database_migrates_to_v5_and_keeps_its_rows(tmp_path):
    path = tmp_path / "v4.db"
    make_v4(path)
    assert "interaction_devices" not in tables(path)
    with ReplayStore(path) as s:
        assert s.stored_schema_version() == SCHEMA_VERSION
        (row,) = s.interactions()
        assert (row.transcript, row.label, row.label_source) == ("lamp on", "ON", "confirmed")
        assert s.relay_state("main") is True
        assert s.device_outcomes() == {}  # one device: no device rows
        iid = s.add_interaction(transcript="fan on", prediction="ON", confidence=0.7)
        s.add_device_outcomes(iid, {"lamp": {"prediction": "NOOP", "confidence": 0.9},
                                    "fan": {"prediction": "ON", "confidence": 0.7,
                                            "distribution": {"ON": 0.7, "OFF": 0.1, "NOOP": 0.2}}})
        assert s.device_outcomes([iid])[iid]["fan"].distribution == {"ON": 0.7, "OFF": 0.1, "NOOP": 0.2}
    fresh = tmp_path / "fresh.db"
    ReplayStore(fresh).close()
    assert tables(path) == tables(fresh)


def test_device_outcomes_labels_stats_and_delete(tmp_path):
    with ReplayStore(tmp_path / "d.db") as s:
        a = s.add_interaction(transcript="fan on")
        b = s.add_interaction(transcript="all off")
        s.add_device_outcomes(a, {"lamp": {"prediction": "NOOP"}, "fan": {"prediction": "ON"}})
        s.add_device_outcomes(b, {"lamp": {"prediction": "OFF"}, "fan": {"prediction": "OFF"}})
        s.update_device_outcomes(a, {"lamp": {"decision": "ignore"}, "fan": {"decision": "act", "action": "ON"}})
        s.update_device_outcomes(b, {"lamp": {"decision": "act", "action": "OFF"},
                                     "fan": {"decision": "ask"}})
        s.set_device_label(a, "fan", "ON", "confirmed", ts=5.0)
        s.set_device_label(a, "lamp", "NOOP", "confirmed")
        s.set_device_label(b, "fan", "OFF", "asked")
        assert s.device_labels([a, b]) == {a: {"lamp": "NOOP", "fan": "ON"}, b: {"fan": "OFF"}}
        o = s.device_outcomes([a])[a]
        assert list(o) == ["lamp", "fan"] and o["fan"].label_ts == 5.0 and o["fan"].action == "ON"
        stats = s.device_stats()
        assert list(stats) == ["lamp", "fan"]
        assert stats["fan"] == {"interactions": 2, "decision": {"act": 1, "ask": 1},
                                "action": {"ON": 1}, "label": {"ON": 1, "OFF": 1},
                                "wrong_actions": {"acted": 1, "acted_labelled": 1, "wrong": 0}}
        s.set_device_label(a, "fan", "NOOP", "override")  # the person reverted it
        assert s.device_stats()["fan"]["wrong_actions"]["wrong"] == 1
        with pytest.raises(ValueError, match="label must be one of"):
            s.set_device_label(a, "fan", "DIM", "asked")
        with pytest.raises(ValueError, match="no outcome for device 'heater'"):
            s.set_device_label(a, "heater", "ON", "asked")
        s.delete_interactions([a], remove_audio=False)
        assert list(s.device_outcomes()) == [b]
        assert s.db.execute("SELECT count(*) FROM interaction_devices WHERE interaction_id = ?",
                            [a]).fetchone()[0] == 0
