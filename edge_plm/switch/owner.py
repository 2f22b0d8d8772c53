"""The owner's part of a device's model (docs/method.md, "The owner's part"): what a label
touches, and how the owner's evidence is mixed with the starting model's.

A device that starts from a starting model keeps that model as a frozen part (``UnitNet.frozen``)
and learns the owner's labels into a part of its own: the same units, words and network over the
owner's examples alone. The prediction pools the two distributions as a product: over the
actions the owner has labelled,

    p(a) proportional to p_start(a) p_owner(a)^lam,

so the owner's evidence multiplies the starting model's odds instead of being outweighed by
thousands of starting examples in one fit of both (that lost to the owner's labels alone on
held-out wording: docs/benchmarks-log.md, "Learns from its owner"), and a part that is unsure between
two actions leaves their odds as they are (a mixture (1 - lam) p_start + lam p_owner, used until
2026-12-03, pulled sure readings toward unsure ones: ``switch/share.py``). lam is the back-off
rule n / (n + owner_backoff) unless the owner's own labels, each predicted by both parts before
it was learned, show a share that decides them significantly better (``switch/share.py``). An
action the owner has not labelled yet keeps the starting part's probability (the owner's part
cannot say anything of it).

The parts are the model's ``start`` and ``net`` (``UnitNet``s) and its ``share``
(``share.OwnerShare``); the functions here take them, typed, and ``SwitchModel`` wires them
(``read``, ``held_out``, ``learn``).

A label refines the owner's part on itself and a bounded, class-balanced replay sample of earlier
owner examples (``replay_keys``), so an update costs the same at 50 labels as at 5,000.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable

import numpy as np

from edge_plm.switch.attention import softmax
from edge_plm.switch.config import SwitchConfig
from edge_plm.switch.unitnet import ONLINE_KERNEL, UnitNet

#: a transcript as the networks read it: (unit ids, weights, unknown weight, the attention's
#: placement or None) (``SwitchModel.placed``)
Placed = tuple[np.ndarray, np.ndarray, float, tuple | None]


def part_logits(net: UnitNet, start: UnitNet | None, row: Placed, long: np.ndarray,
                floor: float) -> tuple[np.ndarray | None, np.ndarray, float, bool]:
    """(the starting part's logits or None, the owner's part's, the labelled support of either,
    whether the starting part cannot read the transcript) of a transcript's ``row``
    (``SwitchModel.placed``; ``long``: which of its units count for the support) read by the
    owner's part ``net`` and the frozen starting part ``start`` (read only). The starting part
    cannot read it when it reads less than ``floor`` of it (its own support; the config's
    ``start_read_floor``) and the owner's part reads more: then the owner's part decides alone
    (``owner_alone_scores``)."""
    ids, w, unknown, placed = row
    own = net.logits(ids, w, placed)
    if start is None:
        return None, own, net.support(ids, w, unknown, long), False
    unread = False
    if floor > 0:
        s_start = start.support(ids, w, unknown, long)
        unread = s_start < floor and net.support(ids, w, unknown, long) > s_start
    return start.logits(ids, w, placed), own, net.support(ids, w, unknown, long, also=start), unread


def pooled_scores(start: np.ndarray | None, own: np.ndarray, unread: bool, owner_present: np.ndarray,
                  share: Callable[[], float]) -> np.ndarray:
    """The model's log-probabilities from its parts' logits (``part_logits``): the owner's
    part's alone without a starting part or when the starting part cannot read the transcript,
    else the pooling at the model's share (``share()``: ``share.py``). ``owner_present``: the
    actions the owner's part has labels of."""
    if start is None:
        return own
    if unread:
        return owner_alone_scores(start, own, owner_present)
    return mixed_scores(start, own, owner_present, share())


def mixture_parts(start_logits: np.ndarray, owner_logits: np.ndarray,
                  owner_present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(p_start, p_owner): the two distributions the pooling weighs. The owner's covers only
    the actions it has labels of (0 at the others, which keep the starting part's probability:
    ``share.pooled``)."""
    p_start = softmax(start_logits)
    if not owner_present.any():
        return p_start, np.zeros_like(p_start)
    return p_start, softmax(np.where(owner_present, owner_logits, -np.inf))


def mixed_scores(start_logits: np.ndarray, owner_logits: np.ndarray, owner_present: np.ndarray,
                 lam: float) -> np.ndarray:
    """log p of the product pooling at share ``lam`` (module docstring): ``share.pooled`` of
    one row, written for one row (it is on the utterance path; the test checks they agree)."""
    p_start, p_own = mixture_parts(start_logits, owner_logits, owner_present)
    present = p_own > 0
    if lam <= 0.0 or np.count_nonzero(present) < 2:
        return np.log(np.maximum(p_start, 1e-300))
    logs = np.log(p_start[present]) + lam * np.log(p_own[present])
    e = np.exp(logs - logs.max())
    p = p_start.copy()
    p[present] = e * (p_start[present].sum() / e.sum())
    return np.log(np.maximum(p, 1e-300))


def owner_alone_scores(start_logits: np.ndarray, owner_logits: np.ndarray,
                       owner_present: np.ndarray) -> np.ndarray:
    """log p of the owner's part alone (what the starting part cannot read): it shares out the
    starting part's mass on the actions it has labels of; the others keep the starting part's."""
    p_start, p_own = mixture_parts(start_logits, owner_logits, owner_present)
    mass = p_start[owner_present].sum()
    return np.log(np.maximum(np.where(owner_present, p_own * mass, p_start), 1e-300))


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
    # each pool is a class's keys without new_key, kept as (keys, new_key's index or None) so
    # that no list of the history is copied; new_key is a class's last key unless relabelled
    pools = []
    for keys in by_label:
        gap = len(keys) - 1 if keys and keys[-1] == new_key else _index(keys, new_key)
        if len(keys) - (gap is not None):
            pools.append((keys, gap))
    out = [new_key]
    left, classes = size, len(pools)
    for i, (keys, gap) in enumerate(sorted(pools, key=lambda p: len(p[0]) - (p[1] is not None))):
        n = len(keys) - (gap is not None)  # small classes first: their unused share passes on
        share = left // (classes - i)
        take = min(share, n)
        picked = rng.choice(n, size=take, replace=False) if take < n else np.arange(n)
        out.extend(keys[j if gap is None or j < gap else j + 1] for j in sorted(picked.tolist()))
        left -= take
    return sorted(out)


def _index(keys: list[int], key: int) -> int | None:
    """Where ``key`` is in ``keys`` (ascending, as ``UnitNet.by_label`` keeps each action's
    keys), or None: a bisection, not a scan of the history."""
    i = bisect_left(keys, key)
    return i if i < len(keys) and keys[i] == key else None


def refine_budget(config: SwitchConfig, n_rows: int) -> int:
    """Refinement steps after one label: ``refine_steps``, fewer when the examples refined on
    are many (at most ``refine_rows`` example-passes; with a replay sample, ``replay_rows`` > 0,
    at most ``replay_passes``, so that a label costs about the same whatever the history), at
    least one. A forget's full-batch round (``switch/scrub.py``) runs the same number of steps.
    Counted in steps, not time, so the result is deterministic."""
    c = config
    n = max(c.replay_rows + 1 if c.refines_on_sample(n_rows) else n_rows, 1)
    passes = min(c.refine_rows, c.replay_passes) if c.replay_rows > 0 else c.refine_rows
    return max(1, min(c.refine_steps, passes // n)) if c.refine_steps > 0 else 0


def refine_label(net: UnitNet, config: SwitchConfig, seed: int, key: int, n_owner: int) -> float | None:
    """The refinement one label pays for: ``refine_budget`` steps of the owner's part ``net``
    (of ``n_owner`` examples) on example ``key`` and its replay sample (``replay_keys``, drawn
    with ``seed``; every example while they are few)."""
    keys = replay_keys(net.by_label, key, config.replay_rows, seed)
    return net.refine(refine_budget(config, n_owner), keys, kernel=ONLINE_KERNEL)
