"""``[[devices]]`` with ``kind = "dimmer"``: its keys, their checks (one line per problem, printed
by `config check`), its pins among every other pin, and relay-only configs exactly as before."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from edge_plm.config.file import default_config_toml
from edge_plm.config.settings import ConfigError, DeviceConfig, parse

ROOT = Path(__file__).resolve().parents[2]
LAMP = '[[devices]]\nname = "lamp"\nrelay_pin = 17\nswitch_pin = 27\n'
FAN = '[[devices]]\nname = "fan"\nrelay_pin = 23\nswitch_pin = 24\n'


def problems_of(text: str) -> list[str]:
    try:
        parse(text, "<c>")
    except ConfigError as exc:
        return [p.removeprefix("<c>: ") for p in exc.problems]
    return []


def test_a_dimmer_with_an_encoder_or_buttons_parses_with_its_defaults():
    (lamp, fan) = parse(LAMP + 'kind = "dimmer"\nencoder_pins = [5, 6]\n' + FAN).devices
    assert (lamp.kind, lamp.is_dimmer, lamp.encoder_pins) == ("dimmer", True, [5, 6])
    assert (lamp.level_step, lamp.min_level, lamp.pwm_frequency, lamp.up_pin, lamp.down_pin) == (
        0.25, 0.05, 100, -1, -1)
    assert (fan.kind, fan.is_dimmer, fan.encoder_pins) == ("relay", False, [])
    (lamp,) = parse(LAMP + 'kind = "dimmer"\nup_pin = 5\ndown_pin = 6\nlevel_step = 0.1\n'
                    'min_level = 0.2\npwm_frequency = 800\n').devices
    assert (lamp.up_pin, lamp.down_pin, lamp.level_step, lamp.min_level, lamp.pwm_frequency) == (
        5, 6, 0.1, 0.2, 800)
    assert problems_of(LAMP + 'kind = "dimmer"\n') == []  # a dimmer without a level control


def test_a_relay_only_config_is_as_before():
    (fan,) = parse(FAN).devices
    assert fan == DeviceConfig("fan", [], relay_pin=23, switch_pin=24)
    assert fan.kind == "relay" and not fan.is_dimmer


@pytest.mark.parametrize("body, needle", [
    ('kind = "dimmr"', "devices[1] ('lamp').kind must be one of relay, dimmer, got 'dimmr'"),
    ('kind = "dimmer"\nlevel_step = 0', "devices[1] ('lamp').level_step must be in (0, 1], got 0.0"),
    ('kind = "dimmer"\nlevel_step = 1.5', "level_step must be in (0, 1]"),
    ('kind = "dimmer"\nlevel_step = nan', "level_step must be in (0, 1], got nan"),
    ('kind = "dimmer"\nmin_level = 0', "devices[1] ('lamp').min_level must be in (0, 1], got 0.0"),
    ('kind = "dimmer"\npwm_frequency = 0', "devices[1] ('lamp').pwm_frequency must be 1..10000 Hz, got 0"),
    ('kind = "dimmer"\nencoder_pins = [5]', "encoder_pins must be two BCM GPIO numbers [a, b] (or [] for none)"),
    ('kind = "dimmer"\nencoder_pins = [5, "six"]', "encoder_pins must be two BCM GPIO numbers"),
    ('kind = "dimmer"\nencoder_pins = [5, 40]', "devices[1] ('lamp').encoder_pins[1] must be a BCM GPIO number 0..27, got 40"),
    ('kind = "dimmer"\nencoder_pins = [5, 5]', "encoder_pins[1] is pin 5, already devices[1] ('lamp').encoder_pins[0]"),
    ('kind = "dimmer"\nencoder_pins = [5, 27]', "encoder_pins[1] is pin 27, already devices[1] ('lamp').switch_pin"),
    ('kind = "dimmer"\nup_pin = 5', "up_pin without down_pin: up_pin and down_pin are a pair"),
    ('kind = "dimmer"\ndown_pin = 5', "down_pin without up_pin"),
    ('kind = "dimmer"\nup_pin = 22\ndown_pin = 5', "devices[1] ('lamp').up_pin is pin 22, already gpio.led_pin"),
    ('kind = "dimmer"\nencoder_pins = [5, 6]\nup_pin = 12\ndown_pin = 13',
     "a dimmer's level control is encoder_pins or up_pin / down_pin, not both"),
    ('level_step = 0.5', "devices[1] ('lamp'): level_step is a key of a dimmer only; set kind = \"dimmer\" or remove it"),
    ('encoder_pins = [5, 6]\nup_pin = 12', "encoder_pins, up_pin are keys of a dimmer only"),
])
def test_each_dimmer_problem_is_one_clear_line(body, needle):
    found = problems_of(LAMP + body + "\n")
    assert len(found) == 1 and needle in found[0], found


def test_a_dimmer_pin_clashing_with_another_device_is_named():
    found = problems_of(LAMP + 'kind = "dimmer"\nencoder_pins = [5, 6]\n'
                        + FAN.replace("switch_pin = 24", "switch_pin = 6"))
    assert found == ["devices[2] ('fan').switch_pin is pin 6, already devices[1] ('lamp').encoder_pins[1]; "
                     "each needs its own"]


def test_config_check_prints_every_dimmer_problem(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(LAMP + 'kind = "dimmer"\nmin_level = 2\nup_pin = 5\n' + FAN + "level_step = 0.5\n")
    proc = subprocess.run([sys.executable, "-m", "edge_plm.cli", "config", "check", "--config", str(config)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    errors = proc.stderr.strip().splitlines()
    assert len(errors) == 3 and all(e.startswith(f"error: {config}: ") for e in errors), errors
    assert "min_level must be in (0, 1]" in errors[0]
    assert "up_pin without down_pin" in errors[1]
    assert "devices[2] ('fan'): level_step is a key of a dimmer only" in errors[2]


def test_the_generated_config_lists_the_dimmer_keys():
    text = default_config_toml()
    block = text[text.index("## [[devices]]"):]
    for key in ("kind", "pwm_frequency", "level_step", "min_level", "encoder_pins", "up_pin", "down_pin"):
        assert f"## {key} = " in block
