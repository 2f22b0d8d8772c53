"""`edge-plm config ...`: print the commented default config; check a config file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from edge_plm.config import settings as settings_mod
from edge_plm.cli.common import ConfigOpt, ForceOpt, exists_refused, fail
from edge_plm.cli.root import app
from edge_plm.config.file import default_config_toml

config_app = typer.Typer(help="Configuration file: commented defaults, validation.",
                         no_args_is_help=True)
app.add_typer(config_app, name="config")


@config_app.command("defaults")
def defaults(
    state_dir: Annotated[Optional[str], typer.Option(
        "--state-dir", help="Write paths.state_dir = DIR (uncommented) instead of the default.")] = None,
    output: Annotated[Optional[Path], typer.Option(
        "--output", "-o", help="Write to this file instead of stdout.")] = None,
    force: ForceOpt = False,
) -> None:
    """Print every config key with its built-in default, commented out (TOML)."""
    values = {"paths": {"state_dir": state_dir}} if state_dir else None
    text = default_config_toml(values, path=str(output) if output else "/etc/edge-plm/config.toml")
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        with open(output, "w" if force else "x", encoding="utf-8") as f:  # "x": a person's config stays
            f.write(text)
    except FileExistsError:
        fail(exists_refused(output))
    except OSError as exc:
        fail(f"cannot write {output}: {exc}")
    typer.echo(f"wrote {output}")


@config_app.command("check")
def check(config: ConfigOpt = None) -> None:
    """Parse and validate the config; print where it came from (a bad config: one error line
    per problem, exit code 2)."""
    try:
        s = settings_mod.load(config)
    except settings_mod.ConfigError as exc:
        *before, last = exc.problems
        for line in before:
            typer.echo(f"error: {line}", err=True)
        fail(last, 2)
    for line in ear_warnings(s):
        typer.echo(f"warning: {line}", err=True)
    typer.echo(f"ok: {s.source} (state dir {s.paths.state()})")


def ear_warnings(s) -> list[str]:
    """Device names and aliases with a word the ear cannot pronounce (pocketsphinx's dictionary
    lacks it): the ear leaves those names out of its language model (edge_plm/voice/ear_lm.py)."""
    if s.asr.lm != "household" or s.asr.backend not in ("auto", "pocketsphinx"):
        return []
    from edge_plm.voice.ear_lm import unknown_words  # noqa: PLC0415 - reads the dictionary

    out = []
    for d in s.devices:
        for name in (d.name, *d.aliases):
            missing = unknown_words(name)
            if missing:
                out.append(f"device {d.name!r}: the ear cannot pronounce {', '.join(missing)} in {name!r} "
                           "(not in pocketsphinx's dictionary); the name is left out of its language model: "
                           "use an alias of common words")
    return out
