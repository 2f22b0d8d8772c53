"""Switch-model checkpoint files: what ``SwitchModel.save`` writes and ``SwitchModel.load``
reads (docs/method.md, "Checkpoints"). The statistics are sums over the stored examples and are
recomputed on load; the attention's statistics and the calibration's rows are stored, and so
are the per-device labels of examples learned for several devices ("devices.labels", absent in
checkpoints without them, which load as before). The vocabularies are JSON lists in id order; a
tombstoned (scrubbed) unit or word is ``null``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from edge_plm.plm import checkpoint
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.switch.config import SwitchConfig
from edge_plm.switch.tokenizer import RESERVED, CharTokenizer
from edge_plm.switch.unitnet import UnitNet

MODEL_FORMAT = 2  # 1: the character SwitchNet (edge_plm/research/charnet/); 2: the unit network (since 2026-12-01 with the word attention)


def save_model(model, path: str | Path, extra: dict | None = None) -> Path:
    """Atomic checkpoint with everything needed to continue learning identically: the
    examples (character ids + labels), the unit vocabulary, delta and b. The statistics
    are sums over the examples and are recomputed on load."""
    arrays = model.net.state_arrays()
    lengths = np.array([len(s) for s, _ in model.examples], dtype=np.int64)
    arrays["examples.ids"] = np.array([t for s, _ in model.examples for t in s], dtype=np.int64)
    arrays["examples.lengths"] = lengths
    arrays["examples.labels"] = np.array([y for _, y in model.examples], dtype=np.int64)
    arrays["examples.removed"] = np.array(sorted(model.removed), dtype=np.int64)
    arrays["units.vocabulary"] = np.frombuffer(json.dumps(model.units.to_json()).encode(), dtype=np.uint8)
    arrays.update(model.calib.state())
    if model.device_evidence.entries:
        arrays["devices.labels"] = np.frombuffer(json.dumps(model.device_evidence.to_json()).encode(), dtype=np.uint8)
    if model.words is not None:
        arrays["words.vocabulary"] = np.frombuffer(json.dumps(model.words.to_json()).encode(), dtype=np.uint8)
        if model.words.frozen:  # tombstoned query words' evidence (``SwitchModel.scrub``)
            arrays["words.frozen"] = np.array(sorted(model.words.frozen.items()), dtype=np.float64)
    meta = {
        "kind": "edge-plm switch model",
        "model_format": MODEL_FORMAT,
        "config": dataclasses.asdict(model.config),
        "vocabulary": model.tokenizer.to_json(),
        "seed": model.seed,
        "counters": {"refine_steps": model.net.refine_steps_done, "n_active": model.net.n_active,
                     "labelled": model.n_examples,
                     "unlabelled": model.unlabeled_seen, "units": len(model.units),
                     "attention_refresh_at": model.net._refresh_at,
                     "prior_examples": model.prior_examples},
        **(extra or {}),
    }
    return checkpoint.save(path, arrays, meta)


def load_model(cls, path: str | Path):
    arrays, meta = checkpoint.load(path)
    if meta.get("kind") != "edge-plm switch model":
        raise CheckpointError(f"{path} is not a switch-model checkpoint (kind={meta.get('kind')!r})")
    fmt = meta.get("model_format", 1)
    if fmt != MODEL_FORMAT:
        raise CheckpointError(
            f"{path} holds a switch model of format {fmt} (written by an older edge-plm: the character "
            f"network); this edge-plm reads format {MODEL_FORMAT}. Rebuild the model from the database's "
            f"labels (`edge-plm model rebuild`) or train a new one")
    try:
        known = {f.name for f in dataclasses.fields(SwitchConfig)}
        cfg_dict = {k: v for k, v in dict(meta["config"]).items() if k in known}
        cfg_dict = {k: tuple(v) if isinstance(v, list) else v for k, v in cfg_dict.items()}
        config = SwitchConfig(**cfg_dict)
        tok = CharTokenizer.from_json(meta["vocabulary"])
        units = cls._vocab(config, json.loads(arrays["units.vocabulary"].tobytes().decode()))
        words = None
        if config.attention:
            stored = (json.loads(arrays["words.vocabulary"].tobytes().decode())
                      if "words.vocabulary" in arrays else ())
            words = cls._words(config, stored)
            if "words.frozen" in arrays:
                words.frozen = {int(r): float(ev) for r, ev in arrays["words.frozen"].reshape(-1, 2).tolist()}
        model = cls(config, tok, UnitNet(config, words), units, int(meta["seed"]), words=words)
        ids, lengths, labels = arrays["examples.ids"], arrays["examples.lengths"], arrays["examples.labels"]
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        model.examples = [(ids[offsets[i]:offsets[i + 1]].tolist(), int(labels[i])) for i in range(len(lengths))]
        model.removed = {int(k) for k in arrays["examples.removed"].tolist()}
        model.prior_examples = int(meta["counters"].get("prior_examples", 0))
        if any(t < len(RESERVED) and j not in (0, len(s) - 2, len(s) - 1)
               for s, _ in model.examples for j, t in enumerate(s)):
            raise ValueError("an example holds a reserved token inside its transcript")
        if words is not None and "words.vocabulary" not in arrays:  # written before attention
            words.register(model.text_of(k) for k in model.live_keys())
        for key in model.live_keys():
            text = model.text_of(key)
            f_ids, w, _, placed = model.placed(text, grow=False)
            model.net.add(key, f_ids, w, model.examples[key][1], placed, model.example_weight(key))
            model.memory.setdefault(text, []).append(key)
            model.device_evidence.add_text(text.split())
        if "devices.labels" in arrays:  # examples labelled per device (several devices)
            model.device_evidence.load_json(json.loads(arrays["devices.labels"].tobytes().decode()))
        model.net.solve()
        model.net.load_state(arrays)
        model.update_query()  # with the loaded delta, as after the last learn
        if "attention.dW" not in arrays:  # a checkpoint written before attention: warm-start it
            model.net.warm_all()
        if "calibration.theta" in arrays:
            model.calib.load(arrays)
        model.net.refine_steps_done = int(meta["counters"]["refine_steps"])
        model.net.n_active = max(model.net.n_active, int(meta["counters"]["n_active"]))
        model.meta = meta
        model.unlabeled_seen = int(meta["counters"].get("unlabelled", 0))
        model.net._refresh_at = int(meta["counters"].get("attention_refresh_at", 0))
    except (KeyError, TypeError, ValueError, IndexError, UnicodeDecodeError) as exc:
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(f"{path}: incompatible checkpoint: {exc}") from exc
    return model
