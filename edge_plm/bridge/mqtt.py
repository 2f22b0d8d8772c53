"""The MQTT bridge: the board's relays as Home Assistant switches, its dimmers as lights
(paho-mqtt 2.x; a dimmer's brightness: `edge_plm.bridge.lights`).

Never in the way of the loop:

- **State out.** Each relay change calls the bridge's watcher (`Relay.watchers`) right after
  the pin write; the watcher only puts the state in a queue (it never touches the network). The
  bridge's own thread publishes it (retained) when connected; while the broker is away nothing
  piles up: every (re)connect publishes the discovery configs, ``online`` and every relay's
  current state again.
- **Commands in.** paho's network thread hands an ``ON`` / ``OFF`` on a device's command topic
  to that device's `PersonSwitch.remote`, the queue the switch's own gpiozero callbacks fill:
  the controller takes it at its next pump exactly as a flip of that switch (the rate limit, and
  inside an utterance's window the owner's answer, label source ``remote``). Anything else
  (another case, junk, a huge payload, an unknown device, a retained command at subscription)
  is ignored with a log line (at most one per 10 s) and changes nothing.
- **Faults.** No broker, a wrong password, bad TLS: said once in the log (and in the status
  file `edge-plm status` reads), retried with backoff (1 s doubling to 60 s); the relays, the
  switch and the learning work as without the bridge.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from edge_plm.bridge import topics as t
from edge_plm.bridge.lights import Lights
from edge_plm.bridge.status import write_status
from edge_plm.config.settings import MqttConfig

log = logging.getLogger(__name__)

BACKOFF_MIN_S, BACKOFF_MAX_S = 1, 60
WARN_EVERY_S = 10.0  # ignored commands: at most one log line this often
_ANNOUNCE, _STOP = "announce", "stop"


def read_password(cfg: MqttConfig) -> str | None:
    """The broker password: ``password``, or the first line of ``password_file``."""
    if cfg.password_file:
        with open(os.path.expanduser(cfg.password_file), encoding="utf-8") as f:
            return f.readline().rstrip("\r\n")
    return cfg.password or None


def make_client(cfg: MqttConfig, topics: t.Topics, client_id: str | None = None, will: bool = True):
    """A configured paho client (credentials, TLS, last will unless not `will`, backoff); not
    connected."""
    import paho.mqtt.client as mqtt  # noqa: PLC0415 - the optional `mqtt` extra

    client = mqtt.Client(callback_api_version=mqtt.CallbackAPIVersion.VERSION2,
                         client_id=client_id or cfg.client_id or f"edge-plm-{topics.node}-{os.getpid()}",
                         protocol=mqtt.MQTTv311, clean_session=True)
    if cfg.username:
        client.username_pw_set(cfg.username, read_password(cfg))
    if cfg.tls:
        client.tls_set(ca_certs=cfg.ca_file or None, certfile=cfg.certfile or None,
                       keyfile=cfg.keyfile or None)
    if will:
        client.will_set(topics.status, t.OFFLINE, qos=cfg.qos, retain=True)
    client.reconnect_delay_set(BACKOFF_MIN_S, BACKOFF_MAX_S)
    client.connect_timeout = 5.0
    return client


def probe(cfg: MqttConfig, timeout: float = 5.0, clear: str | None = None) -> tuple[bool, str]:
    """Connect once (no last will: the board's availability is not touched) and disconnect:
    (True, what was reached) or (False, why not). For `edge-plm doctor`; `clear`: a topic
    whose retained message is replaced by an empty one meanwhile (`clear_retained`)."""
    topics = t.Topics.of(cfg, [])
    try:
        client = make_client(cfg, topics, client_id=f"edge-plm-doctor-{os.getpid()}", will=False)
    except (OSError, ValueError) as exc:
        return False, f"cannot set up the client: {type(exc).__name__}: {exc}"
    client.connect_timeout = timeout
    answer: dict[str, Any] = {}
    done = threading.Event()

    def on_connect(c, userdata, flags, reason_code, properties=None) -> None:
        answer["code"] = reason_code
        done.set()

    client.on_connect = on_connect
    try:
        client.connect(cfg.host, cfg.port, max(5, int(timeout * 2)))
    except Exception as exc:
        return False, f"cannot connect to {cfg.host}:{cfg.port}: {type(exc).__name__}: {exc}"
    client.loop_start()
    try:
        if not done.wait(timeout):
            return False, f"{cfg.host}:{cfg.port} accepted the connection but did not answer in {timeout:g} s"
        code = answer["code"]
        if code.is_failure:
            return False, f"the broker {cfg.host}:{cfg.port} refused the connection: {code}"
        if clear is not None:
            client.publish(clear, "", qos=1, retain=True).wait_for_publish(timeout)
        return True, (f"connected to {cfg.host}:{cfg.port}{' (TLS)' if cfg.tls else ''}; "
                      f"topics under {topics.base}, discovery under {topics.prefix}")
    finally:
        client.disconnect()
        client.loop_stop()


def clear_retained(cfg: MqttConfig, topic: str, timeout: float = 5.0) -> tuple[bool, str]:
    """Replace the retained message of `topic` by an empty one (removes it)."""
    return probe(cfg, timeout, clear=topic)


class Entities:
    """The discovery config topics a node published itself, kept in a small JSON file (0600)
    beside the bridge's status file: a retained config on the node's topics that it did not
    publish (another board's, or another process' with the same node id) is never blanked."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._topics: set[str] = set()
        if path is not None:
            try:
                loaded = json.loads(path.read_text())
                self._topics = {str(x) for x in loaded.get("configs", [])}
            except FileNotFoundError:
                pass
            except (OSError, ValueError, AttributeError) as exc:
                log.warning("mqtt: %s is unreadable (%s); starting a new list of published "
                            "entities", path, exc)

    def published(self, topic: str) -> bool:
        with self._lock:
            return topic in self._topics

    def add(self, topics: Any) -> None:
        with self._lock:
            new = set(topics) - self._topics
            if new:
                self._topics |= new
                self._save()

    def drop(self, topic: str) -> None:
        with self._lock:
            if topic in self._topics:
                self._topics.discard(topic)
                self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        try:
            fd, tmp = tempfile.mkstemp(prefix=".mqtt-entities-", dir=self.path.parent)
            with os.fdopen(fd, "w") as f:
                json.dump({"configs": sorted(self._topics)}, f, sort_keys=True)
            os.replace(tmp, self.path)
        except OSError as exc:  # then this node blanks nothing it published before (safe)
            log.warning("mqtt: cannot remember the published entities in %s: %s", self.path, exc)


class MqttBridge:
    """One board's bridge: `start` it after the devices exist, `stop` it after the loop."""

    def __init__(self, cfg: MqttConfig, devices: Any, topics: t.Topics,
                 status_file: Path | None = None, client: Any = None,
                 model_version: Callable[[], str | None] | None = None,
                 undo: Callable[[], None] | None = None,
                 timers: Callable[[], dict] | None = None) -> None:
        self.cfg = cfg
        self.devices = devices
        self.topics = topics
        self.status_file = status_file
        self.model_version = model_version  # the live model's version (the sensor), if known
        self.undo = undo  # the *undo last lesson* button's action (None: no button)
        self.timers = timers  # the pending timers (the sensor's payload; None: no sensor)
        self.mac = t.mac_address()
        # the config topics this node published itself (beside the status file): only those are ever blanked
        self.entities = Entities(status_file.with_name(status_file.name.replace(
            ".mqtt.json", ".mqtt-entities.json")) if status_file else None)
        self._asks: tuple[str, int] = ("", 0)  # (local date, asks that day since the start)
        self._version_sent: str | None = None
        self.client = client if client is not None else make_client(cfg, topics)
        c = self.client
        c.on_connect, c.on_disconnect, c.on_message = self._on_connect, self._on_disconnect, self._on_message
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._stopping = threading.Event()
        self._connected = threading.Event()
        self._looping = False
        self._thread = threading.Thread(target=self._run, name="edge-plm-mqtt", daemon=True)
        self._watchers: dict[str, Any] = {}
        self._problem: str | None = None
        self._ignored = 0
        self._warned_at = -float("inf")
        self.published = 0  # messages handed to paho (tests, benchmarks)
        self.commands = 0  # commands handed to the loop
        self.announced = 0  # discovery + state rounds published (one per connection)
        self.last_state: dict[str, tuple[str, float]] = {}  # device id -> (payload, perf time)
        self.lights = Lights(devices, topics, self._outbox.put, self._ignore)  # the dimmers

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    # --- life ------------------------------------------------------------------------------
    def start(self) -> MqttBridge:
        for device_id, name in self.topics.devices.items():
            watcher = self._watcher(device_id)
            self._watchers[name] = watcher
            self.devices.relays[name].watchers.append(watcher)
        self.lights.watch()
        self._report(False, None)
        self._thread.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        """``offline`` (retained), then disconnect; the relays are no longer watched."""
        for name, watcher in self._watchers.items():
            try:
                self.devices.relays[name].watchers.remove(watcher)
            except ValueError:
                pass
        self.lights.unwatch()
        self._stopping.set()
        self._outbox.put((_STOP,))
        self._thread.join(timeout)
        if self._connected.is_set():
            try:
                self.client.publish(self.topics.status, t.OFFLINE, qos=self.cfg.qos,
                                    retain=True).wait_for_publish(timeout)
            except Exception as exc:  # the broker went away meanwhile: the will says it
                log.debug("mqtt: offline not published: %s", exc)
        try:
            self.client.disconnect()
        finally:
            if self._looping:
                self.client.loop_stop()
        self._report(False, self._problem)
        log.info("mqtt: bridge stopped")

    def wait_connected(self, timeout: float) -> bool:
        return self._connected.wait(timeout)

    # --- the bridge's thread -------------------------------------------------------------
    def _run(self) -> None:
        if not self._connect_first():
            return
        while True:
            item = self._outbox.get()
            if item[0] == _STOP:
                return
            try:
                self._handle(item)
            except Exception:  # one failing publish must not end the bridge
                log.exception("mqtt: could not publish %s", item[0])

    def _connect_first(self) -> bool:
        """Connect (retried with backoff, each new reason logged once); then paho's network
        thread takes over, reconnecting by itself. False when stopped first."""
        delay = BACKOFF_MIN_S
        while not self._stopping.is_set():
            try:
                self.client.connect(self.cfg.host, self.cfg.port, self.cfg.keepalive_s)
            except Exception as exc:  # refused, unresolvable, TLS: the device works offline
                self._trouble(f"cannot connect to {self.cfg.host}:{self.cfg.port}: "
                              f"{type(exc).__name__}: {exc}; retrying (every {BACKOFF_MAX_S} s at most)")
                self._stopping.wait(delay)
                delay = min(delay * 2, BACKOFF_MAX_S)
                continue
            if self._stopping.is_set():  # stopped while connecting
                self.client.disconnect()
                return False
            self.client.loop_start()
            self._looping = True
            return True
        return False

    def _handle(self, item: tuple) -> None:
        if item[0] == _ANNOUNCE:
            self._announce()
        elif item[0] == "undo" and self.undo is not None:
            log.info("mqtt: undo last lesson pressed")
            self.undo()
        elif item[0] == "birth" and self._connected.is_set():
            log.info("mqtt: Home Assistant came online; publishing the discovery configs again")
            self._announce_configs()
            self._announce()
        elif item[0] == "state" and self._connected.is_set():
            self._publish(self.topics.state(item[1]), t.state_payload(item[2]))
            self.last_state[item[1]] = (t.state_payload(item[2]), time.perf_counter())
            self._publish_timers()  # a due timer may have switched it
        elif item[0] == "brightness" and self._connected.is_set():
            message = self.lights.state(item[1], item[2])
            if message is not None:
                self._publish(*message)
        elif item[0] == "clear" and self._connected.is_set():
            log.info("mqtt: removing the entity of a device no longer configured (%s)", item[1])
            self._publish(item[1], "")
            self.entities.drop(item[1])
        elif item[0] == "decision" and self._connected.is_set():
            self._publish(self.topics.decision, item[1])
            self._publish_sensors()

    def _publish(self, topic: str, payload: str, retain: bool = True) -> None:
        self.client.publish(topic, payload, qos=self.cfg.qos, retain=retain)
        self.published += 1

    def _announce_configs(self) -> None:
        """Discovery configs and ``online`` (every connect, and Home Assistant's birth);
        every config topic published is remembered as this node's own (`Entities`)."""
        tp = self.topics
        configs = {tp.config(d): tp.discovery(d, self.cfg.qos, self.mac) for d in tp.devices}
        configs.update(tp.sensors(self.cfg.qos, self.mac))
        if self.undo is not None:
            configs[tp.undo_config] = tp.undo_discovery(self.cfg.qos, self.mac)
        if self.timers is not None:
            configs[tp.sensor_config("timers_pending")] = tp.timers_discovery(self.cfg.qos, self.mac)
        self.entities.add(configs)
        for topic, config in configs.items():
            self._publish(topic, t.discovery_payload(config))
        self._publish(tp.status, t.ONLINE)

    def _announce(self) -> None:
        """Every relay's current state and the sensors' values (after `_announce_configs`)."""
        tp = self.topics
        self._version_sent = None
        self._publish_sensors()
        for device_id, name in tp.devices.items():
            on = self.devices.relays[name].is_on
            self._publish(tp.state(device_id), t.state_payload(on))
            self.last_state[device_id] = (t.state_payload(on), time.perf_counter())
        for topic, payload in self.lights.states():
            self._publish(topic, payload)
        self.announced += 1

    def _publish_sensors(self) -> None:
        """The model version (when it changed) and the asks of today."""
        version = self.model_version() if self.model_version is not None else None
        if version and version != self._version_sent:
            self._publish(self.topics.model_version, version)
            self._version_sent = version
        self._publish(self.topics.asks, str(self._asks_today()))
        self._publish_timers()

    def _publish_timers(self) -> None:
        """The pending timers (timed commands), when the loop gave them."""
        if self.timers is not None:
            self._publish(self.topics.timers, json.dumps(self.timers()))

    def _asks_today(self, ask: bool = False) -> int:
        today = time.strftime("%Y-%m-%d")
        day, n = self._asks
        n = (n if day == today else 0) + int(ask)
        self._asks = (today, n)
        return n

    def _watcher(self, device_id: str):
        def watch(on: bool) -> None:  # on the thread that switched the relay: never blocks
            self._outbox.put(("state", device_id, bool(on)))
        return watch

    def on_outcome(self, outcome: t.LoopOutcome) -> None:
        """An utterance's outcome (`Controller.watchers`): the last-decision sensor's payload
        (the transcript only with ``publish_transcripts``), queued; never blocks."""
        if outcome.decision is None:  # an input error, an answer, the device's own voice
            return
        self._asks_today(ask=outcome.decision.value == "ask")
        decision = {"decision": outcome.decision.value, "prediction": outcome.prediction,
                    "confidence": None if outcome.confidence is None else round(outcome.confidence, 3),
                    "action": outcome.action.value if outcome.action else None,
                    "interaction": outcome.interaction_id, "transcript": outcome.transcript,
                    "ts": round(time.time(), 3)}
        self._outbox.put(("decision", t.decision_payload(decision, self.cfg.publish_transcripts)))

    # --- paho's network thread -----------------------------------------------------------
    def _on_connect(self, client, userdata, flags, reason_code, properties=None) -> None:
        if reason_code.is_failure:
            self._trouble(f"broker {self.cfg.host}:{self.cfg.port} refused the connection: "
                          f"{reason_code}; retrying")
            return
        client.subscribe([(self.topics.commands, self.cfg.qos), (self.topics.configs, self.cfg.qos),
                          (self.topics.light_configs, self.cfg.qos),
                          (self.topics.brightness_commands, self.cfg.qos),
                          (self.topics.hub_status, self.cfg.qos)]
                         + ([(self.topics.undo_press, self.cfg.qos)] if self.undo else []))
        self._connected.set()
        log.info("mqtt: connected to %s:%d as %s (%d device(s))", self.cfg.host, self.cfg.port,
                 self.topics.base, len(self.topics.devices))
        self._problem = None
        self._report(True, None)
        # configs and ``online`` first, here on paho's thread: paho sends them before any
        # message it kept from before the outage (it re-sends those after this callback)
        self._announce_configs()
        self._outbox.put((_ANNOUNCE,))

    def _on_disconnect(self, client, userdata, flags, reason_code, properties=None) -> None:
        was = self._connected.is_set()
        self._connected.clear()
        if was and not self._stopping.is_set():
            self._trouble(f"lost the broker {self.cfg.host}:{self.cfg.port} ({reason_code}); "
                          "reconnecting; the device works on")

    def _on_message(self, client, userdata, msg) -> None:
        try:
            self._message(msg.topic, bytes(msg.payload), bool(msg.retain))
        except Exception:  # whatever arrives, the network thread goes on
            log.exception("mqtt: message on %r could not be handled", msg.topic)

    def _message(self, topic: str, payload: bytes, retained: bool) -> None:
        if topic == self.topics.hub_status:  # Home Assistant's birth: it lost what it knew
            if payload == t.ONLINE.encode():
                self._outbox.put(("birth",))
            return
        if topic == self.topics.undo_press and self.undo is not None:
            if retained or payload != t.PRESS.encode():
                return self._ignore(topic, payload, 'a retained press, or not "PRESS"')
            self._outbox.put(("undo",))
            return
        config_of = self.topics.config_device(topic)
        if config_of is not None:
            # only an entity this node published itself is removed (never another node's); a
            # device now of the other kind (relay <-> dimmer) loses its old entity
            current = config_of in self.topics.devices and topic == self.topics.config(config_of)
            if retained and payload and not current and self.entities.published(topic):
                self._outbox.put(("clear", topic))
            return
        light_of = self.topics.brightness_device(topic)
        if light_of is not None:
            return self.lights.command(topic, light_of, payload, retained)
        device_id = self.topics.command_device(topic)
        if device_id is None:
            return self._ignore(topic, payload, "not a command topic of this board")
        if retained:
            return self._ignore(topic, payload, "a retained command (stale; commands are not retained)")
        if device_id not in self.topics.devices:
            return self._ignore(topic, payload, "no such device")
        state = t.command_state(payload)
        if state is None:
            return self._ignore(topic, payload, 'not "ON" or "OFF"')
        self.commands += 1
        self.devices.switches[self.topics.devices[device_id]].remote(state)

    def _ignore(self, topic: str, payload: bytes, why: str) -> None:
        self._ignored += 1
        now = time.monotonic()
        if now - self._warned_at >= WARN_EVERY_S:
            self._warned_at = now
            log.warning("mqtt: ignored %s on %r: %s (%d ignored so far)", t.shown(payload), topic,
                        why, self._ignored)

    # --- reporting ---------------------------------------------------------------------
    def _trouble(self, problem: str) -> None:
        """A connection problem: logged when it is new, and reported."""
        if problem != self._problem:
            log.warning("mqtt: %s", problem)
            self._problem = problem
            self._report(False, problem)

    def _report(self, connected: bool, problem: str | None) -> None:
        write_status(self.status_file, connected=connected, last_error=problem,
                     broker=f"{self.cfg.host}:{self.cfg.port}", base=self.topics.base)


__all__ = ["Entities", "MqttBridge", "clear_retained", "make_client", "probe", "read_password"]
