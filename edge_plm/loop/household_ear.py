"""The ear learns the household's words (``asr.lm = "household"``, the default).

The shipped ear LM (edge_plm/voice/ear_lm.py) knows the starting model's commands and chatter.
This keeps a household LM beside it: the shipped sentences plus the household's own
(`ear_lm.household_sentences`): the configured device names and aliases, dim / brighten / level
phrasings of each dimmer's names (`ear_lm.dimmer_sentences`: a household with no dimmer holds
none), the transcripts the person labelled ON or OFF themselves that the live switch model has
learned, and the transcripts a dimmer's knob (or the home hub's brightness) taught a kind other
than PLAIN (`ReplayStore.kind_labels`).

- **Versioned with the switch model.** The heard sentences are the person-labelled command
  transcripts (`ReplayStore.person_labelled_commands`) that the published model holds among its
  examples: a rollback to an older version takes the newer ones out of the ear with it, and
  `forget` (which deletes the rows and scrubs the models) takes a forgotten transcript out at
  the next refresh. The kind-labelled transcripts follow the database as the kind head does
  (it has no versions): `forget` deletes their rows, and they leave at the next refresh.
- **Nothing on disk.** The household LM lives in the recogniser's memory; its ARPA text is
  handed over through an anonymous in-memory file (``memfd``), never written to the state dir.
- **Never on the utterance path.** `follow` is called after each input and pump; at most every
  `min_interval_s` of loop time it compares what the household LM would hold with what it
  holds and, if that changed, rebuilds it: on a background thread in the service (the
  recogniser swaps it in between utterances), on the caller's thread in replays (so a replay
  is reproducible).
- **No self-taught mishearings.** Only the person's own labels count (a flip, an answer, a
  remote toggle, `edge-plm label`), never the device's unchallenged actions, and a transcript
  counts at most `ear_lm.MAX_REPEATS` times.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from edge_plm.actions import PLAIN
from edge_plm.switch.tokenizer import normalize
from edge_plm.voice.asr import AsrError, PocketSphinxASR
from edge_plm.voice.ear_lm import EarLmError, build_arpa, household_sentences, read_sentences

log = logging.getLogger(__name__)

MIN_INTERVAL_S = 30.0  # loop time between two looks at the household's words


def model_texts(model) -> set[str]:
    """The normalised transcripts of the live examples of a switch model."""
    return {model.text_of(k) for k in model.live_keys()}


def hand_over(arpa: str, use: Callable[[str], None], private_dir: Path | None = None) -> None:
    """Call ``use(path)`` with a path holding `arpa`: an anonymous in-memory file where the OS
    has one (Linux), else a 0600 temporary file in `private_dir`, removed at once after."""
    data = arpa.encode("utf-8")
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("edge-plm-ear-lm")
        try:
            os.write(fd, data)
            use(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        return
    fd, path = tempfile.mkstemp(prefix=".ear-", suffix=".arpa", dir=private_dir)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        use(path)
    finally:
        os.unlink(path)


class HouseholdEar:
    """Keeps `asr`'s language model in step with the household (module docstring)."""

    def __init__(self, asr: PocketSphinxASR, names: Iterable[str], synchronous: bool,
                 min_interval_s: float = MIN_INTERVAL_S, private_dir: Path | None = None,
                 dimmers: Iterable[str] = ()) -> None:
        self.asr = asr
        self.names = sorted(set(names))
        self.dimmers = sorted(set(dimmers))  # the dimmers' names and aliases
        self.synchronous = synchronous
        self.min_interval_s = float(min_interval_s)
        self.private_dir = private_dir
        self.built: tuple[str, ...] | None = None  # the household sentences the ear holds
        self.base: list[str] | None = None  # the shipped sentences, read at the first build
        self.builds = 0
        self._last_look: float | None = None
        self._thread: threading.Thread | None = None

    def follow(self, now: float, heard: Callable[[], list[str]], model,
               kinds: Callable[[], list[tuple[int, str, str]]] | None = None) -> None:
        """Rebuild the household LM if its sentences changed (at most every `min_interval_s`).
        `heard` gives the person-labelled command transcripts; `model` is the published switch
        model (its examples decide which of them the live version holds); `kinds` gives the
        kind labels (id, transcript, label): those not PLAIN join the heard transcripts."""
        if self._last_look is not None and now - self._last_look < self.min_interval_s:
            return
        if self._thread is not None and self._thread.is_alive():
            return
        self._last_look = now
        held = model_texts(model)
        kept = [t for t in heard() if normalize(t) in held]
        if kinds is not None:
            kept += [t for _, t, label in kinds() if label != PLAIN]
        wanted = tuple(household_sentences(self.names, kept, self.dimmers))
        if wanted == self.built or (not wanted and self.built is None):
            return
        if self.synchronous:
            self._build(wanted)
            return
        self._thread = threading.Thread(target=self._build, args=(wanted,), name="edge-plm-ear", daemon=True)
        self._thread.start()

    def _build(self, wanted: tuple[str, ...]) -> None:
        try:
            if self.base is None:
                self.base = read_sentences()
            arpa = build_arpa(self.base + list(wanted))
            label = f"household ear LM ({len(set(wanted))} household sentences)"
            hand_over(arpa, lambda path: self.asr.use_lm(path, label), self.private_dir)
            self.built = wanted
            self.builds += 1
        except (AsrError, EarLmError, OSError) as exc:
            log.error("the ear could not learn the household's words: %s", exc)

    def wait(self, timeout: float | None = None) -> None:
        """Wait for a background rebuild (tests, shutdown)."""
        if self._thread is not None:
            self._thread.join(timeout)


CMN_FILE = "ear-cepstral-mean.txt"  # under the state dir: 13 numbers, no words


def restore_cepstral_mean(asr, path: Path) -> None:
    """Start pocketsphinx from the cepstral mean the last run kept (`keep_cepstral_mean`): the
    first utterance after a restart is heard as well as the last one before it. A missing file
    is a first start; an unreadable one is logged and ignored (the decoder's own estimate)."""
    if not isinstance(asr, PocketSphinxASR) or not path.is_file():
        return
    try:
        asr.set_cepstral_mean(path.read_text(encoding="ascii").strip())
        log.info("ear: cepstral mean carried over from the last run (%s)", path)
    except (AsrError, OSError, UnicodeDecodeError) as exc:
        log.warning("ear: not using the saved cepstral mean %s: %s", path, exc)


def keep_cepstral_mean(asr, path: Path) -> None:
    """Save pocketsphinx's live cepstral mean for the next start (written whole, then renamed)."""
    if not isinstance(asr, PocketSphinxASR):
        return
    try:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(asr.cepstral_mean() + "\n", encoding="ascii")
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("ear: could not keep the cepstral mean for the next start: %s", exc)


def make_household_ear(settings, asr, synchronous: bool, private: Path | None = None) -> HouseholdEar | None:
    """The ear that learns the household's words, when ``asr.lm = "household"`` and the ASR is
    pocketsphinx; None otherwise. Its names: every ``[[devices]]`` name and alias; its dimmers:
    those of the ``kind = "dimmer"`` devices."""
    if settings.asr.lm != "household" or not isinstance(asr, PocketSphinxASR):
        return None
    names = [n for d in settings.devices for n in (d.name, *d.aliases)]
    dimmers = [n for d in settings.devices if d.kind == "dimmer" for n in (d.name, *d.aliases)]
    return HouseholdEar(asr, names, synchronous=synchronous, private_dir=private, dimmers=dimmers)


__all__ = ["CMN_FILE", "HouseholdEar", "MIN_INTERVAL_S", "hand_over", "keep_cepstral_mean", "make_household_ear",
           "model_texts", "restore_cepstral_mean"]
