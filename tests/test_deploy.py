"""Deployment: the systemd unit, the shell scripts, and install.sh (dry run and a real install
into a throwaway root with --prefix). Tools missing on the machine skip their test with the
reason; CI installs them (scripts/setup-dev.sh: systemd, shellcheck)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from edge_plm.commands import doctor

from edge_plm.config import settings

ROOT = Path(__file__).resolve().parent.parent
UNIT = ROOT / "deploy" / "edge-plm.service"
INSTALL = ROOT / "firmware_scripts" / "install.sh"
SERVICE_PY = ROOT / "edge_plm" / "loop" / "service.py"
SCRIPTS = sorted([*ROOT.glob("firmware_scripts/*.sh"), *ROOT.glob("scripts/*.sh")])


def unit_settings() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";", "[")) and "=" in line:
            key, value = line.split("=", 1)
            out.setdefault(key, []).append(value)
    return out


# --- the unit ------------------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze not installed (Debian package systemd)")
def test_systemd_analyze_verify_accepts_the_unit(tmp_path):
    # verify insists that ExecStart's binary exists; /opt/edge-plm is not installed here, so a
    # copy of the unit points at a stand-in executable (everything else is verified as is)
    fake = tmp_path / "edge-plm"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    text = UNIT.read_text()
    assert "ExecStart=/opt/edge-plm/bin/edge-plm run\n" in text
    copy = tmp_path / "edge-plm.service"
    copy.write_text(text.replace("/opt/edge-plm/bin/edge-plm run", f"{fake} run"))
    r = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True, text=True,
                       env={**os.environ, "SYSTEMD_LOG_LEVEL": "notice"})
    complaints = [line for line in (r.stdout + r.stderr).splitlines() if "edge-plm.service" in line]
    assert r.returncode == 0 and not complaints, r.stdout + r.stderr


def test_unit_hardening_and_service_contract():
    u = unit_settings()
    one = {k: v[-1] for k, v in u.items()}
    assert one["ExecStart"] == "/opt/edge-plm/bin/edge-plm run"
    assert one["User"] == "edge-plm" and set(one["SupplementaryGroups"].split()) == {"gpio", "audio"}
    assert one["Restart"] == "on-failure" and "RestartSec" in one
    assert one["StateDirectory"] == "edge-plm" and one["StateDirectoryMode"] == "0700"
    assert one["ConfigurationDirectory"] == "edge-plm" and one["UMask"] == "0077"
    for key, value in {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
                       "PrivateTmp": "yes", "RestrictAddressFamilies": "AF_UNIX",
                       "DevicePolicy": "closed", "ProtectKernelTunables": "yes",
                       "ProtectControlGroups": "yes", "RestrictRealtime": "yes",
                       "LockPersonality": "yes", "SystemCallArchitectures": "native",
                       "KillSignal": "SIGTERM"}.items():
        assert one.get(key) == value, key
    assert "TimeoutStopSec" in one
    allowed = " ".join(u["DeviceAllow"])
    assert "char-alsa" in allowed and "char-gpiochip" in allowed and "gpiomem" in allowed
    # off until tried on a board (the service runs no Numba kernel since issue 27), and it says why
    assert "MemoryDenyWriteExecute" not in u
    assert "MemoryDenyWriteExecute=yes is NOT set" in UNIT.read_text()
    assert "NUMBA_CACHE_DIR=%S/edge-plm/numba-cache" in u["Environment"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze not installed (Debian package systemd)")
def test_unit_exposure_is_at_most_one():
    """`systemd-analyze security` rates the unit as it stands (offline: no systemd needed)."""
    r = subprocess.run(["systemd-analyze", "security", "--offline=yes", str(UNIT)],
                       capture_output=True, text=True, timeout=60)
    found = re.search(r"Overall exposure level for edge-plm.service: ([0-9.]+)", r.stdout)
    assert found, r.stdout + r.stderr
    assert float(found.group(1)) <= 1.0
    listed = {line.split()[1].split("=")[0] for line in r.stdout.splitlines() if line.startswith("✗")}
    assert not listed & {"ProcSubset", "PrivateMounts", "SystemCallFilter"}, listed


def test_unit_filters_and_proc_and_the_warm_up_compile_for_the_same_cpu():
    u = unit_settings()
    assert u["SystemCallFilter"] == ["@system-service", "~@privileged @resources"]
    one = {k: v[-1] for k, v in u.items()}
    assert one["ProcSubset"] == "pid" and one["ProtectProc"] == "invisible" and one["PrivateMounts"] == "yes"
    # ProcSubset=pid hides /proc/cpuinfo: the service and install.sh's warm-up both pin the CPU
    assert "NUMBA_CPU_NAME=generic" in u["Environment"]
    install = INSTALL.read_text()
    assert install.count("NUMBA_CACHE_DIR=") == install.count("NUMBA_CPU_NAME=generic") >= 1


def test_unit_type_and_watchdog_match_what_run_sends():
    """Type=notify only if `edge-plm run` sends READY=1; WatchdogSec only if it sends WATCHDOG=1."""
    source = SERVICE_PY.read_text() if SERVICE_PY.exists() else ""
    one = {k: v[-1] for k, v in unit_settings().items()}
    assert one["Type"] == ("notify" if "READY=1" in source else "simple")
    assert ("WatchdogSec" in one) == ("WATCHDOG=1" in source)


# --- scripts -------------------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed (apt-get install shellcheck)")
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_shellcheck_clean(script):
    r = subprocess.run(["shellcheck", "-S", "warning", str(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_scripts_are_executable_and_have_help():
    for script in ROOT.glob("firmware_scripts/*.sh"):
        assert script.stat().st_mode & stat.S_IXUSR, script
        r = subprocess.run(["bash", str(script), "--help"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and "Usage:" in r.stdout, (script, r.stdout, r.stderr)


def test_gpio_test_on_mock_pins(tmp_path):
    empty = tmp_path / "config.toml"  # the built-in defaults (a missing file is an error)
    empty.write_text("")
    r = subprocess.run(["bash", str(ROOT / "firmware_scripts" / "gpio-test.sh"), "-n", "2", "--interval", "0",
                        "--watch", "0", "--python", sys.executable, "--force"],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "EDGE_PLM_CONFIG": str(empty)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "click 2: OFF" in r.stdout and "result: 2 relay click(s)" in r.stdout


# --- install.sh ----------------------------------------------------------------------------------
def this_interpreters_env() -> dict[str, str]:
    """The environment with this interpreter's own site-packages on PYTHONPATH.

    The --no-deps install makes its venv from ``sys.executable`` with --system-site-packages.
    When ``sys.executable`` is itself a venv (CI's .venv), that sees the *base* interpreter's
    site-packages, which on a fresh machine hold only pip (no wheel, an old setuptools, no
    numpy), not the packages this test runs with. PYTHONPATH hands the throwaway venv exactly
    the packages of the interpreter that runs the tests, whatever the base Python has."""
    paths = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    extra = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, *([extra] if extra else [])])}


def run_install(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(INSTALL), *args], capture_output=True, text=True, timeout=timeout,
                          cwd="/", env=this_interpreters_env())


def test_install_dry_run_lists_every_step_and_changes_nothing():
    existed = {p: p.exists() for p in (Path("/opt/edge-plm"), Path("/etc/systemd/system/edge-plm.service"))}
    r = run_install("--dry-run")
    assert r.returncode == 0, r.stdout + r.stderr
    steps = re.findall(r"^\[\d+\] (.+)$", r.stdout, flags=re.M)
    joined = "\n".join(steps)
    for expected in ("Debian packages", "gpio group", "service user edge-plm", "directories",
                     "virtualenv /opt/edge-plm", "config /etc/edge-plm/config.toml", "Vosk model",
                     "Numba cache warm-up", "systemd unit", "doctor"):
        assert expected in joined, (expected, steps)
    assert "nothing was changed" in r.stdout
    assert {p: p.exists() for p in existed} == existed


def test_install_rejects_bad_arguments(tmp_path):
    assert run_install("--prefix", "relative/dir").returncode == 1
    assert run_install("--prefix", str(tmp_path), "--vosk-model", "/nonexistent.zip",
                       "--vosk-sha256", "0" * 64).returncode == 1
    assert run_install("--prefix", str(tmp_path), "--bogus").returncode == 1
    assert not (tmp_path / "opt").exists()


def fake_arch_bin(directory: Path, machine: str, dpkg_arch: str | None) -> Path:
    """A PATH directory whose `uname -m` says `machine` and whose `dpkg --print-architecture`
    says `dpkg_arch` (fails, printing nothing, when None: a system whose dpkg cannot tell);
    every other call goes to the real tools."""
    directory.mkdir()
    real_uname = shutil.which("uname")
    (directory / "uname").write_text(
        f'#!/bin/sh\nif [ "$1" = -m ]; then echo {machine}; else exec {real_uname} "$@"; fi\n')
    answer = "exit 1" if dpkg_arch is None else f"echo {dpkg_arch}"
    real_dpkg = shutil.which("dpkg") or "false"
    (directory / "dpkg").write_text(
        f'#!/bin/sh\nif [ "$1" = --print-architecture ]; then {answer}; '
        f'else exec {real_dpkg} "$@"; fi\n')
    for tool in directory.iterdir():
        tool.chmod(0o755)
    return directory


@pytest.mark.parametrize("machine, dpkg_arch", [("armv7l", "armhf"), ("aarch64", "armhf"),
                                                ("armv7l", None), ("armv6l", "armhf")])
def test_install_stops_at_once_on_a_32_bit_userland(tmp_path, machine, dpkg_arch):
    """32-bit Raspberry Pi OS (armhf), also on a Pi 4 whose 64-bit kernel says aarch64."""
    fake = fake_arch_bin(tmp_path / "bin", machine, dpkg_arch)
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    r = subprocess.run(["bash", str(INSTALL), "--prefix", str(tmp_path / "root"), "--dry-run"],
                       capture_output=True, text=True, timeout=60, cwd="/", env=env)
    assert r.returncode == 1 and r.stdout == ""  # before the first step
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"install.sh: error: 32-bit system (uname -m: {machine}")
    assert "64-bit Raspberry Pi OS or Armbian/Debian arm64 is required" in line
    assert ("dpkg:" in line) == (dpkg_arch is not None) and (dpkg_arch or "") in line
    assert not (tmp_path / "root").exists()


@pytest.mark.parametrize("machine, dpkg_arch", [("aarch64", "arm64"), ("aarch64", None),
                                                ("x86_64", "amd64")])
def test_install_goes_on_on_a_64_bit_userland(tmp_path, machine, dpkg_arch):
    fake = fake_arch_bin(tmp_path / "bin", machine, dpkg_arch)
    env = {**this_interpreters_env(), "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    r = subprocess.run(["bash", str(INSTALL), "--prefix", str(tmp_path / "root"), "--dry-run",
                        "--python", sys.executable], capture_output=True, text=True, timeout=300,
                       cwd="/", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "32-bit" not in r.stderr and f", {machine}" in r.stdout  # preflight's system line


def fake_vosk_zip(path: Path, name: str = "vosk-model-small-en-us-test") -> str:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{name}/am/final.mdl", b"acoustic model")
        zf.writestr(f"{name}/conf/model.conf", "--sample-frequency=16000\n")
        zf.writestr(f"{name}/graph/phones.txt", "SIL 1\n")
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def prefix_install(tmp_path_factory):
    """A real install into a throwaway root. The venv sees this interpreter's packages and pip
    installs only edge-plm itself (--no-deps: no downloads); everything else is the real path,
    including the Numba warm-up (tens of seconds)."""
    root = tmp_path_factory.mktemp("root")
    model_zip = tmp_path_factory.mktemp("dl") / "vosk-model-small-en-us-test.zip"
    sha = fake_vosk_zip(model_zip)
    args = ("--prefix", str(root), "--python", sys.executable, "--no-deps",
            "--vosk-model", str(model_zip), "--vosk-sha256", sha)
    first = run_install(*args)
    assert first.returncode == 0, first.stdout + first.stderr
    return root, args, first


def test_prefix_install_layout(prefix_install):
    root, _, first = prefix_install
    venv, state, etc = root / "opt/edge-plm", root / "var/lib/edge-plm", root / "etc/edge-plm"
    r = subprocess.run([str(venv / "bin/python"), "-c", "import edge_plm; print(edge_plm.__file__)"],
                       capture_output=True, text=True, cwd="/", env=this_interpreters_env())
    assert r.stdout.strip().startswith(str(venv)), r.stdout + r.stderr  # the installed copy
    assert (venv / "bin/edge-plm").exists()
    # the shipped starting model (model.start = "switch-en") is installed with the package
    r = subprocess.run([str(venv / "bin/python"), "-c", "from edge_plm.config.starting_model import resolve; "
                        "print(resolve('switch-en'))"], capture_output=True, text=True, cwd="/",
                       env=this_interpreters_env())
    installed = Path(r.stdout.strip())
    assert str(installed).startswith(str(venv)), r.stdout + r.stderr
    assert installed.read_bytes() == (Path(__file__).resolve().parents[1] / "models/switch-en.npz").read_bytes()
    for helper in ("mic-test.sh", "gpio-test.sh"):
        assert os.access(venv / "share/edge-plm" / helper, os.X_OK)
    for d in (state, state / "numba-cache", state / "models"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    assert (root / "etc/systemd/system/edge-plm.service").read_text() == UNIT.read_text()
    assert 'GROUP="gpio"' in (root / "etc/udev/rules.d/99-edge-plm-gpio.rules").read_text()
    s = settings.load(etc / "config.toml")
    assert s.paths.state() == state and s.gpio.relay_pin == 17
    assert (state / "models/vosk-model-small-en-us-test/am/final.mdl").exists()
    # one index file per cached kernel the device runs (doctor.kernel_names)
    for name in doctor.kernel_names():
        assert len(list((state / "numba-cache").rglob(doctor.kernel_index_glob(name)))) == 1, name
    assert "systemctl (--prefix)" in first.stdout and "useradd (--prefix)" in first.stdout


def test_prefix_install_doctor_sees_the_installation(prefix_install):
    root, _, _ = prefix_install
    state = root / "var/lib/edge-plm"
    r = subprocess.run([str(root / "opt/edge-plm/bin/edge-plm"), "doctor", "--json", "--config",
                        str(root / "etc/edge-plm/config.toml"), "--min-free-mb", "1"],
                       capture_output=True, text=True, cwd="/",
                       env={**this_interpreters_env(), "NUMBA_CACHE_DIR": str(state / "numba-cache")})
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["config"]["status"] == "ok"
    assert checks["numba_cache"]["status"] == "ok", checks["numba_cache"]
    assert checks["database"]["status"] == "ok"
    assert checks["asr"]["status"] == "ok" and "vosk-model-small-en-us-test" in checks["asr"]["detail"]


def test_prefix_install_is_idempotent_and_keeps_the_config(prefix_install):
    root, args, _ = prefix_install
    config = root / "etc/edge-plm/config.toml"
    config.write_text(config.read_text() + "\n# my own edit\n")
    again = run_install(*args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "nothing changed" in again.stdout, again.stdout
    assert not re.search(r"^\s+doing:", again.stdout, flags=re.M), again.stdout
    assert config.read_text().endswith("# my own edit\n")


def test_prefix_install_adds_paho_when_mqtt_is_on(prefix_install):
    """Issue 47, item 5: with ``[mqtt] enabled = true`` in the config, install.sh makes sure
    paho-mqtt is importable in the venv (installs it, or says it is there)."""
    root, args, _ = prefix_install
    config = root / "etc/edge-plm/config.toml"
    kept = config.read_text()
    try:
        assert kept.count("\n[mqtt]\n") == 1  # the table of the defaults, its keys commented
        config.write_text(kept.replace("\n[mqtt]\n", "\n[mqtt]\nenabled = true\n"))
        again = run_install(*args)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "paho-mqtt is importable ([mqtt] is enabled" in again.stdout, again.stdout
    finally:
        config.write_text(kept)
    off = run_install("--dry-run", *args)
    assert "paho-mqtt" not in off.stdout


def test_prefix_uninstall_keeps_data_then_purge(prefix_install):
    root, _, _ = prefix_install
    state, etc = root / "var/lib/edge-plm", root / "etc/edge-plm"
    r = run_install("--uninstall", "--prefix", str(root))
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (root / "opt/edge-plm").exists()
    assert not (root / "etc/systemd/system/edge-plm.service").exists()
    assert not (root / "etc/udev/rules.d/99-edge-plm-gpio.rules").exists()
    assert (etc / "config.toml").exists() and (state / "models").exists()
    again = run_install("--uninstall", "--prefix", str(root))
    assert again.returncode == 0 and "nothing changed" in again.stdout
    purge = run_install("--uninstall", "--purge", "--prefix", str(root))
    assert purge.returncode == 0 and not state.exists() and not etc.exists()

