"""The owner's part of a device's model (docs/method.md, "The owner's part"): what a label
touches, and how the owner's evidence is mixed with the starting model's.

A device that starts from a starting model keeps that model as a frozen part (``UnitNet.frozen``)
and learns the owner's labels into a part of its own: the same units, words and network over the
owner's examples alone. The prediction is a back-off mixture of the two distributions,

    p = (1 - lam) p_start + lam p_owner,    lam = n / (n + owner_backoff)    (owner_backoff 1000)

with n the owner's labelled examples, so the owner's evidence wins as it grows instead of being
outweighed by thousands of starting examples in one pooled fit (pooling lost to the owner's labels
alone on held-out wording: BENCHMARKS.md, "Learns from its owner"). An action the owner has not
labelled yet is read from the starting part alone (the owner's part cannot say anything of it).

A label refines the owner's part on itself and a bounded, class-balanced replay sample of earlier
owner examples (``replay_keys``), so an update costs the same at 50 labels as at 5,000.
"""

from __future__ import annotations

import numpy as np

from edge_plm.switch.attention import softmax
from edge_plm.switch.unitnet import ONLINE_KERNEL


def owner_share(n_owner: int, backoff: float) -> float:
    """lam = n / (n + backoff): how much the owner's part counts after n of its labels."""
    if backoff < 0:
        raise ValueError(f"owner_backoff must be >= 0, got {backoff}")
    if n_owner <= 0:
        return 0.0
    return n_owner / (n_owner + backoff) if backoff > 0 else 1.0


def mixed_scores(start_logits: np.ndarray, owner_logits: np.ndarray, owner_present: np.ndarray,
                 lam: float) -> np.ndarray:
    """log p of the back-off mixture (module docstring). The owner's distribution covers only
    the actions it has labels of: it shares out the starting part's mass on those actions, and
    the starting part's own probabilities stand for the others."""
    p_start = softmax(start_logits)
    if lam <= 0.0 or not owner_present.any():
        return np.log(np.maximum(p_start, 1e-300))
    p_own = softmax(np.where(owner_present, owner_logits, -np.inf))
    p_own = np.where(owner_present, p_own * p_start[owner_present].sum(), p_start)
    p = (1.0 - lam) * p_start + lam * p_own
    return np.log(np.maximum(p, 1e-300))


def replay_keys(by_label: list[list[int]], new_key: int, size: int, seed: int) -> list[int] | None:
    """The examples one label refines on: ``new_key`` and a class-balanced sample of at most
    ``size`` earlier keys (an equal share per labelled action; an action with fewer examples
    gives all of them), drawn with a generator seeded by (seed, new_key) so the same
    interactions in the same order give the same model. None: every example (they are no more
    than ``size`` + 1, so the sample would be all of them)."""
    total = sum(len(k) for k in by_label)
    if size <= 0 or total <= size + 1:
        return None
    rng = np.random.default_rng([int(seed), int(new_key)])
    pools = [[k for k in keys if k != new_key] if new_key in keys else keys for keys in by_label]
    pools = [p for p in pools if p]
    out = [new_key]
    left, classes = size, len(pools)
    for i, pool in enumerate(sorted(pools, key=len)):  # small classes first: their unused share passes on
        share = left // (classes - i)
        take = min(share, len(pool))
        picked = rng.choice(len(pool), size=take, replace=False) if take < len(pool) else np.arange(len(pool))
        out.extend(pool[j] for j in sorted(picked.tolist()))
        left -= take
    return sorted(out)


def refine_budget(config, n_rows: int) -> int:
    """Refinement steps after one label: ``refine_steps``, fewer when the examples refined on
    (the replay sample) are many (at most ``refine_rows`` example-passes), at least one.
    Counted in steps, not time, so the result is deterministic."""
    c = config
    n = max(min(n_rows, c.replay_rows + 1) if c.replay_rows > 0 else n_rows, 1)
    return max(1, min(c.refine_steps, c.refine_rows // n)) if c.refine_steps > 0 else 0


def refine_label(model, key: int) -> float | None:
    """The refinement one label of ``model`` pays for: ``refine_budget`` steps on example
    ``key`` and its replay sample (``replay_keys``; every example while they are few)."""
    keys = replay_keys(model.net.by_label, key, model.config.replay_rows, model.seed)
    return model.net.refine(refine_budget(model.config, len(model.net.rows)), keys, kernel=ONLINE_KERNEL)
