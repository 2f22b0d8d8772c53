"""`edge-plm eval`: learning curve of an empty model fed a labelled file (DESIGN.md §4)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from edge_plm.cli import app


@app.command("eval")
def eval_command(
    train: Path = typer.Option(..., "--train", help="Labelled JSONL fed in file order."),
    test: Path = typer.Option(..., "--test", help="Labelled JSONL scored after each budget."),
    budgets: str = typer.Option("10,20,50,100,200", help="Comma-separated numbers of examples."),
    config: str = typer.Option("potato", help="Model configuration."),
    seed: int = typer.Option(0, help="Seed of the replay sampling."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object on stdout."),
) -> None:
    """Start from an empty model, learn TRAIN online, score TEST after each budget."""
    from edge_plm.evaluation import DataError, parse_budgets, read_labelled_jsonl, run_eval
    from edge_plm.plm.config import CONFIGS

    if config not in CONFIGS:
        typer.echo(f"error: unknown config {config!r} (known: {', '.join(CONFIGS)})", err=True)
        raise typer.Exit(2)
    try:
        train_rows, test_rows = read_labelled_jsonl(train), read_labelled_jsonl(test)
        budget_list = parse_budgets(budgets)
    except DataError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    if as_json:
        result = run_eval(train_rows, test_rows, budget_list, config=config, seed=seed)
        sys.stdout.write(json.dumps(result) + "\n")
        return
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    with Progress(transient=True) as bar:
        task = bar.add_task("learning", total=min(len(train_rows), max(budget_list)))
        result = run_eval(train_rows, test_rows, budget_list, config=config, seed=seed,
                          progress=lambda: bar.advance(task))
    table = Table(title=f"{result['config']} ({result['params']:,} parameters)")
    for col in ("n", "balanced accuracy", "accuracy"):
        table.add_column(col, justify="right")
    for b in result["budgets"]:
        table.add_row(str(b["n"]), f"{b['balanced_accuracy']:.3f}", f"{b['accuracy']:.3f}")
    console = Console()
    console.print(table)
    console.print(f"predict ms: median {result['predict_ms']['median']:.2f}, p95 {result['predict_ms']['p95']:.2f}; "
                  f"update ms: median {result['update_ms']['median']:.2f}, p95 {result['update_ms']['p95']:.2f}")
