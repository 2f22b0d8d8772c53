"""`edge-plm asr ...` through typer's CliRunner: outputs, exit codes, no tracebacks."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edge_plm.cli import app

DEMO = Path(__file__).resolve().parents[2] / "edge_plm" / "data" / "demo"


@pytest.fixture(autouse=True)
def isolated_config(tmp_path, monkeypatch):
    """No user/system config leaks in; state goes to a temporary directory."""
    monkeypatch.delenv("EDGE_PLM_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("STATE_DIRECTORY", raising=False)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def model_zip(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "tiny.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for name in ("am/final.mdl", "conf/model.conf", "graph/HCLG.fst"):
            zf.writestr(f"vosk-model-tiny-en-0.1/{name}", b"x")
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def test_transcribe_demo_wav_as_json(runner, tmp_path):
    wav = DEMO / "turn-on-the-light.rms.wav"
    res = runner.invoke(app, ["asr", "transcribe", str(wav), "--json", "--backend", "pocketsphinx"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["backend"] == "pocketsphinx" and {"on", "light"} <= set(out["text"].split())
    assert out["duration_ms"] > 0 and out["decode_ms"] > 0 and out["file"] == str(wav)


def test_transcribe_uses_the_ears_lm_and_the_general_one_on_request(runner):
    wav = DEMO / "turn-on-the-light.rms.wav"
    ear = json.loads(runner.invoke(app, ["asr", "transcribe", str(wav), "--json", "--backend", "pocketsphinx"]).stdout)
    general = json.loads(runner.invoke(app, ["asr", "transcribe", str(wav), "--json", "--backend", "pocketsphinx",
                                             "--general-lm"]).stdout)
    assert ear["lm"] == "switch-en.ear.arpa" and general["lm"] == "general"


def test_config_check_warns_about_a_name_the_ear_cannot_say(runner, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[[devices]]\nname = "zqxjv"\naliases = ["lamp"]\nrelay_pin = 17\nswitch_pin = 27\n')
    res = runner.invoke(app, ["config", "check", "--config", str(cfg)])
    assert res.exit_code == 0, res.output
    assert "warning: device 'zqxjv': the ear cannot pronounce zqxjv" in res.stderr
    assert "lamp" not in res.stderr.split("warning:")[1].split("in 'zqxjv'")[0]


def test_transcribe_plain_text_uses_auto_backend(runner):
    res = runner.invoke(app, ["asr", "transcribe", str(DEMO / "what-time-is-it.slt.wav")])
    assert res.exit_code == 0, res.output
    assert "time" in res.stdout


@pytest.mark.parametrize("content,needle", [(None, "file not found"), (b"", "empty file"),
                                            (b"RIFF....WAVEjunkjunk", "corrupt")])
def test_transcribe_bad_input_is_one_line_on_stderr(runner, tmp_path, content, needle):
    wav = tmp_path / "bad.wav"
    if content is not None:
        wav.write_bytes(content)
    res = runner.invoke(app, ["asr", "transcribe", str(wav)])
    assert res.exit_code == 1
    assert needle in res.stderr and res.stderr.startswith("error: ")
    assert "Traceback" not in res.output
    assert isinstance(res.exception, SystemExit) and res.exception.code == 1  # fail(): exit 1, no crash


def test_transcribe_rejects_unknown_backend_with_usage_code(runner):
    res = runner.invoke(app, ["asr", "transcribe", str(DEMO / "what-time-is-it.slt.wav"), "--backend", "siri"])
    assert res.exit_code == 2 and "--backend" in res.stderr


def test_transcribe_vosk_without_model_fails_cleanly(runner, tmp_path):
    res = runner.invoke(app, ["asr", "transcribe", str(DEMO / "what-time-is-it.slt.wav"),
                              "--backend", "vosk", "--models-dir", str(tmp_path / "none")])
    assert res.exit_code == 1 and "no model is configured" in res.stderr


def test_bad_config_file_is_a_usage_error(runner, tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[asr]\nbackend = 'telepathy'\n")
    res = runner.invoke(app, ["asr", "list", "--config", str(cfg)])
    assert res.exit_code == 2 and "asr.backend" in res.stderr


def test_install_then_list(runner, tmp_path):
    archive, digest = model_zip(tmp_path)
    models_dir = tmp_path / "models"
    res = runner.invoke(app, ["asr", "install", str(archive), "--sha256", digest, "--models-dir", str(models_dir)])
    assert res.exit_code == 0, res.output
    assert "installed vosk-model-tiny-en-0.1" in res.stdout
    res = runner.invoke(app, ["asr", "list", "--models-dir", str(models_dir), "--json"])
    assert res.exit_code == 0
    listing = json.loads(res.stdout)
    assert [m["name"] for m in listing["installed"]] == ["vosk-model-tiny-en-0.1"]
    assert any(k["name"] == "vosk-model-small-en-us-0.15" for k in listing["known"])
    res = runner.invoke(app, ["asr", "list", "--models-dir", str(models_dir)])
    assert "vosk-model-tiny-en-0.1" in res.stdout and "fetch needs --sha256" in res.stdout
    for k in listing["known"]:  # the checksum `asr install --sha256` needs, and the URL
        assert (f"sha256 {k['sha256']}" if k["sha256"] else "no checksum known") in res.stdout
        assert k["url"] in res.stdout


def test_install_with_wrong_checksum_fails_and_installs_nothing(runner, tmp_path):
    archive, _ = model_zip(tmp_path)
    models_dir = tmp_path / "models"
    res = runner.invoke(app, ["asr", "install", str(archive), "--sha256", "f" * 64, "--models-dir", str(models_dir)])
    assert res.exit_code == 1 and "SHA-256 mismatch" in res.stderr
    assert not models_dir.exists() or list(models_dir.iterdir()) == []


def test_install_requires_sha256(runner, tmp_path):
    archive, _ = model_zip(tmp_path)
    res = runner.invoke(app, ["asr", "install", str(archive)])
    assert res.exit_code == 2 and "--sha256" in res.stderr


def test_fetch_unknown_model(runner, tmp_path):
    res = runner.invoke(app, ["asr", "fetch", "vosk-model-imaginary", "--models-dir", str(tmp_path)])
    assert res.exit_code == 1 and "unknown model" in res.stderr
