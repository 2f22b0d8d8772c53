"""Checkpoint files are checked against their version's record before they are trusted.

Each model version row records its checkpoint's SHA-256, the model configuration and the
number of examples (``model_versions.sha256``, ``config``, ``n_examples``; written by the
learner right after the file). A file that does not match — another version's file copied over
it, a model of another configuration, a file edited or restored from elsewhere — is treated
as damaged, like one that does not load: start-up falls back to the last good version, and
``status``, ``model list`` and the log say so. Versions written before these columns existed
have no record and are checked only by loading them (the file's own checksums).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edge_plm.files import sha256_of
from edge_plm.plm.checkpoint import CheckpointError


def record_of(path: str | Path, model: Any) -> dict[str, Any]:
    """What to record for the checkpoint `model` was just saved to at `path`."""
    return {"sha256": sha256_of(path), "config": model.config.name,
            "n_examples": int(model.n_examples)}


def file_problem(version: Any) -> str | None:
    """Why the checkpoint file of `version` (a `ModelVersion` or its `model_record` dict) does
    not match its record (None: it matches, or there is no record)."""
    get = version.get if isinstance(version, dict) else lambda k: getattr(version, k, None)
    path, want = get("path") or get("checkpoint"), get("sha256")
    if not path or not want:
        return None
    try:
        have = sha256_of(path)
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if have != want:
        return (f"{path} is not the file model version {get('version')} wrote (sha256 "
                f"{have[:12]}..., its record says {want[:12]}...)")
    return None


def model_problem(version: Any, model: Any) -> str | None:
    """Why the loaded `model` is not what `version` recorded (configuration, examples)."""
    config, n = getattr(version, "config", None), getattr(version, "n_examples", None)
    if config is not None and model.config.name != config:
        return (f"the checkpoint of model version {version.version} holds a model of "
                f"configuration {model.config.name!r}; its record says {config!r}")
    if n is not None and int(model.n_examples) != int(n):
        return (f"the checkpoint of model version {version.version} holds "
                f"{model.n_examples} examples; its record says {n}")
    return None


def check_file(version: Any) -> None:
    """`CheckpointError` when the file of `version` does not match its record."""
    problem = file_problem(version)
    if problem:
        raise CheckpointError(f"{problem}: treated as damaged")


def check_model(version: Any, model: Any) -> None:
    """`CheckpointError` when the loaded `model` does not match the record of `version`."""
    problem = model_problem(version, model)
    if problem:
        raise CheckpointError(f"{problem}: treated as damaged")


__all__ = ["check_file", "check_model", "file_problem", "model_problem", "record_of"]
