"""`edge-plm config ...`: print the commented default config; check a config file."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from edge_plm import settings as settings_mod
from edge_plm.cli import app
from edge_plm.config_file import default_config_toml

config_app = typer.Typer(help="Configuration file: commented defaults, validation.",
                         no_args_is_help=True)
app.add_typer(config_app, name="config")


@config_app.command("defaults")
def defaults(
    state_dir: Optional[str] = typer.Option(
        None, "--state-dir", help="write paths.state_dir = DIR (uncommented) instead of the default"),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="write to this file (refuses to overwrite) instead of stdout"),
) -> None:
    """Print every config key with its built-in default, commented out (TOML)."""
    values = {"paths": {"state_dir": state_dir}} if state_dir else None
    text = default_config_toml(values, path=str(output) if output else "/etc/edge-plm/config.toml")
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        with open(output, "x", encoding="utf-8") as f:  # "x": never overwrite a person's config
            f.write(text)
    except FileExistsError:
        typer.echo(f"error: {output} exists; not overwritten", err=True)
        raise typer.Exit(1)
    except OSError as exc:
        typer.echo(f"error: cannot write {output}: {exc}", err=True)
        raise typer.Exit(1)
    typer.echo(f"wrote {output}")


@config_app.command("check")
def check(config: Optional[Path] = typer.Option(None, "--config", help="config TOML (default: the usual lookup)")) -> None:
    """Parse and validate the config; print where it came from."""
    try:
        s = settings_mod.load(config)
    except settings_mod.ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1)
    typer.echo(f"ok: {s.source} (state dir {s.paths.state()})")
