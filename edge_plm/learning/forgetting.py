"""What `forget` does to the model files besides the active one (docs/loop.md, "What `forget`
reaches on disk"): after the rows are deleted, no kept checkpoint may hold a forgotten example
or a unit/word string of forgotten text.

- `kept_texts`: the transcripts of the rows that stay (their strings stay in the vocabularies).
- `rewrite_kept`: every other version's checkpoint file is loaded, the forgotten examples it
  holds are taken out (`SwitchModel.forget_examples`), its vocabularies scrubbed
  (`SwitchModel.scrub`) and it is written again in place (atomically), with its version
  record (SHA-256, examples, labels learned) updated: it stays a rollback target without
  them. A file that
  does not load or does not match its record is deleted instead and its version marked
  (``metrics.forget_removed``): `model list` shows it "removed by forget", `model rollback` to
  it refuses. Rewriting costs about a checkpoint load, check and save each (3-4 s for a
  2,000-interaction device on a loaded 2-core machine), whatever the number forgotten.
- `other_copies`: SQLite files next to the database (backups made by `db backup` into the
  state directory): `forget` does not change them and says so.
"""

from __future__ import annotations

import fcntl
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from edge_plm.learning import trust
from edge_plm.learning import state
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.store import ReplayStore
from edge_plm.switch.model import SwitchModel
from edge_plm.switch.tokenizer import normalize

#: how a forgotten transcript is tombstoned (``forgotten``): the form the model stores
tombstone_form = normalize

log = logging.getLogger("edge_plm.learning.learner")

#: what `SwitchModel.save` (`model_file.Checkpointed`) writes into a checkpoint's metadata itself (the rest: extra)
_OWN_META = {"kind", "model_format", "config", "vocabulary", "seed", "counters",
             "format_version", "sha256"}
SQLITE_MAGIC = b"SQLite format 3\x00"


def kept_texts(store: ReplayStore, exclude: set[int] = frozenset()) -> list[str]:
    """The transcripts of every stored row not in `exclude` (labelled or not)."""
    return [r.transcript for r in store.interactions(oldest_first=True)
            if r.id not in exclude and r.transcript and r.transcript.strip()]


def forget_removed(v: Any) -> str | None:
    """Why `forget` deleted the checkpoint of version `v` (None: it did not)."""
    return (getattr(v, "metrics", None) or {}).get("forget_removed")


def owed_versions(store: ReplayStore, skip: set[str] = frozenset()) -> list[str]:
    """The versions whose kept checkpoint a `forget` must rewrite (every saved, unpruned,
    non-candidate version with a file, except `skip`): what it journals (``forget_owed``)
    in the transaction of the delete."""
    return [v.version for v in store.model_versions()
            if v.version not in skip and v.path and not state.is_pruned(v)
            and v.status != "candidate" and Path(v.path).exists()]


def complete_owed(store: ReplayStore, wait: bool = True) -> dict[str, list[str]] | None:
    """Finish what a `forget` killed before its end still owes: every journalled version's
    checkpoint rewritten without its forgotten interactions (`rewrite_kept`); None when
    nothing was owed. Run first whenever the database is opened to learn or to change
    versions (`VersionRegistry.first_loadable`, `loop.house.open_learner`), and by a running
    service whenever it looks for deleted rows (`StoreSync.forget_seq_moved`, ``wait=False``:
    when another process is rewriting, that one finishes them and this look does nothing)."""
    if not store.owed_rewrites():
        return None
    with rewriting(store.checkpoints_home(), wait) as mine:
        owed = store.owed_rewrites() if mine else {}  # read again: the other may have done it
        if not owed:
            return None
        log.warning("forget: an interrupted forget still owed %d checkpoint rewrite(s) (%s); "
                    "finishing them", len(owed), ", ".join(sorted(owed)))
        return rewrite_kept(store, store.checkpoints_home(), set(), kept_texts(store),
                            only=set(owed))


@contextmanager
def rewriting(home: Path, wait: bool = True) -> Iterator[bool]:
    """One process at a time rewrites a database's kept checkpoints: an exclusive ``flock``
    on ``<home>/.rewrite.lock`` (re-entrant within a process: a thread holding it goes on);
    yields whether it is held (``wait=False``: False when another process holds it)."""
    if getattr(_held, "home", None) == home:
        yield True
        return
    state.ensure_dir(home)
    fd = os.open(home / ".rewrite.lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        _held.home = home
        try:
            yield True
        finally:
            _held.home = None
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


_held = threading.local()


#: a test hook: called with the version name after each checkpoint is rewritten
after_rewrite: Callable[[str], Any] | None = None


def rewrite_kept(store: ReplayStore, directory: Path, forgotten: set[int], texts: list[str],
                 skip: set[str] = frozenset(), only: set[str] | None = None
                 ) -> dict[str, list[str]]:
    """Rewrite (or remove) every kept checkpoint except the versions in `skip` (with `only`:
    just those) so that none holds an example of the interactions `forgotten` (or of those
    ``forget_owed`` journals for it) or a string no text of `texts` uses; each version's
    journal entries are cleared in the transaction that records its new file. A file is
    written only into the database's own folder: one outside it (another database's) is
    read, and its rewrite goes to the own folder. Returns ``{"rewritten": [...],
    "removed": [...], "clean": [...]}`` (version names)."""
    store.settle_copies()  # a copy still referring to these files gets its own first
    with rewriting(store.checkpoints_home()):
        return _rewrite_kept(store, directory, forgotten, texts, skip, only)


def _rewrite_kept(store: ReplayStore, directory: Path, forgotten: set[int], texts: list[str],
                  skip: set[str], only: set[str] | None) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"rewritten": [], "removed": [], "clean": []}
    home = store.checkpoints_home()
    for d in {Path(directory), home}:
        if d.exists():
            state.clean_debris(store, d)  # half-written files may hold the old text too
    owed = store.owed_rewrites()
    for v in store.model_versions():
        if v.version in skip or (only is not None and v.version not in only):
            continue
        if (not v.path or state.is_pruned(v) or v.status == "candidate"
                or not Path(v.path).exists()):
            if v.version in owed:
                store.settle_owed(v.version)  # no file left to hold them
            continue
        gone = set(forgotten) | owed.get(v.version, set())
        with state.checkpoint_lock(home):
            try:
                trust.check_file(v)
                model = SwitchModel.load(v.path)
                trust.check_model(v, model)
            except CheckpointError as exc:
                _remove(store, v, f"it did not load or match its record ({exc}), so it could "
                                  "not be rewritten without the forgotten interactions")
                out["removed"].append(v.version)
                continue
            if _rewrite(store, v, model, gone, texts, home):
                out["rewritten"].append(v.version)
            else:
                if v.version in owed:
                    store.settle_owed(v.version)
                out["clean"].append(v.version)
        if after_rewrite is not None:
            after_rewrite(v.version)
    if out["rewritten"] or out["removed"]:
        log.info("forget: checkpoints rewritten without the forgotten interactions: %s; "
                 "removed: %s", ", ".join(out["rewritten"]) or "none",
                 ", ".join(out["removed"]) or "none")
    return out


def _rewrite(store: ReplayStore, v: Any, model: SwitchModel, forgotten: set[int],
             texts: list[str], home: Path) -> bool:
    """Take the forgotten examples and strings out of `model` (version `v`) and write it
    to a new file in the database's own folder `home`; the row then points at it (and what
    was owed is cleared) in one transaction, and the old file is deleted if the database owns
    it. A kill before the row changes leaves the old file and its journal entry (done again
    next time; the new file is debris `state.clean_debris` removes). False when it held
    neither (the file is left as it was)."""
    keys = {int(i): int(k) for i, k in (model.meta.get("interaction_keys") or [])}
    held = [keys.pop(i) for i in sorted(forgotten) if i in keys]
    held = [k for k in held if k not in model.removed]
    model.forget_examples(held)
    gone = model.scrub(texts)
    if not held and not any(gone.values()):
        return False
    extra = {k: val for k, val in model.meta.items() if k not in _OWN_META}
    extra["interaction_keys"] = sorted([i, k] for i, k in keys.items())
    state.ensure_dir(home)
    old = Path(v.path)
    path = model.save(home / f"{v.version}.{secrets.token_hex(4)}.npz", extra=extra)
    store.set_rewritten(v.version, **trust.record_of(path, model), path=path, metrics={
        **(v.metrics or {}), "forget_rewritten": {
            "at": time.time(), "examples_removed": len(held), "units_scrubbed": gone["units"],
            "words_scrubbed": gone["words"]}})
    if store.owns_checkpoint(old):
        old.unlink(missing_ok=True)
    else:
        log.warning("forget: the checkpoint of model version %s was at %s, outside this "
                    "database's folder (another database's file?): left unchanged; the "
                    "version now uses its rewritten copy %s", v.version, old, path)
    return True


def _remove(store: ReplayStore, v: Any, why: str) -> None:
    if store.owns_checkpoint(v.path):
        Path(v.path).unlink(missing_ok=True)
    store.set_model_metrics(v.version, {**(v.metrics or {}), "pruned": True,
                                        "forget_removed": why}, settle_owed=True)
    log.warning("forget: the checkpoint of model version %s was deleted: %s", v.version, why)


def scrub_import(store: ReplayStore, model: SwitchModel) -> dict[str, int]:
    """Before an imported checkpoint becomes a version (`model import`): take out of `model`
    every example of the owner's whose transcript a `forget` deleted (the tombstones of
    ``forgotten``; as many examples of a text as stored rows still say it are kept), then
    tombstone every unit and word string no live example or stored transcript uses. An
    export made before a forget brings nothing forgotten back. Returns the counts."""
    frozen = model.prior_examples if model.start is not None else 0
    owner = [k for k in model.live_keys() if k >= frozen]
    texts = {k: model.text_of(k) for k in owner}
    dead = store.tombstoned(texts.values())
    if not dead:
        return {"examples": 0, "units": 0, "words": 0}
    kept = kept_texts(store)
    still: dict[str, int] = {}
    for t in kept:
        form = tombstone_form(t)
        still[form] = still.get(form, 0) + 1
    gone = []
    for k in owner:
        if texts[k] not in dead:
            continue
        if still.get(texts[k], 0) > 0:
            still[texts[k]] -= 1  # a stored row says it too: its example stays
        else:
            gone.append(k)
    model.forget_examples(gone)
    scrubbed = model.scrub(kept)
    log.warning("model import: %d example(s) of forgotten interactions taken out of the imported "
                "checkpoint; %d unit and %d word string(s) scrubbed", len(gone),
                scrubbed["units"], scrubbed["words"])
    return {"examples": len(gone), **scrubbed}


def other_copies(db_path: Path) -> list[Path]:
    """SQLite files in the database's directory other than the database and its -wal/-shm
    (e.g. `db backup` copies put there): `forget` does not reach them."""
    db_path = Path(db_path)
    found = []
    for p in sorted(db_path.parent.iterdir()) if db_path.parent.is_dir() else []:
        if p.name in (db_path.name, db_path.name + "-wal", db_path.name + "-shm") or not p.is_file():
            continue
        try:
            with open(p, "rb") as f:
                if f.read(16) == SQLITE_MAGIC:
                    found.append(p)
        except OSError:
            continue
    return found


__all__ = ["complete_owed", "forget_removed", "kept_texts", "other_copies", "owed_versions",
           "rewrite_kept", "rewriting", "scrub_import", "tombstone_form"]
