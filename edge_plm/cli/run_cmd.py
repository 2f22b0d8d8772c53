"""`edge-plm run` (the service), `edge-plm replay` (docs/design.md §4) and `edge-plm demo`.

Thin commands: everything they do is in `edge_plm.controller` and `edge_plm.learner`.
Logs go to stdout for `run` (journald) and to stderr for `replay`/`demo`, so that
``replay --json`` prints exactly one JSON object on stdout.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import typer

from edge_plm.cli import app

log = logging.getLogger("edge_plm.cli.run")

DEMO_SESSION = Path(__file__).resolve().parent.parent / "data" / "demo" / "session.jsonl"


def sd_notify(message: str) -> bool:
    """Send `message` (e.g. ``READY=1``) to systemd's $NOTIFY_SOCKET; False if not set."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):  # abstract namespace socket
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(message.encode())
    except OSError as exc:
        log.error("sd_notify(%s) to %s failed: %s", message, os.environ["NOTIFY_SOCKET"], exc)
        return False
    return True


class Notifier:
    """systemd's watchdog and status line for the loop (called on every turn of it).

    ``WATCHDOG=1`` at least every ``WatchdogSec/4`` (systemd sets $WATCHDOG_USEC; at most once a
    second when it is not set), and ``STATUS=`` whenever the status line changes: what the loop
    listens to, how many inputs it handled, the model version, and storage failures (disk full,
    read-only database) when there are any. Called from the pump thread (every 100 ms) and after
    every input, so a loop stuck in one input (which holds the lock the pump needs) stops the
    heartbeat and systemd restarts the service.
    """

    def __init__(self, controller, source_name: str, clock=time.monotonic) -> None:
        self.controller = controller
        self.source_name = source_name
        self._clock = clock
        self._lock = threading.Lock()
        usec = os.environ.get("WATCHDOG_USEC", "")
        watchdog_s = int(usec) / 1e6 if usec.isdigit() and int(usec) > 0 else None
        self.interval = min(1.0, watchdog_s / 4) if watchdog_s else 1.0
        self._last_beat = -float("inf")
        self._last_status: str | None = None
        self._broken = False

    def status(self) -> str:
        c = self.controller
        text = (f"listening ({self.source_name}); {c.handled} inputs handled; model "
                f"{c.learner.version or 'empty'}")
        if c.storage_failures:
            text += f"; ERROR: {c.storage_failures} not stored (last: {c.last_storage_error})"
        return " ".join(text.split())

    def __call__(self) -> None:
        with self._lock:
            now = self._clock()
            status = self.status()
            parts = []
            if now - self._last_beat >= self.interval:
                parts.append("WATCHDOG=1")
                self._last_beat = now
            if status != self._last_status:
                parts.append(f"STATUS={status}")
                self._last_status = status
            if parts and not self._broken and not sd_notify("\n".join(parts)):
                self._broken = bool(os.environ.get("NOTIFY_SOCKET"))  # logged once, not per beat


def _logging(stream, level: int = logging.INFO) -> None:
    from edge_plm.cli import OneLineFormatter  # noqa: PLC0415

    handler = logging.StreamHandler(stream)
    handler.setFormatter(OneLineFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, force=True, handlers=[handler])


# --- run ------------------------------------------------------------------------------------
@app.command("run")
def run_command(
    config: Path = typer.Option(None, "--config", help="TOML config (default: the usual lookup)."),
) -> None:
    """The service: microphone + GPIO from the config, until SIGTERM/SIGINT."""
    _logging(sys.stdout)
    from edge_plm.controller import Controller
    from edge_plm.device import Devices, PinFactoryError
    from edge_plm.learner import Learner, LearnerConfig
    from edge_plm.plm.checkpoint import CheckpointError
    from edge_plm.settings import load
    from edge_plm.starting_model import StartError
    from edge_plm.store import ReplayStore, StorageError, private_dir
    from edge_plm.voice.asr import AsrError, make_asr
    from edge_plm.voice.audio import AudioError, MicrophoneSource, TextSource
    from edge_plm.voice.endpoint import Endpointer

    settings = load(config)  # a ConfigError is `error: configuration: ...`, exit 2 (cli.main)
    log.info("configuration: %s", settings.source)
    stop = threading.Event()
    source = None

    def on_signal(signum: int, frame: object) -> None:
        log.info("signal %s: stopping", signal.Signals(signum).name)
        stop.set()
        if source is not None and hasattr(source, "close"):
            source.close()  # the microphone loop ends at its next block
        else:
            raise SystemExit(0)  # a blocking stdin read cannot be woken: unwind (finally runs)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    store = ReplayStore(settings.paths.database_path())
    controller = None
    try:
        learner = Learner.open(store, LearnerConfig.from_settings(settings.model),
                               private_dir(settings.paths.checkpoints_path()))
        if settings.audio.source == "text":
            asr = None
            source = TextSource(sys.stdin)
        elif settings.audio.source == "microphone":
            asr = make_asr(settings.asr, settings.paths.models_path())
            source = MicrophoneSource(settings.audio.device, settings.audio.sample_rate,
                                      settings.audio.block_ms,
                                      Endpointer.from_config(settings.audio))
            source.open()
        else:
            log.error("audio.source = 'wav' is for replays: use `edge-plm replay`")
            raise typer.Exit(2)
        devices = Devices.from_config(settings.gpio, mock_fallback=False)
        controller = Controller(settings, store, learner, devices, asr)
        sd_notify("READY=1")
        notifier = Notifier(controller, settings.audio.source)
        notifier()
        log.info("ready: listening (%s source, model version %s)", settings.audio.source,
                 learner.version or "empty")
        while not stop.is_set():
            try:
                controller.run(source, stop, heartbeat=notifier)
                if settings.audio.source == "text":
                    break  # stdin ended
            except AudioError as exc:  # the microphone failed: say so, retry
                log.error("audio input failed: %s; retrying in 5 s", exc)
                stop.wait(5.0)
                notifier()
    except (AsrError, AudioError, PinFactoryError, StartError, CheckpointError) as exc:
        log.error("cannot start: %s", exc)
        typer.echo(f"error: cannot start: {exc}", err=True)
        raise typer.Exit(1)
    finally:
        sd_notify("STOPPING=1")
        if controller is not None:
            controller.stop()
        store.close()
    if controller is not None and controller.storage_failures:
        # the loop kept the switch working, but must not end as if all was stored
        raise StorageError(f"{controller.storage_failures} interaction(s) or label(s) of "
                           f"{controller.handled} input(s) could not be stored (last: "
                           f"{controller.last_storage_error})")


# --- replay and demo ------------------------------------------------------------------------
START_HELP = ('Where the model starts: "switch-en" (the shipped English starting model), "empty", '
              "or a checkpoint path (default: model.start of the settings, switch-en).")


def _replay_settings(start: str | None):
    """Built-in settings (a replay does not read the config file) with ``model.start``."""
    from dataclasses import replace

    from edge_plm.settings import ConfigError, Settings, validate

    s = Settings()
    if start is not None:
        s = replace(s, model=replace(s.model, start=start))
    try:
        validate(s)
        from edge_plm.starting_model import resolve

        resolve(s.model.start)
    except (ConfigError, LookupError) as exc:
        typer.echo(f"error: --start: {exc}", err=True)
        raise typer.Exit(2)
    return s


def _replay(lines, db: Path | None, seed: int, rounds: int = 1, progress=None, settings=None):
    from edge_plm.replay import build_replay, replay_asr, run_session
    from edge_plm.plm.checkpoint import CheckpointError
    from edge_plm.settings import Settings

    from edge_plm.store import StorageError

    try:
        replay = build_replay(settings or Settings(), db, seed=seed, asr=replay_asr(lines))
    except (CheckpointError, LookupError) as exc:  # LookupError: StartError (model.start)
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    try:
        result = run_session(lines * rounds, replay.controller, replay.clock,
                             endpointer=replay.endpointer, progress=progress)
        replay.controller.stop()  # saves the labels learned since the last version
        versions = replay.store.model_versions()
    finally:
        replay.close()
    if replay.controller.storage_failures:  # closing resolved a window it could not store
        raise StorageError(f"replay: {replay.controller.last_storage_error}")
    return result, versions


@app.command("replay")
def replay_command(
    session: Path = typer.Argument(..., help="JSONL: {'text'|'audio', 'label'} per line."),
    db: Path = typer.Option(None, "--db", help="Replay buffer to write (default: a temp file)."),
    seed: int = typer.Option(0, "--seed", help="Model seed."),
    start: str = typer.Option(None, "--start", help=START_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object on stdout."),
) -> None:
    """Run a logged session through the real loop with a simulated person (mock GPIO)."""
    _logging(sys.stderr, logging.WARNING)
    from edge_plm.replay import SessionError, read_session

    settings = _replay_settings(start)
    try:
        lines = read_session(session)
    except SessionError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    if as_json:
        result, _ = _replay(lines, db, seed, settings=settings)
        sys.stdout.write(json.dumps(result.summary()) + "\n")
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task("replaying", total=len(lines))
        result, versions = _replay(lines, db, seed, progress=lambda: bar.advance(task), settings=settings)
    _print_summary(Console(), result, versions, f"replay of {session}")


def _print_summary(console, result, versions, title: str, parts: int = 4) -> None:
    from rich.table import Table

    s = result.summary()
    console.print(f"[bold]{title}[/]: {s['interactions']} interactions, asked {s['asked']}, "
                  f"acted {s['acted']} ({s['acted_wrong']} wrong), missed {s['missed']}, "
                  f"labels {s['labels']}")
    table = Table(title="how the device behaved, part by part (learning shows as asking "
                        "turning into acting right)")
    for col in ("part", "lines", "asked", "acted right", "acted wrong", "missed", "errors"):
        table.add_column(col, justify="right")
    for i, p in enumerate(result.parts(parts), 1):
        table.add_row(f"{i}/{parts}", str(p["lines"]), str(p["asked"]), str(p["acted_right"]),
                      str(p["acted_wrong"]), str(p["missed"]), str(p["errors"]))
    console.print(table)
    lat = s["latency_ms"]
    console.print("latency ms (median / p95): " + ", ".join(
        f"{k} {v['median']:.1f} / {v['p95']:.1f}" for k, v in lat.items()))
    rolled = [v.version for v in versions if v.status == "rolled_back"]
    active = [v.version for v in versions if v.status == "active"]
    console.print(f"model versions: {len(versions)} (active {active[0] if active else 'none'}"
                  f"; rolled back automatically: {', '.join(rolled) or 'none'})")


@app.command("demo")
def demo_command(
    db: Path = typer.Option(None, "--db", help="Replay buffer to write (default: a temp file)."),
    rounds: int = typer.Option(2, "--rounds", min=1, help="Times the session is played."),
    seed: int = typer.Option(0, "--seed", help="Model seed."),
    limit: int = typer.Option(0, "--limit", min=0, help="Play only the first N lines (0: all)."),
    start: str = typer.Option(None, "--start", help=START_HELP),
) -> None:
    """The whole loop on the embedded default: packaged WAVs -> pocketsphinx -> model ->
    policy -> mock GPIO -> SQLite. No microphone, no GPIO, no network."""
    _logging(sys.stderr, logging.WARNING)
    from rich.console import Console
    from rich.progress import Progress

    from edge_plm.replay import read_session

    settings = _replay_settings(start)
    console = Console()
    lines = read_session(DEMO_SESSION)
    if limit:
        lines = lines[:limit]
    console.print(f"demo: {len(lines)} recorded utterances (synthesised voices) played "
                  f"{rounds} time(s) in a row = {len(lines) * rounds} interactions; "
                  "ASR pocketsphinx, GPIO simulated (MockFactory), a simulated person flips "
                  "the switch when the device asks or gets it wrong. The model starts "
                  + ("empty." if settings.model.start == "empty" else f"from {settings.model.start}."))
    with Progress(transient=True, console=console) as bar:
        task = bar.add_task("listening", total=len(lines) * rounds)
        result, versions = _replay(lines, db, seed, rounds=rounds,
                                   progress=lambda: bar.advance(task), settings=settings)
    _print_summary(console, result, versions, "demo")
    if db is not None:
        console.print(f"interactions stored in {db}")
