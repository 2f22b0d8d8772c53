"""Which device an utterance addresses (switch/addressing.py) and the per-device predictions."""

import numpy as np
import pytest

from edge_plm.switch.addressing import DeviceName, addressed, command_label, device_distribution, named
from edge_plm.switch.model import SwitchModel
from edge_plm.switch.naming import UNNAMED_SHARE

DEVICES = [DeviceName("lamp", ("light", "big light")), DeviceName("fan"), DeviceName("heater")]


def test_a_named_device_is_addressed_and_the_others_are_not():
    assert addressed("turn on the fan please", DEVICES).tolist() == [0, 1, 0]
    assert addressed("switch the big lights off", DEVICES).tolist() == [1, 0, 0]
    assert named("the lamps and the heater", DEVICES) == [True, False, True]


def test_all_addresses_every_device_and_an_unnamed_command_the_first_unsurely():
    assert addressed("everything off", DEVICES).tolist() == [1, 1, 1]
    assert addressed("turn it on", DEVICES).tolist() == [UNNAMED_SHARE, 0, 0]
    assert UNNAMED_SHARE < 0.8  # below the policy's act threshold: asked about, never acted on
    assert addressed("turn it on", DEVICES[:1]).tolist() == [1]  # one device: all of it
    assert addressed("turn off the fan and everything", DEVICES).tolist() == [0, 1, 0]


def test_device_distribution_moves_the_unaddressed_share_to_noop():
    y = np.array([0.7, 0.2, 0.1])  # ON, OFF, NOOP
    assert np.allclose(device_distribution(y, 1.0), y)
    assert np.allclose(device_distribution(y, 0.0), [0, 0, 1])
    assert np.allclose(device_distribution(y, 0.5), [0.35, 0.1, 0.55])
    with pytest.raises(ValueError):
        device_distribution(y, 1.5)


def test_a_device_needs_a_name():
    with pytest.raises(ValueError, match="device name"):
        DeviceName("  ")


def test_one_device_predicts_exactly_as_the_model():
    m = SwitchModel.empty("potato")
    for text, label in [("turn on the lamp", "ON"), ("lamp off", "OFF"), ("nice weather", "NOOP")] * 2:
        m.learn(text, label)
    one = m.predict_devices("turn the lamp on", DEVICES[:1])
    assert one == {"lamp": m.predict("turn the lamp on")}
    several = m.predict_devices("turn the lamp on", DEVICES)  # the command around the name: "turn the on"
    assert several["lamp"].distribution == pytest.approx(m.predict("turn the on").distribution)
    assert several["fan"].action == "NOOP" and several["heater"].distribution["NOOP"] == 1.0


def test_the_command_label_is_what_the_flipped_devices_agree_on():
    assert command_label({"fan": "ON"}, DEVICES) == "ON"
    assert command_label({"lamp": "NOOP", "fan": "NOOP"}, DEVICES) == "NOOP"
    assert command_label({"lamp": "OFF", "fan": "ON", "heater": "ON"}, DEVICES) == "ON"
    assert command_label({"lamp": "OFF", "fan": "ON"}, DEVICES) == "OFF"
    with pytest.raises(ValueError, match="unknown devices"):
        command_label({"kettle": "ON"}, DEVICES)
