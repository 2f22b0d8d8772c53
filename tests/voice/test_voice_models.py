"""Vosk model installation: checksum, atomic install, refusal of unsafe archives, fetch."""

from __future__ import annotations

import hashlib
import io
import urllib.error
import zipfile
from pathlib import Path

import pytest

from edge_plm.voice import models
from edge_plm.voice.models import (
    KNOWN_MODELS, ModelError, fetch_vosk_model, install_vosk_model, list_models, looks_like_vosk_model)

MODEL_FILES = {"am/final.mdl": b"acoustic", "conf/model.conf": b"--sample-frequency=16000\n",
               "graph/HCLG.fst": b"graph", "README": b"tiny test model"}


def make_zip(path: Path, files: dict[str, bytes], top: str | None = "vosk-model-tiny-xx-0.1") -> str:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(f"{top}/{name}" if top else name, data)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def entries(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def test_good_zip_installs_atomically(tmp_path):
    archive = tmp_path / "m.zip"
    digest = make_zip(archive, MODEL_FILES)
    models_dir = tmp_path / "models"
    path = install_vosk_model(archive, digest.upper(), models_dir)  # hex case does not matter
    assert path == models_dir / "vosk-model-tiny-xx-0.1"
    assert (path / "am" / "final.mdl").read_bytes() == b"acoustic"
    assert entries(models_dir) == ["vosk-model-tiny-xx-0.1"]  # no temporary directory left
    (m,) = list_models(models_dir)
    assert m.valid and m.name == "vosk-model-tiny-xx-0.1" and m.size_bytes == sum(map(len, MODEL_FILES.values()))


def test_zip_without_top_directory_is_named_after_the_archive(tmp_path):
    archive = tmp_path / "my-model.zip"
    digest = make_zip(archive, MODEL_FILES, top=None)
    path = install_vosk_model(archive, digest, tmp_path / "models")
    assert path.name == "my-model" and looks_like_vosk_model(path)
    assert entries(tmp_path / "models") == ["my-model"]


def test_wrong_checksum_is_rejected_and_nothing_is_left(tmp_path):
    archive = tmp_path / "m.zip"
    make_zip(archive, MODEL_FILES)
    models_dir = tmp_path / "models"
    with pytest.raises(ModelError, match="SHA-256 mismatch"):
        install_vosk_model(archive, "0" * 64, models_dir)
    assert entries(models_dir) == []
    with pytest.raises(ModelError, match="64 hex"):
        install_vosk_model(archive, "abc", models_dir)


@pytest.mark.parametrize("evil", ["../escaped.txt", "/tmp/absolute-evil.txt", "ok/../../escaped.txt"])
def test_path_traversal_is_refused(tmp_path, evil):
    archive = tmp_path / "evil.zip"
    files = {f"vosk-model-tiny-xx-0.1/{k}": v for k, v in MODEL_FILES.items()}
    files[evil] = b"pwned"
    digest = make_zip(archive, files, top=None)
    models_dir = tmp_path / "models"
    with pytest.raises(ModelError, match="path traversal"):
        install_vosk_model(archive, digest, models_dir)
    assert entries(models_dir) == []
    assert not (tmp_path / "escaped.txt").exists()


def test_symlink_member_is_refused(tmp_path):
    archive = tmp_path / "link.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name, data in MODEL_FILES.items():
            zf.writestr(f"m/{name}", data)
        info = zipfile.ZipInfo("m/am/link")
        info.external_attr = (0o120777 << 16)
        zf.writestr(info, "/etc/passwd")
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    with pytest.raises(ModelError, match="symbolic link"):
        install_vosk_model(archive, digest, tmp_path / "models")


def test_archive_that_is_not_a_model_leaves_nothing(tmp_path):
    archive = tmp_path / "photos.zip"
    digest = make_zip(archive, {"holiday.jpg": b"jpeg"})
    models_dir = tmp_path / "models"
    with pytest.raises(ModelError, match="does not look like a Vosk model"):
        install_vosk_model(archive, digest, models_dir)
    assert entries(models_dir) == []


def test_not_a_zip_and_missing_archive(tmp_path):
    junk = tmp_path / "junk.zip"
    junk.write_bytes(b"this is not a zip file")
    with pytest.raises(ModelError, match="not a readable zip"):
        install_vosk_model(junk, hashlib.sha256(junk.read_bytes()).hexdigest(), tmp_path / "models")
    with pytest.raises(ModelError, match="not found"):
        install_vosk_model(tmp_path / "none.zip", "0" * 64, tmp_path / "models")


def test_existing_model_needs_force_and_force_replaces(tmp_path):
    models_dir = tmp_path / "models"
    a = tmp_path / "a.zip"
    install_vosk_model(a, make_zip(a, MODEL_FILES), models_dir)
    b = tmp_path / "b.zip"
    digest_b = make_zip(b, {**MODEL_FILES, "am/final.mdl": b"acoustic v2"})
    with pytest.raises(ModelError, match="already installed"):
        install_vosk_model(b, digest_b, models_dir)
    path = install_vosk_model(b, digest_b, models_dir, force=True)
    assert (path / "am" / "final.mdl").read_bytes() == b"acoustic v2"
    assert entries(models_dir) == ["vosk-model-tiny-xx-0.1"]


def test_list_models_flags_invalid_and_ignores_hidden(tmp_path):
    (tmp_path / "broken").mkdir()
    (tmp_path / ".install-abc").mkdir()
    found = list_models(tmp_path)
    assert [(m.name, m.valid) for m in found] == [("broken", False)]
    assert list_models(tmp_path / "missing") == []


def test_fetch_without_network_is_a_clear_error(tmp_path, monkeypatch):
    def offline(url, timeout):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")
    monkeypatch.setattr(models.urllib.request, "urlopen", offline)
    with pytest.raises(ModelError, match="No network"):
        fetch_vosk_model("vosk-model-small-en-us-0.15", tmp_path / "models")
    assert entries(tmp_path / "models") == []


def test_fetch_downloads_verifies_and_installs(tmp_path, monkeypatch):
    archive = tmp_path / "served.zip"
    digest = make_zip(archive, MODEL_FILES)
    seen = []

    def serve(url, timeout):
        seen.append(url)
        return io.BytesIO(archive.read_bytes())
    monkeypatch.setattr(models.urllib.request, "urlopen", serve)
    url = "https://example.invalid/vosk-model-tiny-xx-0.1.zip"
    path = fetch_vosk_model(url, tmp_path / "models", sha256=digest)
    assert seen == [url] and looks_like_vosk_model(path)
    assert entries(tmp_path / "models") == ["vosk-model-tiny-xx-0.1"]
    with pytest.raises(ModelError, match="SHA-256 mismatch"):
        fetch_vosk_model(url, tmp_path / "models2", sha256="1" * 64)
    assert entries(tmp_path / "models2") == []


def test_fetch_refuses_unknown_names_and_missing_checksums(tmp_path):
    with pytest.raises(ModelError, match="unknown model"):
        fetch_vosk_model("vosk-model-imaginary", tmp_path)
    unverified = [k for k in KNOWN_MODELS.values() if k.sha256 is None]
    assert unverified, "the table should show a model that needs --sha256"
    with pytest.raises(ModelError, match="--sha256"):
        fetch_vosk_model(unverified[0].name, tmp_path)
    with pytest.raises(ModelError, match="--sha256"):
        fetch_vosk_model("https://example.invalid/x.zip", tmp_path)


def test_a_member_that_fails_its_crc_installs_nothing(tmp_path):
    archive = tmp_path / "m.zip"
    make_zip(archive, {**MODEL_FILES, "am/final.mdl": b"acoustic model bytes"})
    data = archive.read_bytes()
    archive.write_bytes(data.replace(b"acoustic model bytes", b"acoustic model BYTES"))  # stored
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    models_dir = tmp_path / "models"
    with pytest.raises(ModelError, match="corrupt zip member .*; nothing installed"):
        install_vosk_model(archive, digest, models_dir)
    assert entries(models_dir) == []


def test_a_write_error_while_unpacking_installs_nothing(tmp_path, monkeypatch):
    archive = tmp_path / "m.zip"
    digest = make_zip(archive, MODEL_FILES)
    models_dir = tmp_path / "models"

    def disk_full(*_args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(models.shutil, "copyfileobj", disk_full)
    with pytest.raises(ModelError, match=r"cannot unpack into .*models: No space left on device; "
                                         "nothing installed"):
        install_vosk_model(archive, digest, models_dir)
    assert entries(models_dir) == []
