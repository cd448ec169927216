"""Vectorised traversal of flattened trees.

All (row, tree) pairs move down their trees together, one level per step, as
numpy arrays: gather the node's feature, gather the row's value, compare,
gather the child. Pairs that reach a leaf leave the active set. No Python code
runs per row or per tree.

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
sums leaves, the order in which :func:`route_leaves` asks its resolver (and so
draws random numbers), and :func:`sigmoid` are what the kernels reproduce.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..model.forest import PooledForest

#: Pairs processed at once; bounds memory (about 100 bytes per pair).
MAX_PAIRS = 1 << 17

#: Resolver decisions. ``STOP`` ends the walk at the node itself, which then
#: counts as the pair's leaf (its ``value`` / ``vote`` row is the tree's prediction).
LEFT, RIGHT, DISCARD, STOP = 0, 1, 2, 3

Resolver = Callable[[np.ndarray, np.ndarray], np.ndarray]

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
    k = np.rint(xm * EXP_INV_LN2)
    hi = xm - k * EXP_LN2_HI
    lo = k * EXP_LN2_LO
    r = hi - lo
    t = r * r
    c = r - t * (EXP_P1 + t * (EXP_P2 + t * (EXP_P3 + t * (EXP_P4 + t * EXP_P5))))
    y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
    e = 1.0 / (1.0 + np.ldexp(y, k.astype(np.int32)))  # ldexp is exact: a normal number here
    if xm is x:
        return e
    out[mid] = e
    return out


@dataclass
class CompiledForest:
    """Flat arrays of a :class:`PooledForest`, laid out for traversal."""

    feature: np.ndarray  # int64, -1 at leaves
    threshold: np.ndarray  # float64
    children: np.ndarray  # int64 (2 * n_nodes,): [2n] left, [2n+1] right
    saw_missing: np.ndarray  # bool
    missing_right: np.ndarray  # int64 0/1
    depth: np.ndarray  # int32
    right_fraction: np.ndarray  # float64 N_right / N_node
    roots: np.ndarray  # int64 root node per tree
    value: np.ndarray  # (n_nodes, n_classes) float64
    vote: np.ndarray  # (n_nodes, n_classes) one-hot of argmax(value)

    @classmethod
    def build(cls, forest: PooledForest) -> CompiledForest:
        left, right = forest.global_children
        internal = forest.feature >= 0
        children = np.empty(2 * forest.n_nodes, dtype=np.int64)
        children[0::2] = np.where(internal, left, 0)
        children[1::2] = np.where(internal, right, 0)
        n = forest.n_node_samples.astype(np.float64)
        n_right = np.where(internal, n[np.where(internal, right, 0)], 0.0)
        vote = np.zeros_like(forest.value)
        if forest.n_nodes:
            vote[np.arange(forest.n_nodes), forest.value.argmax(axis=1)] = 1.0
        return cls(
            feature=forest.feature.astype(np.int64),
            threshold=forest.threshold,
            children=children,
            saw_missing=forest.saw_missing,
            missing_right=(~forest.missing_left).astype(np.int64),
            depth=forest.node_depth,
            # in [0, 1] even if a child claims more rows than its parent (readers refuse that)
            right_fraction=np.clip(np.where(internal, n_right / np.maximum(n, 1.0), 0.5), 0, 1),
            roots=forest.tree_start[:-1].astype(np.int64),
            value=forest.value,
            vote=vote,
        )


def row_chunks(n_rows: int, n_trees: int, max_pairs: int | None = None):
    """Row ranges ``(lo, hi)`` holding at most ``max_pairs`` (tree, row) pairs each.

    Random draws are made chunk after chunk, so both engines use these chunks.
    """
    step = max(1, (max_pairs or MAX_PAIRS) // max(n_trees, 1))
    for start in range(0, n_rows, step):
        yield start, min(n_rows, start + step)


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
        does (the learned default direction).

    Returns
    -------
    ndarray of shape (len(trees), n_rows), int64
        Global index of the node where the pair ended: a leaf, or, for a pair
        the resolver stopped (``node``), that internal node; ``-1`` where the
        tree was discarded for the row.
    """
    n_rows = X.shape[0]
    out = np.empty((len(trees), n_rows), dtype=np.int64)
    for lo, hi in row_chunks(n_rows, len(trees)):
        out[:, lo:hi] = _route_chunk(cf, X[lo:hi], trees, resolve, lo)
    return out


def _route_chunk(cf, X, trees, resolve, row_offset):
    n_rows, n_feat = X.shape
    flat = X.reshape(-1)
    n_pairs = len(trees) * n_rows
    result = np.full(n_pairs, -1, dtype=np.int64)
    node = np.repeat(cf.roots[trees], n_rows)
    rowbase = np.tile(np.arange(n_rows, dtype=np.int64) * n_feat, len(trees))
    pid = np.arange(n_pairs, dtype=np.int64)
    feature, children = cf.feature, cf.children
    while node.size:
        f = feature[node]
        leaf = f < 0
        if leaf.any():
            result[pid[leaf]] = node[leaf]
            keep = ~leaf
            node, rowbase, pid, f = node[keep], rowbase[keep], pid[keep], f[keep]
            if not node.size:
                break
        x = flat[rowbase + f]
        go = x > cf.threshold[node]
        step = 2 * node + go
        missing = np.isnan(x)
        if missing.any():
            idx = np.flatnonzero(missing)
            mnode = node[idx]
            seen = cf.saw_missing[mnode]
            if resolve is None:
                seen[:] = True
            if seen.any():
                s = idx[seen]
                step[s] = 2 * node[s] + cf.missing_right[node[s]]
            if not seen.all():
                u = idx[~seen]
                decision = resolve(node[u], rowbase[u] // n_feat + row_offset)
                stop = decision == STOP
                if stop.any():  # the node itself is the pair's result, as a leaf would be
                    result[pid[u[stop]]] = node[u[stop]]
                drop = stop | (decision == DISCARD)
                step[u] = 2 * node[u] + (decision == RIGHT)
                if drop.any():
                    keep = np.ones(node.size, dtype=bool)
                    keep[u[drop]] = False
                    step, rowbase, pid = step[keep], rowbase[keep], pid[keep]
        node = children[step]
    return result.reshape(len(trees), n_rows)


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
    ``right_probability(nodes, rows)`` and its complement.

    Parameters
    ----------
    absent : ndarray of bool, shape (n_features,), optional
        Columns missing for every row; nodes on them are known to branch
        without looking at the row, which saves work.

    Returns
    -------
    ndarray of shape (len(trees), n_rows, n_classes)
    """
    n_rows, n_feat = X.shape
    internal = cf.feature >= 0
    kind = cf.feature.astype(np.int32)
    check_nan = True
    if absent is not None and absent.any():
        on_absent = internal & absent[np.where(internal, cf.feature, 0)]
        kind[on_absent & ~cf.saw_missing] = -2
        # NaN checks are needed only for NaN values in present columns and for
        # absent-column nodes that learned a direction for missing values
        check_nan = bool(np.isnan(X[:, ~absent]).any() or (on_absent & cf.saw_missing).any())
    children = cf.children.astype(np.int32)
    out = np.empty((len(trees), n_rows, cf.value.shape[1]))
    for lo, hi in row_chunks(n_rows, len(trees), MAX_PAIRS // 2):
        out[:, lo:hi] = _marginal_chunk(
            cf, kind, children, X, lo, hi, trees, right_probability, check_nan
        )
    return out


def _marginal_chunk(cf, kind, children, X, lo, hi, trees, right_probability, check_nan):
    n_feat = X.shape[1]
    flat = X.reshape(-1)
    m = hi - lo
    n_pairs = len(trees) * m
    n_classes = cf.value.shape[1]
    node = np.repeat(cf.roots[trees].astype(np.int32), m)
    rows = np.tile(np.arange(lo, hi, dtype=np.int64), len(trees))
    pid = np.arange(n_pairs, dtype=np.int32)
    weight = np.ones(n_pairs)
    leaf_pid, leaf_node, leaf_w = [], [], []
    threshold = cf.threshold
    while node.size:
        k = kind[node]
        leaf = np.flatnonzero(k == -1)
        if leaf.size:
            leaf_pid.append(pid[leaf])
            leaf_node.append(node[leaf])
            leaf_w.append(weight[leaf])
        reg = np.flatnonzero(k >= 0)
        br = np.flatnonzero(k == -2)
        nr = node[reg]
        x = flat[rows[reg] * n_feat + k[reg]]
        step = 2 * nr + (x > threshold[nr])
        if check_nan:
            miss = np.flatnonzero(np.isnan(x))
            if miss.size:
                seen = cf.saw_missing[nr[miss]]
                s = miss[seen]
                step[s] = 2 * nr[s] + cf.missing_right[nr[s]]
                # unresolvable: branch like an absent column
                br = np.concatenate([br, reg[miss[~seen]]])
                keep = np.ones(reg.size, dtype=bool)
                keep[miss[~seen]] = False
                reg, step = reg[keep], step[keep]
        nb = node[br]
        rb = rows[br]
        p = right_probability(nb.astype(np.int64), rb)
        wb = weight[br]
        node = np.concatenate([children[step], children[2 * nb], children[2 * nb + 1]])
        rows = np.concatenate([rows[reg], rb, rb])
        pid = np.concatenate([pid[reg], pid[br], pid[br]])
        weight = np.concatenate([weight[reg], wb * (1.0 - p), wb * p])
    pids = np.concatenate(leaf_pid)
    nodes = np.concatenate(leaf_node)
    ws = np.concatenate(leaf_w)
    out = np.empty((n_pairs, n_classes))
    for c in range(n_classes):
        out[:, c] = np.bincount(pids, weights=ws * cf.value[nodes, c], minlength=n_pairs)
    return out.reshape(len(trees), m, n_classes)


def average_leaves(
    cf: CompiledForest, leaves: np.ndarray, voting: str
) -> tuple[np.ndarray, np.ndarray]:
    """Average the kept trees' leaf distributions (or votes) per row.

    ``leaves`` is :func:`route_leaves`' result: a node where a ``node`` pair
    stopped counts exactly as a leaf, with its own ``value`` (or ``vote``) row.

    Trees are added one after the other, in order, exactly as scikit-learn
    accumulates them, so that with every tree kept the result equals
    scikit-learn's ``predict_proba`` bit for bit.

    Returns
    -------
    proba : ndarray of shape (n_rows, n_classes)
        Rows with no kept tree are all zero.
    kept : ndarray of shape (n_rows,), int
        Number of trees kept for each row.
    """
    table = cf.vote if voting == "hard" else cf.value
    n_trees, n_rows = leaves.shape
    proba = np.zeros((n_rows, table.shape[1]))
    kept_mask = leaves >= 0
    kept = kept_mask.sum(axis=0)
    all_kept = bool(kept_mask.all())
    for t in range(n_trees):
        if all_kept:
            proba += table[leaves[t]]
        else:
            ok = kept_mask[t]
            proba += table[np.where(ok, leaves[t], 0)] * ok[:, None]
    has = kept > 0
    proba[has] /= kept[has, None]
    return proba, kept
