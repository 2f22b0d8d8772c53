"""Speech recognition backends behind one small interface.

    backend.session() -> AsrSession    feed(block) while the person speaks, finish() after the
                                       endpoint (edge_plm.voice.stream; what the loop uses)
    backend.transcribe(samples_int16_16k) -> Transcript   a whole recording, fed to a session
                                       in 30 ms blocks as a microphone would (batch=True: one
                                       whole-utterance decode, which can give other words)
    backend.transcribe_utterance(utterance) -> Transcript

* `VoskASR`         Kaldi models through vosk; the default on a device when a model is installed.
* `PocketSphinxASR` the English model shipped inside the pocketsphinx wheel: works with no download.
* `TextASR`         passes a `TextSource` utterance's text through (tests, replays of text logs).

Models are loaded once, at construction (seconds, hundreds of MB); decoding is then cheap
and a lock serialises callers; a backend decodes one utterance at a time. Empty
or silent audio gives an empty transcript, not an error. `make_asr` picks the backend from the config.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path

import numpy as np

from edge_plm.voice.asr_base import (  # noqa: F401 - re-exported: the ASR API in one place
    SILENCE_DBFS, STREAM_BLOCK, AsrError, Transcript, check_samples, is_marker, no_speech)
from edge_plm.voice.audio import TARGET_RATE, Utterance
from edge_plm.voice.stream import PocketSphinxSession, VoskSession

log = logging.getLogger(__name__)


class AsrBackend:
    """Base class: subclasses implement `_decode` and hold a `lock` (one decode at a time; a
    streaming session takes it too); `name` identifies them in logs and the DB."""

    name = "base"
    streams = True  # decodes while the audio arrives (session())
    lock: threading.Lock  # one decode at a time per backend

    def session(self):
        """A streaming session for one utterance (edge_plm.voice.stream)."""
        raise AsrError(f"the {self.name} ASR backend cannot stream")

    def transcribe(self, samples: np.ndarray, batch: bool = False) -> Transcript:
        """Decode a whole recording: streamed in 30 ms blocks (the loop's way) or, with
        `batch`, in one whole-utterance call; silence is not decoded. Timed (decode_ms: all)."""
        if not batch:
            t0 = time.perf_counter()
            samples = check_samples(samples)
            session = self.session()
            for i in range(0, len(samples), STREAM_BLOCK):
                session.feed(samples[i:i + STREAM_BLOCK])
            tr = session.finish()
            tr.decode_ms = (time.perf_counter() - t0) * 1000.0
            return tr
        t0 = time.perf_counter()
        samples = check_samples(samples)
        text, confidence = "", None
        if not no_speech(samples):
            with self.lock:
                text, confidence = self._decode(samples)
        return Transcript(text=text, backend=self.name,
                          decode_ms=(time.perf_counter() - t0) * 1000.0, confidence=confidence,
                          fluency=self.fluency(text))

    def fluency(self, text: str) -> float | None:
        """How likely `text` is under the ear's language model (`Transcript.fluency`); None
        where the backend has none."""
        return None

    def _decode(self, samples: np.ndarray) -> tuple[str, float | None]:  # pragma: no cover
        """The words heard in int16 16 kHz speech (markers removed) and their confidence."""
        raise NotImplementedError

    def transcribe_utterance(self, utterance: Utterance) -> Transcript:
        """The utterance's words: its stream finished if it was decoded while it arrived, else
        its samples streamed now."""
        if utterance.stream is not None:
            return utterance.stream.finish()
        if utterance.sample_rate != TARGET_RATE:
            raise AsrError(f"utterance is at {utterance.sample_rate} Hz; ASR needs {TARGET_RATE} Hz")
        return self.transcribe(utterance.samples)


class PocketSphinxASR(AsrBackend):
    """CMU PocketSphinx 5 with the wheel's US-English acoustic model, LM and dictionary.

    Confidence is the decoder's utterance posterior probability (`Decoder.get_prob()`, already
    a linear probability in pocketsphinx 5). Filler tokens (<sil>, [NOISE]) are removed.

    `adapt_cmn=True` (the device default) lets the cepstral mean carry over from utterance to
    utterance, so the decoder adapts to the microphone and room; the transcript of a clip then
    depends a little on what was decoded before it. `adapt_cmn=False` restores the initial
    estimate before every utterance: the same samples give the same words whatever came before
    (tests, benchmarks, replays); the posterior may still differ in the last digits.

    `fwdflat` / `bestpath` (pocketsphinx's second search passes over the whole utterance) are
    off by default: they run at `end_utt`, after the endpoint, and cost 150-300 ms there on this
    project's benchmark machine; the first pass runs while the person speaks
    (docs/benchmarks-log.md, "After the last word").

    `lm`: the ear's language model (an ARPA file; ``edge_plm.voice.ear_lm``): the starting model's
    command-and-chatter LM on a device (`make_asr`), None for the wheel's general English LM.
    `use_lm` swaps in another one (the household's) between utterances.
    """

    name = "pocketsphinx"

    def __init__(self, adapt_cmn: bool = True, fwdflat: bool = False, bestpath: bool = False,
                 lm: str | Path | None = None, **decoder_options) -> None:
        decoder_options.update(fwdflat=fwdflat, bestpath=bestpath)
        if lm is not None:
            if not Path(lm).is_file():
                raise AsrError(f"the ear's language model {lm} is missing (reinstall edge-plm, or set "
                               'asr.lm = "general")')
            decoder_options["lm"] = str(lm)
        try:
            from pocketsphinx import Decoder  # noqa: PLC0415 - heavy import only when used
        except ImportError as exc:
            raise AsrError(f"pocketsphinx is not installed ({exc})") from exc
        t0 = time.perf_counter()
        try:
            self.decoder = Decoder(logfn=os.devnull, samprate=TARGET_RATE, **decoder_options)
        except (RuntimeError, ValueError, OSError) as exc:
            raise AsrError(f"pocketsphinx could not load its model: {exc}") from exc
        self.adapt_cmn = adapt_cmn
        self._initial_cmn = self.decoder.get_cmn(False)
        self.lock = threading.Lock()
        self.current_session = None
        # which language model the ear decodes with (status, doctor, the log): "general" is the
        # wheel's en-us LM; otherwise the file's name, then the household's label (use_lm)
        self.lm_name = "general" if lm is None else Path(lm).name
        self._scorer = None if lm is None else self._read_lm(lm)  # scores `fluency`
        self.load_ms = (time.perf_counter() - t0) * 1000.0
        log.info("pocketsphinx loaded (%s, language model %s) in %.0f ms", self.decoder.config["hmm"],
                 self.lm_name, self.load_ms)

    def _read_lm(self, path: str | Path):
        from pocketsphinx import NGramModel  # noqa: PLC0415

        try:
            return NGramModel(self.decoder.config, self.decoder.logmath, str(path))
        except (RuntimeError, ValueError, OSError) as exc:
            raise AsrError(f"pocketsphinx could not read the language model {path}: {exc}") from exc

    def fluency(self, text: str) -> float | None:
        """The heard words' mean log-probability under the ear's LM (None with the general LM)."""
        from edge_plm.voice.ear_lm import fluency  # noqa: PLC0415

        scorer = self._scorer
        return None if scorer is None else fluency(scorer, text)

    def use_lm(self, arpa_path: str | Path, label: str) -> None:
        """Decode the next utterances with the ARPA LM at `arpa_path` (read now, outside the lock;
        swapped in under the lock, between utterances: an utterance being decoded finishes with
        the LM it started with). `label` names it in the log and status. The file can be deleted
        once this returns."""
        t0 = time.perf_counter()
        model = self._read_lm(arpa_path)
        with self.lock:
            old = self.decoder.current_search()
            name = f"lm{time.monotonic_ns()}"
            try:
                self.decoder.add_lm(name, model)
                self.decoder.activate_search(name)
            except (RuntimeError, KeyError) as exc:  # KeyError: an utterance is being decoded
                self._drop_search(name)
                raise AsrError(f"pocketsphinx could not switch to the language model {label} "
                               f"(tried again at the next look): {exc}") from exc
            if old != name:
                self.decoder.remove_search(old)
            self.lm_name, self._scorer = label, model
        log.info("the ear now decodes with %s (read in %.0f ms)", label, (time.perf_counter() - t0) * 1000.0)

    def _drop_search(self, name: str) -> None:
        """Take out a search `use_lm` added but could not activate (none is there when the add
        itself failed: pocketsphinx's KeyError then says so, and there is nothing to take out)."""
        try:
            self.decoder.remove_search(name)
        except KeyError:
            log.debug("no search %s to take out: its add had failed", name)

    def cepstral_mean(self) -> str:
        """The live cepstral mean (comma-separated), to carry over a restart. pocketsphinx folds
        the speech it heard into its mean only every 500 frames (5 s); this folds in what it
        heard since (``get_cmn(update=True)``)."""
        with self.lock:
            return self.decoder.get_cmn(True)

    def set_cepstral_mean(self, cmn: str) -> None:
        """Start from a saved cepstral mean (the room and microphone stay across a restart)."""
        with self.lock:
            try:
                self.decoder.set_cmn(cmn)
            except (RuntimeError, ValueError) as exc:
                raise AsrError(f"pocketsphinx refused the saved cepstral mean: {exc}") from exc

    def session(self):
        return PocketSphinxSession(self)

    def _decode(self, samples: np.ndarray) -> tuple[str, float | None]:
        try:
            if not self.adapt_cmn:
                self.decoder.set_cmn(self._initial_cmn)
            self.decoder.start_utt()
            self.decoder.process_raw(samples.astype("<i2").tobytes(), no_search=False, full_utt=True)
            self.decoder.end_utt()
            hyp = self.decoder.hyp()
            prob = self.decoder.get_prob() if hyp is not None else None
        except RuntimeError as exc:
            raise AsrError(f"pocketsphinx failed to decode {len(samples)} samples: {exc}") from exc
        if hyp is None:
            return "", None
        words = [w for w in hyp.hypstr.split() if not is_marker(w)]
        conf = float(min(1.0, max(0.0, prob))) if prob is not None else None
        return " ".join(words), conf if words else None


class VoskASR(AsrBackend):
    """Vosk (Kaldi) recogniser over a model directory; optional grammar (phrase list) mode.

    With `grammar`, the recogniser only outputs those phrases (plus "[unk]"), which is faster
    and more robust for a fixed command set; it only works with models that have a dynamic
    graph (the "small" models) — others ignore it (vosk logs a warning). Confidence is the
    mean per-word confidence (SetWords). Non-word markers ([unk], [noise], ...) are dropped.
    """

    name = "vosk"

    def __init__(self, model_dir: str | Path, grammar: list[str] | None = None) -> None:
        model_dir = Path(model_dir)
        if not model_dir.is_dir():
            raise AsrError(f"vosk model directory not found: {model_dir} "
                           "(install one with `edge-plm asr install` or `edge-plm asr fetch`)")
        try:
            import vosk  # noqa: PLC0415 - heavy import only when used
        except ImportError as exc:
            raise AsrError(f"vosk is not installed ({exc})") from exc
        vosk.SetLogLevel(-1)  # Kaldi's stderr chatter; our own log says what was loaded
        t0 = time.perf_counter()
        try:
            self._model = vosk.Model(str(model_dir))
        except Exception as exc:  # vosk raises a bare Exception("Failed to create a model")
            raise AsrError(f"vosk could not load the model in {model_dir}: {exc}") from exc
        self.model_dir = model_dir
        self.grammar = list(grammar) if grammar else None
        self._vosk = vosk
        self.recognizer = self.make_recognizer()
        self.lock = threading.Lock()
        self.current_session = None
        self.load_ms = (time.perf_counter() - t0) * 1000.0
        log.info("vosk model %s loaded in %.0f ms%s", model_dir, self.load_ms,
                 f" (grammar of {len(self.grammar)} phrases)" if self.grammar else "")

    def make_recognizer(self):
        try:
            if self.grammar:
                rec = self._vosk.KaldiRecognizer(self._model, float(TARGET_RATE), json.dumps(self.grammar))
            else:
                rec = self._vosk.KaldiRecognizer(self._model, float(TARGET_RATE))
        except Exception as exc:
            raise AsrError(f"vosk could not create a recogniser: {exc}") from exc
        rec.SetWords(True)
        return rec

    def session(self):
        return VoskSession(self)

    def _decode(self, samples: np.ndarray) -> tuple[str, float | None]:
        try:
            self.recognizer.AcceptWaveform(samples.astype("<i2").tobytes())
            result = json.loads(self.recognizer.FinalResult())  # also resets the recogniser
        except Exception as exc:
            self.recognizer = self.make_recognizer()  # do not reuse a recogniser in a bad state
            raise AsrError(f"vosk failed to decode {len(samples)} samples: {exc}") from exc
        words = [w for w in result.get("result", []) if not is_marker(w.get("word", ""))]
        if words:
            return " ".join(w["word"] for w in words), float(np.mean([w.get("conf", 0.0) for w in words]))
        return " ".join(w for w in result.get("text", "").split() if not is_marker(w)), None


class TextASR(AsrBackend):
    """Passes a text utterance's transcript through (confidence 1.0: nothing was misheard)."""

    name = "text"
    streams = False

    def transcribe(self, samples: np.ndarray, batch: bool = False) -> Transcript:
        raise AsrError("the text ASR backend has no acoustic model: give it utterances from a "
                       "text source, or choose the vosk/pocketsphinx backend for audio")

    def transcribe_utterance(self, utterance: Utterance) -> Transcript:
        t0 = time.perf_counter()
        if utterance.text is None:
            raise AsrError(f"the text ASR backend got an audio utterance (source={utterance.source!r}, "
                           f"path={utterance.path!r}) without text")
        return Transcript(text=utterance.text.strip(), backend=self.name,
                          decode_ms=(time.perf_counter() - t0) * 1000.0, confidence=1.0)


def resolve_vosk_model(asr_config, models_dir: str | Path | None) -> Path | None:
    """The Vosk model to use: `asr.vosk_model` as a path or a name under models_dir; else an
    installed model whose name mentions `asr.language` (e.g. vosk-model-small-en-us-0.15)."""
    from edge_plm.voice.models import list_models  # noqa: PLC0415 - models imports nothing from here

    models_dir = Path(models_dir) if models_dir else None
    if asr_config.vosk_model:
        given = Path(asr_config.vosk_model).expanduser()
        for candidate in (given, models_dir / given if models_dir else None):
            if candidate is not None and candidate.is_dir():
                return candidate
        raise AsrError(f"asr.vosk_model {asr_config.vosk_model!r} is neither a directory nor a "
                       f"model installed in {models_dir}")
    if models_dir is None or not models_dir.is_dir():
        return None
    installed = [m for m in list_models(models_dir) if m.valid]
    lang = (asr_config.language or "").lower()
    matching = [m for m in installed if lang and lang in m.name.lower().replace("_", "-").split("-")]
    if matching:
        return matching[0].path
    if installed:
        log.warning("installed vosk models %s do not look like language %r; not using them "
                    "automatically (set asr.vosk_model to force one)", [m.name for m in installed], lang)
    return None


def ear_lm_path(asr_config) -> Path | None:
    """The LM file pocketsphinx loads for ``asr.lm``: the shipped ear LM ("household",
    "shipped"), or None for the wheel's general LM ("general")."""
    from edge_plm.voice.ear_lm import EAR_LM  # noqa: PLC0415

    return None if asr_config.lm == "general" else EAR_LM


def make_pocketsphinx(asr_config, adapt_cmn: bool = True) -> PocketSphinxASR:
    """pocketsphinx with the ear's configured language model (``asr.lm``)."""
    return PocketSphinxASR(adapt_cmn=adapt_cmn, lm=ear_lm_path(asr_config))


def make_asr(asr_config, models_dir: str | Path | None = None) -> AsrBackend:
    """Create the configured backend. `auto`: vosk when a model is configured or installed for
    the configured language, else the embedded pocketsphinx English model. Logs the choice."""
    backend = asr_config.backend
    if backend == "text":
        log.info("ASR backend: text (transcripts given directly)")
        return TextASR()
    if backend == "pocketsphinx":
        log.info("ASR backend: pocketsphinx (configured)")
        return make_pocketsphinx(asr_config)
    if backend == "vosk":
        model = resolve_vosk_model(asr_config, models_dir)
        if model is None:
            raise AsrError(f"asr.backend is 'vosk' but no model is configured (asr.vosk_model) or "
                           f"installed in {models_dir}; run `edge-plm asr fetch` or `asr install`")
        log.info("ASR backend: vosk, model %s (configured)", model)
        return VoskASR(model, asr_config.vosk_grammar or None)
    if backend != "auto":
        raise AsrError(f"unknown ASR backend {backend!r} (auto | vosk | pocketsphinx | text)")
    try:
        model = resolve_vosk_model(asr_config, models_dir)
    except AsrError as exc:
        log.error("%s; falling back to pocketsphinx", exc)
        model = None
    if model is not None:
        log.info("ASR backend: vosk (auto), model %s", model)
        return VoskASR(model, asr_config.vosk_grammar or None)
    if (asr_config.language or "en").lower() not in ("en", "en-us", "english"):
        log.warning("no vosk model for language %r; pocketsphinx only understands English",
                    asr_config.language)
    log.info("ASR backend: pocketsphinx (auto: no vosk model configured or installed in %s)", models_dir)
    return make_pocketsphinx(asr_config)


__all__ = ["AsrError", "Transcript", "AsrBackend", "PocketSphinxASR", "VoskASR", "TextASR",
           "ear_lm_path", "make_asr", "make_pocketsphinx", "resolve_vosk_model"]
