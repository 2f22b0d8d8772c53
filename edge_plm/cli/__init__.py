"""The `edge-plm` command line. Each command group lives in its own module and
registers itself on `app` when imported below.

Errors: no Python traceback reaches a person. `main` turns every exception a command lets
escape into one line on stderr, ``error: ...``, and a non-zero exit code:

- known failures (a bad config, a database that cannot be opened or written, a full disk, a
  file that is not what it should be, ...): their message, exit code 1 (2 for a config error);
- anything else is a bug: ``error: internal error: <type>: <message> (run with --debug for
  the traceback)``, exit code 1.

``--debug`` (anywhere on the command line) or ``EDGE_PLM_DEBUG=1`` lets the exception
propagate with its traceback, and log records keep their tracebacks; without it, a log record
with an exception shows the exception's type and message on the same line (`OneLineFormatter`).
"""

from __future__ import annotations

import logging
import os
import sys

import typer

app = typer.Typer(
    help="edge-plm: a voice switch that learns from its owner, on the device.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from edge_plm import __version__  # noqa: PLC0415

        typer.echo(f"edge-plm {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """edge-plm: a voice switch that learns from its owner, on the device."""

_DEBUG = bool(os.environ.get("EDGE_PLM_DEBUG"))


def debug_enabled() -> bool:
    """--debug was given (or EDGE_PLM_DEBUG is set): show tracebacks."""
    return _DEBUG


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


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def describe(exc: BaseException) -> tuple[int, str]:
    """(exit code, one-line message) for an exception that reached `main`."""
    import sqlite3  # noqa: PLC0415

    from edge_plm.jsonl import JsonlError  # noqa: PLC0415
    from edge_plm.settings import ConfigError  # noqa: PLC0415
    from edge_plm.store import StoreError  # noqa: PLC0415

    if isinstance(exc, ConfigError):
        return 2, f"configuration: {one_line(exc)}"
    if isinstance(exc, (StoreError, JsonlError)):
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
    known = _known_errors()
    if isinstance(exc, known):
        return 1, one_line(exc)
    return 1, (f"internal error: {type(exc).__name__}: {one_line(exc)} "
               "(run with --debug for the traceback)")


def _known_errors() -> tuple[type[BaseException], ...]:
    """Error types whose message is meant for a person (each module's own error class)."""
    out: list[type[BaseException]] = []
    for module, name in (("edge_plm.replay", "SessionError"),
                         ("edge_plm.evaluation", "DataError"),
                         ("edge_plm.inspection", "DataError"),
                         ("edge_plm.voice.asr", "AsrError"),
                         ("edge_plm.voice.audio", "AudioError"),
                         ("edge_plm.voice.models", "ModelError"),
                         ("edge_plm.device.pins", "PinFactoryError"),
                         ("edge_plm.device.switch", "SwitchConfigError"),
                         ("edge_plm.plots", "PlotUnavailable"),
                         ("edge_plm.plm.checkpoint", "CheckpointError")):
        mod = sys.modules.get(module)  # only modules already imported can have raised it
        if mod is not None and isinstance(getattr(mod, name, None), type):
            out.append(getattr(mod, name))
    return tuple(out)


# Command modules (each one registers its commands on `app`).
from edge_plm.cli import eval_cmd  # noqa: E402,F401
from edge_plm.cli import asr_cmd  # noqa: E402,F401
from edge_plm.cli import train_cmd  # noqa: E402,F401
from edge_plm.cli import doctor_cmd  # noqa: E402,F401
from edge_plm.cli import config_cmd  # noqa: E402,F401
from edge_plm.cli import run_cmd  # noqa: E402,F401
from edge_plm.cli import data_cmd  # noqa: E402,F401
from edge_plm.cli import model_cmd  # noqa: E402,F401


def main() -> None:
    global _DEBUG
    if "--debug" in sys.argv[1:]:
        sys.argv = [a for a in sys.argv if a != "--debug"]
        _DEBUG = True
    # commands that set up their own logging replace this; for the others, a library warning
    # is one line on stderr too (Python's last-resort handler would print tracebacks)
    handler = logging.StreamHandler()
    handler.setFormatter(OneLineFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    try:
        app()
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:  # `edge-plm log | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except Exception as exc:
        if _DEBUG:
            raise
        code, message = describe(exc)
        print(f"error: {message}", file=sys.stderr)
        sys.exit(code)
