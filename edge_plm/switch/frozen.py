"""A frozen switch network: what prediction reads of a ``UnitNet``, without its examples (the
starting model's part of a device's model, ``SwitchModel.mark_start``; docs/method.md, "The
owner's labels win"). Its statistics are never updated again, so it holds the solved B, delta,
b, the labelled-unit counts, the query and the attention's W, not the examples."""

from __future__ import annotations

import numpy as np

from edge_plm.actions import N_ACTIONS
from edge_plm.switch.config import SwitchConfig
from edge_plm.switch.unitnet import UnitNet

FROZEN = ("base", "delta", "bias", "df", "class_counts", "class_mass", "query_weights")


def frozen_state(net: UnitNet) -> dict[str, np.ndarray]:
    """The arrays ``frozen_net`` rebuilds ``net``'s predictions from."""
    n = net.n_active
    out = {name: np.asarray(getattr(net, name)) for name in FROZEN}
    out.update(base=net.base[:n], delta=net.delta[:n], df=net.df[:n],
               rows=np.array([len(net.rows) + net.frozen_rows], dtype=np.int64))
    if net.att is not None:
        out["attention.W"] = net.att.W0 + net.att.dW
    return out


def frozen_net(config: SwitchConfig, words, state: dict[str, np.ndarray]) -> UnitNet:
    """The net ``frozen_state`` describes: it predicts exactly as the net it was taken from
    did; it holds no example, so it is never refined or re-solved."""
    net = UnitNet(config, words)
    n = len(state["base"])
    if n > config.unit_cap or state["delta"].shape != (n, N_ACTIONS) or state["df"].shape != (n,):
        raise ValueError(f"frozen net arrays do not fit the configuration ({n} units, cap {config.unit_cap})")
    for name in ("base", "delta", "df"):
        getattr(net, name)[:n] = state[name]
    for name in ("bias", "class_counts", "class_mass"):
        if state[name].shape != (N_ACTIONS,):
            raise ValueError(f"frozen net array {name!r} has shape {state[name].shape}")
        setattr(net, name, np.array(state[name], dtype=np.float64))
    net.query_weights = np.array(state["query_weights"], dtype=np.float64)
    net.n_active, net.frozen_rows = n, int(state["rows"][0])
    if net.att is not None:
        W = np.asarray(state["attention.W"], dtype=np.float64)
        if W.shape != (net.att.size,):
            raise ValueError(f"frozen attention W has shape {W.shape}, config needs ({net.att.size},)")
        net.att.W0, net.att.dW = W, np.zeros_like(W)
    return net
