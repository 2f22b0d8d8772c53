"""The learner off the utterance path: a worker thread, fed by a queue, runs every `Learner` call
(labels, unlabelled transcripts, versions and the gate, forget requests, polling the store),
and publishes a `Predictor` (`learning/predictor.py`: a copy of the model, its version, the
household and the priors) after its changes; predictions read the latest one and nothing else.

The database stays the source of truth: a label reaches the store (`ReplayStore.set_label`)
before it is queued, so a kill loses at most the learning of queued labels, which the next
start re-learns from the database (`Learner.reconcile`). How it fits the loop: docs/loop.md
("The learner worker").

Two modes. Asynchronous (`edge-plm run`): prediction never waits for learning; the predictor's
model is a copy (`clone_model`), swapped in one reference assignment, so it is never
half-updated. Synchronous (replays, `edge-plm eval`, tests): every call runs at once on the
caller's thread and prediction reads the live model itself (under the worker's lock), so
results are exactly reproducible. In neither mode does a prediction poll the store or write.

The hand-off: an utterance reads the predictor once (`predict_all`: the predictions and the
version stored with them come from the same `Predictor`); a published model is only read
(`SwitchModel.predict` changes nothing in it; with several devices its name queries are made
once, by `Predictor.publish` on the worker thread, and then only read); `call` returns once
the predictor after its task is published, or raises `WorkerTimeout`; `submit` and `close`
check and change ``closed`` under one lock, so nothing is queued after the worker's last item.
"""

from __future__ import annotations

import copy
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from edge_plm.errors import EdgePlmError
from edge_plm.learning.learner import Learner, LabelOutcome
from edge_plm.learning.predictor import Predicted, Predictor
from edge_plm.switch.model import SwitchModel, SwitchPrediction

log = logging.getLogger(__name__)

Task = Callable[[Learner], Any]
ErrorHandler = Callable[[str, BaseException], None]
CALL_TIMEOUT_S = 600.0  # a `call` waits at most this long (a rebuild of a big store: minutes)


class WorkerTimeout(EdgePlmError, TimeoutError):
    """A `LearnerWorker.call` did not finish (and publish its predictor) in time."""


def clone_model(model: SwitchModel) -> SwitchModel:
    """An independent copy of `model` for a predictor (`copy.deepcopy`: nothing it holds is
    shared with the original, so learning on one never changes the other). On a starting
    model that learned 200 labels (1,503 examples) it took 20 ms and a pickle round trip
    25 ms; learning one label 3.4 ms (`benchmarks/bench_relay_first.py --clone-cost`)."""
    return copy.deepcopy(model)


class _Stop:
    """The queue's last item: the worker ends after it."""


def _log_event(outcome: LabelOutcome | None) -> None:
    if outcome is not None and outcome.event is not None:
        e = outcome.event
        log.info("model version %s: %s (%s)", e.version, e.status, e.reason)


class LearnerWorker:
    """Runs `learner` off the utterance path (``synchronous=False``) or inline (``True``).

    ``on_error(what, exc)`` is told of a task that failed on the worker thread (the loop
    counts storage failures; anything else is logged with its traceback and the worker
    goes on); it is given here and never changed afterwards. ``idle_poll_s``: how often an
    idle worker polls the store (`Learner.poll`, itself rate-limited by ``sync_every_s`` /
    ``forget_check_s``). ``start=False``: the thread starts at `start` (asynchronous)."""

    def __init__(self, learner: Learner, synchronous: bool = True,
                 on_error: ErrorHandler | None = None, idle_poll_s: float = 0.25,
                 clone: Callable[[SwitchModel], SwitchModel] = clone_model,
                 call_timeout_s: float = CALL_TIMEOUT_S, start: bool = True) -> None:
        self.learner = learner
        self.synchronous = synchronous
        self.on_error = on_error
        self.idle_poll_s = idle_poll_s
        self.call_timeout_s = call_timeout_s
        self._clone = clone
        self._lock = threading.RLock()  # one learner call at a time
        self._queue: queue.Queue = queue.Queue()
        self._dirty = False  # the live model changed since the last predictor
        self._gate = threading.Lock()  # guards _closing/_closed and every put (`_put`)
        self._closing = False  # `close` began
        self._closed = False  # nothing more is queued
        self.published = 0  # predictors published (after the first)
        self._thread: threading.Thread | None = None
        self._predictor = None if synchronous else self._predictor_of(clone(learner.model))
        if not synchronous:
            self._thread = threading.Thread(target=self._work, name="edge-plm-learner",
                                            daemon=True)
            if start:
                self.start()

    def start(self) -> None:
        """Start the worker thread (asynchronous; ``start=False`` at construction: once its
        owner is ready for ``on_error``). Idempotent; synchronous: nothing to start."""
        if self._thread is not None and self._thread.ident is None:
            self._thread.start()

    def _predictor_of(self, model: SwitchModel) -> Predictor:
        lr = self.learner
        return Predictor.publish(model, lr.version, lr.household, lr.cfg.priors)

    # --- the utterance path: the published `Predictor` only --------------------------------
    @property
    def predictor(self) -> Predictor:
        """What predictions read now: the latest published `Predictor` (synchronous: the live
        model's, read under the worker's lock)."""
        if self.synchronous:
            with self._lock:
                return self._predictor_of(self.learner.model)
        return self._predictor

    def predict_all(self, text: str) -> Predicted:
        """Each device's prediction and the version it came from, from one read of the
        predictor (synchronous: of the live model, the lock held while it predicts)."""
        if self.synchronous:
            with self._lock:
                return self.predictor.predict(text)
        return self._predictor.predict(text)

    def predict(self, text: str) -> SwitchPrediction:
        """The command's prediction by the latest predictor (`Predictor.command`)."""
        if self.synchronous:
            with self._lock:
                return self.predictor.command(text)
        return self._predictor.command(text)

    def predict_devices(self, text: str) -> dict[str, SwitchPrediction]:
        """Each device's prediction (`predict_all` without the version)."""
        return dict(self.predict_all(text).devices)

    @property
    def version(self) -> str | None:
        """The model version predictions come from."""
        return self.predictor.version

    # --- off the path ---------------------------------------------------------------------
    def label(self, interaction_id: int, text: str, label: str, source: str | None,
              device_labels: dict[str, str] | None = None) -> None:
        """Learn a stored label (`Learner.on_label`; it may make a version)."""
        self.submit(lambda lr: _log_event(lr.on_label(interaction_id, text, label, source=source,
                                                      device_labels=device_labels)),
                    f"label of interaction {interaction_id}")

    def observe(self, text: str) -> None:
        """An unlabelled transcript (`Learner.observe`)."""
        self.submit(lambda lr: lr.observe(text), "unlabelled transcript")

    def poll(self) -> None:
        """Synchronous: the learner's rate-limited store checks now (a failure is logged,
        never raised: the loop goes on). Asynchronous: nothing (the worker polls by itself
        every ``idle_poll_s`` and after its tasks)."""
        if self.synchronous:
            try:
                self.submit(lambda lr: lr.poll(), "store poll")
            except Exception:
                log.exception("learner poll failed; continuing")

    def submit(self, task: Task, what: str = "learner task") -> None:
        """Run ``task(learner)``: at once (synchronous; its exceptions propagate) or queued
        for the worker, in order (RuntimeError once the worker is closed)."""
        if self.synchronous:
            with self._lock:
                task(self.learner)
            return
        if not self._put(task, what):
            raise RuntimeError("the learner worker is closed")

    def _put(self, task: Any, what: str, done: threading.Event | None = None,
             last: bool = False) -> bool:
        """Queue an item unless the worker is closed (checked and queued under one lock, so
        nothing goes in after the stop item; ``last``: the stop item, which closes it)."""
        with self._gate:
            if self._closed:
                return False
            self._closed = last
            self._queue.put((task, what, done))
            return True

    def call(self, task: Task, timeout: float | None = None) -> Any:
        """Run ``task(learner)`` after everything queued before it and return its result
        (its exception is raised here) once the predictor after it is published. Waits at
        most ``timeout`` seconds (default ``call_timeout_s``), then raises `WorkerTimeout`
        (the task may still run later)."""
        done = threading.Event()
        box: dict[str, Any] = {}

        def run(lr: Learner) -> None:
            try:
                box["value"] = task(lr)
            except BaseException as exc:  # handed to the caller below
                box["error"] = exc

        alive = not self.synchronous and self._thread is not None and self._thread.is_alive()
        if not (alive and self._put(run, "call", done)):
            with self._lock:
                return self._changed(task(self.learner))
        wait = self.call_timeout_s if timeout is None else timeout
        if not done.wait(wait):
            raise WorkerTimeout(f"the learner worker did not finish a call within {wait:g} s "
                                "(it may be stuck on a long task; the call still runs later)")
        if "error" in box:
            raise box["error"]
        return box["value"]

    def drain(self) -> None:
        """Wait until every queued task has run and its predictor is published."""
        if not self.synchronous:
            self._queue.join()

    def close(self) -> None:
        """Drain the queue, save the labels learned since the last version
        (`Learner.checkpoint_pending`) and stop the thread. Idempotent; the service's stop
        path calls it (through `Controller.stop`)."""
        with self._gate:
            if self._closing or self._closed:
                return
            self._closing = True
        try:
            self.call(lambda lr: lr.checkpoint_pending())
        finally:
            if self._thread is not None:
                self._put(_Stop, "stop", last=True)
                self._thread.join()
            with self._gate:
                self._closed = True

    # --- the worker thread ----------------------------------------------------------------
    def _changed(self, result: Any) -> Any:
        self._dirty = True
        if not self.synchronous:
            self._publish()
        return result

    def _work(self) -> None:
        while True:
            try:
                task, what, done = self._queue.get(timeout=self.idle_poll_s)
            except queue.Empty:
                self._run(lambda lr: lr.poll() and self._mark(), "store poll")
                self._publish()
                continue
            try:
                if task is _Stop:
                    return
                self._run(task, what)
                self._dirty = True
                self._run(lambda lr: lr.poll() and self._mark(), "store poll")
                if done is not None or self._queue.empty():  # a `call` returns after this
                    self._publish()
            finally:
                if done is not None:
                    done.set()
                self._queue.task_done()

    def _mark(self) -> None:
        self._dirty = True

    def _run(self, task: Task, what: str) -> None:
        with self._lock:
            try:
                task(self.learner)
            except Exception as exc:
                if self.on_error is not None:
                    self.on_error(what, exc)
                else:
                    log.exception("learner worker: %s failed; continuing", what)

    def _publish(self) -> None:
        """A copy of the live model becomes what predictions read (a new `Predictor`, one
        reference swap). If the copy fails (out of memory), predictions keep the previous
        one and the next change tries again."""
        if not self._dirty:
            return
        with self._lock:
            try:  # the household's name queries are made here, not on the utterance path
                predictor = self._predictor_of(self._clone(self.learner.model))
            except Exception:
                log.exception("learner worker: could not publish a predictor; "
                              "predictions keep the previous one")
                return
            self._dirty = False
        self._predictor = predictor
        self.published += 1


__all__ = ["LearnerWorker", "Predicted", "Predictor", "WorkerTimeout", "clone_model"]
