"""What every command module of the CLI shares: the option types (`Annotated` aliases), the
enums of choices, the one-line error handling and the output helpers.

Errors: no Python traceback reaches a person. A usage error (an unknown option, a value that
is not one of the choices) is one line ``error: ...`` with exit code 2 (`OneLineUsageErrors`);
`describe` turns every other exception into a one-line message and an exit code (`main` in
``edge_plm/cli/__init__.py`` prints it).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import sqlite3
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, NoReturn, Optional

import typer
from typer.core import TyperGroup

from edge_plm.commands.opening import UserError, open_store
from edge_plm.commands.times import parse_time
from edge_plm.errors import EdgePlmError
from edge_plm.switch.config import CONFIGS
from edge_plm.research.lm.config import LM_CONFIGS
from edge_plm.store import LABELS, StoreError

try:  # typer >= 0.20 runs a copy of click of its own
    from typer._click import Context
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - older typer: click itself
    from click import Context, UsageError

# --- help texts -----------------------------------------------------------------------------
DB_HELP = "Replay buffer (default: the configured state dir's edge-plm.db)."
CONFIG_HELP = "Config TOML file (default: the usual lookup)."
JSON_HELP = "Print one JSON document on stdout."
SINCE_HELP = "Only interactions since this ISO date/time or age (2h, 1d)."
# a running service checks the database's active version before predicting (Learner.sync)
RESTART_NOTE = ("a running service loads the new active version by itself within a few "
                "seconds (it checks the database before predicting)")


# --- choices --------------------------------------------------------------------------------
def _choices(name: str, values) -> type[Enum]:
    """An enum whose members are `values` (typer offers them as the option's choices)."""
    return Enum(name, {v: v for v in values}, type=str)


Label = _choices("Label", LABELS)
LabelFilter = _choices("LabelFilter", [*LABELS, "none"])
ExportFormat = _choices("ExportFormat", ("jsonl", "csv"))
SwitchModelConfig = _choices("SwitchModelConfig", CONFIGS)
LMModelConfig = _choices("LMModelConfig", LM_CONFIGS)
AsrBackend = _choices("AsrBackend", ("auto", "vosk", "pocketsphinx"))


# --- options --------------------------------------------------------------------------------
def expand_user(path: Optional[Path]) -> Optional[Path]:
    """``~`` in a path option, as a shell would expand it (every ``--db``)."""
    return path.expanduser() if path is not None else None


DbOpt = Annotated[Optional[Path], typer.Option("--db", help=DB_HELP, callback=expand_user)]
ConfigOpt = Annotated[Optional[Path], typer.Option("--config", help=CONFIG_HELP)]
JsonOpt = Annotated[bool, typer.Option("--json", help=JSON_HELP)]
SinceOpt = Annotated[Optional[str], typer.Option("--since", help=SINCE_HELP)]
SeedOpt = Annotated[int, typer.Option("--seed", min=0, help="Model seed (>= 0, as model.seed).")]
# one rule for every file a command writes (-o FILE, DEST, OUT): an existing file is refused
# unless --force
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite the file if it exists (without "
                                                          "--force an existing file is refused).")]


def exists_refused(path: Path | str) -> str:
    """The message of every command that refuses to overwrite `path` without --force."""
    return f"{path} exists; not overwritten (use --force)"
# `--config NAME` named the model configuration before --model-config existed (hidden): it is
# refused with a pointer to --model-config, since --config is the TOML file in every command
OldConfigNameOpt = Annotated[Optional[str], typer.Option(
    "--config", hidden=True, help="Removed: name the model configuration with --model-config.")]
NAME_MOVED = ("--config is the TOML configuration file; name the model configuration with "
              "--model-config")


def no_config_name(config: Optional[str]) -> None:
    """Refuse a model configuration's name given as `--config NAME` (the old spelling)."""
    if config is not None:
        fail(NAME_MOVED, 2)


# --- errors ---------------------------------------------------------------------------------
def fail(message: str, code: int = 1) -> NoReturn:
    """``error: message`` on stderr and exit `code` (1: bad input or operation, 2: bad usage)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def one_line(text: object) -> str:
    return " ".join(str(text).split())


def _usage_error(exc: UsageError) -> NoReturn:
    if type(exc).__name__ == "NoArgsIsHelpError":
        raise exc  # `edge-plm model`: the group's help, as usual
    hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
    fail(one_line(exc.format_message().replace("Value error, ", "")) + hint, exc.exit_code)


class OneLineUsageErrors(TyperGroup):
    """The root command group: a usage error of any command is one ``error: ...`` line."""

    def make_context(self, *args: Any, **kwargs: Any) -> Context:
        try:
            return super().make_context(*args, **kwargs)
        except UsageError as exc:
            _usage_error(exc)

    def invoke(self, ctx: Context) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            _usage_error(exc)


_DEBUG = bool(os.environ.get("EDGE_PLM_DEBUG"))


def debug_enabled() -> bool:
    """--debug was given (or EDGE_PLM_DEBUG is set): show tracebacks."""
    return _DEBUG


def enable_debug() -> None:
    global _DEBUG
    _DEBUG = True


class OneLineFormatter(logging.Formatter):
    """A log record is one line: an attached exception becomes ``(Type: message)`` unless
    --debug (then the usual traceback follows)."""

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info and not debug_enabled():
            exc = record.exc_info[1]
            saved = record.exc_info, record.exc_text
            record.exc_info, record.exc_text = None, None
            try:
                line = super().format(record)
            finally:
                record.exc_info, record.exc_text = saved
            if exc is not None:
                line += f" ({type(exc).__name__}: {one_line(str(exc))}; --debug for the traceback)"
            return line
        return super().format(record)


def said(exc: BaseException) -> str:
    """An expected failure as one line for a person: an OSError as ``FILE: what`` (a full disk
    says so and that nothing was lost), anything else its message."""
    if isinstance(exc, OSError) and not isinstance(exc, sqlite3.Error) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename else ""
        full = (" (the disk is full: free some space and run the command again; what it had "
                "not finished is unchanged)" if exc.errno == errno.ENOSPC else "")
        return f"{where}{exc.strerror}{full}"
    return one_line(exc)


def describe(exc: BaseException) -> tuple[int, str]:
    """(exit code, one-line message) for an exception that reached `main`.

    An `EdgePlmError` (each module's own error class inherits from it) is meant for a person:
    its message, exit code 1 (2 for a configuration error)."""
    from edge_plm.config.settings import ConfigError  # noqa: PLC0415

    if isinstance(exc, ConfigError):
        return 2, f"configuration: {one_line(exc)}"
    if isinstance(exc, EdgePlmError):
        return 1, one_line(exc)
    if isinstance(exc, sqlite3.Error):
        return 1, f"database: {one_line(exc)}"
    if isinstance(exc, UnicodeError):
        return 1, f"not valid UTF-8 text: {one_line(exc)}"
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return 1, f"{where}{exc.strerror or one_line(exc)}"
    if isinstance(exc, MemoryError):
        return 1, "out of memory"
    return 1, (f"internal error: {type(exc).__name__}: {one_line(exc)} "
               "(run with --debug for the traceback)")


# --- logging --------------------------------------------------------------------------------
class _StderrHandler(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is at the time (test runners swap it)."""

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


class PersonFormatter(OneLineFormatter):
    """A log record on a person's terminal in the style of the CLI's own lines: ``warning:
    ...``, ``error: ...`` (with --debug also the logger's name). The service's log keeps its
    time stamps and logger names (`log_to`)."""

    def __init__(self) -> None:
        super().__init__("%(level)s: %(name)s: %(message)s" if debug_enabled() else "%(level)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        record.level = "error" if record.levelno >= logging.ERROR else record.levelname.lower()
        return super().format(record)


def quiet_logging() -> None:
    """Warnings and errors of the library to stderr, as ``warning: ...`` lines (stdout is for
    the command's output)."""
    handler = _StderrHandler()
    handler.setFormatter(PersonFormatter())
    logging.basicConfig(level=logging.WARNING, force=True, handlers=[handler])


def log_to(stream, level: int = logging.INFO) -> None:
    """Log records with their time, one a line, to `stream` (the service: stdout, journald)."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(OneLineFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, force=True, handlers=[handler])


# --- settings and the database --------------------------------------------------------------
def load_settings(config: Optional[Path]):
    """The settings from `config` (or the usual lookup); a bad config is ``error: ...``."""
    from edge_plm.config.settings import ConfigError, load  # noqa: PLC0415

    try:
        return load(config)
    except ConfigError as exc:
        fail(f"configuration: {exc}", 2)


# the failures `opened` reports as ``error: ...`` (a missing database, a newer schema, an unknown id)
EXPECTED_ERRORS = (UserError, StoreError, sqlite3.Error, OSError, LookupError)


def database_path(db: Optional[Path], settings) -> Path:
    return Path(db) if db is not None else settings.paths.database_path()


@contextmanager
def opened(db: Optional[Path], config: Optional[Path], write: bool = False, create: bool = False
           ) -> Iterator[tuple[Any, Any, Path]]:
    """(store, settings, db path); every expected failure becomes ``error: ...`` + exit 1.

    `create` (with `write`): a missing database is created (a new device), and removed again
    if the command fails."""
    quiet_logging()
    settings = load_settings(config)
    path = database_path(db, settings)
    new_dir = not path.parent.exists()
    try:
        created = create and write and _create_database(path)
        store = open_store(path, write=write)
    except EXPECTED_ERRORS as exc:
        fail(str(exc))
    if write and store.owed_rewrites():  # a killed `forget` still owes rewrites: first
        from edge_plm.learning.forgetting import complete_owed  # noqa: PLC0415

        try:
            complete_owed(store)
        except EXPECTED_ERRORS as exc:
            store.close()
            fail(f"finishing what an interrupted forget owes: {exc}")
    ok = False
    try:
        yield store, settings, path
        ok = True
    except EXPECTED_ERRORS as exc:
        fail(said(exc) if not isinstance(exc, sqlite3.Error) else f"database {path}: {exc}")
    finally:
        store.close()
        if created and not ok:  # nothing was done: leave no empty database behind
            for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                p.unlink(missing_ok=True)
            if new_dir:  # made by this command alone (its checkpoints dir too)
                import shutil  # noqa: PLC0415

                shutil.rmtree(path.parent, ignore_errors=True)


def _create_database(path: Path) -> bool:
    """A new, empty replay buffer at `path` (private directory) unless one exists."""
    from edge_plm.store import ReplayStore, private_dir  # noqa: PLC0415

    if path.exists():
        return False
    private_dir(path.parent)
    ReplayStore(path).close()
    return True


class Terminated(KeyboardInterrupt):
    """SIGTERM during a command that stops like Ctrl-C (`terminable`)."""


@contextmanager
def terminable() -> Iterator[None]:
    """While the block runs, SIGTERM (`kill`, systemd) raises `Terminated` in the main thread
    like Ctrl-C raises KeyboardInterrupt, so `forget` and `model rebuild` stop through the same
    clean path: a transaction in progress rolls back, a checkpoint write leaves only debris
    (cleaned later), the forget journal stays. Off the main thread it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, frame: object) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupted_exit(exc: KeyboardInterrupt) -> int:
    """The exit code of a command stopped by `exc`: 143 (128 + SIGTERM) or 130 (Ctrl-C).
    Further Ctrl-C and SIGTERM are ignored from here on (`ignore_interrupts`): a person
    pressing Ctrl-C again while the command says what it did still gets this exit code."""
    ignore_interrupts()
    return 128 + signal.SIGTERM if isinstance(exc, Terminated) else 130


def ignore_interrupts() -> None:
    """Ignore Ctrl-C and SIGTERM from now on (the main thread only): the command is ending."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def time_option(text: Optional[str], name: str) -> Optional[float]:
    if text is None:
        return None
    try:
        return parse_time(text)
    except UserError as exc:
        fail(f"{name}: {exc}", 2)


# --- output ---------------------------------------------------------------------------------
def print_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, ensure_ascii=False))


def console():
    """Rich console on stdout; not a terminal (a pipe, a file): 120 columns unless $COLUMNS."""
    from rich.console import Console  # noqa: PLC0415

    width = None
    if not sys.stdout.isatty() and not os.environ.get("COLUMNS"):
        width = 120
    return Console(highlight=False, width=width)


def grid():
    """A two-column table without borders: names in bold on the left, values on the right."""
    from rich.table import Table  # noqa: PLC0415

    g = Table.grid(padding=(0, 2))
    g.add_column(style="bold")
    g.add_column()
    return g


def fmt_conf(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.2f}"


def fmt_ms(x: Optional[float]) -> str:
    return "-" if x is None else (f"{x:.0f}" if x >= 100 else f"{x:.1f}")


def fmt_ba(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.3f}"


def fmt_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return str(n)
