"""The `edge-plm` command line: `main` (the entry point) runs the root group `app`
(`edge_plm/cli/root.py`) with the commands of every ``*_cmd.py`` module registered on it.

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

import os
import sys

# first: a slow command says `loading ...` at once (edge_plm.cli.announce), and `run`, `replay`
# and `demo` stop cleanly on SIGTERM/SIGINT from here on, also during the imports below
# (edge_plm.loop.stopping)
from edge_plm.cli.announce import announce
from edge_plm.loop.stopping import install_early

if os.path.basename(sys.argv[0]) in ("edge-plm", "-m"):  # the entry point, `python -m edge_plm.cli`
    announce(sys.argv)
install_early(sys.argv)

# each command module registers its commands on `app`; this order is the order of `--help`
from edge_plm.cli import eval_cmd  # noqa: F401, E402
from edge_plm.cli import asr_cmd  # noqa: F401, E402
from edge_plm.cli import train_cmd  # noqa: F401, E402
from edge_plm.cli import doctor_cmd  # noqa: F401, E402
from edge_plm.cli import config_cmd  # noqa: F401, E402
from edge_plm.cli import run_cmd  # noqa: F401, E402
from edge_plm.cli import data_cmd  # noqa: F401, E402
from edge_plm.cli import timers_cmd  # noqa: F401, E402
from edge_plm.cli import model_cmd  # noqa: F401, E402
from edge_plm.cli.common import (OneLineFormatter, debug_enabled, describe, enable_debug, ignore_interrupts,  # noqa: E402
                                 one_line, quiet_logging)
from edge_plm.cli.root import app  # noqa: E402

__all__ = ["OneLineFormatter", "app", "debug_enabled", "describe", "main", "one_line"]


def main() -> None:
    if "--debug" in sys.argv[1:]:
        sys.argv = [a for a in sys.argv if a != "--debug"]
        enable_debug()
    # commands that set up their own logging replace this; for the others, a library warning
    # is one line on stderr too (Python's last-resort handler would print tracebacks)
    quiet_logging()
    try:
        app()
    except KeyboardInterrupt:
        ignore_interrupts()  # a second Ctrl-C here must not end it by the signal instead
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:  # `edge-plm log | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except Exception as exc:
        if debug_enabled():
            raise
        code, message = describe(exc)
        print(f"error: {message}", file=sys.stderr)
        sys.exit(code)
