"""Optimisers, checkpoints of the SwitchModel, and determinism."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edge_plm.plm import checkpoint
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.switch.model import SwitchModel
from edge_plm.research.optim import SGD, Adam, clip_by_global_norm, make_optimizer

from _plm_util import batch, random_net

# ---------------------------------------------------------------------------------------------
# optim

A = np.array([[3.0, 0.5], [0.5, 1.0]])
X_STAR = np.array([1.0, -2.0])


def _quad(x):
    d = x - X_STAR
    return 0.5 * d @ A @ d, A @ d


@pytest.mark.parametrize("opt", [SGD(0.1), Adam(0.05), make_optimizer("adam", 0.05), make_optimizer("sgd", 0.1)])
def test_optimizer_decreases_quadratic(opt):
    p = {"x": np.zeros(2), "frozen": np.ones(3)}
    f0, _ = _quad(p["x"])
    values = [f0]
    for _ in range(300):
        _, g = _quad(p["x"])
        opt.step(p, {"x": g})  # "frozen" has no gradient: must stay put
        values.append(_quad(p["x"])[0])
    assert values[1] < values[0]
    assert values[-1] < 1e-3 * f0
    np.testing.assert_allclose(p["x"], X_STAR, atol=0.05)
    np.testing.assert_array_equal(p["frozen"], np.ones(3))
    assert opt.steps == 300


def test_sgd_step_exact():
    p = {"x": np.array([1.0, 2.0])}
    SGD(0.5).step(p, {"x": np.array([2.0, -4.0])})
    np.testing.assert_allclose(p["x"], [0.0, 4.0])


def test_adam_first_step_is_lr_times_sign():
    p = {"x": np.array([1.0, 1.0, 1.0])}
    Adam(0.1).step(p, {"x": np.array([3.0, -0.02, 0.0])})
    np.testing.assert_allclose(p["x"], [0.9, 1.1, 1.0], atol=1e-6)


def test_make_optimizer_unknown():
    with pytest.raises(ValueError, match="unknown optimiser"):
        make_optimizer("rmsprop", 0.1)


def test_clip_by_global_norm():
    g = {"a": np.array([3.0, 0.0]), "b": np.array([[4.0]])}
    norm = clip_by_global_norm(g, 1.0)
    assert norm == pytest.approx(5.0)
    np.testing.assert_allclose(g["a"], [0.6, 0.0], rtol=1e-10)
    np.testing.assert_allclose(g["b"], [[0.8]], rtol=1e-10)
    total = np.sqrt(sum((v**2).sum() for v in g.values()))
    assert total == pytest.approx(1.0, rel=1e-10)
    # under the limit: untouched; max_norm <= 0 disables clipping
    g2 = {"a": np.array([0.3, 0.4])}
    assert clip_by_global_norm(g2, 1.0) == pytest.approx(0.5)
    np.testing.assert_array_equal(g2["a"], [0.3, 0.4])
    g3 = {"a": np.array([30.0, 40.0])}
    clip_by_global_norm(g3, 0.0)
    np.testing.assert_array_equal(g3["a"], [30.0, 40.0])


def test_thawed_train_step_is_one_adam_step():
    """One update = one Adam step, thawed or not. (Fails while SwitchNet.train_step calls the
    shared Adam.step twice when thawed -- E, then delta -- so the step counter advances by 2
    and the bias correction is wrong: the first thawed step moves delta by 0.744*lr, not lr.)"""
    net = random_net("numpy")
    b = batch([5, 9], [0, 1])
    d0 = {k: v.copy() for k, v in net.delta.items()}
    net.thaw()
    net.train_step(b)
    assert net.optimizer.steps == net.updates == 1
    moved = np.abs(net.delta["O"] - d0["O"])
    np.testing.assert_allclose(moved[moved > 0], net.config.lr, rtol=1e-3)


# ---------------------------------------------------------------------------------------------
# SwitchModel checkpoints

# a small unit network with two attention branches; refinement steps exercise the gradient path
SMALL = dict(unit_cap=4000, attention_widths=(8, 16), refine_steps=2)
TRAIN = [("turn on the light", "ON"), ("lights off please", "OFF"), ("what time is it", "NOOP"),
         ("switch the lamp on", "ON"), ("kill the lights", "OFF"), ("play some jazz", "NOOP"),
         ("lamp on", "ON"), ("turn it off", "OFF"), ("set an alarm", "NOOP"), ("light on now", "ON")]
MORE = [("please switch off the lamp", "OFF"), ("how is the weather", "NOOP"), ("on please", "ON")]
PROBES = ["turn on the lamp", "switch it off", "tell me a joke", "zzz unseen ¿chars?", ""]


def _model(config="potato", seed=0, n=len(TRAIN), **kw):
    m = SwitchModel.empty(config, seed=seed, **{**SMALL, **kw})
    for text, label in TRAIN[:n]:
        m.learn(text, label)
    return m


def _state_bytes(m: SwitchModel) -> dict[str, bytes]:
    out = {k: np.ascontiguousarray(v).tobytes() for k, v in m.net.state_arrays().items()}
    out["examples"] = json.dumps(m.examples).encode()
    out["tokens"] = json.dumps(m.tokenizer.tokens).encode()
    return out


@pytest.mark.parametrize("kernel,steps", [("numba", 1), ("numpy", 1), ("numba", 0)])
def test_save_load_roundtrip_predicts_and_learns_identically(tmp_path, kernel, steps):
    m = _model(kernel=kernel, refine_steps=steps)
    path = m.save(tmp_path / "ck" / "model.npz")
    assert path.exists() and (path.stat().st_mode & 0o777) == 0o600
    assert not list(path.parent.glob("*.tmp")), "no temp file left behind"
    m2 = SwitchModel.load(path)
    assert m2.config == m.config and m2.seed == m.seed
    assert m2.tokenizer.tokens == m.tokenizer.tokens
    np.testing.assert_array_equal(m2.predict_many(PROBES), m.predict_many(PROBES))
    for p in PROBES:
        assert m2.predict(p) == m.predict(p)
    assert _state_bytes(m2) == _state_bytes(m)
    # continue learning: same losses, same parameters byte for byte (incl. replay RNG state)
    for text, label in MORE:
        assert m2.learn(text, label) == m.learn(text, label)
    assert _state_bytes(m2) == _state_bytes(m)
    np.testing.assert_array_equal(m2.predict_many(PROBES), m.predict_many(PROBES))


def test_save_is_atomic_overwrite(tmp_path):
    m = _model(n=3)
    path = tmp_path / "model.npz"
    m.save(path)
    m.learn(*MORE[0])
    m.save(path)
    loaded = SwitchModel.load(path)
    assert len(loaded.examples) == len(m.examples) == 4
    assert _state_bytes(loaded) == _state_bytes(m)


def test_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="not found"):
        SwitchModel.load(tmp_path / "nope.npz")


def test_not_a_checkpoint(tmp_path):
    p = tmp_path / "junk.npz"
    p.write_text("hello, I am not a zip file\n")
    with pytest.raises(CheckpointError):
        SwitchModel.load(p)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    m = _model(n=4, attention_widths=(16,))
    path = m.save(tmp_path_factory.mktemp("ck") / "m.npz")
    return path.read_bytes(), _state_bytes(m)


@pytest.fixture(scope="module")
def saved_bytes(saved):
    return saved[0]


@pytest.mark.parametrize("frac", [0.0, 0.001, 0.1, 0.5, 0.9, 0.99, 0.9999])
def test_truncated_file_rejected(tmp_path, saved_bytes, frac):
    p = tmp_path / "t.npz"
    p.write_bytes(saved_bytes[: int(len(saved_bytes) * frac)])
    with pytest.raises(CheckpointError):
        SwitchModel.load(p)


def test_flipped_byte_rejected_everywhere(tmp_path, saved):
    """A single flipped byte anywhere (headers, array data, metadata, zip directory) must give
    CheckpointError, never another exception and never a silently different model. (Flips in
    zip fields nobody reads, e.g. local-header timestamps, may load: the model must then be
    exactly the saved one.)"""
    saved_bytes, original = saved
    n = len(saved_bytes)
    positions = sorted(set(list(range(0, min(n, 600), 7)) + list(range(max(0, n - 1500), n, 5))
                           + np.linspace(0, n - 1, 150).astype(int).tolist()))
    p = tmp_path / "f.npz"
    failures, harmless = [], 0
    for pos in positions:
        data = bytearray(saved_bytes)
        data[pos] ^= 0x5A
        p.write_bytes(bytes(data))
        try:
            if _state_bytes(SwitchModel.load(p)) != original:
                failures.append((pos, "loaded a different model"))
            else:
                harmless += 1
        except CheckpointError:
            pass
        except Exception as exc:  # noqa: BLE001 - the point is to catch everything else
            failures.append((pos, f"{type(exc).__name__}: {exc}"))
    assert not failures, f"{len(failures)}/{len(positions)} flips not rejected cleanly: {failures[:5]}"
    assert harmless < len(positions) // 2, "most flips must be detected"


@pytest.mark.parametrize("field,value", [(10, 99), (6, 0x40), (8, 0x01), (8, 0x40)])
def test_corrupt_zip_directory_field_rejected(tmp_path, saved_bytes, field, value):
    """One damaged field of the first central-directory entry -- compression method (offset 10;
    99 = AES), version needed (offset 6; 0x40 = "6.4"), flags (offset 8; bit 0 encrypted,
    bit 6 strong encryption) -- makes zipfile raise NotImplementedError or RuntimeError, which
    the loader must turn into CheckpointError like every other damage."""
    cd = saved_bytes.index(b"PK\x01\x02")
    data = bytearray(saved_bytes)
    data[cd + field] = value
    p = tmp_path / "z.npz"
    p.write_bytes(bytes(data))
    with pytest.raises(CheckpointError):
        SwitchModel.load(p)


def test_wrong_kind_rejected(tmp_path):
    p = checkpoint.save(tmp_path / "other.npz", {"x": np.arange(3.0)}, {"kind": "replay buffer export"})
    arrays, meta = checkpoint.load(p)  # a valid checkpoint file ...
    np.testing.assert_array_equal(arrays["x"], np.arange(3.0))
    with pytest.raises(CheckpointError, match="not a switch-model checkpoint"):  # ... of another kind
        SwitchModel.load(p)


def test_wrong_format_version_rejected(tmp_path):
    p = tmp_path / "v.npz"
    meta = {"kind": "edge-plm switch model", "format_version": 999}
    np.savez(p, x=np.zeros(1), __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
    with pytest.raises(CheckpointError, match="format version"):
        SwitchModel.load(p)


# ---------------------------------------------------------------------------------------------
# determinism


@pytest.mark.parametrize("kernel", ["numba", "numpy"])
def test_same_data_same_seed_byte_identical(kernel):
    a, b = _model(seed=7, kernel=kernel), _model(seed=7, kernel=kernel)
    assert _state_bytes(a) == _state_bytes(b)
    assert a.predict_many(PROBES).tobytes() == b.predict_many(PROBES).tobytes()


def test_the_switch_model_uses_no_random_numbers():
    # refinement is full-batch gradient descent: the seed is kept in the checkpoint but
    # nothing depends on it
    a, b = _model(seed=1), _model(seed=2)
    assert _state_bytes(a) == _state_bytes(b)
