"""The pooled-forest payload, versions 2 to 4: compact, and lossless for predictions.

Version 3 is version 2 with a ``task`` field: ``classification`` (every
version 2 payload) or ``regression``, whose trees carry one ``value`` column,
the node means, sent as float64 for every tree (``value_trees`` lists them all;
there are no leaf counts). Version 4 adds ``times``, the time grid of
``survival`` trees (empty for the other tasks), whose ``value`` rows are two
curves over it (cumulative hazard, then survival probability), sent as float64
for every tree like means and checked to be curves (:func:`check_curves`).

Version 1 sent every in-memory node array as it is (about 63 bytes per node
with surrogates). Version 2 sends the same trees in about 8 bytes per node
(``benchmarks/bench_payload.py``):

* **structure**: trees are stored in preorder (a node, its left subtree, then
  its right subtree: scikit-learn's depth-first order), so one bit per node
  (``leaf_bits``) describes them; the children are rebuilt on reading
  (:func:`preorder_links`) and never travel;
* **per-node fields at internal nodes only**: ``feature`` (smallest integer
  dtype that fits), thresholds as the largest float32 not above them plus an
  8-bit refinement (:func:`~fedforest.model.compact_arrays.split_thresholds`;
  exact, with a float64 list for the rare threshold that needs more bits);
* **counts instead of distributions**: ``n_node_samples`` is sent at leaves,
  internal nodes being the sum of their children (plus a sparse list of
  differences); class distributions are sent as integer class counts at the
  leaves (:func:`leaf_counts`), every node's distribution being its subtree's
  counts divided by their total. That reproduces scikit-learn's distributions
  bit for bit (they are weighted class counts divided by the weighted node
  total); a tree whose distributions are not such ratios (noisy or
  differentially private counts, hand-made trees) sends them as float64
  (``value_trees``, ``value``);
* **flags** packed eight to a byte (``numpy.packbits``), surrogate splits only
  where a node has one.

The encodings of single arrays (integers in their smallest dtype, flags as
bits, thresholds) are in :mod:`fedforest.model.compact_arrays`.

Every array keeps its value exactly (the reader rebuilds the in-memory arrays
bit for bit) except values that mean nothing and are written as their
defaults: the threshold of a leaf (0.0) and the surrogate fields of a node
without a surrogate split (threshold 0.0, ``left_le`` true, agreement 0.0).
Trees held in another depth-first order are written in preorder (the same
trees, nodes renumbered). The exact field list and the reading rules are in
``docs/architecture.md``, section 3.

The reader (:func:`decode`) checks every field's dtype, shape and range before
it allocates anything that depends on it, rebuilds the trees, and then applies
the same checks as version 1 (:func:`check_tree_arrays`) to the rebuilt
arrays. This module imports nothing from :mod:`fedforest.model.forest`; the
reader of version 1 is :mod:`fedforest.model.forest_v1`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..validation import PayloadReader
from .compact_arrays import (
    compact_ints,
    pack_bits,
    read_bits,
    read_positions,
    read_thresholds,
    split_thresholds,
)
from .payload_checks import MAX_NODE_SAMPLES, MAX_NODES, MAX_TREES, plain_labels

logger = logging.getLogger(__name__)

#: Fields of a version 2 payload besides ``format`` and ``version``.
PAYLOAD_FIELDS = (
    "feature_names",
    "categories",
    "classes",
    "owners",
    "tree_start",
    "tree_owner",
    "leaf_bits",
    "feature",
    "threshold",
    "threshold_fine",
    "threshold_exact_at",
    "threshold_exact",
    "leaf_samples",
    "samples_delta_at",
    "samples_delta",
    "missing_left",
    "saw_missing",
    "leaf_counts",
    "value_trees",
    "value",
    "surrogate_nodes",
    "surrogate_feature",
    "surrogate_threshold",
    "surrogate_left_le",
    "surrogate_agreement",
)

#: Largest absolute node mean of a regression tree (float32's range: a site's table is read as
#: float32, and a sum of such means over a forest stays finite in float64).
MAX_MEAN = float(np.finfo(np.float32).max)
#: Largest class count of a leaf, and largest sum of a leaf's class counts.
MAX_LEAF_COUNT = 2**31 - 1
#: Bounds of the writer's search for leaf counts (beyond them a tree is sent as float64).
_MAX_RATIO = 2**24
_MAX_WEIGHT = 2**36
_MAX_SEARCH_DEPTH = 512
_CF_TERMS = 48


# ---------------------------------------------------------------- structure
def complete_trees(tree_start, is_leaf) -> np.ndarray:
    """Whether each tree's leaf flags describe one complete binary tree in preorder.

    Count an internal node +1 and a leaf -1: a tree is complete when the
    running sum over its nodes first reaches -1, which must happen at its last
    node. Needs 4 bytes per node (the running sum, int32: at most
    :data:`~fedforest.model.payload_checks.MAX_NODES` in absolute value).
    """
    tree_start = np.asarray(tree_start, dtype=np.int64)
    level = np.zeros(int(tree_start[-1]) + 1, dtype=np.int32)
    np.cumsum(np.where(is_leaf, np.int32(-1), np.int32(1)), out=level[1:])
    base = level[tree_start[:-1]]
    lowest = np.minimum.reduceat(level[:-1], tree_start[:-1]) if level.size > 1 else base
    return (level[tree_start[1:]] - base == -1) & (lowest >= base)


def preorder_links(tree_start, is_leaf) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Children of trees stored in preorder, rebuilt from which nodes are leaves.

    In preorder an internal node is followed by its left subtree, then its
    right subtree. Count an internal node +1 and a leaf -1: a tree is complete
    when the running sum over its nodes first reaches -1, which must happen at
    its last node. The subtree of node ``i`` ends where the running sum first
    drops below its value before ``i``; that is found for every node at once
    by sorting (no loop over nodes or levels).

    Parameters
    ----------
    tree_start : ndarray of int, shape (n_trees + 1,)
        Offsets of the trees (starting at 0, strictly increasing).
    is_leaf : ndarray of bool, shape (n_nodes,)

    Returns
    -------
    valid : ndarray of bool, shape (n_trees,)
        Whether each tree's flags describe one complete binary tree.
    left, right : ndarray of int64, shape (n_nodes,)
        Global child indices (``-1`` at leaves); meaningful in valid trees only.
    end : ndarray of int64, shape (n_nodes,)
        One past the last node of each node's subtree (valid trees only).
    """
    tree_start = np.asarray(tree_start, dtype=np.int64)
    is_leaf = np.asarray(is_leaf, dtype=bool)
    n = int(tree_start[-1])
    valid = complete_trees(tree_start, is_leaf)
    level = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.where(is_leaf, -1, 1), out=level[1:])
    # the first position j > i with level[j] == level[i] - 1, by one sort of (level, position)
    shifted = level - level.min()
    width = n + 1
    keys = shifted * width + np.arange(width, dtype=np.int64)
    keys.sort()
    target = (shifted[:-1] - 1) * width + np.arange(1, width, dtype=np.int64)
    found = keys[np.minimum(np.searchsorted(keys, target), n)]
    end = found - (shifted[:-1] - 1) * width
    end = np.clip(end, 0, n)
    nodes = np.arange(n, dtype=np.int64)
    left = np.where(is_leaf, -1, nodes + 1)
    right = np.where(is_leaf, -1, end[np.minimum(nodes + 1, max(n - 1, 0))])
    return valid, left, right, end


def subtree_sums(contrib: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Sum of ``contrib`` over each node's subtree (a contiguous range in preorder)."""
    n = end.shape[0]
    cs = np.zeros((n + 1, *contrib.shape[1:]), dtype=np.int64)
    np.cumsum(contrib, axis=0, out=cs[1:])
    return cs[end] - cs[:-1]


def preorder_order(tree_start, feature, children_left, children_right) -> np.ndarray | None:
    """Node order that puts every tree in preorder, or ``None`` if all already are.

    Raises
    ------
    ValueError
        If a tree is not a binary tree (a node reached twice or never, a child
        outside its tree).
    """
    tree_start = np.asarray(tree_start, dtype=np.int64)
    is_leaf = np.asarray(feature) < 0
    valid, left, right, _ = preorder_links(tree_start, is_leaf)
    base = np.repeat(tree_start[:-1], np.diff(tree_start))
    own_left = np.where(is_leaf, -1, np.asarray(children_left, np.int64) + base)
    own_right = np.where(is_leaf, -1, np.asarray(children_right, np.int64) + base)
    sizes = np.diff(tree_start)
    tree = np.repeat(np.arange(sizes.shape[0]), sizes)
    differs = (own_left != left) | (own_right != right)
    if differs.any():
        valid[tree[differs]] = False
    if valid.all():
        return None
    order = np.arange(int(tree_start[-1]), dtype=np.int64)
    for t in np.flatnonzero(~valid):
        a, b = int(tree_start[t]), int(tree_start[t + 1])
        seen = np.zeros(b - a, dtype=bool)
        visit: list[int] = []
        stack = [a]
        while stack:
            node = stack.pop()
            if not a <= node < b or seen[node - a]:
                raise ValueError(f"tree {t} is not a binary tree (node {node} reached twice)")
            seen[node - a] = True
            visit.append(node)
            if not is_leaf[node]:
                stack.append(int(own_right[node]))
                stack.append(int(own_left[node]))
        if len(visit) != b - a:
            raise ValueError(
                f"tree {t} is not a binary tree ({b - a - len(visit)} nodes unreachable)"
            )
        order[a:b] = visit
    logger.debug("%d trees renumbered into preorder", int((~valid).sum()))
    return order


def _depths(tree_start, is_leaf, left, right, limit: int) -> np.ndarray:
    """Depth of every node; -1 below ``limit`` levels."""
    depth = np.full(is_leaf.shape[0], -1, dtype=np.int64)
    frontier = np.asarray(tree_start[:-1], dtype=np.int64)
    d = 0
    while frontier.size and d <= limit:
        depth[frontier] = d
        inner = frontier[~is_leaf[frontier]]
        frontier = np.concatenate([left[inner], right[inner]])
        d += 1
    return depth


# ---------------------------------------------------------------- class counts
def _first_convergent(x: np.ndarray, accept: Callable, cap: int) -> tuple[np.ndarray, ...]:
    """For each ``x > 0``, the first continued-fraction convergent ``h / k`` of ``x``
    (``1 <= h, k <= cap``) that ``accept(positions, h, k)`` takes."""
    m = x.shape[0]
    num = np.zeros(m, dtype=np.int64)
    den = np.zeros(m, dtype=np.int64)
    found = np.zeros(m, dtype=bool)
    idx = np.flatnonzero(np.isfinite(x) & (x > 0))
    y = x[idx].astype(np.float64)
    h0, h1 = np.zeros(idx.size), np.ones(idx.size)
    k0, k1 = np.ones(idx.size), np.zeros(idx.size)
    for _ in range(_CF_TERMS):
        if not idx.size:
            break
        a = np.floor(y)
        h = a * h1 + h0
        k = a * k1 + k0
        small = (h <= cap) & (k <= cap)
        done = np.zeros(idx.size, dtype=bool)
        trial = np.flatnonzero(small & (h >= 1) & (k >= 1))
        if trial.size:
            hi, ki = h[trial].astype(np.int64), k[trial].astype(np.int64)
            took = np.asarray(accept(idx[trial], hi, ki), dtype=bool)
            got = trial[took]
            num[idx[got]], den[idx[got]], found[idx[got]] = hi[took], ki[took], True
            done[got] = True
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            frac = y - a
            y_next = 1.0 / frac
        keep = ~done & small & (frac > 0) & np.isfinite(y_next)
        idx, y = idx[keep], y_next[keep]
        h0, h1, k0, k1 = h1[keep], h[keep], k1[keep], k[keep]
    return num, den, found


def _leaf_fractions(value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Smallest integer class counts of each leaf distribution (a row of ``value``)."""
    n, k = value.shape
    counts = np.zeros((n, k), dtype=np.int64)
    ok = np.isfinite(value).all(axis=1) & (value >= 0).all(axis=1) & (value <= 1).all(axis=1)
    pure = ok & (np.count_nonzero(value == 1.0, axis=1) == 1)
    pure &= np.count_nonzero(value == 0.0, axis=1) == k - 1
    counts[pure] = value[pure] == 1.0
    mixed = np.flatnonzero(ok & ~pure)
    if mixed.size:
        rows, cols = np.nonzero((value[mixed] > 0) & (value[mixed] < 1))
        x = value[mixed][rows, cols]

        def reproduces(pos, h, kk):
            with np.errstate(all="ignore"):
                return h / kk == x[pos]

        _, den, found = _first_convergent(x, reproduces, MAX_LEAF_COUNT)
        total = np.ones(mixed.size, dtype=np.int64)
        good = np.ones(mixed.size, dtype=bool)
        good[rows[~found]] = False
        np.lcm.at(total, rows[found], den[found])
        good &= (total >= 1) & (total <= MAX_LEAF_COUNT)
        total = np.where(good, total, 1)
        with np.errstate(all="ignore"):
            c = np.rint(value[mixed] * total[:, None]).astype(np.int64)
            good &= (c / total[:, None] == value[mixed]).all(axis=1) & (c.sum(axis=1) == total)
        counts[mixed[good]] = c[good]
        ok[mixed[~good]] = False
    return counts, ok


def leaf_counts(
    tree_start: np.ndarray,
    is_leaf: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    end: np.ndarray,
    value: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Integer class counts at the leaves that reproduce every node's ``value``.

    A node's distribution is taken to be its subtree's leaf counts summed and
    divided by their total (what scikit-learn stores: weighted class counts
    over the weighted node total). The counts are unknown but the ratios are
    known, so they are recovered bottom-up: a leaf gets the smallest counts
    giving its distribution; an internal node combines its children's counts
    as ``a * left + b * right`` with the smallest positive integers ``a, b``
    (a continued-fraction convergent of the ratio the distributions imply) for
    which every class of the node's distribution is reproduced bit for bit.
    Top-down, the multipliers along each path then scale the leaves.

    Returns
    -------
    counts : ndarray of int64, shape (n_nodes, n_classes)
        Leaf counts (rows of internal nodes are 0).
    exact : ndarray of bool, shape (n_trees,)
        Trees whose every distribution the counts reproduce bit for bit
        (checked by recomputing them as the reader does). The others must be
        sent as float64.
    """
    n, k = value.shape
    sizes = np.diff(tree_start)
    tree = np.repeat(np.arange(sizes.shape[0]), sizes)
    depth = _depths(tree_start, is_leaf, left, right, _MAX_SEARCH_DEPTH)
    m = np.zeros((n, k), dtype=np.int64)
    bad = depth < 0
    leaves = np.flatnonzero(is_leaf & ~bad)
    m[leaves], ok = _leaf_fractions(value[leaves])
    bad[leaves[~ok]] = True
    inner = np.flatnonzero(~is_leaf & ~bad)
    mult_a = np.ones(n, dtype=np.int64)
    mult_b = np.ones(n, dtype=np.int64)
    levels = depth[inner]
    order = np.argsort(-levels, kind="stable")
    inner, levels = inner[order], levels[order]
    bounds = np.flatnonzero(np.diff(levels)) + 1
    for p in np.split(inner, bounds):
        lc, rc = left[p], right[p]
        ml, mr = m[lc], m[rc]
        wl, wr = ml.sum(axis=1), mr.sum(axis=1)
        skip = bad[lc] | bad[rc] | (wl <= 0) | (wr <= 0)
        wl, wr = np.where(skip, 1, wl), np.where(skip, 1, wr)
        vp = value[p]
        with np.errstate(all="ignore"):
            vl, vr = ml / wl[:, None], mr / wr[:, None]
            gap = np.abs(vl - vr)
            c = gap.argmax(axis=1)
            rows = np.arange(p.size)
            same = gap.max(axis=1) == 0
            rho = (wr * (vr[rows, c] - vp[rows, c])) / (wl * (vp[rows, c] - vl[rows, c]))
        rho = np.where(same, 1.0, rho)

        def reproduces(pos, h, kk, ml=ml, mr=mr, vp=vp):
            cp = h[:, None] * ml[pos] + kk[:, None] * mr[pos]
            with np.errstate(all="ignore"):
                return (cp / cp.sum(axis=1)[:, None] == vp[pos]).all(axis=1)

        a, b, found = _first_convergent(np.where(skip, np.nan, rho), reproduces, _MAX_RATIO)
        a, b = np.where(found, a, 1), np.where(found, b, 1)
        mp = a[:, None] * ml + b[:, None] * mr
        found &= mp.sum(axis=1) <= _MAX_WEIGHT
        m[p] = np.where(found[:, None], mp, 0)
        bad[p] = ~found
        mult_a[p], mult_b[p] = a, b
    # top-down: scale every subtree by the multipliers on its path
    scale = np.zeros(n, dtype=np.int64)
    scale[tree_start[:-1]] = 1
    for p in np.split(inner, bounds)[::-1]:
        sa = scale[p] * mult_a[p]
        sb = scale[p] * mult_b[p]
        scale[left[p]] = np.where(sa <= MAX_LEAF_COUNT, sa, 0)
        scale[right[p]] = np.where(sb <= MAX_LEAF_COUNT, sb, 0)
    leaf = np.flatnonzero(is_leaf)
    total = scale[leaf].astype(np.float64) * m[leaf].sum(axis=1)
    fits = (scale[leaf] >= 1) & (total <= MAX_LEAF_COUNT) & ~bad[leaf]
    counts = np.zeros((n, k), dtype=np.int64)
    counts[leaf[fits]] = scale[leaf[fits], None] * m[leaf[fits]]
    bad[leaf[~fits]] = True
    exact = np.ones(sizes.shape[0], dtype=bool)
    exact[np.unique(tree[bad])] = False
    # the proof: recompute every distribution as the reader does
    nodes = np.repeat(exact, sizes)
    if nodes.any():
        again = _values_from_counts(counts, end, nodes)
        differs = (again.view(np.uint64) != value[nodes].view(np.uint64)).any(axis=1)
        exact[np.unique(tree[nodes][differs])] = False
    return counts, exact


def _values_from_counts(counts: np.ndarray, end: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Distributions of the nodes in ``rows`` (a mask): subtree counts over their total."""
    sums = subtree_sums(counts, end)[rows]
    return sums.astype(np.float64) / sums.sum(axis=1).astype(np.float64)[:, None]


# ---------------------------------------------------------------- writing
def encode(fields: Mapping[str, Any], *, counts: bool = True) -> dict:
    """The version 2 payload fields of a forest (without ``format`` and ``version``).

    Parameters
    ----------
    fields : mapping
        ``feature_names``, ``categories``, ``classes``, ``owners``,
        ``tree_start``, ``tree_owner``, ``value`` and every per-node array of
        :class:`~fedforest.model.forest.PooledForest` (its attributes).
    counts : bool, default True
        Look for leaf counts (:func:`leaf_counts`); ``False`` sends every
        distribution as float64 (what the reader of version 1 does: faster).

    Raises
    ------
    ValueError
        If a tree is not a binary tree.
    """
    tree_start = np.asarray(fields["tree_start"], dtype=np.int64)
    feature = np.asarray(fields["feature"])
    node = {
        key: np.asarray(fields[key])
        for key in (
            "feature",
            "threshold",
            "n_node_samples",
            "missing_left",
            "saw_missing",
            "value",
            "surrogate_feature",
            "surrogate_threshold",
            "surrogate_left_le",
            "surrogate_agreement",
        )
    }
    order = preorder_order(tree_start, feature, fields["children_left"], fields["children_right"])
    if order is not None:
        node = {key: arr[order] for key, arr in node.items()}
    is_leaf = node["feature"] < 0
    _, left, right, end = preorder_links(tree_start, is_leaf)
    inner = np.flatnonzero(~is_leaf)
    sizes = np.diff(tree_start)
    value = np.asarray(node["value"], dtype=np.float64)
    n_classes = value.shape[1]

    f32, fine, exact_at, exact = split_thresholds(node["threshold"][inner])
    n = np.asarray(node["n_node_samples"], dtype=np.int64)
    delta = n[inner] - n[left[inner]] - n[right[inner]]
    delta_at = np.flatnonzero(delta)
    if counts and value.shape[0]:
        leaf_count, exact_trees = leaf_counts(tree_start, is_leaf, left, right, end, value)
    else:
        leaf_count = np.zeros(value.shape, dtype=np.int64)
        exact_trees = np.zeros(sizes.shape[0], dtype=bool)
    counted = np.repeat(exact_trees, sizes)
    sf = np.asarray(node["surrogate_feature"], dtype=np.int64)
    with_surrogate = inner[sf[inner] >= 0]
    return {
        "feature_names": [str(f) for f in fields["feature_names"]],
        "categories": {
            str(k): [str(v) for v in levels] for k, levels in fields["categories"].items()
        },
        "classes": plain_labels(fields["classes"]),
        "owners": [str(o) for o in fields["owners"]],
        "tree_start": compact_ints(tree_start),
        "tree_owner": compact_ints(fields["tree_owner"]),
        "leaf_bits": pack_bits(is_leaf),
        "feature": compact_ints(node["feature"][inner]),
        "threshold": f32,
        "threshold_fine": fine,
        "threshold_exact_at": compact_ints(exact_at),
        "threshold_exact": exact,
        "leaf_samples": compact_ints(n[is_leaf]),
        "samples_delta_at": compact_ints(delta_at),
        "samples_delta": compact_ints(delta[delta_at]),
        "missing_left": pack_bits(node["missing_left"]),
        "saw_missing": pack_bits(node["saw_missing"]),
        "leaf_counts": compact_ints(leaf_count[is_leaf & counted]).reshape(-1, n_classes),
        "value_trees": compact_ints(np.flatnonzero(~exact_trees)),
        "value": value[~counted].copy(),
        "surrogate_nodes": pack_bits(sf[inner] >= 0),
        "surrogate_feature": compact_ints(sf[with_surrogate]),
        "surrogate_threshold": np.asarray(node["surrogate_threshold"], np.float64)[with_surrogate],
        "surrogate_left_le": pack_bits(np.asarray(node["surrogate_left_le"])[with_surrogate]),
        "surrogate_agreement": np.asarray(node["surrogate_agreement"], np.float64)[with_surrogate],
    }


# ---------------------------------------------------------------- reading
def decode(
    r: PayloadReader,
    *,
    n_features: int,
    n_classes: int,
    n_owners: int,
    n_levels: np.ndarray,
    task: str = "classification",
    n_times: int = 0,
) -> dict:
    """Read and check the trees of a version 2 or 3 payload; return the in-memory arrays.

    Parameters
    ----------
    r : PayloadReader
        The payload (its names, classes, owners and categories already read).
    n_features, n_classes, n_owners : int
        Lengths of those lists.
    n_levels : ndarray of int
        Levels of each feature (0 for a numeric one).
    task : {"classification", "regression", "survival"}, default "classification"
        Regression trees (version 3): one ``value`` column, the node means,
        sent as float64 for every tree (finite, within float32's range), and
        no leaf counts; survival trees (version 4): ``2 * n_times`` columns,
        sent the same way, that must be curves (:func:`check_curves`).
    n_times : int, default 0
        Points of the survival trees' time grid.

    Returns
    -------
    dict
        ``tree_start``, ``tree_owner``, ``value`` and the per-node arrays of
        :class:`~fedforest.model.forest.PooledForest`.
    """
    tree_start = r.read_array("tree_start", "i", max_len=MAX_TREES + 1, lo=0, hi=MAX_NODES)
    n_trees = tree_start.shape[0] - 1
    if n_trees < 1:
        r.fail(f"field 'tree_start' describes {n_trees} trees; expected 1 to {MAX_TREES}")
    if tree_start[0] != 0 or np.any(np.diff(tree_start) < 1):
        r.fail("field 'tree_start' must start at 0 and increase (every tree has a node)")
    n = int(tree_start[-1])
    sizes = np.diff(tree_start)
    tree_owner = r.read_array("tree_owner", "i", length=n_trees, lo=0, hi=n_owners - 1)

    is_leaf = read_bits(r, "leaf_bits", n)
    valid = complete_trees(tree_start, is_leaf)
    if not valid.all():
        t = int(np.flatnonzero(~valid)[0])
        r.fail(
            f"field 'leaf_bits' does not describe tree {t} (nodes {int(tree_start[t])} to "
            f"{int(tree_start[t + 1]) - 1}) as one complete binary tree in preorder: "
            "counting an internal node +1 and a leaf -1, the sum must first reach -1 at "
            "the tree's last node"
        )
    inner = np.flatnonzero(~is_leaf)
    n_inner = inner.size
    # every field as long as the flags say, before anything the size of the forest is built
    feature_in = r.read_array("feature", "i", length=n_inner, lo=0, hi=n_features - 1)
    threshold_in = read_thresholds(r, n_inner)
    leaf_samples = r.read_array("leaf_samples", "i", length=n - n_inner, lo=1, hi=MAX_NODE_SAMPLES)
    delta_at = read_positions(r, "samples_delta_at", n_inner)
    delta = r.read_array(
        "samples_delta", "i", length=delta_at.size, lo=-2 * MAX_NODE_SAMPLES, hi=MAX_NODE_SAMPLES
    )
    missing_left = read_bits(r, "missing_left", n)
    saw_missing = read_bits(r, "saw_missing", n)
    value_trees = read_positions(r, "value_trees", n_trees)
    explicit_tree = np.zeros(n_trees, dtype=bool)
    explicit_tree[value_trees] = True
    explicit = np.repeat(explicit_tree, sizes)
    counted_leaf = is_leaf & ~explicit
    counts = task == "classification"
    if not counts and not explicit.all():
        r.fail(
            f"field 'value_trees' must list every tree: {task} trees send their values "
            "(means, curves), not class counts"
        )
    width = {"regression": 1, "survival": 2 * n_times}.get(task, n_classes)
    lowest = {"regression": -MAX_MEAN, "survival": 0.0}.get(task, 0.0)
    bound = 1 if counts else MAX_MEAN
    value_rows = r.read_array(
        "value", "f", 2, int(explicit.sum()), width=width, lo=lowest, hi=bound
    )
    leaf_count = r.read_array(
        "leaf_counts", "i", 2, int(counted_leaf.sum()), width=width, lo=0, hi=MAX_LEAF_COUNT
    )
    totals = leaf_count.sum(axis=1)
    if np.any((totals < 1) | (totals > MAX_LEAF_COUNT)):
        r.fail(f"field 'leaf_counts' must give every leaf a total count in [1, {MAX_LEAF_COUNT}]")
    has = read_bits(r, "surrogate_nodes", n_inner)
    s = int(has.sum())
    sur_feature = r.read_array("surrogate_feature", "i", length=s, lo=0, hi=n_features - 1)
    # a surrogate split sits between two of a site's values, which lie within float32's range
    sur_threshold = r.read_array("surrogate_threshold", "f", length=s, lo=-MAX_MEAN, hi=MAX_MEAN)
    sur_left_le = read_bits(r, "surrogate_left_le", s)
    sur_agreement = r.read_array("surrogate_agreement", "f", length=s, lo=-1, hi=1)

    # the trees
    _, left, right, end = preorder_links(tree_start, is_leaf)
    feature = np.full(n, -1, dtype=np.int64)
    feature[inner] = feature_in
    threshold = np.zeros(n)
    threshold[inner] = threshold_in
    contrib = np.zeros(n, dtype=np.int64)
    contrib[is_leaf] = leaf_samples
    contrib[inner[delta_at]] = delta
    n_node_samples = subtree_sums(contrib, end)
    if np.any((n_node_samples < 1) | (n_node_samples > MAX_NODE_SAMPLES)):
        r.fail(
            "fields 'leaf_samples' and 'samples_delta' give internal nodes n_node_samples "
            f"outside [1, {MAX_NODE_SAMPLES}]"
        )
    value = np.zeros((n, width))
    value[explicit] = value_rows
    if not explicit.all():
        counts = np.zeros((n, width), dtype=np.int64)
        counts[counted_leaf] = leaf_count
        value[~explicit] = _values_from_counts(counts, end, ~explicit)
    nodes = inner[has]
    surrogate_feature = np.full(n, -1, dtype=np.int64)
    surrogate_feature[nodes] = sur_feature
    surrogate_threshold = np.zeros(n)
    surrogate_threshold[nodes] = sur_threshold
    surrogate_left_le = np.ones(n, dtype=bool)
    surrogate_left_le[nodes] = sur_left_le
    surrogate_agreement = np.zeros(n)
    surrogate_agreement[nodes] = sur_agreement

    base = np.repeat(tree_start[:-1], sizes)
    arrays = {
        "children_left": np.where(is_leaf, -1, left - base),
        "children_right": np.where(is_leaf, -1, right - base),
        "feature": feature,
        "threshold": threshold,
        "n_node_samples": n_node_samples,
        "missing_left": missing_left,
        "saw_missing": saw_missing,
        "value": value,
        "surrogate_feature": surrogate_feature,
        "surrogate_threshold": surrogate_threshold,
        "surrogate_left_le": surrogate_left_le,
        "surrogate_agreement": surrogate_agreement,
    }
    check_tree_arrays(r, tree_start, arrays, n_levels, task=task)
    return {"tree_start": tree_start, "tree_owner": tree_owner, **arrays}


def check_curves(r: PayloadReader, value: np.ndarray) -> None:
    """Refuse survival curves that are not curves: every node's cumulative hazard (the first
    half of its ``value`` row) finite, at least 0 and non-decreasing over the grid, its
    survival probability (the second half) in [0, 1] and non-increasing."""
    n_times = value.shape[1] // 2
    chf, surv = value[:, :n_times], value[:, n_times:]
    if not (np.isfinite(chf).all() and np.all(chf >= 0) and np.all(np.diff(chf, axis=1) >= 0)):
        r.fail(
            "field 'value' must hold, at every node, a cumulative hazard that is finite, at "
            "least 0 and non-decreasing over 'times' (its first half)"
        )
    if not (np.all((surv >= 0) & (surv <= 1)) and np.all(np.diff(surv, axis=1) <= 0)):
        r.fail(
            "field 'value' must hold, at every node, a survival probability in [0, 1] that "
            "does not increase over 'times' (its second half)"
        )


def check_tree_arrays(
    r: PayloadReader, tree_start, a: Mapping, n_levels: np.ndarray, task: str = "classification"
) -> None:
    """Refuse trees that are not well-formed binary trees in depth-first order.

    The rules every reader applies to the in-memory arrays (version 1 to its
    fields as received, version 2 to the arrays it rebuilt). Every array has
    been read with its dtype, shape and range, so the index arithmetic below
    cannot overflow. ``n_levels`` is the number of levels of each feature (0
    for a numeric feature).
    """
    n_nodes = int(tree_start[-1])
    sizes = np.diff(tree_start)
    tree = np.repeat(np.arange(sizes.shape[0]), sizes)
    local = np.arange(n_nodes) - tree_start[:-1][tree]
    left, right, feat = a["children_left"], a["children_right"], a["feature"]
    leaf = feat < 0
    internal = ~leaf
    if np.any(left[leaf] != -1) or np.any(right[leaf] != -1):
        r.fail("leaves (feature -1) must have children -1")
    size = sizes[tree]
    for name, child in (("children_left", left), ("children_right", right)):
        c = child[internal]
        if np.any(c <= local[internal]) or np.any(c >= size[internal]):
            r.fail(
                f"field {name!r} has child indices out of range or not after their parent "
                "(trees must be in depth-first order, which rules out cycles)"
            )
    # every non-root node has exactly one parent
    base = tree_start[:-1][tree[internal]]
    glob_left = left[internal] + base
    glob_right = right[internal] + base
    parents = np.bincount(np.concatenate([glob_left, glob_right]), minlength=n_nodes)
    expected = np.ones(n_nodes, dtype=np.int64)
    expected[tree_start[:-1]] = 0
    if not np.array_equal(parents, expected):
        r.fail("trees are not trees: some node has no parent or several parents")
    thr = a["threshold"]
    bad_thr = np.isnan(thr) | np.isneginf(thr) | (np.isposinf(thr) & ~a["saw_missing"])
    if np.any(bad_thr[internal]):
        r.fail(
            "field 'threshold' has non-finite values (only +inf is allowed, on nodes that "
            "split missing from observed values)"
        )
    if not np.isfinite(thr[leaf]).all():
        r.fail("field 'threshold' has non-finite values at leaves")
    # a split on category codes 0 .. K-1 has a threshold in [-1, K] (or +inf, as above)
    k = n_levels[np.where(internal, feat, 0)]
    on_codes = internal & (k > 0) & np.isfinite(thr)
    if np.any((thr[on_codes] < -1) | (thr[on_codes] > k[on_codes])):
        r.fail(
            "field 'threshold' has thresholds of categorical features outside [-1, K] "
            "(K = the feature's number of levels)"
        )
    n = a["n_node_samples"]
    if np.any(n[glob_left] > n[internal]) or np.any(n[glob_right] > n[internal]):
        r.fail("field 'n_node_samples' has a child with more training rows than its parent")
    value = a["value"]
    # every node's row, not only the leaves': the node strategy predicts with internal ones
    if task == "regression":
        if not np.all(np.abs(value) <= MAX_MEAN):
            r.fail(f"field 'value' must hold finite node means within +-{MAX_MEAN:g}")
    elif task == "survival":
        check_curves(r, value)
    elif np.any(np.abs(value.sum(axis=1) - 1.0) > 1e-6):
        r.fail(
            "field 'value' must hold a class distribution (non-negative, summing to 1) at "
            "every node, leaves and internal nodes alike"
        )
    sf = a["surrogate_feature"]
    if np.any(sf[leaf] != -1):
        r.fail("leaves cannot have surrogate splits")
