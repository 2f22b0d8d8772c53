"""LeftAlone: the relay states in which each wording was left alone, bounded."""

from __future__ import annotations

import pytest

from edge_plm.decide.left_alone import LeftAlone, wording


def test_wording_ignores_case_and_spaces():
    assert wording("  Turn  OFF the light ") == "turn off the light"
    assert wording("   ") is None and wording(None) is None


def test_the_other_state_only():
    left = LeftAlone()
    left.record("lights down", relay_on=True)
    assert not left.other_state_seen("lights down", relay_on=True)
    assert left.other_state_seen("Lights Down", relay_on=False)
    assert not left.other_state_seen("lights up", relay_on=False)
    left.drop("lights down")
    assert not left.other_state_seen("lights down", relay_on=False) and len(left) == 0
    left.record(None, relay_on=True)  # no transcript: nothing to remember
    assert len(left) == 0


def test_the_least_recently_left_alone_go_first():
    left = LeftAlone(capacity=2)
    left.record("a", True)
    left.record("b", True)
    left.record("a", True)  # "a" is the newest again
    left.record("c", True)
    assert left.other_state_seen("a", False) and left.other_state_seen("c", False)
    assert not left.other_state_seen("b", False) and len(left) == 2
    with pytest.raises(ValueError, match="capacity"):
        LeftAlone(capacity=0)
