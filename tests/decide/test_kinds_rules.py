"""The kind head's calls (`edge_plm.decide.kinds`): when a dimmer moves, is asked about, or a
question is answered; what a turn of the knob teaches; the spoken answer."""

from __future__ import annotations

from edge_plm.decide.kinds import ACT, ASK, HOLD, KindRules, about_devices, answer_text, call_for, label_for

RULES = KindRules(act_threshold=0.8, ask_threshold=0.5, dimmers=True, questions=True)


def test_a_sure_dim_moves_the_addressed_dimmer_only():
    c = call_for("DIM", 0.9, RULES, ("lamp", "fan"), ("lamp",), None)
    assert (c.what, c.devices) == (ACT, ("lamp",)) and c.reason == "a dim command"


def test_a_dim_of_a_relay_does_nothing_but_holds_the_switch_model():
    c = call_for("BRIGHTEN", 0.95, RULES, ("fan",), ("lamp",), None)
    assert (c.what, c.devices) == (HOLD, ())


def test_unsure_asks_and_below_the_ask_threshold_the_switch_model_decides():
    assert call_for("DIM", 0.6, RULES, ("lamp",), ("lamp",), None).what == ASK
    assert call_for("DIM", 0.4, RULES, ("lamp",), ("lamp",), None) is None


def test_a_level_the_words_do_not_name_is_asked_about():
    assert call_for("LEVEL", 0.95, RULES, ("lamp",), ("lamp",), None).what == ASK
    c = call_for("LEVEL", 0.95, RULES, ("lamp",), ("lamp",), 0.3)
    assert (c.what, c.level) == (ACT, 0.3)


def test_without_a_dimmer_level_kinds_are_never_read():
    assert call_for("DIM", 0.99, RULES, ("fan",), (), None) is None
    off = KindRules(0.8, 0.5, dimmers=False, questions=True)
    assert call_for("DIM", 0.99, off, ("lamp",), ("lamp",), None) is None


def test_questions_need_the_act_threshold_and_the_switch():
    assert call_for("QUERY", 0.9, RULES, ("fan",), (), None).what == ACT
    assert call_for("QUERY", 0.7, RULES, ("fan",), (), None) is None
    off = KindRules(0.8, 0.5, dimmers=True, questions=False)
    assert call_for("QUERY", 0.99, off, ("fan",), (), None) is None
    assert call_for("PLAIN", 0.99, RULES, ("fan",), (), None) is None


def test_what_a_turn_teaches():
    assert label_for(1.0, 0.75, False) == "DIM"
    assert label_for(0.5, 0.75, False) == "BRIGHTEN"
    assert label_for(0.5, 0.5, False) == "PLAIN"  # put back where it was: not a dim command
    assert label_for(0.5, 0.3, True) == "LEVEL"


def test_spoken_answers():
    states = {"lamp": 0.3, "fan": True, "heater": False}
    assert answer_text(states, ("heater",), True) == "The heater is off."
    assert answer_text(states, ("lamp",), True) == "The lamp is at 30 percent."
    assert answer_text(states, ("lamp", "fan", "heater"), True) == \
        "The lamp is at 30 percent and the fan is on."
    assert answer_text({"lamp": 0.0, "fan": False}, ("lamp", "fan"), True) == "Everything is off."
    assert answer_text({"main": True}, ("main",), False) == "It is on."
    assert answer_text(states, ("garage",), True) == "I don't know that device."


def test_a_question_must_be_about_the_devices():
    names = {"fan", "lamp", "big", "light"}
    assert about_devices("is the fan still going".split(), names)
    assert about_devices("whats on".split(), names)
    assert not about_devices("how far is the airport".split(), names)
    assert not about_devices("how are you doing".split(), names)
    assert about_devices("whats on right now".split(), names)
    assert not about_devices("what are the headlines on cnn".split(), names)
    assert call_for("QUERY", 0.99, RULES, ("fan",), (), None, about=False) is None


def test_words_the_switch_model_would_act_on_are_a_command_not_a_question():
    assert call_for("QUERY", 0.99, RULES, ("fan",), (), None, commanded=True) is None
    assert call_for("DIM", 0.99, RULES, ("lamp",), ("lamp",), None, commanded=True).what == ACT


def test_a_level_command_about_another_thing_is_left_to_the_switch_model():
    assert call_for("BRIGHTEN", 0.97, RULES, ("lamp",), ("lamp",), None, other_thing=True) is None
    assert call_for("DIM", 0.97, RULES, ("lamp",), ("lamp",), None, other_thing=False).what == ACT
