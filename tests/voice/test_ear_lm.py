"""The ear's language model (edge_plm/voice/ear_lm.py, edge_plm/loop/household_ear.py): built
reproducibly by the build script, loaded by pocketsphinx, and learning the household's words."""

from __future__ import annotations

import gzip
import importlib.util
import json
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from edge_plm.config.settings import DeviceConfig, Settings
from edge_plm.loop.household_ear import (HouseholdEar, hand_over, keep_cepstral_mean, make_household_ear,
                                         restore_cepstral_mean)
from edge_plm.voice.asr import PocketSphinxASR, make_asr
from edge_plm.voice.ear_lm import (DIMMER_WEIGHT, EAR_LM, EAR_SENTENCES, HOUSEHOLD_WEIGHT, KIND_TEMPLATES, LEVEL_WORDS,
                                   MAX_REPEATS, TIMED_EVERY, build_arpa, cancel_sentences, dimmer_sentences,
                                   household_sentences, read_kind_templates, read_sentences, sentence, time_phrases,
                                   timed_sentences, unknown_words)

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "scripts"))


def _build_script():
    spec = importlib.util.spec_from_file_location("build_switch_en", REPO / "models" / "build_switch_en.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_shipped_ear_lm_is_what_the_build_script_makes_of_the_committed_data():
    build = _build_script()
    sentences = build.ear_sentences([REPO / "models/data/switch-en-train.jsonl", REPO / "models/data/switch-en-val.jsonl"])
    assert sentences == read_sentences()
    assert build_arpa(sentences).encode("utf-8") == EAR_LM.read_bytes()
    assert gzip.decompress(EAR_SENTENCES.read_bytes()).decode().count("\n") == len(sentences)


def test_the_ear_reads_no_asr_rendering_and_no_dev_test_line():
    build = _build_script()
    rows = [json.loads(line) for f in ("switch-en-train.jsonl", "switch-en-val.jsonl")
            for line in (REPO / "models/data" / f).read_text().splitlines()]
    asr_only = {sentence(r["text"]) for r in rows if r["source"].endswith(".asr")} - \
        {sentence(r["text"]) for r in rows if not r["source"].endswith(".asr")}
    asr_only.discard(None)
    shipped = set(read_sentences())
    assert asr_only and not (asr_only & shipped)  # mishearings never become the ear's text
    test_texts = {sentence(t) for t in build.test_texts()} - {None}
    assert not (test_texts & shipped)


def test_the_model_card_gives_the_ear_lms_size_and_hash():
    import hashlib

    card = (REPO / "models" / "README.md").read_text()
    assert f"<!-- ear-bytes -->{EAR_LM.stat().st_size:,}" in card
    assert hashlib.sha256(EAR_LM.read_bytes()).hexdigest() in card


def test_the_ears_time_phrases_are_read_by_read_time_and_ride_on_its_commands():
    from edge_plm.decide.when import TimeSlot, read_time
    from edge_plm.loop.timers import CANCEL

    now = 1_800_000_000.0
    for phrase in time_phrases():
        slot = read_time(f"turn off the lamp {phrase}", now)
        assert isinstance(slot, TimeSlot) and slot.phrase == phrase and sentence(phrase) == phrase
    assert all(CANCEL.match(c) and sentence(c) == c for c in cancel_sentences())
    commands = ["turn on the lamp", "x", "turn off the fan", "x", "lights on", "x", "lamp off", "x"]
    p = time_phrases()
    assert timed_sentences(commands, every=2) == [f"turn on the lamp {p[0]}", f"turn off the fan {p[1]}",
                                                  f"{p[2]} lights on", f"lamp off {p[3]}", *cancel_sentences()]
    shipped = read_sentences()
    assert any(s.endswith(" in twenty minutes") for s in shipped) and "cancel the timer" in shipped
    assert sum(1 for s in shipped if read_time(s, now) is not None) >= 300 and TIMED_EVERY >= 1


def test_a_spoken_timed_command_is_heard_with_its_time():
    """The ear's LM carries time phrases: flite's "turn off the lights in twenty minutes" is read
    as the written line is (with the starting model's LM alone: "turn all what and twenty minute and")."""
    from spoken_answers import speak

    from edge_plm.decide.when import TimeSlot, read_time

    now = 1_800_000_000.0
    heard = PocketSphinxASR(adapt_cmn=False, lm=EAR_LM).transcribe(
        speak("turn off the lights in twenty minutes", "flite:slt")).text
    slot = read_time(heard, now)
    assert isinstance(slot, TimeSlot) and (slot.kind, slot.due) == ("at", now + 1200), heard


def test_household_sentences_frame_names_cap_repeats_and_skip_unknown_words():
    out = household_sentences(["Fan", "desk lamp", "zqxjv lamp"], ["turn on the fan"] * 5 + ["lamp on!"])
    assert out.count("turn on the fan") == HOUSEHOLD_WEIGHT + MAX_REPEATS * HOUSEHOLD_WEIGHT
    assert out.count("desk lamp on") == HOUSEHOLD_WEIGHT and out.count("lamp on") == HOUSEHOLD_WEIGHT
    assert not any("zqxjv" in s for s in out)
    assert out == household_sentences(["desk lamp", "zqxjv lamp", "Fan"], ["turn on the fan"] * 5 + ["lamp on!"])
    assert unknown_words("Zqxjv lamp") == ["zqxjv"]


def test_a_dimmer_brings_its_phrasings_and_a_relay_household_is_as_before():
    names, heard = ["lamp", "light", "fan"], ["turn on the fan", "lamp on"]
    relays = household_sentences(names, heard)
    assert household_sentences(names, heard, []) == relays  # no dimmer: exactly as before
    assert relays == [s for n in ("fan", "lamp", "light") for f in ("turn on the {n}", "turn off the {n}",
                      "turn the {n} on", "turn the {n} off", "switch on the {n}", "switch off the {n}", "{n} on",
                      "{n} off") for s in [f.format(n=n)] * HOUSEHOLD_WEIGHT] + \
        ["turn on the fan"] * HOUSEHOLD_WEIGHT + ["lamp on"] * HOUSEHOLD_WEIGHT
    with_dimmer = household_sentences(names, heard, ["lamp", "light"])
    added = dimmer_sentences(["lamp", "light"])
    assert with_dimmer == relays[:24 * HOUSEHOLD_WEIGHT] + [s for s in added for _ in range(DIMMER_WEIGHT)] + \
        relays[24 * HOUSEHOLD_WEIGHT:]
    for s in ("dim the lamp", "brighten the light", "turn the lamp down", "make it darker", "dim it",
              "a little brighter", "dimmer", "set the lamp to ten percent", "lamp at half", "full brightness"):
        assert s in added, s
    assert all(any(f" {w} percent" in s for s in added) for w in LEVEL_WORDS)  # every level, in turn
    assert not any("fan" in s or "{" in s for s in added)  # the relay's name never; every slot filled
    assert len(added) == len(set(added)) and dimmer_sentences([]) == []
    assert dimmer_sentences(["light", "lamp"]) == added  # the order of the names does not matter


def test_the_shipped_kind_templates_are_what_the_kind_build_writes():
    spec = importlib.util.spec_from_file_location("build_kinds_en", REPO / "models" / "build_kinds_en.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    assert build.ear_bytes() == KIND_TEMPLATES.read_bytes()
    templates = read_kind_templates()
    assert {k for k, _ in templates} == {"DIM", "BRIGHTEN", "LEVEL"}
    assert not any("{area}" in t or "{dev}" in t for _, t in templates)
    assert [f"{k}\t{t}" for k, t in templates] == build.ear_templates()
    import hashlib

    card = (REPO / "models" / "README.md").read_text()
    assert f"<!-- kinds-ear-bytes -->{KIND_TEMPLATES.stat().st_size:,} bytes" in card
    assert hashlib.sha256(KIND_TEMPLATES.read_bytes()).hexdigest() in card


def test_kind_labelled_transcripts_join_the_household_ear(tmp_path):
    asr = PocketSphinxASR(adapt_cmn=False, lm=EAR_LM)
    ear = HouseholdEar(asr, [], synchronous=True, min_interval_s=30.0, private_dir=tmp_path, dimmers=["lamp"])
    ear.follow(0.0, lambda: [], _Model([]), lambda: [(1, "what a day", "PLAIN")])
    assert ear.builds == 1 and ear.built == tuple(dimmer_sentences(["lamp"]))
    ear.follow(31.0, lambda: [], _Model([]), lambda: [(1, "what a day", "PLAIN"), (2, "lamp a touch lower", "DIM")])
    assert ear.builds == 2 and ear.built[-HOUSEHOLD_WEIGHT:] == ("lamp a touch lower",) * HOUSEHOLD_WEIGHT
    assert "what a day" not in ear.built
    ear.follow(62.0, lambda: [], _Model([]), lambda: [])  # forgotten: it leaves
    assert ear.builds == 3 and "lamp a touch lower" not in ear.built


@pytest.fixture(scope="module")
def aquarium():
    """'turn on the aquarium' in two voices: a word the shipped ear LM does not hold."""
    from spoken_answers import speak

    return [speak("turn on the aquarium", v) for v in ("flite:slt", "flite:rms")]


def test_the_shipped_ear_decodes_a_command_the_general_lm_mishears():
    from spoken_answers import speak

    samples = speak("turn off the lights in the bedroom", "flite:slt")
    ear = PocketSphinxASR(adapt_cmn=False, lm=EAR_LM)
    assert ear.transcribe(samples).text == "turn off the lights in the bedroom"
    assert ear.lm_name == EAR_LM.name


def test_a_device_name_joins_the_ear(aquarium):
    asr = PocketSphinxASR(adapt_cmn=False, lm=EAR_LM)
    assert all("aquarium" not in asr.transcribe(s).text for s in aquarium)
    hand_over(build_arpa(read_sentences() + household_sentences(["aquarium"], [])),
              lambda path: asr.use_lm(path, "household"))
    assert [asr.transcribe(s).text for s in aquarium] == ["turn on the aquarium"] * 2
    assert asr.lm_name == "household"


def test_a_swap_asked_for_mid_utterance_is_refused_cleanly_and_works_after_it():
    """pocketsphinx cannot activate a search while an utterance is decoded (KeyError): the swap
    is an AsrError (the household ear logs it and tries again at its next look), never an
    uncaught error on the ear's thread; after the utterance it swaps."""
    import numpy as np

    from edge_plm.voice.asr_base import AsrError

    asr = PocketSphinxASR(adapt_cmn=False, lm=EAR_LM)
    asr.decoder.start_utt()
    asr.decoder.process_raw(np.zeros(8000, dtype=np.int16).tobytes(), False, False)
    with pytest.raises(AsrError, match="tried again"):
        asr.use_lm(EAR_LM, "household")
    asr.decoder.end_utt()
    asr.use_lm(EAR_LM, "household")
    assert asr.lm_name == "household"


class _Model:
    """The two things the household ear reads of a switch model: its live examples' texts."""

    def __init__(self, texts):
        self.texts = list(texts)

    def live_keys(self):
        return list(range(len(self.texts)))

    def text_of(self, key):
        return self.texts[key]


def test_the_household_ear_follows_the_published_model_and_leaves_no_file(tmp_path, aquarium):
    asr = PocketSphinxASR(adapt_cmn=False, lm=EAR_LM)
    ear = HouseholdEar(asr, [], synchronous=True, min_interval_s=30.0, private_dir=tmp_path)
    heard = ["turn on the aquarium"]
    ear.follow(0.0, lambda: heard, _Model([]))  # labelled, but not (or no longer) in the model
    assert ear.builds == 0 and asr.lm_name == EAR_LM.name
    ear.follow(10.0, lambda: heard, _Model(["turn on the aquarium"]))  # within 30 s: not looked at
    assert ear.builds == 0
    ear.follow(31.0, lambda: heard, _Model(["turn on the aquarium"]))
    assert ear.builds == 1 and asr.transcribe(aquarium[0]).text == "turn on the aquarium"
    ear.follow(70.0, lambda: heard, _Model(["turn on the aquarium", "what time is it"]))
    assert ear.builds == 1  # the same household sentences: nothing rebuilt
    ear.follow(110.0, lambda: [], _Model([]))  # forgotten (or rolled back): the shipped words only
    assert ear.builds == 2 and "aquarium" not in asr.transcribe(aquarium[0]).text
    assert list(tmp_path.iterdir()) == []


def test_the_household_ear_is_made_only_for_pocketsphinx_with_asr_lm_household():
    asr = PocketSphinxASR(adapt_cmn=False, lm=EAR_LM)
    s = Settings()
    s.devices = [DeviceConfig("fan", ["blower"], 17, True, "off", 27, "toggle", True, 50, -1)]
    ear = make_household_ear(s, asr, synchronous=True)
    assert ear is not None and ear.names == ["blower", "fan"] and ear.dimmers == []
    s.devices = [*s.devices, replace(s.devices[0], name="lamp", aliases=["light"], kind="dimmer", relay_pin=5,
                                     switch_pin=6)]
    assert make_household_ear(s, asr, synchronous=True).dimmers == ["lamp", "light"]
    s.devices = s.devices[:1]
    s.asr.lm = "shipped"
    assert make_household_ear(s, asr, synchronous=True) is None
    s.asr.lm = "household"
    assert make_household_ear(s, SimpleNamespace(), synchronous=True) is None


def test_fluency_scores_garble_below_a_command():
    from pocketsphinx import NGramModel

    from edge_plm.voice.ear_lm import fluency

    lm = NGramModel.readfile(str(EAR_LM))
    command = fluency(lm, "turn off the lights in the bedroom")
    garble = fluency(lm, "all on you light up dot our want cool")
    assert -4.5 < command < -1.0 and garble < -5.0 and fluency(lm, "") is None
    assert Settings().asr.min_fluency == -4.5  # between the two (docs/loop.md)


def test_transcripts_carry_the_ears_fluency_and_the_general_lm_none():
    from spoken_answers import speak

    samples = speak("turn off the lights in the bedroom", "flite:slt")
    heard = PocketSphinxASR(adapt_cmn=False, lm=EAR_LM).transcribe(samples)
    assert heard.fluency is not None and heard.fluency > -4.5
    assert PocketSphinxASR(adapt_cmn=False).transcribe(samples).fluency is None


def test_make_asr_loads_the_configured_ear_lm():
    s = Settings()
    s.asr.backend = "pocketsphinx"
    assert make_asr(s.asr).lm_name == EAR_LM.name
    s.asr.lm = "general"
    assert make_asr(s.asr).lm_name == "general"


def test_a_missing_ear_lm_is_a_one_line_asr_error(tmp_path):
    from edge_plm.voice.asr import AsrError

    with pytest.raises(AsrError, match="ear's language model .* is missing"):
        PocketSphinxASR(lm=tmp_path / "nope.arpa")


def test_the_cepstral_mean_is_kept_across_a_restart(tmp_path):
    from spoken_answers import speak

    path = tmp_path / "cmn.txt"
    first = PocketSphinxASR(adapt_cmn=True, lm=EAR_LM)
    first.transcribe(speak("turn on the light", "flite:rms"))
    keep_cepstral_mean(first, path)
    second = PocketSphinxASR(adapt_cmn=True, lm=EAR_LM)
    assert second.cepstral_mean() != first.cepstral_mean()
    restore_cepstral_mean(second, path)
    assert second.cepstral_mean() == first.cepstral_mean()
    path.write_text("not numbers\n")
    restore_cepstral_mean(second, path)  # logged and ignored, never a crash
    restore_cepstral_mean(second, tmp_path / "missing.txt")


@pytest.mark.parametrize("text, says", [('[asr]\nlm = "loud"\n', "asr.lm must be one of household, shipped, general"),
                                        ("[asr]\nmin_fluency = 1.0\n", "asr.min_fluency must be a number <= 0")])
def test_bad_ear_settings_are_refused(text, says):
    from edge_plm.config.settings import ConfigError, parse

    with pytest.raises(ConfigError) as exc:
        parse(text)
    assert any(says in p for p in exc.value.problems)
