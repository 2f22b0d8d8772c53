"""Issue 47, item 11: a checkpoint re-signed with NaN or infinite weights is refused at load
(it would otherwise be accepted and fail the next replay with a NaN margin)."""

from __future__ import annotations

import numpy as np
import pytest

from edge_plm.plm.checkpoint import CheckpointError, load, save


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_resigned_checkpoint_with_non_finite_weights_is_refused(tmp_path, bad):
    arrays = {"w": np.ones((3, 4)), "ids": np.arange(5)}
    ok = save(tmp_path / "ok.npz", arrays, {"kind": "test"})
    assert load(ok)[0]["w"].shape == (3, 4)
    arrays["w"][1, 2] = bad
    path = save(tmp_path / "bad.npz", arrays, {"kind": "test"})  # signed: the checksum matches
    with pytest.raises(CheckpointError, match="non-finite weights.*w"):
        load(path)


def test_a_device_whose_active_checkpoint_holds_nan_falls_back(db, tmp_path):
    from _data_util import cli, js, query  # noqa: PLC0415
    from edge_plm.learning import trust  # noqa: PLC0415
    from edge_plm.store import ReplayStore  # noqa: PLC0415
    from edge_plm.switch.model import SwitchModel  # noqa: PLC0415

    (version, path), = query(db, "SELECT version, path FROM model_versions WHERE status = 'active'")
    model = SwitchModel.load(db.parent / path)
    model.net.delta[:] = np.nan
    saved = model.save(db.parent / path)
    with ReplayStore(db) as store:  # as someone with write access to the state dir would
        store.set_checkpoint_record(version, **trust.record_of(saved, model))
    listed = {d["version"]: d["checkpoint_state"] for d in js(cli("model", "list", "--db", db, "--json"))}
    assert listed[version] == "damaged"
    assert cli("model", "rebuild", "--db", db).exit_code == 0  # starts, falls back, rebuilds
    assert js(cli("status", "--db", db, "--json"))["model"]["active"]["version"] != version
