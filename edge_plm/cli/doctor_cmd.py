"""`edge-plm doctor`: check microphone, ASR model, GPIO, database, Numba cache, disk and config.

Exit code 1 when any check fails (warnings do not fail). `--json` prints
``{"ok": bool, "checks": [{"name", "status", "detail", "remedy"}]}``.
"""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from edge_plm.cli.common import ConfigOpt, JsonOpt, fail, print_json
from edge_plm.cli.root import app

_MARK = {"ok": "[ ok ]", "warn": "[warn]", "fail": "[FAIL]"}


@app.command("doctor")
def doctor(
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
    min_free_mb: Annotated[int, typer.Option(
        "--min-free-mb", help="Fail below this much free disk (MB) in the state dir.")] = 100,
    warm_cache: Annotated[bool, typer.Option(
        "--warm-cache", help="First compile the Numba kernels into the cache (what install.sh does).")] = False,
) -> None:
    """Check that this machine can run the service; say how to fix what cannot."""
    from edge_plm.commands import doctor as doctor_mod  # noqa: PLC0415 - keeps `edge-plm --help` fast

    logging.getLogger("edge_plm").setLevel(logging.ERROR)  # the checks report; no log chatter
    if warm_cache:
        try:
            info = doctor_mod.warm_numba_cache()
        except Exception as exc:
            fail(f"Numba warm-up failed: {type(exc).__name__}: {exc}")
        typer.echo(f"Numba kernels compiled in {info['seconds']} s "
                   f"(cache: {info['cache_dir'] or 'next to the package'})", err=as_json)
    report = doctor_mod.run_checks(config, min_free_mb=min_free_mb)
    if as_json:
        print_json(report.to_dict())
    else:
        _print_report(report)
    if not report.ok:
        raise typer.Exit(1)


def _print_report(report) -> None:
    for c in report.checks:
        typer.echo(f"{_MARK[c.status]} {c.name}: {c.detail}")
        if c.status != "ok" and c.remedy:
            typer.echo(f"       remedy: {c.remedy}")
    fails = sum(c.status == "fail" for c in report.checks)
    warns = sum(c.status == "warn" for c in report.checks)
    typer.echo("all checks passed" if not fails and not warns
               else f"{fails} failed, {warns} warning(s)")
