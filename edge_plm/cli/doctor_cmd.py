"""`edge-plm doctor`: check microphone, ASR model, GPIO, database, Numba cache, disk and config.

Exit code 1 when any check fails (warnings do not fail). `--json` prints
``{"ok": bool, "checks": [{"name", "status", "detail", "remedy"}]}``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Optional

import typer

from edge_plm.cli import app

_MARK = {"ok": "[ ok ]", "warn": "[warn]", "fail": "[FAIL]"}


@app.command("doctor")
def doctor(
    config: Optional[Path] = typer.Option(None, "--config", help="config TOML (default: the usual lookup)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    min_free_mb: int = typer.Option(100, "--min-free-mb", help="fail below this much free disk in the state dir"),
    warm_cache: bool = typer.Option(False, "--warm-cache",
                                    help="first compile the Numba kernels into the cache (what install.sh does)"),
) -> None:
    """Check that this machine can run the service; say how to fix what cannot."""
    from edge_plm import doctor as doctor_mod  # noqa: PLC0415 - keeps `edge-plm --help` fast

    logging.getLogger("edge_plm").setLevel(logging.ERROR)  # the checks report; no log chatter
    if warm_cache:
        try:
            info = doctor_mod.warm_numba_cache()
        except Exception as exc:
            typer.echo(f"error: Numba warm-up failed: {type(exc).__name__}: {exc}", err=True)
            raise typer.Exit(1)
        typer.echo(f"Numba kernels compiled in {info['seconds']} s "
                   f"(cache: {info['cache_dir'] or 'next to the package'})", err=as_json)
    report = doctor_mod.run_checks(config, min_free_mb=min_free_mb)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), ensure_ascii=False))
    else:
        for c in report.checks:
            typer.echo(f"{_MARK[c.status]} {c.name}: {c.detail}")
            if c.status != "ok" and c.remedy:
                typer.echo(f"       remedy: {c.remedy}")
        fails = sum(c.status == "fail" for c in report.checks)
        warns = sum(c.status == "warn" for c in report.checks)
        typer.echo("all checks passed" if not fails and not warns
                   else f"{fails} failed, {warns} warning(s)")
    if not report.ok:
        raise typer.Exit(1)
