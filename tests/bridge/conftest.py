"""The bridge tests' broker (Debian's mosquitto on a free localhost port) and the paho client
that plays Home Assistant against it (tests/_mqtt_util.py)."""

from __future__ import annotations

import pytest

from _mqtt_util import Broker, HomeAssistant


@pytest.fixture()
def broker(tmp_path):
    b = Broker(tmp_path / "broker").start()
    yield b
    b.stop()


@pytest.fixture()
def ha(broker):
    client = HomeAssistant(broker.port)
    yield client
    client.close()
