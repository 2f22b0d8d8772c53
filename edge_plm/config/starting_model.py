"""Where a device's model starts (the ``model.start`` setting, docs/deploy.md):

- ``"switch-en"`` (default) — the shipped English starting model, a potato switch model trained
  on a desktop from public data (models/README.md); installed with the package as
  ``edge_plm/data/models/switch-en.npz``;
- ``"empty"`` — an empty model: the device learns everything from its owner;
- a path — any switch-model checkpoint (``edge-plm train switch`` writes one).

The starting model is only where learning starts: the device's versions, rebuilds and
rollbacks all descend from it, and every label of the household is learned on top of it.
"""

from __future__ import annotations

from pathlib import Path

from edge_plm.errors import EdgePlmError

SHIPPED_DIR = Path(__file__).resolve().parents[1] / "data" / "models"
SHIPPED = {"switch-en": "potato"}  # shipped starting models and their configuration
EMPTY = "empty"


class StartError(EdgePlmError, LookupError):
    """``model.start`` names no usable starting model (a LookupError: the CLI's data commands
    report it as a one-line error like any missing thing)."""


def shipped_path(name: str) -> Path:
    return SHIPPED_DIR / f"{name}.npz"


def resolve(start: str, check: bool = True) -> Path | None:
    """The checkpoint a device starts from (None: an empty model). A shipped name must be
    installed; a path must exist when `check` (whether it loads is checked when it is loaded,
    and the learner loads it only when it needs it: a device with saved versions does not)."""
    start = start.strip()
    if not start:
        raise StartError('model.start is empty; use "switch-en", "empty" or a checkpoint path')
    if start == EMPTY:
        return None
    if start in SHIPPED:
        path = shipped_path(start)
        if not path.is_file():
            raise StartError(f"the shipped starting model {start!r} is not installed ({path} missing); "
                             'reinstall edge-plm or set model.start = "empty"')
        return path
    path = Path(start).expanduser()
    if check and not path.is_file():
        known = ", ".join(f'"{n}"' for n in (*SHIPPED, EMPTY))
        raise StartError(f"model.start {start!r}: no such checkpoint file (or use {known})")
    return path


def check_config(start: str, model_config: str) -> None:
    """A shipped starting model must match ``model.config`` (a path is checked on load)."""
    want = SHIPPED.get(start.strip())
    if want is not None and want != model_config:
        raise StartError(f'model.start = "{start}" is a {want} model but model.config is "{model_config}"; '
                         f'set model.start = "empty" or the path of a {model_config} checkpoint '
                         f"(edge-plm train switch --model-config {model_config})")
