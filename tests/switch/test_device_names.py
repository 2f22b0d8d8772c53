"""Several named devices, the model side: the name as the query (switch/naming.py), the names
a device's switch teaches (switch/device_evidence.py), and predict / learn / relabel / forget /
save per device on the shipped starting model (switch/model_devices.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edge_plm.switch.addressing import DeviceName
from edge_plm.switch.device_evidence import PRIOR, SPECIFICITY, DeviceEvidence
from edge_plm.switch.model import SwitchModel
from edge_plm.switch.naming import ADDRESS_FLOOR, GARBLE_SHARE, UNNAMED_PRIOR, UNNAMED_SHARE, default_share

SHIPPED = Path(__file__).resolve().parents[2] / "models" / "switch-en.npz"
LAMP, FAN, HEATER = DeviceName("lamp", ("light",)), DeviceName("fan"), DeviceName("heater")
HOME = [LAMP, FAN, HEATER]


@pytest.fixture(scope="module")
def shipped():
    return SwitchModel.load(SHIPPED)


@pytest.fixture()
def fresh():
    return SwitchModel.load(SHIPPED)


def actions(out: dict) -> dict[str, str]:
    return {n: p.action for n, p in out.items()}


def test_another_devices_name_switches_that_device(shipped):
    # the starting model alone calls "turn on the fan" a foreign device's command (NOOP)
    assert shipped.predict("turn on the fan").action == "NOOP"
    out = shipped.predict_devices("turn on the fan", HOME)
    assert actions(out) == {"lamp": "NOOP", "fan": "ON", "heater": "NOOP"}
    assert out["fan"].confidence >= 0.8
    assert actions(shipped.predict_devices("turn off the heater please", HOME))["heater"] == "OFF"
    assert actions(shipped.predict_devices("everything off", HOME)) == dict.fromkeys(("lamp", "fan", "heater"), "OFF")


def test_one_device_and_foreign_names_stay_noop(shipped):
    for text in ("open the garage door", "turn on the ceiling fan", "lock the front door"):
        one = shipped.predict_devices(text, [LAMP])
        assert one == {"lamp": shipped.predict(text)} and one["lamp"].action == "NOOP"
    # with several devices, a device word none of them is called stays nobody's command
    assert set(actions(shipped.predict_devices("open the garage door", HOME)).values()) == {"NOOP"}


def test_a_name_only_in_the_config_is_switched_on_first_hearing(shipped):
    devices = HOME + [DeviceName("aquarium")]
    out = shipped.predict_devices("turn on the aquarium", devices)
    assert actions(out) == {"lamp": "NOOP", "fan": "NOOP", "heater": "NOOP", "aquarium": "ON"}
    assert out["aquarium"].confidence >= 0.8


def test_the_decision_goes_through_the_name_codes_and_their_cache(fresh):
    devices = HOME + [DeviceName("aquarium")]
    a = fresh.name_query.address("turn on the aquarium".split(), devices)
    aid = fresh.words.index["aquarium"]  # the config's name got a code in the word vocabulary
    cache = fresh.name_query.cache
    assert aid in cache.columns and a.scores[3] == 1.0 and a.slots == (3,)
    cache.verify(fresh.words.E)  # the cached comparisons are E E^T
    cache.columns[aid] = np.zeros_like(cache.columns[aid])  # a stale column: no code identity
    cache._stacked = None
    b = fresh.name_query.address("turn on the aquarium".split(), devices)
    assert b.scores[3] == pytest.approx(GARBLE_SHARE)  # only the n-gram comparison is left
    with pytest.raises(ValueError, match="stale"):
        cache.verify(fresh.words.E)


def test_devices_registered_again_change_nothing_and_a_new_name_gets_its_code(fresh):
    q = fresh.name_query
    first = q.register(HOME)
    size = len(fresh.words)
    assert q.register(HOME) == first and len(fresh.words) == size
    assert "aquarium" not in fresh.words.index
    ids = q.register(HOME + [DeviceName("aquarium")])
    assert ids[:-1] == first and ids[-1] == fresh.words.index["aquarium"] == size
    assert ids[-1] in q.cache.columns
    assert q.address("turn on the aquarium".split(), HOME + [DeviceName("aquarium")]).scores[3] == 1.0


def test_plurals_and_garble_compare_by_their_ngrams(shipped):
    a = shipped.name_query.address("turn on the fans".split(), HOME)
    assert a.scores.tolist() == [0.0, GARBLE_SHARE, 0.0] and a.command == "turn on the"
    assert actions(shipped.predict_devices("turn off the heaters", HOME))["heater"] == "OFF"
    assert shipped.name_query.address("turn on the fun".split(), HOME).scores.tolist() == [0, 0, 0]


def test_a_name_the_starting_model_knows_keeps_its_words(shipped):
    light = [DeviceName("light", ("lights", "lamp")), DeviceName("plug", ("socket", "outlet"))]
    whole, bare = shipped.predict("make the lights off"), shipped.predict("make the off")
    assert whole.action == bare.action == "OFF" and whole.confidence > bare.confidence
    out = shipped.predict_devices("make the lights off", light)
    assert actions(out) == {"light": "OFF", "plug": "NOOP"}
    assert out["light"].confidence == pytest.approx(whole.confidence)
    # a name the starting model reads as something not switched is read without its words
    assert shipped.predict("turn on the fan").action == "NOOP"
    assert shipped.predict_devices("turn on the fan", HOME)["fan"].action == "ON"


UNNAMED = [("switch it off", "OFF"), ("turn it on", "ON"), ("off please", "OFF"), ("on now", "ON"),
           ("power it off", "OFF")]


def test_an_unnamed_command_is_asked_until_the_owner_shows_where_it_goes(fresh, tmp_path):
    ev = fresh.device_evidence
    out = fresh.predict_devices("switch it off", HOME)
    assert actions(out) == {"lamp": "OFF", "fan": "NOOP", "heater": "NOOP"}
    assert out["lamp"].confidence == pytest.approx(UNNAMED_SHARE * fresh.predict("switch it off").confidence)
    assert out["lamp"].confidence < 0.8  # asked about, not acted on
    keys = []
    for text, label in UNNAMED:  # the owner's lamp switch answers each unnamed command
        keys.append(len(fresh.examples))
        fresh.learn_devices(text, {"lamp": label}, HOME)
    assert ev.unnamed_commands("lamp") == (5, 5)
    share = (5 + UNNAMED_SHARE * UNNAMED_PRIOR) / (5 + UNNAMED_PRIOR)
    assert default_share("lamp", ev) == pytest.approx(share) and share > 0.8
    out = fresh.predict_devices("switch it off", HOME)
    assert out["lamp"].confidence == pytest.approx(share * fresh.predict("switch it off").confidence)
    # a named command does not count; an unnamed one the fan's switch answered pulls it back
    fresh.learn_devices("turn on the lamp", {"lamp": "ON"}, HOME)
    fresh.learn_devices("power on", {"fan": "ON"}, HOME)
    assert ev.unnamed_commands("lamp") == (5, 6) and ev.unnamed_commands("fan") == (1, 6)
    back = SwitchModel.load(fresh.save(tmp_path / "m.npz"))
    assert back.device_evidence.unnamed_keys == ev.unnamed_keys
    assert back.device_evidence.unnamed_commands("lamp") == (5, 6)
    fresh.forget_example(keys[0])
    assert ev.unnamed_commands("lamp") == (4, 5) and keys[0] not in ev.unnamed_keys
    fresh.relabel_devices(keys[1], {"heater": "ON"}, HOME)
    assert ev.unnamed_commands("lamp") == (3, 5) and ev.unnamed_commands("heater") == (1, 5)


def test_unnamed_commands_go_to_the_device_the_owner_answered_them_for(fresh):
    from edge_plm.switch.naming import unnamed_device
    assert unnamed_device(HOME, fresh.device_evidence) == (0, pytest.approx(UNNAMED_SHARE))
    for text, label in UNNAMED:  # the fan's switch answers every unnamed command
        fresh.learn_devices(text, {"fan": label}, HOME)
    rest = (1.0 - UNNAMED_SHARE) / 2
    share = (5 + rest * UNNAMED_PRIOR) / (5 + UNNAMED_PRIOR)
    assert unnamed_device(HOME, fresh.device_evidence) == (1, pytest.approx(share))
    out = fresh.predict_devices("switch it off", HOME)
    assert actions(out) == {"lamp": "NOOP", "fan": "OFF", "heater": "NOOP"}
    assert out["fan"].confidence == pytest.approx(share * fresh.predict("switch it off").confidence)
    fresh.learn_devices("turn it on", {"lamp": "ON"}, HOME)  # one for the lamp: the fan still leads
    assert unnamed_device(HOME, fresh.device_evidence)[0] == 1


def test_device_label_rows_of_an_older_checkpoint_load_as_named():
    ev = DeviceEvidence()
    ev.load_json([[3, ["turn", "it", "on"], {"lamp": "ON", "fan": "NOOP"}]])
    assert ev.unnamed_commands("lamp") == (0, 0) and 3 in ev.entries
    with pytest.raises(ValueError, match="unnamed flag"):
        DeviceEvidence().load_json([[3, ["on"], {"lamp": "ON"}, "yes"]])
    with pytest.raises(ValueError, match="explained devices"):
        DeviceEvidence().load_json([[3, ["on"], {"lamp": "ON"}, False, "lamp"]])
    with pytest.raises(ValueError, match="have no label"):
        DeviceEvidence().load_json([[3, ["on"], {"lamp": "ON"}, False, ["fan"]]])


def test_a_renamed_device_is_followed_after_a_correction(fresh):
    # the owner calls the fan "the breeze": first it goes to the default device (the lamp)
    assert actions(fresh.predict_devices("turn on the breeze", HOME))["lamp"] == "ON"
    corrections = 0
    for text, label in [("turn on the breeze", "ON"), ("turn the breeze off", "OFF"), ("breeze on please", "ON")]:
        if actions(fresh.predict_devices(text, HOME)) == {"lamp": "NOOP", "fan": label, "heater": "NOOP"}:
            continue
        fresh.learn_devices(text, {"fan": label, "lamp": "NOOP"}, HOME)
        corrections += 1
    assert corrections <= 3
    out = fresh.predict_devices("switch off the breeze", HOME)
    assert actions(out) == {"lamp": "NOOP", "fan": "OFF", "heater": "NOOP"}
    assert actions(fresh.predict_devices("turn on the lamp", HOME)) == {"lamp": "ON", "fan": "NOOP", "heater": "NOOP"}


def test_forgetting_a_naming_example_takes_its_evidence_out_exactly(fresh):
    ev = fresh.device_evidence
    before = (dict(ev.df), dict(ev._for), dict(ev._against))
    key = len(fresh.examples)
    fresh.learn_devices("turn on the big dresser", {"lamp": "ON"}, [FAN, LAMP, HEATER])
    assert ev.evidence("lamp", "dresser") > 0 > ev.evidence("fan", "dresser")
    fresh.forget_example(key)
    assert (dict(ev.df), dict(ev._for), dict(ev._against)) == before and key not in ev.entries


def test_relabel_devices_moves_the_evidence(fresh):
    key = len(fresh.examples)
    fresh.learn_devices("turn on the breeze", {"fan": "ON"}, HOME)
    assert fresh.name_query.address("turn on the breeze".split(), HOME, fresh.device_evidence).scores.argmax() == 1
    assert fresh.relabel_devices(key, {"heater": "ON"}, HOME)
    assert fresh.name_query.address("turn on the breeze".split(), HOME, fresh.device_evidence).scores.argmax() == 2
    assert not fresh.relabel_devices(key, {"heater": "ON"}, HOME)


def test_words_beside_a_heard_name_do_not_become_names(fresh, tmp_path):
    # "plug" names the plug: one label must not make "hello" and "want" its names too
    home = [DeviceName("light", ("lights", "lamp")), DeviceName("plug", ("socket", "outlet"))]
    ev = fresh.device_evidence
    key = len(fresh.examples)
    fresh.learn_devices("hello i want to turn off my wemo plug", {"plug": "OFF"}, home)
    assert ev.explained[key] == frozenset({"plug"})
    assert ev.evidence("plug", "hello") == 0.0 and ev.evidence("plug", "want") == 0.0
    assert ev.evidence("light", "hello") < 0  # still counts against the device labelled NOOP
    assert actions(fresh.predict_devices("hello turn on the lights", home)) == {"light": "ON", "plug": "NOOP"}
    out = fresh.predict_devices("hello switch it off", home)  # names no device: asked for the default
    assert out["plug"].action == "NOOP" and out["light"].action == "OFF" and out["light"].confidence < 0.8
    # an unnamed command still teaches its words: "wemo" names the plug after its switch said so
    fresh.learn_devices("turn wemo on", {"plug": "ON"}, home)
    assert ev.evidence("plug", "wemo") >= ADDRESS_FLOOR
    back = SwitchModel.load(fresh.save(tmp_path / "m.npz"))
    assert back.device_evidence.explained == ev.explained
    assert back.device_evidence.evidence("plug", "hello") == 0.0
    fresh.relabel_devices(key, {"light": "OFF"}, home)  # the light was meant: it was not explained
    assert ev.evidence("light", "hello") > 0 and ev.explained[key] == frozenset({"plug"})
    fresh.forget_example(key)
    assert key not in ev.explained and ev.evidence("light", "hello") == 0.0


def test_device_labels_survive_save_and_load(fresh, tmp_path):
    fresh.learn_devices("turn on the breeze", {"fan": "ON"}, HOME)
    fresh.learn_devices("radiator off", {"heater": "OFF", "fan": "NOOP"}, HOME)
    path = fresh.save(tmp_path / "m.npz")
    back = SwitchModel.load(path)
    assert back.device_evidence.entries == fresh.device_evidence.entries
    assert back.device_evidence.df == fresh.device_evidence.df
    for text in ("turn off the breeze", "radiator on", "turn on the lamp"):
        assert back.predict_devices(text, HOME) == fresh.predict_devices(text, HOME)


def test_evidence_is_the_documented_ratio():
    ev = DeviceEvidence()
    for words in (["turn", "on", "the", "breeze"], ["turn", "off", "the", "lamp"]):
        ev.add_text(words)
    ev.add(0, ["turn", "on", "the", "breeze"], {"fan": "ON", "lamp": "NOOP"})
    ev.add(1, ["turn", "off", "the", "lamp"], {"fan": "NOOP", "lamp": "OFF"})
    spec = SPECIFICITY / (SPECIFICITY + 1)
    assert ev.evidence("fan", "breeze") == pytest.approx(spec * 1 / (1 + PRIOR))
    assert ev.evidence("lamp", "breeze") == pytest.approx(-spec * 1 / (1 + PRIOR))
    assert ev.evidence("fan", "turn") == 0.0  # said to both devices: names neither
    ev.add(2, ["what", "a", "breeze"], {"fan": "NOOP", "lamp": "NOOP"})  # not a command: no evidence
    assert ev.evidence("fan", "breeze") == pytest.approx(spec * 1 / (1 + PRIOR))
    with pytest.raises(ValueError, match="already"):
        ev.add(0, [], {})


def test_several_named_devices_read_the_command_around_their_names():
    from edge_plm.switch.addressing import DeviceName
    from edge_plm.switch.model import SwitchModel
    m = SwitchModel.load(SHIPPED)
    devices = [DeviceName("lamp", ("light",)), DeviceName("fan"), DeviceName("heater")]
    a = m.address("turn on the lamp and the fan", devices)
    assert (a.between, a.around) == ("and the", "turn on the")
    assert m.command_of(a) == "turn on the"  # "and the" says nothing by itself
    both = m.predict_devices("turn on the lamp and the fan", devices)
    alone = m.predict("turn on the").distribution
    assert both["lamp"].distribution == both["fan"].distribution == pytest.approx(alone)
    # words between the names that say something keep the command as it was said
    mixed = m.address("turn on the lamp and turn off the fan", devices)
    assert m.command_of(mixed) == mixed.command == "turn on the and turn off the"
    one = m.address("turn on the fan", devices)
    assert one.between == one.around == "" and m.command_of(one) == "turn on the"


def test_a_slot_word_stands_for_the_name_in_the_command_read_and_learned():
    devices = [DeviceName("lamp", ("light",)), DeviceName("kettle")]
    plain = SwitchModel.empty("potato")
    slotted = SwitchModel.empty("potato", slot_word="xqz")
    for m in (plain, slotted):
        for text, label in [("turn on the xqz", "ON"), ("switch the xqz off", "OFF"), ("is the xqz on", "NOOP"),
                            ("what time is it", "NOOP"), ("turn on the", "ON"), ("switch the off", "OFF")]:
            m.learn(text, label)
    assert plain.address("turn on the kettle", devices).command == "turn on the"
    a = slotted.address("turn on the big light", devices + [DeviceName("big light")])
    assert a.command == "turn on the xqz"  # one slot word for a name of several words
    assert slotted.command_of(slotted.address("is the kettle on", devices)) == "is the xqz on"
    # the device reads "is the kettle on" as the slot-word question, not as "is the on"
    assert slotted.predict_devices("is the kettle on", devices)["kettle"].action == "NOOP"
    # learned the same way round: the owner's command is learned with the slot word
    slotted.learn_devices("boil the kettle", {"kettle": "ON"}, devices)
    assert slotted.text_of(len(slotted.examples) - 1) == "boil the xqz"
    # one device: the whole transcript, as always
    one = [DeviceName("lamp")]
    assert slotted.predict_devices("turn on the lamp", one) == {"lamp": slotted.predict("turn on the lamp")}


def test_a_slot_word_is_kept_by_save_and_load(tmp_path):
    m = SwitchModel.empty("potato", slot_word="xqz")
    m.learn("turn on the xqz", "ON")
    m.save(tmp_path / "m.npz")
    assert SwitchModel.load(tmp_path / "m.npz").config.slot_word == "xqz"
    assert SwitchModel.load(SHIPPED).config.slot_word == ""  # the shipped model leaves names out


def test_the_devices_not_given_an_unnamed_command_keep_their_share_of_it(shipped):
    # "switch it off" names no device: the lamp (the default) gets it; the fan and the heater
    # stay NOOP, but their distributions hold their own unnamed shares of the command's OFF,
    # and every device carries the command's own NOOP as "no command at all"
    from edge_plm.switch.naming import unnamed_shares
    shares = unnamed_shares(HOME, shipped.device_evidence)
    assert shares.sum() == pytest.approx(1.0) and shares[0] == pytest.approx(UNNAMED_SHARE)
    command = shipped.predict("switch it off")
    out = shipped.predict_devices("switch it off", HOME)
    assert actions(out) == {"lamp": "OFF", "fan": "NOOP", "heater": "NOOP"}
    for (name, p), q in zip(out.items(), shares):
        assert p.distribution["OFF"] == pytest.approx(q * command.distribution["OFF"])
        assert p.not_command == pytest.approx(command.distribution["NOOP"])
    # a command that names its device leaves the others nothing
    named = shipped.predict_devices("switch the fan off", HOME)
    assert named["lamp"].distribution["OFF"] == 0.0 and named["heater"].distribution["OFF"] == 0.0
