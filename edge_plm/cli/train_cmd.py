"""`edge-plm train switch|lm`: desktop trainers.

- ``train switch`` trains a switch model (the device's own configurations, potato / orange) on a
  labelled JSONL file: explicit warm start, then gradient epochs with frozen and thawed
  embeddings and early stopping on ``--val`` (edge_plm/switch_training.py). It writes
  ``OUT/checkpoint.npz`` in the device's checkpoint format (`edge-plm model import` takes it).
- ``train lm`` trains the SAFFU language model on a text corpus (warm -> freeze -> thaw).

``--model-config`` names the model configuration; ``--config`` is the TOML file in every command.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from edge_plm.cli import app

train_app = typer.Typer(help="Desktop trainers: switch models for the device, language models.",
                        no_args_is_help=True)
app.add_typer(train_app, name="train")

NAME_MOVED = "--config is the TOML configuration file; name the model configuration with --model-config"


def _no_config_name(config: Optional[str]) -> None:
    if config is not None:
        typer.echo(f"error: {NAME_MOVED}", err=True)
        raise typer.Exit(2)


@train_app.command("switch")
def switch_command(
    model_config: str = typer.Option("potato", "--model-config", help="Switch-model configuration: potato | orange."),
    data: Path = typer.Option(..., "--data", help="Labelled JSONL (lines as `replay`/`export` write them)."),
    val: Optional[Path] = typer.Option(None, "--val", help="Labelled JSONL for early stopping (none: no early stopping)."),
    out: Path = typer.Option(Path("runs/switch"), "--out", help="Directory for checkpoint.npz and train_log.json."),
    time_budget: Optional[float] = typer.Option(None, "--time-budget", help="Training seconds (warm start included)."),
    steps: Optional[int] = typer.Option(None, "--steps", help="Gradient steps (checked after each epoch)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in OUT."),
    seed: int = typer.Option(0, "--seed", help="Model seed and epoch-order seed."),
    epochs: int = typer.Option(30, "--epochs", min=0, help="Most epochs per phase (frozen, thawed)."),
    patience: int = typer.Option(4, "--patience", min=1, help="Epochs without a better --val score before a phase ends."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as one JSON object."),
    config: Optional[str] = typer.Option(None, "--config", hidden=True),
) -> None:
    """Warm start + gradient training of a switch model -> OUT/checkpoint.npz (a device checkpoint)."""
    _no_config_name(config)
    from edge_plm.plm.checkpoint import CheckpointError
    from edge_plm.plm.config import CONFIGS
    from edge_plm.switch_training import SwitchTrainConfig, SwitchTrainer, TrainDataError

    if model_config not in CONFIGS:
        typer.echo(f"error: unknown model config {model_config!r} (known: {', '.join(CONFIGS)})", err=True)
        raise typer.Exit(2)
    if steps is not None and steps < 0 or time_budget is not None and time_budget < 0:
        typer.echo("error: --steps and --time-budget must be >= 0", err=True)
        raise typer.Exit(2)
    cfg = SwitchTrainConfig(model_config=model_config, seed=seed, max_epochs=epochs, patience=patience,
                            steps=steps, time_budget=time_budget)

    def show(rec: dict) -> None:
        if not as_json:
            v = rec.get("val")
            typer.echo(f"{rec['phase']:>6} epoch {rec['epoch']:>3}  steps {rec['steps']:>5}  "
                       f"loss {rec['train_loss']:.4f}"
                       + (f"  val bal.acc {v['balanced_accuracy']:.3f} loss {v['loss']:.4f}"
                          f"{'  *' if rec.get('best') else ''}" if v else ""), err=True)

    try:
        log = SwitchTrainer(cfg, data, out, val=val, resume=resume, progress=show).run()
    except (TrainDataError, CheckpointError, ValueError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    s = log["summary"]
    if as_json:
        typer.echo(json.dumps(s))
        return
    v = s["val"]
    typer.echo(f"{s['config']} switch model ({s['params']:,} parameters, {s['labelled']} labelled examples), "
               f"{s['steps']} gradient steps in {s['seconds']:.1f} s"
               + (f"; best validation balanced accuracy {v['balanced_accuracy']:.3f}" if v else "")
               + f"; checkpoint {s['checkpoint']}")


@train_app.command("lm")
def lm_command(
    model_config: str = typer.Option("orange", "--model-config", help="Language-model config: orange (char) | medium (BPE 16K)."),
    corpus: Path = typer.Option(..., "--corpus", help="UTF-8 text; paragraphs separated by blank lines."),
    val: Path = typer.Option(None, "--val", help="Validation text (default: the last 10% of the corpus)."),
    out: Path = typer.Option(Path("runs/lm"), "--out", help="Directory for checkpoint.npz and train_log.json."),
    resume: bool = typer.Option(False, "--resume", help="Continue from OUT/checkpoint.npz if present."),
    steps: int = typer.Option(None, "--steps", help="Optimisation steps (after the warm start)."),
    time_budget: float = typer.Option(None, "--time-budget", help="Training seconds (warm start included)."),
    threads: int = typer.Option(1, "--threads", help="BLAS and Numba threads."),
    set_: list[str] = typer.Option([], "--set", help="Config override KEY=VALUE (repeatable)."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar; print the summary as JSON."),
    config: Optional[str] = typer.Option(None, "--config", hidden=True),
) -> None:
    """Language model: explicit warm start, then Adam with frozen embeddings, then thawed embeddings."""
    _no_config_name(config)
    from edge_plm.plm.checkpoint import CheckpointError
    from edge_plm.plm.lm_config import LM_CONFIGS, LMConfig, get_lm_config
    from edge_plm.plm.trainer import Trainer

    if model_config not in LM_CONFIGS:
        typer.echo(f"error: unknown model config {model_config!r} (known: {', '.join(LM_CONFIGS)})", err=True)
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
        cur = getattr(LM_CONFIGS[model_config], key)
        overrides[key] = tuple(int(v) for v in value.split(",")) if isinstance(cur, tuple) else type(cur)(value)
    try:
        cfg = get_lm_config(model_config, **overrides)
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
