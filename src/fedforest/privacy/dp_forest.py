"""DP mode: a differentially private forest of random decision trees.

The structure of every tree is drawn without the rows, and only the leaf class
counts (regression trees: each leaf's row count and sum of the target, clipped
to its public range) are computed from them, with Laplace noise
(:func:`fit_dp_forest`, which states the guarantee). The noise must be secret
(see :mod:`fedforest.privacy`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..columns import class_labels
from ..model.forest import PooledForest
from ..model.inputs import to_global_matrix
from ..vocabulary import TASKS
from .counts import (
    check_epsilon,
    check_target_range,
    node_counts,
    target_codes,
    with_leaf_counts,
    with_leaf_means,
)
from .policy import MAX_DP_DEPTH


def fit_dp_forest(
    X: pd.DataFrame,
    y,
    feature_ranges: Mapping[str, Sequence[float]],
    categories: Mapping[str, Sequence[str]],
    n_trees: int,
    max_depth: int,
    epsilon: float,
    random_state=None,
    *,
    classes: Sequence | None = None,
    owner: str = "site",
    noise_state=None,
    task: str = "classification",
    target_range: Sequence[float] | None = None,
) -> PooledForest:
    """A differentially private forest of random decision trees (classification or regression).

    **Structure without the data.** Each tree is drawn from ``random_state``
    alone: at every node down to ``max_depth``, a feature is picked uniformly
    among those whose range at the node can still be split, with a threshold
    uniform in the node's range of it (numeric: the public
    ``feature_ranges[f]``, narrowed by the splits above; categorical: a cut
    ``c + 0.5`` between level codes, uniform among the cuts left). The
    direction of a missing value (``missing_left``) is a fair coin, and
    ``saw_missing`` is false everywhere. Rows outside a declared range are not
    clipped: they fall into the outermost leaf.

    **Counts with noise.** Every row of ``X`` is routed through every tree
    (once; a missing value follows ``missing_left``). Each leaf's class counts
    get independent ``Laplace(0, n_trees / epsilon)`` noise from
    ``noise_state``, are clipped at 0, and everything else (internal counts,
    ``value``, ``n_node_samples``) is computed from the noisy leaf counts as
    in :func:`~fedforest.privacy.transforms.add_count_noise`.

    **Regression means with noise** (``task="regression"``). Each row's
    target is clipped to the public ``target_range = (lo, hi)``; with centre
    ``c = (lo + hi) / 2`` and half-width ``h = (hi - lo) / 2``, each leaf's
    row count gets ``Laplace(0, 2·n_trees / epsilon)`` noise and its centred
    sum ``Σ (y - c)`` gets ``Laplace(0, 2·n_trees·h / epsilon)`` noise (half
    of each tree's budget each), both from ``noise_state``. The noisy count
    is clipped at 1 and the leaf's mean is
    ``clip(c + noisy sum / noisy count, lo, hi)``; internal nodes' counts are
    the sums of their leaves' noisy counts and their means the count-weighted
    means of their leaves' (so every mean sent lies in ``target_range``), and
    ``n_node_samples`` is the rounded noisy count.

    **Guarantee.** Let the inputs ``feature_ranges``, ``categories``,
    ``classes`` (regression: ``target_range``), ``task``, ``n_trees``,
    ``max_depth``, ``epsilon``, ``owner``, ``random_state`` and the column
    names of ``X`` be fixed independently of the rows. Then the returned
    forest, as a whole (structure, thresholds, ``value``, ``n_node_samples``),
    is ``epsilon``-differentially private
    with respect to adding or removing one row of ``(X, y)`` (and
    ``2·epsilon``-DP with respect to replacing one row). Proof: the structure
    does not depend on the rows; in each tree a row falls into exactly one
    leaf and adds 1 to exactly one class count, so the L1 sensitivity of a
    tree's leaf-count vector is 1, and ``Laplace(n_trees / epsilon)`` noise
    makes each tree ``epsilon / n_trees``-DP (Laplace mechanism). The trees
    use the same rows, so their budgets add up to ``epsilon`` (sequential
    composition); clipping, normalising, rounding and pruning by the noisy
    counts (:func:`~fedforest.privacy.transforms.enforce_min_leaf_rows`) are post-processing.
    Regression trees: in each tree a row falls into exactly one leaf; it adds
    1 to that leaf's count (L1 sensitivity 1 against noise
    ``2·n_trees / epsilon``: ``epsilon / (2·n_trees)``-DP) and
    ``clip(y) - c``, at most ``h`` in absolute value, to its centred sum (L1
    sensitivity ``h`` against noise ``2·n_trees·h / epsilon``: also
    ``epsilon / (2·n_trees)``-DP), so each tree is ``epsilon / n_trees``-DP
    and the forest ``epsilon``-DP as above. The target is clipped row by row
    before any sum, so the bound holds for every row whatever its target (a
    target outside the range counts as the nearest bound: clipping biases the
    means, it never weakens the guarantee); dividing, clipping the means,
    averaging and rounding are post-processing.

    Sequential rather than parallel composition (each tree on a disjoint
    share of the rows with the full ``epsilon``): a leaf's signal-to-noise
    ratio is the same either way (n / (T·2^d) rows against noise 1/epsilon,
    or n / 2^d rows against noise T/epsilon), but disjoint shares add the
    sampling error of splitting a hospital's few rows T ways.

    Caveats: ``classes=None`` uses the labels present in ``y``, which the
    guarantee then does not cover (pass the schema's classes); nor does it
    cover a ``target_range`` taken from the rows (their minimum and maximum):
    it must be public; numpy's Laplace sampler is not hardened against
    floating-point attacks, so the guarantee is that of the ideal mechanism;
    the noise must come from a secret source (``noise_state=None``:
    operating-system entropy), never from the job's seed.

    Parameters
    ----------
    X : DataFrame
        The site's training rows, encoded (categorical columns hold global
        level codes), global column names.
    y : array-like
        Class labels, or finite targets for regression.
    feature_ranges : mapping of str to (low, high)
        Public range of every numeric column of ``X``.
    categories : mapping of str to list of str
        Levels of the categorical columns of ``X`` (codes ``0 .. K-1``).
    n_trees, max_depth : int
        Number of trees (>= 1) and depth of each (1 to :data:`~fedforest.privacy.policy.MAX_DP_DEPTH`).
    epsilon : float
        The privacy budget of the whole forest (> 0).
    random_state : None, int or Generator
        Seeds the structure only (it may be public, e.g. the job's seed).
    classes : sequence, optional
        The class list (the global schema's); default: the labels of ``y``.
        Regression: ``None`` or empty.
    owner : str
        The site's name (``owners`` of the forest).
    noise_state : None, int or Generator
        Source of the Laplace noise; ``None`` outside tests.
    task : {"classification", "regression"}
        Class distributions, or means of the target, at the leaves.
    target_range : (float, float)
        Regression only, and required there: public bounds ``(low, high)`` of
        the target (finite, low < high).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> X = pd.DataFrame({"age": rng.uniform(20, 80, 200)})
    >>> y = 0.1 * X["age"].to_numpy() + rng.normal(size=200)
    >>> forest = fit_dp_forest(X, y, {"age": (0, 120)}, {}, 5, 3, 1.0, random_state=1,
    ...                        task="regression", target_range=(0, 15), noise_state=2)
    >>> forest.is_regression, bool(((forest.value >= 0) & (forest.value <= 15)).all())
    (True, True)
    """
    epsilon = check_epsilon(epsilon, "dp_epsilon")
    if task not in TASKS:
        raise ValueError(f"task={task!r} is not one of {list(TASKS)}")
    regression = task == "regression"
    if regression:
        if target_range is None:
            raise ValueError(
                "task='regression' needs target_range=(low, high), the public bounds of the "
                "target: the noise on the leaf sums is calibrated to it (a range taken from "
                "the rows would void the guarantee)"
            )
        y_lo, y_hi = check_target_range(target_range)
        if classes is not None and len(classes):
            raise ValueError(f"regression trees have no classes, got classes={list(classes)}")
    elif target_range is not None:
        raise ValueError(
            "target_range bounds the target of regression trees; pass task='regression'"
        )
    if isinstance(n_trees, bool) or not isinstance(n_trees, (int, np.integer)) or n_trees < 1:
        raise ValueError(f"n_trees must be an integer >= 1, got {n_trees!r}")
    if (
        isinstance(max_depth, bool)
        or not isinstance(max_depth, (int, np.integer))
        or not 1 <= max_depth <= MAX_DP_DEPTH
    ):
        raise ValueError(f"max_depth must be an integer in [1, {MAX_DP_DEPTH}], got {max_depth!r}")
    if not isinstance(X, pd.DataFrame):
        raise ValueError("X must be a DataFrame with global column names")
    names = [str(c) for c in X.columns]
    cats = {c: list(categories[c]) for c in names if c in categories}
    lacking = [c for c in names if c not in cats and c not in feature_ranges]
    if lacking:
        raise ValueError(
            f"columns {lacking} have no public range (feature_ranges) and are not categorical; "
            "a range taken from the rows would void the guarantee"
        )
    lo = np.zeros(len(names))
    hi = np.zeros(len(names))
    is_cat = np.array([c in cats for c in names])
    for j, c in enumerate(names):
        if c in cats:
            lo[j], hi[j] = 0, len(cats[c]) - 1
        else:
            a, b = (float(v) for v in feature_ranges[c])
            if not (math.isfinite(a) and math.isfinite(b) and a < b):
                raise ValueError(f"feature_ranges[{c!r}] must be finite with low < high")
            lo[j], hi[j] = a, b
    if regression:
        classes = []
    else:
        classes = class_labels(y) if classes is None else list(classes)
    rng = np.random.default_rng(random_state)
    parts: dict[str, list] = {k: [] for k in ("l", "r", "f", "t", "m")}
    starts = [0]
    for _ in range(int(n_trees)):
        left, right, feat, thr, miss = _random_tree(rng, lo, hi, is_cat, int(max_depth))
        parts["l"] += left
        parts["r"] += right
        parts["f"] += feat
        parts["t"] += thr
        parts["m"] += miss
        starts.append(starts[-1] + len(left))
    k = len(classes)
    structure = PooledForest.from_structure(
        task=task,
        feature_names=names,
        classes=classes,
        owner=owner,
        categories=cats,
        tree_start=starts,
        children_left=parts["l"],
        children_right=parts["r"],
        feature=parts["f"],
        threshold=parts["t"],
        missing_left=parts["m"],
    )
    Xg, _ = to_global_matrix(X, names, cats)
    target = target_codes(structure, y)
    if target.shape[0] != Xg.shape[0]:
        raise ValueError(f"X has {Xg.shape[0]} rows but y has {target.shape[0]}")
    noise_rng = np.random.default_rng(noise_state)
    leaf = structure.feature < 0
    n_leaves = int(leaf.sum())
    if not regression:
        sums, _, _, _ = node_counts(structure, Xg, target, None)
        noisy = sums.copy()
        noisy[leaf] += noise_rng.laplace(0.0, n_trees / epsilon, size=(n_leaves, k))
        return with_leaf_counts(structure, np.maximum(noisy, 0.0))
    centre, half = (y_lo + y_hi) / 2, (y_hi - y_lo) / 2
    sums, counts, _, _ = node_counts(structure, Xg, np.clip(target, y_lo, y_hi) - centre, None)
    scale = 2 * n_trees / epsilon  # half of each tree's budget on counts, half on sums
    noisy_n = np.maximum(counts[leaf] + noise_rng.laplace(0.0, scale, size=n_leaves), 1.0)
    noisy_sum = sums[leaf, 0] + noise_rng.laplace(0.0, scale * half, size=n_leaves)
    means = np.zeros(structure.n_nodes)
    leaf_n = np.zeros(structure.n_nodes)
    means[leaf] = np.clip(centre + noisy_sum / noisy_n, y_lo, y_hi)
    leaf_n[leaf] = noisy_n
    return with_leaf_means(structure, means, leaf_n, (y_lo, y_hi))


def _random_tree(rng, lo, hi, is_cat, max_depth):
    """One random tree in depth-first order, drawn from ``rng`` and the ranges only."""
    left: list[int] = []
    right: list[int] = []
    feat: list[int] = []
    thr: list[float] = []
    miss: list[bool] = []
    stack = [(lo.copy(), hi.copy(), 0, -1, False)]
    while stack:
        nlo, nhi, depth, parent, is_right = stack.pop()
        idx = len(feat)
        left.append(-1)
        right.append(-1)
        if parent >= 0:
            (right if is_right else left)[parent] = idx
        splittable = np.flatnonzero(np.where(is_cat, nhi - nlo >= 1, nhi > nlo))
        if depth >= max_depth or splittable.size == 0:
            feat.append(-1)
            thr.append(0.0)
            miss.append(False)
            continue
        j = int(rng.choice(splittable))
        llo, lhi, rlo, rhi = nlo.copy(), nhi.copy(), nlo.copy(), nhi.copy()
        if is_cat[j]:
            cut = int(rng.integers(int(nlo[j]), int(nhi[j])))  # codes <= cut go left
            t = cut + 0.5
            lhi[j], rlo[j] = cut, cut + 1
        else:
            t = float(rng.uniform(nlo[j], nhi[j]))
            lhi[j], rlo[j] = t, t
        feat.append(j)
        thr.append(t)
        miss.append(bool(rng.random() < 0.5))
        stack.append((rlo, rhi, depth + 1, idx, True))
        stack.append((llo, lhi, depth + 1, idx, False))
    return left, right, feat, thr, miss
