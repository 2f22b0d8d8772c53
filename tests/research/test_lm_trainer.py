"""Desktop trainer: resume continues the same run, the cache is rebuilt on thaw, checkpoints
load on the device path (or are rejected clearly), tokenizers round-trip, the CLI works."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edge_plm.plm import checkpoint
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.research.lm.corpus import BatchStream, split_offsets
from edge_plm.research.lm.checkpoint import LMPredictor, load_lm
from edge_plm.research.lm.subword import CharVocab
from edge_plm.research.lm.trainer import Trainer

from _lm_util import TEXT, tiny_config, write_corpus


def _run(tmp_path, name, steps=12, stop_after=None, resume=False, **kw):
    corpus = write_corpus(tmp_path)
    tr = Trainer(tiny_config(**kw), corpus, tmp_path / name, steps=steps, resume=resume, progress=False)
    return tr, tr.run(stop_after=stop_after)


def test_resume_after_interruption_gives_the_same_loss_curve(tmp_path):
    full, log_full = _run(tmp_path, "full")
    part, _ = _run(tmp_path, "part", stop_after=6)  # "interrupted" after step 6 (checkpoint at step 4)
    resumed, log_res = _run(tmp_path, "part", resume=True)
    assert log_res["resumed_at"] == [4]
    np.testing.assert_allclose(resumed.losses, full.losses, rtol=1e-9)
    for k in full.model.params:
        np.testing.assert_allclose(resumed.model.params[k], full.model.params[k], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(resumed.model.E, full.model.E, rtol=1e-9)
    assert log_res["summary"]["final_val_loss"] == pytest.approx(log_full["summary"]["final_val_loss"], rel=1e-9)


def test_phases_and_cache_rebuilt_on_thaw(tmp_path):
    tr, log = _run(tmp_path, "run", steps=10, thaw_frac=0.3)
    assert set(log["phases"]) == {"warm", "freeze", "thaw"}
    assert log["summary"]["thaw_step"] == 7
    # frozen: one build of C for the whole warm start + freeze; thawed: one rebuild per step
    assert tr.model.cache.rebuilds == 1 + 3
    from edge_plm.plm.bitcipher import bit_cipher

    assert not np.array_equal(tr.model.E, bit_cipher(tr.model.V, tr.config.bits))  # E moved in the thaw
    assert np.all(tr.model.E >= 0)
    saved = json.loads((tmp_path / "run" / "train_log.json").read_text())
    assert saved["summary"]["cache_rebuilds"] == 4 and saved["summary"]["cache_rebuild_seconds"] >= 0


def test_frozen_phase_does_not_touch_the_embedding(tmp_path):
    tr, _ = _run(tmp_path, "run", steps=5, thaw_frac=0.0)
    from edge_plm.plm.bitcipher import bit_cipher

    assert np.array_equal(tr.model.E, bit_cipher(tr.model.V, tr.config.bits))
    assert tr.model.cache.rebuilds == 1


def test_checkpoint_loads_in_the_device_predictor(tmp_path):
    tr, _ = _run(tmp_path, "run", steps=4)
    pred = LMPredictor.load(tmp_path / "run" / "checkpoint.npz")
    p = pred.next_token_proba("First Cit")
    assert p.shape == (len(tr.tok),) and p.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(p, tr.model.next_proba(tr.tok.encode("First Cit")))
    assert isinstance(pred.generate("All:", 5), str)
    assert np.isfinite(pred.score("All:\nSpeak.\n\n"))


def test_incompatible_checkpoints_are_rejected_clearly(tmp_path):
    from edge_plm.switch.model import SwitchModel

    _run(tmp_path, "run", steps=2)
    path = tmp_path / "run" / "checkpoint.npz"
    with pytest.raises(CheckpointError, match="not a switch-model checkpoint"):
        SwitchModel.load(path)
    with pytest.raises(CheckpointError, match="allows"):
        LMPredictor.load(path, max_params=100)
    sw = SwitchModel.empty("potato")
    sw_path = sw.save(tmp_path / "switch.npz")
    with pytest.raises(CheckpointError, match="not a language-model checkpoint"):
        load_lm(sw_path)
    # a checkpoint whose arrays do not fit its config
    arrays, meta = checkpoint.load(path)
    meta = {k: v for k, v in meta.items() if k not in ("format_version", "sha256")}
    meta["config"]["hidden"] = 7
    checkpoint.save(tmp_path / "bad.npz", arrays, meta)
    with pytest.raises(CheckpointError, match="does not match its config"):
        load_lm(tmp_path / "bad.npz")
    meta["config"]["hidden"] = 12
    meta["config"]["future_field"] = 1
    checkpoint.save(tmp_path / "bad2.npz", arrays, meta)
    with pytest.raises(CheckpointError, match="unknown language-model config fields"):
        load_lm(tmp_path / "bad2.npz")


def test_resume_refuses_a_different_config(tmp_path):
    _run(tmp_path, "run", steps=2)
    with pytest.raises(CheckpointError, match="was trained with config"):
        _run(tmp_path, "run", steps=4, resume=True, hidden=10)


def test_char_tokenizer_round_trips():
    tok = CharVocab.train([TEXT])
    assert tok.decode(tok.encode(TEXT)) == TEXT
    assert tok.tokens[3] == " "  # most frequent character gets the first (sparsest) code
    again = CharVocab(tok.to_json()["chars"])
    assert again.tokens == tok.tokens
    assert list(tok.encode("Z§")) == [tok.index["Z"] if "Z" in tok.index else 1, 1]


def test_bpe_tokenizer_round_trips(tmp_path):
    pytest.importorskip("tokenizers")
    from edge_plm.research.lm.subword import BPEVocab, tokenizer_from_json

    tok = BPEVocab.train(lambda: [TEXT] * 3, 300)
    for text in (TEXT, "Unseen wörds — ünïcode ✓\n\n"):
        assert tok.decode(tok.encode(text)) == text
    again = tokenizer_from_json(json.loads(json.dumps(tok.to_json())))
    assert list(again.encode(TEXT)) == list(tok.encode(TEXT))
    ids = tok.encode(TEXT)
    counts = np.bincount(ids, minlength=len(tok))
    assert counts[3] == counts[3:].max()  # frequency-ranked ids


def test_stream_memory_bounded_and_deterministic(tmp_path):
    corpus = write_corpus(tmp_path, repeats=20)
    _, split, _ = split_offsets(corpus)
    tok = CharVocab.train([TEXT])
    s1 = BatchStream(corpus, 0, split, tok, (4, 8, 16), 16, 200)
    seq = [s1.next() for _ in range(30)]
    state = s1.state()
    more = [s1.next() for _ in range(10)]
    s2 = BatchStream(corpus, 0, split, tok, (4, 8, 16), 16, 200, state=state)
    for a, b in zip(more, [s2.next() for _ in range(10)]):
        assert np.array_equal(a.ctx, b.ctx) and np.array_equal(a.targets, b.targets)
    assert s1.epoch >= 1 or s1.window > 1  # windows were streamed, not the whole file
    assert all(b.ctx.shape[1] == (4, 8, 16)[b.branch] for b in seq)


def test_cli_train(tmp_path):
    from typer.testing import CliRunner

    from edge_plm.cli import app

    corpus = write_corpus(tmp_path)
    args = ["train", "lm", "--model-config", "char", "--corpus", str(corpus), "--out", str(tmp_path / "o"), "--steps", "3",
            "--quiet", "--set", "warm_tokens=200", "--set", "widths=4,8,16", "--set", "hidden=16",
            "--set", "heads=2", "--set", "positional_heads=1", "--set", "batch_size=8"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert json.loads(res.output.strip().splitlines()[-1])["steps"] == 3
    res = CliRunner().invoke(app, args + ["--resume", "--steps", "5"])
    assert res.exit_code == 0, res.output
    bad = CliRunner().invoke(app, ["train", "lm", "--model-config", "nope", "--corpus", str(corpus), "--steps", "1"])
    assert bad.exit_code == 2 and "--model-config" in bad.output and "'nope' is not one of 'char', 'bpe16k'" in bad.output
