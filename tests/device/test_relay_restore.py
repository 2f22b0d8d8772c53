"""`gpio.relay_restore`: the relay state is recorded in the replay buffer with each change and
restored after the safe state on start (real SQLite, gpiozero's MockFactory, real kill -9)."""

from __future__ import annotations

import logging
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from gpiozero.pins.mock import MockFactory

from edge_plm.device import MAIN_RELAY, Devices, RelayConfig
from edge_plm.device.restore import restored_state
from edge_plm.config.settings import GpioConfig, Settings, problems
from edge_plm.store import SCHEMA_VERSION, ReplayStore

ROOT = Path(__file__).resolve().parents[2]


def start(db: Path, restore: str = "last", **gpio) -> tuple[Devices, ReplayStore]:
    """One start of the device layer on a fresh MockFactory (a new process's pins)."""
    store = ReplayStore(db)
    cfg = GpioConfig(pin_factory="mock", relay_restore=restore, min_toggle_interval_ms=0, **gpio)
    return Devices.from_config(cfg, factory=MockFactory(), install_exit_handlers=False,
                               state_store=store), store


def stop(devices: Devices, store: ReplayStore) -> None:
    devices.close()
    store.close()


def test_restored_state_by_policy():
    assert restored_state("last", None, False) is False  # nothing recorded: the safe state
    assert restored_state("last", None, True) is True
    assert restored_state("last", True, False) is True
    assert restored_state("last", False, True) is False
    assert restored_state("off", True, True) is False
    assert restored_state("on", False, False) is True
    with pytest.raises(ValueError, match="relay_restore"):
        restored_state("sometimes", None, False)


def test_on_then_stop_then_start_is_on_again(tmp_path):
    db = tmp_path / "edge-plm.db"
    devices, store = start(db)
    assert devices.relays[MAIN_RELAY].is_on is False and store.relay_state(MAIN_RELAY) is False
    assert devices.drive("ON", MAIN_RELAY)
    assert store.relay_state(MAIN_RELAY) is True  # recorded with the change
    stop(devices, store)
    assert devices.factory.pin(17).state is False  # the stop put it in its safe state ...
    devices, store = start(db)
    assert devices.relays[MAIN_RELAY].is_on is True  # ... and the start restored it
    assert [s.state for s in devices.factory.pin(17).states] == [False, True]
    assert devices.drive("OFF", MAIN_RELAY) and store.relay_state(MAIN_RELAY) is False
    stop(devices, store)
    devices, store = start(db)
    assert devices.relays[MAIN_RELAY].is_on is False
    stop(devices, store)


def test_off_and_on_ignore_the_record_and_update_it(tmp_path):
    db = tmp_path / "edge-plm.db"
    devices, store = start(db)
    devices.drive("ON", MAIN_RELAY)
    stop(devices, store)
    devices, store = start(db, "off")
    assert devices.relays[MAIN_RELAY].is_on is False
    assert store.relay_state(MAIN_RELAY) is False  # the record follows what the start did
    stop(devices, store)
    devices, store = start(db, "last")
    assert devices.relays[MAIN_RELAY].is_on is False
    stop(devices, store)
    devices, store = start(db, "on")
    assert devices.relays[MAIN_RELAY].is_on is True and store.relay_state(MAIN_RELAY) is True
    stop(devices, store)


def test_safe_state_comes_first_then_the_restored_one(tmp_path):
    """safe_state ON and relay_restore off: the pin goes ON (safe) before it goes OFF."""
    devices, store = start(tmp_path / "edge-plm.db", "off", relay_safe_state=True)
    assert [s.state for s in devices.factory.pin(17).states] == [False, True, False]
    stop(devices, store)
    assert devices.factory.pin(17).state is True  # and the stop returns to the safe state


def test_restore_keys_by_relay_name(tmp_path):
    db = tmp_path / "edge-plm.db"
    fan = {"fan": RelayConfig(pin=23, min_toggle_interval_ms=0)}
    store = ReplayStore(db)
    cfg = GpioConfig(pin_factory="mock", min_toggle_interval_ms=0)
    devices = Devices.from_config(cfg, factory=MockFactory(), install_exit_handlers=False,
                                  state_store=store, extra_relays=fan)
    devices.drive("ON", relay="fan")
    stop(devices, store)
    store = ReplayStore(db)
    devices = Devices.from_config(cfg, factory=MockFactory(), install_exit_handlers=False,
                                  state_store=store, extra_relays=fan)
    assert (devices.relays[MAIN_RELAY].is_on, devices.relays["fan"].is_on) == (False, True)
    assert (store.relay_state(MAIN_RELAY), store.relay_state("fan")) == (False, True)
    stop(devices, store)


def test_a_failed_record_is_logged_and_the_relay_still_switches(tmp_path, caplog):
    devices, store = start(tmp_path / "edge-plm.db")
    store.close()  # every write now fails
    with caplog.at_level(logging.ERROR, logger="edge_plm.device.relay"):
        assert devices.drive("ON", MAIN_RELAY)
    assert devices.relays[MAIN_RELAY].is_on is True and devices.relays[MAIN_RELAY].record_failures == 1
    assert "could not be recorded" in caplog.text
    devices.close()


def test_without_a_store_nothing_is_restored_or_recorded(tmp_path):
    devices = Devices.from_config(GpioConfig(pin_factory="mock", relay_restore="on"),
                                  factory=MockFactory(), install_exit_handlers=False)
    assert devices.relays[MAIN_RELAY].is_on is False and devices.relays[MAIN_RELAY].on_change is None  # replays
    devices.close()


def test_config_rejects_an_unknown_policy():
    s = Settings()
    s.gpio.relay_restore = "sometimes"
    assert any("gpio.relay_restore must be one of last, off, on" in p for p in problems(s))


def test_a_v3_database_migrates_to_the_relay_state_table(tmp_path):
    db = tmp_path / "edge-plm.db"
    ReplayStore(db).close()
    with sqlite3.connect(db) as conn:  # make it the file an older edge-plm left
        conn.execute("DROP TABLE relay_state")
        conn.execute("DROP TABLE interaction_devices")
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    conn.close()
    with ReplayStore(db) as store:
        assert store.stored_schema_version() == SCHEMA_VERSION
        assert store.relay_state(MAIN_RELAY) is None
        store.set_relay_state(MAIN_RELAY, True)
        assert store.relay_state(MAIN_RELAY) is True


# --- kill -9 between the pin write and its record ------------------------------------------
CHILD = r"""
import os, signal, sys
from gpiozero.pins.mock import MockFactory
from edge_plm.device import MAIN_RELAY, Devices
from edge_plm.config.settings import GpioConfig
from edge_plm.store import ReplayStore

db, point = sys.argv[1], sys.argv[2]
store = ReplayStore(db)
devices = Devices.from_config(GpioConfig(pin_factory="mock", min_toggle_interval_ms=0),
                              factory=MockFactory(), install_exit_handlers=False,
                              state_store=store)

def die():
    print("pin", "ON" if devices.relays[MAIN_RELAY].is_on else "OFF", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

def trace(sql):
    if point == "before-insert" and sql.startswith("INSERT INTO relay_state"):
        die()  # the pin is written, the record's statement has not run
    if point == "before-commit" and sql == "COMMIT":
        die()  # the record's row is written inside its transaction, not committed

store.db.conn.set_trace_callback(trace)
devices.drive("ON", MAIN_RELAY)
die()  # after-commit: the record is committed
"""


@pytest.mark.parametrize("point, last", [("before-insert", False), ("before-commit", False),
                                         ("after-commit", True)])
def test_kill_9_between_the_pin_write_and_its_record(tmp_path, point, last):
    """The child process drives the relay OFF -> ON and is killed with SIGKILL at `point`.
    Every later start restores a state its policy allows: "off" -> OFF, "on" -> ON, "last" ->
    the state recorded before the kill (the relay's previous state until the record commits)."""
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(crashed / "edge-plm.db"), point],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == -9, proc.stderr
    assert proc.stdout.strip() == "pin ON"  # the pin had been written when it died
    for policy, want in (("last", last), ("off", False), ("on", True)):
        copy = tmp_path / policy
        shutil.copytree(crashed, copy)  # the database and its -wal, as the crash left them
        devices, store = start(copy / "edge-plm.db", policy)
        assert devices.relays[MAIN_RELAY].is_on is want, policy
        assert store.relay_state(MAIN_RELAY) is want
        stop(devices, store)


# --- through the service ----------------------------------------------------------------------
def run_service(config: Path, stdin: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edge_plm.cli", "run", "--config", str(config)],
                          input=stdin, capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_edge_plm_run_restores_the_relay_after_a_restart(tmp_path):
    state = tmp_path / "state"
    config = tmp_path / "config.toml"
    base = f'[paths]\nstate_dir = "{state}"\n[audio]\nsource = "text"\n[gpio]\npin_factory = "mock"\n'
    config.write_text(base)
    first = run_service(config, "turn on the light\n")
    assert first.returncode == 0, first.stderr
    assert "relay -> ON" in first.stdout and "relay closed in safe state OFF" in first.stdout
    with ReplayStore(state / "edge-plm.db") as store:
        assert store.relay_state(MAIN_RELAY) is True
    again = run_service(config, "")  # a restart (stdin ends at once: a stop)
    assert again.returncode == 0, again.stderr
    assert "relay 'main': safe state OFF, then ON (relay_restore = last, recorded ON)" in again.stdout
    config.write_text(base + 'relay_restore = "off"\n')
    off = run_service(config, "")
    assert off.returncode == 0, off.stderr
    assert "relay 'main': safe state OFF, then OFF (relay_restore = off)" in off.stdout
    with ReplayStore(state / "edge-plm.db") as store:
        assert store.relay_state(MAIN_RELAY) is False


def test_a_start_whose_record_fails_still_restores(tmp_path, caplog):
    """The database can be read but not written (e.g. a full disk): the start restores from
    the record, logs that the new state is not recorded, and the relay works."""
    db = tmp_path / "edge-plm.db"
    devices, store = start(db)
    devices.drive("ON", MAIN_RELAY)
    stop(devices, store)
    store = ReplayStore(db)

    def refuse(name, is_on):
        raise OSError("disk full")

    store.set_relay_state = refuse
    cfg = GpioConfig(pin_factory="mock", relay_restore="off", min_toggle_interval_ms=0)
    with caplog.at_level(logging.ERROR, logger="edge_plm.device.relay"):
        devices = Devices.from_config(cfg, factory=MockFactory(), install_exit_handlers=False,
                                      state_store=store)
    assert devices.relays[MAIN_RELAY].is_on is False and devices.relays[MAIN_RELAY].record_failures == 1  # OFF, unrecorded
    assert "is OFF, but that state could not be recorded" in caplog.text
    assert devices.drive("ON", MAIN_RELAY) and devices.relays[MAIN_RELAY].record_failures == 2
    stop(devices, store)
