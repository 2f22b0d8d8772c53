"""The device's local data from the CLI: `edge-plm status`, `log`, `stats`, `label`, `forget`,
`export` and `db backup` (`model ...` is in `model_cmd.py`).

Every command takes ``--db PATH`` (default: the configured state dir's database) and
``--config``; the ones that print data take ``--json`` (one JSON document on stdout; logs and
notes go to stderr). They work while the service runs: reads use a read-only connection with
a busy timeout, writes wait for the service's transactions. A missing database, a newer schema
or an unknown id is an ``error: ...`` line on stderr and exit code 1 (2 for a bad argument),
never a traceback. The queries themselves are in `edge_plm.inspection`.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, Optional

import typer

from edge_plm import inspection as q
from edge_plm.cli import OneLineFormatter, app
from edge_plm.store import LABELS, StoreError

DB_HELP = "Replay buffer (default: the configured state dir's edge-plm.db)."
CONFIG_HELP = "Config TOML (default: the usual lookup)."
JSON_HELP = "Print one JSON document on stdout."
# a running service checks the database's active version before predicting (Learner.sync)
RESTART_NOTE = ("a running service loads the new active version by itself within a few "
                "seconds (it checks the database before predicting)")


# --- shared by the data and model commands -------------------------------------------------
def fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is at the time (test runners swap it)."""

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def quiet_logging() -> None:
    """Warnings and errors of the library to stderr (stdout is for the command's output)."""
    handler = _StderrHandler()
    handler.setFormatter(OneLineFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING, force=True, handlers=[handler])


def load_settings(config: Optional[Path]):
    from edge_plm.settings import ConfigError, load  # noqa: PLC0415

    try:
        return load(config)
    except ConfigError as exc:
        fail(f"configuration: {exc}", 2)


_ERRORS = (q.DataError, StoreError, sqlite3.Error, OSError, LookupError)


@contextmanager
def opened(db: Optional[Path], config: Optional[Path], write: bool = False
           ) -> Iterator[tuple[Any, Any, Path]]:
    """(store, settings, db path); every expected failure becomes ``error: ...`` + exit 1."""
    quiet_logging()
    settings = load_settings(config)
    path = Path(db) if db is not None else settings.paths.database_path()
    try:
        store = q.open_store(path, write=write)
    except _ERRORS as exc:
        fail(str(exc))
    try:
        yield store, settings, path
    except _ERRORS as exc:
        fail(str(exc) if not isinstance(exc, sqlite3.Error) else f"database {path}: {exc}")
    finally:
        store.close()


def time_option(text: Optional[str], name: str) -> Optional[float]:
    if text is None:
        return None
    try:
        return q.parse_time(text)
    except q.DataError as exc:
        fail(f"{name}: {exc}", 2)


def print_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, ensure_ascii=False))


def console():
    """Rich console on stdout; not a terminal (a pipe, a file): 120 columns unless $COLUMNS."""
    from rich.console import Console  # noqa: PLC0415

    width = None
    if not sys.stdout.isatty() and not os.environ.get("COLUMNS"):
        width = 120
    return Console(highlight=False, width=width)


def fmt_conf(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.2f}"


def fmt_ms(x: Optional[float]) -> str:
    return "-" if x is None else (f"{x:.0f}" if x >= 100 else f"{x:.1f}")


def fmt_bytes(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return str(n)


def did(row) -> str:
    """What the device did: ``act ON``, ``ask``, ``ignore``, or ``error``."""
    if row.error is not None:
        return "error"
    if row.decision == "act":
        return f"act {row.action}" if row.action else "act (refused)"
    return row.decision or "-"


# --- status ---------------------------------------------------------------------------------
@app.command("status")
def status_command(
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    config: Optional[Path] = typer.Option(None, "--config", help=CONFIG_HELP),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Model version, counts, holdout score, last interaction, ASR, GPIO, database size."""
    with opened(db, config) as (store, settings, path):
        s = q.status(store, settings)
    if as_json:
        print_json(s)
        return
    from rich.table import Table  # noqa: PLC0415

    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    d = s["database"]
    grid.add_row("database", f"{d['path']} ({fmt_bytes(d['bytes'])}, schema v{d['schema_version']})")
    m = s["model"]
    a = m["active"]
    if a:
        grid.add_row("model", f"{a['version']} active since {a['created']} (parent "
                              f"{a['parent'] or 'none'}, {a['n_train']} labels learned); "
                              f"{m['versions']} versions, {m['rolled_back']} rolled back")
    else:
        start = settings.model.start
        grid.add_row("model", f"no active version ({m['versions']} versions): the service "
                              + ("starts from an empty model" if start == "empty"
                                 else f"starts from the starting model {start!r} (model.start)"))
    u = m["unlearned_labels"]
    grid.add_row("unlearned labels", "unknown (the active checkpoint cannot be read)" if u is None
                 else "0 (every learnable label is in the model)" if u == 0
                 else f"{u}: the model lacks them; the service learns them again when it starts")
    grid.add_row("gate", f"{m['false_rollbacks']} rollback(s) within the holdout's noise; "
                         f"{m['pruned']} checkpoint(s) pruned")
    h = s["holdout"]
    if h["balanced_accuracy"] is not None:
        hold = (f"balanced accuracy {h['balanced_accuracy']:.3f} on {h['scored_on']} rows when "
                f"{a['version']} was made ({a['gate']}); ")
    else:
        hold = "not scored yet; "
    grid.add_row("holdout", hold + f"{h['labelled_rows']} labelled rows in it now")
    i = s["interactions"]
    grid.add_row("interactions", f"{i['total']} ({i['labelled']} labelled, {i['unlabelled']} "
                                 f"unlabelled, {i['errors']} errors)")
    sources = ", ".join(f"{k} {v}" for k, v in s["label_sources"].items() if v)
    grid.add_row("labels", "  ".join(f"{k} {v}" for k, v in s["labels"].items())
                 + (f"   (by source: {sources})" if sources else ""))
    last = s["last_interaction"]
    if last:
        if last["error"]:
            what = f"error: {last['error']}"
        else:
            what = (f"\"{last['transcript']}\" -> {last['prediction']} "
                    f"{fmt_conf(last['confidence'])} {last['decision']}"
                    f"{' ' + last['action'] if last['action'] else ''}; label "
                    f"{last['label'] or 'none yet'}"
                    f"{' (' + last['label_source'] + ')' if last['label_source'] else ''}")
        grid.add_row("last", f"#{last['id']} {last['time']}  {what}")
    else:
        grid.add_row("last", "no interaction yet")
    grid.add_row("ASR", f"configured {s['asr']['configured']}, last used "
                        f"{s['asr']['last_used'] or '-'}")
    grid.add_row("GPIO", f"pin factory {s['gpio']['pin_factory']} (config: {s['config']})")
    console().print(grid)


# --- log ------------------------------------------------------------------------------------
def _line(r) -> str:
    if r.error is not None:
        text = f"#{r.id} {q.short_time(r.ts)} [error] {r.error}"
    else:
        text = (f"#{r.id} {q.short_time(r.ts)} \"{r.transcript}\" -> {r.prediction} "
                f"{fmt_conf(r.confidence)} {did(r)}")
        text += (f" | label {r.label} ({r.label_source})" if r.label else " | no label yet")
    return text + f" | {fmt_ms(r.latency_total_ms)} ms"


def _log_table(rows):
    from rich.table import Table  # noqa: PLC0415

    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    for col, kw in (("id", {"justify": "right"}), ("time", {}), ("transcript", {"ratio": 1}),
                    ("predicted", {}), ("did", {}), ("label", {}), ("ms", {"justify": "right"})):
        table.add_column(col, **kw)
    for r in rows:
        wrong = r.action is not None and r.label is not None and r.label != r.action
        lab = f"{r.label} {r.label_source}" if r.label else "-"
        table.add_row(str(r.id), q.short_time(r.ts),
                      f"[red]{r.error}[/]" if r.error else r.transcript,
                      f"{r.prediction} {fmt_conf(r.confidence)}" if r.prediction else "-",
                      did(r), f"[red]{lab}[/]" if wrong else lab, fmt_ms(r.latency_total_ms))
    return table


@app.command("log")
def log_command(
    limit: int = typer.Option(20, "--limit", "-n", min=0, help="Most recent N (0: all)."),
    label: Optional[str] = typer.Option(None, "--label", help="Only this label: ON, OFF, NOOP "
                                        "or none (unlabelled)."),
    since: Optional[str] = typer.Option(None, "--since", help="ISO date/time or age: 2h, 1d."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new interactions "
                                "(and labels as they arrive) until Ctrl-C."),
    interval: float = typer.Option(1.0, "--interval", min=0.01, help="Poll period for --follow."),
    max_polls: int = typer.Option(0, "--max-polls", min=0, help="Stop --follow after N polls "
                                  "(0: never; for scripts and tests)."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    config: Optional[Path] = typer.Option(None, "--config", help=CONFIG_HELP),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP + " With --follow: one JSON "
                                 "object per line (an interaction, or a label event)."),
) -> None:
    """Recent interactions, oldest first: transcript, prediction, confidence, what the device
    did, the label and its source, total latency."""
    t_since = time_option(since, "--since")
    if label is not None and label.lower() != "none" and label.upper() not in LABELS:
        fail(f"--label must be one of {', '.join(LABELS)} or none, got {label!r}", 2)
    with opened(db, config) as (store, settings, path):
        last = q.max_id(store)  # before the query: a row added meanwhile is not missed
        rows = q.log_rows(store, limit=limit or None, label=label, since=t_since)
        if not follow:
            if as_json:
                print_json([q.record(r) for r in rows])
            elif not rows:
                typer.echo("no interactions" + (" matching the filters" if label or since
                                                 else " yet"))
            else:
                console().print(_log_table(rows))
            return
        _follow(store, rows, last, label, interval, max_polls, as_json)


def _follow(store, rows, last: int, label, interval: float, max_polls: int, as_json: bool) -> None:
    def emit_row(r) -> None:
        if as_json:
            print_json({"event": "interaction", **q.record(r)})
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
            for iid, (lab, src) in sorted(q.labels_of(store, list(pending)).items()):
                pending.pop(iid, None)
                if as_json:
                    print_json({"event": "label", "id": iid, "label": lab, "label_source": src})
                else:
                    typer.echo(f"#{iid} labelled {lab} ({src})")
            for r in q.rows_after(store, last, label=label):
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
    plot: Optional[Path] = typer.Option(None, "--plot", help="Also draw learning over time "
                                        "into this PNG (needs matplotlib: the plot extra)."),
    window: int = typer.Option(10, "--window", min=1, help="Rolling window of the plot."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    config: Optional[Path] = typer.Option(None, "--config", help=CONFIG_HELP),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Per-class counts, holdout balanced accuracy per model version, questions per day, wrong
    actions, latency percentiles."""
    if plot is not None:
        from edge_plm.plots import PlotUnavailable, require_matplotlib  # noqa: PLC0415

        try:
            require_matplotlib()
        except PlotUnavailable as exc:
            fail(str(exc))
    with opened(db, config) as (store, settings, path):
        s = q.stats(store)
        curve = q.learning_curve(store, window=window) if plot is not None else None
    if plot is not None:
        from edge_plm.plots import plot_learning  # noqa: PLC0415

        try:
            plot_learning(curve, plot, title=f"Learning on the device ({path.name}, "
                                             f"{curve['n']} interactions)")
        except OSError as exc:
            fail(f"cannot write {plot}: {exc}")
        s["plot"] = str(plot)
    if as_json:
        print_json(s)
        return
    _print_stats(s)
    if plot is not None:
        typer.echo(f"plot written to {plot}")


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
        t.add_row(v["version"], v["parent"] or "-", q.short_time(v["created_ts"]),
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
        con.print(f"  #{r['id']} \"{r['transcript']}\": did {r['action']}, label {r['label']} "
                  f"({r['label_source']})")
    t = Table(title="latency ms (interactions without error)", show_edge=False,
              header_style="bold")
    t.add_column("stage")
    for col in ("n", "p50", "p90", "p95", "p99", "max"):
        t.add_column(col, justify="right")
    for part, p in s["latency_ms"].items():
        t.add_row(part, str(p["n"]), *(fmt_ms(p[k]) for k in ("p50", "p90", "p95", "p99", "max")))
    con.print(t)


# --- label ----------------------------------------------------------------------------------
def _pred(p) -> dict:
    return {"action": p.action, "confidence": float(p.confidence)}


@app.command("label")
def label_command(
    interaction: int = typer.Argument(..., help="Interaction id (see `edge-plm log`)."),
    action: str = typer.Argument(..., help="What it should have been: ON, OFF or NOOP."),
    rebuild: bool = typer.Option(False, "--rebuild", help="Re-learn the whole model from the "
                                 "database instead of one gated update."),
    checkpoints: Optional[Path] = typer.Option(None, "--checkpoints", help="Checkpoint dir "
                                               "(default: next to the existing ones)."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    config: Optional[Path] = typer.Option(None, "--config", help=CONFIG_HELP),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Correct the label of an interaction (source "manual"); the model learns it.

    The active model is loaded and the correction replaces the earlier label in it (its
    statistics are plain sums: the old contribution is taken back, the new one added; an
    interaction the model never learned is learned), and the result goes through the holdout
    gate as a new version, like every version the service makes; a running service loads it
    by itself. --rebuild re-learns the model from the database instead (slower, no gate). A
    label of a holdout interaction changes what models are judged on; nothing is learned
    from it.
    """
    label = action.upper()
    if label not in LABELS:
        fail(f"ACTION must be one of {', '.join(LABELS)}, got {action!r}", 2)
    with opened(db, config, write=True) as (store, settings, path):
        row = store.get(interaction)
        if row.error is not None or not row.transcript.strip():
            fail(f"interaction {interaction} has no transcript"
                 + (f" (error: {row.error})" if row.error else "") + ": nothing to label")
        result: dict[str, Any] = {
            "id": row.id, "transcript": row.transcript, "label": label, "label_source": "manual",
            "previous": {"label": row.label, "label_source": row.label_source},
            "changed": row.label != label}
        if row.label == label:
            result.update(holdout=row.holdout, learned=False, replaced=False, version=None,
                          prediction_before=None, prediction_after=None)
            if as_json:
                print_json(result)
            else:
                typer.echo(f"#{row.id} is already labelled {label} ({row.label_source}); "
                           "nothing changed")
            return
        from edge_plm.learner import Learner, LearnerConfig  # noqa: PLC0415

        cfg = LearnerConfig.from_settings(settings.model)
        ckdir = checkpoints or q.checkpoints_dir(store, path, settings.paths.checkpoints_dir)
        learner = Learner.open(store, cfg, ckdir)
        before = learner.predict(row.transcript)
        store.set_label(row.id, label, "manual")
        event = None
        replaced = False
        if rebuild:
            name = learner.rebuild_from_store()
            holdout = store.get(row.id).holdout
            learned = not holdout
            version = {"version": name, "status": "active", "reason": "rebuilt from the database"}
        else:
            outcome = learner.on_relabel(row.id, label)
            holdout, learned = outcome.holdout, not outcome.holdout
            replaced = outcome.relabelled
            version = None
            if learned:
                event = outcome.event or learner.new_version()
                version = {"version": event.version, "status": event.status,
                           "parent": event.parent, "reason": event.reason,
                           "balanced_accuracy": event.candidate.balanced_accuracy,
                           "holdout_n": event.candidate.n}
        after = learner.predict(row.transcript)
        result.update(holdout=holdout, learned=learned, replaced=replaced, version=version,
                      prediction_before=_pred(before), prediction_after=_pred(after))
    if as_json:
        print_json(result)
        return
    prev = (f"{row.label} ({row.label_source})" if row.label else "no label")
    typer.echo(f"#{row.id} \"{row.transcript}\": {prev} -> {label} (manual)")
    if holdout:
        typer.echo("  it is in the holdout slice: new models are judged on it; nothing learned")
    elif version and version["status"] == "rolled_back":
        typer.echo(f"  learned, but candidate {version['version']} was rolled back by the "
                   f"holdout gate: {version['reason']}")
        typer.echo("  the label is stored; the active model is unchanged. If holdout rows hold "
                   "older labels for the same words, correct them too (edge-plm log --label ...).")
    elif version:
        typer.echo(f"  learned: model {version['version']} is active ({version['reason']})")
    if replaced:
        typer.echo(f"  the earlier {row.label} was taken out of the model and replaced")
    elif learned and not rebuild and row.label is not None:
        typer.echo(f"  the model did not hold the earlier {row.label} as its own example (a "
                   "checkpoint from before corrections were tracked), so it may still count; "
                   "--rebuild re-learns from the database without it")
    b, a = result["prediction_before"], result["prediction_after"]
    typer.echo(f"  prediction for these words: {b['action']} {b['confidence']:.2f} -> "
               f"{a['action']} {a['confidence']:.2f}")
    if version and version["status"] == "active":
        typer.echo(f"  note: {RESTART_NOTE}", err=True)


# --- forget ---------------------------------------------------------------------------------
@app.command("forget")
def forget_command(
    ids: Optional[list[int]] = typer.Argument(None, help="Interaction ids."),
    before: Optional[str] = typer.Option(None, "--before", help="Everything older than this "
                                         "(ISO date/time or age: 30d)."),
    everything: bool = typer.Option(False, "--all", help="Every interaction."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    rebuild: bool = typer.Option(False, "--rebuild", help="Then rebuild the model from what "
                                 "remains (a new active version)."),
    checkpoints: Optional[Path] = typer.Option(None, "--checkpoints", help="Checkpoint dir "
                                               "(default: next to the existing ones)."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    config: Optional[Path] = typer.Option(None, "--config", help=CONFIG_HELP),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Delete interactions and their audio files (ID..., --before TIME or --all).

    The active model takes back what it learned from them as labelled examples (exactly;
    a new active version without them, gate "forget"; their language statistics are taken
    back too, approximately); --rebuild instead re-learns a model from what remains."""
    t_before = time_option(before, "--before")
    if as_json and not yes:
        fail("--json needs --yes (there is no one to ask)", 2)
    with opened(db, config, write=True) as (store, settings, path):
        try:
            selected = q.select_for_forget(store, list(ids or []), t_before, everything)
        except q.DataError as exc:
            fail(str(exc), 2)
        if not selected:
            if as_json:
                print_json(q.forget(store, []) | {"rebuilt": None})
            else:
                typer.echo("nothing to forget")
            return
        if not yes:
            n_audio = len(store.audio_paths(selected))
            if not typer.confirm(f"forget {len(selected)} interaction(s) (ids {selected[0]}.."
                                 f"{selected[-1]}, {n_audio} audio file(s)) from {path}?",
                                 err=True):
                typer.echo("nothing forgotten", err=True)
                raise typer.Exit(1)
        from edge_plm.learner import Learner, LearnerConfig  # noqa: PLC0415

        cfg = LearnerConfig.from_settings(settings.model)
        ckdir = checkpoints or q.checkpoints_dir(store, path, settings.paths.checkpoints_dir)
        delete = None  # no model yet: rows only (the first model is made from what remains)
        if rebuild or store.active_model_version() is not None:
            # the model as it must be (the active version plus what it lacks), then rows and
            # the model's part in one transaction (Learner.forget_interactions)
            learner = (Learner(store, cfg, ckdir) if rebuild else Learner.open(store, cfg, ckdir))
            delete = lambda ids: learner.forget_interactions(ids, rebuild=rebuild)  # noqa: E731
        result = q.forget(store, selected, delete=delete)
        out = result.pop("outcome")
        result["rebuilt"] = out.version if rebuild else None
        result["model"] = None
        if delete is not None and not rebuild:
            result["model"] = {"forgotten": len(out.forgotten),
                               "not_in_model": len(out.not_in_model), "version": out.version}
    if as_json:
        print_json(result)
        return
    typer.echo(f"forgot {result['deleted']} interaction(s) ({result['labelled']} labelled); "
               f"audio files removed: {result['audio_removed']}"
               + (f" ({result['audio_missing']} already gone)" if result["audio_missing"] else ""))
    if result["rebuilt"]:
        typer.echo(f"model rebuilt from the remaining data: {result['rebuilt']} is active")
        typer.echo("  older versions (their checkpoints) still hold what they learned from the "
                   "forgotten rows; they stay available for `edge-plm model rollback`")
        typer.echo(f"  note: {RESTART_NOTE}", err=True)
    elif result["model"] and result["model"]["version"]:
        m = result["model"]
        typer.echo(f"the model took back the {m['forgotten']} it had learned from: "
                   f"{m['version']} is active without them")
        typer.echo("  older versions (their checkpoints) still hold them; `edge-plm model "
                   "rebuild` (or forget with --rebuild) makes a model from what remains only")
        typer.echo(f"  note: {RESTART_NOTE}", err=True)
    elif result["learned_by_models"]:
        typer.echo(f"the model versions still hold what they learned from "
                   f"{result['learned_by_models']} of these rows: `edge-plm model rebuild` (or "
                   "forget with --rebuild) makes a model from what remains")


# --- export ---------------------------------------------------------------------------------
@app.command("export")
def export_command(
    fmt: str = typer.Option("jsonl", "--format", help="jsonl (what `edge-plm replay` reads) "
                            "or csv (every column)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="File (default: stdout)."),
    since: Optional[str] = typer.Option(None, "--since", help="ISO date/time or age: 2h, 1d."),
    labelled: bool = typer.Option(False, "--labelled", help="jsonl: only interactions with a "
                                  "label (by default every one is written, label null where "
                                  "none was learned)."),
    include_unlabelled: bool = typer.Option(False, "--include-unlabelled", hidden=True,
                                            help="Accepted for old scripts: now the default."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    config: Optional[Path] = typer.Option(None, "--config", help=CONFIG_HELP),
) -> None:
    """Interactions oldest first. JSONL: every interaction as a {"text", "label", ...} line
    (label null where the device never learned one) that `edge-plm replay` accepts (a null
    label: the simulated person does nothing); --labelled keeps only labelled ones. CSV: every
    row, every column."""
    fmt = fmt.lower()
    if fmt not in ("jsonl", "csv"):
        fail(f"--format must be jsonl or csv, got {fmt!r}", 2)
    if labelled and include_unlabelled:
        fail("--labelled and --include-unlabelled contradict each other", 2)
    t_since = time_option(since, "--since")
    with opened(db, config) as (store, settings, path):
        rows = q.all_rows(store, since=t_since)
        if output is None:
            out, close = sys.stdout, False
        else:
            try:  # transcripts are private: 0600 like the database
                fd = os.open(output, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
            except OSError as exc:
                fail(f"cannot write {output}: {exc}")
            out, close = os.fdopen(fd, "w", encoding="utf-8", newline=""), True
        try:
            if fmt == "jsonl":
                written, skipped = q.export_jsonl(rows, out, include_unlabelled=not labelled)
            else:
                written, skipped = q.export_csv(rows, out), 0
        except BrokenPipeError:  # `edge-plm export | head`: the reader has what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(0)
        finally:
            if close:
                out.close()
            else:
                out.flush()
    where = f"to {output}" if output else "to stdout"
    note = f"; skipped {skipped} unlabelled (--labelled)" if skipped else ""
    typer.echo(f"exported {written} interaction(s) as {fmt} {where}{note}", err=True)


# --- db backup ------------------------------------------------------------------------------
db_app = typer.Typer(help="The database file: consistent backups.", no_args_is_help=True)
app.add_typer(db_app, name="db")


@db_app.command("backup")
def backup_command(
    dest: Path = typer.Argument(..., help="File (or directory) to write the copy to."),
    force: bool = typer.Option(False, "--force", help="Overwrite DEST if it exists."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    config: Optional[Path] = typer.Option(None, "--config", help=CONFIG_HELP),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Consistent copy of the database while the service writes (SQLite online backup), then
    verified (integrity_check). Model checkpoints are not copied: `model rebuild` remakes
    a model from the database."""
    quiet_logging()
    settings = load_settings(config)
    path = Path(db) if db is not None else settings.paths.database_path()
    try:
        store = q.open_store(path)  # same checks and messages as the other commands
        store.close()
        result = q.backup(path, dest, overwrite=force)
    except _ERRORS as exc:
        fail(str(exc))
    if as_json:
        print_json(result)
        return
    typer.echo(f"backup of {result['source']} written to {result['backup']} "
               f"({fmt_bytes(result['bytes'])}, {result['seconds']:.2f} s): "
               f"{result['interactions']} interactions, {result['model_versions']} model "
               f"versions, schema v{result['schema_version']}, integrity_check ok")
