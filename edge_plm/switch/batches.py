"""The labelled examples of a ``UnitNet`` as the refinement kernels read them (``UnitNet.batch``,
``UnitNet.sample_batch``): a ``SaffuBatch`` with attention, else the CSR of their inputs."""

from __future__ import annotations

import numpy as np

from edge_plm.switch import attention, unit_kernels
from edge_plm.switch.attention import SaffuBatch


def make_batch(net, keys: list[int], incremental: bool):
    """The batch of examples ``keys`` of ``net`` with their labels and class-balanced weights.
    ``incremental``: the attention's structure grows with new labels (every example's batch);
    else it is built afresh (a replay sample: its cost is its size)."""
    labels = np.array([net.rows[k][2] for k in keys], dtype=np.int64)
    sw = net.sample_weights(labels, np.array([net.ex_weight[k] for k in keys]))
    if net.att is not None:
        struct = (attention.batch_structure(net, keys) if incremental else
                  SaffuBatch([attention.example_arrays(net, k) for k in keys], net.att.widths, net.att.offsets))
        return struct.refresh(labels, sw, net.comparisons)
    values = [net.inputs(*net.rows[k][:2]) if net.config.idf_power else net.rows[k][3] for k in keys]
    return unit_kernels.csr([net.rows[k][0] for k in keys], values, labels, sw)
