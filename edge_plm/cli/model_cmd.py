"""`edge-plm model list|show|rollback|rebuild|import|export`: the model versions in the replay buffer.

Versions are made by the `Learner` (edge_plm/learning/learner.py, docs/loop.md): every accepted
candidate is a checkpoint + an ``active`` row, rolled-back candidates have no checkpoint.
``rollback`` makes an older saved version active and ``rebuild`` re-learns a new active
version from the database alone (edge_plm/commands/model_versions.py), ``import`` makes a new active version
from a checkpoint trained elsewhere (`edge-plm train switch`; it must not score below the
active one on the holdout unless --force) and ``export`` copies a version's checkpoint out
(edge_plm/commands/model_transfer.py). A running service loads a new active version by itself (it
checks the database before predicting).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from edge_plm.commands.status import checkpoint_state, model_detail, model_record, versions_in_order
from edge_plm.commands.times import short_time
from edge_plm.cli.common import (RESTART_NOTE, ConfigOpt, DbOpt, ForceOpt, JsonOpt,
                                 console, fail, fmt_ba, grid, interrupted_exit, opened, print_json,
                                 terminable)
from edge_plm.cli.root import app

model_app = typer.Typer(help="Model versions: list, show, rollback, rebuild, import, export.",
                        no_args_is_help=True)
app.add_typer(model_app, name="model")


@model_app.command("list")
def list_command(db: DbOpt = None, config: ConfigOpt = None, as_json: JsonOpt = False) -> None:
    """Every version, oldest first: parent, status, labels learned, holdout score, gate,
    checkpoint file (``pruned``: deleted by the retention policy, model.keep_checkpoints;
    ``removed by forget``: it could not be rewritten without forgotten interactions;
    `model show` has the rest)."""
    with opened(db, config) as (store, settings, path):
        versions = [model_record(v) for v in versions_in_order(store)]
        owed = store.owed_rewrites()  # what a stopped `forget` still owes each file
    for v in versions:  # "ok" only for a file that loads (checksum verified)
        v["checkpoint_state"], v["checkpoint_problem"] = checkpoint_state(v["checkpoint"], v)
        v["forget_owed"] = len(owed.get(v["version"], ()))
    if as_json:
        print_json(versions)
        return
    if not versions:
        start = settings.model.start
        typer.echo("no model versions yet (the service starts from "
                   + ("an empty model)" if start == "empty" else f"the starting model {start!r}: model.start)"))
        return
    console().print(_versions_table(versions))
    for v in versions:  # what is wrong with a file, and what a start did about it
        problem = v["checkpoint_problem"] if v["checkpoint_state"] == "damaged" else v["damaged"]
        if problem and not v.get("pruned"):
            typer.echo(f"{v['version']}: {problem}", err=True)
        if v.get("forget_removed"):
            typer.echo(f"{v['version']}: checkpoint deleted by `forget`: {v['forget_removed']}", err=True)
        if v["forget_owed"]:
            typer.echo(f"{v['version']}: its checkpoint still holds {v['forget_owed']} forgotten "
                       "interaction(s): a stopped `forget` owes its rewrite (the running "
                       "service or the next command that changes the model does it)", err=True)


@model_app.command("show")
def show_command(
    version: Annotated[str, typer.Argument(help="Version name, e.g. v0003.")],
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One version: metrics, checkpoint, children, and how its own predictions fared."""
    with opened(db, config) as (store, settings, path):
        d = model_detail(store, version)
    if as_json:
        print_json(d)
    else:
        console().print(_detail_grid(d))


def _versions_table(versions: list[dict]):
    """The versions of `model list` as a table."""
    from rich.table import Table  # noqa: PLC0415

    t = Table(show_edge=False, header_style="bold")
    for col in ("version", "parent", "created", "status", "labels", "holdout", "bal.acc",
                "gate", "file"):
        t.add_column(col, justify="right" if col in ("labels", "holdout", "bal.acc")
                     else "left", no_wrap=col == "gate")
    for v in versions:
        status = {"active": "[bold green]active[/]", "rolled_back": "[red]rolled_back[/]"}.get(
            v["status"], v["status"])
        ck = ("removed by forget" if v.get("forget_removed") else "pruned" if v.get("pruned") else
              "[red]owed forget[/]" if v.get("forget_owed") else
              {None: "-", "ok": "ok", "missing": "[red]missing[/]",
               "damaged": "[red]damaged[/]"}[v["checkpoint_state"]])
        t.add_row(v["version"], v["parent"] or "-", short_time(v["created_ts"]), status,
                  str(v["n_train"]), str(v["holdout_n"] if v["holdout_n"] is not None else "-"),
                  fmt_ba(v["balanced_accuracy"]), v["gate"] or "-", ck)
    return t


def _detail_grid(d: dict):
    """One version (`model show`) as name/value lines."""
    g = grid()
    g.add_row("version", f"{d['version']} ({d['status']})")
    g.add_row("parent", d["parent"] or "none")
    g.add_row("children", ", ".join(d["children"]) or "none")
    g.add_row("created", d["created"])
    g.add_row("labels learned", str(d["n_train"]))
    ck = d["checkpoint"]
    if ck:
        size = d["checkpoint_bytes"]
        state = (f"deleted by `forget`: {d['forget_removed']}" if d.get("forget_removed")
                 else "pruned by the retention policy (model.keep_checkpoints)" if d["pruned"]
                 else "missing" if size is None else f"{size} bytes")
        g.add_row("checkpoint", f"{ck} ({state})")
    else:
        g.add_row("checkpoint", "none (a rolled-back candidate is not saved)")
    m = d["metrics"]
    g.add_row("holdout", f"balanced accuracy {fmt_ba(m.get('balanced_accuracy'))} on "
                         f"{m.get('holdout_n')} rows; parent {fmt_ba(m.get('parent_balanced_accuracy'))}"
                         f"; gate: {m.get('gate')}")
    span = m.get("interactions")
    if span and span[0] is not None:
        g.add_row("learned in window", f"{m.get('labels_in_window')} labels, interactions "
                                       f"#{span[0]}..#{span[1]}")
    elif m.get("gate") == "rebuild":
        g.add_row("rebuild", f"{m.get('labels_in_window')} labels learned, "
                             f"{m.get('skipped_rolled_back')} skipped (rolled-back windows)")
    p = d["predictions"]
    if p["interactions"]:
        acc = "-" if p["accuracy"] is None else f"{p['accuracy']:.3f}"
        g.add_row("its predictions", f"{p['interactions']} interactions ({p['first']} .. "
                                     f"{p['last']}), {p['labelled']} labelled, {p['correct']} "
                                     f"right (accuracy {acc})")
    else:
        g.add_row("its predictions", "none (never served)")
    extra = {k: v for k, v in m.items() if k not in (
        "balanced_accuracy", "holdout_n", "parent_balanced_accuracy", "gate", "interactions",
        "labels_in_window", "skipped_rolled_back")}
    if extra:
        g.add_row("other metrics", ", ".join(f"{k}={v}" for k, v in extra.items()))
    return g


@model_app.command("rollback")
def rollback_command(
    version: Annotated[str, typer.Argument(
        help="The saved version to make active (`edge-plm model list` shows them).")],
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Make an older saved version the active one (its checkpoint must load)."""
    from edge_plm.commands.model_versions import rollback  # noqa: PLC0415

    with opened(db, config, write=True) as (store, settings, path):
        result = rollback(store, settings, version)
    if as_json:
        print_json(result.to_dict())
        return
    if not result.changed:
        typer.echo(f"{version} is already the active version")
        return
    typer.echo(f"model {version} is active (was {result.previous or 'none'})")
    typer.echo(f"note: {RESTART_NOTE}", err=True)


@model_app.command("rebuild")
def rebuild_command(
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Re-learn a model from the database alone (labelled non-holdout rows in time order,
    minus rolled-back windows) and make it the active version."""
    from rich.console import Console  # noqa: PLC0415

    from edge_plm.commands.model_versions import rebuild  # noqa: PLC0415

    with opened(db, config, write=True) as (store, settings, path):
        before = store.active_model_version()
        try:
            with terminable(), Console(stderr=True).status("rebuilding the model from the database",
                                                           spinner="dots"):
                d = rebuild(store, settings)
        except KeyboardInterrupt as exc:  # Ctrl-C / SIGTERM: stop; a half-made version is debris, cleaned later
            now = store.active_model_version()
            same = (now.version if now else None) == (before.version if before else None)
            typer.echo("interrupted: " + ("nothing changed (" + (before.version if before else "no version")
                                          + " stays active)" if same else
                                          f"the rebuilt {now.version} is active"), err=True)
            raise typer.Exit(interrupted_exit(exc)) from None
    if as_json:
        print_json(d.to_dict())
        return
    m = d.metrics
    typer.echo(f"model {d.version} rebuilt and active (was {d.previous or 'none'}): "
               f"{m.get('labels_in_window')} labels learned, {m.get('skipped_rolled_back')} "
               f"skipped (rolled-back windows); holdout balanced accuracy "
               f"{fmt_ba(m.get('balanced_accuracy'))} on {m.get('holdout_n')} rows")
    typer.echo(f"note: {RESTART_NOTE}", err=True)


@model_app.command("import")
def import_command(
    checkpoint: Annotated[Path, typer.Argument(help="A switch-model checkpoint (e.g. from `edge-plm train switch`).")],
    force: Annotated[bool, typer.Option(
        "--force", help="Import even if it scores below the active model on the holdout.")] = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """A checkpoint trained elsewhere as a new active version: checked (configuration,
    vocabulary, format), scored on the holdout next to the active model, refused when it
    scores lower (unless --force); its origin is recorded in the version's metrics."""
    from edge_plm.commands.model_transfer import ImportRefused, import_checkpoint  # noqa: PLC0415
    from edge_plm.plm.checkpoint import CheckpointError  # noqa: PLC0415

    with opened(db, config, write=True, create=True) as (store, settings, path):  # a new device too
        try:
            r = import_checkpoint(store, settings, checkpoint, force=force)
        except CheckpointError as exc:
            fail(f"cannot import: {exc}", 2)
        except ImportRefused as exc:
            fail(f"refused: {exc}", 1)
    if as_json:
        print_json(r.to_dict())
        return
    judged = (f"holdout balanced accuracy {fmt_ba(r.balanced_accuracy)} on {r.holdout_n} rows "
              f"(previous {fmt_ba(r.previous_balanced_accuracy)})")
    typer.echo(f"model {r.version} ({r.config}) imported from {r.source} and active (was "
               f"{r.previous or 'none'}): {judged}" + ("; forced" if r.forced else ""))
    typer.echo(f"{r.labels_matched} of this device's labels are in it already; the service learns the "
               "others when it next starts")
    if r.config != r.model_config_setting:
        typer.echo(f"note: the device now runs a {r.config} model; model.config is "
                   f"{r.model_config_setting!r}, which a rebuild or a new start uses: set "
                   f'model.config = "{r.config}" (and model.start) to keep {r.config}', err=True)
    typer.echo(f"note: {RESTART_NOTE}", err=True)


@model_app.command("export")
def export_command(
    version: Annotated[str, typer.Argument(help="The saved version, e.g. v0003.")],
    out: Annotated[Path, typer.Argument(help="File (or directory) to write the checkpoint to.")],
    force: ForceOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Copy a saved version's checkpoint out (it loads with `eval --init`, `model.start`,
    `model import`)."""
    from edge_plm.commands.model_transfer import export_checkpoint  # noqa: PLC0415
    from edge_plm.plm.checkpoint import CheckpointError  # noqa: PLC0415

    with opened(db, config) as (store, settings, path):
        try:
            r = export_checkpoint(store, version, out, overwrite=force)
        except CheckpointError as exc:
            fail(f"cannot export {version}: {exc}")
    if as_json:
        print_json(r)
        return
    typer.echo(f"model {r['version']} ({r['config']}, {r['labelled']} labelled examples) written to "
               f"{r['out']} ({r['bytes']} bytes, sha256 {r['sha256']})")
