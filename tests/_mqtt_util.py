"""A real MQTT broker for tests and benchmarks (Debian's ``mosquitto``) and a paho client that
plays Home Assistant. The broker listens on a free localhost port and is stopped by its PID."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

MOSQUITTO = shutil.which("mosquitto") or ("/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else None)
MOSQUITTO_PASSWD = shutil.which("mosquitto_passwd")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    """``mosquitto -c <conf>`` on 127.0.0.1:`port`; `stop` and `start` again (same port)."""

    def __init__(self, directory: Path, port: int | None = None, extra: str = "",
                 tls_port: int | None = None) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.extra = extra
        self.proc: subprocess.Popen | None = None
        self.conf = self.dir / "mosquitto.conf"
        anonymous = "" if "allow_anonymous" in extra else "allow_anonymous true\n"
        if os.geteuid() == 0:  # else mosquitto drops to its own user, who cannot read tmp files
            anonymous += "user root\n"
        self.conf.write_text(f"per_listener_settings false\nlistener {self.port} 127.0.0.1\n"
                             f"persistence false\n{anonymous}{extra}\n")

    def start(self) -> Broker:
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(self.conf)], stdout=subprocess.DEVNULL,
                                     stderr=(self.dir / "mosquitto.log").open("ab"))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mosquitto exited: {(self.dir / 'mosquitto.log').read_text()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("mosquitto did not start listening")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # this PID only
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def kill(self) -> None:
        """SIGKILL: the broker vanishes (no clean disconnect)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(5)
        self.proc = None


class HomeAssistant:
    """A paho client subscribed to everything: the last payload of every topic (retained or
    not), every message in order, and `send` for commands."""

    def __init__(self, port: int, username: str | None = None, password: str | None = None,
                 tls_ca: str | None = None) -> None:
        import paho.mqtt.client as mqtt

        self.messages: list[tuple[str, bytes, bool]] = []
        self.last: dict[str, bytes] = {}
        self._cond = threading.Condition()
        self.client = mqtt.Client(callback_api_version=mqtt.CallbackAPIVersion.VERSION2,
                                  client_id=f"ha-{port}-{time.monotonic_ns()}")
        if username:
            self.client.username_pw_set(username, password)
        if tls_ca:
            self.client.tls_set(ca_certs=tls_ca)
        self.client.on_message = self._on_message
        self.client.on_connect = lambda c, u, f, rc, p=None: c.subscribe("#", qos=1)
        self.client.connect("127.0.0.1", port, 30)
        self.client.loop_start()

    def _on_message(self, client, userdata, msg) -> None:
        with self._cond:
            self.messages.append((msg.topic, bytes(msg.payload), bool(msg.retain)))
            self.last[msg.topic] = bytes(msg.payload)
            self._cond.notify_all()

    def wait(self, predicate, timeout: float = 10.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self), timeout)

    def wait_for(self, topic: str, payload: bytes, timeout: float = 10.0) -> bool:
        return self.wait(lambda ha: ha.last.get(topic) == payload, timeout)

    def send(self, topic: str, payload: bytes | str, retain: bool = False) -> None:
        self.client.publish(topic, payload, qos=1, retain=retain).wait_for_publish(5)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def wait_until(predicate, timeout: float = 10.0, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()
