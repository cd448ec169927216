"""What the transforms and the DP forest share: the site's rows routed through the trees.

:func:`site_matrix` places the site's rows at the forest's global positions;
:func:`target_codes` reads its labels as the forest's class indices
(:func:`class_index`) or, for regression trees, its targets as finite floats;
:func:`node_counts` routes the rows through every tree (as scikit-learn routes
its training rows) and sums them at every node; :func:`with_leaf_counts`
(class counts) and :func:`with_leaf_means` (regression means and counts) set
every node from its leaves; :func:`check_epsilon` reads a noise budget and
:func:`check_target_range` a target's public bounds.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..model.forest import PooledForest
from ..model.forest_format import MAX_MEAN
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


def target_codes(forest: PooledForest, y) -> np.ndarray:
    """``y`` as :func:`node_counts` reads it: class indices, or finite floats for regression.

    Examples
    --------
    >>> import numpy as np
    >>> from fedforest.model.forest import PooledForest
    >>> tree = dict(feature_names=["x"], owner="s", tree_start=[0, 1], children_left=[-1],
    ...             children_right=[-1], feature=[-1], threshold=[0.0], missing_left=[True])
    >>> target_codes(PooledForest.from_structure(classes=["no", "yes"], **tree), ["yes", "no"])
    array([1, 0])
    >>> target_codes(PooledForest.from_structure(classes=[], task="regression", **tree), [2, 3.5])
    array([2. , 3.5])
    """
    if not forest.is_regression:
        return class_index(forest, y)
    try:
        values = np.asarray(y, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError("y of regression trees must be numbers") from None
    if not np.isfinite(values).all():
        raise ValueError(
            f"y of regression trees must be finite; {int((~np.isfinite(values)).sum())} "
            "values are missing or infinite"
        )
    return values


def site_matrix(forest: PooledForest, X) -> np.ndarray:
    """The site's rows at the forest's global positions; every split feature must be there."""
    Xg, present = to_global_matrix(X, forest.feature_names, forest.categories)
    used = np.unique(np.concatenate([forest.feature, forest.surrogate_feature]))
    lacking = [forest.feature_names[j] for j in used[used >= 0] if not present[j]]
    if lacking:
        raise ValueError(f"X lacks columns {lacking} that the trees split on")
    return Xg


def node_counts(
    forest: PooledForest, Xg: np.ndarray, target: np.ndarray, in_bag: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Route rows through every tree; weighted sums, weights, distinct rows, NaN seen per node.

    A row goes left when ``x <= threshold``; a missing value follows
    ``missing_left`` (as scikit-learn routes its training rows), on the one
    tree walk (:func:`~fedforest.model.traversal.traverse`). A row counts
    in a tree with its weight ``in_bag[tree, row]`` (rows of weight 0 are not
    routed); ``None`` means every row once.

    ``target`` is :func:`target_codes`: for classification trees ``sums`` has
    one column per class (the weighted class counts); for regression trees one
    column, the weighted sum of ``target``. ``weight`` is the weighted number
    of rows at each node, ``distinct`` the number of distinct rows.
    """
    regression = forest.is_regression
    width = 1 if regression else forest.n_classes
    sums = np.zeros((forest.n_nodes, width))
    weight = np.zeros(forest.n_nodes)
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
        n = last - first
        chunk_sums = np.zeros(n * width)
        chunk_weight = np.zeros(n)
        chunk_n = np.zeros(n, dtype=np.int64)
        for level in chunk:
            local = level.node - first
            w = level.weight
            if regression:
                chunk_sums += np.bincount(local, weights=w * target[level.row], minlength=n)
            else:
                chunk_sums += np.bincount(
                    local * width + target[level.row], weights=w, minlength=n * width
                )
            chunk_weight += np.bincount(local, weights=w, minlength=n)
            chunk_n += np.bincount(local, minlength=n)
            saw[level.node[level.split][np.isnan(level.x)]] = True
        sums[first:last] = chunk_sums.reshape(n, width)
        weight[first:last] = chunk_weight
        distinct[first:last] = chunk_n
    return sums, weight, distinct, saw


def _from_leaves(forest: PooledForest, leaf_rows: np.ndarray) -> np.ndarray:
    """Every node's rows of ``leaf_rows`` summed over its leaves (leaf rows are read only)."""
    out = np.where((forest.feature < 0)[:, None], leaf_rows, 0.0)
    depth = forest.node_depth
    gleft, gright = forest.global_children
    internal = forest.feature >= 0
    for d in range(int(depth.max(initial=0)), -1, -1):
        at = np.flatnonzero(internal & (depth == d))
        if at.size:
            out[at] = out[gleft[at]] + out[gright[at]]
    return out


def with_leaf_counts(forest: PooledForest, leaf_counts: np.ndarray) -> PooledForest:
    """Set every node's counts from its leaves' class counts (rows of ``leaf_counts``).

    ``leaf_counts`` has one row per node (only leaf rows are read), values
    >= 0. Internal nodes get the sum of their children's counts; ``value``
    is the normalised count vector (uniform where the total is 0) and
    ``n_node_samples`` the rounded total, at least 1. Rounding is monotone, so
    a child never has more rows than its parent.
    """
    counts = _from_leaves(forest, leaf_counts)
    total = counts.sum(axis=1, keepdims=True)
    uniform = np.full_like(counts, 1.0 / max(forest.n_classes, 1))
    value = np.where(total > 0, counts / np.where(total > 0, total, 1.0), uniform)
    n = np.clip(np.rint(total[:, 0]), 1, MAX_NODE_SAMPLES).astype(np.int64)
    return forest.with_arrays(value=value, n_node_samples=n)


def with_leaf_means(
    forest: PooledForest,
    leaf_means: np.ndarray,
    leaf_counts: np.ndarray,
    bounds: tuple[float, float] | None = None,
) -> PooledForest:
    """Set every node of regression trees from its leaves' means and (noisy) row counts.

    ``leaf_means`` and ``leaf_counts`` have one entry per node (only leaves
    are read). Counts are clipped at 1 and means to ``bounds`` (default
    ±``MAX_MEAN``, the payload's bound). An internal node's count is the sum
    of its leaves' counts and its mean their count-weighted mean (so a node's
    mean lies between its leaves' means; it is clipped to ``bounds`` too,
    against rounding); ``n_node_samples`` is the rounded count, at least 1.
    Rounding is monotone, so a child never has more rows than its parent.

    Examples
    --------
    >>> import numpy as np
    >>> from fedforest.model.forest import PooledForest
    >>> stump = PooledForest.from_structure(
    ...     feature_names=["x"], classes=[], owner="s", task="regression", tree_start=[0, 3],
    ...     children_left=[1, -1, -1], children_right=[2, -1, -1], feature=[0, -1, -1],
    ...     threshold=[0.5, 0.0, 0.0], missing_left=[True] * 3)
    >>> out = with_leaf_means(stump, np.array([0.0, 1.0, 4.0]), np.array([0.0, 3.0, 1.0]))
    >>> out.value[:, 0].tolist(), out.n_node_samples.tolist()
    ([1.75, 1.0, 4.0], [4, 3, 1])
    """
    lo, hi = (-MAX_MEAN, MAX_MEAN) if bounds is None else bounds
    leaf = forest.feature < 0
    counts = np.where(leaf, np.maximum(np.asarray(leaf_counts, np.float64).reshape(-1), 1.0), 0)
    means = np.clip(np.asarray(leaf_means, np.float64).reshape(-1), lo, hi)
    summed = _from_leaves(forest, np.column_stack([np.where(leaf, means, 0.0) * counts, counts]))
    total = summed[:, 1]
    value = np.where(leaf, means, summed[:, 0] / np.where(total > 0, total, 1.0))
    value = np.clip(value, lo, hi)[:, None]
    n = np.clip(np.rint(total), 1, MAX_NODE_SAMPLES).astype(np.int64)
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


def check_target_range(target_range, what: str = "target_range") -> tuple[float, float]:
    """``(low, high)`` as floats; a ``ValueError`` naming ``what`` unless finite with low < high.

    Examples
    --------
    >>> check_target_range([0, 10])
    (0.0, 10.0)
    """
    ok = (
        isinstance(target_range, (list, tuple, np.ndarray))
        and len(target_range) == 2
        and all(
            isinstance(v, (int, float, np.integer, np.floating))
            and not isinstance(v, bool)
            and math.isfinite(float(v))
            for v in target_range
        )
    )
    if not ok or not float(target_range[0]) < float(target_range[1]):
        raise ValueError(
            f"{what} must be (low, high), two finite numbers with low < high, got {target_range!r}"
        )
    return float(target_range[0]), float(target_range[1])
