"""The learner and the other processes that share its database: a version another process made
active (`edge-plm label`, `forget`, `model rollback`, `rebuild`) is loaded, and rows they
deleted (``meta.forget_seq`` moved) are taken out of the live model; `edge-plm forget` itself
deletes rows and what the model learned from them in one transaction. One `StoreSync` belongs
to one `Learner` and works on its live state (docs/loop.md, "Start-up", "Forgetting")."""

from __future__ import annotations

import logging
from typing import Any

from edge_plm.learning import forgetting
from edge_plm.learning.gate import predict_rows
from edge_plm.learning.types import ForgetOutcome, Window
from edge_plm.plm.checkpoint import CheckpointError

log = logging.getLogger("edge_plm.learning.learner")


class StoreSync:
    """Cross-process checks and forgetting for `learner` (rate-limited by its clock)."""

    def __init__(self, learner: Any) -> None:
        self.learner = learner
        self.last_sync = learner.clock()
        self.sync_failed: str | None = None  # an active version that would not load
        self.forget_seq = learner.store.forget_seq()  # deletions seen (see `poll`)
        self.last_forget_check = learner.clock()

    def poll(self) -> bool:
        """Cheap checks, rate-limited: another process made a version active (`sync`, every
        ``sync_every_s``), or deleted rows (`forget`: ``meta.forget_seq`` moved, every
        ``forget_check_s``) — those are taken out of the live model at once. True when the
        live model changed."""
        lr = self.learner
        now = lr.clock()
        before = (id(lr.model), lr.version)
        forgot = None
        if now - self.last_sync >= lr.cfg.sync_every_s:
            self.sync()
        if now - self.last_forget_check >= lr.cfg.forget_check_s:
            self.last_forget_check = now
            forgot = self.check_forgotten()
        return forgot is not None or (id(lr.model), lr.version) != before

    def sync(self) -> bool:
        """Load the database's active version if it is not the one the live model descends
        from. The labels of the pending window that it does not hold are learned again
        from the database (a row deleted meanwhile is skipped). True when it reloaded."""
        lr = self.learner
        self.last_sync = lr.clock()
        active = lr.store.active_model_version()
        if active is None or active.version == lr.version or active.version == self.sync_failed:
            return False
        try:
            model = lr.registry.load(active)
        except CheckpointError as exc:
            log.error("model version %s was made active by another process but cannot be "
                      "loaded (%s); keeping %s", active.version, exc, lr.version)
            self.sync_failed = active.version
            return False
        pending = lr.window.learned + lr.window.relabelled
        log.warning("model version %s was made active by another process; loading it "
                    "(live model was %s, %d labels pending)",
                    active.version, lr.version, len(pending))
        lr.set_live(model, active.version)
        lr.apply_difference()  # what it lacks (the pending labels among them) is learned
        return True

    def check_forgotten(self) -> ForgetOutcome | None:
        """If rows were deleted since the last look, take the ones the live model holds out
        of it (and out of the active version, as `on_forget` does)."""
        lr = self.learner
        seq = lr.store.forget_seq()
        if seq == self.forget_seq:
            return None
        self.forget_seq = seq
        self.sync()  # the forgetting process may have made a version without them
        ids = lr.store.interaction_ids()
        gone = sorted(i for i in lr.keys if i not in ids)
        if not gone:  # strings of deleted unlabelled rows may still be in the live model
            texts = forgetting.kept_texts(lr.store)
            if any(lr.model.scrub(texts).values()) and lr.version is not None:
                # and in a version saved from it before this check: the active one, rewritten
                others = {v.version for v in lr.store.model_versions() if v.version != lr.version}
                forgetting.rewrite_kept(lr.store, lr.checkpoints_dir, set(), texts, others)
            return None
        log.warning("%d interaction(s) the live model learned were deleted: taking them out",
                    len(gone))
        return self.on_forget(gone)

    def forget_live(self, ids: list[int]) -> list[int]:
        """Take `ids` out of the live model only; returns those it held."""
        lr = self.learner
        forgotten, keys = [], []
        for iid in ids:
            key = lr.keys.pop(int(iid), None)
            if key is None or key in lr.model.removed:
                continue
            keys.append(key)
            forgotten.append(int(iid))
        lr.model.forget_examples(keys)  # one solve and refinement round for all of them
        gone = set(forgotten)
        lr.window.learned = [i for i in lr.window.learned if i not in gone]
        lr.window.relabelled = [i for i in lr.window.relabelled if i not in gone]
        return forgotten

    def forget_interactions(self, ids: list[int], rebuild: bool = False,
                            remove_audio: bool = True) -> ForgetOutcome:
        """`edge-plm forget`: delete rows and what the model learned from them in one
        database transaction, or neither. The new model (the live one without them, or with
        `rebuild` one re-learned from the remaining rows) is written first as a candidate;
        then one transaction deletes the rows, bumps ``meta.forget_seq`` (a running service
        takes them out of its live model) and makes the new version active. A crash before
        it leaves the rows and the old model (the candidate is debris, cleaned at the next
        open); after it, both are gone."""
        lr = self.learner
        ids = sorted({int(i) for i in ids})
        texts = forgetting.kept_texts(lr.store, exclude=set(ids))

        def commit(name: str | None) -> None:  # the rewrites still owed: journalled with it
            lr.store.delete_interactions(
                ids, remove_audio=remove_audio, activate_version=name,
                owe=lambda: forgetting.owed_versions(lr.store, {name} if name else set()))

        if rebuild:
            model, keys, learned = lr.registry.rebuilt_model(exclude=set(ids))
            model.scrub(texts)
            metrics = {"gate": "rebuild", "labels_in_window": learned, "skipped_rolled_back": 0,
                       "interactions": [None, None], "forgotten": len(ids)}
            name = lr.registry.write(model, keys, metrics, commit=commit)
            self.forget_seq = lr.store.forget_seq()
            held = [i for i in ids if i in lr.keys]
            lr.set_live(model, name)
            files = forgetting.rewrite_kept(lr.store, lr.checkpoints_dir, set(ids), texts, {name})
            return ForgetOutcome(held, [i for i in ids if i not in set(held)], name, files)
        forgotten = self.forget_live(ids)
        absent = [i for i in ids if i not in set(forgotten)]
        scrubbed = lr.model.scrub(texts)  # the strings of forgotten text, labelled or not
        name = None
        if forgotten or any(scrubbed.values()):
            metrics = {"gate": "forget", "forgotten": len(forgotten),
                       "interactions": [None, None], "labels_in_window": 0}
            name = lr.registry.write(lr.model, lr.keys, metrics, commit=commit)
        else:
            commit(None)
        self.forget_seq = lr.store.forget_seq()
        files = forgetting.rewrite_kept(lr.store, lr.checkpoints_dir, set(ids), texts,
                                        {name} if name else set())
        if name is not None:
            lr.version = name
            lr.good_keys = dict(lr.keys)
            lr.good_preds = predict_rows(lr.model, lr.holdout_rows())
            lr.window = Window()
        return ForgetOutcome(forgotten, absent, name, files)

    def on_forget(self, ids: list[int]) -> ForgetOutcome:
        """The person deleted these interactions: take them out of the live model and of the
        active version. If the active version held any, it is saved again without them as a
        new active version (gate "forget"; its checkpoint then no longer holds their tokens or
        strings), and the other kept checkpoints are rewritten without them
        (`forgetting.rewrite_kept`)."""
        lr = self.learner
        forgotten = self.forget_live([int(i) for i in ids])
        absent = [int(i) for i in ids if int(i) not in set(forgotten)]
        texts = forgetting.kept_texts(lr.store, exclude={int(i) for i in ids})
        lr.model.scrub(texts)
        in_good = [i for i in forgotten if i in lr.good_keys]
        if not in_good:
            return ForgetOutcome(forgotten, absent)
        good, good_keys = lr.registry.reload_good()
        good.forget_examples([k for k in (good_keys.pop(i, None) for i in in_good)
                              if k is not None and k not in good.removed])
        good.scrub(texts)
        metrics = {"gate": "forget", "forgotten": len(in_good), "interactions": [None, None],
                   "labels_in_window": 0}
        name = lr.registry.write(good, good_keys, metrics, status="active")
        lr.good_keys = good_keys
        lr.good_preds = predict_rows(good, lr.holdout_rows())
        log.info("model version %s active: %s without %d forgotten interaction(s)", name,
                 lr.version, len(in_good))
        lr.version = name
        files = forgetting.rewrite_kept(lr.store, lr.checkpoints_dir, set(int(i) for i in ids),
                                        texts, {name})
        return ForgetOutcome(forgotten, absent, name, files)


__all__ = ["StoreSync"]
