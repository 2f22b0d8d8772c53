"""The ``[timers]`` section (timed commands): defaults and validation."""

from __future__ import annotations

import pytest

from edge_plm.config.settings import ConfigError, parse


def test_defaults_and_values():
    s = parse("[timers]\ngrace_s = 60\n")
    assert s.timers.enabled and s.timers.grace_s == 60.0 and s.timers.max_delay_s == 86400.0


@pytest.mark.parametrize(("text", "message"), [
    ("grace_s = -1", "timers.grace_s must be in 0..86400"),
    ("max_delay_s = 10", "timers.max_delay_s must be in 60..604800"),
    ("enabled = 1", "expected bool"),
    ("soon = true", "unknown key 'soon'"),
])
def test_bad_values_are_refused(text, message):
    with pytest.raises(ConfigError, match=message):
        parse(f"[timers]\n{text}\n")
