"""The learner and the other processes that share its database: a version another process made
active (`edge-plm label`, `forget`, `model rollback`, `rebuild`) is loaded, and rows they
deleted (``meta.forget_seq`` moved) are taken out of the live model; `edge-plm forget` itself
deletes rows and what the model learned from them in one transaction. One `StoreSync` serves
one `Learner`: it keeps when it last looked and what it saw, is handed the learner's
`LiveModel`, and returns the new one when a version changed (docs/loop.md, "Start-up",
"Forgetting")."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from edge_plm.learning import forgetting
from edge_plm.learning.gate import predict_rows
from edge_plm.learning.live import LiveModel
from edge_plm.learning.types import ForgetOutcome, LearnerConfig
from edge_plm.learning.version_registry import VersionRegistry
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.store import ReplayStore
from edge_plm.switch.addressing import DeviceName

log = logging.getLogger("edge_plm.learning.learner")


class StoreSync:
    """Cross-process checks (rate-limited by `clock`) and forgetting, on `store` and the
    versions of `registry`."""

    def __init__(self, store: ReplayStore, cfg: LearnerConfig, clock: Callable[[], float],
                 registry: VersionRegistry, checkpoints_dir: Path) -> None:
        self.store = store
        self.cfg = cfg
        self.clock = clock
        self.registry = registry
        self.checkpoints_dir = checkpoints_dir
        self.last_sync = clock()
        self.sync_failed: str | None = None  # an active version that would not load
        self.forget_seq = store.forget_seq()  # deletions seen (see `forget_seq_moved`)
        self.last_forget_check = clock()

    def due(self) -> tuple[bool, bool]:
        """(a look for another active version is due: every ``sync_every_s``, a look for
        deleted rows is due: every ``forget_check_s``); the second counts as done now."""
        now = self.clock()
        sync = now - self.last_sync >= self.cfg.sync_every_s
        forget = now - self.last_forget_check >= self.cfg.forget_check_s
        if forget:
            self.last_forget_check = now
        return sync, forget

    def sync(self, live: LiveModel) -> LiveModel | None:
        """The database's active version loaded as the new live state, when it is not the one
        `live` descends from (None: it is, or it does not load; said once). The caller learns
        again what it lacks (the pending window's labels among them)."""
        self.last_sync = self.clock()
        active = self.store.active_model_version()
        if active is None or active.version == live.version or active.version == self.sync_failed:
            return None
        try:
            model = self.registry.load(active)
        except CheckpointError as exc:
            log.error("model version %s was made active by another process but cannot be "
                      "loaded (%s); keeping %s", active.version, exc, live.version)
            self.sync_failed = active.version
            return None
        pending = live.window.learned + live.window.relabelled
        log.warning("model version %s was made active by another process; loading it "
                    "(live model was %s, %d labels pending)",
                    active.version, live.version, len(pending))
        return LiveModel.loaded(model, active.version, self.store.holdout_rows())

    def forget_seq_moved(self) -> bool:
        """Rows were deleted since the last look (``meta.forget_seq`` moved; now seen). Every
        look first finishes the checkpoint rewrites a stopped `forget` still owes (without
        waiting for one that is still running: it finishes them itself), so a running service
        does not leave them to its next start."""
        forgetting.complete_owed(self.store, wait=False)
        seq = self.store.forget_seq()
        if seq == self.forget_seq:
            return False
        self.forget_seq = seq
        return True

    def gone(self, live: LiveModel) -> list[int]:
        """The interactions `live` learned that are no longer in the database. None gone: the
        strings of deleted unlabelled rows are scrubbed from the live model (and from the
        active version's checkpoint, saved from it before this look)."""
        ids = self.store.interaction_ids()
        gone = sorted(i for i in live.keys if i not in ids)
        if gone:
            log.warning("%d interaction(s) the live model learned were deleted: taking them out",
                        len(gone))
            return gone
        texts = forgetting.kept_texts(self.store)
        if any(live.model.scrub(texts).values()) and live.version is not None:
            others = {v.version for v in self.store.model_versions() if v.version != live.version}
            forgetting.rewrite_kept(self.store, self.checkpoints_dir, set(), texts, others)
        return []

    def forget_interactions(self, live: LiveModel, ids: list[int], devices: Sequence[DeviceName],
                            rebuild: bool = False, remove_audio: bool = True
                            ) -> tuple[ForgetOutcome, LiveModel]:
        """`edge-plm forget`: delete rows and what the model learned from them in one
        database transaction, or neither; (the outcome, the new live state). The new model
        (the live one without them, or with `rebuild` one re-learned from the remaining rows
        of `devices`) is written first as a candidate; then one transaction deletes the rows,
        bumps ``meta.forget_seq`` (a running service takes them out of its live model) and
        makes the new version active. A crash before it leaves the rows and the old model
        (the candidate is debris, cleaned at the next open); after it, both are gone."""
        ids = sorted({int(i) for i in ids})
        texts = forgetting.kept_texts(self.store, exclude=set(ids))

        def commit(name: str | None) -> None:  # the rewrites still owed: journalled with it
            self.store.delete_interactions(
                ids, remove_audio=remove_audio, activate_version=name,
                owe=lambda: forgetting.owed_versions(self.store, {name} if name else set()),
                tombstone=forgetting.tombstone_form)

        if rebuild:
            model, keys, learned = self.registry.rebuilt_model(devices, exclude=set(ids))
            model.scrub(texts)
            metrics = {"gate": "rebuild", "labels_in_window": learned, "skipped_rolled_back": 0,
                       "interactions": [None, None], "forgotten": len(ids)}
            name = self.registry.write(model, keys, metrics, parent=live.version, commit=commit)
            self.forget_seq = self.store.forget_seq()
            held = [i for i in ids if i in live.keys]
            new = LiveModel.loaded(model, name, self.store.holdout_rows())
            files = forgetting.rewrite_kept(self.store, self.checkpoints_dir, set(ids), texts, {name})
            return ForgetOutcome(held, [i for i in ids if i not in set(held)], name, files), new
        forgotten = live.drop(ids)
        absent = [i for i in ids if i not in set(forgotten)]
        scrubbed = live.model.scrub(texts)  # the strings of forgotten text, labelled or not
        name = None
        if forgotten or any(scrubbed.values()):
            metrics = {"gate": "forget", "forgotten": len(forgotten),
                       "interactions": [None, None], "labels_in_window": 0}
            name = self.registry.write(live.model, live.keys, metrics, parent=live.version,
                                       commit=commit)
        else:
            commit(None)
        self.forget_seq = self.store.forget_seq()
        files = forgetting.rewrite_kept(self.store, self.checkpoints_dir, set(ids), texts,
                                        {name} if name else set())
        if name is not None:
            live = live.saved(name, predict_rows(live.model, self.store.holdout_rows()))
        return ForgetOutcome(forgotten, absent, name, files), live

    def on_forget(self, live: LiveModel, ids: list[int]) -> tuple[ForgetOutcome, LiveModel]:
        """The person deleted these interactions: take them out of the live model and of the
        active version; (the outcome, the new live state). If the active version held any,
        it is saved again without them as a new active version (gate "forget"; its
        checkpoint then no longer holds their tokens or strings), and the other kept
        checkpoints are rewritten without them (`forgetting.rewrite_kept`)."""
        forgotten = live.drop([int(i) for i in ids])
        absent = [int(i) for i in ids if int(i) not in set(forgotten)]
        texts = forgetting.kept_texts(self.store, exclude={int(i) for i in ids})
        live.model.scrub(texts)
        in_good = [i for i in forgotten if i in live.good_keys]
        if not in_good:
            return ForgetOutcome(forgotten, absent), live
        good, good_keys = self.registry.reload_good(live.version)
        good.forget_examples([k for k in (good_keys.pop(i, None) for i in in_good)
                              if k is not None and k not in good.removed])
        good.scrub(texts)
        metrics = {"gate": "forget", "forgotten": len(in_good), "interactions": [None, None],
                   "labels_in_window": 0}
        name = self.registry.write(good, good_keys, metrics, parent=live.version, status="active")
        good_preds = predict_rows(good, self.store.holdout_rows())
        log.info("model version %s active: %s without %d forgotten interaction(s)", name,
                 live.version, len(in_good))
        files = forgetting.rewrite_kept(self.store, self.checkpoints_dir, set(int(i) for i in ids),
                                        texts, {name})
        new = replace(live, version=name, good_keys=good_keys, good_preds=good_preds)
        return ForgetOutcome(forgotten, absent, name, files), new


__all__ = ["StoreSync"]
