"""Surrogate splits on shared features (paper section III-B6, CART).

For every node that splits on a feature other sites may lack, the site that
trained the tree searches the shared features for the split that best mimics
the primary split on its own training rows, scored by the adjusted agreement
(paper eq. 21)::

    adj = (n_surr - n_maj) / (n_total - n_maj)

where ``n_total`` counts the rows at the node that have both the primary and
the candidate feature, ``n_surr`` those the candidate sends the same way as
the primary split and ``n_maj`` the rows on the primary split's majority side
(the agreement of the "send everything one way" rule).

The search is vectorised: the (node, row) pairs of every node needing a
surrogate are collected by one level-synchronous traversal of all trees
(:func:`~fedforest.model.traversal.traverse`, by chunks of trees, so that all
the rows at a node are in one chunk), and for each candidate feature the pairs
are sorted by (node, value) once; the agreement at every boundary between
distinct values comes from cumulative counts within each node's group, and the
best boundary per node from a segmented maximum. Python loops run only over
candidate features (and over chunks of trees, to bound memory).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd

from .forest import PooledForest
from .inputs import to_global_matrix
from .traversal import DISCARD, CompiledForest, traverse

logger = logging.getLogger(__name__)


def fit_surrogates(
    forest: PooledForest,
    X: pd.DataFrame,
    shared_features: Sequence[str],
    *,
    min_agreement: float = 0.25,
    min_rows: int = 6,
) -> PooledForest:
    """Find a surrogate split on a shared feature for every node on another feature.

    Every row of ``X`` is routed through every tree from its root (``x <=
    threshold`` goes left; a missing value at a node that saw missing values
    in training follows the learned direction; a missing value at any other
    node stops the row there). At each node whose split feature is not in
    ``shared_features``, the rows that reached it and have the primary feature
    define the primary direction; for each shared feature ``j`` (rows missing
    ``j`` left out) and each threshold halfway between consecutive distinct
    values of ``j`` (as scikit-learn places thresholds), both orientations are
    scored by the adjusted agreement. The best one is kept when its adjusted
    agreement is at least ``min_agreement`` and it was computed on at least
    ``min_rows`` rows. Ties go to the lower feature index, then to the lower
    threshold, then to the orientation ``x_j <= t goes left``.

    Parameters
    ----------
    forest : PooledForest
        The trees (usually the site's own, before pooling).
    X : DataFrame
        The site's training rows, columns named by global feature name. It
        must hold every feature the trees split on and every shared feature.
    shared_features : sequence of str
        Candidate surrogate features (features every site has); a subset of
        ``forest.feature_names``. Nodes on these features get no surrogate.
    min_agreement : float
        Smallest adjusted agreement accepted, in [-1, 1].
    min_rows : int
        Fewest rows (with both features observed) a surrogate is judged on.

    Returns
    -------
    PooledForest
        A copy of ``forest`` with ``surrogate_feature`` (-1: none),
        ``surrogate_threshold``, ``surrogate_left_le`` (``True``: ``x_j <= t``
        goes left) and ``surrogate_agreement`` (0 where there is none) set on
        every node.

    Raises
    ------
    ValueError
        If ``shared_features`` names features the forest does not have, ``X``
        lacks a needed column, or ``min_agreement`` / ``min_rows`` are out of
        range.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from fedforest import PooledForest
    >>> rng = np.random.default_rng(0)
    >>> X = pd.DataFrame({"s": rng.normal(size=300), "n": rng.normal(size=300)})
    >>> X["p"] = X["s"].round(1)  # a private, coarser copy of the shared "s"
    >>> y = (X["s"] + 0.3 * X["n"] > 0).astype(int)
    >>> rf = RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0).fit(X, y)
    >>> forest = PooledForest.from_sklearn(rf, ["s", "n", "p"], owner="s1")
    >>> out = fit_surrogates(forest, X, ["s", "n"])
    >>> on_p = out.feature == 2
    >>> sorted(set(out.feature_names[j] for j in out.surrogate_feature[on_p]))
    ['s']
    >>> bool(np.all(out.surrogate_feature[out.feature == 0] == -1))  # "s" is shared
    True
    """
    names = list(forest.feature_names)
    shared = [str(f) for f in shared_features]
    unknown = [f for f in shared if f not in names]
    if unknown:
        raise ValueError(
            f"shared_features {unknown} are not features of the forest; it has {names}"
        )
    if isinstance(min_agreement, bool) or not isinstance(
        min_agreement, (int, float, np.integer, np.floating)
    ):
        raise ValueError(f"min_agreement must be a number in [-1, 1], got {min_agreement!r}")
    if not -1.0 <= float(min_agreement) <= 1.0:
        raise ValueError(f"min_agreement must lie in [-1, 1], got {min_agreement}")
    if isinstance(min_rows, bool) or not isinstance(min_rows, (int, np.integer)) or min_rows < 1:
        raise ValueError(f"min_rows must be an integer >= 1, got {min_rows!r}")

    n_nodes = forest.n_nodes
    sur_feature = np.full(n_nodes, -1, dtype=np.int32)
    sur_threshold = np.zeros(n_nodes)
    sur_left_le = np.ones(n_nodes, dtype=bool)
    sur_agreement = np.zeros(n_nodes)

    is_shared = np.zeros(len(names) + 1, dtype=bool)  # trailing entry: leaves (-1)
    is_shared[[names.index(f) for f in shared]] = True
    internal = forest.feature >= 0
    needs = internal & ~is_shared[forest.feature]
    candidates = np.array(sorted(names.index(f) for f in set(shared)), dtype=np.int64)
    if not needs.any() or candidates.size == 0:
        return forest.with_surrogates(sur_feature, sur_threshold, sur_left_le, sur_agreement)

    Xg, present = to_global_matrix(X, names, forest.categories)
    used = np.unique(forest.feature[internal])
    lacking = [names[j] for j in np.union1d(used, candidates) if not present[j]]
    if lacking:
        raise ValueError(
            f"X lacks columns {lacking}: surrogate search needs every feature the trees split "
            "on and every shared feature"
        )

    best_adj = np.full(n_nodes, -np.inf)
    for node, row, left in node_row_pairs(forest, Xg, needs):
        if node.size == 0:
            continue
        node_ids, cnode = np.unique(node, return_inverse=True)
        for j in candidates:
            cnodes_j, adj, thr, le = _best_split_per_node(cnode, row, left, Xg[:, j], min_rows)
            nodes_j = node_ids[cnodes_j]
            better = adj > best_adj[nodes_j]  # strict: lower feature index wins ties
            upd = nodes_j[better]
            best_adj[upd] = adj[better]
            sur_feature[upd] = j
            sur_threshold[upd] = thr[better]
            sur_left_le[upd] = le[better]

    keep = np.isfinite(best_adj) & (best_adj >= min_agreement)
    sur_feature[~keep] = -1
    sur_threshold[~keep] = 0.0
    sur_left_le[~keep] = True
    sur_agreement[keep] = best_adj[keep]
    logger.info(
        "surrogate splits: %d of %d nodes on non-shared features got one (min_agreement=%g)",
        int(keep.sum()),
        int(needs.sum()),
        min_agreement,
    )
    return forest.with_surrogates(sur_feature, sur_threshold, sur_left_le, sur_agreement)


def node_row_pairs(
    forest: PooledForest, Xg: np.ndarray, needs: np.ndarray
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(node, row, primary goes left) for every row of ``Xg`` reaching a node in ``needs``.

    Rows are routed from the roots as the surrogate search routes them
    (:func:`~fedforest.model.traversal.traverse` by chunks of trees, so all the
    rows reaching a node come in one chunk): ``x <= threshold`` goes left; a
    row missing the primary feature at a node is not recorded there, and
    follows the learned direction if the node saw missing values in training,
    else stops (``DISCARD``).

    Parameters
    ----------
    forest : PooledForest
    Xg : ndarray of shape (n_rows, n_features)
        The rows at the forest's global feature positions (NaN: missing).
    needs : ndarray of bool, shape (n_nodes,)
        The nodes to record.

    Yields
    ------
    node, row : ndarray of int64
    left : ndarray of bool
        One triple per chunk of trees (possibly empty), pairs in level order.
    """
    walk = traverse(
        CompiledForest.build(forest), Xg, np.arange(forest.n_trees), by="trees", resolve=DISCARD
    )
    for chunk in walk:
        out_node, out_row, out_left = [], [], []
        for level in chunk:
            split = level.split
            node = level.node[split]
            rec = needs[node] & ~np.isnan(level.x)
            out_node.append(node[rec])
            out_row.append(level.row[split][rec])
            out_left.append(~level.above[rec])  # x <= threshold
        if not out_node:
            empty = np.zeros(0, dtype=np.int64)
            yield empty, empty, np.zeros(0, dtype=bool)
            continue
        yield np.concatenate(out_node), np.concatenate(out_row), np.concatenate(out_left)


def _best_split_per_node(
    node: np.ndarray, row: np.ndarray, left: np.ndarray, xcol: np.ndarray, min_rows: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Best surrogate split on one candidate feature for every node in ``node``.

    Parameters
    ----------
    node, row, left : ndarray of shape (n_pairs,)
        Compact node id (small non-negative ints), row, primary goes left.
    xcol : ndarray of shape (n_rows,)
        The candidate feature's values (NaN: missing).
    min_rows : int

    Returns
    -------
    nodes : ndarray of int
        Nodes (compact ids) with at least one admissible split.
    adj : ndarray of float
        Best adjusted agreement of each.
    threshold : ndarray of float
        Its threshold (the lowest among equally good ones).
    left_le : ndarray of bool
        Its orientation (``True``: ``x <= threshold`` goes left).
    """
    empty = (np.zeros(0, np.int64), np.zeros(0), np.zeros(0), np.zeros(0, bool))
    observed = ~np.isnan(xcol)
    values = np.unique(xcol[observed]).astype(np.float64)
    if values.size < 2:
        return empty
    # dense rank of every row's value: sorting (node, rank) keys as one int64 is much
    # faster than a lexsort on (node, float value)
    row_rank = np.full(xcol.shape[0], -1, dtype=np.int64)
    row_rank[observed] = np.searchsorted(values, xcol[observed].astype(np.float64))
    rank = row_rank[row]
    ok = rank >= 0
    node, rank, left = node[ok], rank[ok], left[ok]
    if node.size == 0:
        return empty
    order = np.argsort(node.astype(np.int64) * values.size + rank)
    node, rank, left = node[order], rank[order], left[order].astype(np.int64)
    n = node.size

    new_group = np.empty(n, dtype=bool)
    new_group[0] = True
    np.not_equal(node[1:], node[:-1], out=new_group[1:])
    starts = np.flatnonzero(new_group)
    group = np.cumsum(new_group) - 1
    n_total = np.diff(np.append(starts, n))
    n_left = np.add.reduceat(left, starts)
    n_right = n_total - n_left
    n_maj = np.maximum(n_left, n_right)
    denom = n_total - n_maj
    usable = (n_total >= min_rows) & (denom > 0)

    # boundaries: position i with a larger value at i + 1 in the same node group
    b = np.flatnonzero((rank[1:] > rank[:-1]) & ~new_group[1:])
    gb = group[b]
    keep = usable[gb]
    b, gb = b[keep], gb[keep]
    if b.size == 0:
        return empty
    cum_left = np.cumsum(left)
    before = cum_left[starts] - left[starts]  # primary-left count before each group
    cl = cum_left[b] - before[gb]  # primary-left rows with x <= t
    k = b - starts[gb] + 1  # rows with x <= t
    agree_le = 2 * cl - k + n_right[gb]  # "x <= t goes left"
    agree_gt = n_total[gb] - agree_le  # "x <= t goes right"
    le = agree_le >= agree_gt
    n_surr = np.where(le, agree_le, agree_gt)
    adj = (n_surr - n_maj[gb]) / denom[gb]
    lo, hi = values[rank[b]], values[rank[b + 1]]
    thr = lo / 2.0 + hi / 2.0  # scikit-learn's midpoint
    thr = np.where((thr == hi) | ~np.isfinite(thr), lo, thr)

    # segmented maximum over each node's boundaries, first (lowest threshold) on ties
    seg_start = np.flatnonzero(np.r_[True, gb[1:] != gb[:-1]])
    seg_max = np.maximum.reduceat(adj, seg_start)
    seg_len = np.diff(np.append(seg_start, b.size))
    is_max = adj == np.repeat(seg_max, seg_len)
    cand = np.flatnonzero(is_max)
    _, first = np.unique(gb[cand], return_index=True)
    pick = cand[first]
    return node[b[pick]], adj[pick], thr[pick], le[pick]
