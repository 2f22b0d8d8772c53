"""`edge-plm eval`: learning curve of a model (empty, or a checkpoint with --init) fed a labelled
file (docs/design.md §4)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from edge_plm.cli import app


@app.command("eval")
def eval_command(
    train: Path = typer.Option(..., "--train", help="Labelled JSONL fed in file order."),
    test: Path = typer.Option(..., "--test", help="Labelled JSONL scored after each budget."),
    budgets: str = typer.Option("10,20,50,100,200", help="Comma-separated numbers of examples (0: before any label)."),
    model_config: Optional[str] = typer.Option(
        None, "--model-config", help="Model configuration (default potato; with --init: the checkpoint's)."),
    init: Optional[Path] = typer.Option(None, "--init", help="Start from this switch-model checkpoint instead of an empty model."),
    config: Optional[str] = typer.Option(None, "--config", hidden=True, help="Deprecated alias of --model-config."),
    seed: int = typer.Option(0, help="Seed of the replay sampling."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object on stdout."),
) -> None:
    """Start from an empty model (or --init CKPT), learn TRAIN online, score TEST after each budget."""
    from edge_plm.evaluation import DataError, load_init, parse_budgets, read_labelled_jsonl, run_eval
    from edge_plm.plm.config import CONFIGS

    def fail(msg: str) -> None:
        typer.echo(f"error: {msg}", err=True)
        raise typer.Exit(2)

    if config is not None:  # before --model-config existed, --config named the configuration
        if config not in CONFIGS:
            fail(f"--config is the TOML configuration file; name the model configuration with "
                 f"--model-config (known: {', '.join(CONFIGS)}), got {config!r}")
        if model_config is not None and model_config != config:
            fail("give the model configuration once, with --model-config")
        typer.echo("warning: `eval --config NAME` is deprecated; use --model-config NAME", err=True)
        model_config = config
    if model_config is not None and model_config not in CONFIGS:
        fail(f"unknown model config {model_config!r} (known: {', '.join(CONFIGS)})")
    try:
        train_rows, test_rows = read_labelled_jsonl(train), read_labelled_jsonl(test)
        budget_list = parse_budgets(budgets)
        start = load_init(init, model_config) if init is not None else None
    except DataError as exc:
        fail(str(exc))
    config = model_config or "potato"
    if as_json:
        result = run_eval(train_rows, test_rows, budget_list, config=config, seed=seed, init=start)
        sys.stdout.write(json.dumps(result) + "\n")
        return
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    with Progress(transient=True) as bar:
        task = bar.add_task("learning", total=min(len(train_rows), max(budget_list)))
        result = run_eval(train_rows, test_rows, budget_list, config=config, seed=seed, init=start,
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
