"""``min_leaf_rows`` for survival trees: a leaf describes at least k rows and k events.

A survival tree's leaf carries the cumulative hazard and survival curves of
its rows; with few events the steps of those curves are the event times of
single patients. :func:`enforce_min_leaf_events` prunes every split with a
child whose in-bag rows hold fewer than ``k`` events, as
:func:`~fedforest.privacy.transforms.enforce_min_leaf_rows` prunes one with
a child of fewer than ``k`` rows: the split becomes a leaf with its own
curves (a random survival forest's every node holds the curves of the rows
that reach it), and a tree whose root holds fewer than ``k`` events is
dropped. The events are counted as distinct rows (a row drawn twice by the
bootstrap counts once), like ``n_node_samples``.
"""

from __future__ import annotations

import numpy as np

from ..model.forest import PooledForest
from ..model.forest_edit import KEEP, LEAF
from ..model.traversal import CompiledForest, traverse
from .counts import site_matrix


def node_events(forest: PooledForest, X, event, in_bag=None) -> np.ndarray:
    """The distinct in-bag rows with an event that reach each node, shape (n_nodes,).

    Parameters
    ----------
    forest : PooledForest
    X : DataFrame
        The site's training rows (encoded, global column names).
    event : array-like of bool, shape (n_rows,)
    in_bag : ndarray of shape (n_trees, n_rows), optional
        Row multiplicities per tree (0: not in the tree's sample; default: every
        row in every tree).
    """
    Xg = site_matrix(forest, X)
    e = np.asarray(event, dtype=bool)
    if e.shape != (Xg.shape[0],):
        raise ValueError(f"X has {Xg.shape[0]} rows but event has shape {e.shape}")
    weight = np.ones((forest.n_trees, Xg.shape[0])) if in_bag is None else np.asarray(in_bag)
    if weight.shape != (forest.n_trees, Xg.shape[0]):
        raise ValueError(
            f"in_bag must have shape ({forest.n_trees}, {Xg.shape[0]}), got {weight.shape}"
        )
    # only the rows with an event are walked, each once where it is in the tree's sample
    rows = np.flatnonzero(e)
    out = np.zeros(forest.n_nodes, dtype=np.int64)
    if rows.size == 0:
        return out
    walk = traverse(
        CompiledForest.build(forest),
        Xg[rows],
        np.arange(forest.n_trees),
        by="trees",
        weight=(weight[:, rows] > 0).astype(np.float64),
    )
    for chunk in walk:
        for level in chunk:
            out += np.bincount(level.node, minlength=forest.n_nodes)
    return out


def enforce_min_leaf_events(forest: PooledForest, X, event, k: int, in_bag=None) -> PooledForest:
    """Prune every split of survival trees with a child of fewer than ``k`` events.

    Top-down, as :func:`~fedforest.privacy.transforms.enforce_min_leaf_rows`:
    the split becomes a leaf with its own curves and count, its subtree is
    dropped; a tree whose root holds fewer than ``k`` events is dropped.
    ``k <= 1`` returns ``forest`` itself (a leaf of one row with an event
    says no more than the rows rule allows).

    Raises
    ------
    ValueError
        When ``forest`` is not of survival trees, or every tree's root holds
        fewer than ``k`` events.
    """
    if not forest.is_survival:
        raise ValueError(f"enforce_min_leaf_events prunes survival trees, not {forest.task}")
    k = int(k)
    if k <= 1:
        return forest
    events = node_events(forest, X, event, in_bag)
    gleft, gright = forest.global_children
    internal = forest.feature >= 0
    small = internal & (
        (events[np.where(internal, gleft, 0)] < k) | (events[np.where(internal, gright, 0)] < k)
    )
    keep_tree = events[forest.tree_start[:-1]] >= k
    if not keep_tree.any():
        raise ValueError(
            f"min_leaf_rows={k}: every survival tree holds fewer events (the largest root has "
            f"{int(events[forest.tree_start[:-1]].max())}); the site cannot send a forest"
        )
    return forest.prune(np.where(small, LEAF, KEEP).astype(np.int8), keep_tree)
