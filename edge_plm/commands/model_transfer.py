"""Moving switch models between a device and a desktop (`edge-plm model import|export`).

``import_checkpoint`` makes a checkpoint trained elsewhere (`edge-plm train switch`) a new
model version of this device, after checking that the device can run it and scoring it on the
holdout slice next to the active model (refused when worse, unless ``force``). The round trip
and what an imported model cannot do (take single rows back out): docs/deploy.md.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict, dataclass
from typing import Any
from pathlib import Path

from edge_plm.files import sha256_of
from edge_plm.learning import forgetting
from edge_plm.learning.gate import HoldoutScore, score
from edge_plm.config.settings import Settings
from edge_plm.learning.state import match_examples
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.switch.config import CONFIGS, STARTING_OVERRIDES
from edge_plm.switch.model import SwitchModel
from edge_plm.loop.house import open_learner
from edge_plm.store import ReplayStore
from edge_plm.errors import EdgePlmError

# the fields that shape the network's arrays: a checkpoint must agree on all of them
# the fields that decide what a unit id means and how many there are (the unit network)
STRUCTURE = ("unit_cap", "unit_min_n", "unit_max_n", "bigram_weight", "sound_weight", "word_weight",
             "support_min_n", "unit_tf", "ngram_mass", "ngram_power", "sound_max_len",
             # ... and what a word id means and the attention's shape
             "attention", "attention_widths", "word_cap", "word_bits", "query_words")


class ImportRefused(EdgePlmError):
    """The imported model scores below the active one on the holdout (and no ``force``)."""


def check_compatible(model: SwitchModel, path: str | Path) -> None:
    """CheckpointError unless `model` is a switch model of a known configuration with one of that
    configuration's structures: the one a device grows from empty, or a starting model's
    (``STARTING_OVERRIDES``: the shipped model and everything learned on it)."""
    name = model.config.name
    if name not in CONFIGS:
        raise CheckpointError(f"{path} is a model of configuration {name!r}, which this edge-plm does not run "
                              f"(known: {', '.join(CONFIGS)})")
    have = asdict(model.config)
    diffs = [[f"{k}={have[k]!r} (needs {want[k]!r})" for k in STRUCTURE if tuple_(have[k]) != tuple_(want[k])]
             for want in (asdict(CONFIGS[name]), asdict(CONFIGS[name].with_(**STARTING_OVERRIDES)))]
    if all(diffs):
        raise CheckpointError(f"{path} has another {name} structure: {', '.join(min(diffs, key=len))}")


def tuple_(v):
    return tuple(v) if isinstance(v, list) else v


def _ba(s: HoldoutScore | None) -> float | None:
    return None if s is None else s.balanced_accuracy


@dataclass(frozen=True)
class Imported:
    """What `model import` did (``to_dict``: its ``--json`` document, docs/contracts.md)."""

    source: str  # the checkpoint's absolute path
    source_sha256: str
    previous: str | None  # the version active before
    holdout_n: int
    balanced_accuracy: float | None  # the imported model's, on the holdout
    previous_balanced_accuracy: float | None
    forced: bool  # imported although it scored lower (``--force``)
    version: str  # the new active version
    config: str  # the imported model's configuration
    config_changed: bool  # another configuration than the model it replaced
    model_config_setting: str  # ``model.config``, which a rebuild or a new start uses
    labels_matched: int  # rows of this database whose labels it already holds
    forgotten_removed: int = 0  # examples of forgotten transcripts taken out before it became a version

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def import_checkpoint(store: ReplayStore, settings: Settings, path: str | Path,
                      force: bool = False) -> Imported:
    """Import `path` as the new active version; returns what happened (see module doc)."""
    path = Path(path)
    model = SwitchModel.load(path)  # CheckpointError: missing, damaged, other format or kind
    check_compatible(model, path)
    model.meta = {k: v for k, v in model.meta.items() if k != "interaction_keys"}
    scrubbed = forgetting.scrub_import(store, model)  # nothing a `forget` deleted comes back
    learner = open_learner(settings, store)  # the household's, as the loop opens it
    cfg = learner.cfg
    previous = learner.version
    rows = learner.holdout_rows()
    cand, base = score(model, rows), score(learner.model, rows)
    source, sha256 = str(path.resolve()), sha256_of(path)
    config_changed = model.config.name != learner.model.config.name
    worse = (cand.balanced_accuracy is not None and base.balanced_accuracy is not None
             and cand.balanced_accuracy < base.balanced_accuracy)
    if worse and not force:
        raise ImportRefused(
            f"{path} scores {cand.balanced_accuracy:.3f} balanced accuracy on the holdout ({cand.n} rows), "
            f"below the active model {previous or '(the starting model)'} at {base.balanced_accuracy:.3f}; "
            "nothing imported (--force imports it anyway)")
    metrics = {"gate": "import", "holdout_n": cand.n, "balanced_accuracy": cand.balanced_accuracy,
               "parent_balanced_accuracy": _ba(base), "source": source,
               "source_sha256": sha256, "forced": bool(worse),
               "trained_by": model.meta.get("trained_by"), "training": model.meta.get("training"),
               "interactions": [None, None], "labels_in_window": 0}
    keys = match_examples(store, model, cfg.holdout_fraction)
    metrics["labels_matched"] = len(keys)
    version = learner.adopt(model, metrics, keys)
    return Imported(source, sha256, previous, cand.n, cand.balanced_accuracy, _ba(base), bool(worse),
                    version, model.config.name, config_changed, cfg.config, len(keys),
                    scrubbed["examples"])


def export_checkpoint(store: ReplayStore, version: str, out: str | Path, overwrite: bool = False) -> dict:
    """Copy the checkpoint of saved `version` to `out` after checking that it loads; an
    existing file is replaced only with `overwrite` (else `FileExistsError`)."""
    matches = [v for v in store.model_versions() if v.version == version]
    if not matches:
        raise LookupError(f"no model version {version!r} (see `edge-plm model list`)")
    v = matches[0]
    if not v.path:
        raise LookupError(f"model version {version} has no checkpoint (rolled-back candidates are never saved)")
    model = SwitchModel.load(v.path)
    out = Path(out).expanduser()
    if out.is_dir():
        out = out / f"{version}.npz"
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists; not overwritten (use --force)")
    if not out.parent.is_dir():  # never made here (with a mode the umask decides)
        raise FileNotFoundError(f"directory {out.parent} does not exist; create it first "
                                "(the checkpoint holds your words: e.g. mkdir -m 700)")
    # the owner's vocabulary is in it: 0600 like every file holding the owner's words
    tmp = out.with_name(f".{out.name}.{os.getpid()}.part")
    try:
        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        os.close(fd)
        os.chmod(tmp, 0o600)
        shutil.copyfile(v.path, tmp)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return {"version": version, "out": str(out), "config": model.config.name,
            "labelled": model.n_examples, "sha256": sha256_of(out), "bytes": out.stat().st_size}
