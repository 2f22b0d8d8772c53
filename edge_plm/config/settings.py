"""Configuration: one TOML file over built-in defaults.

Lookup order (first that exists wins, unless a path is given explicitly):
  $EDGE_PLM_CONFIG, ~/.config/edge-plm/config.toml (user), /etc/edge-plm/config.toml (service).
State (database, checkpoints, models) lives under `paths.state_dir`: /var/lib/edge-plm for the
service (systemd's $STATE_DIRECTORY), else the XDG data dir (~/.local/share/edge-plm).

Every section is a dataclass; unknown keys are an error (a typo must not be silently ignored).
A key's one-line help is its field's ``metadata["help"]`` (`edge_plm.config.keys.setting`);
`edge_plm.config.file` writes it next to the key in the generated config file.

Each section lives with its checks (its `problems` method) in the module of its group:
`paths.py` ([paths]), `voice.py` ([audio], [asr], [talkback]), `pins.py` ([gpio],
[[devices]]), `deciding.py` ([policy], [timers], [kinds]), `model.py` ([model]) and `mqtt.py` ([mqtt]).
This module reads the file into `Settings` and runs every check (`problems`); the sections'
names are importable from here too.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge_plm.config.deciding import KindsConfig, PolicyConfig, TimersConfig
from edge_plm.config.keys import help_of, setting
from edge_plm.config.model import ModelConfig
from edge_plm.config.mqtt import MqttConfig, topic_id
from edge_plm.config.paths import PathsConfig, default_state_dir
from edge_plm.config.pins import DEFAULT_DEVICE, GPIO_PINS, RELAY_RESTORE, DeviceConfig, GpioConfig, devices_problems
from edge_plm.config.voice import EAR_LMS, SPEECH_BACKENDS, AsrConfig, AudioConfig, TalkbackConfig
from edge_plm.errors import EdgePlmError


class ConfigError(EdgePlmError, ValueError):
    """The configuration file is unreadable or holds an invalid value. `problems` lists each
    problem as its own line (``config check`` prints one line each); the message joins them."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = list(problems) if problems else [message]


@dataclass
class Settings:
    paths: PathsConfig = field(default_factory=PathsConfig)
    audio: AudioConfig = field(default_factory=AudioConfig)
    asr: AsrConfig = field(default_factory=AsrConfig)
    gpio: GpioConfig = field(default_factory=GpioConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    # ``[[devices]]``: several named relays, each with its own switch (empty: one device, from
    # ``[gpio]``; `device_configs`)
    devices: list[DeviceConfig] = field(default_factory=list)
    talkback: TalkbackConfig = field(default_factory=TalkbackConfig)
    mqtt: MqttConfig = field(default_factory=MqttConfig)
    timers: TimersConfig = field(default_factory=TimersConfig)
    kinds: KindsConfig = field(default_factory=KindsConfig)
    source: str = "<defaults>"  # where these settings came from


def device_configs(s: Settings) -> list[DeviceConfig]:
    """The configured devices: the ``[[devices]]`` entries, or (none given) one device named
    `DEFAULT_DEVICE` from the ``[gpio]`` relay and switch keys."""
    if s.devices:
        return list(s.devices)
    g = s.gpio
    return [DeviceConfig(DEFAULT_DEVICE, [], g.relay_pin, g.relay_active_high, g.relay_restore,
                         g.switch_pin, g.switch_mode, g.switch_pull_up, g.switch_bounce_ms, -1)]


def candidate_paths() -> list[Path]:
    paths = []
    if os.environ.get("EDGE_PLM_CONFIG"):
        paths.append(Path(os.environ["EDGE_PLM_CONFIG"]))
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    paths.append(Path(xdg) / "edge-plm" / "config.toml")
    paths.append(Path("/etc/edge-plm/config.toml"))
    return paths


def _apply(section_obj, values: dict, where: str, errors: list[str]) -> None:
    """Set the known keys of `values` that have the right type; every other key is a line in
    `errors` (its default stays)."""
    known = {f.name: f for f in dataclasses.fields(section_obj)}
    for key, value in values.items():
        if key not in known:
            errors.append(f"{where}: unknown key {key!r} (known: {', '.join(sorted(known))})")
            continue
        expected = type(getattr(section_obj, key))
        if expected is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        else:
            ok = isinstance(value, expected) and (expected is bool or not isinstance(value, bool))
        if not ok:
            errors.append(
                f"{where}.{key}: expected {expected.__name__}, got {type(value).__name__} ({value!r})")
            continue
        setattr(section_obj, key, float(value) if expected is float else value)


def parse(text: str, source: str = "<string>") -> Settings:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
    settings = Settings(source=source)
    errors: list[str] = []  # every problem, one line each (ConfigError.problems)
    for name, values in data.items():
        if name == "devices":
            settings.devices = _devices(values, source, errors)
            continue
        section = getattr(settings, name, None)
        if section is None or not dataclasses.is_dataclass(section) or not isinstance(values, dict):
            errors.append(f"{source}: unknown section [{name}]")
            continue
        _apply(section, values, f"{source}: [{name}]", errors)
    if settings.paths.checkpoints_dir:  # a key of older versions: say it does nothing now
        logging.getLogger(__name__).warning(
            "%s: paths.checkpoints_dir is no longer used (each database keeps its checkpoints in "
            "<database stem>.checkpoints/ beside it); remove the key", source)
    # the values that were set are validated too (a wrong type keeps its key's default)
    errors += [f"{source}: {p}" for p in problems(settings)]
    if errors:
        raise ConfigError("; ".join(errors), errors)
    return settings


def _devices(values: Any, source: str, errors: list[str]) -> list[DeviceConfig]:
    """The ``[[devices]]`` array of tables; problems are added to `errors`."""
    if not isinstance(values, list) or not all(isinstance(v, dict) for v in values):
        errors.append(f"{source}: devices must be an array of tables ([[devices]] entries)")
        return []
    out = []
    for i, entry in enumerate(values, 1):
        d = DeviceConfig()
        _apply(d, entry, f"{source}: [[devices]] #{i}", errors)
        if "aliases" in entry and not all(isinstance(a, str) for a in d.aliases):
            errors.append(f"{source}: [[devices]] #{i}.aliases: expected a list of strings")
            d.aliases = []
        out.append(d)
    return out


def problems(s: Settings) -> list[str]:
    """Every value in `s` that `run` could not use (empty: the settings are valid).

    One function for `config check`, `run` and every command that loads a config (`load`
    calls it), so that what `check` accepts is what the service can start with. Each section's
    own checks are its `problems` method, beside its keys.
    """
    out = _non_finite(s)
    if out:
        return out  # the range checks below assume finite numbers
    for section in (s.audio, s.asr, s.gpio, s.policy, s.model):
        out += section.problems()
    out += devices_problems(s.devices, s.gpio)
    return (out + s.talkback.problems() + s.mqtt.problems([d.name for d in device_configs(s)])
            + s.timers.problems() + s.kinds.problems())


def _non_finite(s: Settings) -> list[str]:
    out = []
    for name in ("paths", "audio", "asr", "gpio", "policy", "model"):
        section = getattr(s, name)
        for f in dataclasses.fields(section):
            value = getattr(section, f.name)
            if isinstance(value, float) and not math.isfinite(value):
                out.append(f"{name}.{f.name} must be a finite number, got {value}")
    return out


def validate(s: Settings) -> None:
    """Raise `ConfigError` naming every invalid value (see `problems`)."""
    found = problems(s)
    if found:
        raise ConfigError(f"{s.source}: " + "; ".join(found), [f"{s.source}: {p}" for p in found])


def load(path: str | Path | None = None) -> Settings:
    """Read settings from `path`, or from the first existing candidate file, or defaults."""
    if path is not None:
        path = Path(path).expanduser()
        if not path.exists():
            raise ConfigError(f"config file not found: {path}")
        return parse(read_config_text(path), str(path))
    env = os.environ.get("EDGE_PLM_CONFIG")
    if env:  # named on purpose (the systemd unit sets it): a typo is an error, not the defaults
        path = Path(env).expanduser()
        if not path.exists():
            raise ConfigError(f"config file not found: {path} (from EDGE_PLM_CONFIG)")
        return parse(read_config_text(path), str(path))
    for candidate in candidate_paths():
        if candidate.exists():
            return parse(read_config_text(candidate), str(candidate))
    return Settings()


def read_config_text(path: Path) -> str:
    """The file's text; a directory, an unreadable file or bytes that are not UTF-8 (TOML is
    UTF-8) are a `ConfigError`."""
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (TOML files are UTF-8): byte "
                          f"0x{exc.object[exc.start]:02x} at offset {exc.start}") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from exc


__all__ = ["DEFAULT_DEVICE", "EAR_LMS", "GPIO_PINS", "RELAY_RESTORE", "SPEECH_BACKENDS", "AsrConfig", "AudioConfig",
           "ConfigError", "DeviceConfig", "GpioConfig", "ModelConfig", "MqttConfig", "PathsConfig", "PolicyConfig",
           "KindsConfig", "Settings", "TalkbackConfig", "TimersConfig", "candidate_paths", "default_state_dir", "device_configs",
           "help_of", "load", "parse", "problems", "read_config_text", "setting", "topic_id", "validate"]
