"""`edge-plm train switch|lm`: desktop trainers.

- ``train switch`` trains a switch model (the device's own configurations, potato / orange) on a
  labelled JSONL file: explicit warm start, then gradient epochs with frozen and thawed
  embeddings and early stopping on ``--val`` (edge_plm/commands/switch_training.py). It writes
  ``OUT/checkpoint.npz`` in the device's checkpoint format (`edge-plm model import` takes it).
- ``train lm`` trains the SAFFU language model on a text corpus (warm -> freeze -> thaw).

``--model-config`` names the model configuration; ``--config`` is the TOML file in every command.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from edge_plm.cli.common import LMModelConfig, OldConfigNameOpt, SwitchModelConfig, fail, no_config_name
from edge_plm.cli.root import app

train_app = typer.Typer(help="Desktop trainers: switch models for the device, language models.",
                        no_args_is_help=True)
app.add_typer(train_app, name="train")

OutOpt = Annotated[Path, typer.Option("--out", help="Directory for checkpoint.npz and train_log.json.")]
TimeBudgetOpt = Annotated[Optional[float], typer.Option(
    "--time-budget", help="Training seconds (warm start included).")]


@train_app.command("switch")
def switch_command(
    data: Annotated[Path, typer.Option("--data", help="Labelled JSONL (lines as `replay` and `export` write them).")],
    model_config: Annotated[SwitchModelConfig, typer.Option(
        "--model-config", help="Switch-model configuration.")] = SwitchModelConfig.potato,
    val: Annotated[Optional[Path], typer.Option(
        "--val", help="Labelled JSONL for early stopping (none: no early stopping).")] = None,
    out: OutOpt = Path("runs/switch"),
    time_budget: TimeBudgetOpt = None,
    steps: Annotated[Optional[int], typer.Option("--steps", help="Gradient steps (checked after each epoch).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run in OUT.")] = False,
    seed: Annotated[int, typer.Option("--seed", help="Model seed and epoch-order seed.")] = 0,
    epochs: Annotated[int, typer.Option("--epochs", min=0, help="Most epochs of refinement.")] = 30,
    patience: Annotated[int, typer.Option(
        "--patience", min=1, help="Epochs without a better --val score before training stops.")] = 4,
    slot_word: Annotated[str, typer.Option(
        "--slot-word", help="The word DATA uses for a device's name (\"turn on the xqz\"): with several "
        "devices the model reads a command with the name replaced by it (default: none, the name's "
        "words are left out).")] = "",
    set_: Annotated[Optional[list[str]], typer.Option(
        "--set", help="Model-configuration override KEY=VALUE (repeatable; e.g. bigram_weight=0).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as one JSON object.")] = False,
    config: OldConfigNameOpt = None,
) -> None:
    """Warm start + gradient training of a switch model -> OUT/checkpoint.npz (a device checkpoint)."""
    no_config_name(config)
    from edge_plm.plm.checkpoint import CheckpointError
    from edge_plm.commands.switch_training import SwitchTrainConfig, SwitchTrainer, TrainDataError, switch_overrides
    from edge_plm.switch.tokenizer import normalize

    if steps is not None and steps < 0 or time_budget is not None and time_budget < 0:
        fail("--steps and --time-budget must be >= 0", 2)
    if slot_word and (normalize(slot_word) != slot_word or " " in slot_word):
        fail(f"--slot-word must be one lower-case word of letters or digits, got {slot_word!r}", 2)
    try:
        overrides = switch_overrides(set_ or [])
    except ValueError as exc:
        fail(f"--set: {exc}", 2)
    cfg = SwitchTrainConfig(model_config=model_config.value, seed=seed, max_epochs=epochs,
                            patience=patience, steps=steps, time_budget=time_budget, slot_word=slot_word,
                            overrides=overrides)
    try:
        log = SwitchTrainer(cfg, data, out, val=val, resume=resume,
                            progress=None if as_json else _show_epoch).run()
    except (TrainDataError, CheckpointError, ValueError, OSError) as exc:
        fail(str(exc), 2)
    s = log["summary"]
    if as_json:
        typer.echo(json.dumps(s))
        return
    v = s["val"]
    typer.echo(f"{s['config']} switch model ({s['params']:,} parameters, {s['labelled']} labelled examples), "
               f"{s['steps']} gradient steps in {s['seconds']:.1f} s"
               + (f"; best validation balanced accuracy {v['balanced_accuracy']:.3f}" if v else "")
               + f"; checkpoint {s['checkpoint']}")


def _show_epoch(rec: dict) -> None:
    v = rec.get("val")
    typer.echo(f"{rec['phase']:>6} epoch {rec['epoch']:>3}  steps {rec['steps']:>5}  "
               f"loss {rec['train_loss']:.4f}"
               + (f"  val bal.acc {v['balanced_accuracy']:.3f} loss {v['loss']:.4f}"
                  f"{'  *' if rec.get('best') else ''}" if v else ""), err=True)


@train_app.command("lm")
def lm_command(
    corpus: Annotated[Path, typer.Option("--corpus", help="UTF-8 text; paragraphs separated by blank lines.")],
    model_config: Annotated[LMModelConfig, typer.Option(
        "--model-config", help="Language-model configuration: char (characters) or bpe16k (byte-level BPE, 16K tokens).")
    ] = LMModelConfig.char,
    val: Annotated[Optional[Path], typer.Option(
        "--val", help="Validation text (default: the last 10% of the corpus).")] = None,
    out: OutOpt = Path("runs/lm"),
    resume: Annotated[bool, typer.Option("--resume", help="Continue from OUT/checkpoint.npz if present.")] = False,
    steps: Annotated[Optional[int], typer.Option("--steps", help="Optimisation steps (after the warm start).")] = None,
    time_budget: TimeBudgetOpt = None,
    threads: Annotated[int, typer.Option("--threads", help="BLAS and Numba threads.")] = 1,
    set_: Annotated[Optional[list[str]], typer.Option(
        "--set", help="Config override KEY=VALUE (repeatable).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar; print the summary as JSON.")] = False,
    config: OldConfigNameOpt = None,
) -> None:
    """Language model: explicit warm start, then Adam with frozen embeddings, then thawed embeddings."""
    no_config_name(config)
    from edge_plm.plm.checkpoint import CheckpointError
    from edge_plm.research.lm.config import get_lm_config
    from edge_plm.research.lm.trainer import Trainer

    if steps is None and time_budget is None:
        fail("give --steps and/or --time-budget", 2)
    overrides = _lm_overrides(model_config.value, set_ or [])
    try:
        cfg = get_lm_config(model_config.value, **overrides)
        trainer = Trainer(cfg, corpus, out, val=val, steps=steps, time_budget=time_budget, resume=resume,
                          threads=threads, progress=not quiet)
        log = trainer.run()
    except (FileNotFoundError, CheckpointError, ValueError) as exc:
        fail(str(exc), 2)
    if quiet:
        typer.echo(json.dumps(log["summary"]))
        return
    _print_lm_log(cfg.name, log, out)


def _lm_overrides(model_config: str, items: list[str]) -> dict:
    """``--set KEY=VALUE`` items as typed fields of the language-model configuration."""
    from edge_plm.config.overrides import typed_overrides
    from edge_plm.research.lm.config import LM_CONFIGS

    try:
        return typed_overrides(LM_CONFIGS[model_config], items)
    except ValueError as exc:
        fail(f"--set: {exc}", 2)


def _print_lm_log(name: str, log: dict, out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    summary = log["summary"]
    table = Table(title=f"{name}: {log['params']:,} parameters, vocabulary {log['vocab']}")
    for col in ("phase", "step", "train s", "val loss", "val ppl"):
        table.add_column(col, justify="right")
    for tag, rec in log["phases"].items():
        table.add_row(tag, str(rec["step"]), f"{rec['train_seconds']:.1f}", f"{rec['val_loss']:.4f}", f"{rec['val_ppl']:.2f}")
    console = Console()
    console.print(table)
    console.print(f"{summary['tokens_per_second']:.0f} tokens/s; cache rebuilt {summary['cache_rebuilds']} times "
                  f"({summary['cache_rebuild_seconds']:.2f} s); checkpoint {out / 'checkpoint.npz'}")
