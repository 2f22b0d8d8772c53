"""Files written whole: a file is written under a temporary name in its own directory, flushed
to the disk, renamed over the old one and the directory flushed, so a power cut leaves the old
file or the new one, never half of one (docs/deploy.md). Also the one checksum of a file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


def fsync_path(path: str | Path) -> None:
    """Flush a file (or a directory: a rename in it) to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: str | Path, *, perms: int = 0o600, durable: bool = True,
                prefix: str | None = None, suffix: str = ".tmp") -> Iterator[Path]:
    """A new empty temporary file beside `path` (``prefix`` default ``<name>.``) for the
    caller to write by name; on a clean exit it gets `perms`, is flushed (``durable``),
    renamed over `path` and the directory flushed. On an error it is removed and `path` is
    left as it was."""
    path = Path(path)
    fd, name = tempfile.mkstemp(prefix=path.name + "." if prefix is None else prefix,
                                suffix=suffix, dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, perms)
        if durable:
            fsync_path(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_path(path.parent)


@contextmanager
def atomic_file(path: str | Path, mode: str = "wb", **kw) -> Iterator[IO]:
    """`atomic_path` opened in `mode` ("wb" or "w", UTF-8): what is written to it replaces
    `path` whole on a clean exit."""
    with atomic_path(path, **kw) as tmp:
        with open(tmp, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
            yield f


def sha256_of(path: str | Path) -> str:
    """The SHA-256 of the file at `path` (hex), read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


__all__ = ["atomic_file", "atomic_path", "fsync_path", "sha256_of"]
