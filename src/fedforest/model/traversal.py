"""Level-by-level traversal of flattened trees: the node layout and the one walk.

:class:`CompiledForest` holds a :class:`~fedforest.model.forest.PooledForest`
as flat arrays, one dtype per field; both prediction engines read it (the
numpy walk below and the numba kernels of
:mod:`fedforest.prediction.numba_kernels`, which take it as it is).

:func:`traverse` moves (tree, row) pairs down their trees together, as numpy
arrays, one depth per step: gather the node's feature, gather the row's value,
compare, gather the child. No Python code runs per row, per tree or per node.
The pairs are taken in chunks of at most :data:`MAX_PAIRS` (by rows or by
trees), and each chunk yields one :class:`Level` per depth: the pairs there,
the values they read, and which of them ended. What a caller makes of the
levels is its own business: prediction keeps the leaves reached
(:mod:`fedforest.prediction.routing`), surrogate fitting the (node, row)
pairs (:mod:`fedforest.model.surrogates`), recounting the rows and weights
that reach every node.

A pair whose value is missing at a node that saw missing values in training
follows the learned direction. Every other missing value (an *unresolvable*
pair) is decided by ``resolve``: go ``LEFT`` or ``RIGHT``, ``DISCARD`` the
pair, ``STOP`` it (it ends at this node, as at a leaf) or ``BRANCH`` (follow
both children, the pair's weight split by ``right_probability``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np

from .forest import PooledForest

#: (tree, row) pairs walked at once: bounds memory (about 100 bytes per pair).
#: A resolver decides for each pair on its own (a draw is a function of the pair,
#: :mod:`fedforest.prediction.draws`), so the chunks change no result.
MAX_PAIRS = 1 << 17

#: Decisions for an unresolvable pair. ``STOP`` ends the walk at the node itself,
#: which then counts as the pair's leaf; ``BRANCH`` follows both children.
LEFT, RIGHT, DISCARD, STOP, BRANCH = 0, 1, 2, 3, 4

#: Node kinds besides a feature index: a leaf, and a node whose value is known
#: to be missing without reading it (see :func:`node_kinds`).
LEAF_KIND, MISSING_KIND = -1, -2

Resolver = Callable[[np.ndarray, np.ndarray], np.ndarray]

_NONE = np.zeros(0, dtype=np.int64)


class CompiledForest(NamedTuple):
    """The node arrays of a :class:`PooledForest`, laid out for traversal.

    Every array is C-contiguous in the dtype given here: the numpy walk and
    the numba kernels read the same arrays (a ``NamedTuple`` of arrays is
    what numba takes as one argument).
    """

    roots: np.ndarray  # int64 per tree
    feature: np.ndarray  # int64, -1 at leaves
    threshold: np.ndarray  # float64
    children: np.ndarray  # int64 (2 * n_nodes,): [2n] left, [2n+1] right (0 at leaves)
    saw_missing: np.ndarray  # bool
    missing_right: np.ndarray  # int64 0/1
    depth: np.ndarray  # int64
    right_fraction: np.ndarray  # float64 N_right / N_node
    value: np.ndarray  # float64 (n_nodes, n_classes)
    vote: np.ndarray  # float64 one-hot of argmax(value); (n_nodes, 0) unless classification
    surrogate_feature: np.ndarray  # int64, -1: none
    surrogate_threshold: np.ndarray  # float64
    surrogate_left_le: np.ndarray  # bool
    order: np.ndarray  # int64: position in depth-first, left-before-right order (unique)

    @classmethod
    def build(cls, forest: PooledForest) -> CompiledForest:
        """The layout of ``forest`` (a new set of arrays)."""
        left, right = forest.global_children
        internal = forest.feature >= 0
        children = np.empty(2 * forest.n_nodes, dtype=np.int64)
        children[0::2] = np.where(internal, left, 0)
        children[1::2] = np.where(internal, right, 0)
        n = forest.n_node_samples.astype(np.float64)
        n_right = np.where(internal, n[np.where(internal, right, 0)], 0.0)
        # hard voting counts classes: a mean or a curve has no vote (no column)
        vote = np.zeros((forest.n_nodes, forest.value.shape[1] if forest.is_distribution else 0))
        if forest.n_nodes and forest.is_distribution:
            vote[np.arange(forest.n_nodes), forest.value.argmax(axis=1)] = 1.0

        def flat(a, dtype):
            return np.ascontiguousarray(a, dtype=dtype)

        return cls(
            roots=flat(forest.tree_start[:-1], np.int64),
            feature=flat(forest.feature, np.int64),
            threshold=flat(forest.threshold, np.float64),
            children=children,
            saw_missing=flat(forest.saw_missing, np.bool_),
            missing_right=flat(~forest.missing_left, np.int64),
            depth=flat(forest.node_depth, np.int64),
            # in [0, 1] even if a child claims more rows than its parent (readers refuse that)
            right_fraction=np.clip(np.where(internal, n_right / np.maximum(n, 1.0), 0.5), 0, 1),
            value=flat(forest.value, np.float64),
            vote=vote,
            surrogate_feature=flat(forest.surrogate_feature, np.int64),
            surrogate_threshold=flat(forest.surrogate_threshold, np.float64),
            surrogate_left_le=flat(forest.surrogate_left_le, np.bool_),
            order=preorder(forest.tree_start, left, right, forest.node_depth, internal),
        )


def preorder(tree_start, left, right, depth, internal) -> np.ndarray:
    """Each node's position when the trees are walked depth first, left child first.

    The trees follow one another (a tree's nodes take ``tree_start[t]`` to
    ``tree_start[t + 1] - 1``), whatever the order in which its nodes are
    stored. Computed depth by depth (subtree sizes from the deepest nodes up,
    then positions from the roots down), without a loop over nodes.

    Returns
    -------
    ndarray of int64, one per node
    """
    n_nodes = depth.shape[0]
    order = np.zeros(n_nodes, dtype=np.int64)
    if not n_nodes:
        return order
    size = np.ones(n_nodes, dtype=np.int64)
    by_depth = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[by_depth], np.arange(int(depth.max()) + 2))
    levels = [by_depth[bounds[d] : bounds[d + 1]] for d in range(len(bounds) - 1)]
    for level in reversed(levels):
        inner = level[internal[level]]
        size[inner] += size[left[inner]] + size[right[inner]]
    order[tree_start[:-1]] = tree_start[:-1]
    for level in levels:
        inner = level[internal[level]]
        order[left[inner]] = order[inner] + 1
        order[right[inner]] = order[inner] + 1 + size[left[inner]]
    return order


def node_kinds(cf: CompiledForest, absent: np.ndarray | None) -> np.ndarray:
    """Per node: its feature, :data:`LEAF_KIND` at leaves, :data:`MISSING_KIND` where
    the feature is in ``absent`` (a column missing for every row) and the node
    learned no direction for missing values.

    Such a node is unresolvable for every row; a walk given these kinds
    resolves it without reading a value (int64, a new array).
    """
    kind = cf.feature.copy()
    if absent is not None and np.any(absent):
        internal = kind >= 0
        on_absent = internal & np.asarray(absent, dtype=bool)[np.where(internal, kind, 0)]
        kind[on_absent & ~cf.saw_missing] = MISSING_KIND
    return kind


def row_chunks(n_rows: int, n_trees: int, max_pairs: int | None = None):
    """Row ranges ``(lo, hi)`` holding at most ``max_pairs`` (tree, row) pairs each.

    ``max_pairs`` defaults to :data:`MAX_PAIRS`.
    """
    step = max(1, (max_pairs or MAX_PAIRS) // max(n_trees, 1))
    for start in range(0, n_rows, step):
        yield start, min(n_rows, start + step)


class Level:
    """The pairs of one chunk at one depth, as :func:`traverse` met them.

    Attributes
    ----------
    depth : int
    node, row, pair : ndarray of int64
        Every pair at this depth: its node, its row of ``X`` and its index in
        the chunk (position of its tree in the chunk times the chunk's rows,
        plus its row's position in the chunk). A pair that branched is there
        once per path.
    weight : ndarray of float64 or None
        The pairs' weights (``None`` when the walk carries none).
    split : ndarray of int64
        Positions (in ``node``, ``row``, ...) of the pairs that read their
        node's feature: those at internal nodes, except ``MISSING_KIND`` ones.
    x : ndarray
        The values they read (NaN: missing), aligned with ``split``.
    above : ndarray of bool
        ``x > threshold`` (``False`` where ``x`` is NaN), aligned with ``split``.
    ended : ndarray of int64
        Positions of the pairs that end here: those at a leaf (in level
        order), then those a ``STOP`` decision ended (in decision order).
    """

    __slots__ = ("depth", "node", "row", "pair", "weight", "_split", "x", "above", "ended")

    def __init__(self, depth, node, row, pair, weight, split, x, above, ended):
        self.depth = depth
        self.node = node
        self.row = row
        self.pair = pair
        self.weight = weight
        self._split = split  # None: every pair
        self.x = x
        self.above = above
        self.ended = ended

    @property
    def split(self) -> np.ndarray:
        if self._split is None:
            self._split = np.arange(self.node.size, dtype=np.int64)
        return self._split


class Chunk:
    """One chunk of a :func:`traverse`: ``trees`` x rows ``lo:hi``; iterate for its levels."""

    def __init__(self, walk: _Walk, trees: np.ndarray, lo: int, hi: int, weight):
        self.trees = trees
        self.lo = lo
        self.hi = hi
        self._walk = walk
        self._weight = weight

    @property
    def n_pairs(self) -> int:
        """(tree, row) pairs of the chunk: ``len(trees) * (hi - lo)``."""
        return len(self.trees) * (self.hi - self.lo)

    def __iter__(self) -> Iterator[Level]:
        return self._walk.levels(self.trees, self.lo, self.hi, self._weight)


def traverse(
    cf: CompiledForest,
    X: np.ndarray,
    trees: np.ndarray,
    *,
    by: str = "rows",
    resolve: Resolver | int | None = None,
    right_probability: Resolver | None = None,
    kind: np.ndarray | None = None,
    weight=None,
    check_nan: bool = True,
) -> Iterator[Chunk]:
    """Walk every (tree, row) pair of ``trees`` x the rows of ``X``, chunk by chunk.

    Parameters
    ----------
    cf : CompiledForest
    X : ndarray of shape (n_rows, n_features)
        Global matrix (float32 or float64); NaN means missing.
    trees : ndarray of int
        The trees to walk.
    by : {"rows", "trees"}
        ``rows``: each chunk holds every tree and the rows of one
        :func:`row_chunks` range; ``trees``: every row and a range of trees
        (at most ``MAX_PAIRS // n_rows`` of them, at least one), so that all
        the pairs that reach a node are in one chunk.
    resolve : callable, int or None
        What an unresolvable pair does: ``resolve(nodes, rows) -> decisions``
        (one call per depth of a chunk, for its unresolvable pairs: those at
        ``MISSING_KIND`` nodes, then those that read NaN, each in level order;
        no call when there is none), one decision for every such pair, or
        ``None``: every missing value follows the learned direction (as
        scikit-learn routes it), none is unresolvable.
    right_probability : callable, optional
        ``right_probability(nodes, rows)`` for the pairs that ``BRANCH``: the
        right child gets ``weight * p``, the left one ``weight * (1 - p)``.
    kind : ndarray of int, optional
        :func:`node_kinds`; default ``cf.feature``.
    weight : float or array-like of shape (len(trees), n_rows), optional
        Each pair's starting weight (a pair of weight 0 is not walked);
        needed by ``BRANCH``. ``None``: no weights.
    check_nan : bool
        ``False`` when no value read can be NaN (skips the test).

    Yields
    ------
    Chunk
        Iterate a chunk for its :class:`Level` objects, one per depth, until
        no pair is left. The next frontier holds the pairs that took one
        child (in level order: those that read their value, then those of
        ``MISSING_KIND`` nodes sent one way), then the left children of the
        pairs that branched, then their right children.
    """
    X = np.ascontiguousarray(X)
    trees = np.asarray(trees, dtype=np.int64)
    n_rows = X.shape[0]
    walk = _Walk(cf, X, resolve, right_probability, kind, check_nan)
    shaped = None
    if weight is not None:
        shaped = np.broadcast_to(np.asarray(weight, dtype=np.float64), (len(trees), n_rows))
    branching = isinstance(resolve, (int, np.integer)) and resolve == BRANCH
    bound = MAX_PAIRS // 2 if branching else MAX_PAIRS  # a branching frontier grows
    if by == "rows":
        for lo, hi in row_chunks(n_rows, len(trees), bound):
            w = None if shaped is None else shaped[:, lo:hi]
            yield Chunk(walk, trees, lo, hi, w)
    elif by == "trees":
        step = max(1, bound // max(n_rows, 1))
        for a in range(0, len(trees), step):
            w = None if shaped is None else shaped[a : a + step]
            yield Chunk(walk, trees[a : a + step], 0, n_rows, w)
    else:
        raise ValueError(f"by={by!r} is not one of ['rows', 'trees']")


class _Walk:
    """What every chunk of one :func:`traverse` call shares."""

    def __init__(self, cf, X, resolve, right_probability, kind, check_nan):
        self.cf = cf
        self.flat = X.reshape(-1)
        self.n_feat = X.shape[1]
        self.resolve = resolve
        self.right_probability = right_probability
        self.kind = cf.feature if kind is None else kind
        self.has_missing_kind = kind is not None and bool((kind == MISSING_KIND).any())
        self.check_nan = check_nan

    def decide(self, nodes: np.ndarray, rows: np.ndarray) -> np.ndarray:
        if self.resolve is None:  # MISSING_KIND nodes: the learned direction
            return self.cf.missing_right[nodes]
        if isinstance(self.resolve, (int, np.integer)):
            return np.full(nodes.size, self.resolve, dtype=np.int64)
        return np.asarray(self.resolve(nodes, rows))

    def levels(self, trees, lo, hi, weight) -> Iterator[Level]:
        cf, kind, flat, n_feat = self.cf, self.kind, self.flat, self.n_feat
        threshold, children = cf.threshold, cf.children
        m = hi - lo
        node = np.repeat(cf.roots[trees], m)
        row = np.tile(np.arange(lo, hi, dtype=np.int64), len(trees))
        pair = np.arange(node.size, dtype=np.int64)
        w = None
        if weight is not None:
            w = np.array(weight, dtype=np.float64).reshape(-1)
            if not w.all():
                walked = np.flatnonzero(w)
                node, row, pair, w = node[walked], row[walked], pair[walked], w[walked]
        depth = 0
        while node.size:
            k = kind[node]
            inner = k >= 0
            if inner.all():  # no leaf here: every pair reads its value
                split, ended, missing = None, _NONE, _NONE
                ns, rs, ks = node, row, k
            else:
                split = np.flatnonzero(inner)
                ended = np.flatnonzero(k == LEAF_KIND)
                missing = np.flatnonzero(k == MISSING_KIND) if self.has_missing_kind else _NONE
                ns, rs, ks = node[split], row[split], k[split]
            x = flat[rs * n_feat + ks]
            above = x > threshold[ns]
            step = 2 * ns + above
            # the pairs to decide for: on MISSING_KIND nodes, then those that read NaN
            # at a node that learned no direction (positions in split: `stuck`)
            undecided, stuck = missing, _NONE
            if self.check_nan:
                nan = np.flatnonzero(np.isnan(x))
                if nan.size:
                    if self.resolve is None:
                        learned = nan
                    else:
                        seen = cf.saw_missing[ns[nan]]
                        learned, stuck = nan[seen], nan[~seen]
                    step[learned] = 2 * ns[learned] + cf.missing_right[ns[learned]]
                    if stuck.size:
                        at = stuck if split is None else split[stuck]
                        undecided = np.concatenate([missing, at]) if missing.size else at
            go = None  # positions in split that move to children[step]; None: all
            sent, sent_step, branch = _NONE, _NONE, _NONE
            if undecided.size:
                decision = self.decide(node[undecided], row[undecided])
                one_way = decision <= RIGHT
                n_missing = missing.size
                if stuck.size:
                    d = decision[n_missing:]
                    step[stuck] = 2 * ns[stuck] + (d == RIGHT)
                    leave = ~one_way[n_missing:]
                    if leave.any():
                        keep = np.ones(ns.size, dtype=bool)
                        keep[stuck[leave]] = False
                        go = np.flatnonzero(keep)
                if n_missing and one_way[:n_missing].any():
                    sent = missing[one_way[:n_missing]]
                    sent_step = 2 * node[sent] + decision[:n_missing][one_way[:n_missing]]
                stop = decision == STOP
                if stop.any():
                    ended = np.concatenate([ended, undecided[stop]])
                branch = undecided[decision == BRANCH]
            yield Level(depth, node, row, pair, w, split, x, above, ended)
            # the next frontier: one child, then left children of branches, then right ones
            at = [split if go is None else (go if split is None else split[go])]
            nxt = [children[step if go is None else step[go]]]
            if sent.size:
                at.append(sent)
                nxt.append(children[sent_step])
            if branch.size:
                nb, rb = node[branch], row[branch]
                at += [branch, branch]
                nxt += [children[2 * nb], children[2 * nb + 1]]
                if w is not None:
                    p = self.right_probability(nb, rb)
                    wb = w[branch]
                    w = np.concatenate([_gather(w, at[:-2]), wb * (1.0 - p), wb * p])
            elif w is not None:
                w = _gather(w, at)
            node = nxt[0] if len(nxt) == 1 else np.concatenate(nxt)
            row = _gather(row, at)
            pair = _gather(pair, at)
            depth += 1


def _gather(a: np.ndarray, parts: list) -> np.ndarray:
    """``a`` at each part's positions (``None``: all of ``a``), concatenated."""
    if len(parts) == 1:
        return a if parts[0] is None else a[parts[0]]
    return np.concatenate([a if at is None else a[at] for at in parts])
