"""Streaming recognition: an utterance is decoded while it is spoken.

    session = backend.session()      # one utterance
    session.feed(block)              # as the endpointer hands out its audio (any length)
    transcript = session.finish()    # after the endpoint: only the finalisation is left
    session.cancel()                 # the endpointer dropped it (a click): forget it

* pocketsphinx: `start_utt` at the first block, `process_raw(..., full_utt=False)` per block,
  `end_utt` + `hyp()` at `finish`. The cepstral mean is then estimated live (batch decoding
  of a whole utterance uses the utterance's own mean; the words can differ, see docs/benchmarks-log.md).
* Vosk: `AcceptWaveform` per block; when Kaldi's own endpointer closes a piece mid-utterance
  (`AcceptWaveform` returns True) the piece's `Result()` is kept; `FinalResult()` at `finish`.
  The transcript is the pieces' words in order.

`Transcript.decode_ms` of a streamed utterance is the time `finish` took (what follows the
endpoint); `stream_ms` is the decode time spent in `feed` while the person spoke. One session
per backend at a time (the decoder holds one utterance): opening a new one cancels an
unfinished one, with a warning. Decoder failures are `AsrError`s.
"""

from __future__ import annotations

import json
import logging
import time

import numpy as np

from edge_plm.voice.asr_base import SILENCE_DBFS, STREAM_BLOCK, AsrError, Transcript, check_samples, is_marker

log = logging.getLogger(__name__)


class AsrSession:
    """One utterance fed block by block; subclasses implement `_start`, `_feed`, `_end`."""

    def __init__(self, backend) -> None:
        self.backend = backend
        self.samples = 0
        self.stream_ms = 0.0
        self._sumsq = 0.0
        self._open = False  # the decoder has an utterance in progress
        self.done = False
        previous = getattr(backend, "current_session", None)
        if previous is not None and not previous.done:
            log.warning("%s: a new utterance started before the previous one was finished; "
                        "the previous one is dropped", backend.name)
            previous.cancel()
        backend.current_session = self

    def feed(self, samples: np.ndarray) -> None:
        """Decode these samples (int16, 16 kHz) as the continuation of the utterance."""
        if self.done:
            raise AsrError("this ASR session is finished; start a new one per utterance")
        samples = check_samples(samples)
        if len(samples) == 0:
            return
        t0 = time.perf_counter()
        x = samples.astype(np.float64)
        self._sumsq += float(np.dot(x, x))
        self.samples += len(samples)
        with self.backend.lock:
            if not self._open:
                self._start()
                self._open = True
            self._feed(samples.astype("<i2").tobytes())
        self.stream_ms += (time.perf_counter() - t0) * 1000.0

    def _silent(self) -> bool:
        """Empty or near-digital silence: decoders hallucinate words on zeros."""
        if self.samples == 0:
            return True
        rms = np.sqrt(self._sumsq / self.samples)
        return 20.0 * np.log10(max(rms, 1e-9) / 32768.0) < SILENCE_DBFS

    def finish(self) -> Transcript:
        """End the utterance: the words heard (markers removed) and their confidence."""
        if self.done:
            raise AsrError("this ASR session is already finished")
        t0 = time.perf_counter()
        text, confidence = "", None
        try:
            if self._open:
                with self.backend.lock:
                    text, confidence = self._end()
        finally:
            self.done, self._open = True, False
        if self._silent():
            text, confidence = "", None
        return Transcript(text=text, backend=self.backend.name,
                          decode_ms=(time.perf_counter() - t0) * 1000.0, confidence=confidence,
                          stream_ms=self.stream_ms, fluency=self.backend.fluency(text))

    def cancel(self) -> None:
        """Drop the utterance (the decoder is reset; nothing is returned)."""
        if self.done:
            return
        try:
            if self._open:
                with self.backend.lock:
                    self._end()
        except AsrError as exc:
            log.warning("%s: resetting a dropped utterance failed: %s", self.backend.name, exc)
        finally:
            self.done, self._open = True, False

    def _start(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _feed(self, data: bytes) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _end(self) -> tuple[str, float | None]:  # pragma: no cover - abstract
        raise NotImplementedError


class PocketSphinxSession(AsrSession):
    """pocketsphinx: start_utt / process_raw / end_utt on the backend's decoder."""

    def _start(self) -> None:
        d = self.backend.decoder
        try:
            if not self.backend.adapt_cmn:
                d.reinit_feat()  # the whole front end as configured (set_cmn keeps live-CMN state)
            d.start_utt()
        except RuntimeError as exc:
            raise AsrError(f"pocketsphinx could not start an utterance: {exc}") from exc

    def _feed(self, data: bytes) -> None:
        try:
            self.backend.decoder.process_raw(data, False, False)
        except RuntimeError as exc:
            raise AsrError(f"pocketsphinx failed to decode {len(data) // 2} samples: {exc}") from exc

    def _end(self) -> tuple[str, float | None]:
        d = self.backend.decoder
        try:
            d.end_utt()
            hyp = d.hyp()
            prob = d.get_prob() if hyp is not None else None
        except RuntimeError as exc:
            raise AsrError(f"pocketsphinx failed to finish the utterance: {exc}") from exc
        if hyp is None:
            return "", None
        words = [w for w in hyp.hypstr.split() if not is_marker(w)]
        conf = float(min(1.0, max(0.0, prob))) if prob is not None else None
        return " ".join(words), conf if words else None


class VoskSession(AsrSession):
    """Vosk: AcceptWaveform per block (keeping pieces Kaldi closes itself), FinalResult."""

    def _start(self) -> None:
        self._pieces: list[dict] = []

    def _feed(self, data: bytes) -> None:
        rec = self.backend.recognizer
        try:
            if rec.AcceptWaveform(data):
                self._pieces.append(json.loads(rec.Result()))
        except Exception as exc:  # vosk raises bare Exceptions
            self.backend.recognizer = self.backend.make_recognizer()
            raise AsrError(f"vosk failed to decode {len(data) // 2} samples: {exc}") from exc

    def _end(self) -> tuple[str, float | None]:
        try:
            self._pieces.append(json.loads(self.backend.recognizer.FinalResult()))  # also resets it
        except Exception as exc:
            self.backend.recognizer = self.backend.make_recognizer()
            raise AsrError(f"vosk failed to finish the utterance: {exc}") from exc
        words = [w for p in self._pieces for w in p.get("result", []) if not is_marker(w.get("word", ""))]
        if words:
            return " ".join(w["word"] for w in words), float(np.mean([w.get("conf", 0.0) for w in words]))
        return " ".join(w for p in self._pieces for w in p.get("text", "").split() if not is_marker(w)), None


def stream_recording(utterance, backend, tail_ms: float = 0.0, block: int = STREAM_BLOCK):
    """Feed a recorded utterance (e.g. a trimmed WAV file) to a new session of `backend` in
    30 ms blocks, as a microphone would deliver it, and mark its endpoint as now, `tail_ms`
    after its speech (the silence a microphone's endpointer would have waited). The utterance
    is returned with `stream`, `endpoint_at` and `tail_ms` set; its text is the backend's once
    `finish` is called (the controller's ASR stage)."""
    session = backend.session()
    samples = check_samples(utterance.samples)
    for i in range(0, len(samples), block):
        session.feed(samples[i:i + block])
    utterance.stream, utterance.tail_ms = session, float(tail_ms)
    utterance.endpoint_at = time.perf_counter()
    return utterance


__all__ = ["AsrSession", "PocketSphinxSession", "VoskSession", "stream_recording"]
