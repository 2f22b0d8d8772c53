"""`edge-plm asr ...`: install, fetch and list speech models; transcribe a WAV file.

Thin commands over `edge_plm.voice`: defaults come from the settings file, errors are one line
on stderr with exit code 1 (bad input/operation) or 2 (bad usage), never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from edge_plm import settings as settings_mod
from edge_plm.cli import app
from edge_plm.voice.asr import AsrError, make_asr
from edge_plm.voice.audio import AudioError, WavSource
from edge_plm.voice.endpoint import Endpointer
from edge_plm.voice.models import KNOWN_MODELS, ModelError, fetch_vosk_model, install_vosk_model, list_models

asr_app = typer.Typer(help="Speech recognition: install/list models, transcribe audio.",
                      no_args_is_help=True)
app.add_typer(asr_app, name="asr")

BACKENDS = ("auto", "vosk", "pocketsphinx", "text")
ConfigOpt = typer.Option(None, "--config", help="config TOML (default: the usual lookup)")
ModelsDirOpt = typer.Option(None, "--models-dir", help="where models live (default: paths.models_dir)")


def _fail(message: str, code: int = 1) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def _settings(config: Optional[Path]) -> settings_mod.Settings:
    try:
        return settings_mod.load(config)
    except settings_mod.ConfigError as exc:
        raise _fail(str(exc), 2) from exc


def _models_dir(config: Optional[Path], models_dir: Optional[Path]) -> Path:
    return models_dir if models_dir is not None else _settings(config).paths.models_path()


@asr_app.command("install")
def install(
    archive: Path = typer.Argument(..., help="Vosk model .zip archive"),
    sha256: str = typer.Option(..., "--sha256", help="expected SHA-256 of the archive (hex)"),
    models_dir: Optional[Path] = ModelsDirOpt,
    force: bool = typer.Option(False, "--force", help="replace an installed model of the same name"),
    config: Optional[Path] = ConfigOpt,
) -> None:
    """Verify ARCHIVE's checksum and install the Vosk model in it."""
    try:
        path = install_vosk_model(archive, sha256, _models_dir(config, models_dir), force=force)
    except ModelError as exc:
        raise _fail(str(exc)) from exc
    typer.echo(f"installed {path.name} in {path.parent}")


@asr_app.command("fetch")
def fetch(
    name: str = typer.Argument(..., help="a known model name (see `asr list`) or a https://...zip URL"),
    sha256: Optional[str] = typer.Option(None, "--sha256", help="checksum (required when none is known)"),
    models_dir: Optional[Path] = ModelsDirOpt,
    force: bool = typer.Option(False, "--force", help="replace an installed model of the same name"),
    config: Optional[Path] = ConfigOpt,
) -> None:
    """Download a Vosk model, verify its checksum and install it."""
    try:
        path = fetch_vosk_model(name, _models_dir(config, models_dir), sha256=sha256, force=force)
    except ModelError as exc:
        raise _fail(str(exc)) from exc
    typer.echo(f"installed {path.name} in {path.parent}")


@asr_app.command("list")
def list_cmd(
    models_dir: Optional[Path] = ModelsDirOpt,
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
    config: Optional[Path] = ConfigOpt,
) -> None:
    """Show installed models and the models `asr fetch` knows."""
    d = _models_dir(config, models_dir)
    installed = list_models(d)
    if as_json:
        typer.echo(json.dumps({
            "models_dir": str(d),
            "installed": [{"name": m.name, "path": str(m.path), "size_bytes": m.size_bytes, "valid": m.valid}
                          for m in installed],
            "known": [{"name": k.name, "url": k.url, "sha256": k.sha256, "language": k.language}
                      for k in KNOWN_MODELS.values()],
        }))
        return
    typer.echo(f"installed in {d}:")
    if not installed:
        typer.echo("  (none: the embedded pocketsphinx English model is used)")
    for m in installed:
        flag = "" if m.valid else "  [does not look like a Vosk model]"
        typer.echo(f"  {m.name}  {m.size_bytes / 1e6:.1f} MB{flag}")
    typer.echo("fetchable (edge-plm asr fetch NAME):")
    for k in KNOWN_MODELS.values():
        check = "checksum known" if k.sha256 else "needs --sha256"
        typer.echo(f"  {k.name}  [{k.language}, {check}]  {k.note}")


@asr_app.command("transcribe")
def transcribe(
    wav: Path = typer.Argument(..., help="WAV file (any rate/channels; converted to 16 kHz mono)"),
    backend: Optional[str] = typer.Option(None, "--backend", help="auto | vosk | pocketsphinx (default: config)"),
    model: Optional[str] = typer.Option(None, "--model", help="vosk model directory or installed name"),
    no_trim: bool = typer.Option(False, "--no-trim", help="do not trim leading/trailing silence"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    models_dir: Optional[Path] = ModelsDirOpt,
    config: Optional[Path] = ConfigOpt,
) -> None:
    """Transcribe one WAV file with the configured (or given) ASR backend."""
    s = _settings(config)
    if backend is not None:
        if backend not in BACKENDS or backend == "text":
            raise _fail(f"--backend must be one of auto, vosk, pocketsphinx (got {backend!r})", 2)
        s.asr.backend = backend
    if model is not None:
        s.asr.vosk_model = model
    if s.asr.backend == "text":
        raise _fail("the configured asr.backend is 'text', which cannot transcribe audio; "
                    "pass --backend pocketsphinx or vosk", 2)
    endpointer = None if no_trim else Endpointer.from_config(s.audio, sample_rate=16000)
    try:
        utterance = WavSource([wav], endpointer=endpointer).load(wav)
        asr = make_asr(s.asr, models_dir if models_dir is not None else s.paths.models_path())
        result = asr.transcribe_utterance(utterance)
    except (AudioError, AsrError) as exc:
        raise _fail(str(exc)) from exc
    if as_json:
        typer.echo(json.dumps({
            "file": str(wav), "text": result.text, "backend": result.backend,
            "confidence": result.confidence, "decode_ms": round(result.decode_ms, 1),
            "audio_ms": round(utterance.audio_ms, 1), "duration_ms": round(utterance.duration_ms, 1),
            "clipped": round(utterance.clipped, 4), "truncated": utterance.truncated,
        }, ensure_ascii=False))
    else:
        typer.echo(result.text)
