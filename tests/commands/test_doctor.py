"""`edge-plm doctor` and the generated config file: every check with fakes, no hardware."""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import types
from collections import namedtuple
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edge_plm.commands import doctor

from edge_plm.config import settings
from edge_plm.cli import app
from edge_plm.config.file import default_config_toml
from edge_plm.device.pins import PinFactoryError

Usage = namedtuple("Usage", "total used free")
KERNELS = ["saffu_loss_grad", "softmax_xent_inplace", "unit_loss_grad"]  # edge_plm.switch.jit_kernels


class FakeSoundDevice:
    def __init__(self, devices):
        self.devices = devices

    def query_devices(self):
        return self.devices


class FakeFactory:
    closed = False

    def close(self):
        self.closed = True


def real_gpio(name):
    return FakeFactory(), "lgpio (real GPIO, auto-detected)"


def mock_gpio(name):
    return FakeFactory(), "mock (no GPIO hardware found; tried lgpio, rpigpio, pigpio, native)"


def importer_with_vosk(name):
    if name == "vosk":
        return types.ModuleType("vosk")
    import importlib

    return importlib.import_module(name)


def big_disk(path):
    return Usage(64e9, 1e9, 10e9)


MIC = FakeSoundDevice([{"name": "HDMI", "max_input_channels": 0},
                       {"name": "USB PnP Sound Device", "max_input_channels": 1}])


def make_vosk_model(models_dir: Path, name: str = "vosk-model-small-en-us-0.15") -> Path:
    m = models_dir / name
    (m / "am").mkdir(parents=True)
    (m / "am" / "final.mdl").write_bytes(b"x")
    (m / "conf").mkdir()
    (m / "conf" / "model.conf").write_text("--sample-frequency=16000\n")
    return m


def write_config(tmp_path: Path, extra: str = "") -> Path:
    state = tmp_path / "state"
    state.mkdir(mode=0o700, exist_ok=True)
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[paths]\nstate_dir = "{state}"\n{extra}', encoding="utf-8")
    return cfg


def warm_cache_dir(tmp_path: Path) -> Path:
    cache = tmp_path / "numba-cache" / "plm_0123"
    cache.mkdir(parents=True)
    for k in KERNELS:
        (cache / f"jit_kernels.{k}-20.py311.nbi").write_bytes(b"")
    return cache.parent


@pytest.fixture
def healthy(tmp_path):
    cfg = write_config(tmp_path)
    make_vosk_model(tmp_path / "state" / "models")
    env = {"NUMBA_CACHE_DIR": str(warm_cache_dir(tmp_path))}
    return dict(config=cfg, sounddevice=MIC, importer=importer_with_vosk, pin_factory=real_gpio,
                env=env, disk_usage=big_disk)


def statuses(report):
    return {c.name: c.status for c in report.checks}


# --- the whole report --------------------------------------------------------------------------
def test_healthy_setup_is_all_ok(healthy):
    report = doctor.run_checks(**healthy)
    assert statuses(report) == {n: "ok" for n in
                                ("config", "platform", "microphone", "asr", "kinds", "gpio", "database",
                                 "numba_cache", "disk")}
    assert report.ok
    d = report.to_dict()
    assert d["ok"] is True and [set(c) for c in d["checks"]] == [{"name", "status", "detail", "remedy"}] * 9
    assert "vosk-model-small-en-us-0.15" in report.by_name()["asr"].detail
    assert "USB PnP Sound Device" in report.by_name()["microphone"].detail


def test_missing_vosk_model_dir_fails_with_install_remedy(healthy, tmp_path):
    cfg = write_config(tmp_path, '[asr]\nbackend = "vosk"\nvosk_model = "/nonexistent/vosk-model"\n')
    report = doctor.run_checks(**{**healthy, "config": cfg})
    asr = report.by_name()["asr"]
    assert asr.status == "fail" and "/nonexistent/vosk-model" in asr.detail
    assert "asr install" in asr.remedy and "--sha256" in asr.remedy
    assert not report.ok
    assert statuses(report)["config"] == "ok"


def test_auto_backend_with_broken_configured_model_warns_pocketsphinx_fallback(healthy, tmp_path):
    cfg = write_config(tmp_path, '[asr]\nvosk_model = "/nonexistent/vosk-model"\n')
    asr = doctor.run_checks(**{**healthy, "config": cfg}).by_name()["asr"]
    assert asr.status == "warn" and "pocketsphinx" in asr.detail


def test_invalid_vosk_model_directory_fails(healthy, tmp_path):
    bad = tmp_path / "state" / "models" / "vosk-model-broken"
    bad.mkdir(parents=True)
    cfg = write_config(tmp_path, f'[asr]\nbackend = "vosk"\nvosk_model = "{bad}"\n')
    asr = doctor.run_checks(**{**healthy, "config": cfg}).by_name()["asr"]
    assert asr.status == "fail" and "not a valid Vosk model" in asr.detail and "--force" in asr.remedy


def test_unwritable_database_dir_fails(healthy, tmp_path, monkeypatch):
    state = tmp_path / "state"
    state.chmod(0o500)
    if os.geteuid() == 0:  # root writes anyway: emulate what the service user would see
        monkeypatch.setattr(doctor, "_probe_writable", lambda d: "Permission denied")
    try:
        report = doctor.run_checks(**healthy)
    finally:
        state.chmod(0o700)
    db = report.by_name()["database"]
    assert db.status == "fail" and "not writable" in db.detail
    assert "chown" in db.remedy and "sudo -u edge-plm" in db.remedy
    assert not report.ok


def test_database_newer_schema_fails_and_is_not_touched(healthy, tmp_path):
    path = tmp_path / "state" / "edge-plm.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '99')")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    db = doctor.run_checks(**healthy).by_name()["database"]
    assert db.status == "fail" and "newer" in db.detail and "upgrade" in db.remedy
    assert path.read_bytes() == before


def test_database_existing_store_is_ok(healthy, tmp_path):
    from edge_plm.store import ReplayStore

    with ReplayStore(tmp_path / "state" / "edge-plm.db") as store:
        store.add_interaction(ts=1.0, transcript="lights on")
    db = doctor.run_checks(**healthy).by_name()["database"]
    assert db.status == "ok" and "1 interaction" in db.detail


def test_database_not_sqlite_fails(healthy, tmp_path):
    (tmp_path / "state" / "edge-plm.db").write_bytes(b"this is not a database" * 100)
    db = doctor.run_checks(**healthy).by_name()["database"]
    assert db.status == "fail"


def test_bad_config_fails_and_other_checks_still_run(healthy, tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[gpio]\nrelay_pn = 17\n", encoding="utf-8")
    report = doctor.run_checks(**{**healthy, "config": cfg})
    c = report.by_name()["config"]
    assert c.status == "fail" and "relay_pn" in c.detail and "config defaults" in c.remedy
    assert len(report.checks) == 9 and not report.ok


def test_missing_config_file_fails(healthy, tmp_path):
    c = doctor.run_checks(**{**healthy, "config": tmp_path / "nope.toml"}).by_name()["config"]
    assert c.status == "fail" and "not found" in c.detail


# --- single checks -----------------------------------------------------------------------------
def test_microphone_no_input_device():
    c = doctor.check_microphone(settings.Settings(), sounddevice=FakeSoundDevice(
        [{"name": "HDMI", "max_input_channels": 0}]))
    assert c.status == "fail" and "arecord -l" in c.remedy and "audio group" in c.remedy


def test_microphone_portaudio_missing():
    def importer(name):
        raise OSError("PortAudio library not found")

    c = doctor.check_microphone(settings.Settings(), importer=importer)
    assert c.status == "fail" and "libportaudio2" in c.remedy


def test_microphone_configured_device_must_exist():
    s = settings.Settings()
    s.audio.device = "ReSpeaker"
    c = doctor.check_microphone(s, sounddevice=MIC)
    assert c.status == "fail" and "USB PnP Sound Device" in c.detail
    s.audio.device = "usb pnp"
    assert doctor.check_microphone(s, sounddevice=MIC).status == "ok"
    s.audio.device = "1"
    assert doctor.check_microphone(s, sounddevice=MIC).status == "ok"


def test_microphone_not_needed_for_text_source():
    s = settings.Settings()
    s.audio.source = "text"
    assert doctor.check_microphone(s, sounddevice=FakeSoundDevice([])).status == "ok"


def test_gpio_mock_only_is_a_warning():
    c = doctor.check_gpio(settings.Settings(), pin_factory=mock_gpio)
    assert c.status == "warn" and c.detail.startswith("mock only") and "gpio group" in c.remedy


def test_gpio_real_factory_is_ok_and_closed():
    made = []

    def factory(name):
        made.append(FakeFactory())
        return made[-1], "lgpio (real GPIO, auto-detected)"

    assert doctor.check_gpio(settings.Settings(), pin_factory=factory).status == "ok"
    assert made[0].closed


def test_gpio_shows_what_the_relay_does_on_start():
    s = settings.Settings()
    c = doctor.check_gpio(s, pin_factory=real_gpio)
    assert c.detail.endswith("on start: safe state OFF, then the state recorded before the restart "
                             "(relay_restore = last)")
    s.gpio.relay_restore, s.gpio.relay_safe_state = "off", True
    c = doctor.check_gpio(s, pin_factory=mock_gpio)
    assert c.detail.endswith("on start: safe state ON, then OFF (relay_restore = off)")


def test_gpio_with_several_devices_shows_each_devices_pins_and_restore():
    s = settings.Settings(devices=[
        settings.DeviceConfig("lamp", [], relay_pin=17, switch_pin=27, led_pin=5),
        settings.DeviceConfig("fan", [], relay_pin=23, switch_pin=24, relay_restore="off")])
    s.gpio.led_pin = 22
    assert settings.problems(s) == []
    c = doctor.check_gpio(s, pin_factory=real_gpio)
    assert c.status == "ok"
    assert "lamp: relay 17, switch 27, LED 5; fan: relay 23, switch 24; shared LED 22 (BCM)" in c.detail
    assert "fan on start: safe state OFF, then OFF (relay_restore = off)" in c.detail


@pytest.mark.parametrize("machine, bits, arch, status", [
    ("aarch64", 64, "arm64", "ok"), ("x86_64", 64, "amd64", "ok"), ("aarch64", 64, None, "ok"),
    ("armv7l", 32, "armhf", "fail"), ("aarch64", 32, "armhf", "fail"),  # Pi 4, 32-bit OS
    ("aarch64", 64, "armhf", "fail"), ("armv7l", 64, None, "fail")])
def test_platform_needs_a_64_bit_userland(machine, bits, arch, status):
    c = doctor.check_platform(machine, bits, dpkg_arch=lambda: arch)
    assert c.status == status, c.detail
    assert machine in c.detail
    if status == "fail":
        assert "32-bit userland" in c.detail and "64-bit Raspberry Pi OS or Armbian/Debian arm64" in c.remedy


def test_platform_of_this_machine_is_ok():
    assert doctor.check_platform().status == "ok"  # the tests run on a 64-bit system


def test_gpio_unknown_factory_fails():
    def broken(name):
        raise PinFactoryError(f"unknown pin factory {name!r}")

    s = settings.Settings()
    s.gpio.pin_factory = "bogus"
    assert doctor.check_gpio(s, pin_factory=broken).status == "fail"


def test_gpio_duplicate_pins_fail():
    s = settings.Settings()
    s.gpio.led_pin = s.gpio.relay_pin
    assert doctor.check_gpio(s, pin_factory=real_gpio).status == "fail"


def test_numba_cache_cold_is_a_warning_with_warm_remedy(tmp_path):
    (tmp_path / "cache").mkdir()
    c = doctor.check_numba_cache({"NUMBA_CACHE_DIR": str(tmp_path / "cache")})
    assert c.status == "warn" and f"0/{len(KERNELS)}" in c.detail and "--warm-cache" in c.remedy


def test_numba_cache_not_created_yet_is_a_warning(tmp_path):
    c = doctor.check_numba_cache({"NUMBA_CACHE_DIR": str(tmp_path / "later")})
    assert c.status == "warn" and "does not exist" in c.detail


def test_numba_cache_warm_is_ok(tmp_path):
    c = doctor.check_numba_cache({"NUMBA_CACHE_DIR": str(warm_cache_dir(tmp_path))})
    assert c.status == "ok" and f"{len(KERNELS)}/{len(KERNELS)}" in c.detail


def test_kernel_names_match_the_kernels_module():
    assert doctor.kernel_names() == KERNELS


def test_disk_thresholds(tmp_path):
    s = settings.Settings()
    s.paths.state_dir = str(tmp_path)
    assert doctor.check_disk(s, 100, lambda p: Usage(1e9, 1e9, 50e6)).status == "fail"
    assert doctor.check_disk(s, 100, lambda p: Usage(1e9, 1e9, 300e6)).status == "warn"
    assert doctor.check_disk(s, 100, lambda p: Usage(1e9, 1e9, 5e9)).status == "ok"


def test_a_crashing_check_is_reported_not_raised(healthy, monkeypatch):
    def boom(s, pin_factory=None):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(doctor, "check_gpio", boom)
    gpio = doctor.run_checks(**healthy).by_name()["gpio"]
    assert gpio.status == "fail" and "kaboom" in gpio.detail


# --- CLI ---------------------------------------------------------------------------------------
def _patch_hardware(monkeypatch, tmp_path, mic=MIC, gpio=real_gpio):
    real_mic, real_gpio_check, real_numba = doctor.check_microphone, doctor.check_gpio, doctor.check_numba_cache
    monkeypatch.setattr(doctor, "check_microphone", lambda s, **kw: real_mic(s, sounddevice=mic))
    monkeypatch.setattr(doctor, "check_gpio", lambda s, **kw: real_gpio_check(s, pin_factory=gpio))
    cache = {"NUMBA_CACHE_DIR": str(warm_cache_dir(tmp_path))}
    monkeypatch.setattr(doctor, "check_numba_cache", lambda env=None: real_numba(cache))


def test_cli_json_healthy(tmp_path, monkeypatch):
    _patch_hardware(monkeypatch, tmp_path)
    cfg = write_config(tmp_path, '[asr]\nbackend = "text"\n')
    result = CliRunner().invoke(app, ["doctor", "--config", str(cfg), "--json", "--min-free-mb", "1"])
    assert result.exit_code == 0, result.output
    d = json.loads(result.stdout)
    assert d["ok"] is True
    assert [c["name"] for c in d["checks"]] == ["config", "platform", "microphone", "asr", "kinds", "gpio",
                                                "database", "numba_cache", "disk"]
    assert all(c["status"] == "ok" for c in d["checks"])


def test_cli_failing_check_exits_1_and_prints_remedy(tmp_path, monkeypatch):
    _patch_hardware(monkeypatch, tmp_path, mic=FakeSoundDevice([]))
    cfg = write_config(tmp_path, '[asr]\nbackend = "text"\n')
    result = CliRunner().invoke(app, ["doctor", "--config", str(cfg), "--min-free-mb", "1"])
    assert result.exit_code == 1
    assert "[FAIL] microphone" in result.stdout and "remedy:" in result.stdout
    result = CliRunner().invoke(app, ["doctor", "--config", str(cfg), "--json", "--min-free-mb", "1"])
    assert result.exit_code == 1 and json.loads(result.stdout)["ok"] is False


def test_cli_bad_config_json(tmp_path, monkeypatch):
    _patch_hardware(monkeypatch, tmp_path)
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[policy]\nact_threshold = 0.1\nask_threshold = 0.9\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["doctor", "--config", str(cfg), "--json"])
    assert result.exit_code == 1
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["config"]["status"] == "fail" and checks["config"]["remedy"]


# --- the generated config ----------------------------------------------------------------------
def test_default_config_parses_to_the_defaults_commented_and_uncommented():
    text = default_config_toml()
    parsed = settings.parse(text, "generated")
    assert dataclasses.asdict(parsed) | {"source": ""} == dataclasses.asdict(settings.Settings()) | {"source": ""}
    uncommented = "\n".join(line[2:] if line.startswith("# ") and " = " in line else line
                            for line in text.splitlines())
    again = settings.parse(uncommented, "uncommented")
    assert dataclasses.asdict(again) | {"source": ""} == dataclasses.asdict(settings.Settings()) | {"source": ""}
    for name, section in [(f.name, getattr(settings.Settings(), f.name))
                          for f in dataclasses.fields(settings.Settings()) if f.name not in ("source", "devices")]:
        assert f"[{name}]" in text
        for f in dataclasses.fields(section):
            assert f"# {f.name} = " in text
    assert "# relay_pin = 17" in text and "act / ask" not in text  # comments are config/settings.py's
    assert "# keep_audio = false  # privacy" in text


def test_default_config_with_state_dir(tmp_path):
    text = default_config_toml({"paths": {"state_dir": "/var/lib/edge-plm"}})
    assert 'state_dir = "/var/lib/edge-plm"' in text.splitlines()[text.splitlines().index("[paths]") + 1]
    assert settings.parse(text).paths.state() == Path("/var/lib/edge-plm")
    with pytest.raises(KeyError):
        default_config_toml({"paths": {"nope": 1}})


def test_config_cli_never_overwrites(tmp_path):
    out = tmp_path / "config.toml"
    r = CliRunner().invoke(app, ["config", "defaults", "--state-dir", str(tmp_path), "--output", str(out)])
    assert r.exit_code == 0 and out.exists()
    out.write_text("# mine\n")
    r = CliRunner().invoke(app, ["config", "defaults", "--output", str(out)])
    assert r.exit_code == 1 and out.read_text() == "# mine\n"
    r = CliRunner().invoke(app, ["config", "check", "--config", str(out)])
    assert r.exit_code == 0


@pytest.mark.parametrize("lm, says", [("household", "switch-en.ear.arpa, learning the household's names"),
                                       ("shipped", "switch-en.ear.arpa (asr.lm = 'shipped')"),
                                       ("general", "general English language model")])
def test_doctor_says_which_language_model_the_ear_uses(lm, says):
    s = settings.Settings()
    s.asr.backend, s.asr.lm = "pocketsphinx", lm
    check = doctor.check_asr(s)
    assert check.status == doctor.OK and says in check.detail, check


def test_doctor_fails_when_the_ears_lm_is_missing(monkeypatch, tmp_path):
    from edge_plm.voice import ear_lm

    monkeypatch.setattr(ear_lm, "EAR_LM", tmp_path / "gone.arpa")
    s = settings.Settings()
    s.asr.backend = "pocketsphinx"
    check = doctor.check_asr(s)
    assert check.status == doctor.FAIL and "ear's language model is missing" in check.detail


def test_mqtt_on_without_paho_gives_the_install_line(tmp_path):
    """Issue 47, item 5: not "the check itself failed: ModuleNotFoundError"."""
    import importlib  # noqa: PLC0415
    from dataclasses import replace  # noqa: PLC0415

    def no_paho(name):
        if name.startswith("paho"):
            raise ModuleNotFoundError(f"No module named {name.split('.')[0]!r}", name="paho")
        return importlib.import_module(name)

    s = replace(settings.Settings(), mqtt=settings.MqttConfig(enabled=True, host="127.0.0.1", port=1))
    c = doctor.check_mqtt(s, timeout=0.5, importer=no_paho)
    assert c.status == doctor.FAIL and "paho-mqtt is not installed" in c.detail
    assert "pip install" in c.remedy and "edge-plm[mqtt]" in c.remedy


def test_the_kind_head_is_checked_when_the_household_uses_it(monkeypatch):
    from dataclasses import replace

    from edge_plm.config.settings import DeviceConfig, Settings
    from edge_plm.plm.checkpoint import CheckpointError
    from edge_plm.switch import kinds

    s = Settings(devices=[DeviceConfig("lamp", [], relay_pin=5, switch_pin=6, kind="dimmer")])
    ok = doctor.check_kinds(s)
    assert ok.status == "ok" and "dimmers: lamp; questions" in ok.detail
    off = replace(s, kinds=replace(s.kinds, dimmers=False, questions=False))
    assert doctor.check_kinds(off).status == "ok" and "not loaded" in doctor.check_kinds(off).detail

    def broken():
        raise CheckpointError("damaged")
    monkeypatch.setattr(kinds, "load_shipped", broken)
    bad = doctor.check_kinds(s)
    assert bad.status == "fail" and "damaged" in bad.detail and bad.remedy
