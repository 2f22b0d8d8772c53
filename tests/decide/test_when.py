"""The time slot of a spoken command (`edge_plm.decide.when`)."""

from __future__ import annotations

import datetime as dt

import pytest

from edge_plm.decide.when import TimeSlot, Unreadable, read_time

NOW = dt.datetime(2026, 3, 10, 14, 5).timestamp()  # a Tuesday, 14:05 local time


def at(hour: int, minute: int = 0, days: int = 0) -> float:
    return (dt.datetime(2026, 3, 10, hour, minute) + dt.timedelta(days=days)).timestamp()


@pytest.mark.parametrize(("text", "kind", "due", "command"), [
    ("turn off the lights in twenty minutes", "at", NOW + 1200, "turn off the lights"),
    ("in twenty minutes please turn off all the lights in the house", "at", NOW + 1200,
     "please turn off all the lights in the house"),
    ("turn off the plug in an hour and a half", "at", NOW + 5400, "turn off the plug"),
    ("turn off the lights in five", "at", NOW + 300, "turn off the lights"),
    ("turn on the lights at seven thirty", "at", at(19, 30), "turn on the lights"),
    ("turn off the fan at quarter past six", "at", at(18, 15), "turn off the fan"),
    ("turn on the porch light at quarter to nine", "at", at(20, 45), "turn on the porch light"),
    ("turn on the coffee machine at six am", "at", at(6, days=1), "turn on the coffee machine"),
    ("turn on the fan at two fifteen", "at", at(14, 15), "turn on the fan"),
    ("turn off the lamp at noon", "at", at(12, days=1), "turn off the lamp"),
    ("turn on the fan for an hour", "for", NOW + 3600, "turn on the fan"),
    ("run the fan for forty five minutes please", "for", NOW + 2700, "run the fan please"),
    ("turn on the fan until ten", "until", at(22), "turn on the fan"),
    ("keep the lights on until midnight", "until", at(0, days=1), "keep the lights on"),
])
def test_reads_spoken_times(text, kind, due, command):
    slot = read_time(text, NOW)
    assert isinstance(slot, TimeSlot)
    assert (slot.kind, slot.command) == (kind, command)
    assert slot.due == pytest.approx(due)
    assert slot.command + " " != text and slot.phrase in text


@pytest.mark.parametrize("text", [
    "turn on the light", "i'll be there in a minute", "turn on the fan in a minute",
    "switch on the fan at the front", "turn on the light in room five", "order a pizza for two",
    "turn on the second light", "wait for me", "turn the lights off for me",
])
def test_no_time_no_slot(text):
    assert read_time(text, NOW) is None


@pytest.mark.parametrize("text", [
    "turn off the lights in a bit", "turn on the fan later", "turn off the heater after dinner",
    "switch the lamp off in a while", "turn off the lights tonight", "turn the fan off in a few minutes",
])
def test_time_words_without_a_time_are_unreadable(text):
    assert isinstance(read_time(text, NOW), Unreadable)


def test_clock_before_now_is_the_next_one():
    morning = dt.datetime(2026, 3, 10, 6, 0).timestamp()
    assert read_time("turn on the lights at seven", morning).due == at(7)
    assert read_time("turn on the lights at seven", NOW).due == at(19)
