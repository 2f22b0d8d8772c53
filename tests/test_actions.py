"""The action registry (`edge_plm.actions`) is the one list every layer reads."""

from __future__ import annotations

import sqlite3

import pytest

from edge_plm import actions, jsonl, store
from edge_plm.research.charnet import network as charnet
from edge_plm.switch import unitnet
from edge_plm.switch.model import SwitchModel
from edge_plm.switch.tokenizer import ACTION_IDS, RESERVED, CharTokenizer
from edge_plm.decide.policy import Action


def test_registry_is_the_current_three_actions():
    # the order is the class index and fixes the reserved token ids of existing checkpoints
    assert actions.ACTIONS == ("ON", "OFF", "NOOP")
    assert actions.RELAY_STATE == {"ON": True, "OFF": False, "NOOP": None}
    assert actions.DRIVING == ("ON", "OFF")
    assert actions.for_state(True) == "ON" and actions.for_state(False) == "OFF"
    assert actions.INDEX == {"ON": 0, "OFF": 1, "NOOP": 2}


def test_every_layer_reads_the_registry():
    assert charnet.N_ACTIONS == unitnet.N_ACTIONS == actions.N_ACTIONS
    assert tuple(RESERVED[i] for i in ACTION_IDS) == actions.TOKENS
    assert CharTokenizer().tokens[len(RESERVED) - actions.N_ACTIONS:] == list(actions.TOKENS)
    assert jsonl.LABELS == store.LABELS == actions.ACTIONS
    assert store.ACTIONS == actions.DRIVING
    assert [a.value for a in Action] == list(actions.ACTIONS)
    assert {a.value: a.state for a in Action} == actions.RELAY_STATE
    assert Action.from_state(True) is Action.ON and Action.from_state(False) is Action.OFF
    dist = SwitchModel.empty().predict("turn on the light").distribution
    assert list(dist) == list(actions.ACTIONS)


def test_sql_in_refuses_names_it_cannot_spell():
    assert actions.sql_in(("ON", "OFF")) == "'ON', 'OFF'"
    with pytest.raises(ValueError, match="alphanumeric"):
        actions.sql_in(("O'N",))


def test_store_schema_spells_the_registry_as_existing_databases_have_it(tmp_path):
    """The CHECK constraints come from the registry; for the current actions the text is the
    one every existing database holds (no migration needed)."""
    path = tmp_path / "x.db"
    store.ReplayStore(path).close()
    con = sqlite3.connect(path)
    (sql,) = con.execute("SELECT sql FROM sqlite_master WHERE name = 'interactions'").fetchone()
    assert "prediction TEXT CHECK (prediction IN ('ON', 'OFF', 'NOOP'))," in sql
    assert "action TEXT CHECK (action IN ('ON', 'OFF'))," in sql
    assert "label TEXT CHECK (label IN ('ON', 'OFF', 'NOOP'))," in sql
    con.execute("INSERT INTO interactions (ts, label) VALUES (1, 'NOOP')")
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        con.execute("INSERT INTO interactions (ts, label) VALUES (1, 'MAYBE')")
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        con.execute("INSERT INTO interactions (ts, action) VALUES (1, 'NOOP')")
    con.close()


def test_jsonl_label_outside_the_registry_is_refused(tmp_path):
    with pytest.raises(jsonl.JsonlError, match='"label" must be one of ON, OFF, NOOP'):
        jsonl.label_of(tmp_path / "f.jsonl", 3, {"text": "x", "label": "MAYBE"})


def test_jsonl_labels_are_taken_in_any_case_as_on_the_command_line(tmp_path):
    row = {"text": "x", "label": "noop"}
    assert jsonl.label_of(tmp_path / "f.jsonl", 1, row) == "NOOP" and row["label"] == "NOOP"
    for bad in (None, 3, "", "maybe"):
        with pytest.raises(jsonl.JsonlError, match=r"f\.jsonl:2: \"label\" must be one of"):
            jsonl.label_of(tmp_path / "f.jsonl", 2, {"text": "x", "label": bad})


def test_session_lines_may_leave_the_label_out(tmp_path):
    """No "label" is the same as "label": null: the simulated person does nothing."""
    from edge_plm.loop.replay import SessionError, read_session

    path = tmp_path / "s.jsonl"
    path.write_text('{"text": "lights on", "label": "on"}\n{"text": "hello"}\n'
                    '{"text": "hi", "label": null}\n{"text": "off", "label": "Off"}\n')
    assert [line.wish and line.wish.value for line in read_session(path)] == ["ON", None, None, "OFF"]
    path.write_text('{"text": "lights on", "label": "MAYBE"}\n')
    with pytest.raises(SessionError, match=r"s\.jsonl:1: \"label\" must be one of"):
        read_session(path)


def test_kind_registry_sits_beside_the_actions():
    # the kind head's classes (edge_plm/switch/kinds.py); the switch model's three are untouched
    assert actions.KINDS == ("PLAIN", "DIM", "BRIGHTEN", "LEVEL", "QUERY")
    assert actions.PLAIN == "PLAIN" and actions.LEVEL_KINDS == ("DIM", "BRIGHTEN", "LEVEL")
    assert [(k.name, k.step) for k in actions.KIND_REGISTRY] == [("DIM", -1), ("BRIGHTEN", 1), ("LEVEL", 0),
                                                                  ("QUERY", None)]
    assert actions.KIND_INDEX == {k: i for i, k in enumerate(actions.KINDS)}
    assert actions.ACTIONS == ("ON", "OFF", "NOOP") and actions.N_ACTIONS == 3
