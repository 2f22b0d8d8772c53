"""Checkpoints: one .npz file holding named arrays plus JSON metadata.

Metadata: format version, config, vocabulary, embedding hash, training counters, and a
SHA-256 over every array's bytes. Writing is atomic (temp file in the same directory, fsync,
rename, fsync of the directory), so a power cut leaves either the old or the new file.
Loading validates the format version, the checksum and the embedding hash and raises
``CheckpointError`` with a clear message for a missing, truncated or damaged file.
"""

from __future__ import annotations

import hashlib
import json
import tokenize
import zipfile
from pathlib import Path

import numpy as np

from edge_plm.files import atomic_file
from edge_plm.errors import EdgePlmError

FORMAT_VERSION = 1
META_KEY = "__meta__"


class CheckpointError(EdgePlmError, ValueError):
    """A checkpoint cannot be read: missing, truncated, damaged or incompatible."""


def _digest(arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(name.encode())
        h.update(str(a.dtype).encode() + str(a.shape).encode())
        h.update(a.reshape(-1).view(np.uint8) if a.size else b"")  # no copy of the bytes
    return h.hexdigest()


def save(path: str | Path, arrays: dict[str, np.ndarray], meta: dict) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {**meta, "format_version": FORMAT_VERSION, "sha256": _digest(arrays)}
    with atomic_file(path) as f:  # straight to the file: no in-memory copy of it
        np.savez(f, **arrays, **{META_KEY: np.frombuffer(json.dumps(meta).encode(),
                                                         dtype=np.uint8)})
    return path


def _check_zip(path: Path) -> None:
    """A checkpoint is a NumPy .npz (a zip archive): anything else is refused here in one line,
    instead of numpy's advice to load it with pickle."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as exc:
        raise CheckpointError(f"checkpoint {path} cannot be read: {exc.strerror or exc}") from exc
    if not head:
        raise CheckpointError(f"{path} is empty: not an edge-plm checkpoint")
    if head not in (b"PK\x03\x04", b"PK\x05\x06"):
        raise CheckpointError(f"{path} is not an edge-plm checkpoint (not a .npz archive), "
                              "or its start is damaged")


def load(path: str | Path) -> tuple[dict[str, np.ndarray], dict]:
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint not found: {path}")
    _check_zip(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError, NotImplementedError, RuntimeError,
            SyntaxError, tokenize.TokenError) as exc:
        # zipfile raises NotImplementedError/RuntimeError for damaged directory fields; numpy's
        # .npy header parser raises SyntaxError/TokenError for a damaged array header
        raise CheckpointError(f"checkpoint {path} is damaged or truncated: {exc}") from exc
    if META_KEY not in arrays:
        raise CheckpointError(f"checkpoint {path} has no metadata; not an edge-plm checkpoint")
    try:
        meta = json.loads(arrays.pop(META_KEY).tobytes().decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"checkpoint {path} has unreadable metadata: {exc}") from exc
    if meta.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint {path} has format version {meta.get('format_version')}, this edge-plm reads {FORMAT_VERSION}")
    if meta.get("sha256") != _digest(arrays):
        raise CheckpointError(f"checkpoint {path} failed its checksum: the file is damaged")
    bad = sorted(k for k, a in arrays.items() if a.dtype.kind in "fc" and not np.isfinite(a).all())
    if bad:  # a model with NaN or infinite weights cannot predict or learn: never loaded
        raise CheckpointError(f"checkpoint {path} holds non-finite weights (NaN or infinity) in "
                              f"{', '.join(bad[:5])}: refused")
    return arrays, meta
