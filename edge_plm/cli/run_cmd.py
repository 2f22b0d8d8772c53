"""`edge-plm run` (the service), `edge-plm replay` (docs/design.md §4) and `edge-plm demo`.

Thin commands: the service is `edge_plm.loop.service`, the replay harness `edge_plm.loop.replay`.
Logs go to stdout for `run` (journald) and to stderr for `replay`/`demo`, so that
``replay --json`` prints exactly one JSON object on stdout.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from edge_plm.loop import stopping
from edge_plm.cli.common import ConfigOpt, SeedOpt, expand_user, fail, load_settings, log_to, quiet_logging
from edge_plm.cli.root import app

log = logging.getLogger("edge_plm.cli.run")

DEMO_SESSION = Path(__file__).resolve().parent.parent / "data" / "demo" / "session.jsonl"


# --- run ------------------------------------------------------------------------------------
AudioOpt = Annotated[Optional[list[Path]], typer.Option("--audio", help=(
    "Try it without a Pi: play these WAV files (a directory: its *.wav) instead of the "
    "microphone, on simulated pins (MockFactory); more files may follow as arguments. Space "
    "(then Enter on a pipe) flips the simulated switch, q stops."), show_default=False,
    metavar="FILE")]
MoreAudioArg = Annotated[Optional[list[Path]], typer.Argument(
    help="Further WAV files or directories for --audio.", show_default=False, metavar="FILE")]
GapOpt = Annotated[Optional[float], typer.Option("--gap", min=0.0, show_default=False, help=(
    "With --audio: seconds between two files (time to flip the switch). Default: the longest "
    "label window of the policy + 1 s (11 s by default), so each file's flip, or its absence, "
    "becomes a label before the next file; a shorter gap leaves a file unlabelled when the "
    "next one supersedes it."))]


@app.command("run")
def run_command(config: ConfigOpt = None, audio: AudioOpt = None, more: MoreAudioArg = None,
                gap: GapOpt = None) -> None:
    """The service: microphone + GPIO from the config, until SIGTERM/SIGINT (--audio: WAV
    files on simulated pins, until the last file's question is answered)."""
    with stopping.handling() as stop:  # installed since the CLI's entry (edge_plm.loop.stopping)
        if stop.is_set():  # stopped while the CLI was importing: skip the slow imports too
            log_to(sys.stdout)
            log.info("%s during start-up: stopping", stop.reason())
            return
        if more and not audio:
            fail(f"unexpected argument {more[0]}: audio files go after --audio", 2)
        # checked before the slow imports, the model and the database: a bad path fails at once
        files = _audio_files([*(audio or []), *(more or [])]) if audio else None
        from edge_plm.loop.service import CannotStart, run_service  # noqa: PLC0415 - keeps --help fast

        if files:  # the printed lines are the output; the log keeps to warnings, on stderr
            quiet_logging()
        else:
            log_to(sys.stdout)
        settings = load_settings(config)
        log.info("configuration: %s", settings.source)
        if files:  # the files replace the microphone; the pins are simulated
            from dataclasses import replace  # noqa: PLC0415

            settings = replace(settings, gpio=replace(settings.gpio, pin_factory="mock"))
            if gap is None:
                from edge_plm.loop.tryout import default_gap_s  # noqa: PLC0415

                gap = default_gap_s(settings.policy)
        db_path = settings.paths.database_path()
        before = _last_id(db_path)
        try:
            run_service(settings, stop, audio_files=files, audio_gap_s=3.0 if gap is None else gap)
        except CannotStart as exc:
            fail(str(exc), exc.code)
        summary = _run_summary(db_path, before)
        if files:  # the printed lines are the output
            typer.echo(summary)
        else:
            log.info("%s", summary)


def _last_id(db_path: Path) -> int:
    """The newest interaction id of the database (0: none, or no database yet)."""
    from edge_plm.store import ReplayStore, StoreError  # noqa: PLC0415

    if not db_path.exists():
        return 0
    try:
        with ReplayStore(db_path, read_only=True) as store:
            return store.last_interaction_id()
    except StoreError:  # the service's own start-up reports what is wrong with it
        return 0


def _run_summary(db_path: Path, after_id: int) -> str:
    """One line: what this run stored and learned, and where."""
    from edge_plm.store import ReplayStore  # noqa: PLC0415

    if not db_path.exists():  # stopped during start-up, before the database was created
        return f"run ended before the replay buffer was opened: nothing stored ({db_path})"
    with ReplayStore(db_path, read_only=True) as store:
        rows = store.interactions(after_id=after_id)
        active = store.active_model_version()
    labelled = sum(r.label is not None for r in rows)
    model = f"model {active.version} active" if active else "no model version saved yet"
    return (f"run ended: {len(rows)} interaction(s) stored, {labelled} labelled; {model}; "
            f"database {db_path}")


def _audio_files(paths: list[Path]) -> list[Path]:
    from edge_plm.loop.tryout import audio_paths  # noqa: PLC0415
    from edge_plm.voice.audio import AudioError  # noqa: PLC0415

    try:
        return audio_paths(paths)
    except AudioError as exc:
        fail(f"--audio: {exc}", 2)


# --- replay and demo ------------------------------------------------------------------------
StartOpt = Annotated[Optional[str], typer.Option("--start", help=(
    'Where the model starts: "switch-en" (the shipped English starting model), "empty", or a '
    "checkpoint path (default: model.start of the settings, switch-en)."))]
ReplayDbOpt = Annotated[Optional[Path], typer.Option(
    "--db", help="Replay buffer to write (default: a temp file).", callback=expand_user)]


def _replay_settings(start: str | None, config: Path | None = None):
    """Built-in settings with ``model.start``: a replay does not read the config file unless
    it is given (``replay --config``: its devices, policy and model keys; its paths and pins
    are not used: the replay has its own database and simulated pins)."""
    from dataclasses import replace

    from edge_plm.config.settings import ConfigError, Settings, load, validate

    if config is not None:
        try:
            s = load(config)
        except ConfigError as exc:
            fail(str(exc), 2)
        s = replace(s, paths=Settings().paths)
    else:
        s = Settings()
    if start is not None:
        s = replace(s, model=replace(s.model, start=start))
    try:
        validate(s)
        from edge_plm.config.starting_model import resolve

        resolve(s.model.start)
    except (ConfigError, LookupError) as exc:
        fail(f"--start: {exc}", 2)
    return s


def _replay(lines, db: Path | None, seed: int, rounds: int = 1, progress=None, settings=None,
            stop=None):
    from edge_plm.loop.replay import build_replay, replay_asr, run_session, session_span_s, uses_talkback
    from edge_plm.plm.checkpoint import CheckpointError
    from edge_plm.config.settings import Settings

    from edge_plm.store import StorageError
    from edge_plm.voice.speech import SpeechError

    settings = settings or Settings()
    try:
        # the simulated times end at about now (none in the future)
        replay = build_replay(settings, db, seed=seed, asr=replay_asr(lines, settings),
                              span_s=session_span_s(len(lines) * rounds, settings),
                              talkback=uses_talkback(lines))
    except (CheckpointError, LookupError, SpeechError) as exc:  # LookupError: StartError (model.start)
        fail(str(exc), 2)
    try:
        result = run_session(lines * rounds, replay.controller, replay.clock,
                             endpointer=replay.endpointer, progress=progress, stop=stop)
        replay.controller.stop()  # saves the labels learned since the last version
        versions = replay.store.model_versions()
    finally:
        replay.close()
    if replay.controller.storage_failures:  # closing resolved a window it could not store
        raise StorageError(f"replay: {replay.controller.last_storage_error}")
    if stop is not None and stop.is_set():
        log.warning("%s: the replay stopped after %d of %d lines (what was learned is saved)",
                    stop.reason(), len(result.lines), len(lines) * rounds)
    return result, versions


@app.command("replay")
def replay_command(
    session: Annotated[Path, typer.Argument(help="JSONL file: one {'text' or 'audio', 'label'} object a line.")],
    db: ReplayDbOpt = None,
    seed: SeedOpt = 0,
    start: StartOpt = None,
    config: Annotated[Optional[Path], typer.Option("--config", help=(
        "A config file whose [[devices]], [policy] and [model] keys the replay uses (several "
        "devices: session lines may name a \"device\"); default: the built-in settings."))] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")] = False,
) -> None:
    """Run a logged session through the real loop with a simulated person (mock GPIO)."""
    quiet_logging()
    from edge_plm.loop.replay import SessionError, check_devices, read_session, session_devices
    from edge_plm.config.settings import device_configs

    settings = _replay_settings(start, config)
    try:
        lines = read_session(session)
        given, settings = settings, session_devices(lines, settings)
        if settings is not given:
            log.warning("no [[devices]] configured: replaying with the devices the session names "
                        "(%s; the first is the default), on simulated pins",
                        ", ".join(d.name for d in settings.devices))
        check_devices(lines, [d.name for d in device_configs(settings)])
    except SessionError as exc:
        fail(str(exc), 2)
    with stopping.handling() as stop:  # SIGTERM/SIGINT: stop after the line, save, exit 0
        if as_json:
            result, _ = _replay(lines, db, seed, settings=settings, stop=stop)
            sys.stdout.write(json.dumps(result.summary()) + "\n")
            return
        from rich.console import Console
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            task = bar.add_task("replaying", total=len(lines))
            result, versions = _replay(lines, db, seed, progress=lambda: bar.advance(task),
                                       settings=settings, stop=stop)
    _print_summary(Console(), result, versions, f"replay of {session}")


def _print_summary(console, result, versions, title: str, parts: int = 4) -> None:
    from rich.table import Table

    s = result.summary()
    already = sum(r.missed_already_so for r in result.lines)
    console.print(f"[bold]{title}[/]: {s['interactions']} interactions, asked {s['asked']}, "
                  f"acted {s['acted']} ({s['acted_wrong']} wrong), missed {s['missed']}"
                  f"{f' ({already} of them already as wished)' if already else ''}, "
                  f"labels {s['labels']}")
    table = Table(title="how the device behaved, part by part (learning shows as asks and "
                        "misses turning into right actions)")
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


DEMO_MARK = "demo_database"  # meta key: the database was made by `edge-plm demo`


def demo_db(settings) -> Path:
    """Where `demo` keeps its database by default: ``<state dir>/demo/edge-plm.db`` of the
    configured state dir, apart from the device's own database (the demo's labels must not
    train the owner's model)."""
    return settings.paths.state() / "demo" / "edge-plm.db"


def _demo_database(db: Path) -> None:
    """`db` as the demo's database: created and marked as one (``meta.demo_database``), or,
    when it exists, refused unless a demo made it (the demo appends synthetic rows)."""
    from edge_plm.store import ReplayStore, StoreError, private_dir

    if db.exists():
        try:
            with ReplayStore(db, read_only=True) as store:
                mark = store.meta_value(DEMO_MARK)
        except StoreError as exc:
            fail(f"--db {db}: {exc}", 2)
        if mark is None:
            fail(f"--db {db} is a database the demo did not make: the demo would add its synthetic "
                 "interactions and labels to it; give a new path (or leave out --db)", 2)
        return
    if not db.parent.exists():
        private_dir(db.parent)
    with ReplayStore(db) as store:
        store.set_meta_value(DEMO_MARK, "1")


def _fresh_demo_dir(db: Path) -> None:
    """Empty the default demo directory: each demo starts from its own fresh database."""
    import shutil

    from edge_plm.store import private_dir

    if db.parent.is_dir():
        shutil.rmtree(db.parent)
    private_dir(db.parent)  # 0700: the demo's transcripts are as private as the device's


@app.command("demo")
def demo_command(
    db: Annotated[Optional[Path], typer.Option("--db", help=(
        "Replay buffer to write (default: demo/edge-plm.db in the configured state dir, replaced "
        "by each demo). An existing database is refused unless a demo made it."),
        callback=expand_user)] = None,
    rounds: Annotated[int, typer.Option("--rounds", min=1, help="Times the session is played.")] = 2,
    seed: SeedOpt = 0,
    limit: Annotated[int, typer.Option("--limit", min=0, help="Play only the first N lines (0: all).")] = 0,
    start: StartOpt = None,
    config: ConfigOpt = None,
) -> None:
    """The whole loop on the embedded default: packaged WAVs -> pocketsphinx -> model ->
    policy -> mock GPIO -> SQLite. No microphone, no GPIO, no network."""
    quiet_logging()
    from rich.console import Console
    from rich.progress import Progress

    from edge_plm.loop.replay import read_session

    settings = _replay_settings(start, config)  # its devices, policy and model keys, if given
    if db is None:
        db = demo_db(load_settings(config))  # the configured state dir (the usual lookup)
        _fresh_demo_dir(db)
    _demo_database(db)
    console = Console()
    lines = read_session(DEMO_SESSION)
    if limit:
        lines = lines[:limit]
    console.print(f"demo: {len(lines)} recorded utterances (synthesised voices) played "
                  f"{rounds} time(s) in a row = {len(lines) * rounds} interactions; "
                  "ASR pocketsphinx, GPIO simulated (MockFactory), a simulated person flips "
                  "the switch when the device asks or gets it wrong. The model starts "
                  + ("empty." if settings.model.start == "empty" else f"from {settings.model.start}."))
    with stopping.handling() as stop, Progress(transient=True, console=console) as bar:
        task = bar.add_task("listening", total=len(lines) * rounds)
        result, versions = _replay(lines, db, seed, rounds=rounds,
                                   progress=lambda: bar.advance(task), settings=settings,
                                   stop=stop)
    _print_summary(console, result, versions, "demo")
    console.print(f"interactions stored in {db}; look at them with `edge-plm status --db {db}`, "
                  f"`edge-plm log --db {db}` or `edge-plm stats --db {db}`", soft_wrap=True)
