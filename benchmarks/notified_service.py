"""`edge-plm run` started the way systemd starts it: a NOTIFY_SOCKET to report to, a text source
on stdin and simulated pins. Shared by benchmarks/bench_service.py and the service tests."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CLI = [sys.executable, "-m", "edge_plm.cli"]


def text_service_config(path: Path, state: Path, extra: str = "") -> Path:
    """A config file: state in `state`, transcripts from stdin, mock pins, plus `extra` TOML."""
    path.write_text(f'[paths]\nstate_dir = "{state}"\n[audio]\nsource = "text"\n'
                    f'[gpio]\npin_factory = "mock"\n{extra}')
    return path


@contextmanager
def notified_service(config: Path, sock_path: Path, env: dict[str, str] | None = None,
                     timeout_s: float = 120.0, **popen) -> Iterator[tuple[subprocess.Popen, socket.socket]]:
    """`edge-plm run --config CONFIG` with stdin/stdout/stderr as pipes (``popen`` overrides
    them) and NOTIFY_SOCKET bound at `sock_path` (receive timeout `timeout_s`); killed on the
    way out if it still runs."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(sock_path))
    sock.settimeout(timeout_s)
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    proc = subprocess.Popen([*CLI, "run", "--config", str(config)], text=True,
                            env={**os.environ, "NOTIFY_SOCKET": str(sock_path), **(env or {})},
                            **{**pipes, **popen})
    try:
        yield proc, sock
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        sock.close()


def wait_for_interactions(db: Path, n: int, timeout_s: float) -> bool:
    """Whether the database holds at least `n` interactions within `timeout_s` seconds."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if db.exists():
            with sqlite3.connect(db) as conn:
                if conn.execute("SELECT count(*) FROM interactions").fetchone()[0] >= n:
                    return True
        time.sleep(0.2)
    return False
