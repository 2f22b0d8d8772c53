"""`edge-plm asr ...`: install, fetch and list speech models; transcribe a WAV file.

Thin commands over `edge_plm.voice`: defaults come from the settings file, errors are one line
on stderr with exit code 1 (bad input/operation) or 2 (bad usage), never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from edge_plm.cli.common import AsrBackend, ConfigOpt, JsonOpt, fail, load_settings
from edge_plm.cli.root import app
from edge_plm.voice.asr import AsrError, make_asr
from edge_plm.voice.audio import AudioError, WavSource
from edge_plm.voice.endpoint import Endpointer
from edge_plm.voice.models import KNOWN_MODELS, ModelError, fetch_vosk_model, install_vosk_model, list_models

asr_app = typer.Typer(help="Speech recognition: install and list models, transcribe audio.",
                      no_args_is_help=True)
app.add_typer(asr_app, name="asr")

ModelsDirOpt = Annotated[Optional[Path], typer.Option(
    "--models-dir", help="Where models live (default: paths.models_dir of the config).")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Replace an installed model of the same name.")]


def _models_dir(config: Optional[Path], models_dir: Optional[Path]) -> Path:
    return models_dir if models_dir is not None else load_settings(config).paths.models_path()


def _install(install, *args, **kwargs) -> None:
    """Run `install` (a model installer of edge_plm.voice.models) and say where the model went."""
    try:
        path = install(*args, **kwargs)
    except ModelError as exc:
        fail(str(exc))
    typer.echo(f"installed {path.name} in {path.parent}")


@asr_app.command("install")
def install(
    archive: Annotated[Path, typer.Argument(help="Vosk model .zip archive.")],
    sha256: Annotated[str, typer.Option("--sha256", help="Expected SHA-256 of the archive (hex).")],
    models_dir: ModelsDirOpt = None,
    force: ForceOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Verify ARCHIVE's checksum and install the Vosk model in it."""
    _install(install_vosk_model, archive, sha256, _models_dir(config, models_dir), force=force)


@asr_app.command("fetch")
def fetch(
    name: Annotated[str, typer.Argument(help="A known model name (see `asr list`) or an https://...zip URL.")],
    sha256: Annotated[Optional[str], typer.Option(
        "--sha256", help="Expected SHA-256 of the archive (required when none is known).")] = None,
    models_dir: ModelsDirOpt = None,
    force: ForceOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Download a Vosk model, verify its checksum and install it."""
    _install(fetch_vosk_model, name, _models_dir(config, models_dir), sha256=sha256, force=force)


@asr_app.command("list")
def list_cmd(
    models_dir: ModelsDirOpt = None,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
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
        check = f"sha256 {k.sha256}" if k.sha256 else "no checksum known: fetch needs --sha256"
        typer.echo(f"  {k.name}  [{k.language}]  {k.note}\n    {check}\n    {k.url}")


@asr_app.command("transcribe")
def transcribe(
    wav: Annotated[Path, typer.Argument(help="WAV file (any rate and channels; converted to 16 kHz mono).")],
    backend: Annotated[Optional[AsrBackend], typer.Option(
        "--backend", help="ASR backend (default: asr.backend of the config).")] = None,
    model: Annotated[Optional[str], typer.Option("--model", help="Vosk model directory or installed name.")] = None,
    no_trim: Annotated[bool, typer.Option("--no-trim", help="Do not trim leading and trailing silence.")] = False,
    general_lm: Annotated[bool, typer.Option(
        "--general-lm", help="pocketsphinx: decode with its general English language model instead of the "
        "ear's (asr.lm).")] = False,
    as_json: JsonOpt = False,
    models_dir: ModelsDirOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Transcribe one WAV file with the configured (or given) ASR backend."""
    s = load_settings(config)
    if backend is not None:
        s.asr.backend = backend.value
    if model is not None:
        s.asr.vosk_model = model
    if general_lm:
        s.asr.lm = "general"
    if s.asr.backend == "text":
        fail("the configured asr.backend is 'text', which cannot transcribe audio; "
             "pass --backend pocketsphinx or vosk", 2)
    endpointer = None if no_trim else Endpointer.from_config(s.audio, sample_rate=16000)
    try:
        utterance = WavSource([wav], endpointer=endpointer).load(wav)
        asr = make_asr(s.asr, models_dir if models_dir is not None else s.paths.models_path())
        result = asr.transcribe_utterance(utterance)
    except (AudioError, AsrError) as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps({
            "file": str(wav), "text": result.text, "backend": result.backend,
            "lm": getattr(asr, "lm_name", None),
            "confidence": result.confidence, "decode_ms": round(result.decode_ms, 1),
            "audio_ms": round(utterance.audio_ms, 1), "duration_ms": round(utterance.duration_ms, 1),
            "clipped": round(utterance.clipped, 4), "truncated": utterance.truncated,
        }, ensure_ascii=False))
    else:
        typer.echo(result.text)
