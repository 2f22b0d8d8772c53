"""Configuration: one TOML file over built-in defaults.

Lookup order (first that exists wins, unless a path is given explicitly):
  $EDGE_PLM_CONFIG, ~/.config/edge-plm/config.toml (user), /etc/edge-plm/config.toml (service).
State (database, checkpoints, models) lives under `paths.state_dir`: /var/lib/edge-plm for the
service (systemd's $STATE_DIRECTORY), else the XDG data dir (~/.local/share/edge-plm).

Every section is a dataclass; unknown keys are an error (a typo must not be silently ignored).
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path


class ConfigError(ValueError):
    """The configuration file is unreadable or holds an invalid value."""


def default_state_dir() -> Path:
    if os.environ.get("STATE_DIRECTORY"):  # set by systemd's StateDirectory=
        return Path(os.environ["STATE_DIRECTORY"].split(":")[0])
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "edge-plm"


@dataclass
class PathsConfig:
    state_dir: str = ""  # empty: default_state_dir()
    database: str = ""  # empty: <state_dir>/edge-plm.db
    models_dir: str = ""  # empty: <state_dir>/models (installed ASR models)
    checkpoints_dir: str = ""  # empty: <state_dir>/checkpoints
    keep_audio: bool = False  # privacy: audio is not kept unless configured
    audio_dir: str = ""  # empty: <state_dir>/audio

    def state(self) -> Path:
        return Path(self.state_dir) if self.state_dir else default_state_dir()

    def database_path(self) -> Path:
        return Path(self.database) if self.database else self.state() / "edge-plm.db"

    def models_path(self) -> Path:
        return Path(self.models_dir) if self.models_dir else self.state() / "models"

    def checkpoints_path(self) -> Path:
        return Path(self.checkpoints_dir) if self.checkpoints_dir else self.state() / "checkpoints"

    def audio_path(self) -> Path:
        return Path(self.audio_dir) if self.audio_dir else self.state() / "audio"


@dataclass
class AudioConfig:
    source: str = "microphone"  # microphone | wav | text
    device: str = ""  # sounddevice device name or index; empty = system default
    sample_rate: int = 16000  # rate the ASR sees; capture at another rate is resampled
    block_ms: int = 30
    energy_threshold_db: float = -40.0  # dBFS above which a block counts as speech
    silence_tail_ms: int = 600  # end the utterance after this much silence
    max_utterance_ms: int = 8000
    min_utterance_ms: int = 200


@dataclass
class AsrConfig:
    backend: str = "auto"  # auto | vosk | pocketsphinx | text ; auto = vosk if a model is installed
    vosk_model: str = ""  # model directory (or a name under paths.models_dir)
    vosk_grammar: list[str] = field(default_factory=list)  # optional phrase list
    language: str = "en"


@dataclass
class GpioConfig:
    pin_factory: str = "auto"  # auto | mock | lgpio | rpigpio | native ...
    relay_pin: int = 17
    relay_active_high: bool = True
    relay_safe_state: bool = False  # state on start, stop and crash
    switch_pin: int = 27
    switch_mode: str = "toggle"  # toggle | momentary
    switch_pull_up: bool = True
    switch_bounce_ms: int = 50
    led_pin: int = 22  # "I'm not sure" signal; -1 disables
    buzzer_pin: int = -1  # optional active buzzer: two short beeps when asking; -1 = none
    min_toggle_interval_ms: int = 1000  # relay rate limit


@dataclass
class PolicyConfig:
    act_threshold: float = 0.80  # confidence at or above which the device acts
    ask_threshold: float = 0.35  # between ask and act: ask; below: ignore (treated as NOOP)
    ask_window_s: float = 8.0
    override_window_s: float = 10.0
    # after ASK / IGNORE with no flip, label NOOP only if the model gave the relay's current
    # state less than this probability (else no label: "no flip" cannot tell S from NOOP)
    ambiguity_floor: float = 0.2


@dataclass
class ModelConfig:
    config: str = "potato"
    seed: int = 0
    replay_size: int = 8
    holdout_fraction: float = 0.2
    holdout_min: int = 10  # holdout rows needed before a candidate is judged at all
    version_every: int = 10  # learned labels between candidate versions
    # a candidate is rolled back only if its holdout balanced accuracy is lower than the
    # active version's by more than this (small holdouts are noisy: one row moves it a lot)
    rollback_margin: float = 0.03
    # act/ask decisions use the model's distribution times the household's label frequencies
    # raised to this power (the model itself is class-balanced): 0 = balanced as is, 1 = the
    # full prior. 0.5 measured best on a long replay (BENCHMARKS.md)
    prior_strength: float = 0.5
    # ... and weighed by the evidence behind it: with n labels, p' = (n p + k/3) / (n + k), k
    # pseudo-labels that know nothing, so a model taught a handful of labels does not act on
    # them alone (0 = off; 3 measured best on the household sessions, BENCHMARKS.md)
    evidence_prior: float = 3.0


@dataclass
class Settings:
    paths: PathsConfig = field(default_factory=PathsConfig)
    audio: AudioConfig = field(default_factory=AudioConfig)
    asr: AsrConfig = field(default_factory=AsrConfig)
    gpio: GpioConfig = field(default_factory=GpioConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    source: str = "<defaults>"  # where these settings came from


def candidate_paths() -> list[Path]:
    paths = []
    if os.environ.get("EDGE_PLM_CONFIG"):
        paths.append(Path(os.environ["EDGE_PLM_CONFIG"]))
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    paths.append(Path(xdg) / "edge-plm" / "config.toml")
    paths.append(Path("/etc/edge-plm/config.toml"))
    return paths


def _apply(section_obj, values: dict, where: str) -> None:
    known = {f.name: f for f in dataclasses.fields(section_obj)}
    for key, value in values.items():
        if key not in known:
            raise ConfigError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(known))})")
        expected = type(getattr(section_obj, key))
        if expected is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        else:
            ok = isinstance(value, expected) and (expected is bool or not isinstance(value, bool))
        if not ok:
            raise ConfigError(
                f"{where}.{key}: expected {expected.__name__}, got {type(value).__name__} ({value!r})"
            )
        setattr(section_obj, key, float(value) if expected is float else value)


def parse(text: str, source: str = "<string>") -> Settings:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
    settings = Settings(source=source)
    for name, values in data.items():
        section = getattr(settings, name, None)
        if section is None or not dataclasses.is_dataclass(section) or not isinstance(values, dict):
            raise ConfigError(f"{source}: unknown section [{name}]")
        _apply(section, values, f"{source}: [{name}]")
    validate(settings)
    return settings


def validate(s: Settings) -> None:
    p = s.policy
    if not 0.0 <= p.ask_threshold <= p.act_threshold <= 1.0:
        raise ConfigError("policy: need 0 <= ask_threshold <= act_threshold <= 1")
    if not 0.0 <= p.ambiguity_floor <= 1.0:
        raise ConfigError("policy.ambiguity_floor must be in [0, 1]")
    m = s.model
    if not 0.0 <= m.holdout_fraction < 1.0:
        raise ConfigError("model.holdout_fraction must be in [0, 1)")
    if m.holdout_min < 1 or m.version_every < 1:
        raise ConfigError("model.holdout_min and model.version_every must be >= 1")
    if m.rollback_margin < 0:
        raise ConfigError("model.rollback_margin must be >= 0")
    if m.prior_strength < 0 or m.evidence_prior < 0:
        raise ConfigError("model.prior_strength and model.evidence_prior must be >= 0")
    if s.gpio.switch_mode not in ("toggle", "momentary"):
        raise ConfigError("gpio.switch_mode must be 'toggle' or 'momentary'")
    if s.audio.source not in ("microphone", "wav", "text"):
        raise ConfigError("audio.source must be 'microphone', 'wav' or 'text'")
    if s.asr.backend not in ("auto", "vosk", "pocketsphinx", "text"):
        raise ConfigError("asr.backend must be 'auto', 'vosk', 'pocketsphinx' or 'text'")


def load(path: str | Path | None = None) -> Settings:
    """Read settings from `path`, or from the first existing candidate file, or defaults."""
    if path is not None:
        path = Path(path)
        if not path.exists():
            raise ConfigError(f"config file not found: {path}")
        return parse(path.read_text(encoding="utf-8"), str(path))
    for candidate in candidate_paths():
        if candidate.exists():
            return parse(candidate.read_text(encoding="utf-8"), str(candidate))
    return Settings()
