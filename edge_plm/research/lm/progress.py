"""Rich progress bar of the trainer: phase, steps (or seconds), tokens/s, loss, ETA."""

from __future__ import annotations

import contextlib


class _Null:
    def update(self, trainer, loss) -> None:
        pass


@contextlib.contextmanager
def make_progress(enabled: bool, steps: int | None, time_budget: float | None):
    if not enabled:
        yield _Null()
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    by_steps = steps is not None
    cols = [TextColumn("[bold]{task.fields[phase]}"), BarColumn(),
            TextColumn("{task.completed:.0f}/{task.total:.0f} " + ("steps" if by_steps else "s")),
            TextColumn("{task.fields[tps]:>8.0f} tok/s"), TextColumn("loss {task.fields[loss]:.3f}"),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn()]
    with Progress(*cols) as prog:
        task = prog.add_task("train", total=steps if by_steps else time_budget, phase="freeze", tps=0.0, loss=0.0)

        class _Bar:
            ema = None

            def update(self, tr, loss):
                self.ema = loss if self.ema is None else 0.98 * self.ema + 0.02 * loss
                warm = tr.log.get("warm_start", {}).get("seconds", 0.0)
                tps = tr.tokens / max(tr.train_seconds - warm, 1e-9)
                done = tr.step if by_steps else min(tr.train_seconds, time_budget)
                prog.update(task, completed=done, phase="thaw" if tr.thaw_step is not None else "freeze",
                            tps=tps, loss=self.ema)

        yield _Bar()
