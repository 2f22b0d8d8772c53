"""The root `edge-plm` command group (`app`) with its own options; the command modules
register their commands on it."""

from __future__ import annotations

import re
from typing import Annotated

import typer
from typer.core import TyperArgument, TyperOption

try:  # typer >= 0.2x: the parameter class whose help display `_plain_metavars` corrects
    from typer.core import _TyperParameter
except ImportError:  # pragma: no cover - an older typer writes click's plain metavars itself
    _TyperParameter = None

from edge_plm.cli.common import OneLineUsageErrors, enable_debug


def _flags_without_a_type() -> None:
    """typer >= 0.2x shows a ``<bool>`` type next to every flag in the help panels
    (``--version <bool>``), as if the flag took a value: show no type for a flag, as
    click's plain help does."""
    shown = TyperOption.display_type_rich

    def display_type_rich(self, ctx):
        if self.is_flag and not self.count:
            return None
        return shown(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_flags_without_a_type()


def _plain_metavars() -> None:
    """typer >= 0.2x writes a required argument as ``{session}`` in the usage line and a
    value's type as ``<list[Path]>`` or ``<int range>``: write ``SESSION`` (``[ID]...`` when
    optional, repeatable), ``<path>...`` and ``<int>`` instead, as click's plain help does
    (the range itself, ``[x>=1]``, is still shown beside it)."""
    if _TyperParameter is None or not hasattr(TyperArgument, "_usage_display_name"):
        return
    shown = _TyperParameter.display_type

    def display_type(self, ctx):
        label = shown(self, ctx)
        if not label:
            return label
        listed = re.fullmatch(r"<list\[(\w+)\]>", label)
        if listed:
            return f"<{listed.group(1).lower()}>..."
        return label.replace(" range>", ">")

    def usage_name(self):
        name = self.display_name_raw.upper()
        name = name if self.required else f"[{name}]"
        return name + "..." if self.nargs != 1 else name

    _TyperParameter.display_type = display_type  # type: ignore[method-assign]
    TyperArgument._usage_display_name = usage_name  # type: ignore[method-assign]


_plain_metavars()

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
    debug: Annotated[bool, typer.Option("--debug", help=(
        "Show Python tracebacks (for a bug report); allowed anywhere on the command line, "
        "EDGE_PLM_DEBUG=1 does the same."))] = False,
) -> None:
    """edge-plm: a voice switch that learns from its owner, on the device."""
    if debug:  # `main` takes --debug off the command line before typer sees it; tests call `app`
        enable_debug()
