"""The device's local data from the CLI: `edge-plm status`, `log`, `stats`, `label`, `forget`,
`export` and `db backup` (`model ...` is in `model_cmd.py`).

Every command takes ``--db PATH`` (default: the configured state dir's database) and
``--config``; the ones that print data take ``--json`` (one JSON document on stdout; logs and
notes go to stderr). They work while the service runs: reads use a read-only connection with
a busy timeout, writes wait for the service's transactions. A missing database, a newer schema
or an unknown id is an ``error: ...`` line on stderr and exit code 1 (2 for a bad argument),
never a traceback. What they compute is in `edge_plm.commands`, one module per job: opening the
store (`opening`), times (`times`), rows and exports (`rows`), `status` (`status`), `stats`
(`stats`), `db backup` (`backup`); what `label` changes is in `labelling`, what `forget`
changes in `forgetting`.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from edge_plm.commands.backup import backup
from edge_plm.commands.forgetting import Forgotten, select_for_forget
from edge_plm.commands.opening import UserError, open_store
from edge_plm.commands.rows import all_rows, export_csv, export_jsonl, labels_of, log_rows, max_id, record, rows_after
from edge_plm.commands.stats import learning_curve, stats
from edge_plm.commands.status import Status, status
from edge_plm.commands.times import short_time
from edge_plm.commands.kinds import kind_line, kinds_of
from edge_plm.commands.timers import timer_line, timers_of
from edge_plm.cli.common import (EXPECTED_ERRORS, RESTART_NOTE, ConfigOpt, DbOpt,
                                 ExportFormat, ForceOpt, JsonOpt, Label, LabelFilter, SinceOpt,
                                 console, database_path, exists_refused, fail, fmt_bytes, fmt_conf, fmt_ms, grid,
                                 interrupted_exit, load_settings, opened, print_json, quiet_logging, terminable,
                                 time_option)
from edge_plm.cli.root import app
from edge_plm.commands.device_inspection import device_record, outcomes_of
from edge_plm.store import LABELS
from edge_plm.voice.transcript import printable

if TYPE_CHECKING:
    from edge_plm.commands.labelling import Relabelled


def did(row, timed: bool = False) -> str:
    """What the device did: ``act ON``, ``ask``, ``ignore``, or ``error`` (``timed``: the
    command set a timer instead of driving the relay now: ``act (timer)``)."""
    if row.error is not None:
        return "error"
    if row.decision == "act":
        return f"act {row.action}" if row.action else ("act (timer)" if timed else "act (refused)")
    return row.decision or "-"


# --- status ---------------------------------------------------------------------------------
@app.command("status")
def status_command(db: DbOpt = None, config: ConfigOpt = None, as_json: JsonOpt = False) -> None:
    """Model version, counts, holdout score, last interaction, ASR, GPIO, database size."""
    with opened(db, config) as (store, settings, path):
        s = status(store, settings)
    if as_json:
        print_json(s.to_dict())
        return
    g = grid()
    for name, text in [*_model_status(s, settings.model.start), *_data_status(s)]:
        g.add_row(name, text)
    console().print(g)


def _model_status(s: Status, start: str) -> list[tuple[str, str]]:
    """The database and model lines of `status`."""
    d, m = s.database, s.model
    a = m["active"]
    rows = [("database", f"{d['path']} ({fmt_bytes(d['bytes'])}, schema v{d['schema_version']})")]
    if a:
        learned = (f"{a['n_train']} labels learned" if a.get("owner_labels") is None else
                   f"{a['owner_labels']} of your labels learned" + (
                       f" + {a['starting_examples']} examples of the starting model" if a["starting_examples"] else ""))
        rows.append(("model", f"{a['version']} active since {a['created']} (parent "
                              f"{a['parent'] or 'none'}, {learned}); "
                              f"{m['versions']} versions, {m['rolled_back']} rolled back"))
    else:
        rows.append(("model", f"no active version ({m['versions']} versions): the service "
                              + ("starts from an empty model" if start == "empty"
                                 else f"starts from the starting model {start!r} (model.start)")))
    u = m["unlearned_labels"]
    rows.append(("unlearned labels", "unknown (the active checkpoint cannot be read)" if u is None
                 else "0 (every learnable label is in the model)" if u == 0
                 else f"{u}: the model lacks them; the service learns them again when it starts"))
    owed = m["forget_owed"]
    if owed["versions"]:
        rows.append(("forget", f"{len(owed['versions'])} older checkpoint(s) still hold "
                               f"{owed['interactions']} forgotten interaction(s) "
                               f"({', '.join(owed['versions'])}): the running service, or the "
                               "next command that changes the model, rewrites them"))
    if m["active_checkpoint"] == "damaged" or m["active_checkpoint"] == "missing":
        rows.append(("checkpoint", f"{m['active_checkpoint']}: {shown(m['active_problem'])} "
                                   "(the service falls back to the last good version at its "
                                   "next start)"))
    for d in m["damaged"]:
        rows.append(("damaged", f"{d['version']}: {shown(d['problem'])} (fell back to an earlier "
                                "version)"))
    rows.append(("gate", f"{m['false_rollbacks']} rollback(s) within the holdout's noise; "
                         f"{m['pruned']} checkpoint(s) pruned"))
    h = s.holdout
    if h["balanced_accuracy"] is not None:
        hold = (f"balanced accuracy {h['balanced_accuracy']:.3f} on {h['scored_on']} rows when "
                f"{a['version']} was made ({a['gate']}); ")
    else:
        hold = "not scored yet; "
    rows.append(("holdout", hold + f"{h['labelled_rows']} labelled rows in it now"))
    return rows


def _data_status(s: Status) -> list[tuple[str, str]]:
    """The interaction, label, ASR and GPIO lines of `status`."""
    i = s.interactions
    rows = [("interactions", f"{i['total']} ({i['labelled']} labelled, {i['unlabelled']} "
                             f"unlabelled, {i['errors']} errors)")]
    sources = ", ".join(f"{k} {v}" for k, v in s.label_sources.items() if v)
    rows.append(("labels", "  ".join(f"{k} {v}" for k, v in s.labels.items())
                 + (f"   (by source: {sources})" if sources else "")))
    last = s.last_interaction
    if last:
        if last["error"]:
            what = f"error: {shown(last['error'])}"
        else:
            what = (f"\"{shown(last['transcript'])}\" -> {last['prediction']} "
                    f"{fmt_conf(last['confidence'])} {last['decision']}"
                    f"{' ' + last['action'] if last['action'] else ''}; label "
                    f"{last['label'] or 'none yet'}"
                    f"{' (' + last['label_source'] + ')' if last['label_source'] else ''}")
        rows.append(("last", f"#{last['id']} {last['time']}  {what}"))
    else:
        rows.append(("last", "no interaction yet"))
    rows.append(("ASR", f"configured {s.asr['configured']}, last used "
                        f"{s.asr['last_used'] or '-'}"))
    rows.append(("GPIO", f"pin factory {s.gpio['pin_factory']} (config: {s.config})"))
    devs = s.devices or []
    if devs:
        def relay(d) -> str:
            return {None: "not recorded", True: "ON", False: "OFF"}[d["relay_state"]]
        rows.append(("devices", "; ".join(
            f"{shown(d['name'])}" + (f" ({', '.join(map(shown, d['aliases']))})" if d["aliases"] else "")
            + f": relay pin {d['relay_pin']} {relay(d)}, switch pin {d['switch_pin']}" for d in devs)))
    timers = s.timers
    rows.append(("timers", "; ".join(f"#{t['id']} {shown(t['device'])} {t['action']} due "
                                     f"{short_time(t['due_ts'])}" for t in timers)
                 if timers else "none pending"))
    return rows


# --- log ------------------------------------------------------------------------------------
def shown(text: str | None) -> str:
    """Stored text for a rich table or line: control characters escaped, markup not read."""
    from rich.markup import escape  # noqa: PLC0415

    return escape(printable(text))


def _line(r) -> str:
    if r.error is not None:
        text = f"#{r.id} {short_time(r.ts)} [error] {printable(r.error)}"
    else:
        text = (f"#{r.id} {short_time(r.ts)} \"{printable(r.transcript)}\" -> {r.prediction} "
                f"{fmt_conf(r.confidence)} {did(r)}")
        text += (f" | label {r.label} ({r.label_source})" if r.label else " | no label yet")
    return text + f" | {fmt_ms(r.latency_total_ms)} ms"


def _log_table(rows, devices: dict | None = None, timers: dict | None = None):
    from rich.table import Table  # noqa: PLC0415

    from edge_plm.commands.device_inspection import short  # noqa: PLC0415

    devices = devices or {}
    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    columns = [("id", {"justify": "right"}), ("time", {}), ("transcript", {"ratio": 1}),
               ("predicted", {}), ("did", {}), ("label", {}), ("ms", {"justify": "right"})]
    if devices:  # several devices: what each one did and what its switch said
        columns.insert(6, ("devices", {}))
    for col, kw in columns:
        table.add_column(col, **kw)
    for r in rows:
        wrong = r.action is not None and r.label is not None and r.label != r.action
        lab = f"{r.label} {r.label_source}" if r.label else "-"
        cells = [str(r.id), short_time(r.ts),
                 f"[red]{shown(r.error)}[/]" if r.error else shown(r.transcript),
                 f"{r.prediction} {fmt_conf(r.confidence)}" if r.prediction else "-",
                 did(r, r.id in (timers or {})), f"[red]{lab}[/]" if wrong else lab, fmt_ms(r.latency_total_ms)]
        if devices:
            cells.insert(6, shown(short(devices[r.id])) if r.id in devices else "-")
        table.add_row(*cells)
    return table


@app.command("log")
def log_command(
    limit: Annotated[int, typer.Option("--limit", "-n", min=0, help="Most recent N (0: all).")] = 20,
    label: Annotated[Optional[LabelFilter], typer.Option(
        "--label", case_sensitive=False, help="Only this label: ON, OFF, NOOP, or none (the unlabelled ones).")] = None,
    since: SinceOpt = None,
    follow: Annotated[bool, typer.Option(
        "--follow", "-f", help="Keep printing new interactions (and labels as they arrive) until Ctrl-C.")] = False,
    interval: Annotated[float, typer.Option("--interval", min=0.01, help="Poll period of --follow (seconds).")] = 1.0,
    max_polls: Annotated[int, typer.Option(
        "--max-polls", min=0, help="Stop --follow after N polls (0: never; for scripts and tests).")] = 0,
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help=(
        "Print one JSON document on stdout; with --follow, one JSON object a line (an "
        "interaction, or a label event)."))] = False,
) -> None:
    """Recent interactions, oldest first: transcript, prediction, confidence, what the device
    did, the label and its source, total latency."""
    t_since = time_option(since, "--since")
    wanted = label.value if label is not None else None
    with opened(db, config) as (store, settings, path):
        last = max_id(store)  # before the query: a row added meanwhile is not missed
        rows = log_rows(store, limit=limit or None, label=wanted, since=t_since)
        devices = outcomes_of(store, rows)
        timers = timers_of(store, [r.id for r in rows])  # what timed commands set, and how it ended
        kinds = kinds_of(store, [r.id for r in rows])  # dimmers and questions
        if follow:
            _follow(store, rows, last, wanted, interval, max_polls, as_json)
        elif as_json:
            print_json([_record(r, devices, timers, kinds) for r in rows])
        elif not rows:
            typer.echo("no interactions" + (" matching the filters" if wanted or since else " yet"))
        else:
            console().print(_log_table(rows, devices, timers))
            for iid, ts in timers.items():
                for t in ts:
                    typer.echo(timer_line(iid, t))
            for iid, k in kinds.items():
                typer.echo(kind_line(iid, k))


def _record(r, devices: dict, timers: dict | None = None, kinds: dict | None = None) -> dict:
    """`record`, plus ``devices`` for an interaction of several devices, ``timers`` for one
    that set timers and ``kind`` for one the kind head called or was taught (a dimmer, a
    question)."""
    out = record(r)
    if r.id in devices:
        out["devices"] = device_record(devices[r.id])
    if timers and r.id in timers:
        out["timers"] = timers[r.id]
    if kinds and r.id in kinds:
        out["kind"] = kinds[r.id]
    return out


def _follow(store, rows, last: int, label, interval: float, max_polls: int, as_json: bool) -> None:
    def emit_row(r) -> None:
        if as_json:
            print_json({"event": "interaction", **record(r)})
        else:
            typer.echo(_line(r))

    pending: dict[int, None] = {}  # printed without a label yet (ordered, bounded)
    seen = {r.id for r in rows}
    for r in rows:
        emit_row(r)
        if r.label is None and r.error is None:
            pending[r.id] = None
    polls = 0
    try:
        while max_polls == 0 or polls < max_polls:
            time.sleep(interval)
            polls += 1
            for iid, (lab, src) in sorted(labels_of(store, list(pending)).items()):
                pending.pop(iid, None)
                if as_json:
                    print_json({"event": "label", "id": iid, "label": lab, "label_source": src})
                else:
                    typer.echo(f"#{iid} labelled {lab} ({src})")
            for r in rows_after(store, last, label=label):
                last = r.id
                if r.id in seen:
                    continue
                emit_row(r)
                if r.label is None and r.error is None:
                    pending[r.id] = None
            while len(pending) > 500:
                pending.pop(next(iter(pending)))
            sys.stdout.flush()
    except KeyboardInterrupt:
        pass


# --- stats ----------------------------------------------------------------------------------
@app.command("stats")
def stats_command(
    plot: Annotated[Optional[Path], typer.Option(
        "--plot", help="Also draw learning over time into this PNG (needs matplotlib: the plot extra).")] = None,
    window: Annotated[int, typer.Option("--window", min=1, help="Rolling window of the plot.")] = 10,
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Per-class counts, holdout balanced accuracy per model version, questions per day, wrong
    actions, latency percentiles."""
    if plot is not None:  # before any work: a plot that cannot be written is refused first
        from edge_plm.commands.plots import PlotPathError, PlotUnavailable, check_plot_path  # noqa: PLC0415

        try:
            check_plot_path(plot)
        except PlotUnavailable as exc:
            fail(str(exc))
        except PlotPathError as exc:
            fail(str(exc), 2)
    with opened(db, config) as (store, settings, path):
        s = stats(store)
        curve = learning_curve(store, window=window) if plot is not None else None
    if plot is not None:
        _plot(curve, plot, path)
        s["plot"] = str(plot)
    if as_json:
        print_json(s)
        return
    _print_stats(s)
    if plot is not None:
        typer.echo(f"plot written to {plot}")


def _plot(curve: dict, plot: Path, db_path: Path) -> None:
    from edge_plm.commands.plots import plot_learning  # noqa: PLC0415

    try:
        plot_learning(curve, plot, title=f"Learning on the device ({db_path.name}, "
                                         f"{curve['n']} interactions)")
    except OSError as exc:
        fail(f"cannot write {plot}: {exc}")


def _print_stats(s: dict) -> None:
    from rich.table import Table  # noqa: PLC0415

    con = console()
    con.print(f"[bold]{s['interactions']} interactions[/]")
    c = s["classes"]
    t = Table(title="classes", show_edge=False, header_style="bold")
    t.add_column("")
    keys = [*LABELS, "none"]
    for k in keys:
        t.add_column(k, justify="right")
    for name in ("label", "prediction"):
        t.add_row(name, *(str(c[name].get(k, 0)) for k in keys))
    con.print(t)
    con.print("decisions: " + ", ".join(f"{k} {v}" for k, v in c["decision"].items())
              + "   label sources: " + ", ".join(f"{k} {v}" for k, v in c["label_source"].items()
                                                  if k != "none"))
    t = Table(title="model versions (holdout balanced accuracy)", show_edge=False,
              header_style="bold")
    for col in ("version", "parent", "created", "status", "labels", "holdout n", "bal. acc.",
                "gate"):
        t.add_column(col, justify="right" if col in ("labels", "holdout n", "bal. acc.")
                     else "left")
    for v in s["versions"]:
        ba = v["balanced_accuracy"]
        t.add_row(v["version"], v["parent"] or "-", short_time(v["created_ts"]),
                  f"[red]{v['status']}[/]" if v["status"] == "rolled_back" else v["status"],
                  str(v["n_train"]), str(v["holdout_n"] if v["holdout_n"] is not None else "-"),
                  "-" if ba is None else f"{ba:.3f}", v["gate"] or "-")
    con.print(t if s["versions"] else "model versions: none yet")
    t = Table(title="per day", show_edge=False, header_style="bold")
    for col in ("date", "interactions", "asked", "acted", "ignored", "errors"):
        t.add_column(col, justify="left" if col == "date" else "right")
    for d in s["per_day"]:
        t.add_row(d["date"], *(str(d[k]) for k in ("interactions", "asked", "acted", "ignored",
                                                   "errors")))
    if s["per_day"]:
        con.print(t)
    w = s["wrong_actions"]
    rate = "-" if w["rate"] is None else f"{100 * w['rate']:.1f}%"
    con.print(f"wrong actions: {w['wrong']} of {w['acted_labelled']} labelled actions ({rate}; "
              f"{w['acted']} actions in all)")
    for r in w["recent"]:
        con.print(f"  #{r['id']} \"{shown(r['transcript'])}\": did {r['action']}, label {r['label']} "
                  f"({r['label_source']})")
    if s.get("devices"):
        con.print(_device_table(s["devices"]))
    t = Table(title="latency ms (interactions without error)", show_edge=False,
              header_style="bold")
    t.add_column("stage")
    for col in ("n", "p50", "p90", "p95", "p99", "max"):
        t.add_column(col, justify="right")
    for part, p in s["latency_ms"].items():
        t.add_row(part, str(p["n"]), *(fmt_ms(p[k]) for k in ("p50", "p90", "p95", "p99", "max")))
    con.print(t)


def _device_table(devices: dict):
    """`stats` with several devices: each device's own decisions, labels and wrong actions."""
    from rich.table import Table  # noqa: PLC0415

    t = Table(title="devices (each device's own decisions, actions and labels)", show_edge=False,
              header_style="bold")
    for col in ("device", "interactions", "acted", "asked", "ON", "OFF", "NOOP", "wrong actions"):
        t.add_column(col, justify="left" if col == "device" else "right")
    for name, d in devices.items():
        wa = d["wrong_actions"]
        t.add_row(shown(name), str(d["interactions"]), str(d["decision"].get("act", 0)),
                  str(d["decision"].get("ask", 0)), *(str(d["label"].get(k, 0)) for k in LABELS),
                  f"{wa['wrong']} of {wa['acted_labelled']}")
    return t


# --- label ----------------------------------------------------------------------------------
RebuildOpt = Annotated[bool, typer.Option(
    "--rebuild", help="Re-learn the whole model from the database instead of one gated update.")]


#: the largest interaction id SQLite can hold (a larger number is refused in one line)
MAX_ID = 2 ** 63 - 1


@app.command("label")
def label_command(
    interaction: Annotated[int, typer.Argument(metavar="ID", min=1, max=MAX_ID,
                                               help="Interaction id (see `edge-plm log`).")],
    action: Annotated[Label, typer.Argument(case_sensitive=False, metavar="ACTION",
                                            help="What it should have been: ON, OFF or NOOP.")],
    device: Annotated[Optional[str], typer.Option(
        "--device", help="Several devices: the device whose label this is (its name in [[devices]]).")] = None,
    rebuild: RebuildOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Correct the label of an interaction (source "manual"); the model learns it.

    With several devices, --device NAME says whose label it is; the interaction's label is
    then the command the devices' labels give (docs/devices.md).

    The active model is loaded and the correction replaces the earlier label in it (its
    statistics are plain sums: the old contribution is taken back, the new one added; an
    interaction the model never learned is learned), and the result goes through the holdout
    gate as a new version, like every version the service makes; a running service loads it
    by itself. --rebuild re-learns the model from the database instead (slower, no gate). A
    label of a holdout interaction changes what models are judged on; nothing is learned
    from it.
    """
    from edge_plm.commands.labelling import relabel  # noqa: PLC0415

    with opened(db, config, write=True) as (store, settings, path):
        result = relabel(store, settings, interaction, action.value, rebuild=rebuild,
                         device=device)
    if as_json:
        print_json(result.to_dict())
    elif not result.changed:
        whose = f" for {result.device}" if result.device is not None else ""
        typer.echo(f"#{result.id} is already labelled "
                   f"{result.device_label if result.device is not None else result.label}{whose} "
                   f"({result.previous['label_source']}); nothing changed")
    else:
        _print_relabel(result, rebuild)


def _print_relabel(r: Relabelled, rebuild: bool) -> None:
    version, old = r.version, r.previous["label"]
    prev = f"{old} ({r.previous['label_source']})" if old else "no label"
    typer.echo(f"#{r.id} \"{printable(r.transcript)}\": {prev} -> {r.label} (manual)"
               + (f"; {r.device}: {r.device_label}" if r.device is not None else ""))
    if r.holdout:
        typer.echo("  it is in the holdout slice: new models are judged on it; nothing learned")
    elif version and version["status"] == "rolled_back":
        typer.echo(f"  learned, but candidate {version['version']} was rolled back by the "
                   f"holdout gate: {version['reason']}")
        typer.echo("  the label is stored; the active model is unchanged. If holdout rows hold "
                   "older labels for the same words, correct them too (edge-plm log --label ...).")
    elif version:
        typer.echo(f"  learned: model {version['version']} is active ({version['reason']})")
    if r.replaced:
        typer.echo(f"  the earlier {old} was taken out of the model and replaced")
    elif r.learned and not rebuild and old is not None:
        typer.echo(f"  the model did not hold the earlier {old} as its own example (a "
                   "checkpoint from before corrections were tracked), so it may still count; "
                   "--rebuild re-learns from the database without it")
    b, a = r.prediction_before, r.prediction_after
    typer.echo(f"  prediction for these words: {b['action']} {b['confidence']:.2f} -> "
               f"{a['action']} {a['confidence']:.2f}")
    if version and version["status"] == "active":
        typer.echo(f"  note: {RESTART_NOTE}", err=True)


# --- forget ---------------------------------------------------------------------------------
def _confirmed(question: str) -> bool:
    """The person's yes; no answer at all (input from a pipe or a file that ended, Ctrl-D) is
    one ``error:`` line: nothing is forgotten without -y/--yes."""
    try:
        return typer.confirm(question, err=True)
    except typer.Abort:
        typer.echo("", err=True)
        fail("no answer (the input ended): nothing forgotten; forget without asking with "
             "-y/--yes", 1)


@app.command("forget")
def forget_command(
    ids: Annotated[Optional[list[int]], typer.Argument(metavar="ID", min=1, max=MAX_ID,
                                                       help="Interaction ids.")] = None,
    before: Annotated[Optional[str], typer.Option(
        "--before", help="Everything older than this ISO date/time or age (30d).")] = None,
    everything: Annotated[bool, typer.Option("--all", help="Every interaction.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    rebuild: Annotated[bool, typer.Option(
        "--rebuild", help="Then rebuild the model from what remains (a new active version).")] = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete interactions and their audio files (ID..., --before TIME or --all).

    The active model takes back what it learned from them as labelled examples (exactly;
    a new active version without them, gate "forget"; their words leave its vocabularies);
    --rebuild instead re-learns a model from what remains. Every other kept checkpoint is
    rewritten without them. Backups made before (`db backup` copies) are not reached."""
    from edge_plm.commands.forgetting import audio_count, forget  # noqa: PLC0415

    t_before = time_option(before, "--before")
    if as_json and not yes:
        fail("--json needs --yes (there is no one to ask)", 2)
    with opened(db, config, write=True) as (store, settings, path):
        try:
            selected = select_for_forget(store, list(ids or []), t_before, everything)
        except UserError as exc:
            fail(str(exc), 2)
        if selected and not yes and not _confirmed(
                f"forget {len(selected)} interaction(s) (ids {selected[0]}..{selected[-1]}, "
                f"{audio_count(store, selected)} audio file(s)) from {path}?"):
            typer.echo("nothing forgotten", err=True)
            raise typer.Exit(1)
        try:
            with terminable():  # SIGTERM stops like Ctrl-C
                result = forget(store, settings, path, selected, rebuild=rebuild)
        except KeyboardInterrupt as exc:  # Ctrl-C / SIGTERM: stopped; the journal says what is still owed
            code = interrupted_exit(exc)  # another Ctrl-C while this is said changes nothing
            owed = store.owed_rewrites()
            gone = not store.interaction_ids(among=selected)
            typer.echo("interrupted: " + (
                "nothing was forgotten" if not gone else
                "the interactions are forgotten and every older checkpoint is rewritten" if not owed else
                f"the interactions are forgotten; {len(owed)} older checkpoint rewrite(s) "
                "still owed are finished by the next start of the service or of a command "
                "that changes the database"), err=True)
            raise typer.Exit(code) from None
    if selected:  # a retained last decision on the home hub may hold forgotten text
        from edge_plm.bridge import clear_decision  # noqa: PLC0415

        clear_decision(settings)
    if as_json:
        print_json(result.to_dict())
    elif not selected:
        typer.echo("nothing to forget")
    else:
        _print_forgotten(result)


def _print_forgotten(result: Forgotten) -> None:
    typer.echo(f"forgot {result.deleted} interaction(s) ({result.labelled} labelled); "
               f"audio files removed: {result.audio_removed}"
               + (f" ({result.audio_missing} already gone)" if result.audio_missing else ""))
    if result.rebuilt:
        typer.echo(f"model rebuilt from the remaining data: {result.rebuilt} is active")
        typer.echo(f"  note: {RESTART_NOTE}", err=True)
    elif result.model and result.model["version"]:
        m = result.model
        typer.echo(f"the model took back the {m['forgotten']} it had learned from: "
                   f"{m['version']} is active without them")
        typer.echo(f"  note: {RESTART_NOTE}", err=True)
    files = result.checkpoints or {}
    if files.get("rewritten") or files.get("removed"):
        typer.echo(f"older checkpoints: {len(files['rewritten'])} rewritten without them"
                   + (f" ({', '.join(files['rewritten'])})" if files["rewritten"] else "")
                   + (f", {len(files['removed'])} deleted (could not be rewritten: "
                      f"{', '.join(files['removed'])})" if files["removed"] else ""))
    copies = result.other_copies
    typer.echo("backups: `db backup` copies and other copies made before this forget still hold "
               "these rows; forget does not reach them"
               + (f" (next to the database: {', '.join(copies)})" if copies else ""))


# --- export ---------------------------------------------------------------------------------
@app.command("export")
def export_command(
    fmt: Annotated[ExportFormat, typer.Option(
        "--format", case_sensitive=False,
        help="jsonl (what `edge-plm replay` reads) or csv (every column).")] = ExportFormat.jsonl,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="File (default: stdout).")] = None,
    force: ForceOpt = False,
    since: SinceOpt = None,
    labelled: Annotated[bool, typer.Option("--labelled", help=(
        "Only interactions with a label (by default every one is written, label null, or "
        "empty in csv, where none was learned)."))] = False,
    include_unlabelled: Annotated[bool, typer.Option(
        "--include-unlabelled", hidden=True, help="Accepted for old scripts: now the default.")] = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Interactions oldest first, as JSONL or CSV.

    JSONL: every interaction as a {"text", "label", ...} line (label null where the device
    never learned one) that `edge-plm replay` accepts (a null label: the simulated person does
    nothing). CSV: every row, every column. --labelled keeps only labelled ones (both formats)."""
    if labelled and include_unlabelled:
        fail("--labelled and --include-unlabelled contradict each other", 2)
    t_since = time_option(since, "--since")
    with opened(db, config) as (store, settings, path):
        rows = all_rows(store, since=t_since)
        devices = outcomes_of(store, rows) if fmt.value == "jsonl" else {}
        written, skipped = _write_export(rows, fmt.value, output, labelled, force, devices)
    where = f"to {output}" if output else "to stdout"
    note = f"; skipped {skipped} unlabelled (--labelled)" if skipped else ""
    typer.echo(f"exported {written} interaction(s) as {fmt.value} {where}{note}", err=True)


def _write_export(rows, fmt: str, output: Optional[Path], labelled: bool,
                  force: bool = False, devices: dict | None = None) -> tuple[int, int]:
    """(written, skipped): `rows` as `fmt` to `output` (a private 0600 file; an existing one
    only with `force`) or stdout."""
    if output is None:
        out, close = sys.stdout, False
    else:
        try:  # transcripts are private: 0600 like the database
            fd = os.open(output, os.O_CREAT | os.O_WRONLY | (os.O_TRUNC if force else os.O_EXCL), 0o600)
        except FileExistsError:
            fail(exists_refused(output))
        except OSError as exc:
            fail(f"cannot write {output}: {exc}")
        out, close = os.fdopen(fd, "w", encoding="utf-8", newline=""), True
    try:
        if fmt == "jsonl":
            return export_jsonl(rows, out, include_unlabelled=not labelled, devices=devices)
        return export_csv(rows, out, include_unlabelled=not labelled)
    except BrokenPipeError:  # `edge-plm export | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(0)
    finally:
        if close:
            out.close()
        else:
            out.flush()


# --- db backup ------------------------------------------------------------------------------
db_app = typer.Typer(help="The database file: consistent backups.", no_args_is_help=True)
app.add_typer(db_app, name="db")


@db_app.command("backup")
def backup_command(
    dest: Annotated[Path, typer.Argument(help="File (or directory) to write the copy to.")],
    force: ForceOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Consistent copy of the database while the service writes (SQLite online backup), then
    verified (integrity_check), with its own copy of the model checkpoints
    (<copy's stem>.checkpoints/ beside it): the copy is independent of the original."""
    quiet_logging()
    path = database_path(db, load_settings(config))
    try:
        store = open_store(path)  # same checks and messages as the other commands
        store.close()
        result = backup(path, dest, overwrite=force)
    except EXPECTED_ERRORS as exc:
        fail(str(exc))
    if as_json:
        print_json(result)
        return
    typer.echo(f"backup of {result['source']} written to {result['backup']} "
               f"({fmt_bytes(result['bytes'])}, {result['seconds']:.2f} s): "
               f"{result['interactions']} interactions, {result['model_versions']} model "
               f"versions, schema v{result['schema_version']}, integrity_check ok")
    typer.echo(f"checkpoints: {result['checkpoints_copied']} copied to {result['checkpoints']}"
               + (f" ({result['checkpoints_missing']} already gone)"
                  if result["checkpoints_missing"] else ""))
