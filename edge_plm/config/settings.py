"""Configuration: one TOML file over built-in defaults.

Lookup order (first that exists wins, unless a path is given explicitly):
  $EDGE_PLM_CONFIG, ~/.config/edge-plm/config.toml (user), /etc/edge-plm/config.toml (service).
State (database, checkpoints, models) lives under `paths.state_dir`: /var/lib/edge-plm for the
service (systemd's $STATE_DIRECTORY), else the XDG data dir (~/.local/share/edge-plm).

Every section is a dataclass; unknown keys are an error (a typo must not be silently ignored).
A key's one-line help is its field's ``metadata["help"]`` (`setting`); `edge_plm.config.file`
writes it next to the key in the generated config file.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge_plm.errors import EdgePlmError


class ConfigError(EdgePlmError, ValueError):
    """The configuration file is unreadable or holds an invalid value. `problems` lists each
    problem as its own line (``config check`` prints one line each); the message joins them."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = list(problems) if problems else [message]


def setting(default: Any, text: str) -> Any:
    """A config key with its built-in default and the one-line help shown in the generated
    config file (``metadata["help"]``). A list default is copied for every instance."""
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"help": text})
    return field(default=default, metadata={"help": text})


def help_of(f: dataclasses.Field) -> str:
    """The help text of a config key ("" when it has none)."""
    return f.metadata.get("help", "")


def default_state_dir() -> Path:
    if os.environ.get("STATE_DIRECTORY"):  # set by systemd's StateDirectory=
        return Path(os.environ["STATE_DIRECTORY"].split(":")[0])
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "edge-plm"


@dataclass
class PathsConfig:
    state_dir: str = setting("", "empty: $STATE_DIRECTORY (the service: /var/lib/edge-plm), "
                                      "else $XDG_DATA_HOME/edge-plm (~/.local/share/edge-plm)")
    database: str = setting("", "empty: <state_dir>/edge-plm.db")
    models_dir: str = setting("", "empty: <state_dir>/models (installed ASR models)")
    checkpoints_dir: str = setting("", "no longer used: a database's checkpoints live in "
                                       "<database stem>.checkpoints/ beside it")
    keep_audio: bool = setting(False, "privacy: audio is not kept unless configured")
    log_transcripts: bool = setting(False, "privacy: transcripts in the log at INFO (DEBUG always shows them)")
    audio_dir: str = setting("", "empty: <state_dir>/audio")

    # a leading ``~`` is the home directory, as in a shell (never a literal ``./~`` folder)
    def state(self) -> Path:
        return Path(self.state_dir).expanduser() if self.state_dir else default_state_dir()

    def database_path(self) -> Path:
        return Path(self.database).expanduser() if self.database else self.state() / "edge-plm.db"

    def models_path(self) -> Path:
        return Path(self.models_dir).expanduser() if self.models_dir else self.state() / "models"

    def checkpoints_path(self) -> Path:
        """The database's own checkpoint folder (`ReplayStore.checkpoints_home`)."""
        db = self.database_path()
        return db.parent / f"{db.stem}.checkpoints"

    def audio_path(self) -> Path:
        return Path(self.audio_dir).expanduser() if self.audio_dir else self.state() / "audio"


@dataclass
class AudioConfig:
    source: str = setting("microphone", "microphone | text (WAV files: edge-plm replay)")
    device: str = setting("", "sounddevice device name or index; empty = system default")
    sample_rate: int = setting(16000, "rate the ASR sees; capture at another rate is resampled")
    block_ms: int = 30
    vad: str = setting("webrtc", "webrtc | energy ; how a block is judged speech (benchmarks/bench_endpoint.py)")
    vad_aggressiveness: int = setting(2, "webrtc VAD: 0 (keeps most) .. 3 (drops most non-speech)")
    vad_floor_margin_db: float = setting(8.0, "speech must also be this far above the running noise floor; 0 = off")
    energy_threshold_db: float = setting(-40.0, "dBFS above which a block counts as speech (vad = energy)")
    silence_tail_ms: int = setting(300, "end the utterance after this much silence")
    max_utterance_ms: int = 8000
    min_utterance_ms: int = 200


@dataclass
class AsrConfig:
    backend: str = setting("auto", "auto | vosk | pocketsphinx | text ; auto = vosk if a model is installed")
    vosk_model: str = setting("", "model directory (or a name under paths.models_dir)")
    vosk_grammar: list[str] = setting([], "optional phrase list")
    language: str = "en"
    lm: str = setting("household", "household | shipped | general ; pocketsphinx's language model: the starting "
                      "model's commands and chatter, plus the household's names and labelled commands "
                      "(household), without them (shipped), or pocketsphinx's general English LM")
    min_fluency: float = setting(-4.5, "heard words less likely than this under the ear's LM (mean natural-log "
                                 "probability per word) are asked about, never acted on; -100 = off")
    max_transcript_chars: int = setting(500, "longer transcripts are cut (logged warning); 0 = no cap")


#: The ear's language models (``asr.lm``; edge_plm/voice/ear_lm.py).
EAR_LMS = ("household", "shipped", "general")

#: What the relay does after the safe state on start (``gpio.relay_restore``).
RELAY_RESTORE = ("last", "off", "on")


@dataclass
class GpioConfig:
    pin_factory: str = setting("auto", "auto (GPIOZERO_PIN_FACTORY, else real GPIO; run refuses none) "
                                       "| mock | lgpio | rpigpio | pigpio | native (gpiozero pin factories)")
    relay_pin: int = 17
    relay_active_high: bool = True
    relay_safe_state: bool = setting(False, "state on stop and crash, and first on start")
    relay_restore: str = setting("last", "after the safe state on start: last (the state recorded "
                                         "before the restart) | off | on")
    switch_pin: int = 27
    switch_mode: str = setting("toggle", "toggle | momentary")
    switch_pull_up: bool = True
    switch_bounce_ms: int = 50
    led_pin: int = setting(22, '"I\'m not sure" signal; -1 disables')
    buzzer_pin: int = setting(-1, "optional active buzzer: two short beeps when asking; -1 = none")
    min_toggle_interval_ms: int = setting(1000, "relay rate limit")


#: The name of the one device built from ``[gpio]`` when no ``[[devices]]`` is configured: the
#: name its relay has always been recorded under (``relay_state``), so existing databases keep
#: restoring it.
DEFAULT_DEVICE = "main"


@dataclass
class DeviceConfig:
    """One ``[[devices]]`` entry: a named relay with its own switch (its teacher)."""

    name: str = setting("", "what the person calls it, e.g. \"lamp\" (unique, case-insensitive)")
    aliases: list[str] = setting([], "other names it answers to, e.g. [\"light\", \"big light\"]")
    relay_pin: int = -1
    relay_active_high: bool = True
    relay_restore: str = setting("last", "after the safe state on start: last | off | on")
    switch_pin: int = setting(-1, "this device's own switch: its flips label utterances for it")
    switch_mode: str = setting("toggle", "toggle | momentary")
    switch_pull_up: bool = True
    switch_bounce_ms: int = 50
    led_pin: int = setting(-1, "its own \"I'm not sure\" LED; -1: the shared gpio.led_pin blinks "
                               "the device's number")


@dataclass
class PolicyConfig:
    act_threshold: float = setting(0.80, "confidence at or above which the device acts")
    ask_threshold: float = setting(0.35, "between ask and act: ask; below: ignore (treated as NOOP)")
    ask_window_s: float = 8.0
    override_window_s: float = 10.0
    # after ASK / IGNORE with no flip, label NOOP only if the model gave the relay's current
    # state less than this probability (else no label: "no flip" cannot tell S from NOOP)
    ambiguity_floor: float = 0.2
    # a transcript whose words outside filler words ("the", "uh", "it"...) hold fewer letters is
    # junk: never acted on, never labelled ON/OFF (edge_plm/decide/content.py, docs/policy.md)
    min_content_letters: int = 4


@dataclass
class ModelConfig:
    config: str = "potato"
    # where learning starts: "switch-en" (the shipped English starting model, understands
    # common on/off commands from the first word), "empty", or a switch-model checkpoint path
    start: str = "switch-en"
    seed: int = 0
    holdout_fraction: float = 0.2
    holdout_min: int = setting(10, "holdout rows needed before a candidate is judged at all")
    version_every: int = setting(10, "learned labels between candidate versions, at least "
                                         "(or version_growth of the owner's labels the model holds, if more)")
    # ... or this share of the owner's labels the model holds, when more: the cost of versioning
    # per label (checkpoint + holdout pass, both growing with the owner's part) stays constant;
    # a starting model's examples do not count (its part is frozen: a fixed cost per version)
    version_growth: float = 0.05
    # a candidate is rolled back only if its holdout balanced accuracy is lower than the
    # active version's by more than this (small holdouts are noisy: one row moves it a lot)
    rollback_margin: float = 0.03
    # act/ask decisions may add the household's label frequencies raised to this power to the
    # model's logits before its confidence is calibrated (0 = off, the default: the calibration
    # is fitted on the household's own held-out rows, which carry its class mix; docs/benchmarks-log.md)
    prior_strength: float = 0.0
    # ... and weigh the distribution by the evidence behind it: with n labels, p' = (n p + k/3)
    # / (n + k), k pseudo-labels that know nothing, so a model taught a handful of labels does not
    # act on them alone (0 = off; 3: from an empty model the households' wrong actions fall from
    # 44 to 21 of about 1,000 actions; a starting model's thousands of labels make it a no-op;
    # docs/benchmarks-log.md)
    evidence_prior: float = 3.0
    # checkpoint retention: the active version, its parent and the newest `keep_checkpoints`
    # saved versions keep their files; older files are deleted (the rows stay, marked pruned),
    # and more are pruned, oldest first, while the directory holds more than
    # `checkpoints_max_mb` (the active version and its parent are never pruned)
    keep_checkpoints: int = 5
    checkpoints_max_mb: float = 64.0


@dataclass
class TalkbackConfig:
    enabled: bool = setting(False, "say the question out loud when asking and take a spoken "
                                   "yes/no as the label (off: LED/buzzer only; docs/policy.md)")
    backend: str = setting("espeak-ng", "espeak-ng | piper | none ; the speech output")
    voice: str = setting("en-us", "espeak-ng voice (espeak-ng --voices)")
    rate_wpm: int = setting(175, "espeak-ng speaking rate, words per minute")
    piper_model: str = setting("", "piper voice model (.onnx, with its .onnx.json) for backend = piper")
    output_device: str = setting("", "sounddevice output device name or index; empty = system default")
    answers: str = setting("grammar", "grammar (pocketsphinx answer grammar over the audio, else "
                                      "the transcript) | transcript (the transcript only)")
    echo_guard_ms: int = setting(500, "after the device speaks, microphone input is dropped this long")
    confirm: bool = setting(False, 'say what was done after acting ("On.")')
    chime: bool = setting(False, "a short tone instead of words (question and confirmation)")


@dataclass
class TimersConfig:
    """``[timers]``: timed commands ("turn off the lights in twenty minutes"; docs/loop.md,
    "Timed commands")."""

    enabled: bool = setting(True, "read a time in a command and act at that time (off: a "
                                  "command with a time is decided as one without)")
    grace_s: float = setting(300.0, "a timer that fell due while the device was off runs at "
                                    "start if it is at most this late, else it is dropped and "
                                    "logged (0..86400)")
    max_delay_s: float = setting(86400.0, "a time further ahead than this is not a timer: the "
                                          "command is asked about (60..604800)")


@dataclass
class MqttConfig:
    """``[mqtt]``: the optional bridge to a home hub (Home Assistant's MQTT discovery;
    `edge_plm.bridge`). Off by default; ``paho-mqtt`` (the ``mqtt`` extra) is imported only
    when it is on."""

    enabled: bool = setting(False, "publish every relay to an MQTT broker with Home Assistant "
                                   "discovery and take ON/OFF commands (docs/deploy.md)")
    host: str = setting("localhost", "the broker's host name or address")
    port: int = setting(1883, "1883 (plain) or 8883 (TLS), usually")
    username: str = setting("", "empty: connect without a user name")
    password: str = setting("", "the user's password (or password_file; not both)")
    password_file: str = setting("", "a file holding the password (first line), readable only "
                                     "by its owner (mode 0600 or 0400)")
    tls: bool = setting(False, "connect with TLS")
    ca_file: str = setting("", "TLS: the CA certificate(s) that signed the broker's (empty: the "
                               "system's CAs)")
    certfile: str = setting("", "TLS client certificate (optional, with keyfile)")
    keyfile: str = setting("", "TLS client key, readable only by its owner")
    client_id: str = setting("", "empty: edge-plm-<node_id>-<process id>")
    node_id: str = setting("", "the board's id in discovery topics and unique ids (a-z, 0-9, _, "
                               "-); empty: <hostname>-<6 hex characters of /etc/machine-id, or "
                               "of the MAC address>, unique per board")
    base: str = setting("", "topic prefix of the board's topics; empty: edge-plm/<node_id>")
    discovery_prefix: str = setting("homeassistant", "Home Assistant's discovery prefix")
    qos: int = setting(1, "QoS of what the board publishes and subscribes to (0, 1 or 2)")
    keepalive_s: int = setting(60, "MQTT keepalive; a lost broker is noticed after about 1.5x this")
    publish_transcripts: bool = setting(False, "privacy: the last-decision sensor also carries "
                                               "the transcript (off: only the decision leaves "
                                               "the board)")


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


#: BCM GPIO numbers gpiozero can drive on a Raspberry Pi's 40-pin header (GPIO0..GPIO27).
GPIO_PINS = range(0, 28)


def _known_model_configs() -> list[str]:
    from edge_plm.switch.config import CONFIGS  # noqa: PLC0415 - plain dataclasses, no kernels

    return sorted(CONFIGS)


def problems(s: Settings) -> list[str]:
    """Every value in `s` that `run` could not use (empty: the settings are valid).

    One function for `config check`, `run` and every command that loads a config (`load`
    calls it), so that what `check` accepts is what the service can start with.
    """
    out = _non_finite(s)
    if out:
        return out  # the range checks below assume finite numbers
    for step in (_audio_problems, _asr_problems, _gpio_problems, _policy_problems, _model_problems,
                 _device_problems):
        out += step(s)
    return out + _talkback_problems(s) + mqtt_problems(s) + _timers_problems(s)


def _timers_problems(s: Settings) -> list[str]:
    t, out = s.timers, _Problems()
    out.need(math.isfinite(t.grace_s) and 0 <= t.grace_s <= 86400,
             f"timers.grace_s must be in 0..86400, got {t.grace_s}")
    out.need(math.isfinite(t.max_delay_s) and 60 <= t.max_delay_s <= 604800,
             f"timers.max_delay_s must be in 60..604800, got {t.max_delay_s}")
    return out


#: The speech output backends (`edge_plm.voice.speech.BACKENDS`; plain names, no import).
SPEECH_BACKENDS = ("espeak-ng", "piper", "none")


def _talkback_problems(s: Settings) -> list[str]:
    t, out = s.talkback, _Problems()
    out.need(t.backend in SPEECH_BACKENDS,
             f"talkback.backend must be one of {', '.join(SPEECH_BACKENDS)}, got {t.backend!r}")
    out.need(t.answers in ("grammar", "transcript"),
             f"talkback.answers must be one of grammar, transcript, got {t.answers!r}")
    out.need(80 <= t.rate_wpm <= 450, f"talkback.rate_wpm must be in 80..450, got {t.rate_wpm}")
    out.need(0 <= t.echo_guard_ms <= 5000,
             f"talkback.echo_guard_ms must be in 0..5000, got {t.echo_guard_ms}")
    out.need(t.backend != "piper" or bool(t.piper_model),
             "talkback.piper_model must name a voice model file when talkback.backend = piper")
    return out


#: characters a topic level built from a name may hold (Home Assistant's node / object ids)
_TOPIC_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")


def topic_id(name: str) -> str:
    """A device (or host) name as one topic level and discovery id: lower case, every
    character but a-z, 0-9, _ and - replaced by _ ("Big Lamp" -> "big_lamp")."""
    out = "".join(c if c in _TOPIC_ID_CHARS else "_" for c in name.strip().lower())
    return out or "_"


def _private_file_problem(key: str, value: str) -> str | None:
    """A secret's file exists and is readable by its owner only (no group or other bits)."""
    path = Path(value).expanduser()
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError as exc:
        return f"mqtt.{key} {value!r}: {exc.strerror or exc}"
    if not path.is_file():
        return f"mqtt.{key} {value!r} is not a file"
    if mode & 0o077:
        return (f"mqtt.{key} {value!r} is readable by others (mode {mode:04o}); it holds a "
                f"secret: chmod 600 {value}")
    return None


def mqtt_problems(s: Settings) -> list[str]:
    """The ``[mqtt]`` checks: ranges and topic shapes always; files and the devices' topic
    ids only when the bridge is on."""
    m, out = s.mqtt, _Problems()
    out.need(1 <= m.port <= 65535, f"mqtt.port must be in 1..65535, got {m.port}")
    out.need(m.qos in (0, 1, 2), f"mqtt.qos must be 0, 1 or 2, got {m.qos}")
    out.need(5 <= m.keepalive_s <= 3600, f"mqtt.keepalive_s must be in 5..3600, got {m.keepalive_s}")
    for key in ("base", "discovery_prefix"):
        value = getattr(m, key)
        out.need(not any(c in value for c in "+#\0") and not value.startswith("/")
                 and not value.endswith("/"),
                 f"mqtt.{key} must be a topic without wildcards (+, #) or a leading or "
                 f"trailing /, got {value!r}")
    out.need(bool(m.discovery_prefix), "mqtt.discovery_prefix must not be empty")
    out.need(not m.node_id or topic_id(m.node_id) == m.node_id,
             f"mqtt.node_id may hold only a-z, 0-9, _ and -, got {m.node_id!r}")
    out.need(not (m.password and m.password_file), "mqtt: give password or password_file, not both")
    out.need(not (m.certfile or m.keyfile) or bool(m.certfile and m.keyfile),
             "mqtt: a TLS client certificate needs both certfile and keyfile")
    if not m.enabled:
        return out
    out.need(bool(m.host.strip()), "mqtt.host must name the broker when mqtt.enabled = true")
    for key in ("password_file", "keyfile"):
        if getattr(m, key):
            problem = _private_file_problem(key, getattr(m, key))
            if problem:
                out.append(problem)
    for key in ("ca_file", "certfile"):
        value = getattr(m, key)
        if value and not Path(value).expanduser().is_file():
            out.append(f"mqtt.{key} {value!r} is not a file")
    ids: dict[str, str] = {}
    for d in device_configs(s):
        key = topic_id(d.name)
        if key in ids:
            out.append(f"mqtt: the devices {ids[key]!r} and {d.name!r} have the same topic id "
                       f"{key!r}; rename one")
        ids.setdefault(key, d.name)
    return out


class _Problems(list):
    """The messages of one validation step: `need` adds one when its condition fails."""

    def need(self, ok: bool, message: str) -> None:
        if not ok:
            self.append(message)


def _non_finite(s: Settings) -> list[str]:
    out = []
    for name in ("paths", "audio", "asr", "gpio", "policy", "model"):
        section = getattr(s, name)
        for f in dataclasses.fields(section):
            value = getattr(section, f.name)
            if isinstance(value, float) and not math.isfinite(value):
                out.append(f"{name}.{f.name} must be a finite number, got {value}")
    return out


def _audio_problems(s: Settings) -> list[str]:
    return audio_problems(s.audio)


def audio_problems(a: AudioConfig) -> list[str]:
    """The [audio] checks (also `Endpointer.from_config`'s)."""
    out = _Problems()
    out.need(a.source != "wav", "audio.source = 'wav' needs the files: `edge-plm run --audio FILE...` "
                                "(or `edge-plm replay FILE`); the service listens to 'microphone' or 'text'")
    out.need(a.source in ("microphone", "wav", "text"),
             "audio.source must be 'microphone' or 'text'")
    out.need(a.sample_rate > 0, f"audio.sample_rate must be > 0, got {a.sample_rate}")
    out.need(0 < a.block_ms <= 1000, f"audio.block_ms must be in 1..1000, got {a.block_ms}")
    out.need(a.energy_threshold_db <= 0,
             f"audio.energy_threshold_db is in dBFS and must be <= 0, got {a.energy_threshold_db}")
    out.need(a.silence_tail_ms >= 0, f"audio.silence_tail_ms must be >= 0, got {a.silence_tail_ms}")
    out.need(a.vad in ("energy", "webrtc"), f"audio.vad must be 'energy' or 'webrtc', got {a.vad!r}")
    out.need(a.vad_floor_margin_db >= 0, f"audio.vad_floor_margin_db must be >= 0, got {a.vad_floor_margin_db}")
    out.need(0 <= a.vad_aggressiveness <= 3,
             f"audio.vad_aggressiveness must be 0..3, got {a.vad_aggressiveness}")
    out.need(a.vad != "webrtc" or a.block_ms in (10, 20, 30),
             f"audio.vad = 'webrtc' needs audio.block_ms of 10, 20 or 30, got {a.block_ms}")
    out.need(a.max_utterance_ms > 0, f"audio.max_utterance_ms must be > 0, got {a.max_utterance_ms}")
    out.need(0 <= a.min_utterance_ms < a.max_utterance_ms,
             f"audio.min_utterance_ms must be >= 0 and below audio.max_utterance_ms "
             f"({a.max_utterance_ms}), got {a.min_utterance_ms}")
    return out


def _asr_problems(s: Settings) -> list[str]:
    out = _Problems()
    out.need(s.asr.backend in ("auto", "vosk", "pocketsphinx", "text"),
             "asr.backend must be 'auto', 'vosk', 'pocketsphinx' or 'text'")
    out.need(s.asr.lm in EAR_LMS, f"asr.lm must be one of {', '.join(EAR_LMS)}, got {s.asr.lm!r}")
    out.need(math.isfinite(s.asr.min_fluency) and s.asr.min_fluency <= 0,
             f"asr.min_fluency must be a number <= 0 (a mean log-probability), got {s.asr.min_fluency}")
    out.need(s.asr.max_transcript_chars >= 0,
             f"asr.max_transcript_chars must be >= 0 (0: no cap), got {s.asr.max_transcript_chars}")
    return out


def _gpio_problems(s: Settings) -> list[str]:
    g, out = s.gpio, _Problems()
    lo, hi = GPIO_PINS[0], GPIO_PINS[-1]
    for name, optional in (("relay_pin", False), ("switch_pin", False), ("led_pin", True),
                           ("buzzer_pin", True)):
        pin = getattr(g, name)
        if optional and pin == -1:
            continue
        out.need(pin in GPIO_PINS, f"gpio.{name} must be a BCM GPIO number {lo}..{hi}"
                                   f"{' or -1 (none)' if optional else ''}, got {pin}")
    used: dict[int, str] = {}
    for name in ("relay_pin", "switch_pin", "led_pin", "buzzer_pin"):
        pin = getattr(g, name)
        if pin == -1:
            continue
        if pin in used:
            out.append(f"gpio.{used[pin]} and gpio.{name} are both pin {pin}; each needs its own")
        used.setdefault(pin, name)
    out.need(g.switch_mode in ("toggle", "momentary"), "gpio.switch_mode must be 'toggle' or 'momentary'")
    out.need(g.switch_bounce_ms >= 0, f"gpio.switch_bounce_ms must be >= 0, got {g.switch_bounce_ms}")
    out.need(g.min_toggle_interval_ms >= 0,
             f"gpio.min_toggle_interval_ms must be >= 0, got {g.min_toggle_interval_ms}")
    out.need(g.relay_restore in RELAY_RESTORE,
             f"gpio.relay_restore must be one of {', '.join(RELAY_RESTORE)}, got {g.relay_restore!r}")
    return out


def _device_problems(s: Settings) -> list[str]:
    """``[[devices]]``: names unique (case-insensitive, aliases included) and non-empty, pins
    valid and distinct across devices and the shared LED / buzzer."""
    if not s.devices:
        return []
    from edge_plm.switch.tokenizer import normalize  # noqa: PLC0415 - text only, no kernels

    out, lo, hi = _Problems(), GPIO_PINS[0], GPIO_PINS[-1]
    names: dict[str, str] = {}
    used: dict[int, str] = {p: f"gpio.{k}" for k in ("led_pin", "buzzer_pin")
                            if (p := getattr(s.gpio, k)) != -1}
    for i, d in enumerate(s.devices, 1):
        where = f"devices[{i}] ({d.name!r})" if d.name.strip() else f"devices[{i}]"
        for phrase in (d.name, *d.aliases):
            key = " ".join(normalize(phrase).split())
            if not key:
                out.append(f"{where}: a name or alias needs a letter or digit, got {phrase!r}")
            elif key in names:
                out.append(f"{where}: the name {phrase!r} is already {names[key]}'s "
                           "(names and aliases must be unique, case-insensitive)")
            else:
                names[key] = repr(d.name)
        for key, optional in (("relay_pin", False), ("switch_pin", False), ("led_pin", True)):
            pin = getattr(d, key)
            if optional and pin == -1:
                continue
            if pin not in GPIO_PINS:
                out.append(f"{where}.{key} must be a BCM GPIO number {lo}..{hi}"
                           f"{' or -1 (none)' if optional else ''}, got {pin}")
            elif pin in used:
                out.append(f"{where}.{key} is pin {pin}, already {used[pin]}; each needs its own")
            else:
                used[pin] = f"{where}.{key}"
        out.need(d.switch_mode in ("toggle", "momentary"),
                 f"{where}.switch_mode must be 'toggle' or 'momentary', got {d.switch_mode!r}")
        out.need(d.switch_bounce_ms >= 0, f"{where}.switch_bounce_ms must be >= 0, got {d.switch_bounce_ms}")
        out.need(d.relay_restore in RELAY_RESTORE, f"{where}.relay_restore must be one of "
                                                   f"{', '.join(RELAY_RESTORE)}, got {d.relay_restore!r}")
    return out


def _policy_problems(s: Settings) -> list[str]:
    return policy_problems(s.policy)


def policy_problems(p: PolicyConfig) -> list[str]:
    """The [policy] checks (also `Policy`'s: it refuses exactly these)."""
    out = _Problems()
    out.need(all(math.isfinite(v) for v in (p.ask_threshold, p.act_threshold, p.ambiguity_floor,
                                            p.ask_window_s, p.override_window_s)),
             "policy: thresholds and windows must be finite numbers")
    out.need(0.0 <= p.ask_threshold <= p.act_threshold <= 1.0,
             "policy: need 0 <= ask_threshold <= act_threshold <= 1, got ask_threshold "
             f"{p.ask_threshold}, act_threshold {p.act_threshold}")
    out.need(0.0 <= p.ambiguity_floor <= 1.0,
             f"policy.ambiguity_floor must be in [0, 1], got {p.ambiguity_floor}")
    out.need(p.min_content_letters >= 0,
             f"policy.min_content_letters must be >= 0, got {p.min_content_letters}")
    out.need(p.ask_window_s > 0, f"policy.ask_window_s must be > 0, got {p.ask_window_s}")
    out.need(p.override_window_s > 0,
             f"policy.override_window_s must be > 0, got {p.override_window_s}")
    return out


def _model_problems(s: Settings) -> list[str]:
    m, out = s.model, _Problems()
    known = _known_model_configs()
    out.need(m.config in known, f"model.config {m.config!r} is not a known model configuration "
                                f"(known: {', '.join(known)})")
    out.need(m.seed >= 0, f"model.seed must be >= 0, got {m.seed}")
    out.need(0.0 <= m.holdout_fraction < 1.0,
             f"model.holdout_fraction must be in [0, 1), got {m.holdout_fraction}")
    out.need(m.holdout_min >= 1 and m.version_every >= 1,
             "model.holdout_min and model.version_every must be >= 1")
    out.need(m.rollback_margin >= 0, f"model.rollback_margin must be >= 0, got {m.rollback_margin}")
    out.need(0.0 <= m.version_growth <= 1.0,
             f"model.version_growth must be in [0, 1], got {m.version_growth}")
    out.need(m.keep_checkpoints >= 2,
             "model.keep_checkpoints must be >= 2 (the active version and its parent)")
    out.need(m.checkpoints_max_mb > 0, f"model.checkpoints_max_mb must be > 0, got {m.checkpoints_max_mb}")
    out.need(m.prior_strength >= 0 and m.evidence_prior >= 0,
             "model.prior_strength and model.evidence_prior must be >= 0")
    start = _start_problem(m) if m.config in known else None  # else: the config is the problem
    if start:
        out.append(start)
    return out


def validate(s: Settings) -> None:
    """Raise `ConfigError` naming every invalid value (see `problems`)."""
    found = problems(s)
    if found:
        raise ConfigError(f"{s.source}: " + "; ".join(found), [f"{s.source}: {p}" for p in found])


def _start_problem(m: ModelConfig) -> str | None:
    """model.start names a shipped model of model.config, "empty", or an existing file (whether
    it loads is checked when it is loaded)."""
    from edge_plm.config.starting_model import StartError, check_config, resolve  # noqa: PLC0415

    if not m.start.strip():
        return 'model.start must be "switch-en", "empty" or a checkpoint path'
    try:
        check_config(m.start, m.config)
        resolve(m.start)  # a shipped model installed, a path an existing file
    except StartError as exc:
        return str(exc)
    return None


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
