"""`edge-plm run` talks to systemd: READY=1, then WATCHDOG=1 from the loop and STATUS= lines."""

from __future__ import annotations

import signal
import socket
import sys
import time
from pathlib import Path

from edge_plm.loop.service import Notifier
from kit import FakeClock

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from notified_service import notified_service, text_service_config  # noqa: E402


def _recv_all(sock: socket.socket, until: float, want) -> list[str]:
    got: list[str] = []
    while time.time() < until and not want(got):
        sock.settimeout(max(0.1, until - time.time()))
        try:
            got.append(sock.recv(4096).decode())
        except socket.timeout:
            break
    return got


def test_run_sends_watchdog_and_status_from_the_loop(tmp_path):
    config = text_service_config(tmp_path / "config.toml", tmp_path / "state")
    # WatchdogSec=2 -> a beat at least every 0.5 s
    env = {"WATCHDOG_USEC": "2000000", "OPENBLAS_NUM_THREADS": "1"}
    with notified_service(config, tmp_path / "notify.sock", env=env, cwd=ROOT) as (proc, sock):
        first = _recv_all(sock, time.time() + 120, lambda g: len(g) >= 1)
        assert first == ["READY=1"]
        proc.stdin.write("turn on the light\n")
        proc.stdin.flush()

        def enough(got: list[str]) -> bool:
            beats = sum("WATCHDOG=1" in m.split("\n") for m in got)
            return beats >= 4 and any("1 inputs handled" in m for m in got)

        t0 = time.time()
        msgs = _recv_all(sock, t0 + 60, enough)
        elapsed = time.time() - t0
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    lines = [line for m in msgs for line in m.split("\n")]
    beats = lines.count("WATCHDOG=1")
    statuses = [line for line in lines if line.startswith("STATUS=")]
    assert beats >= 4, msgs
    assert elapsed < 30 and beats / max(elapsed, 1e-9) >= 1.0  # >= 1/s, well above 1 per 0.5 s
    assert statuses and statuses[0].startswith("STATUS=listening (text)")
    assert any("1 inputs handled" in s for s in statuses), statuses
    assert proc.returncode == 0, err


class _FakeController:
    def __init__(self) -> None:
        self.handled = 0
        self.storage_failures = 0
        self.last_storage_error = None
        self.learner = type("L", (), {"version": "v0003"})()


def test_notifier_rate_and_status_changes(tmp_path, monkeypatch):
    sock_path = str(tmp_path / "n.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(1)
    monkeypatch.setenv("NOTIFY_SOCKET", sock_path)
    monkeypatch.setenv("WATCHDOG_USEC", "400000")  # 0.4 s -> a beat every 0.1 s at least
    clock = FakeClock(0.0)
    c = _FakeController()
    n = Notifier(c, "microphone", clock=clock)
    assert n.interval == 0.1
    n()
    assert sock.recv(4096).decode() == ("WATCHDOG=1\nSTATUS=listening (microphone); 0 inputs "
                                        "handled; model v0003")
    clock.set(0.05)
    n()  # nothing changed, too early for a beat: nothing sent
    clock.set(0.11)
    n()
    assert sock.recv(4096).decode() == "WATCHDOG=1"
    c.storage_failures, c.last_storage_error = 2, "database or disk is full"
    clock.set(0.12)
    n()  # the status changed: sent at once, without a beat
    assert sock.recv(4096).decode() == ("STATUS=listening (microphone); 0 inputs handled; "
                                        "model v0003; ERROR: 2 not stored (last: database or "
                                        "disk is full)")
    sock.close()
