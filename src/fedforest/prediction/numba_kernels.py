"""The dynamic traversals compiled with numba: the twin of :mod:`.routing`.

:mod:`.routing` moves all (tree, row) pairs down their trees together, as
numpy arrays. The kernels here walk each pair on its own in machine code,
with explicit buffers (no recursion), and give the same results bit for bit
(``docs/architecture.md``, "Engines with the same semantics"):

* **marginal prediction** (:func:`marginal_proba`; ``mp``, and the rows every
  tree discarded). A pair is walked depth first, the left child before the
  right one, so its leaves are summed in the tree's left-to-right order
  (:attr:`~fedforest.model.traversal.CompiledForest.order`, the order
  :func:`.routing.route_marginal` sorts them into); a node routes the row
  (learned direction, or ``x <= t``) or branches (absent column, or a NaN the
  node never saw), a child's weight being its parent's times ``1 - p`` or
  ``p``. Trees are summed one after the other and divided by their number, as
  the classifier does with the numpy engine's per-tree distributions.
* **resolved routing** (:func:`route_leaves`; rows with NaN in columns the
  site has, strategies off the compiled path, and the strategies whose
  compiled trees would split on columns of draws). Each pair is walked from
  the root to its leaf on its own; at an unresolvable node the decision
  follows the rule's routing (:class:`fedforest.rules.routing.Routing`: the
  steps' codes, as :meth:`.strategies.Strategy.resolver` applies them) at once, its draws computed
  from the keys of :class:`.draws.Draws` with the same uint64 arithmetic
  (:func:`_mix64`, :func:`_uniform`): a draw is a function of the seed, the
  pair's tree and depth, the stream and the row's values, so no pair waits
  for another and no draw depends on the order of the walk. The ``discard``
  and ``stop`` steps draw nothing; a pair that stops ends at its
  unresolvable node, which is written to the result as a leaf would be.
* **probabilities** follow :meth:`.strategies.Strategy.right_probability`:
  ``1 / (1 + A * B)`` from the row's and the node's factor
  (:func:`.routing.factored_right`) where both exist, with
  :func:`.routing.sigmoid`'s arithmetic elsewhere.

The kernels go tree after tree over blocks of rows (a tree's nodes stay in
cache) and run without the GIL, on up to :data:`MAX_THREADS` threads, which
split the rows. Every row or pair is computed whole by one thread, so the
result does not depend on the number of threads. These are
Python threads, not numba's ``parallel=True``: its threading layers are not
thread-safe (workqueue) or not fork-safe (GNU OpenMP), and fedforest predicts
in threads (swarm mode) and in forked processes (the experiment runner).

The two hot loops, :func:`_marginal_rows` and :func:`_route_rows`, are
written out flat, each node's step and ``p_R`` in the loop itself, with the
forest's and the tables' arrays read into locals before it. A helper that
takes the node layout or the tables (tuples of arrays) costs a call with
reference counting at every branching node: factoring the loops into such
helpers, even with ``inline="always"``, made ``mp`` 17x and ``pr`` 19x slower
(``benchmarks/bench_inference.py``). They are the only functions of
``prediction/`` allowed above the complexity limit of the architecture test.

This module imports numba; :func:`fedforest.prediction.classifier.load_kernels`
imports it only when asked to. The kernels read the node layout
:class:`~fedforest.model.traversal.CompiledForest` as it is (one dtype per
field); the other arrays are cast to one dtype each before every call, so each
kernel is compiled once (and cached on disk).
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
from numba import config as numba_config
from numba import njit

from ..model.traversal import LEAF_KIND, LEFT, RIGHT, CompiledForest, node_kinds
from ..rules import routing as steps
from .draws import IPR_STREAM, MIX_1, MIX_2, PR_STREAM, UNIFORM_SCALE, UNIFORM_SHIFT
from .kernel_cache import install as install_kernel_cache
from .routing import (
    EXP_INV_LN2,
    EXP_LN2_HI,
    EXP_LN2_LO,
    EXP_NEGLIGIBLE,
    EXP_OVERFLOW,
    EXP_P1,
    EXP_P2,
    EXP_P3,
    EXP_P4,
    EXP_P5,
)

logger = logging.getLogger(__name__)

#: Whether the compiled kernels are kept on disk, in a folder per machine and
#: release (:mod:`.kernel_cache`); ``False``: compiled in memory by each process.
DISK_CACHE = install_kernel_cache()

#: Most threads a prediction call uses (``None``: every core this process may use,
#: at most ``NUMBA_NUM_THREADS`` when that is set).
MAX_THREADS: int | None = None

#: Fewest (row, tree) pairs per thread worth starting a thread for.
MIN_PAIRS_PER_THREAD = 4096

#: Rows that go through one tree before the next (their values stay in cache).
ROW_BLOCK = 1024

# The routing steps' codes (fedforest.rules.routing.CODES), constants of the compiled kernels.
_NO_STEP = steps.NO_STEP
_IMPUTED_VALUE, _IMPUTED_DRAW = steps.IMPUTED_VALUE.code, steps.IMPUTED_DRAW.code
_SURROGATE = steps.SURROGATE.code
_DISCARD, _STOP = steps.DISCARD.code, steps.STOP.code
_NO_KEYS = np.zeros(0, dtype=np.uint64)
_NO_START = np.zeros(0, dtype=np.int64)
# the constants of .draws, as the kernels read them
_MIX_1, _MIX_2 = np.uint64(MIX_1), np.uint64(MIX_2)
_UNIFORM_SHIFT, _UNIFORM_SCALE = np.uint64(UNIFORM_SHIFT), float(UNIFORM_SCALE)
#: 2**j for j in [-60, 1023], at index j + 60: exact powers of two, so that
#: ``y * _POW2[k + 59] * 2.0`` equals ``ldexp(y, k)`` whenever that is a normal number.
_POW2 = np.ldexp(1.0, np.arange(-60, 1024))


class Probabilities(NamedTuple):
    """:meth:`.strategies.Strategy.kernel_tables`, in the kernels' dtypes."""

    node_kind: np.ndarray  # int64 per node: 0 no imputer, 1 numeric, 2 categorical
    inv_sigma: np.ndarray  # float64 per feature
    imputed: np.ndarray  # float32 (n_rows, n_features)
    cdf: np.ndarray  # float64 (n_rows, levels of all categorical features)
    cdf_start: np.ndarray  # int64 per feature
    n_levels: np.ndarray  # int64 per feature
    row_factor: np.ndarray  # float64 (n_rows, numeric features with an imputer)
    node_column: np.ndarray  # int64 per node: the column of row_factor of its feature (0: none)
    node_factor: np.ndarray  # float64 per node (NaN: none)


# ----------------------------------------------------------------- scalars
# Hot loops call only functions of scalars: a call that passes arrays costs
# reference counting on every call. error_model="numpy": floating-point
# arithmetic as numpy does it (no Python ZeroDivisionError checks).
@njit(cache=DISK_CACHE, nogil=True, error_model="numpy")
def _sigmoid(z):
    """:func:`.routing.sigmoid` of one value, with the same operations."""
    x = -z
    if np.isnan(x):
        return np.nan
    if x > EXP_OVERFLOW:
        return 0.0
    if x < EXP_NEGLIGIBLE:
        return 1.0
    k = np.rint(x * EXP_INV_LN2)
    hi = x - k * EXP_LN2_HI
    lo = k * EXP_LN2_LO
    r = hi - lo
    t = r * r
    c = r - t * (EXP_P1 + t * (EXP_P2 + t * (EXP_P3 + t * (EXP_P4 + t * EXP_P5))))
    y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
    # ldexp(y, k): k is in [-58, 1024] here, so both products are exact
    return 1.0 / (1.0 + (y * _POW2[int(k) + 59]) * 2.0)


@njit(cache=DISK_CACHE, nogil=True, error_model="numpy")
def _numeric_right(node, row, fraction, nodes, probs):
    """p_R = sigmoid((x_hat - t) / sigma) (``Strategy._sigmoid``), N_right / N_node if NaN.

    As the product of the row's and the node's factor where both exist
    (:func:`.routing.factored_right`; a number in (0, 1), which clipping
    leaves as it is), directly otherwise.
    """
    q = 1.0 / (1.0 + probs.row_factor[row, probs.node_column[node]] * probs.node_factor[node])
    if not np.isnan(q):
        return q
    f = nodes.feature[node]
    inv_sigma = probs.inv_sigma[f]
    d = np.float64(probs.imputed[row, f]) - nodes.threshold[node]
    z = 0.0
    if not (inv_sigma == 0.0 or d == 0.0):  # sigma 0 or unknown; the limit when 1/sigma = inf
        z = d * inv_sigma
    q = _sigmoid(z)
    return _probability(fraction if np.isnan(q) else q, fraction)


@njit(cache=DISK_CACHE, nogil=True, error_model="numpy")
def _level_code(threshold, n_levels):
    """Last level code that goes left, clipped to the levels; -1 when none does."""
    code = int(np.floor(min(max(threshold, -1.0), np.float64(n_levels))))
    return -1 if code < 0 else min(code, n_levels - 1)


@njit(cache=DISK_CACHE, nogil=True, error_model="numpy")
def _probability(p, fraction):
    """``clip(where(isnan(p), fraction, p), 0, 1)`` as ``right_probability`` ends."""
    if np.isnan(p):
        p = fraction
    return min(max(p, 0.0), 1.0)


# ---------------------------------------------------------------- marginal
@njit(cache=DISK_CACHE, nogil=True, error_model="numpy")
def _marginal_rows(lo, hi, X, trees, kind, nodes, probs, capacity, out):
    """Mean over ``trees`` of the marginal class distributions, rows ``lo:hi`` of ``out``.

    ``kind`` is :func:`~fedforest.model.traversal.node_kinds`: -1 at leaves,
    -2 at nodes on absent columns that saw no missing value, the node's
    feature elsewhere. Each (row, tree) is walked depth first, left child
    before right (the right ones wait on a stack of ``capacity``: more than
    the deepest node's depth), so the leaves are summed in the tree's
    left-to-right order.
    """
    children = nodes.children
    threshold = nodes.threshold
    value = nodes.value
    saw_missing = nodes.saw_missing
    missing_right = nodes.missing_right
    right_fraction = nodes.right_fraction
    node_kind = probs.node_kind
    n_classes = value.shape[1]
    n_trees = trees.shape[0]
    stack = np.empty(capacity, dtype=np.int64)
    stack_weight = np.empty(capacity, dtype=np.float64)
    tree_sum = np.empty(n_classes, dtype=np.float64)
    for row in range(lo, hi):
        for c in range(n_classes):
            out[row, c] = 0.0
    # tree after tree (a tree's nodes stay in cache while its rows go through it);
    # each row sums the trees in order
    for ti in range(n_trees):
        root = nodes.roots[trees[ti]]
        for row in range(lo, hi):
            for c in range(n_classes):
                tree_sum[c] = 0.0
            top = 0
            node = root
            w = 1.0
            while True:
                k = kind[node]
                if k >= 0:
                    x = X[row, k]
                    if not np.isnan(x):
                        node = children[2 * node + (x > threshold[node])]
                        continue
                    if saw_missing[node]:
                        node = children[2 * node + missing_right[node]]
                        continue
                    # a NaN the node never saw: it branches, as a node on an absent column
                elif k == LEAF_KIND:
                    for c in range(n_classes):
                        tree_sum[c] += w * value[node, c]
                    if top == 0:
                        break
                    top -= 1
                    node = stack[top]
                    w = stack_weight[top]
                    continue
                # p_R (Strategy.right_probability), written out in the loop (see the module's note)
                fraction = right_fraction[node]
                pk = node_kind[node]
                if pk == 1:
                    p = _numeric_right(node, row, fraction, nodes, probs)
                elif pk == 2:
                    f = nodes.feature[node]
                    code = _level_code(threshold[node], probs.n_levels[f])
                    p_left = 0.0 if code < 0 else probs.cdf[row, probs.cdf_start[f] + code]
                    p = _probability(1.0 - p_left, fraction)
                else:
                    p = fraction
                stack[top] = children[2 * node + 1]
                stack_weight[top] = w * p
                top += 1
                node = children[2 * node]
                w = w * (1.0 - p)
            for c in range(n_classes):
                out[row, c] += tree_sum[c]
    for row in range(lo, hi):
        for c in range(n_classes):
            out[row, c] /= n_trees


def marginal_proba(
    cf: CompiledForest,
    X: np.ndarray,
    trees: np.ndarray,
    tables: dict,
    absent: np.ndarray | None = None,
) -> np.ndarray:
    """Marginal prediction averaged over ``trees``.

    The compiled twin of :func:`.routing.route_marginal` followed by summing
    the trees' distributions in order and dividing by their number.

    Parameters
    ----------
    cf : CompiledForest
    X : ndarray of shape (n_rows, n_features), float32
        Global matrix; NaN means unavailable.
    trees : ndarray of int
        The trees to average.
    tables : dict
        :meth:`.strategies.Strategy.kernel_tables` of a strategy over the
        same rows.
    absent : ndarray of bool, shape (n_features,), optional
        Columns missing for every row (as for ``route_marginal``).

    Returns
    -------
    ndarray of shape (n_rows, n_classes), float64
    """
    return _marginal(cf, X, trees, tables, absent, per_tree=False)


def marginal_per_tree(
    cf: CompiledForest,
    X: np.ndarray,
    trees: np.ndarray,
    tables: dict,
    absent: np.ndarray | None = None,
) -> np.ndarray:
    """Each tree's marginal distribution of every row, shape (len(trees), n_rows, n_classes).

    ``out[i]`` is :func:`marginal_proba` of the one tree ``trees[i]``, bit for
    bit (the same kernel, one tree at a time); the node kinds, probability
    tables and threads are set up once for all the trees rather than once a
    tree (an out-of-bag prediction needs every tree's distribution apart).
    """
    return _marginal(cf, X, trees, tables, absent, per_tree=True)


def _marginal(cf, X, trees, tables, absent, per_tree: bool) -> np.ndarray:
    """:func:`marginal_proba` (``per_tree=False``: the mean over ``trees``) or
    :func:`marginal_per_tree` (each tree's own, by the same kernel on one tree)."""
    probs = _probabilities(tables)
    X = np.ascontiguousarray(X, dtype=np.float32)
    trees = np.ascontiguousarray(trees, dtype=np.int64)
    n_rows = X.shape[0]
    kind = node_kinds(cf, absent)
    n_outputs = cf.value.shape[1]
    out = np.empty((len(trees), n_rows, n_outputs) if per_tree else (n_rows, n_outputs))
    capacity = _capacity(cf)

    def run(lo: int, hi: int) -> None:
        if not per_tree:
            _marginal_rows(lo, hi, X, trees, kind, cf, probs, capacity, out)
            return
        for i in range(len(trees)):
            _marginal_rows(lo, hi, X, trees[i : i + 1], kind, cf, probs, capacity, out[i])

    n_threads = _threads(n_rows * len(trees))
    logger.debug(
        "marginal prediction: %d rows, %d trees%s, %d threads",
        n_rows,
        len(trees),
        " (each apart)" if per_tree else "",
        n_threads,
    )
    with _Workers(n_threads) as workers:
        workers.run(run, n_rows, ROW_BLOCK)
    return out


# -------------------------------------------------------- resolved routing
@njit(cache=DISK_CACHE, nogil=True, error_model="numpy")
def _mix64(z):
    """:func:`.draws.mix64` of one uint64 (arithmetic modulo 2**64)."""
    z = (z ^ (z >> np.uint64(30))) * _MIX_1
    z = (z ^ (z >> np.uint64(27))) * _MIX_2
    return z ^ (z >> np.uint64(31))


@njit(cache=DISK_CACHE, nogil=True, error_model="numpy")
def _uniform(level_key, row_key):
    """:func:`.draws.uniforms` of one (level, row) pair."""
    return np.float64(_mix64(level_key ^ row_key) >> _UNIFORM_SHIFT) * _UNIFORM_SCALE


@njit(cache=DISK_CACHE, nogil=True, error_model="numpy")
def _route_rows(
    lo, hi, first, otherwise, depth_threshold, learned, X, trees, nodes, probs, keys, out
):
    """The node where every (tree, row) pair of rows ``lo:hi`` ends, written to ``out``.

    Tree after tree, each pair walked from the root: a missing value the node
    saw in training (or any, when ``learned``) follows the learned direction;
    another one is decided by the routing's steps, ``first`` (a step's code,
    or ``_NO_STEP``) where it can and ``otherwise`` for the rest, as
    ``Strategy.resolver`` decides, with the pair's draws computed from the
    keys (:mod:`.draws`), so a pair never waits for another. ``out`` is -1
    where the tree is discarded; a pair that stops ends at its unresolvable
    node.
    """
    feature = nodes.feature
    threshold = nodes.threshold
    children = nodes.children
    saw_missing = nodes.saw_missing
    missing_right = nodes.missing_right
    right_fraction = nodes.right_fraction
    pr_key = keys.pr
    ipr_key = keys.ipr
    row_key = keys.rows
    imputed = probs.imputed
    node_kind = probs.node_kind
    row_factor = probs.row_factor
    node_column = probs.node_column
    node_factor = probs.node_factor
    for ti in range(trees.shape[0]):
        tree = trees[ti]
        root = nodes.roots[tree]
        # the keys of the tree's levels: a node's depth is the number of steps from the root
        level = keys.start[tree] if keys.start.shape[0] else 0
        for row in range(lo, hi):
            node = root
            at = level
            while True:
                f = feature[node]
                if f < 0:
                    break
                # both children are loaded before the comparison decides (no load waits on it)
                left = children[2 * node]
                right = children[2 * node + 1]
                x = X[row, f]
                if x <= threshold[node]:
                    node = left
                    at += 1
                    continue
                if x > threshold[node]:
                    node = right
                    at += 1
                    continue
                if learned or saw_missing[node]:  # x is NaN
                    node = right if missing_right[node] else left
                    at += 1
                    continue
                # the routing's first step, where it decides
                decision = -1
                if first == _IMPUTED_VALUE:
                    v = imputed[row, f]
                    if not np.isnan(v):
                        decision = RIGHT if np.float64(v) > threshold[node] else LEFT
                elif first == _IMPUTED_DRAW:
                    if not np.isnan(imputed[row, f]):
                        # p_R written out, the factored one first (see the module's note)
                        fraction = right_fraction[node]
                        pk = node_kind[node]
                        if pk == 1:
                            p = 1.0 / (1.0 + row_factor[row, node_column[node]] * node_factor[node])
                            if np.isnan(p):
                                p = _numeric_right(node, row, fraction, nodes, probs)
                        elif pk == 2:
                            code = _level_code(threshold[node], probs.n_levels[f])
                            p_left = 0.0 if code < 0 else probs.cdf[row, probs.cdf_start[f] + code]
                            p = _probability(1.0 - p_left, fraction)
                        else:
                            p = fraction
                        decision = RIGHT if _uniform(ipr_key[at], row_key[row]) < p else LEFT
                elif first == _SURROGATE:
                    s = nodes.surrogate_feature[node]
                    if s >= 0:
                        xs = X[row, s]
                        if not np.isnan(xs):
                            below = np.float64(xs) <= nodes.surrogate_threshold[node]
                            decision = LEFT if below == nodes.surrogate_left_le[node] else RIGHT
                # the otherwise step for the rest: stop, discard, or the pr rule
                if decision < 0:
                    if otherwise == _STOP:
                        break
                    if otherwise == _DISCARD or at - level < depth_threshold:
                        node = -1
                        break
                    u = _uniform(pr_key[at], row_key[row])
                    decision = RIGHT if u < right_fraction[node] else LEFT
                node = right if decision == RIGHT else left
                at += 1
            out[ti, row] = node


class Keys(NamedTuple):
    """The keys of :class:`.draws.Draws` for the kernels (:meth:`.draws.Draws.level_table`)."""

    start: np.ndarray  # int64 per tree: where its levels start in pr and ipr
    pr: np.ndarray  # uint64 per (tree, depth): the level's key in the pr stream
    ipr: np.ndarray  # uint64 per (tree, depth): in ipr's stream
    rows: np.ndarray  # uint64 per row


def route_leaves(cf: CompiledForest, X: np.ndarray, trees: np.ndarray, rules=None) -> np.ndarray:
    """Leaf reached by every (tree, row) pair: the twin of :func:`.routing.route_leaves`.

    Parameters
    ----------
    cf : CompiledForest
    X : ndarray of shape (n_rows, n_features), float32
        Global matrix; NaN means unavailable.
    trees : ndarray of int
        The trees to traverse.
    rules : Strategy or None
        The strategy, over the same rows, whose routing decides at the
        unresolvable nodes (by its steps' codes); its :class:`~.draws.Draws`
        give the keys of the draws. ``None`` sends every missing value the
        learned direction, as scikit-learn does.

    Returns
    -------
    ndarray of shape (len(trees), n_rows), int64
        Global index of the node where the pair ended (a leaf, or the internal
        node a ``node`` pair stopped at), or ``-1`` where the tree was
        discarded for the row.
    """
    X = np.ascontiguousarray(X, dtype=np.float32)
    trees = np.ascontiguousarray(trees, dtype=np.int64)
    n_rows, n_feat = X.shape
    out = np.empty((len(trees), n_rows), dtype=np.int64)
    learned = rules is None
    first, otherwise, depth_threshold = _NO_STEP, _DISCARD, 0
    keys = Keys(_NO_START, _NO_KEYS, _NO_KEYS, _NO_KEYS)
    if not learned:
        if rules.routing is None:
            raise ValueError("a rule without a routing has no per-node resolver")
        (first, otherwise), depth_threshold = rules.routing.codes, int(rules.depth_threshold)
    if learned or not (rules.routing.draws or rules.routing.reads_imputed):
        # nothing imputed, nothing drawn
        probs = _probabilities(_no_imputation(n_rows, n_feat, cf.feature.shape[0]))
    else:
        probs = _probabilities(rules.kernel_tables())
        draws = rules.draws
        start, pr = draws.level_table(PR_STREAM)
        ipr = draws.level_table(IPR_STREAM)[1] if first == _IMPUTED_DRAW else _NO_KEYS
        keys = Keys(
            np.ascontiguousarray(start, dtype=np.int64),
            np.ascontiguousarray(pr, dtype=np.uint64),
            np.ascontiguousarray(ipr, dtype=np.uint64),
            np.ascontiguousarray(draws.row_keys, dtype=np.uint64),
        )

    def run(lo: int, hi: int) -> None:
        _route_rows(
            lo, hi, first, otherwise, depth_threshold, learned, X, trees, cf, probs, keys, out
        )

    with _Workers(_threads(n_rows * len(trees))) as workers:
        workers.run(run, n_rows, ROW_BLOCK)
    return out


# ------------------------------------------------------------------ helpers
class _Workers:
    """Run a kernel over index ranges, in this thread or in a few more.

    The kernels release the GIL. Each range is computed whole by one thread,
    so results never depend on the number of threads. A pool lives for one
    prediction call only (a pool kept across calls would not survive a fork).
    """

    def __init__(self, n_threads: int):
        self.n_threads = n_threads
        self.pool = None

    def __enter__(self) -> _Workers:
        if self.n_threads > 1:
            self.pool = ThreadPoolExecutor(max_workers=self.n_threads)
        return self

    def __exit__(self, *exc) -> None:
        if self.pool is not None:
            self.pool.shutdown()

    def run(self, kernel, n: int, step: int | None = None) -> None:
        """``kernel(j0, j1)`` over ``[0, n)`` in ranges of ``step`` (default: one per thread)."""
        if n == 0:
            return
        parts = self.n_threads if self.pool is not None else 1
        if step is None:
            parts = max(1, min(parts, n // MIN_PAIRS_PER_THREAD))
            step = -(-n // parts)
        ranges = [(j0, min(j0 + step, n)) for j0 in range(0, n, step)]
        if self.pool is None or len(ranges) == 1:
            for j0, j1 in ranges:
                kernel(j0, j1)
            return
        for job in [self.pool.submit(kernel, j0, j1) for j0, j1 in ranges]:
            job.result()


def _threads(n_pairs: int) -> int:
    """Threads for ``n_pairs`` (row, tree) pairs of marginal prediction."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        cores = os.cpu_count() or 1
    # numba's own thread setting (NUMBA_NUM_THREADS; every core by default) bounds ours too
    cores = max(1, min(cores, int(numba_config.NUMBA_NUM_THREADS)))
    limit = cores if MAX_THREADS is None else max(1, min(MAX_THREADS, cores))
    return max(1, min(limit, n_pairs // MIN_PAIRS_PER_THREAD))


def _capacity(cf: CompiledForest) -> int:
    """Stack size of the depth-first walk: more than the deepest node's depth."""
    return int(cf.depth.max()) + 2 if cf.depth.size else 2


def _probabilities(tables: dict) -> Probabilities:
    return Probabilities(
        node_kind=np.ascontiguousarray(tables["node_kind"], dtype=np.int64),
        inv_sigma=np.ascontiguousarray(tables["inv_sigma"], dtype=np.float64),
        imputed=np.ascontiguousarray(tables["imputed"], dtype=np.float32),
        cdf=np.ascontiguousarray(tables["cdf"], dtype=np.float64),
        cdf_start=np.ascontiguousarray(tables["cdf_start"], dtype=np.int64),
        n_levels=np.ascontiguousarray(tables["n_levels"], dtype=np.int64),
        row_factor=np.ascontiguousarray(tables["row_factor"], dtype=np.float64),
        node_column=np.ascontiguousarray(tables["node_column"], dtype=np.int64),
        node_factor=np.ascontiguousarray(tables["node_factor"], dtype=np.float64),
    )


def _no_imputation(n_rows: int, n_feat: int, n_nodes: int) -> dict:
    return {
        "node_kind": np.zeros(n_nodes, dtype=np.int64),
        "inv_sigma": np.zeros(n_feat, dtype=np.float64),
        "imputed": np.full((n_rows, n_feat), np.nan, dtype=np.float32),
        "cdf": np.zeros((n_rows, 0), dtype=np.float64),
        "cdf_start": np.zeros(n_feat, dtype=np.int64),
        "n_levels": np.zeros(n_feat, dtype=np.int64),
        "row_factor": np.zeros((n_rows, 0), dtype=np.float64),
        "node_column": np.zeros(n_nodes, dtype=np.int64),
        "node_factor": np.full(n_nodes, np.nan, dtype=np.float64),
    }
