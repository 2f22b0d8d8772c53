"""Endpointing: where does an utterance start and end?

The stream is cut into blocks of `block_ms`; each block is classified speech or not by the
configured VAD (`edge_plm.voice.vad`: its level reaches `threshold_db` dBFS, or WebRTC's voice
activity detector says so). An utterance starts at the first speech block (plus a short
pre-roll so soft onsets are kept) and ends after `silence_tail_ms` of non-speech. Utterances
whose speech is shorter than `min_utterance_ms` are dropped (clicks, door bangs); ones that
reach `max_utterance_ms` are cut there and flagged `truncated`.

Streaming: `feed_events` also hands out the utterance's audio while it is being spoken
(`Speech` events), so a recogniser can decode it before the endpoint. A block is handed out as
soon as it is certain to be part of the finished `Segment` (speech, the pre-roll, and up to
`post_roll_ms` after the last speech block; silence beyond that only once speech resumes), so
the samples handed out are exactly the segment's. `Dropped` says the utterance in progress was
a noise burst after all.

A stuck microphone (hum or noise constantly above the threshold) would otherwise yield one
maximum-length utterance after another, each costing a full ASR decode. After a cut the
endpointer therefore waits for `silence_tail_ms` of silence before it accepts a new utterance,
and logs the condition once per episode.

Pure computation on numpy arrays: no I/O, usable at any sample rate (`with_rate`).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import numpy as np

from edge_plm.voice.pcm import AudioError, clipped_fraction
from edge_plm.config.settings import AudioConfig
from edge_plm.voice.vad import FLOOR_DB, block_dbfs, make_vad

log = logging.getLogger(__name__)

CLIP_WARN_FRACTION = 0.01


@dataclass
class Segment:
    """A finished utterance from `Endpointer.feed`: samples at the endpointer's rate and where
    they sat in the stream (ms since the endpointer started or was reset)."""

    samples: np.ndarray
    sample_rate: int
    start_ms: float
    end_ms: float
    truncated: bool = False
    clipped: float = 0.0
    tail_ms: float = 0.0  # audio from the end of the last speech block to the endpoint

    @property
    def duration_ms(self) -> float:
        return 1000.0 * len(self.samples) / self.sample_rate


@dataclass
class Speech:
    """`feed_events`: samples of the utterance in progress, certain to be part of its Segment."""

    samples: np.ndarray


@dataclass
class Dropped:
    """`feed_events`: the utterance in progress was too short (a click): forget its Speech."""


Event = Speech | Segment | Dropped


@dataclass
class TrimResult:
    """Result of `Endpointer.trim_result`: the kept samples and their bounds in the input."""

    samples: np.ndarray
    start: int  # first kept sample index
    end: int  # one past the last kept sample
    truncated: bool  # cut at max_utterance_ms


_AUDIO = AudioConfig()  # the built-in defaults of `[audio]`


@dataclass
class Endpointer:
    """Streaming energy endpointer. `feed(block)` returns the utterances that finished.

    Parameters mirror `AudioConfig` (see `from_config`), and so do their defaults (one set of
    defaults: the settings'); `pre_roll_ms`/`post_roll_ms` keep a little audio around the
    detected speech so consonants at the edges are not lost.
    """

    sample_rate: int = _AUDIO.sample_rate
    block_ms: int = _AUDIO.block_ms
    threshold_db: float = _AUDIO.energy_threshold_db
    silence_tail_ms: int = _AUDIO.silence_tail_ms
    min_utterance_ms: int = _AUDIO.min_utterance_ms
    max_utterance_ms: int = _AUDIO.max_utterance_ms
    pre_roll_ms: int = 150
    post_roll_ms: int = 150
    vad: str = _AUDIO.vad  # energy | webrtc (edge_plm.voice.vad)
    vad_aggressiveness: int = _AUDIO.vad_aggressiveness
    # gate by the running noise floor (edge_plm.voice.vad; None: off)
    floor_margin_db: float | None = _AUDIO.vad_floor_margin_db or None

    def __post_init__(self) -> None:
        if self.sample_rate <= 0 or self.block_ms <= 0:
            raise AudioError(f"endpointer: sample_rate and block_ms must be positive "
                             f"(got {self.sample_rate}, {self.block_ms})")
        if not 0 <= self.min_utterance_ms < self.max_utterance_ms:
            raise AudioError(f"endpointer: need 0 <= min_utterance_ms < max_utterance_ms "
                             f"(got {self.min_utterance_ms}, {self.max_utterance_ms})")
        if self.silence_tail_ms < 0:
            raise AudioError("endpointer: silence_tail_ms must be >= 0")
        self.block = max(1, int(round(self.sample_rate * self.block_ms / 1000)))
        self._vad = make_vad(self.vad, self.sample_rate, self.block_ms, self.threshold_db,
                             self.vad_aggressiveness, self.floor_margin_db)
        self.reset()

    @classmethod
    def from_config(cls, audio_config, sample_rate: int | None = None) -> Endpointer:
        """Build from `settings.AudioConfig` (optionally at a capture rate other than its own);
        `AudioError` for what `config check` refuses (`AudioConfig.problems`)."""
        c = audio_config
        found = [p for p in c.problems() if not p.startswith("audio.source")]
        if found:
            raise AudioError("; ".join(found))
        return cls(sample_rate=sample_rate or c.sample_rate, block_ms=c.block_ms,
                   threshold_db=c.energy_threshold_db, silence_tail_ms=c.silence_tail_ms,
                   min_utterance_ms=c.min_utterance_ms, max_utterance_ms=c.max_utterance_ms,
                   vad=c.vad, vad_aggressiveness=c.vad_aggressiveness,
                   floor_margin_db=c.vad_floor_margin_db or None)

    def with_rate(self, sample_rate: int) -> Endpointer:
        """The same settings at another sample rate (dB and ms do not depend on the rate)."""
        return dataclasses.replace(self, sample_rate=sample_rate)

    # -- streaming ------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget the stream: no pending samples, no utterance in progress."""
        self._pending = np.zeros(0, dtype=np.int16)
        self._preroll: list[np.ndarray] = []
        self._blocks: list[np.ndarray] = []
        self._speech_blocks = 0  # speech blocks in the current utterance
        self._last_speech = 0  # number of blocks up to and including the last speech block
        self._silence_run = 0  # consecutive non-speech blocks
        self._stuck = False  # after a max-length cut: wait for silence
        self._pos_blocks = 0  # blocks consumed since reset
        self._start_block = 0
        self._handed = 0  # blocks of the current utterance already handed out as Speech
        self._events: list[Event] = []
        self.cuts = 0  # max-length cuts since reset (a stuck mic shows as many)

    @property
    def in_speech(self) -> bool:
        """True while an utterance is being collected."""
        return bool(self._blocks)

    def _ms(self, blocks: int) -> float:
        return blocks * self.block * 1000.0 / self.sample_rate

    def _blocks_for(self, ms: float) -> int:
        return int(np.ceil(ms * self.sample_rate / 1000.0 / self.block))

    def feed(self, samples: np.ndarray) -> list[Segment]:
        """Consume int16 mono samples of any length; return utterances completed by them."""
        return [e for e in self.feed_events(samples) if isinstance(e, Segment)]

    def feed_events(self, samples: np.ndarray) -> list[Event]:
        """Consume samples; return, in stream order, the Speech handed out, the Segments
        finished and the utterances Dropped (see the module docstring)."""
        samples = np.asarray(samples)
        if samples.ndim != 1:
            raise AudioError(f"endpointer expects mono samples (1-D), got shape {samples.shape}")
        if samples.dtype != np.int16:
            raise AudioError(f"endpointer expects int16 samples, got {samples.dtype}")
        buf = np.concatenate([self._pending, samples]) if len(self._pending) else samples
        n_full = len(buf) // self.block
        self._pending = buf[n_full * self.block :].copy()
        for i in range(n_full):
            seg = self._step(buf[i * self.block : (i + 1) * self.block])
            if seg is not None:
                self._events.append(seg)
        out, self._events = self._events, []
        return out

    def flush(self) -> list[Segment]:
        """End of stream: return the utterance in progress if it is long enough."""
        return [e for e in self.flush_events() if isinstance(e, Segment)]

    def flush_events(self) -> list[Event]:
        """End of stream, as events: the rest of the utterance in progress and its end."""
        seg = self._finish(truncated=False) if self._blocks else None
        self._pending = np.zeros(0, dtype=np.int16)
        out, self._events = self._events + ([seg] if seg is not None else []), []
        return out

    def _hand_out(self, upto: int) -> None:
        """Hand out blocks [handed, upto) of the current utterance as one Speech event."""
        if upto > self._handed:
            self._events.append(Speech(np.concatenate(self._blocks[self._handed:upto])))
            self._handed = upto

    def _step(self, block: np.ndarray) -> Segment | None:
        speech = self._vad.is_speech(block)
        self._pos_blocks += 1
        tail_blocks = self._blocks_for(self.silence_tail_ms)
        if self._stuck:  # after a max-length cut, wait for real silence
            self._silence_run = 0 if speech else self._silence_run + 1
            if self._silence_run >= max(1, tail_blocks):
                log.info("input level back below %.0f dBFS; listening again", self.threshold_db)
                self._stuck = False
                self._silence_run = 0
            return None
        if not self._blocks:
            if not speech:
                self._preroll.append(block)
                keep = self._blocks_for(self.pre_roll_ms)
                if len(self._preroll) > keep:
                    del self._preroll[: len(self._preroll) - keep]
                return None
            self._start_block = self._pos_blocks - 1 - len(self._preroll)
            self._blocks = list(self._preroll)
            self._preroll = []
            self._speech_blocks = 0
            self._silence_run = 0
            self._handed = 0
        self._blocks.append(block)
        if speech:
            self._speech_blocks += 1
            self._silence_run = 0
            self._last_speech = len(self._blocks)
        else:
            self._silence_run += 1
        self._hand_out(min(len(self._blocks), self._last_speech + self._blocks_for(self.post_roll_ms)))
        if self._ms(len(self._blocks)) >= self.max_utterance_ms:
            return self._finish(truncated=True)
        if self._silence_run >= tail_blocks and tail_blocks > 0:
            return self._finish(truncated=False)
        return None

    def _finish(self, truncated: bool) -> Segment | None:
        keep = len(self._blocks) if truncated else min(
            len(self._blocks), self._last_speech + self._blocks_for(self.post_roll_ms))
        if truncated:
            self._hand_out(keep)
        blocks, start_block = self._blocks[:keep], self._start_block
        speech_ms = self._ms(self._speech_blocks)
        tail_ms = self._ms(len(self._blocks) - self._last_speech)
        self._blocks, self._speech_blocks, self._silence_run, self._last_speech = [], 0, 0, 0
        self._handed = 0
        if truncated:
            self.cuts += 1
            self._stuck = True
            log.warning("utterance cut at the maximum length (%d ms); if this repeats, the "
                        "microphone may be stuck or the room too loud for energy_threshold_db=%.0f",
                        self.max_utterance_ms, self.threshold_db)
        elif speech_ms < self.min_utterance_ms:
            log.debug("dropped a %.0f ms noise burst (shorter than min_utterance_ms)", speech_ms)
            self._events.append(Dropped())
            return None
        samples = np.concatenate(blocks)
        clip = clipped_fraction(samples)
        if clip > CLIP_WARN_FRACTION:
            log.warning("%.1f%% of the utterance is clipped: lower the input gain", 100 * clip)
        return Segment(samples=samples, sample_rate=self.sample_rate, start_ms=self._ms(start_block),
                       end_ms=self._ms(start_block + len(blocks)), truncated=truncated, clipped=clip,
                       tail_ms=tail_ms)

    # -- whole recordings -----------------------------------------------------------------

    def speech_bounds(self, samples: np.ndarray) -> tuple[int, int] | None:
        """(start, end) sample indices of the first..last speech block (by the configured
        VAD), or None if no speech."""
        samples = np.asarray(samples)
        n = len(samples) // self.block
        if n == 0:
            return None
        if self.vad == "energy" and self.floor_margin_db is None:
            rms = np.empty(n)
            step = 4096  # blocks at a time: a long recording is never one float array
            for a in range(0, n, step):
                b = min(n, a + step)
                frames = samples[a * self.block:b * self.block].astype(np.float64).reshape(-1, self.block)
                rms[a:b] = np.sqrt(np.mean(frames * frames, axis=1))
            with np.errstate(divide="ignore"):
                db = np.where(rms > 0, 20.0 * np.log10(np.maximum(rms, 1e-12) / 32768.0), FLOOR_DB)
            idx = np.flatnonzero(db >= self.threshold_db)
        else:
            blocks = samples[: n * self.block].astype(np.int16).reshape(n, self.block)
            idx = np.flatnonzero([self._vad.is_speech(b) for b in blocks])
        if len(idx) == 0:
            return None
        return int(idx[0]) * self.block, int(idx[-1] + 1) * self.block

    def trim_result(self, samples: np.ndarray) -> TrimResult:
        """Trim leading/trailing silence of a whole recording (keeping the pre/post roll).

        No speech at all gives an empty result; longer than max_utterance_ms is cut and
        flagged. The minimum length is not applied: a file is a deliberate utterance.
        """
        samples = np.asarray(samples, dtype=np.int16)
        bounds = self.speech_bounds(samples)
        if bounds is None:
            return TrimResult(np.zeros(0, dtype=np.int16), 0, 0, False)
        pre = int(self.pre_roll_ms * self.sample_rate / 1000)
        post = int(self.post_roll_ms * self.sample_rate / 1000)
        start = max(0, bounds[0] - pre)
        end = min(len(samples), bounds[1] + post)
        max_len = int(self.max_utterance_ms * self.sample_rate / 1000)
        truncated = end - start > max_len
        if truncated:
            log.warning("recording has %.1f s of sound, cut to max_utterance_ms=%d",
                        (end - start) / self.sample_rate, self.max_utterance_ms)
            end = start + max_len
        return TrimResult(samples[start:end].copy(), start, end, truncated)

    def trim(self, samples: np.ndarray) -> np.ndarray:
        """Samples of a whole recording without leading/trailing silence (empty if all silent)."""
        return self.trim_result(samples).samples


__all__ = ["Dropped", "Endpointer", "Event", "Segment", "Speech", "TrimResult", "block_dbfs", "FLOOR_DB"]
