"""read_level: the level a transcript names for a dimmer (edge_plm/decide/level.py)."""

from __future__ import annotations

import pytest

from edge_plm.decide.level import MIN_LEVEL, read_level

LEVELS = [
    ("set the lamp to thirty percent", 0.30),
    ("set the lamp to 30%", 0.30),
    ("lights to fifty percent please", 0.50),
    ("set the brightness to seventy five percent", 0.75),
    ("twenty five percent brightness", 0.25),
    ("dim the lights to ten percent", 0.10),
    ("set the kitchen lights to eighty percent brightness", 0.80),
    ("one hundred percent", 1.0),
    ("lamp to 0 percent", 0.0),
    ("lamp at five per cent", 0.05),
    ("brightness to fifty", 0.50),
    ("set the brightness to forty", 0.40),
    ("dim the lights to ten", 0.10),
    ("set the level to sixty", 0.60),
    ("the office eighteen brightness", 0.18),
    ("half brightness", 0.5),
    ("put the lights at half", 0.5),
    ("set the desk lamp to half", 0.5),
    ("lamp on half please", 0.5),
    ("halfway", 0.5),
    ("turn it up half way", 0.5),
    ("full brightness please", 1.0),
    ("put the bedroom light on full brightness", 1.0),
    ("lights to full", 1.0),
    ("maximum brightness", 1.0),
    ("lights at maximum", 1.0),
    ("turn the lights all the way up", 1.0),
    ("brightest setting please", 1.0),
    ("lights to minimum", MIN_LEVEL),
    ("lowest brightness please", MIN_LEVEL),
    ("turn the lamp all the way down", MIN_LEVEL),
    ("set it to a quarter brightness", 0.25),
    ("a quarter", 0.25),
    ("lamp at a quarter", 0.25),
    ("three quarters brightness", 0.75),
    ("Set the lamp to Thirty Percent!", 0.30),
]

NOT_LEVELS = [
    "turn on the lamp",
    "turn off the lights",
    "in twenty minutes",
    "turn the lights off in twenty minutes",
    "set a timer for ten minutes",
    "turn on the lights at seven",
    "dim the lights at seven o'clock",
    "dim the lights in ten minutes",
    "turn the lamp off in half an hour",
    "wake me at a quarter past seven",
    "the kettle is full",
    "is the heater on",
    "what's on",
    "make it darker",
    "brighten the lamp",
    "two hundred percent sure",
    "set it to seventy five",
    "turn off half the lights in the house",
    "",
    "please",
]


@pytest.mark.parametrize("text, level", LEVELS)
def test_reads_the_level_the_words_name(text, level):
    assert read_level(text) == pytest.approx(level)


@pytest.mark.parametrize("text", NOT_LEVELS)
def test_no_level_when_the_words_name_none(text):
    assert read_level(text) is None


def test_minimum_is_a_low_level_not_off():
    assert 0 < MIN_LEVEL <= 0.05
