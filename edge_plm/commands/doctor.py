"""`edge-plm doctor`: is this machine ready to run the service? One check per dependency.

Each check returns a `Check` (name, status ok/warn/fail, detail, remedy). `fail` means the
service cannot work as configured (exit code 1); `warn` means it works, but not as well as it
could (e.g. GPIO is simulated, Numba kernels are not cached yet). Checks never change
anything: the database is opened read-only, write access is probed with a temporary file that
is removed at once, models are inspected, not loaded.

Everything a check touches is injectable (a fake `sounddevice` module, a pin factory function,
the environment, `disk_usage`), so tests need no hardware.

Run it as the service user to see what the service sees::

    sudo -u edge-plm /opt/edge-plm/bin/edge-plm doctor
"""

from __future__ import annotations

import glob
import importlib
import logging
import os
import platform as platform_mod
import shutil
import sqlite3
import stat
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from edge_plm.config import settings as settings_mod
from edge_plm.config.settings import Settings

log = logging.getLogger(__name__)

OK, WARN, FAIL = "ok", "warn", "fail"
STATUSES = (OK, WARN, FAIL)
DEFAULT_MIN_FREE_MB = 100  # below this the state directory's disk is a failure; below 5x a warning
SERVICE_USER = "edge-plm"
SERVICE_NUMBA_CACHE = "/var/lib/edge-plm/numba-cache"


@dataclass
class Check:
    """The outcome of one check. `remedy` says what to do when it is not ok."""

    name: str
    status: str
    detail: str
    remedy: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass
class Report:
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(c.status != FAIL for c in self.checks)

    def by_name(self) -> dict[str, Check]:
        return {c.name: c for c in self.checks}

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [c.to_dict() for c in self.checks]}


def _as_service_user(command: str) -> str:
    return f"sudo -u {SERVICE_USER} /opt/edge-plm/bin/edge-plm {command}"


def _warm_as_the_service() -> str:
    """The warm-up command with the unit's Numba environment (its cache, the generic CPU):
    kernels compiled otherwise would be a cache miss for the service."""
    return (f"sudo -u {SERVICE_USER} env NUMBA_CACHE_DIR={SERVICE_NUMBA_CACHE} NUMBA_CPU_NAME=generic "
            "/opt/edge-plm/bin/edge-plm doctor --warm-cache")


def _existing_ancestor(path: Path) -> Path:
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _whoami() -> str:
    try:
        import pwd  # noqa: PLC0415 - POSIX only

        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        return str(os.geteuid())


# --- config -----------------------------------------------------------------------------------
def check_config(path: str | Path | None) -> tuple[Check, Settings]:
    """Load the config (the usual lookup when `path` is None); defaults when it is invalid."""
    try:
        s = settings_mod.load(path)
    except settings_mod.ConfigError as exc:
        return Check("config", FAIL, f"{exc} (other checks use the built-in defaults)",
                     "fix the file (every key and its default: `edge-plm config defaults`), then "
                     "`systemctl restart edge-plm`"), Settings()
    if s.source == "<defaults>":
        looked = ", ".join(str(p) for p in settings_mod.candidate_paths())
        return Check("config", OK, f"no config file found (looked at {looked}); built-in defaults"), s
    return Check("config", OK, f"{s.source} is valid"), s


# --- microphone -------------------------------------------------------------------------------
def check_microphone(s: Settings, sounddevice: Any = None,
                     importer: Callable[[str], Any] = importlib.import_module) -> Check:
    """sounddevice importable (PortAudio present) and an input device (the configured one)."""
    if s.audio.source != "microphone":
        return Check("microphone", OK, f"not used (audio.source = {s.audio.source!r})")
    sd = sounddevice
    if sd is None:
        try:
            sd = importer("sounddevice")
        except OSError as exc:  # sounddevice raises OSError when libportaudio is missing
            return Check("microphone", FAIL, f"PortAudio library not found ({exc})",
                         "sudo apt-get install libportaudio2")
        except ImportError as exc:
            return Check("microphone", FAIL, f"sounddevice is not installed ({exc})",
                         "/opt/edge-plm/bin/pip install sounddevice (or rerun install.sh)")
    try:
        devices = list(sd.query_devices())
    except Exception as exc:  # PortAudioError and friends
        return Check("microphone", FAIL, f"PortAudio cannot list devices: {exc}",
                     "check `arecord -l`; the user needs the audio group")
    inputs = [(i, d) for i, d in enumerate(devices) if int(d.get("max_input_channels", 0) or 0) > 0]
    names = [f"{i}: {d.get('name', '?')}" for i, d in inputs]
    if not inputs:
        return Check("microphone", FAIL,
                     f"no input device (PortAudio sees {len(devices)} device(s), none can record)",
                     "plug in a USB microphone (or enable the I2S mic overlay); `arecord -l` must list "
                     f"a capture device; the service user must be in the audio group (`id {SERVICE_USER}`); "
                     "firmware_scripts/mic-test.sh records a test clip")
    want = s.audio.device.strip()
    if want:
        if want.isdigit():
            match = [(i, d) for i, d in inputs if i == int(want)]
        else:
            match = [(i, d) for i, d in inputs if want.lower() in str(d.get("name", "")).lower()]
        if not match:
            return Check("microphone", FAIL,
                         f"configured audio.device {want!r} is not an input device; inputs: {'; '.join(names)}",
                         "set audio.device to one of the inputs above (index or part of the name), "
                         "or to \"\" for the system default")
        i, d = match[0]
        return Check("microphone", OK, f"audio.device {want!r} -> {i}: {d.get('name', '?')}")
    return Check("microphone", OK, f"{len(inputs)} input device(s): {'; '.join(names)} "
                 "(audio.device empty: the system default is used)")


# --- talk-back (speech output) ----------------------------------------------------------------
def check_speech(s: Settings, sounddevice: Any = None,
                 importer: Callable[[str], Any] = importlib.import_module,
                 which: Callable[[str], str | None] = shutil.which) -> Check:
    """With ``talkback.enabled``: the speech backend works and an output device plays it."""
    t = s.talkback
    if t.backend == "none":
        return Check("speech", OK, "talkback.backend = none: nothing is said (LED and buzzer only)")
    if t.backend == "espeak-ng" and which("espeak-ng") is None:
        return Check("speech", FAIL, "espeak-ng is not installed", "sudo apt-get install espeak-ng "
                     "(install.sh installs it)")
    if t.backend == "piper":
        try:
            importer("piper")
        except ImportError as exc:
            return Check("speech", FAIL, f"piper-tts is not installed ({exc})",
                         "/opt/edge-plm/bin/pip install piper-tts, or set talkback.backend = \"espeak-ng\"")
        if not Path(t.piper_model).expanduser().is_file():
            return Check("speech", FAIL, f"talkback.piper_model {t.piper_model!r} is not a file",
                         "download a piper voice (.onnx and .onnx.json) and set talkback.piper_model")
    sd = sounddevice
    try:
        sd = sd if sd is not None else importer("sounddevice")
        devices = list(sd.query_devices())
    except Exception as exc:  # no PortAudio, or it cannot list devices
        return Check("speech", WARN, f"{t.backend} works but no audio output can be used ({exc}): "
                     "questions are not spoken", "sudo apt-get install libportaudio2; `aplay -l`")
    outputs = [(i, d) for i, d in enumerate(devices) if int(d.get("max_output_channels", 0) or 0) > 0]
    want = t.output_device.strip()
    if want:
        outputs = [(i, d) for i, d in outputs if (want.isdigit() and i == int(want))
                   or (not want.isdigit() and want.lower() in str(d.get("name", "")).lower())]
    if not outputs:
        where = f"talkback.output_device {want!r} is not an output device" if want else "no output device"
        return Check("speech", WARN, f"{where}: questions are not spoken (the LED still shows them)",
                     "plug in a speaker (USB, 3.5 mm or HDMI audio); `aplay -l` must list it; the "
                     f"service user must be in the audio group (`id {SERVICE_USER}`)")
    i, d = outputs[0]
    return Check("speech", OK, f"{t.backend} speaks through {i}: {d.get('name', '?')}")


# --- ASR --------------------------------------------------------------------------------------
def _ear_lm_note(lm: str) -> str:
    """Which language model the ear decodes with (``asr.lm``), for the check's line."""
    from edge_plm.voice.ear_lm import EAR_LM  # noqa: PLC0415

    if lm == "general":
        return "its general English language model (asr.lm = 'general')"
    learns = ", learning the household's names and labelled commands" if lm == "household" else ""
    return f"the ear's command-and-chatter language model {EAR_LM.name}{learns} (asr.lm = '{lm}')"


def _pocketsphinx_check(importer: Callable[[str], Any], note: str = "", lm: str = "general") -> Check:
    try:
        ps = importer("pocketsphinx")
        model_root = Path(ps.get_model_path())
    except ImportError as exc:
        return Check("asr", FAIL, f"pocketsphinx is not installed ({exc}){note}",
                     "/opt/edge-plm/bin/pip install pocketsphinx, or install a Vosk model: "
                     "`edge-plm asr fetch vosk-model-small-en-us-0.15`")
    except Exception as exc:
        return Check("asr", FAIL, f"pocketsphinx is broken: {exc}{note}", "reinstall edge-plm (install.sh)")
    en = model_root / "en-us"
    needed = [en / "en-us", en / "cmudict-en-us.dict", en / "en-us.lm.bin"]
    missing = [str(p) for p in needed if not p.exists()]
    if missing:
        return Check("asr", FAIL, f"pocketsphinx's English model is incomplete (missing {', '.join(missing)}){note}",
                     "reinstall pocketsphinx in the venv (/opt/edge-plm/bin/pip install --force-reinstall "
                     "pocketsphinx)")
    from edge_plm.voice.ear_lm import EAR_LM, EAR_SENTENCES  # noqa: PLC0415

    lost = [str(p) for p in (EAR_LM, EAR_SENTENCES) if lm != "general" and not p.is_file()]
    if lost:
        return Check("asr", FAIL, f"the ear's language model is missing ({', '.join(lost)}){note}",
                     "reinstall edge-plm (install.sh), or set asr.lm = \"general\"")
    return Check("asr", OK, f"pocketsphinx with its bundled English acoustic model ({en}) and "
                 f"{_ear_lm_note(lm)}{note}")


def _vosk_check(model: Path, importer: Callable[[str], Any]) -> Check:
    from edge_plm.voice.models import looks_like_vosk_model  # noqa: PLC0415

    if not looks_like_vosk_model(model):
        return Check("asr", FAIL, f"{model} is not a valid Vosk model (no am/final.mdl with graph/ "
                     "or conf/model.conf)",
                     "reinstall the model: `edge-plm asr install MODEL.zip --sha256 HEX --force`")
    try:
        importer("vosk")
    except (ImportError, OSError) as exc:
        return Check("asr", FAIL, f"vosk model {model} is valid but vosk cannot be imported ({exc})",
                     "/opt/edge-plm/bin/pip install vosk (or rerun install.sh)")
    return Check("asr", OK, f"vosk model {model}")


def check_asr(s: Settings, importer: Callable[[str], Any] = importlib.import_module) -> Check:
    """The configured backend can be built: a valid Vosk model directory, or pocketsphinx's model."""
    from edge_plm.voice.asr import AsrError, resolve_vosk_model  # noqa: PLC0415

    backend = s.asr.backend
    models_dir = s.paths.models_path()
    fetch = ("`edge-plm asr fetch vosk-model-small-en-us-0.15` (or `edge-plm asr install MODEL.zip "
             "--sha256 HEX`), run as the service user or with --config pointing at the service config")
    if backend == "text":
        return Check("asr", OK, "text backend: transcripts are given directly, no acoustic model")
    if backend == "pocketsphinx":
        return _pocketsphinx_check(importer, " (asr.backend = 'pocketsphinx')", s.asr.lm)
    try:
        model = resolve_vosk_model(s.asr, models_dir)
    except AsrError as exc:
        if backend == "vosk":
            return Check("asr", FAIL, str(exc), "set asr.vosk_model to an installed model (`edge-plm asr "
                         f"list`) or install one: {fetch}")
        fallback = _pocketsphinx_check(importer, "", s.asr.lm)
        status = FAIL if fallback.status == FAIL else WARN
        return Check("asr", status, f"{exc}; the service falls back to pocketsphinx: {fallback.detail}",
                     f"fix asr.vosk_model or install the model: {fetch}")
    if model is not None:
        return _vosk_check(model, importer)
    if backend == "vosk":
        return Check("asr", FAIL, f"asr.backend is 'vosk' but no Vosk model is installed in {models_dir}",
                     f"install one: {fetch}")
    fallback = _pocketsphinx_check(importer, f" (auto: no Vosk model in {models_dir})", s.asr.lm)
    lang = (s.asr.language or "en").lower()
    if fallback.status == OK and lang not in ("en", "en-us", "english"):
        return Check("asr", WARN, f"no Vosk model for language {lang!r}; pocketsphinx only understands "
                     "English", f"install a Vosk model for {lang!r}: `edge-plm asr install MODEL.zip --sha256 HEX`")
    return fallback


# --- GPIO -------------------------------------------------------------------------------------
def check_kinds(s: Settings) -> Check:
    """The kind head (dimmers and questions, docs/loop.md "Dimmers and questions") loads when
    the household uses it: a ``kind = "dimmer"`` device, or ``[kinds] questions`` on."""
    from edge_plm.plm.checkpoint import CheckpointError  # noqa: PLC0415
    from edge_plm.switch.kinds import SHIPPED, load_shipped  # noqa: PLC0415

    dimmers = [d.name for d in s.devices if d.kind == "dimmer"] if s.kinds.dimmers else []
    if not (dimmers or s.kinds.questions):
        return Check("kinds", OK, "off: no dimmer and [kinds] questions = false (the kind head is not loaded)")
    try:
        load_shipped()
    except (CheckpointError, OSError) as exc:
        return Check("kinds", FAIL, f"the kind head {SHIPPED} cannot be loaded ({exc}): no dimming or "
                     "answers by voice", "reinstall edge-plm (install.sh)")
    uses = ([f"dimmers: {', '.join(dimmers)}"] if dimmers else []) + (["questions"] if s.kinds.questions else [])
    return Check("kinds", OK, f"the kind head {SHIPPED.name} ({'; '.join(uses)})")


def check_gpio(s: Settings, pin_factory: Callable[[str], tuple[Any, str]] | None = None) -> Check:
    """A real pin factory loads (else: mock only, a warning); the pins in use are distinct."""
    g = s.gpio
    pins = [p for p in (g.relay_pin, g.switch_pin, g.led_pin, g.buzzer_pin) if p != -1]
    if not s.devices and len(set(pins)) != len(pins):  # [[devices]]: the config check's job
        return Check("gpio", FAIL, f"relay_pin, switch_pin, led_pin and buzzer_pin must differ, got {pins}",
                     "give each of gpio.relay_pin, switch_pin, led_pin, buzzer_pin its own BCM pin number")
    if pin_factory is None:
        from edge_plm.device.pins import make_pin_factory as pin_factory  # noqa: PLC0415
    from edge_plm.device.pins import PinFactoryError  # noqa: PLC0415

    access = ("the service user must be in the gpio group (`id edge-plm`) and /dev/gpiochip* must be "
              "group gpio, mode 0660 (install.sh writes /etc/udev/rules.d/99-edge-plm-gpio.rules); "
              "a GPIO library must be importable in the venv (/opt/edge-plm/bin/pip install lgpio)")
    try:
        factory, description = pin_factory(g.pin_factory)
    except PinFactoryError as exc:
        return Check("gpio", FAIL, str(exc), f"set gpio.pin_factory = \"auto\" or a working one; {access}")
    except Exception as exc:
        return Check("gpio", FAIL, f"pin factory {g.pin_factory!r} failed: {type(exc).__name__}: {exc}", access)
    try:
        close = getattr(factory, "close", None)
        if close is not None:
            close()
    except Exception:  # closing a probe factory must not turn into a failed check
        log.debug("closing the probe pin factory failed", exc_info=True)
    pin_text, restore = _pins_text(s), _restore_text(g)
    if s.devices:
        restore = "; ".join(f"{d.name} {_restore_text(replace(g, relay_restore=d.relay_restore))}"
                            for d in s.devices)
    if description.lower().startswith("mock"):
        if g.pin_factory.strip().lower() == "mock":
            return Check("gpio", WARN, f"mock only: {description}; {pin_text}; {restore}",
                         "set gpio.pin_factory = \"auto\" on the device")
        return Check("gpio", WARN, f"mock only: {description}; the relay will not switch anything; "
                     f"{pin_text}; {restore}",
                     f"on a Raspberry Pi / Le Potato: {access}; firmware_scripts/gpio-test.sh clicks the relay")
    return Check("gpio", OK, f"{description}; {pin_text}; {restore}")


def _pins_text(s: Settings) -> str:
    """The pins in use, for the gpio check's detail (each device's with ``[[devices]]``)."""
    g = s.gpio
    shared = f"LED {g.led_pin}" + (f", buzzer {g.buzzer_pin}" if g.buzzer_pin != -1 else "")
    if not s.devices:
        return f"relay {g.relay_pin}, switch {g.switch_pin}, {shared} (BCM)"
    each = "; ".join(f"{d.name}: relay {d.relay_pin}, switch {d.switch_pin}"
                     + (f", LED {d.led_pin}" if d.led_pin != -1 else "") for d in s.devices)
    shared = ", ".join(f"{what} {p}" for what, p in (("LED", g.led_pin), ("buzzer", g.buzzer_pin)) if p != -1)
    return f"{each}" + (f"; shared {shared}" if shared else "") + " (BCM)"


def _restore_text(g: Any) -> str:
    """What the relay does on start (gpio.relay_restore), for the gpio check's detail."""
    safe = "ON" if g.relay_safe_state else "OFF"
    then = {"last": "the state recorded before the restart", "off": "OFF", "on": "ON"}
    return f"on start: safe state {safe}, then {then.get(g.relay_restore, '?')} (relay_restore = {g.relay_restore})"


# --- platform ---------------------------------------------------------------------------------
ARM32 = ("armhf", "armel", "i386")


def _dpkg_architecture() -> str | None:
    try:
        out = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def check_platform(machine: str | None = None, pointer_bits: int | None = None,
                   dpkg_arch: Callable[[], str | None] = _dpkg_architecture) -> Check:
    """A 64-bit userland: this Python is 64-bit and dpkg's architecture is not a 32-bit one
    (a Pi 4 with 32-bit Raspberry Pi OS has a 64-bit kernel, `uname -m` aarch64)."""
    machine = machine or platform_mod.machine()
    bits = pointer_bits or struct.calcsize("P") * 8
    arch = dpkg_arch()
    text = f"{machine}, {bits}-bit Python" + (f", dpkg architecture {arch}" if arch else "")
    if bits < 64 or arch in ARM32 or machine.startswith(("armv", "i386", "i686")):
        return Check("platform", FAIL, f"32-bit userland ({text}): edge-plm needs a 64-bit system",
                     "install 64-bit Raspberry Pi OS or Armbian/Debian arm64 (docs/deploy.md: "
                     "numpy, numba/llvmlite, scipy, pocketsphinx and cffi have no 32-bit ARM wheels)")
    return Check("platform", OK, text)


# --- database ---------------------------------------------------------------------------------
def _probe_writable(directory: Path) -> str | None:
    """None if a file can be created in `directory`, else the reason."""
    try:
        fd, name = tempfile.mkstemp(prefix=".doctor-", dir=directory)
    except OSError as exc:
        return f"{exc.strerror or exc}"
    os.close(fd)
    os.unlink(name)
    return None


def check_database(s: Settings) -> Check:
    """The replay buffer's directory is writable and the file (if any) has a schema we know."""
    path = s.paths.database_path()
    directory = path.parent
    who = _whoami()
    own = ("sudo chown -R edge-plm:edge-plm /var/lib/edge-plm && sudo chmod 0700 /var/lib/edge-plm "
           "(for the service); run doctor as the user that runs the service: "
           + _as_service_user("doctor"))
    verdict = _database_place(path, who, own)
    if verdict is not None:
        return verdict
    notes = []
    mode = stat.S_IMODE(directory.stat().st_mode)
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        notes.append(f"{directory} has mode {mode:o}: readable by others (transcripts are private)")
    if not path.exists():
        detail = f"{path} will be created at the first start ({directory} is writable by {who})"
    else:
        file_check = _database_file(path, who, own)
        if isinstance(file_check, Check):
            return file_check
        detail = file_check
    if os.geteuid() == 0:
        notes.append("checked as root, which may write anywhere: run `" + _as_service_user("doctor")
                     + "` to check the service user's access")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        return Check("database", WARN, f"{detail}; " + "; ".join(notes), f"chmod 0700 {directory}")
    return Check("database", OK, "; ".join([detail, *notes]))


def _database_place(path: Path, who: str, own: str) -> Check | None:
    """The verdict when the database's directory is missing, not a directory or not
    writable, or the path is not a file; None when the file can be created or used there."""
    directory = path.parent
    if not directory.exists():
        parent = _existing_ancestor(directory)
        if not os.access(parent, os.W_OK | os.X_OK):
            return Check("database", FAIL, f"{directory} does not exist and {who} cannot create it "
                         f"({parent} is not writable)", own)
        return Check("database", OK, f"{path} will be created at the first start ({parent} is writable by {who})")
    if not directory.is_dir():
        return Check("database", FAIL, f"{directory} is not a directory", "set paths.database / paths.state_dir")
    if path.exists() and not path.is_file():
        kind = "a directory" if path.is_dir() else "not a regular file"
        return Check("database", FAIL, f"{path} is {kind}, not a database file",
                     "set paths.database to a file path (or leave it empty for <state_dir>/edge-plm.db)")
    reason = _probe_writable(directory)
    if reason is not None:
        return Check("database", FAIL, f"{directory} is not writable by {who}: {reason}", own)
    return None


def _database_file(path: Path, who: str, own: str) -> Check | str:
    """An existing database file: its schema and size (a line), or the failing check."""
    from edge_plm.store import SCHEMA_VERSION, ReplayStore, SchemaError, StoreError, file_schema_version  # noqa: PLC0415

    if not os.access(path, os.R_OK | os.W_OK):
        return Check("database", FAIL, f"{path} is not readable and writable by {who}", own)
    try:
        version = file_schema_version(path)
    except SchemaError as exc:
        return Check("database", FAIL, f"{path}: {exc}",
                     "paths.database points at a file that is not an edge-plm replay buffer; "
                     "move it away or point paths.database elsewhere")
    except sqlite3.DatabaseError as exc:
        return Check("database", FAIL, f"{path}: not a readable SQLite database ({exc})",
                     "restore a backup, or move the file away (the service starts a new buffer)")
    if version > SCHEMA_VERSION:
        return Check("database", FAIL, f"{path}: schema v{version} is newer than this edge-plm "
                     f"knows (v{SCHEMA_VERSION})",
                     "upgrade edge-plm (rerun install.sh from a newer checkout); the file is kept as is")
    if version < SCHEMA_VERSION:
        return (f"{path}: schema v{version}, migrated to v{SCHEMA_VERSION} at the next start "
                f"(writable by {who})")
    try:
        with ReplayStore(path, read_only=True) as store:
            n = store.count()
            owed = store.owed_rewrites()
    except StoreError as exc:
        return Check("database", FAIL, f"{path}: {exc}", "restore a backup or move the file away")
    if owed:
        return Check("database", WARN, f"{path}: a stopped `forget` still owes the rewrite of "
                     f"{len(owed)} older checkpoint(s) ({', '.join(sorted(owed))}): they still "
                     "hold forgotten interactions",
                     "start the service (it finishes them), or run any command that changes "
                     "the model, e.g. `edge-plm model rebuild`")
    return f"{path}: schema v{version}, {n} interaction(s), writable by {who}"


# --- Numba cache ------------------------------------------------------------------------------
def _device_kernel_module():
    """The module of the switch model's Numba kernels (``switch/jit_kernels.py``): the
    full-batch refinement of `edge-plm train switch` runs them; the service's online
    refinement is NumPy and needs none (``unitnet.ONLINE_KERNEL``)."""
    from edge_plm.switch import jit_kernels  # noqa: PLC0415

    return jit_kernels


def kernel_names() -> list[str]:
    """The cached Numba kernels (dispatchers with cache=True) the device's model runs."""
    from numba.core.registry import CPUDispatcher  # noqa: PLC0415

    kernels = _device_kernel_module()
    return sorted(n for n, f in vars(kernels).items()
                  if isinstance(f, CPUDispatcher) and getattr(f, "_cache", None) is not None
                  and f.py_func.__module__ == kernels.__name__)  # not helpers it imports


def kernel_index_glob(name: str) -> str:
    """The file name pattern of a kernel's Numba cache index (``<module>.<kernel>-*.nbi``)."""
    return f"{_device_kernel_module().__name__.rsplit('.', 1)[-1]}.{name}-*.nbi"


def _cached_kernels(cache_dir: Path | None) -> tuple[list[str], list[str]]:
    """(cached, missing) kernel names. When `cache_dir` is the one this process' Numba uses,
    ask Numba itself (the index is checked against the kernels' source stamp, so a cache from
    another version counts as missing); otherwise look for the index files."""
    from numba.core import config as nb_config  # noqa: PLC0415

    kernels = _device_kernel_module()
    names = kernel_names()
    ours = (cache_dir is None and not nb_config.CACHE_DIR) or (
        cache_dir is not None and nb_config.CACHE_DIR and Path(nb_config.CACHE_DIR) == cache_dir)
    cached = []
    for name in names:
        hit = False
        if ours:
            try:
                hit = bool(getattr(kernels, name)._cache._cache_file._load_index())
            except Exception:  # numba internals moved: fall back to the files
                ours = False
        if not ours:
            root = cache_dir if cache_dir is not None else Path(kernels.__file__).parent / "__pycache__"
            hit = bool(glob.glob(str(root / "**" / kernel_index_glob(name)), recursive=True))
        if hit:
            cached.append(name)
    return cached, [n for n in names if n not in cached]


def check_numba_cache(env: Mapping[str, str] | None = None) -> Check:
    """NUMBA_CACHE_DIR is writable and the kernels are compiled there (fast first start)."""
    env = os.environ if env is None else env
    warm = _warm_as_the_service()
    raw = env.get("NUMBA_CACHE_DIR", "")
    if raw:
        cache_dir: Path | None = Path(raw)
        where = f"NUMBA_CACHE_DIR={raw}"
        if not cache_dir.exists():
            parent = _existing_ancestor(cache_dir)
            if not os.access(parent, os.W_OK | os.X_OK):
                return Check("numba_cache", FAIL, f"{where} does not exist and cannot be created "
                             f"({parent} is not writable by {_whoami()})",
                             f"mkdir and chown it to the service user, or unset NUMBA_CACHE_DIR; then {warm}")
            return Check("numba_cache", WARN, f"{where} does not exist yet: the kernels are not compiled, "
                         "`train switch` compiles them on first use (the service runs none)", warm)
        if _probe_writable(cache_dir) is not None:
            return Check("numba_cache", FAIL, f"{where} is not writable by {_whoami()}: kernels would be "
                         "compiled at every `train switch`", f"sudo chown -R edge-plm:edge-plm {cache_dir}")
    else:
        cache_dir = None
        where = "NUMBA_CACHE_DIR unset (cache next to the package)"
        try:
            pkg_cache = Path(_device_kernel_module().__file__).parent / "__pycache__"
        except Exception as exc:
            return Check("numba_cache", FAIL, f"the Numba kernels cannot be imported: {exc}",
                         "reinstall edge-plm (install.sh)")
        target = pkg_cache if pkg_cache.exists() else pkg_cache.parent
        if not os.access(target, os.W_OK):
            return Check("numba_cache", WARN, f"{where}: {target} is not writable by {_whoami()}, so "
                         "Numba compiles the kernels at every `train switch`",
                         f"set NUMBA_CACHE_DIR (the service uses {SERVICE_NUMBA_CACHE}); {warm}")
    try:
        cached, missing = _cached_kernels(cache_dir)
    except Exception as exc:  # numba not importable, broken LLVM, ...
        return Check("numba_cache", FAIL, f"Numba cannot be used: {type(exc).__name__}: {exc}",
                     "reinstall edge-plm (install.sh); Numba needs a 64-bit or armv7 Python with llvmlite")
    total = len(cached) + len(missing)
    if missing:
        return Check("numba_cache", WARN, f"{where}: {len(cached)}/{total} kernels compiled (missing "
                     f"{', '.join(missing)}); `train switch` compiles them on first use (the service runs none)", warm)
    return Check("numba_cache", OK, f"{where}: {total}/{total} kernels compiled")


def warm_numba_cache(config: str = "potato") -> dict[str, Any]:
    """Compile every Numba kernel into the cache: a tiny learn, a full-batch refinement step
    (what `train switch` runs), and the unit network's objective on two rows."""
    import numpy as np  # noqa: PLC0415
    from numba.core import config as nb_config  # noqa: PLC0415

    from edge_plm.switch import unit_kernels  # noqa: PLC0415
    from edge_plm.switch.model import SwitchModel  # noqa: PLC0415

    t0 = time.perf_counter()
    model = SwitchModel.empty(config, seed=0)
    model.observe("what time is it")
    for text, label in (("turn on the light", "ON"), ("turn off the light", "OFF"),
                        ("play some music", "NOOP")):
        model.learn(text, label)
    model.refine(1)  # the full batch: the attention's kernel (and the row helper it calls)
    model.predict("lights on please")
    batch = unit_kernels.csr([np.array([0, 1]), np.array([1])], [np.array([0.6, 0.8]), np.array([1.0])],
                             np.array([0, 1]), np.array([0.5, 0.5]))
    unit_kernels.batch_loss_grad_numba(*batch, np.zeros((2, 3)), np.zeros(3), np.zeros(3), np.zeros((2, 3)))
    return {"seconds": round(time.perf_counter() - t0, 2), "cache_dir": nb_config.CACHE_DIR or None,
            "kernels": kernel_names()}


# --- disk -------------------------------------------------------------------------------------
def check_disk(s: Settings, min_free_mb: int = DEFAULT_MIN_FREE_MB,
               disk_usage: Callable[[str], Any] = shutil.disk_usage) -> Check:
    """Free space where the state lives: fail below `min_free_mb`, warn below 5x that."""
    state = s.paths.state()
    where = _existing_ancestor(state)
    try:
        free_mb = disk_usage(str(where)).free / 1e6
    except OSError as exc:
        return Check("disk", FAIL, f"cannot read free space of {where}: {exc}", "check the state directory")
    text = f"{free_mb:.0f} MB free on {where} (state dir {state})"
    clean = ("free space: `sudo journalctl --vacuum-size=50M`, `edge-plm asr list` (remove unused models), "
             "`sudo apt-get clean`")
    if free_mb < min_free_mb:
        return Check("disk", FAIL, f"{text}; need at least {min_free_mb} MB", clean)
    if free_mb < 5 * min_free_mb:
        return Check("disk", WARN, f"{text}; less than {5 * min_free_mb} MB", clean)
    return Check("disk", OK, text)


def check_mqtt(s: Settings, timeout: float = 5.0,
               importer: Callable[[str], Any] = importlib.import_module) -> Check:
    """``[mqtt]`` (only when enabled): paho installed, the broker reachable and accepting the
    credentials, within `timeout` seconds. The device works without it; Home Assistant does not
    see it."""
    m = s.mqtt
    if not m.enabled:
        return Check("mqtt", OK, "not configured ([mqtt] enabled = false)")
    try:
        importer("paho.mqtt.client")  # the bridge imports it only when it connects
        from edge_plm.bridge.mqtt import probe  # noqa: PLC0415
    except ImportError as exc:
        return Check("mqtt", FAIL, f"paho-mqtt is not installed ({exc})",
                     "pip install 'edge-plm[mqtt]' into the service's environment "
                     "(/opt/edge-plm/bin/pip install paho-mqtt)")
    ok, detail = probe(m, timeout)
    if ok:
        return Check("mqtt", OK, detail)
    return Check("mqtt", FAIL, f"{detail} (the device works offline; Home Assistant does not see it)",
                 "check [mqtt] host, port, username/password_file and tls against the broker "
                 "(mosquitto's log says why it refused)")


# --- all --------------------------------------------------------------------------------------
def run_checks(config: str | Path | None = None, *, sounddevice: Any = None,
               importer: Callable[[str], Any] = importlib.import_module,
               pin_factory: Callable[[str], tuple[Any, str]] | None = None,
               env: Mapping[str, str] | None = None, min_free_mb: int = DEFAULT_MIN_FREE_MB,
               disk_usage: Callable[[str], Any] = shutil.disk_usage) -> Report:
    """Every check, in order; an exception inside one check becomes that check's failure."""
    config_check, s = check_config(config)
    checks = [config_check]
    steps: list[tuple[str, Callable[[], Check]]] = [
        ("platform", lambda: check_platform()),
        ("microphone", lambda: check_microphone(s, sounddevice=sounddevice, importer=importer)),
        ("asr", lambda: check_asr(s, importer=importer)),
        ("kinds", lambda: check_kinds(s)),
        ("gpio", lambda: check_gpio(s, pin_factory=pin_factory)),
        ("database", lambda: check_database(s)),
        ("numba_cache", lambda: check_numba_cache(env)),
        ("disk", lambda: check_disk(s, min_free_mb=min_free_mb, disk_usage=disk_usage)),
    ]
    if s.talkback.enabled:  # talk-back off: not part of the report
        steps.insert(2, ("speech", lambda: check_speech(s, sounddevice=sounddevice, importer=importer)))
    if s.mqtt.enabled:  # the bridge off: not part of the report
        steps.append(("mqtt", lambda: check_mqtt(s, importer=importer)))
    for name, step in steps:
        try:
            checks.append(step())
        except Exception as exc:  # a bug or an odd machine: report it, keep checking
            log.debug("check %s crashed", name, exc_info=True)
            checks.append(Check(name, FAIL, f"the check itself failed: {type(exc).__name__}: {exc}",
                                "report this with the output of `edge-plm doctor`"))
    return Report(checks)


__all__ = ["Check", "Report", "OK", "WARN", "FAIL", "run_checks", "check_config", "check_microphone", "check_speech",
           "check_asr", "check_kinds", "check_gpio", "check_platform", "check_database", "check_numba_cache", "check_disk", "check_mqtt",
           "warm_numba_cache", "kernel_names"]
