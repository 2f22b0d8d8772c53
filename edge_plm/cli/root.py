"""The root `edge-plm` command group (`app`) with its own options; the command modules
register their commands on it."""

from __future__ import annotations

from typing import Annotated

import typer

from edge_plm.cli.common import OneLineUsageErrors

app = typer.Typer(
    cls=OneLineUsageErrors,
    help="edge-plm: a voice switch that learns from its owner, on the device.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",  # help texts are rewrapped to the terminal as paragraphs
)


def _print_version(value: bool) -> None:
    if value:
        from edge_plm import __version__  # noqa: PLC0415

        typer.echo(f"edge-plm {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """edge-plm: a voice switch that learns from its owner, on the device."""
