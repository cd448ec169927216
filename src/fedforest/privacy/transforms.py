"""The transforms of a site's outgoing forest, and the order they run in.

**The order of the transforms** (:func:`prepare_forest`, for one forest):

1. surrogate splits are removed when ``share.surrogates`` is false;
2. ``threshold_grid``: :func:`snap_thresholds` snaps every threshold (split
   and surrogate) to the grid, re-routes the site's training rows and
   recomputes the node counts and class distributions (regression trees:
   the node means of the target);
3. ``count_noise_epsilon``: the counts are first made plain row counts
   (:func:`recount`, each in-bag row once), so that one row changes one count
   of a tree by one (and, for regression trees, one leaf's sum by its
   target);
4. ``min_leaf_rows``: :func:`enforce_min_leaf_rows` on the true counts;
5. ``count_noise_epsilon``: :func:`add_count_noise` (class counts; for
   regression trees each leaf's row count and sum of the target);
6. ``min_leaf_rows`` again, on the noisy counts, so that no count sent is
   below k either (post-processing: it uses nothing but the noisy counts).

Every transform returns a new forest, built by
:meth:`~fedforest.model.forest.PooledForest.with_arrays` (counts, thresholds)
and :meth:`~fedforest.model.forest.PooledForest.prune` (nodes made leaves or
replaced by a child, trees dropped); its input is never changed. The noise of
:func:`add_count_noise` must be secret (see :mod:`fedforest.privacy`).
"""

from __future__ import annotations

import numpy as np

from ..model.forest import PooledForest
from ..model.forest_edit import KEEP, LEAF, TO_LEFT, TO_RIGHT
from ..model.in_bag import sample_counts
from ..model.surrogates import node_row_pairs
from ..validation import describe
from .audit import smallest_leaf_rows
from .counts import (
    check_epsilon,
    check_target_range,
    node_counts,
    site_matrix,
    target_codes,
    with_leaf_counts,
    with_leaf_means,
)
from .policy import PrivacyPolicy, ThresholdGrid


def _empty_actions(forest: PooledForest, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Collapse splits with an empty child onto the other child; drop empty trees."""
    gleft, gright = forest.global_children
    internal = forest.feature >= 0
    action = np.full(forest.n_nodes, KEEP, dtype=np.int8)
    left_empty = internal & (n[np.where(internal, gleft, 0)] == 0)
    right_empty = internal & (n[np.where(internal, gright, 0)] == 0)
    action[left_empty] = TO_RIGHT
    action[right_empty & ~left_empty] = TO_LEFT
    keep_tree = n[forest.tree_start[:-1]] > 0
    return action, keep_tree


def recount(forest: PooledForest, X, y, in_bag=None) -> PooledForest:
    """Recompute ``n_node_samples``, ``value`` and ``saw_missing`` from the site's rows.

    Every row of ``X`` is routed through every tree (``x <= threshold`` goes
    left, a missing value follows ``missing_left``). ``value`` becomes the
    class distribution of the rows that reach a node, or for regression trees
    the mean of their ``y``. With ``in_bag`` (the per-tree multiplicities of
    :func:`bootstrap_weights`) a row counts with its multiplicity in ``value``
    (a weighted distribution or mean) and once in ``n_node_samples``, as
    scikit-learn counts its bootstrap sample, so the forest's own sample
    reproduces its counts and means exactly. Without it every row counts once
    in every tree; then ``value * n_node_samples`` are plain row counts (the
    sums of ``y`` for regression trees). A node that no row reaches
    is removed (its parent is replaced by the other child), and a tree that no
    row reaches is dropped. ``saw_missing`` becomes: the threshold is +inf, or
    a counted row missing the node's feature reached the node.

    Parameters
    ----------
    forest : PooledForest
    X : DataFrame or ndarray
        The site's training rows (encoded, global column names).
    y : array-like
        Their class labels (classes of ``forest``), or their finite targets
        for regression trees.
    in_bag : ndarray of shape (n_trees, n_rows), optional
        Row multiplicities per tree (0: the row is not in the tree's sample).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> from fedforest.model.forest import PooledForest
    >>> X = pd.DataFrame({"x": np.arange(8.0)}); y = np.arange(8.0) ** 2
    >>> rf = RandomForestRegressor(n_estimators=2, max_depth=1, random_state=0).fit(X, y)
    >>> forest = PooledForest.from_sklearn(rf, ["x"], owner="s1")
    >>> out = recount(forest, X, y)  # every row once: each node's mean of y
    >>> bool(out.value[0, 0] == y.mean()), int(out.n_node_samples[0])
    (True, 8)
    """
    Xg = site_matrix(forest, X)
    target = target_codes(forest, y)
    if target.shape[0] != Xg.shape[0]:
        raise ValueError(f"X has {Xg.shape[0]} rows but y has {target.shape[0]}")
    if in_bag is not None:
        in_bag = np.asarray(in_bag)
        if in_bag.shape != (forest.n_trees, Xg.shape[0]) or np.any(in_bag < 0):
            raise ValueError(
                f"in_bag must be non-negative with shape ({forest.n_trees}, {Xg.shape[0]}), "
                f"got {describe(in_bag)}"
            )
    sums, weight, n, saw = node_counts(forest, Xg, target, in_bag)
    w = weight[:, None]
    value = np.where(w > 0, sums / np.where(w > 0, w, 1.0), forest.value)
    internal = forest.feature >= 0
    saw_missing = internal & (np.isposinf(forest.threshold) | saw)
    counted = forest.with_arrays(
        n_node_samples=n,
        value=value,
        saw_missing=saw_missing,
    )
    action, keep_tree = _empty_actions(forest, n)
    if not keep_tree.any():
        raise ValueError("no row of X reaches any tree (is in_bag all zero?)")
    return counted.prune(action, keep_tree)


def bootstrap_weights(rf, n_rows: int) -> np.ndarray:
    """Per-tree row multiplicities of a fitted scikit-learn forest, shape (n_trees, n_rows).

    With ``bootstrap=False`` every row counts once in every tree. Pass the
    result as ``in_bag`` to :func:`recount` / :func:`snap_thresholds` (counts
    like scikit-learn's), or ``in_bag > 0`` (each in-bag row once: plain row
    counts, as :func:`add_count_noise` assumes).
    """
    return sample_counts(rf, n_rows)


def enforce_min_leaf_rows(forest: PooledForest, k: int) -> PooledForest:
    """Prune every split with a child that describes fewer than ``k`` rows.

    Top-down, a split whose left or right child has ``n_node_samples < k``
    becomes a leaf with its own (the parent's) class distribution, or mean
    for regression trees, and count; its subtree is dropped. A tree whose root
    describes fewer than ``k`` rows is dropped. The result is a valid forest
    in depth-first order with renumbered children, and every node in it
    describes at least ``k`` rows (a child never has more rows than its
    parent). ``k <= 1``, or a forest
    that already complies, is returned as it is.

    Use :func:`~fedforest.privacy.audit.smallest_leaf_rows` to check an outgoing forest.

    Examples
    --------
    >>> from fedforest.model.forest import PooledForest
    >>> stump = PooledForest(
    ...     feature_names=["x"], classes=[], owners=["s1"], task="regression",
    ...     tree_start=[0, 3], tree_owner=[0], children_left=[1, -1, -1],
    ...     children_right=[2, -1, -1], feature=[0, -1, -1], threshold=[0.5, 0.0, 0.0],
    ...     n_node_samples=[12, 2, 10], missing_left=[True] * 3, saw_missing=[False] * 3,
    ...     value=[[3.0], [9.0], [1.8]])
    >>> out = enforce_min_leaf_rows(stump, 5)  # the root keeps its own mean and count
    >>> out.n_nodes, float(out.value[0, 0]), int(out.n_node_samples[0])
    (1, 3.0, 12)

    Raises
    ------
    ValueError
        When every tree's root describes fewer than ``k`` rows.
    """
    k = int(k)
    if k <= 1 or smallest_leaf_rows(forest) >= k:
        return forest
    n = forest.n_node_samples
    gleft, gright = forest.global_children
    internal = forest.feature >= 0
    small = internal & (
        (n[np.where(internal, gleft, 0)] < k) | (n[np.where(internal, gright, 0)] < k)
    )
    action = np.where(small, LEAF, KEEP).astype(np.int8)
    keep_tree = n[forest.tree_start[:-1]] >= k
    if not keep_tree.any():
        raise ValueError(
            f"min_leaf_rows={k}: every tree describes fewer rows (the largest root has "
            f"{int(n[forest.tree_start[:-1]].max())}); the site cannot send a forest"
        )
    return forest.prune(action, keep_tree)


def _coerce_grid(grid) -> ThresholdGrid:
    if isinstance(grid, ThresholdGrid):
        return grid
    return ThresholdGrid.from_dict(grid, "threshold grid")


def snap_thresholds(
    forest: PooledForest,
    X,
    y,
    grid,
    *,
    in_bag=None,
    min_agreement: float = 0.25,
    min_rows: int = 6,
) -> PooledForest:
    """Snap every threshold to a public grid, then recount the trees on the site's rows.

    * numeric split thresholds go to the nearest point of their feature's rule
      in ``grid``;
    * categorical split thresholds become ``floor(t) + 0.5`` (clipped to
      ``[-0.5, K - 0.5]``): every level code goes the same way as before, and
      the threshold no longer tells which codes the node's rows had;
    * +inf thresholds (scikit-learn's split of missing from observed values)
      carry no training value and are kept.

    The site's training rows are then re-routed through each snapped tree and
    ``n_node_samples``, ``value`` and ``saw_missing`` recomputed
    (:func:`recount`, with ``in_bag``), so each tree stays consistent. A split
    that the snapping left with an empty side is replaced by its other child.

    Surrogate thresholds are snapped the same way (by the surrogate feature's
    rule). Their orientation and adjusted agreement are recomputed on the
    site's rows as :func:`~fedforest.model.surrogates.fit_surrogates` computes
    them, and a surrogate whose agreement falls below ``min_agreement``, or
    that is judged on fewer than ``min_rows`` rows, is removed.

    Raises
    ------
    ValueError
        When the grid leaves a numeric split feature without a rule, or names
        a categorical feature.
    """
    grid = _coerce_grid(grid)
    cats = set(forest.categories)
    named_cats = sorted(set(grid.features) & cats)
    if named_cats:
        raise ValueError(
            f"the threshold grid names categorical features {named_cats}; categorical "
            "features always use the cuts between level codes"
        )
    used = np.unique(np.concatenate([forest.feature, forest.surrogate_feature]))
    numeric_used = [forest.feature_names[j] for j in used[used >= 0]]
    numeric_used = [f for f in numeric_used if f not in cats]
    missing = grid.uncovered(numeric_used)
    if missing:
        raise ValueError(
            f"the threshold grid has no rule for numeric features {missing}; add a default "
            "step or significant_digits, or list them under steps or edges"
        )
    threshold = _snap_all(forest, grid, forest.feature, forest.threshold)
    sur_threshold = _snap_all(forest, grid, forest.surrogate_feature, forest.surrogate_threshold)
    snapped = forest.with_arrays(threshold=threshold, surrogate_threshold=sur_threshold)
    out = recount(snapped, X, y, in_bag=in_bag)
    if np.any(out.surrogate_feature >= 0):
        out = _rescore_surrogates(out, site_matrix(out, X), min_agreement, min_rows)
    return out


def _snap_all(forest, grid: ThresholdGrid, feature, threshold) -> np.ndarray:
    out = np.array(threshold, dtype=np.float64, copy=True)
    splits = (feature >= 0) & np.isfinite(out)
    for j in np.unique(feature[splits]):
        at = splits & (feature == j)
        name = forest.feature_names[j]
        if name in forest.categories:
            k = len(forest.categories[name])
            out[at] = np.clip(np.floor(out[at]) + 0.5, -0.5, k - 0.5)
        else:
            out[at] = grid.snap(name, out[at])
    return out


def _rescore_surrogates(
    forest: PooledForest, Xg: np.ndarray, min_agreement: float, min_rows: int
) -> PooledForest:
    """Orientation and adjusted agreement of each (snapped) surrogate on the site's rows.

    Rows are routed as :func:`~fedforest.model.surrogates.fit_surrogates`
    routes them (:func:`~fedforest.model.surrogates.node_row_pairs`): a
    missing value at a node that saw missing values follows the learned
    direction, at any other node the row stops.
    """
    n_nodes = forest.n_nodes
    has = forest.surrogate_feature >= 0
    n_total = np.zeros(n_nodes)
    n_left = np.zeros(n_nodes)
    agree_le = np.zeros(n_nodes)
    sfeat = forest.surrogate_feature.astype(np.int64)
    for rn, rr, rl in node_row_pairs(forest, Xg, has):
        xs = Xg[rr, sfeat[rn]]
        ok = ~np.isnan(xs)
        rn, rl, xs = rn[ok], rl[ok], xs[ok]
        s_left = xs <= forest.surrogate_threshold[rn]
        np.add.at(n_total, rn, 1.0)
        np.add.at(n_left, rn, rl.astype(float))
        np.add.at(agree_le, rn, (s_left == rl).astype(float))
    n_maj = np.maximum(n_left, n_total - n_left)
    le = agree_le >= n_total - agree_le
    n_surr = np.where(le, agree_le, n_total - agree_le)
    denom = n_total - n_maj
    with np.errstate(divide="ignore", invalid="ignore"):
        adj = np.where(denom > 0, (n_surr - n_maj) / np.where(denom > 0, denom, 1.0), -np.inf)
    keep = has & (n_total >= min_rows) & (denom > 0) & (adj >= min_agreement)
    return forest.with_surrogates(
        np.where(keep, forest.surrogate_feature, -1),
        np.where(keep, forest.surrogate_threshold, 0.0),
        np.where(keep, le, True),
        np.where(keep, adj, 0.0),
    )


def add_count_noise(
    forest: PooledForest, epsilon: float, random_state=None, *, target_range=None
) -> PooledForest:
    """Laplace noise on every leaf's counts (and sums); everything above recomputed from them.

    **Classification trees.** The leaf class counts are
    ``c = value * n_node_samples``. Each count gets independent noise
    ``Laplace(0, 1/epsilon)`` (variance ``2 / epsilon**2``) and is clipped at
    0. Internal nodes' counts are the sums of their leaves' noisy counts;
    every node's ``value`` is its normalised noisy count vector (uniform when
    all its counts were clipped to 0) and its ``n_node_samples`` the rounded
    noisy total (at least 1).

    **Regression trees.** Each leaf sends a row count ``n`` and a mean ``m``
    (its sum of the target is ``m · n``). With a target scale ``[lo, hi]``
    (centre ``c = (lo + hi) / 2``, half-width ``h = (hi - lo) / 2``), each
    leaf's count gets ``Laplace(0, 2/epsilon)`` noise and its centred sum
    ``(m - c) · n`` gets ``Laplace(0, 2h/epsilon)`` noise, half the budget
    each; the noisy count is clipped at 1 and the leaf's mean is
    ``c + noisy sum / noisy count``. Internal nodes' counts are the sums of
    their leaves' noisy counts and their means the count-weighted means of
    their leaves' (:func:`~fedforest.privacy.counts.with_leaf_means`);
    ``n_node_samples`` is the rounded noisy count. The scale:

    * ``target_range`` given (public bounds of the target): that range; leaf
      means are clipped to it before the sums are formed and after the noise;
    * otherwise the range of the forest's own leaf means (when every leaf has
      the same mean ``m``: half-width ``max(|m|, 1)``). It is not public and
      not a bound on one row's target, and the noisy means are not clipped to
      it (clipping would send the extreme leaf means exactly).

    In both cases the structure, thresholds and surrogates are unchanged.

    **Sensitivity.** When the counts are plain row counts (a forest from
    :func:`recount` or :func:`snap_thresholds` with each in-bag row once),
    adding or removing one training row changes one count of one leaf of a
    tree by 1, so the L1 sensitivity of a tree's leaf-count vector is 1 and
    the noisy counts of one tree are the Laplace mechanism:
    epsilon-differentially private *given the tree*; a forest of T trees that
    share rows spends T·epsilon on its counts (sequential composition). For
    regression trees the same holds for the (count, sum) pairs of a tree when
    every row's target lies in ``target_range``: the row changes one leaf's
    count by 1 (``epsilon / 2``) and its centred sum by at most ``h``
    (``epsilon / 2``); without ``target_range`` a row beyond the leaf means'
    range moves its leaf's sum by more than ``h``, and there is no such
    statement. With scikit-learn's bootstrap weighting, ``c`` are weighted
    proportions (means) times distinct rows and one row can move them by more.
    In every case this protects the **counts and leaf means only**: the tree
    structure and thresholds were chosen from the rows without noise, so the
    forest is not differentially private. Use
    :func:`~fedforest.privacy.dp_forest.fit_dp_forest` for a guarantee.

    Parameters
    ----------
    forest : PooledForest
    epsilon : float
        > 0; the noise scale is ``1 / epsilon`` (regression: ``2 / epsilon``
        on counts, ``2h / epsilon`` on sums).
    random_state : None, int or Generator
        Source of the noise. Leave it ``None`` (operating-system entropy)
        outside tests: noise from a seed the server knows can be subtracted.
    target_range : (float, float), optional
        Regression trees only: public bounds ``(low, high)`` of the target.

    Examples
    --------
    >>> from fedforest.model.forest import PooledForest
    >>> stump = PooledForest(
    ...     feature_names=["x"], classes=[], owners=["s1"], task="regression",
    ...     tree_start=[0, 3], tree_owner=[0], children_left=[1, -1, -1],
    ...     children_right=[2, -1, -1], feature=[0, -1, -1], threshold=[0.5, 0.0, 0.0],
    ...     n_node_samples=[30, 10, 20], missing_left=[True] * 3, saw_missing=[False] * 3,
    ...     value=[[2.0], [5.0], [0.5]])
    >>> noisy = add_count_noise(stump, 1.0, random_state=0, target_range=(0, 10))
    >>> bool(((noisy.value >= 0) & (noisy.value <= 10)).all())
    True
    """
    epsilon = check_epsilon(epsilon, "count_noise_epsilon")
    rng = np.random.default_rng(random_state)
    leaf = forest.feature < 0
    if forest.is_regression:
        return _noisy_means(forest, epsilon, rng, target_range)
    if target_range is not None:
        raise ValueError("target_range bounds the target of regression trees; these classify")
    counts = forest.value * forest.n_node_samples[:, None].astype(np.float64)
    noise = np.zeros_like(counts)
    noise[leaf] = rng.laplace(0.0, 1.0 / epsilon, size=(int(leaf.sum()), forest.n_classes))
    return with_leaf_counts(forest, np.maximum(counts + noise, 0.0))


def _noisy_means(forest: PooledForest, epsilon: float, rng, target_range) -> PooledForest:
    """:func:`add_count_noise` for regression trees (its docstring states the rule)."""
    leaf = forest.feature < 0
    n = forest.n_node_samples[leaf].astype(np.float64)
    mean = forest.value[leaf, 0]
    bounds = None
    if target_range is not None:
        lo, hi = bounds = check_target_range(target_range)
        mean = np.clip(mean, lo, hi)
        half = (hi - lo) / 2
    else:
        lo, hi = float(mean.min()), float(mean.max())
        half = (hi - lo) / 2 if hi > lo else max(abs(lo), 1.0)
    centre = (lo + hi) / 2
    size = int(leaf.sum())
    noisy_n = np.maximum(n + rng.laplace(0.0, 2.0 / epsilon, size=size), 1.0)
    noisy_sum = (mean - centre) * n + rng.laplace(0.0, 2.0 * half / epsilon, size=size)
    means = np.zeros(forest.n_nodes)
    counts = np.zeros(forest.n_nodes)
    means[leaf], counts[leaf] = centre + noisy_sum / noisy_n, noisy_n
    return with_leaf_means(forest, means, counts, bounds)


def strip_surrogates(forest: PooledForest) -> PooledForest:
    """The forest without surrogate splits (``share.surrogates: false``)."""
    if not np.any(forest.surrogate_feature >= 0):
        return forest
    n = forest.n_nodes
    return forest.with_surrogates(np.full(n, -1), np.zeros(n), np.ones(n, bool), np.zeros(n))


def prepare_forest(
    forest: PooledForest,
    policy: PrivacyPolicy,
    X=None,
    y=None,
    *,
    in_bag=None,
    min_agreement: float = 0.25,
    min_rows: int = 6,
    noise_state=None,
) -> PooledForest:
    """Apply ``policy`` to a site's outgoing forest (not DP mode), in the documented order.

    Surrogates removed (``share.surrogates`` false) → :func:`snap_thresholds`
    (``threshold_grid``) → plain row counts (:func:`recount` with each in-bag
    row once, when ``count_noise_epsilon`` is set) → :func:`enforce_min_leaf_rows`
    → :func:`add_count_noise` → :func:`enforce_min_leaf_rows` on the noisy
    counts. The default policy returns ``forest`` itself. Regression trees
    go through the same steps: recounting recomputes their node means of
    ``y``, and the count noise is on each leaf's count and sum of ``y`` (its
    scale is the range of the forest's leaf means: a policy outside DP mode
    has no ``target_range``).

    Parameters
    ----------
    forest : PooledForest
        The site's forest (with surrogates, if any: their thresholds are
        snapped too).
    policy : PrivacyPolicy
    X, y :
        The site's training rows and labels (regression: targets); needed
        for a grid or count noise.
    in_bag : ndarray of shape (n_trees, n_rows), optional
        :func:`bootstrap_weights` of the scikit-learn forest, so the counts
        stay those of each tree's sample (default: every row in every tree).
    min_agreement, min_rows :
        The job's surrogate settings (surrogates re-scored after snapping).
    noise_state : None, int or Generator
        Source of the count noise; ``None`` outside tests.
    """
    if policy.dp:
        raise ValueError("DP mode replaces the forest: use fit_dp_forest")
    if policy.is_default:
        return forest
    if not policy.share["surrogates"]:
        forest = strip_surrogates(forest)
    noise = policy.count_noise_epsilon
    needs_rows = policy.threshold_grid is not None or noise is not None
    if needs_rows and (X is None or y is None):
        raise ValueError("a threshold grid or count noise needs the site's rows X and y")
    weights = in_bag
    if noise is not None and in_bag is not None:
        weights = (np.asarray(in_bag) > 0).astype(np.int64)
    if policy.threshold_grid is not None:
        forest = snap_thresholds(
            forest,
            X,
            y,
            policy.threshold_grid,
            in_bag=weights,
            min_agreement=min_agreement,
            min_rows=min_rows,
        )
    elif noise is not None:
        forest = recount(forest, X, y, in_bag=weights)
    forest = enforce_min_leaf_rows(forest, policy.min_leaf_rows)
    if noise is not None:
        forest = add_count_noise(forest, noise, noise_state)
        forest = enforce_min_leaf_rows(forest, policy.min_leaf_rows)
    return forest
