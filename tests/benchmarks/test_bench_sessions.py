"""The household session generator and the session benchmark's settings overrides."""
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_sessions  # noqa: E402
import household_sessions  # noqa: E402

TRAIN = ([{"text": f"turn on thing {i}", "label": "ON"} for i in range(5)]
         + [{"text": f"turn off thing {i}", "label": "OFF"} for i in range(5)]
         + [{"text": f"chatter {i}", "label": "NOOP"} for i in range(10)])


def test_household_script_is_seeded_and_commands_follow_the_light():
    a = household_sessions.household_script(TRAIN, seed=3, lines=80)
    assert a == household_sessions.household_script(TRAIN, seed=3, lines=80)
    assert a != household_sessions.household_script(TRAIN, seed=4, lines=80)
    assert len(a) == 80
    commands = [r["label"] for r in a if r["label"] != "NOOP"]
    assert commands[0] == "ON" and all(x != y for x, y in zip(commands, commands[1:]))
    for label, k in (("ON", 3), ("OFF", 3), ("NOOP", 6)):  # a household's own phrasings
        texts = {r["clean_text"] for r in a if r["label"] == label}
        assert 1 <= len(texts) <= k
        assert texts <= {r["text"] for r in TRAIN if r["label"] == label}
    assert len({r["voice"] for r in a}) <= 2


def test_committed_household_sessions_are_replayable_sessions():
    from edge_plm.loop.replay import read_session

    paths = sorted((REPO / "benchmarks" / "data" / "households").glob("household-*.jsonl"))
    assert len(paths) == 16
    for p in paths:
        lines = read_session(p)
        assert len(lines) == (200 if "text" in p.name else 60)
        assert {line.wish.value for line in lines} == {"ON", "OFF", "NOOP"}


def test_settings_overrides_are_typed_and_checked():
    s = bench_sessions.settings_with(["model.evidence_prior=0", "policy.act_threshold=0.9"])
    assert s.model.evidence_prior == 0.0 and s.policy.act_threshold == 0.9
    for bad in ("model.no_such_field=1", "nosection.x=1"):
        with pytest.raises(ValueError, match="no setting"):
            bench_sessions.settings_with([bad])


def test_switched_by_hand_counts_only_commands_that_would_change_the_relay():
    from types import SimpleNamespace

    from edge_plm.decide.policy import Action

    def line(wish, already=False, acted=False, wrong=False, asked=False):
        return SimpleNamespace(wish=None if wish is None else Action(wish), already_so=already, acted=acted,
                               acted_wrong=wrong, asked=asked)

    lines = [line("ON", acted=True), line("OFF", acted=True, wrong=True), line("ON", asked=True),
             line("OFF"), line("OFF", already=True), line("NOOP", asked=True), line(None)]
    assert bench_sessions.switched_by_hand(lines) == {"commands": 4, "acted_right": 1, "asked": 1, "neither": 1}
    assert bench_sessions.by_hand([{"commands": 4, "neither": 1}, {"commands": 2, "neither": 0}]) == "1/4 -> 0/2"
