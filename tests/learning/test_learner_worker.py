"""The learner worker: the relay is driven before the previous label is learned, a stop drains
the queue and saves, predictions read whole snapshots, forgetting reaches the live model.
Real components: SQLite, the SwitchModel, gpiozero's MockFactory; "slow learning" is the real
learner held on an Event."""

from __future__ import annotations

import pickle
import sys
import threading
import time
from dataclasses import replace

import pytest

from edge_plm.loop.controller import Controller, text_utterance
from edge_plm.learning.learner import Learner, LearnerConfig
from edge_plm.errors import EdgePlmError
from edge_plm.learning.predictor import Predictor
from edge_plm.learning.worker import LearnerWorker, WorkerTimeout, clone_model
from edge_plm.learning.state import unlearned_in_active
from edge_plm.decide.policy import PolicyConfig
from edge_plm.loop.replay import build_replay
from edge_plm.config.settings import Settings

ON, OFF = "turn on the light", "turn off the light"
ACT = PolicyConfig(act_threshold=0.0, ask_threshold=0.0)  # act on any ON/OFF prediction
WAIT_S = 30.0  # generous: an Event that is never set fails the test instead of hanging it


def make(tmp_path, **lcfg):
    settings = replace(Settings(), policy=ACT)
    cfg = LearnerConfig(version_every=lcfg.pop("version_every", 1000), **lcfg)
    replay = build_replay(settings, tmp_path / "db" / "edge-plm.db", learner_cfg=cfg)
    for _ in range(6):  # known predictions: an easy pattern
        for text, label in ((ON, "ON"), (OFF, "OFF"), ("what time is it", "NOOP")):
            replay.controller.learner.model.learn(text, label)
    return replay


def asynchronous(replay, **kw) -> Controller:
    """The replay's controller again, with an asynchronous worker (as `edge-plm run` has)."""
    c = replay.controller
    worker = LearnerWorker(c.learner, synchronous=False, idle_poll_s=0.02, **kw)
    replay.controller = Controller(c.settings, c.store, c.learner, c.devices, None,
                                   clock=replay.clock, wall=c.wall, worker=worker)
    return replay.controller


def held_labels(learner: Learner, gate: threading.Event, entered: threading.Event,
                monkeypatch) -> None:
    """`learner.on_label` waits for `gate` before it learns (slow learning, on purpose)."""
    real = learner.on_label

    def slow(*args, **kwargs):
        entered.set()
        assert gate.wait(WAIT_S), "the test never released the learner"
        return real(*args, **kwargs)

    monkeypatch.setattr(learner, "on_label", slow)


def relay_pin(c: Controller) -> bool:
    return bool(c.devices.factory.pin(c.settings.gpio.relay_pin).state)


def test_the_relay_is_driven_while_the_previous_label_is_still_being_learned(tmp_path,
                                                                            monkeypatch):
    replay = make(tmp_path, holdout_fraction=0.0)
    gate, entered = threading.Event(), threading.Event()
    try:
        c = asynchronous(replay)
        held_labels(c.learner, gate, entered, monkeypatch)
        replay.clock.advance(100.0)
        first = c.handle(text_utterance(ON))
        assert first.action is not None and relay_pin(c)
        replay.clock.advance(30.0)  # the first one's window expires: labelled ON
        c.pump()
        assert entered.wait(WAIT_S)  # the worker is learning that label, and blocked
        assert replay.store.get(first.interaction_id).label == "ON"  # the database first
        second = c.handle(text_utterance(OFF))
        # the relay moved while the previous label's learning has not finished
        assert second.action is not None and second.action.value == "OFF"
        assert not relay_pin(c)
        assert first.interaction_id not in c.learner.keys and c.learner.pending_labels == 0
        gate.set()
        c.worker.drain()
        assert first.interaction_id in c.learner.keys and c.learner.pending_labels == 1
    finally:
        gate.set()
        replay.close()


def test_a_stop_in_the_middle_of_learning_leaves_no_label_unlearned(tmp_path, monkeypatch):
    replay = make(tmp_path, holdout_fraction=0.0)
    gate, entered = threading.Event(), threading.Event()
    try:
        c = asynchronous(replay)
        held_labels(c.learner, gate, entered, monkeypatch)
        for i in range(6):  # alternate, so every act changes the relay and gets a label
            replay.clock.advance(30.0)
            c.handle(text_utterance(ON if i % 2 == 0 else OFF))
        assert entered.wait(WAIT_S)  # learning the first label, the others queued
        labelled = replay.store.count(labeled=True)
        assert labelled >= 5 and c.learner.pending_labels == 0
        threading.Timer(0.2, gate.set).start()  # learning goes on while stop() waits
        replay.clock.advance(30.0)
        c.stop()  # labels the last interaction, drains the queue, saves a version
        assert replay.store.count(labeled=True) == labelled + 1
        assert c.learner.pending_labels == 0
        assert unlearned_in_active(replay.store, 0.0) == 0
        assert replay.store.active_model_version().n_train == len(c.learner.model.examples)
    finally:
        gate.set()
        replay.close()


def test_predictions_read_whole_snapshots_never_a_half_updated_model(tmp_path):
    replay = make(tmp_path)
    try:
        c = asynchronous(replay)
        probes = ["make it bright", "make it dark"]
        # the models before, in the middle of and after one task that learns two labels
        before = clone_model(c.learner.model)
        middle = clone_model(before)
        middle.learn(probes[0], "ON")
        after = clone_model(middle)
        after.learn(probes[1], "OFF")

        def dists(model):
            cfg = c.learner.cfg
            return [model.predict(t, prior_strength=cfg.prior_strength,
                                  evidence_prior=cfg.evidence_prior).distribution
                    for t in probes]

        expected = {"before": dists(before), "middle": dists(middle), "after": dists(after)}
        assert expected["middle"] != expected["before"] != expected["after"]
        gate, entered = threading.Event(), threading.Event()

        def two_labels(lr):
            lr.model.learn(probes[0], "ON")
            entered.set()
            assert gate.wait(WAIT_S)
            lr.model.learn(probes[1], "OFF")

        c.worker.submit(two_labels)
        assert entered.wait(WAIT_S)
        seen = []
        stop = threading.Event()

        def hammer():  # one snapshot per sample: the swap may come between two calls
            while not stop.is_set():
                seen.append(dists(c.worker.predictor.model))

        thread = threading.Thread(target=hammer)
        thread.start()
        assert [c.worker.predict(t).distribution for t in probes] == expected["before"]
        gate.set()
        c.worker.drain()
        assert [c.worker.predict(t).distribution for t in probes] == expected["after"]
        stop.set()
        thread.join()
        assert seen and all(s in (expected["before"], expected["after"]) for s in seen)
    finally:
        replay.close()


def test_the_snapshot_is_a_copy_the_worker_never_changes(tmp_path):
    replay = make(tmp_path)
    try:
        model = replay.controller.learner.model
        copy = clone_model(model)
        want = copy.predict("make it dark").distribution
        model.learn("make it dark", "OFF")
        assert copy.predict("make it dark").distribution == want
        assert model.predict("make it dark").distribution != want
        assert len(copy.examples) == len(model.examples) - 1
    finally:
        replay.close()


def test_forget_by_another_process_reaches_the_live_model_and_the_snapshot(tmp_path):
    replay = make(tmp_path, holdout_fraction=0.0, forget_check_s=0.0, sync_every_s=0.0)
    try:
        c = asynchronous(replay)
        replay.clock.advance(100.0)
        out = c.handle(text_utterance(ON))
        replay.clock.advance(30.0)
        c.pump()
        c.worker.drain()
        iid = out.interaction_id
        assert iid in c.learner.keys
        other = Learner.open(replay.store, c.learner.cfg, c.learner.checkpoints_dir, c.learner.household)
        other.forget_interactions([iid])  # what `edge-plm forget` does in its own process
        for _ in range(int(WAIT_S / 0.02)):  # the idle worker polls every 20 ms
            if iid not in c.learner.keys and c.worker.version == c.learner.version:
                break
            threading.Event().wait(0.02)
        c.worker.drain()
        assert iid not in c.learner.keys
        assert c.worker.predictor.model.n_examples == c.learner.model.n_examples
        assert c.worker.version == replay.store.active_model_version().version
    finally:
        replay.close()


def test_a_failing_task_is_reported_and_the_worker_goes_on(tmp_path):
    replay = make(tmp_path)
    errors = []
    worker = LearnerWorker(replay.controller.learner, synchronous=False,
                           on_error=lambda what, exc: errors.append((what, str(exc))))
    try:
        def fail(lr):
            raise OSError(28, "No space left on device")

        worker.submit(fail, "label of interaction 7")
        worker.observe("hello there")
        worker.drain()
        assert errors == [("label of interaction 7", "[Errno 28] No space left on device")]
        assert worker.call(lambda lr: lr.model.unlabeled_seen) >= 1
    finally:
        worker.close()
        replay.close()
    with pytest.raises(RuntimeError, match="closed"):
        worker.submit(lambda lr: None)


def test_synchronous_mode_runs_at_once_and_reads_the_live_model(tmp_path):
    replay = make(tmp_path)
    try:
        worker = replay.controller.worker
        assert worker.synchronous
        assert worker.predictor.model is replay.controller.learner.model
        worker.observe("hello there")
        assert replay.controller.learner.model.unlabeled_seen == 1
        with pytest.raises(ValueError):
            worker.submit(lambda lr: lr.model.learn("x", "MAYBE"))
    finally:
        replay.close()


# --- the hand-off (one snapshot per utterance, call after publish, close under one lock,
# --- prediction reads the published model only) ----------------------------------------------
class _PublishDuringPredict:
    """A snapshot's model whose prediction is followed at once by another publish (the race
    between reading the prediction and reading the version)."""

    def __init__(self, worker: LearnerWorker, model) -> None:
        self.worker, self.model = worker, model

    def predict_devices(self, text, devices, **kwargs):
        out = self.model.predict_devices(text, devices, **kwargs)
        self.worker._predictor = replace(self.worker._predictor, model=self.model,
                                         version="v-after")  # published meanwhile
        return out


def test_an_utterance_stores_the_version_of_the_model_that_predicted_it(tmp_path):
    replay = make(tmp_path)
    try:
        c = asynchronous(replay)
        model = c.worker.predictor.model
        c.worker._predictor = replace(c.worker.predictor, model=_PublishDuringPredict(c.worker, model),
                                      version="v-before")
        replay.clock.advance(100.0)
        out = c.handle(text_utterance(ON))
        assert c.worker.version == "v-after"
        assert replay.store.get(out.interaction_id).model_version == "v-before"
    finally:
        replay.close()


def test_call_returns_only_after_the_new_snapshot_is_published(tmp_path):
    replay = make(tmp_path)
    learner = replay.controller.learner

    def slow_clone(model):
        time.sleep(0.3)  # a big model's copy: the publish comes well after the task
        return clone_model(model)

    worker = LearnerWorker(learner, synchronous=False, idle_poll_s=0.02, clone=slow_clone)
    try:
        published = worker.published
        n = worker.call(lambda lr: (lr.model.learn("make it dark", "OFF"), lr.model.n_examples)[1])
        assert worker.published > published
        assert worker.predictor.model.n_examples == n == learner.model.n_examples
    finally:
        worker.close()
        replay.close()


def test_call_waits_with_a_timeout_and_says_so(tmp_path):
    replay = make(tmp_path)
    worker = LearnerWorker(replay.controller.learner, synchronous=False, idle_poll_s=0.02)
    gate = threading.Event()
    try:
        with pytest.raises(WorkerTimeout, match="did not finish a call within 0.2 s"):
            worker.call(lambda lr: gate.wait(WAIT_S), timeout=0.2)
        assert isinstance(WorkerTimeout("x"), EdgePlmError)
    finally:
        gate.set()
        worker.close()
        replay.close()


def test_a_task_submitted_while_the_worker_closes_never_hangs_drain(tmp_path):
    """`submit` checks "closed" and queues under the lock `close` takes: the task is queued
    before the stop item (and runs) or refused, never queued after it (drain would wait for
    it forever)."""
    replay = make(tmp_path)
    worker = LearnerWorker(replay.controller.learner, synchronous=False, idle_poll_s=0.02)
    closer = threading.Thread(target=worker.close, daemon=True)
    real_put = worker._queue.put
    fired = []

    def put(item, *args, **kwargs):  # the first put: close() gets the chance to run first
        if not fired:
            fired.append(True)
            closer.start()
            closer.join(0.5)
        return real_put(item, *args, **kwargs)

    worker._queue.put = put
    ran = []
    try:
        try:
            worker.submit(lambda lr: ran.append(True), "late task")
        except RuntimeError:
            pass  # refused: the worker had closed
        closer.join(WAIT_S)
        assert not closer.is_alive()
        drainer = threading.Thread(target=worker.drain, daemon=True)
        drainer.start()
        drainer.join(5.0)
        assert not drainer.is_alive(), "drain() hangs: a task was queued after the stop"
        assert fired
    finally:
        replay.close()


def _state(model) -> bytes:
    return pickle.dumps(model)


def test_prediction_changes_nothing_in_the_published_model(tmp_path):
    replay = make(tmp_path)
    try:
        c = asynchronous(replay)
        c.worker.call(lambda lr: lr.model.learn("switch on the kitchen lamp", "ON"))
        c.worker.call(lambda lr: lr.model.observe("the garden hose sprinkler"))  # new words last
        c.worker.drain()
        snap = c.worker.predictor
        assert snap.model.unlabeled_seen == c.learner.model.unlabeled_seen
        before = _state(snap.model)
        for text in (ON, OFF, "the garden hose sprinkler", "kitchen lamp off please",
                     "completely unheard words here"):
            c.worker.predict_all(text)
        assert _state(snap.model) == before
    finally:
        replay.close()


def predict_while_learning(c: Controller, texts: list[str], predict, learn, calls: int) -> list:
    """Two threads call ``predict(snapshot, text)`` on the latest snapshot, in turn over
    `texts`, while the worker runs ``learn(learner, k)`` `calls` times (each `call` publishes a
    snapshot before it returns); (snapshot, text, result) of every prediction. Fails on any
    exception in a predicting thread."""
    seen: list[tuple[Predictor, str, object]] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def predictor(offset: int) -> None:
        i = offset
        try:
            while not stop.is_set():
                snap, text = c.worker.predictor, texts[i % len(texts)]
                seen.append((snap, text, predict(snap, text)))
                i += 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often: races show
    threads = [threading.Thread(target=predictor, args=(k,)) for k in (0, 3)]
    try:
        for t in threads:
            t.start()
        for k in range(calls):
            c.worker.call(lambda lr, k=k: learn(lr, k))
            time.sleep(0.02)
    finally:
        stop.set()
        for t in threads:
            t.join()
        sys.setswitchinterval(old)
    assert not errors, errors
    assert len({id(snap) for snap, _, _ in seen}) > 1  # the worker published while they predicted
    return seen


def test_two_threads_predict_while_the_worker_learns(tmp_path):
    """Two threads predict from the published snapshots while the worker learns and observes:
    no exception, every prediction equals a single-threaded one of the same snapshot, and each
    snapshot is, after all those predictions, byte for byte what the worker published."""
    replay = make(tmp_path)
    texts = [ON, OFF, "what time is it", "make it bright", "lights off in the hall",
             "switch the lamp on", "new words keep coming", "word3 and another5 here"]
    published: dict[int, bytes] = {}

    def recording_clone(model):  # on the worker thread, before predictions can see it
        copy = clone_model(model)
        published[id(copy)] = _state(copy)
        return copy

    try:
        c = asynchronous(replay, clone=recording_clone)
        cfg = c.learner.cfg
        seen = predict_while_learning(
            c, texts, lambda snap, text: snap.model.predict(
                text, prior_strength=cfg.prior_strength, evidence_prior=cfg.evidence_prior).distribution,
            lambda lr, k: (lr.model.learn(f"turn on number {k}", "ON"),
                           lr.model.observe(f"word{k} and another{k} here")), 8)
        snaps = {id(s): s for s, _, _ in seen}
        assert all(_state(s.model) == published[id(s.model)] for s in snaps.values())
        reference = {}
        for sid, snap in snaps.items():
            alone = clone_model(snap.model)
            for text in texts:
                reference[sid, text] = alone.predict(
                    text, prior_strength=cfg.prior_strength,
                    evidence_prior=cfg.evidence_prior).distribution
        assert all(dist == reference[id(s), text] for s, text, dist in seen)
    finally:
        replay.close()


def _state_but_bag_memo(model) -> bytes:
    """The model's pickled state without the name queries' memos of n-gram bags, of word-pair
    cosines and of heard words' n-gram rows (pure values of the heard words, each stored in one
    dict assignment; the only thing a prediction adds)."""
    parts = {k: v for k, v in vars(model).items() if k != "naming"}
    naming = {k: v for k, v in vars(model.naming).items() if k != "_query"}  # the part that holds the queries
    query = vars(model.naming).get("_query")
    names = None if query is None else {k: v for k, v in vars(query).items() if k not in ("_bags", "_cosines", "_near")}
    return pickle.dumps((parts, naming, names))


def make_devices(tmp_path):
    from edge_plm.config.settings import DeviceConfig

    devices = [DeviceConfig("lamp", ["light"], relay_pin=17, switch_pin=27),
               DeviceConfig("fan", ["ceiling fan"], relay_pin=23, switch_pin=24)]
    replay = build_replay(replace(Settings(devices=devices), policy=ACT),
                          tmp_path / "db" / "edge-plm.db", learner_cfg=LearnerConfig(version_every=1000))
    lr = replay.controller.learner
    for _ in range(4):
        for text, labels in (("turn on the lamp", {"lamp": "ON"}), ("fan off", {"fan": "OFF"}),
                             ("what time is it", {})):
            lr.model.learn_devices(text, labels, lr.household.devices)
    return replay


def test_several_devices_predict_without_a_lock_while_the_worker_learns(tmp_path):
    """Several devices: the predictor's name queries are made before it is published, so a
    prediction takes no lock (the learner's, held elsewhere, does not stop it), two threads predict while
    the worker learns without an exception, every prediction equals a single-threaded one of
    the same snapshot, and each snapshot is, after them, what the worker published."""
    replay = make_devices(tmp_path)
    texts = ["turn on the lamp", "fan off", "switch the ceiling fan on", "lights off please",
             "what time is it", "turn everything off", "the light and the fan on", "zzz qqq"]
    published: dict[int, bytes] = {}
    house = replay.controller.learner.household
    names = house.devices

    def recording_clone(model):  # on the worker thread, before predictions can see it
        copy = clone_model(model)
        copy.prepare_devices(names)  # as publishing makes them
        published[id(copy)] = _state_but_bag_memo(copy)
        return copy

    try:
        c = asynchronous(replay, clone=recording_clone)
        c.worker.call(lambda lr: lr.model.learn_devices("fan on", {"fan": "ON"}, lr.household.devices))
        with c.worker._lock:  # the learner's lock held elsewhere: the prediction does not wait
            box: list = []
            t = threading.Thread(target=lambda: box.append(c.worker.predict_all("turn on the fan")))
            t.start()
            t.join(WAIT_S)
        assert box and set(box[0].devices) == {"lamp", "fan"}

        seen = predict_while_learning(
            c, texts, lambda snap, text: {n: p.distribution for n, p in
                                          snap.predict(text).devices.items()},
            lambda lr, k: lr.model.learn_devices(f"turn on the lamp number {k}", {"lamp": "ON"},
                                                 lr.household.devices), 6)
        snaps = {id(s): s for s, _, _ in seen}
        assert all(_state_but_bag_memo(s.model) == published[id(s.model)] for s in snaps.values())
        reference = {}
        for sid, s in snaps.items():
            alone = Predictor.publish(clone_model(s.model), s.version, house, c.learner.cfg.priors)
            for text in texts:
                reference[sid, text] = {n: p.distribution for n, p in
                                        alone.predict(text).devices.items()}
        assert all(dist == reference[id(s), text] for s, text, dist in seen)
    finally:
        replay.close()


# --- the published predictor: the utterance thread reads nothing else ------------------------
class _Watched:
    """A learner that records every attribute read on it and the thread that made it."""

    def __init__(self, learner: Learner) -> None:
        object.__setattr__(self, "_learner", learner)
        object.__setattr__(self, "reads", [])

    def __getattr__(self, name: str):
        self.reads.append((threading.get_ident(), name))
        return getattr(self._learner, name)


def test_the_utterance_thread_reads_only_the_published_predictor(tmp_path):
    """Several devices (their names, the priors and the household all matter): after the
    worker published, predicting on this thread reads nothing of the learner; the worker
    thread still reads it (it learns and publishes)."""
    replay = make_devices(tmp_path)
    watched = _Watched(replay.controller.learner)
    worker = LearnerWorker(watched, synchronous=False, idle_poll_s=0.02)
    try:
        worker.call(lambda lr: lr.model.learn("switch the lamp on", "ON"))
        me = threading.get_ident()
        watched.reads.clear()
        predicted = worker.predict_all("turn on the fan")
        command = worker.predict("turn on the fan")
        version = worker.version
        assert [name for who, name in watched.reads if who == me] == []
        assert set(predicted.devices) == {"lamp", "fan"} and predicted.version == version
        assert command.action in ("ON", "OFF", "NOOP")
        worker.call(lambda lr: None)
        assert any(who != me for who, _ in watched.reads)  # the worker thread reads it
    finally:
        worker.close()
        replay.close()


def test_predicting_never_polls_the_store_or_writes_a_checkpoint(tmp_path, monkeypatch):
    """Synchronous (replays): the loop's prediction and the learner's own read the live model
    and nothing else; the store is checked by the loop's `poll`, between inputs."""
    replay = make(tmp_path)
    learner = replay.controller.learner
    calls: list[str] = []
    monkeypatch.setattr(learner, "poll", lambda: calls.append("poll") or False)
    monkeypatch.setattr(learner.syncer, "due", lambda: (calls.append("due"), (True, True))[1])
    monkeypatch.setattr(learner.registry, "write", lambda *a, **k: calls.append("write"))
    try:
        replay.clock.advance(1000.0)
        worker = replay.controller.worker
        assert worker.synchronous
        assert worker.predict_all(ON).devices[next(iter(worker.predict_all(ON).devices))].action == "ON"
        assert worker.predict(OFF).action == "OFF" and learner.predict(OFF).action == "OFF"
        assert calls == []
        worker.poll()  # the loop's own check, between inputs
        assert calls == ["poll"]
    finally:
        monkeypatch.undo()
        replay.close()
