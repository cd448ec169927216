"""What the transforms and the DP forest share: the site's rows routed through the trees.

:func:`site_matrix` places the site's rows at the forest's global positions
and :func:`class_index` its labels at the forest's classes;
:func:`node_counts` routes the rows through every tree (as scikit-learn routes
its training rows) and counts them at every node; :func:`with_leaf_counts`
sets every node's counts from its leaves' counts; :func:`check_epsilon` reads
a noise budget.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..model.forest import PooledForest
from ..model.inputs import to_global_matrix
from ..model.payload_checks import MAX_NODE_SAMPLES
from ..model.traversal import CompiledForest, traverse


def class_index(forest: PooledForest, y) -> np.ndarray:
    y = np.asarray(y)
    idx = pd.Index(forest.classes).get_indexer(y)
    if np.any(idx < 0):
        unknown = sorted({str(v) for v in y[idx < 0]})[:10]
        raise ValueError(
            f"y has labels {unknown} that are not classes of the forest {list(forest.classes)}"
        )
    return idx.astype(np.int64)


def site_matrix(forest: PooledForest, X) -> np.ndarray:
    """The site's rows at the forest's global positions; every split feature must be there."""
    Xg, present = to_global_matrix(X, forest.feature_names, forest.categories)
    used = np.unique(np.concatenate([forest.feature, forest.surrogate_feature]))
    lacking = [forest.feature_names[j] for j in used[used >= 0] if not present[j]]
    if lacking:
        raise ValueError(f"X lacks columns {lacking} that the trees split on")
    return Xg


def node_counts(
    forest: PooledForest, Xg: np.ndarray, yi: np.ndarray, in_bag: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Route rows through every tree; weighted class sums, distinct rows, NaN seen per node.

    A row goes left when ``x <= threshold``; a missing value follows
    ``missing_left`` (as scikit-learn routes its training rows), on the one
    tree walk (:func:`~fedforest.model.traversal.traverse`). A row counts
    in a tree with its weight ``in_bag[tree, row]`` (rows of weight 0 are not
    routed); ``None`` means every row once.
    """
    n_classes = forest.n_classes
    sums = np.zeros((forest.n_nodes, n_classes))
    distinct = np.zeros(forest.n_nodes, dtype=np.int64)
    saw = np.zeros(forest.n_nodes, dtype=bool)
    # by trees, so that every pair reaching a node is in one chunk; weight 0: not walked
    walk = traverse(
        CompiledForest.build(forest),
        Xg,
        np.arange(forest.n_trees),
        by="trees",
        weight=1.0 if in_bag is None else in_bag,
    )
    for chunk in walk:
        trees = chunk.trees
        first, last = int(forest.tree_start[trees[0]]), int(forest.tree_start[trees[-1] + 1])
        width = last - first
        chunk_sums = np.zeros(width * n_classes)
        chunk_n = np.zeros(width, dtype=np.int64)
        for level in chunk:
            local = level.node - first
            chunk_sums += np.bincount(
                local * n_classes + yi[level.row], weights=level.weight, minlength=width * n_classes
            )
            chunk_n += np.bincount(local, minlength=width)
            saw[level.node[level.split][np.isnan(level.x)]] = True
        sums[first:last] = chunk_sums.reshape(width, n_classes)
        distinct[first:last] = chunk_n
    return sums, distinct, saw


def with_leaf_counts(forest: PooledForest, leaf_counts: np.ndarray) -> PooledForest:
    """Set every node's counts from its leaves' class counts (rows of ``leaf_counts``).

    ``leaf_counts`` has one row per node (only leaf rows are read), values
    >= 0. Internal nodes get the sum of their children's counts; ``value``
    is the normalised count vector (uniform where the total is 0) and
    ``n_node_samples`` the rounded total, at least 1. Rounding is monotone, so
    a child never has more rows than its parent.
    """
    counts = np.where((forest.feature < 0)[:, None], leaf_counts, 0.0)
    depth = forest.node_depth
    gleft, gright = forest.global_children
    internal = forest.feature >= 0
    for d in range(int(depth.max(initial=0)), -1, -1):
        at = np.flatnonzero(internal & (depth == d))
        if at.size:
            counts[at] = counts[gleft[at]] + counts[gright[at]]
    total = counts.sum(axis=1, keepdims=True)
    uniform = np.full_like(counts, 1.0 / max(forest.n_classes, 1))
    value = np.where(total > 0, counts / np.where(total > 0, total, 1.0), uniform)
    n = np.clip(np.rint(total[:, 0]), 1, MAX_NODE_SAMPLES).astype(np.int64)
    return forest.with_arrays(value=value, n_node_samples=n)


def check_epsilon(epsilon, what: str) -> float:
    """``epsilon`` as a float; a ``ValueError`` naming ``what`` unless it is finite and > 0."""
    if (
        isinstance(epsilon, bool)
        or not isinstance(epsilon, (int, float, np.integer, np.floating))
        or not math.isfinite(float(epsilon))
        or float(epsilon) <= 0
    ):
        raise ValueError(f"{what} must be a finite number > 0, got {epsilon!r}")
    return float(epsilon)
