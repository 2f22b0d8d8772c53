"""`edge-plm timers [--json]` / `timers cancel ID... | --all`: the pending actions of timed
commands ("turn off the lights in twenty minutes")."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from edge_plm.cli.common import ConfigOpt, DbOpt, JsonOpt, console, grid, opened, print_json
from edge_plm.cli.common import fail
from edge_plm.cli.root import app
from edge_plm.commands.opening import UserError
from edge_plm.commands.timers import cancel_timers, timer_records
from edge_plm.commands.times import short_time

timers_app = typer.Typer(help="Timed commands waiting for their time: list, cancel.",
                         invoke_without_command=True)
app.add_typer(timers_app, name="timers")


@timers_app.callback()
def timers_list(ctx: typer.Context, db: DbOpt = None, config: ConfigOpt = None,
                as_json: JsonOpt = False) -> None:
    """List the pending timers (id, device, action, due, what was said)."""
    if ctx.invoked_subcommand is not None:
        return
    with opened(db, config) as (store, _settings, _path):
        rows = timer_records(store)
    if as_json:
        print_json(rows)
        return
    if not rows:
        typer.echo("no pending timers")
        return
    g = grid()
    for r in rows:
        g.add_row(str(r["id"]), f"{r['device']} {r['action']}", f"due {short_time(r['due_ts'])}",
                  f"({r['kind']})", repr(r["transcript"]))
    console().print(g)


@timers_app.command("cancel")
def timers_cancel(
    ids: Annotated[Optional[list[int]], typer.Argument(help="Timer ids (`edge-plm timers`).")] = None,
    every: Annotated[bool, typer.Option("--all", help="Cancel every pending timer.")] = False,
    db: DbOpt = None, config: ConfigOpt = None, as_json: JsonOpt = False,
) -> None:
    """Cancel pending timers: they never run (the service notices at once)."""
    with opened(db, config, write=True) as (store, _settings, _path):
        try:
            done = cancel_timers(store, list(ids or []), every)
        except UserError as exc:
            fail(str(exc))
    if as_json:
        print_json({"cancelled": done})
    else:
        typer.echo(f"cancelled {len(done)} timer{'s' * (len(done) != 1)}"
                   + (f": {', '.join(map(str, done))}" if done else ""))
