"""Installing Vosk models safely: checksum first, unpack aside, validate, then one rename.

A model is a directory under `paths.models_dir`. Installation never leaves a half-unpacked
model where the recogniser would find it: the archive's SHA-256 is checked, members are
vetted (no absolute paths, no "..", no links, bounded size), the archive is extracted into a
hidden temporary directory inside models_dir (same filesystem), checked to look like a Vosk
model, and moved into place with a single `os.rename`. Any failure removes the temporary
directory.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat
import tempfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from edge_plm.errors import EdgePlmError

log = logging.getLogger(__name__)

MAX_UNPACKED_BYTES = 4 * 1024**3  # refuse archives that claim to unpack to more (zip bombs)
_TMP_PREFIX = ".install-"
Members = list[tuple[zipfile.ZipInfo, PurePosixPath]]  # each member with its vetted path


class ModelError(EdgePlmError):
    """A model archive could not be downloaded, verified or installed; the message says why."""


@dataclass(frozen=True)
class KnownModel:
    """A downloadable model. `sha256` is None when no trustworthy checksum is known: then the
    user must pass one (`--sha256`), because an unverified download is never installed."""

    name: str
    url: str
    sha256: str | None
    size_bytes: int | None
    language: str
    note: str = ""


# alphacephei.com publishes no checksums. The value below is the one recorded independently by
# several public projects that pin this archive (41,205,931 bytes); a mismatch fails safely.
KNOWN_MODELS: dict[str, KnownModel] = {
    m.name: m
    for m in (
        KnownModel(
            name="vosk-model-small-en-us-0.15",
            url="https://alphacephei.com/vosk/models/vosk-model-small-en-us-0.15.zip",
            sha256="30f26242c4eb449f948e42cb302dd7a686cb29a3423a8367f99ff41780942498",
            size_bytes=41_205_931,
            language="en",
            note="US English, 40 MB, Apache-2.0; the recommended model for a Pi",
        ),
        KnownModel(
            name="vosk-model-small-en-in-0.4",
            url="https://alphacephei.com/vosk/models/vosk-model-small-en-in-0.4.zip",
            sha256=None,
            size_bytes=None,
            language="en",
            note="Indian English, 36 MB; no verified checksum known: pass --sha256",
        ),
    )
}


@dataclass
class InstalledModel:
    """A directory in models_dir; `valid` says whether it looks like a Vosk model."""

    name: str
    path: Path
    size_bytes: int
    valid: bool


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file, read in chunks (model archives are tens of MB)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _normalise_sha256(value: str) -> str:
    v = (value or "").strip().lower()
    if len(v) != 64 or any(c not in "0123456789abcdef" for c in v):
        raise ModelError(f"not a SHA-256 hex digest (need 64 hex characters): {value!r}")
    return v


def looks_like_vosk_model(path: str | Path) -> bool:
    """A Vosk model has an acoustic model (am/final.mdl) and a decoding graph or config
    (graph/, conf/model.conf); older layouts keep final.mdl at the top level."""
    p = Path(path)
    has_am = (p / "am" / "final.mdl").is_file() or (p / "final.mdl").is_file()
    has_graph = (p / "graph").is_dir() or (p / "conf" / "model.conf").is_file() or (p / "HCLG.fst").is_file()
    return has_am and has_graph


def _dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def list_models(models_dir: str | Path) -> list[InstalledModel]:
    """Installed model directories (hidden temporary install directories excluded), by name."""
    d = Path(models_dir)
    if not d.is_dir():
        return []
    return [InstalledModel(p.name, p, _dir_size(p), looks_like_vosk_model(p))
            for p in sorted(d.iterdir()) if p.is_dir() and not p.name.startswith(".")]


def _safe_members(zf: zipfile.ZipFile, archive: Path) -> Members:
    """Vet every member before extracting anything: relative, no '..', no links, bounded size."""
    members, total = [], 0
    for info in zf.infolist():
        name = info.filename.replace("\\", "/")
        rel = PurePosixPath(name)
        if name.startswith("/") or (len(name) > 1 and name[1] == ":") or ".." in rel.parts:
            raise ModelError(f"{archive}: unsafe path in archive: {info.filename!r} (path traversal refused)")
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise ModelError(f"{archive}: archive contains a symbolic link {info.filename!r}; refused")
        total += info.file_size
        if total > MAX_UNPACKED_BYTES:
            raise ModelError(f"{archive}: unpacks to more than {MAX_UNPACKED_BYTES >> 30} GiB; refused")
        if rel.parts:
            members.append((info, rel))
    if not members:
        raise ModelError(f"{archive}: the archive is empty")
    # one path cannot be both a file and a directory (it could not be unpacked)
    files = {rel for info, rel in members if not info.is_dir()}
    dirs = {rel for info, rel in members if info.is_dir()}
    dirs |= {parent for _, rel in members for parent in rel.parents if parent.parts}
    clash = sorted(str(p) for p in files & dirs)
    if clash:
        raise ModelError(f"{archive}: {clash[0]!r} is both a file and a directory in the "
                         "archive; refused (nothing installed)")
    return members


def install_vosk_model(archive_zip: str | Path, sha256: str, models_dir: str | Path,
                       force: bool = False) -> Path:
    """Verify, unpack and atomically install a Vosk model zip; return the installed directory.

    The model's name is the archive's single top-level directory (as in alphacephei's zips),
    else the archive's file stem. An existing model of that name is an error unless `force`,
    in which case it is replaced (the old one is moved aside first, then deleted).
    """
    archive = Path(archive_zip)
    expected = _verified_checksum(archive, sha256)
    models_dir = Path(models_dir)
    models_dir.mkdir(parents=True, exist_ok=True)
    with _open_zip(archive) as zf:
        members = _safe_members(zf, archive)
        name, single_top = _model_name(members, archive)
        target = models_dir / name
        _check_target(target, members, archive, force)
        tmp = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX, dir=models_dir))
        try:
            _extract(zf, members, tmp, archive)
            staged = _staged_model(tmp, name, single_top, archive)
            _swap_in(staged, target)
        except (zipfile.BadZipFile, OSError) as exc:
            raise ModelError(_unpack_failure(archive, models_dir, exc)) from exc
        finally:
            if tmp.exists():
                shutil.rmtree(tmp)
    log.info("installed vosk model %s (%s)", target, expected[:12])
    return target


def _unpack_failure(archive: Path, models_dir: Path, exc: Exception) -> str:
    if isinstance(exc, zipfile.BadZipFile):
        return f"{archive}: corrupt zip member ({exc}); nothing installed"
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
    return f"{archive}: cannot unpack into {models_dir}: {reason}; nothing installed"


def _verified_checksum(archive: Path, sha256: str) -> str:
    """The normalised expected SHA-256, after checking that the archive has it."""
    expected = _normalise_sha256(sha256)
    if not archive.is_file():
        raise ModelError(f"{archive}: archive not found")
    actual = sha256_file(archive)
    if actual != expected:
        raise ModelError(f"{archive}: SHA-256 mismatch: expected {expected}, got {actual}; "
                         "the download is corrupt or not the archive you meant. Nothing installed.")
    return expected


def _open_zip(archive: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ModelError(f"{archive}: not a readable zip archive ({exc})") from exc


def _model_name(members: Members, archive: Path) -> tuple[str, bool]:
    """The model's name, and whether it is the archive's single top-level directory."""
    tops = {rel.parts[0] for _, rel in members}
    single_top = len(tops) == 1 and all(len(rel.parts) > 1 or info.is_dir() for info, rel in members)
    name = next(iter(tops)) if single_top else archive.stem
    if name.startswith("."):
        raise ModelError(f"{archive}: model name {name!r} would be hidden; refused")
    return name, single_top


def _check_target(target: Path, members: Members, archive: Path, force: bool) -> None:
    """Refuse to replace an installed model without `force`, or to fill the disk."""
    models_dir = target.parent
    if target.exists() and not force:
        raise ModelError(f"model {target.name!r} is already installed in {models_dir} (use --force to replace it)")
    need = sum(info.file_size for info, _ in members)
    free = shutil.disk_usage(models_dir).free
    if need > free:
        raise ModelError(f"{archive}: needs {need >> 20} MiB, only {free >> 20} MiB free in {models_dir}")


def _extract(zf: zipfile.ZipFile, members: Members, tmp: Path, archive: Path) -> None:
    root = tmp.resolve()
    for info, rel in members:
        dest = (tmp / Path(*rel.parts)).resolve()
        if root not in dest.parents:  # belt and braces after _safe_members
            raise ModelError(f"{archive}: member {info.filename!r} escapes the install directory")
        if info.is_dir():
            dest.mkdir(parents=True, exist_ok=True)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        with zf.open(info) as src, open(dest, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)


def _staged_model(tmp: Path, name: str, single_top: bool, archive: Path) -> Path:
    """The unpacked model, checked and synced, as one directory inside `tmp` ready to rename."""
    unpacked = tmp / name if single_top else tmp
    if not looks_like_vosk_model(unpacked):
        raise ModelError(f"{archive}: does not look like a Vosk model (no am/final.mdl with "
                         "graph/ or conf/model.conf); nothing installed")
    _sync_tree(unpacked)
    if single_top:
        return unpacked
    staged = tmp / (".model-" + name)  # contents were at the archive root: one level down
    staged.mkdir()
    for child in list(tmp.iterdir()):
        if child != staged:
            os.rename(child, staged / child.name)
    return staged


def _swap_in(staged: Path, target: Path) -> None:
    """One rename puts the model in place; an old one is moved aside first, then deleted."""
    old = None
    if target.exists():
        old = target.parent / f"{_TMP_PREFIX}old-{target.name}"
        os.rename(target, old)
    os.rename(staged, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=False)


def _sync_tree(path: Path) -> None:
    """fsync files and directories so a power cut right after the rename leaves a whole model."""
    for f in path.rglob("*"):
        if f.is_file():
            fd = os.open(f, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fetch_vosk_model(name: str, models_dir: str | Path, sha256: str | None = None,
                     timeout: float = 60.0, force: bool = False) -> Path:
    """Download a known model (or any URL ending in .zip, given its `sha256`) and install it."""
    if name in KNOWN_MODELS:
        known = KNOWN_MODELS[name]
        url = known.url
        checksum = sha256 or known.sha256
        if sha256 and known.sha256 and _normalise_sha256(sha256) != known.sha256:
            raise ModelError(f"--sha256 differs from the checksum recorded for {name}")
    elif name.startswith(("https://", "http://")) and name.endswith(".zip"):
        url, checksum = name, sha256
    else:
        raise ModelError(f"unknown model {name!r}; known: {', '.join(sorted(KNOWN_MODELS))} "
                         "(or give a https://... .zip URL with --sha256)")
    if not checksum:
        raise ModelError(f"no verified checksum is known for {name}: pass --sha256 HEX "
                         "(an unverified download is never installed)")
    models_dir = Path(models_dir)
    models_dir.mkdir(parents=True, exist_ok=True)
    download_dir = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX + "download-", dir=models_dir))
    archive = download_dir / Path(url).name  # a zip without a top directory is named after it
    try:
        log.info("downloading %s", url)
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp, open(archive, "wb") as out:
                shutil.copyfileobj(resp, out, 1 << 20)
        except urllib.error.HTTPError as exc:
            raise ModelError(f"download of {url} failed: HTTP {exc.code} {exc.reason}") from exc
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ModelError(f"cannot download {url}: {reason}. No network? Download the zip on "
                             "another machine and use `edge-plm asr install ARCHIVE --sha256 HEX`") from exc
        return install_vosk_model(archive, checksum, models_dir, force=force)
    finally:
        shutil.rmtree(download_dir)


__all__ = ["ModelError", "KnownModel", "KNOWN_MODELS", "InstalledModel", "sha256_file",
           "looks_like_vosk_model", "list_models", "install_vosk_model", "fetch_vosk_model"]
