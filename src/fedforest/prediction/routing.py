"""The numpy engine: leaf routing and marginal routing on the one walk.

Both are :func:`fedforest.model.traversal.traverse`: all (row, tree) pairs
move down their trees together, one level per step, as numpy arrays, and no
Python code runs per row or per tree. What this module adds is what each keeps
of the walk's levels.

Pairs whose value is missing at a node that saw missing values in training
follow the learned direction. Every other missing value is handed to a
*resolver* (the strategy), which says for each such pair: go left, go right,
discard the tree for this row, or stop at this node (the node's own class
distribution is the tree's prediction, as a leaf's would be; ``node``).
:func:`route_marginal` instead follows both children with weights (marginal
prediction).

:mod:`.numba_kernels` holds the compiled twin of these traversals; both give
the same results bit for bit (``docs/architecture.md``, "Engines with the same
semantics"). Keep them in step: the order in which :func:`route_marginal`
sums leaves (left to right), the resolver's rules and :func:`sigmoid` are
what the kernels reproduce. A resolver's draws are pure functions of the
seed, the pair's tree and depth and the row's values (:mod:`.draws`), so the
order and the chunks in which it is asked change nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..model.traversal import BRANCH, CompiledForest, Resolver, node_kinds, traverse

# exp as in fdlibm's e_exp.c (error below 1 ulp), for :func:`sigmoid`
EXP_LN2_HI = 6.93147180369123816490e-01
EXP_LN2_LO = 1.90821492927058770002e-10
EXP_INV_LN2 = 1.44269504088896338700e00
EXP_P1 = 1.66666666666666019037e-01
EXP_P2 = -2.77777777770155933842e-03
EXP_P3 = 6.61375632143793436117e-05
EXP_P4 = -1.65339022054652515390e-06
EXP_P5 = 4.13813679705723846039e-08
#: exp(x) overflows to inf above this.
EXP_OVERFLOW = 7.09782712893383973096e02
#: Below this, 1 + exp(x) rounds to 1 (exp(-40) < 2**-57).
EXP_NEGLIGIBLE = -40.0
#: Largest ``|a|`` whose ``exp(a)`` is a factor of :func:`factored_right`: the product of
#: two factors stays within [exp(-128), exp(128)], far from overflow, and the
#: exponent's rounding error (about ``|a|`` ulps of 1) stays near 1e-14.
FACTOR_LIMIT = 64.0
#: Values :func:`sigmoid` works on at once.
_SIGMOID_CHUNK = 8192


def sigmoid(z: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-z))`` computed with basic arithmetic only.

    numpy's ``exp`` is dispatched at run time to SIMD code (Intel's SVML on
    AVX-512 processors) that can differ from the C library's in the last bit,
    so the exponential here is fdlibm's algorithm written out in additions,
    multiplications, divisions, ``rint`` and ``ldexp``, each exactly rounded.
    The compiled engine (:mod:`.numba_kernels`) runs the same operations on
    scalars, so both engines, on every processor, get the same bits. The
    error is below 1 ulp of exp.

    Parameters
    ----------
    z : ndarray of float64

    Returns
    -------
    ndarray of float64
        In [0, 1]; NaN where ``z`` is NaN.
    """
    z = np.asarray(z, dtype=np.float64)
    out = np.empty(z.shape)
    flat, flat_out = z.reshape(-1), out.reshape(-1)
    # in pieces: a dozen temporaries that stay in cache (and below malloc's mmap threshold)
    for lo in range(0, flat.size, _SIGMOID_CHUNK):
        flat_out[lo : lo + _SIGMOID_CHUNK] = _sigmoid_piece(flat[lo : lo + _SIGMOID_CHUNK])
    return out


def _sigmoid_piece(z: np.ndarray) -> np.ndarray:
    x = -z
    out = np.where(x > EXP_OVERFLOW, 0.0, 1.0)  # exp(x) = inf; exp(x) negligible
    out[np.isnan(x)] = np.nan
    mid = (x >= EXP_NEGLIGIBLE) & (x <= EXP_OVERFLOW)
    if mid.all():
        xm = x
    elif mid.any():
        xm = x[mid]
    else:
        return out
    e = 1.0 / (1.0 + _exp(xm))
    if xm is x:
        return e
    out[mid] = e
    return out


def _exp(x: np.ndarray) -> np.ndarray:
    """fdlibm's exp of ``x`` in [-40, 709.78] (a normal number), in basic arithmetic."""
    k = np.rint(x * EXP_INV_LN2)
    hi = x - k * EXP_LN2_HI
    lo = k * EXP_LN2_LO
    r = hi - lo
    t = r * r
    c = r - t * (EXP_P1 + t * (EXP_P2 + t * (EXP_P3 + t * (EXP_P4 + t * EXP_P5))))
    y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
    return np.ldexp(y, k.astype(np.int32))  # ldexp is exact: a normal number here


def exp_factor(a: np.ndarray) -> np.ndarray:
    """``exp(a)`` where ``|a| <= FACTOR_LIMIT``, NaN elsewhere (and where ``a`` is NaN).

    One of the two factors of :func:`factored_right`; :func:`_exp`'s arithmetic
    (below 1 ulp), which is exact to reproduce in the compiled engine.
    """
    a = np.asarray(a, dtype=np.float64)
    out = np.full(a.shape, np.nan)
    ok = np.abs(a) <= FACTOR_LIMIT  # False for NaN and inf
    out[ok] = _exp(a[ok])
    return out


def factored_right(row_factor: np.ndarray, node_factor: np.ndarray) -> np.ndarray:
    """``1 / (1 + row_factor * node_factor)``: NaN where either factor is NaN.

    With ``row_factor = exp(-(x_hat - c) / sigma)`` and ``node_factor =
    exp((t - c) / sigma)`` this is ``sigmoid((x_hat - t) / sigma)``, the
    ``ipr`` and ``mp`` probability of going right, at the price of one
    multiplication, one addition and one division per (row, node): the
    exponentials are taken once per row and feature and once per node.
    """
    return 1.0 / (1.0 + row_factor * node_factor)


def route_leaves(
    cf: CompiledForest, X: np.ndarray, trees: np.ndarray, resolve: Resolver | None
) -> np.ndarray:
    """Leaf reached by every (tree, row) pair.

    Parameters
    ----------
    cf : CompiledForest
    X : ndarray of shape (n_rows, n_features), float32
        Global matrix; NaN means unavailable.
    trees : ndarray of int
        The trees to traverse.
    resolve : callable or None
        ``resolve(nodes, rows) -> decisions`` for pairs at a node whose feature
        is missing for the row and which saw no missing value in training;
        decisions are ``LEFT``, ``RIGHT``, ``DISCARD`` or ``STOP`` (the pair
        ends at this node). ``None`` sends such pairs the way scikit-learn
        does (the learned default direction). It is called once per depth of
        each :func:`~fedforest.model.traversal.row_chunks` chunk; its
        decision for a pair must depend on that pair alone.

    Returns
    -------
    ndarray of shape (len(trees), n_rows), int64
        Global index of the node where the pair ended: a leaf, or, for a pair
        the resolver stopped (``node``), that internal node; ``-1`` where the
        tree was discarded for the row.
    """
    n_rows = X.shape[0]
    out = np.empty((len(trees), n_rows), dtype=np.int64)
    for chunk in traverse(cf, X, trees, resolve=resolve):
        result = np.full(chunk.n_pairs, -1, dtype=np.int64)
        for level in chunk:
            ended = level.ended
            result[level.pair[ended]] = level.node[ended]
        out[:, chunk.lo : chunk.hi] = result.reshape(len(trees), -1)
    return out


def route_marginal(
    cf: CompiledForest,
    X: np.ndarray,
    trees: np.ndarray,
    right_probability: Callable[[np.ndarray, np.ndarray], np.ndarray],
    absent: np.ndarray | None = None,
) -> np.ndarray:
    """Class distribution of every (tree, row) pair under marginal prediction.

    At a node whose feature is missing for the row (and which saw no missing
    value in training) both children are followed, weighted by
    ``right_probability(nodes, rows)`` and its complement: a child's weight
    is its parent's times ``1 - p`` (left) or ``p`` (right). A pair's leaves
    are summed in its tree's left-to-right order
    (:attr:`~fedforest.model.traversal.CompiledForest.order`), starting from
    0, whatever the order in which the walk reaches them.

    Parameters
    ----------
    absent : ndarray of bool, shape (n_features,), optional
        Columns missing for every row; nodes on them are known to branch
        without looking at the row, which saves work.

    Returns
    -------
    ndarray of shape (len(trees), n_rows, n_classes)
    """
    n_rows = X.shape[0]
    kind = node_kinds(cf, absent)
    check_nan = True
    if absent is not None and absent.any():
        internal = cf.feature >= 0
        on_absent = internal & absent[np.where(internal, cf.feature, 0)]
        # NaN checks are needed only for NaN values in present columns and for
        # absent-column nodes that learned a direction for missing values
        check_nan = bool(np.isnan(X[:, ~absent]).any() or (on_absent & cf.saw_missing).any())
    n_classes = cf.value.shape[1]
    out = np.empty((len(trees), n_rows, n_classes))
    walk = traverse(
        cf,
        X,
        trees,
        resolve=BRANCH,
        right_probability=right_probability,
        kind=kind,
        weight=1.0,
        check_nan=check_nan,
    )
    for chunk in walk:
        pair, node, weight = [], [], []
        for level in chunk:
            ended = level.ended
            pair.append(level.pair[ended])
            node.append(level.node[ended])
            weight.append(level.weight[ended])
        pairs, nodes, weights = np.concatenate(pair), np.concatenate(node), np.concatenate(weight)
        # each pair's leaves in its tree's left-to-right order (the kernels' depth-first walk)
        by_leaf = _leaf_order(pairs, cf.order[nodes], chunk.n_pairs, cf.order.size)
        pairs, nodes, weights = pairs[by_leaf], nodes[by_leaf], weights[by_leaf]
        dist = np.empty((chunk.n_pairs, n_classes))
        for c in range(n_classes):
            dist[:, c] = np.bincount(
                pairs, weights=weights * cf.value[nodes, c], minlength=chunk.n_pairs
            )
        out[:, chunk.lo : chunk.hi] = dist.reshape(len(trees), -1, n_classes)
    return out


def _leaf_order(pairs, order, n_pairs: int, n_nodes: int) -> np.ndarray:
    """Indices that sort (pair, order) entries by pair, then order (each pair unique).

    One integer key sorts several times faster than ``np.lexsort`` on two.
    """
    if n_pairs * max(n_nodes, 1) < 2**62:
        return np.argsort(pairs.astype(np.int64) * n_nodes + order)
    return np.lexsort((order, pairs))  # pragma: no cover - beyond 2**62 (pair, node) keys


def average_leaves(
    cf: CompiledForest, leaves: np.ndarray, voting: str, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Average the kept trees' leaf distributions (or votes) per row.

    ``leaves`` is :func:`route_leaves`' result: a node where a ``node`` pair
    stopped counts exactly as a leaf, with its own ``value`` (or ``vote``) row.

    Trees are added one after the other, in order, exactly as scikit-learn
    accumulates them, so that with every tree kept the result equals
    scikit-learn's ``predict_proba`` bit for bit. With ``weights`` (one per
    tree of ``leaves``; pooling weights) a row's kept trees are averaged with
    these weights instead.

    Returns
    -------
    proba : ndarray of shape (n_rows, n_classes)
        Rows with no kept tree are all zero.
    kept : ndarray of shape (n_rows,), int
        Number of trees kept for each row.
    """
    table = cf.vote if voting == "hard" else cf.value
    if weights is not None:
        return _weighted_average(table, leaves, np.asarray(weights, dtype=np.float64))
    n_trees, n_rows = leaves.shape
    proba = np.zeros((n_rows, table.shape[1]))
    kept_mask = leaves >= 0
    kept = kept_mask.sum(axis=0)
    all_kept = bool(kept_mask.all())
    for t in range(n_trees):
        if all_kept:
            proba += table[leaves[t]]
            continue
        # only the rows that keep the tree gather its leaves (a discarded tree adds nothing:
        # fpv and pr discard most trees of most rows, and survival leaves are wide)
        rows = np.flatnonzero(kept_mask[t])
        if rows.size == n_rows:
            proba += table[leaves[t]]
        elif rows.size:
            proba[rows] += table[leaves[t, rows]]
    has = kept > 0
    proba[has] /= kept[has, None]
    return proba, kept


def _weighted_average(table: np.ndarray, leaves: np.ndarray, weights: np.ndarray):
    """:func:`average_leaves` with one weight per tree (rows without weight are zero)."""
    n_trees, n_rows = leaves.shape
    proba = np.zeros((n_rows, table.shape[1]))
    total = np.zeros(n_rows)
    kept_mask = leaves >= 0
    for t in range(n_trees):
        rows = np.flatnonzero(kept_mask[t])
        if rows.size:
            proba[rows] += table[leaves[t, rows]] * weights[t]
            total[rows] += weights[t]
    has = total > 0
    proba[has] /= total[has, None]
    return proba, kept_mask.sum(axis=0)
