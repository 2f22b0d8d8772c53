"""What the loop stores, and hands to the learner: the database first, always.

`Recorder` owns storing outcomes: an input's row (stored before the policy runs: an unstored
utterance is not acted on), its decision and action, each device's part (`DeviceRows`), kept
audio, error rows for inputs without a usable transcript, and the labels as windows close,
each then handed to the learner (`LearnerWorker.label`, or `observe` for no label). It counts
what could not be stored (`storage_failures`): one ERROR line each, and the loop goes on.
docs/loop.md ("One interaction", "Storage failures").
"""

from __future__ import annotations

import logging
import os
import stat
from collections import deque
from collections.abc import Callable

from edge_plm.config.settings import Settings
from edge_plm.decide.devices import DevicePolicies, DeviceResolution, Resolved, Steps
from edge_plm.decide.policy import Action
from edge_plm.learning.worker import LearnerWorker
from edge_plm.loop import outcomes as device_outcomes
from edge_plm.learning.household import Household
from edge_plm.loop.outcomes import DeviceRows
from edge_plm.loop.records import Latency, Outcome, Rejected, Stopwatch, clamp, storage_failure
from edge_plm.store import ReplayStore, StorageError
from edge_plm.switch.model import SwitchPrediction
from edge_plm.voice.asr import Transcript
from edge_plm.voice.audio import Utterance, write_wav

log = logging.getLogger("edge_plm.loop.controller")

Clock = Callable[[], float]


def keep_audio(settings: Settings, iid: int, utt: Utterance) -> str | None:
    """Write the utterance's audio (0600 in a 0700 dir) only when configured."""
    if not settings.paths.keep_audio or len(utt.samples) == 0:
        return None
    try:
        directory = settings.paths.audio_path()
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        if stat.S_IMODE(directory.stat().st_mode) != 0o700:
            directory.chmod(0o700)
        path = directory / f"{iid:08d}.wav"
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600))
        os.chmod(path, 0o600)
        write_wav(path, utt.samples, utt.sample_rate)
        return str(path)
    except OSError as exc:
        log.error("could not keep the audio of interaction %d: %s", iid, exc)
        return None


class Recorder:
    """Stores the loop's outcomes in `store` and hands their labels to `worker`. ``clock``: the
    loop's clock; ``wall``: the wall-clock time stored with rows and labels."""

    def __init__(self, settings: Settings, store: ReplayStore, worker: LearnerWorker,
                 names: Household, clock: Clock, wall: Clock) -> None:
        self.settings = settings
        self.store = store
        self.worker = worker
        self.names = names
        self.rows = DeviceRows(store, names)
        self.clock = clock
        self.wall = wall
        self.storage_failures = 0  # interactions or labels that could not be stored
        self.last_storage_error: str | None = None
        self.open_texts: dict[int, str] = {}  # transcripts of interactions whose window is open
        # the latest resolved utterances, in order (for replay/tests; bounded: the service runs for months)
        self.resolutions: deque[Resolved] = deque(maxlen=1000)

    def storage_failed(self, what: str, exc: Exception) -> None:
        """One ERROR line (no traceback: nothing is wrong with the code), counted."""
        self.storage_failures += 1
        self.last_storage_error = f"{what} not stored: {exc}"
        log.error("%s", self.last_storage_error)

    def label_time(self, ts: float) -> float:
        """The wall-clock time of loop-clock time ``ts`` (when a label was given)."""
        return self.wall() - (self.clock() - ts)

    # --- an input's row -------------------------------------------------------------------
    def error_row(self, rejected: Rejected, watch: Stopwatch, utt: Utterance | None = None) -> Outcome:
        """An input without a usable transcript: stored with its error, never seen by the policy."""
        latency = watch.stop()
        error = rejected.error
        iid: int | None = None
        try:
            iid = self.store.add_interaction(ts=self.wall(), transcript="",
                                             asr_backend=rejected.asr_backend, error=error,
                                             model_version=self.worker.version, **latency.columns())
            if utt is not None and rejected.keep_audio:
                path = keep_audio(self.settings, iid, utt)
                if path:
                    self.store.update_interaction(iid, audio_path=path)
        except StorageError as exc:
            self.storage_failed("failed interaction", exc)
            return Outcome(iid, "", latency, error=error, stored=False)
        except Exception:
            log.exception("could not store the failed interaction (%s)", error)
            return Outcome(iid, "", latency, error=error, stored=False)
        return Outcome(iid, "", latency, error=error)

    def prediction(self, text: str, tr: Transcript, preds: dict[str, SwitchPrediction], lead: str,
                   version: str | None, watch: Stopwatch) -> int:
        """The interaction's row with the lead device's prediction, and each device's, stored
        before the policy runs (an unstored one is not acted on); ``version``: the model
        version the predictions came from. Returns the interaction's id."""
        pred = preds[lead]
        iid = self.store.add_interaction(
            ts=self.wall(), transcript=text, asr_backend=tr.backend,
            asr_confidence=tr.confidence, prediction=pred.action,
            confidence=clamp(pred.confidence), distribution=pred.distribution,
            model_version=version, latency_audio_ms=watch.ms["audio"],
            latency_asr_ms=watch.ms["asr"], latency_model_ms=watch.ms["model"])
        self.rows.predictions(iid, preds)
        return iid

    def decision(self, iid: int, utt: Utterance, text: str, preds: dict[str, SwitchPrediction],
                 lead: str, steps: Steps, driven: dict[str, Action], latency: Latency) -> Outcome:
        """The decision, the action and the rest of the latency into the (lead device's) row,
        each device's into its own; the utterance's `Outcome`."""
        audio_path = keep_audio(self.settings, iid, utt)
        decision, action = steps.steps[lead].decision, driven.get(lead)
        self.store.update_interaction(
            iid, decision=decision.value, action=action.value if action else None,
            latency_actuator_ms=latency.actuator, latency_total_ms=latency.total,
            **({"audio_path": audio_path} if audio_path else {}))
        self.rows.decisions(iid, steps, driven)
        pred = preds[lead]
        # transcripts reach the log (journald) only when asked for: `forget` cannot reach it
        shown = repr(text) if self.settings.paths.log_transcripts else f"({len(text)} characters)"
        log.info("#%d %s -> %s%s %.2f -> %s%s", iid, shown, self.names.of(lead, "{} "), pred.action,
                 clamp(pred.confidence), decision.value, f" {action.value}" if action else "")
        log.debug("#%d transcript %r", iid, text)
        return Outcome(iid, text, latency, devices=device_outcomes.results(preds, steps, driven), lead=lead)

    def answered(self, iid: int, name: str, action: Action) -> None:
        """A spoken yes drove device `name` to `action`: its outcome (one device: the
        interaction's row; several: that device's own row)."""
        if self.rows.per_device:
            self.store.update_device_outcomes(iid, {name: {"action": action.value}})
        else:
            self.store.update_interaction(iid, action=action.value)

    # --- labels ---------------------------------------------------------------------------
    def resolve_all(self, policies: DevicePolicies, resolutions: list[DeviceResolution]) -> None:
        """Label (the database, then the learner) or observe each resolved interaction: each
        device's label as its window closes, the utterance's when every device's has."""
        for res in self.rows.labels(policies, resolutions, self.label_time, self.storage_failed):
            try:
                self.resolve(res)
            except StorageError as exc:  # the label was not stored, so not learned either
                self.storage_failed(f"label of interaction {res.key}", exc)
            except Exception as exc:  # one failing label must not stop the loop
                if storage_failure(exc):
                    # the label is in the database; the model version it led to is not on disk
                    self.storage_failed(f"model checkpoint after the label of interaction "
                                        f"{res.key}", exc)
                    continue
                log.exception("could not apply the resolution of interaction %s", res.key)

    def resolve(self, r: Resolved) -> None:
        """One utterance resolved for every device: its label to the database (the source of
        truth), then to the learner (maybe on its thread); no label: the transcript is
        observed."""
        self.resolutions.append(r)
        text = self.open_texts.pop(r.key, None)
        log.info("#%s resolved: %s (%s)", r.key,
                 r.label.value if r.label else "no label", r.reason)
        if text is None:
            text = self.store.get(r.key).transcript
        if r.label is None or r.source is None:
            self.worker.observe(text)
            return
        label_ts = self.label_time(r.ts)
        self.store.set_label(r.key, r.label.value, r.source.value, ts=label_ts)
        # one device: the learner takes the command's label (it ignores device labels then)
        self.worker.label(int(r.key), text, r.label.value, r.source.value,
                          device_labels=r.device_labels)


__all__ = ["Recorder", "keep_audio"]
