"""`edge-plm train`: desktop trainer of the SAFFU language model (warm -> freeze -> thaw)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from edge_plm.cli import app


@app.command("train")
def train_command(
    config: str = typer.Option("orange", "--config", help="Language-model config: orange (char) | medium (BPE 16K)."),
    corpus: Path = typer.Option(..., "--corpus", help="UTF-8 text; paragraphs separated by blank lines."),
    val: Path = typer.Option(None, "--val", help="Validation text (default: the last 10% of the corpus)."),
    out: Path = typer.Option(Path("runs/lm"), "--out", help="Directory for checkpoint.npz and train_log.json."),
    resume: bool = typer.Option(False, "--resume", help="Continue from OUT/checkpoint.npz if present."),
    steps: int = typer.Option(None, "--steps", help="Optimisation steps (after the warm start)."),
    time_budget: float = typer.Option(None, "--time-budget", help="Training seconds (warm start included)."),
    threads: int = typer.Option(1, "--threads", help="BLAS and Numba threads."),
    set_: list[str] = typer.Option([], "--set", help="Config override KEY=VALUE (repeatable)."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar; print the summary as JSON."),
) -> None:
    """Explicit warm start, then Adam with frozen embeddings, then thawed embeddings."""
    from edge_plm.plm.checkpoint import CheckpointError
    from edge_plm.plm.lm_config import LM_CONFIGS, LMConfig, get_lm_config
    from edge_plm.plm.trainer import Trainer

    if config not in LM_CONFIGS:
        typer.echo(f"error: unknown config {config!r} (known: {', '.join(LM_CONFIGS)})", err=True)
        raise typer.Exit(2)
    if steps is None and time_budget is None:
        typer.echo("error: give --steps and/or --time-budget", err=True)
        raise typer.Exit(2)
    overrides = {}
    fields = {f.name: f.type for f in LMConfig.__dataclass_fields__.values()}
    for item in set_:
        key, _, value = item.partition("=")
        if key not in fields or key == "name":
            typer.echo(f"error: unknown config field {key!r}", err=True)
            raise typer.Exit(2)
        cur = getattr(LM_CONFIGS[config], key)
        overrides[key] = tuple(int(v) for v in value.split(",")) if isinstance(cur, tuple) else type(cur)(value)
    try:
        cfg = get_lm_config(config, **overrides)
        trainer = Trainer(cfg, corpus, out, val=val, steps=steps, time_budget=time_budget, resume=resume,
                          threads=threads, progress=not quiet)
        log = trainer.run()
    except (FileNotFoundError, CheckpointError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    summary = log["summary"]
    if quiet:
        typer.echo(json.dumps(summary))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{cfg.name}: {log['params']:,} parameters, vocabulary {log['vocab']}")
    for col in ("phase", "step", "train s", "val loss", "val ppl"):
        table.add_column(col, justify="right")
    for tag, rec in log["phases"].items():
        table.add_row(tag, str(rec["step"]), f"{rec['train_seconds']:.1f}", f"{rec['val_loss']:.4f}", f"{rec['val_ppl']:.2f}")
    console = Console()
    console.print(table)
    console.print(f"{summary['tokens_per_second']:.0f} tokens/s; cache rebuilt {summary['cache_rebuilds']} times "
                  f"({summary['cache_rebuild_seconds']:.2f} s); checkpoint {out / 'checkpoint.npz'}")
