"""`edge-plm eval`: learning curve of a model (empty, or a checkpoint with --init) fed a labelled
file (docs/contracts.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from edge_plm.cli.common import OldConfigNameOpt, SwitchModelConfig, fail, no_config_name
from edge_plm.cli.root import app


@app.command("eval")
def eval_command(
    train: Annotated[Path, typer.Option("--train", help="Labelled JSONL fed in file order.")],
    test: Annotated[Path, typer.Option("--test", help="Labelled JSONL scored after each budget.")],
    budgets: Annotated[str, typer.Option(
        help="Comma-separated numbers of examples (0: before any label).")] = "10,20,50,100,200",
    model_config: Annotated[Optional[SwitchModelConfig], typer.Option(
        "--model-config", help="Model configuration (default potato; with --init: the checkpoint's).")] = None,
    init: Annotated[Optional[Path], typer.Option(
        "--init", help="Start from this switch-model checkpoint instead of an empty model.")] = None,
    config: OldConfigNameOpt = None,
    seed: Annotated[int, typer.Option(help="Seed of the replay sampling.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")] = False,
) -> None:
    """Start from an empty model (or --init CKPT), learn TRAIN online, score TEST after each budget."""
    from edge_plm.learning.evaluation import (EvalDataError, devices_of, load_init, parse_budgets, read_labelled_jsonl,
                                     run_eval)

    no_config_name(config)
    name = model_config.value if model_config else None
    try:
        train_rows, test_rows = read_labelled_jsonl(train), read_labelled_jsonl(test)
        devices_of(train_rows, test_rows)  # lines naming several devices must all name one
        budget_list = parse_budgets(budgets)
        start = load_init(init, name) if init is not None else None
    except EvalDataError as exc:
        fail(str(exc), 2)
    if as_json:
        result = run_eval(train_rows, test_rows, budget_list, config=name or "potato", seed=seed, init=start)
        sys.stdout.write(json.dumps(result) + "\n")
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task("learning", total=min(len(train_rows), max(budget_list)))
        result = run_eval(train_rows, test_rows, budget_list, config=name or "potato", seed=seed,
                          init=start, progress=lambda: bar.advance(task))
    _print_curve(result)


def _print_curve(result: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{result['config']} ({result['params']:,} parameters)")
    devices = result.get("devices", [])
    for col in ("n", "balanced accuracy", "accuracy", *(f"{d} bal. acc." for d in devices)):
        table.add_column(col, justify="right")
    for b in result["budgets"]:
        per = [f"{b['devices'][d]['balanced_accuracy']:.3f}" if d in b["devices"] else "-" for d in devices]
        table.add_row(str(b["n"]), f"{b['balanced_accuracy']:.3f}", f"{b['accuracy']:.3f}", *per)
    console = Console()
    console.print(table)
    console.print(f"predict ms: median {result['predict_ms']['median']:.2f}, p95 {result['predict_ms']['p95']:.2f}; "
                  f"update ms: median {result['update_ms']['median']:.2f}, p95 {result['update_ms']['p95']:.2f}")
