"""`edge-plm run` (the service), `edge-plm replay` (DESIGN.md §4) and `edge-plm demo`.

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


def _logging(stream, level: int = logging.INFO) -> None:
    logging.basicConfig(stream=stream, level=level, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


# --- run ------------------------------------------------------------------------------------
@app.command("run")
def run_command(
    config: Path = typer.Option(None, "--config", help="TOML config (default: the usual lookup)."),
) -> None:
    """The service: microphone + GPIO from the config, until SIGTERM/SIGINT."""
    _logging(sys.stdout)
    from edge_plm.controller import Controller
    from edge_plm.device import Devices
    from edge_plm.learner import Learner, LearnerConfig
    from edge_plm.settings import ConfigError, load
    from edge_plm.store import ReplayStore
    from edge_plm.voice.asr import AsrError, make_asr
    from edge_plm.voice.audio import AudioError, MicrophoneSource, TextSource
    from edge_plm.voice.endpoint import Endpointer

    try:
        settings = load(config)
    except ConfigError as exc:
        log.error("configuration: %s", exc)
        raise typer.Exit(2)
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
                               settings.paths.checkpoints_path())
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
        devices = Devices.from_config(settings.gpio)
        controller = Controller(settings, store, learner, devices, asr)
        sd_notify("READY=1")
        log.info("ready: listening (%s source, model version %s)", settings.audio.source,
                 learner.version or "empty")
        while not stop.is_set():
            try:
                controller.run(source, stop)
                if settings.audio.source == "text":
                    break  # stdin ended
            except AudioError as exc:  # the microphone failed: say so, retry
                log.error("audio input failed: %s; retrying in 5 s", exc)
                stop.wait(5.0)
    except (AsrError, AudioError) as exc:
        log.error("cannot start: %s", exc)
        raise typer.Exit(1)
    finally:
        sd_notify("STOPPING=1")
        if controller is not None:
            controller.stop()
        store.close()


# --- replay and demo ------------------------------------------------------------------------
def _replay(lines, db: Path | None, seed: int, rounds: int = 1, progress=None):
    from edge_plm.controller import build_replay, replay_asr, run_session
    from edge_plm.settings import Settings

    replay = build_replay(Settings(), db, seed=seed, asr=replay_asr(lines))
    try:
        result = run_session(lines * rounds, replay.controller, replay.clock,
                             endpointer=replay.endpointer, progress=progress)
        replay.controller.stop()  # saves the labels learned since the last version
        versions = replay.store.model_versions()
    finally:
        replay.close()
    return result, versions


@app.command("replay")
def replay_command(
    session: Path = typer.Argument(..., help="JSONL: {'text'|'audio', 'label'} per line."),
    db: Path = typer.Option(None, "--db", help="Replay buffer to write (default: a temp file)."),
    seed: int = typer.Option(0, "--seed", help="Model seed."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object on stdout."),
) -> None:
    """Run a logged session through the real loop with a simulated person (mock GPIO)."""
    _logging(sys.stderr, logging.WARNING)
    from edge_plm.controller import SessionError, read_session

    try:
        lines = read_session(session)
    except SessionError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    if as_json:
        result, _ = _replay(lines, db, seed)
        sys.stdout.write(json.dumps(result.summary()) + "\n")
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task("replaying", total=len(lines))
        result, versions = _replay(lines, db, seed, progress=lambda: bar.advance(task))
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
) -> None:
    """The whole loop on the embedded default: packaged WAVs -> pocketsphinx -> model ->
    policy -> mock GPIO -> SQLite. No microphone, no GPIO, no network."""
    _logging(sys.stderr, logging.WARNING)
    from rich.console import Console
    from rich.progress import Progress

    from edge_plm.controller import read_session

    console = Console()
    lines = read_session(DEMO_SESSION)
    if limit:
        lines = lines[:limit]
    console.print(f"demo: {len(lines)} recorded utterances (synthesised voices) played "
                  f"{rounds} time(s) in a row = {len(lines) * rounds} interactions; "
                  "ASR pocketsphinx, GPIO simulated (MockFactory), a simulated person flips "
                  "the switch when the device asks or gets it wrong. The model starts empty.")
    with Progress(transient=True, console=console) as bar:
        task = bar.add_task("listening", total=len(lines) * rounds)
        result, versions = _replay(lines, db, seed, rounds=rounds,
                                   progress=lambda: bar.advance(task))
    _print_summary(console, result, versions, "demo")
    if db is not None:
        console.print(f"interactions stored in {db}")
