"""The `edge-plm` command line. Each command group lives in its own module and
registers itself on `app` when imported below."""

import typer

app = typer.Typer(
    help="edge-plm: a voice switch that learns from its owner, on the device.",
    no_args_is_help=True,
    add_completion=False,
)

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
    app()
