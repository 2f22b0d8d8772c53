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


def renumber(indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(units, local): the sorted distinct ids of ``indices`` and each entry's index among them,
    as ``np.unique(indices, return_inverse=True)`` gives them, from a mark per id up to the
    largest instead of a sort of the entries."""
    indices = np.asarray(indices, dtype=np.int64)
    if not len(indices):
        return indices.copy(), indices.copy()
    seen = np.zeros(int(indices.max()) + 1, dtype=bool)
    seen[indices] = True
    units = np.flatnonzero(seen)
    rank = np.empty(len(seen), dtype=np.int64)
    rank[units] = np.arange(len(units))
    return units, rank[indices]
