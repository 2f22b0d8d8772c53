"""Switch-model checkpoint files: what ``SwitchModel.save`` writes and ``SwitchModel.load`` reads
(docs/method.md, "Checkpoints"). A load reads what prediction needs rather than deriving it again:
the frozen starting part's solved arrays ("start.*"), and each of the owner's examples' units and
word positions ("rows.*", so the statistics are plain sums over stored arrays, with no text
processed again; the shipped starting model, written by ``train switch``, stores them for its
examples too). A checkpoint without "rows.*" (older files) has its examples' units derived from
their text, as before. The attention's statistics and the calibration's rows are stored, and so
are the per-device labels of examples learned for several devices ("devices.labels", absent in
checkpoints without them). The vocabularies are JSON lists in id order; a tombstoned (scrubbed)
unit or word is ``null``."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edge_plm.plm import checkpoint
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.switch import frozen
from edge_plm.switch.config import SwitchConfig
from edge_plm.switch.examples import ExampleStore
from edge_plm.switch.share import share_for
from edge_plm.switch.tokenizer import RESERVED, CharTokenizer
from edge_plm.switch.unitnet import UnitNet
from edge_plm.switch.units import UnitVocab
from edge_plm.switch.words import WordVocab

MODEL_FORMAT = 2  # 1: the character SwitchNet (edge_plm/research/charnet/); 2: the unit network (since 2026-12-01 with the word attention)


def word_vocab(cfg: SwitchConfig, words=()) -> WordVocab | None:
    """The attention's word vocabulary of a config (None: no attention), holding ``words``."""
    return WordVocab(cfg.word_cap, cfg.word_bits, cfg.query_words, words) if cfg.attention else None


def unit_vocab(cfg: SwitchConfig, units=()) -> UnitVocab:
    """The unit vocabulary of a config, holding ``units``."""
    return UnitVocab(cfg.unit_cap, cfg.unit_min_n, cfg.unit_max_n, cfg.word_weight, units, cfg.support_min_n,
                     cfg.sound_weight, cfg.bigram_weight, cfg.unit_tf,
                     cfg.ngram_mass, cfg.ngram_power, cfg.sound_max_len)


class Checkpointed:
    """``SwitchModel``'s ``save`` and ``load``: each part's state to and from the checkpoint's
    arrays (module docstring)."""

    def save(self, path: str | Path, extra: dict | None = None) -> Path:
        """Atomic checkpoint with everything needed to continue learning identically: the
        examples (character ids + labels), the unit vocabulary, delta and b. The statistics
        are sums over the examples and are recomputed on load."""
        store = self.store
        arrays = self.net.state_arrays()
        arrays.update(_rows_arrays(self.net))
        if self.start is not None:
            arrays.update({f"start.{k}": v for k, v in frozen.frozen_state(self.start).items()})
        arrays.update(_examples_arrays(store))
        arrays["units.vocabulary"] = _json_array(self.units.to_json())
        arrays.update(self.confidence.state())
        arrays.update(self.share.state())
        if self.naming.evidence.entries:
            arrays["devices.labels"] = _json_array(self.naming.evidence.to_json())
        if self.words is not None:
            arrays["words.vocabulary"] = _json_array(self.words.to_json())
            if self.words.frozen:  # tombstoned query words' evidence (``SwitchModel.scrub``)
                arrays["words.frozen"] = np.array(sorted(self.words.frozen.items()), dtype=np.float64)
        meta = {
            "kind": "edge-plm switch model",
            "model_format": MODEL_FORMAT,
            "config": dataclasses.asdict(self.config),
            "vocabulary": store.tokenizer.to_json(),
            "seed": self.seed,
            "counters": {"refine_steps": self.net.refine_steps_done, "n_active": self.net.n_active,
                         "labelled": store.n_live,
                         "unlabelled": self.unlabeled_seen, "units": len(self.units),
                         "attention_refresh_at": self.net.refresh_at,
                         "prior_examples": store.prior},
            **(extra or {}),
        }
        return checkpoint.save(path, arrays, meta)

    @classmethod
    def load(cls, path: str | Path):
        """A model from its checkpoint; ``CheckpointError`` when it is not a usable one."""
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
            return cls._from_arrays(arrays, meta)
        except (KeyError, TypeError, ValueError, IndexError, UnicodeDecodeError) as exc:
            if isinstance(exc, CheckpointError):
                raise
            raise CheckpointError(f"{path}: incompatible checkpoint: {exc}") from exc

    @classmethod
    def _from_arrays(cls, arrays: dict[str, np.ndarray], meta: dict):
        config = _config_of(meta)
        units = unit_vocab(config, _json_of(arrays["units.vocabulary"]))
        words = None
        if config.attention:
            words = word_vocab(config, _json_of(arrays["words.vocabulary"]) if "words.vocabulary" in arrays else ())
            if "words.frozen" in arrays:
                words.frozen = {int(r): float(ev) for r, ev in arrays["words.frozen"].reshape(-1, 2).tolist()}
        store = _examples_of(arrays, CharTokenizer.from_json(meta["vocabulary"]),
                             int(meta["counters"].get("prior_examples", 0)))
        model = cls(config, UnitNet(config, words), units, int(meta["seed"]), words=words,
                    share=share_for(config), store=store)
        model.restore(arrays, meta)
        return model

    def restore(self, arrays: dict[str, np.ndarray], meta: dict) -> None:
        """The state a checkpoint's ``arrays`` and ``meta`` hold, into this model, built (by
        ``load``) with the checkpoint's config, vocabularies and examples."""
        store = self.store
        if self.words is not None and "words.vocabulary" not in arrays:  # written before attention
            self.words.register(store.text_of(k) for k in store.live_keys())
        start_net = self._add_examples(arrays)
        if "devices.labels" in arrays:  # examples labelled per device (several devices)
            self.naming.evidence.load_json(_json_of(arrays["devices.labels"]))
        self._settle(arrays, start_net)
        self.update_query()  # with the loaded delta, as after the last learn
        if "attention.dW" not in arrays:  # a checkpoint written before attention: warm-start it
            self.net.warm_all()
        self.confidence.load(arrays)
        if "share.lam" in arrays:  # written before the share was fitted: the back-off rule
            self.share.load(arrays, self.n_owner_examples)
        counters = meta["counters"]
        self.net.refine_steps_done = int(counters["refine_steps"])
        self.net.n_active = max(self.net.n_active, int(counters["n_active"]))
        self.meta = meta
        self.unlabeled_seen = int(counters.get("unlabelled", 0))
        self.net.refresh_at = int(counters.get("attention_refresh_at", 0))

    def _add_examples(self, arrays: dict[str, np.ndarray]) -> UnitNet | None:
        """The examples into the model's statistics: the owner's part's from their stored units
        ("rows.*"; derived from the text when absent), the frozen starting part's arrays as they
        were saved; every example's transcript into the memory and the device evidence. Returns
        the net that gathers the starting model's examples of a checkpoint written before the two
        parts (None otherwise)."""
        config, words, store = self.config, self.words, self.store
        if "start.base" in arrays:
            self.start = frozen.frozen_net(config, words, {k[6:]: v for k, v in arrays.items() if k.startswith("start.")})
        stored = _stored_rows(arrays, config.attention)
        migrate = store.prior > 0 and self.start is None
        start_net = UnitNet(config, words) if migrate else None
        for key in store.live_keys():
            text = store.text_of(key)
            net = self.net if key >= store.prior else start_net  # None: behind the frozen part
            if net is not None:
                if key in stored:
                    f_ids, w, placed = stored[key]
                else:
                    f_ids, w, _, placed = self.placed(text, grow=False)
                net.add(key, f_ids, w, store.label(key), placed)
            self.memory.add(text, key)
            self.naming.evidence.add_text(text.split())
        return start_net

    def _settle(self, arrays: dict[str, np.ndarray], start_net: UnitNet | None) -> None:
        """Solve the owner's part and load its refinement; a checkpoint written before the two
        parts: its stored network, fitted on every example, becomes the frozen starting part."""
        self.net.solve()
        if start_net is None:
            load_net_state(self.net, arrays)
            return
        start_net.solve()
        load_net_state(start_net, arrays)
        self.net, own = start_net, self.net  # its query: the evidence of the net it was
        self.update_query()
        self.net = own
        self.start = frozen.frozen_net(self.config, self.words, frozen.frozen_state(start_net))


def _json_array(value) -> np.ndarray:
    return np.frombuffer(json.dumps(value).encode(), dtype=np.uint8)


def _json_of(array: np.ndarray):
    return json.loads(array.tobytes().decode())


def _examples_arrays(store: ExampleStore) -> dict[str, np.ndarray]:
    """The examples' character ids (concatenated, with their lengths), labels and removed keys."""
    examples = store.examples
    return {"examples.ids": np.array([t for s, _ in examples for t in s], dtype=np.int64),
            "examples.lengths": np.array([len(s) for s, _ in examples], dtype=np.int64),
            "examples.labels": np.array([y for _, y in examples], dtype=np.int64),
            "examples.removed": np.array(sorted(store.removed), dtype=np.int64)}


def _examples_of(arrays: dict[str, np.ndarray], tokenizer: CharTokenizer, prior: int) -> ExampleStore:
    """The ``ExampleStore`` ``_examples_arrays`` wrote (no reserved token inside a transcript)."""
    ids, lengths, labels = arrays["examples.ids"], arrays["examples.lengths"], arrays["examples.labels"]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    examples = [(ids[offsets[i]:offsets[i + 1]].tolist(), int(labels[i])) for i in range(len(lengths))]
    removed = {int(k) for k in arrays["examples.removed"].tolist()}
    _check_reserved(ids, lengths)
    return ExampleStore(tokenizer, examples, removed, prior)


@dataclass(frozen=True)
class HeldLabels:
    """What a checkpoint holds of its labelled examples, read without building the model
    (``SwitchModel.held``: the read-only commands count unlearned labels with it)."""

    config: SwitchConfig
    examples: list[tuple[tuple, int]]  # ((), label index) per example key, as ``SwitchModel.examples``
    removed: frozenset[int]
    meta: dict

    @property
    def n_examples(self) -> int:
        return len(self.examples) - len(self.removed)

    def live_keys(self) -> list[int]:
        return [k for k in range(len(self.examples)) if k not in self.removed]


def read_held(path: str | Path) -> HeldLabels:
    """The labels a checkpoint holds (its checksums verified; ``CheckpointError`` otherwise)."""
    arrays, meta = checkpoint.load(path)
    if meta.get("kind") != "edge-plm switch model" or meta.get("model_format", 1) != MODEL_FORMAT:
        raise CheckpointError(f"{path} is not a switch-model checkpoint this edge-plm reads")
    try:
        return HeldLabels(_config_of(meta), [((), int(y)) for y in arrays["examples.labels"].tolist()],
                          frozenset(int(k) for k in arrays["examples.removed"].tolist()), meta)
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{path}: incompatible checkpoint: {exc}") from exc


def _config_of(meta: dict) -> SwitchConfig:
    known = {f.name for f in dataclasses.fields(SwitchConfig)}
    cfg_dict = {k: v for k, v in dict(meta["config"]).items() if k in known}
    if "alpha_young" not in cfg_dict and "alpha" in cfg_dict:
        cfg_dict["alpha_young"] = cfg_dict["alpha"]  # written before the young smoothing: it was solved flat
    cfg_dict.setdefault("replay_l2", 0.0)  # written before the field: one pull, l2
    return SwitchConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in cfg_dict.items()})


def load_net_state(net: UnitNet, arrays: dict[str, np.ndarray]) -> None:
    """delta, b and the attention's state of ``net`` from a checkpoint's arrays (``UnitNet.state_arrays``)."""
    for name in ("units.delta", "units.bias"):
        if name not in arrays:
            raise KeyError(f"checkpoint lacks array {name!r}")
    delta, bias = arrays["units.delta"], arrays["units.bias"]
    if delta.ndim != 2 or delta.shape[1] != net.delta.shape[1] or delta.shape[0] > net.delta.shape[0]:
        raise ValueError(f"checkpoint array 'units.delta' has shape {delta.shape}, config allows "
                         f"at most {net.delta.shape}")
    if bias.shape != net.bias.shape:
        raise ValueError(f"checkpoint array 'units.bias' has shape {bias.shape}, config needs {net.bias.shape}")
    if net.att is not None and "attention.dW" in arrays:  # else: warm-started from the examples
        net.att.load_state(arrays)
    net.delta[:] = 0.0
    net.delta[: len(delta)] = delta
    net.bias = np.array(bias, dtype=np.float64)
    net.n_active = max(net.n_active, len(delta))


def _check_reserved(ids: np.ndarray, lengths: np.ndarray) -> None:
    """No reserved token inside a transcript (its first and last two tokens are the dialogue's)."""
    if not len(ids):
        return
    start = np.repeat(np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    pos = np.arange(len(ids)) - start
    end = np.repeat(lengths, lengths)
    inside = (pos != 0) & (pos != end - 2) & (pos != end - 1)
    if (inside & (ids < len(RESERVED))).any():
        raise ValueError("an example holds a reserved token inside its transcript")


ROW_PARTS = ("ids", "w", "word_ids", "ent_pos", "ent_m", "ent_v")


def _rows_arrays(net: UnitNet) -> dict[str, np.ndarray]:
    """Each example of ``net``: its units and weights and, with attention, its word ids and
    unit occurrences (``UnitVocab.positioned``), concatenated, with the keys and lengths."""
    keys = sorted(net.rows)
    parts = {name: [] for name in ROW_PARTS}
    for k in keys:
        ids, w, _, _ = net.rows[k]
        placed = net.placed.get(k) if net.att is not None else None
        word_ids, pos, mm, v = placed if placed is not None else (np.zeros(0, np.int64),) * 3 + (np.zeros(0),)
        for name, a in zip(ROW_PARTS, (ids, w, word_ids, pos, mm, v)):
            parts[name].append(a)
    out = {"rows.keys": np.array(keys, dtype=np.int64)}
    for name, kind in zip(ROW_PARTS, (np.int64, np.float64, np.int64, np.int64, np.int64, np.float64)):
        out[f"rows.{name}.len"] = np.array([len(a) for a in parts[name]], dtype=np.int64)
        out[f"rows.{name}"] = np.concatenate(parts[name]).astype(kind) if keys else np.zeros(0, kind)
    return out


def _stored_rows(arrays: dict[str, np.ndarray], attention: bool) -> dict[int, tuple]:
    """key -> (ids, weights, placed or None) of the examples ``_rows_arrays`` stored."""
    if "rows.keys" not in arrays:
        return {}
    keys = arrays["rows.keys"].tolist()
    cut = {}
    for name in ROW_PARTS:
        lengths = arrays[f"rows.{name}.len"]
        if len(lengths) != len(keys) or int(lengths.sum()) != len(arrays[f"rows.{name}"]):
            raise ValueError(f"checkpoint rows array {name!r} does not match its lengths")
        cut[name] = np.split(arrays[f"rows.{name}"], np.cumsum(lengths)[:-1]) if keys else []
    out = {}
    for i, key in enumerate(keys):
        ids, w, word_ids, pos, mm, v = (cut[name][i] for name in ROW_PARTS)
        out[int(key)] = (ids, w, (word_ids, pos, mm, v) if attention else None)
    return out
