"""The one traversal primitive against a naive per-row walk, on real scikit-learn forests."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from fedforest.model import traversal
from fedforest.model.forest import PooledForest
from fedforest.model.traversal import (
    BRANCH,
    DISCARD,
    LEFT,
    MISSING_KIND,
    RIGHT,
    STOP,
    CompiledForest,
    node_kinds,
    traverse,
)

NAMES = ["a", "b", "c", "d", "e"]
ABSENT = np.array([False, False, False, True, False])  # column d is missing for every row


@pytest.fixture(scope="module")
def case():
    """A forest trained on rows with NaN, and rows with NaN plus an absent column."""
    rng = np.random.default_rng(11)
    n = 300
    Z = rng.normal(size=(n, len(NAMES)))
    y = (Z[:, 0] + Z[:, 3] - 0.5 * Z[:, 1] + 0.3 * rng.normal(size=n) > 0).astype(int)
    Z[rng.random(Z.shape) < 0.1] = np.nan
    rf = RandomForestClassifier(n_estimators=7, max_depth=6, random_state=2).fit(Z, y)
    forest = PooledForest.from_sklearn(rf, NAMES, owner="s1", X=Z)
    assert forest.saw_missing.any() and not forest.saw_missing.all()
    X = rng.normal(size=(90, len(NAMES))).astype(np.float32)
    X[rng.random(X.shape) < 0.15] = np.nan
    X[:, ABSENT] = np.nan
    return forest, CompiledForest.build(forest), X, rf


def decide(nodes, rows):
    """Every decision occurs; deterministic in (node, row)."""
    return (np.asarray(nodes) * 7 + np.asarray(rows) * 3) % 5


def probability(nodes, rows):
    return ((np.asarray(nodes) * 13 + np.asarray(rows)) % 11) / 10.0


def naive(cf, kind, X, tree, row, resolve, weight):
    """One pair's walk, node by node: its visits (depth, node, value read) and ends."""
    visits, ends = [], []
    stack = [(int(cf.roots[tree]), weight, 0)]
    while stack:
        node, w, depth = stack.pop()
        node = int(node)
        k = kind[node]
        if k == -1:
            visits.append((depth, node, None))
            ends.append((node, w))
            continue
        if k == MISSING_KIND:
            visits.append((depth, node, None))
            decision = decide(node, row) if callable(resolve) else resolve
            if resolve is None:
                decision = cf.missing_right[node]
        else:
            x = X[row, k]
            visits.append((depth, node, "nan" if np.isnan(x) else float(x)))
            if not np.isnan(x):
                stack.append((cf.children[2 * node + (x > cf.threshold[node])], w, depth + 1))
                continue
            if resolve is None or cf.saw_missing[node]:
                stack.append((cf.children[2 * node + cf.missing_right[node]], w, depth + 1))
                continue
            decision = decide(node, row) if callable(resolve) else resolve
        if decision in (LEFT, RIGHT):
            stack.append((cf.children[2 * node + decision], w, depth + 1))
        elif decision == STOP:
            ends.append((node, w))
        elif decision == BRANCH:
            p = probability(node, row)
            stack.append((cf.children[2 * node], w * (1.0 - p), depth + 1))
            stack.append((cf.children[2 * node + 1], w * p, depth + 1))
    return sorted(visits, key=repr), sorted(ends)


def walked(cf, X, trees, **kwargs):
    """What traverse reports, per (tree, row): visits (depth, node, value read) and ends."""
    visits, ends = {}, {}
    weighted = kwargs.get("weight") is not None
    for chunk in traverse(cf, X, trees, **kwargs):
        m = chunk.hi - chunk.lo
        for level in chunk:
            assert level.node.shape == level.row.shape == level.pair.shape
            assert np.array_equal(cf.depth[level.node], np.full(level.node.size, level.depth))
            key = [(int(chunk.trees[p // m]), int(chunk.lo + p % m)) for p in level.pair.tolist()]
            assert [r for _, r in key] == level.row.tolist()
            values = ["nan" if np.isnan(v) else v for v in level.x.tolist()]
            read = dict(zip(level.split.tolist(), values, strict=True))
            for i, pair in enumerate(key):
                visits.setdefault(pair, []).append((level.depth, int(level.node[i]), read.get(i)))
            for i in level.ended.tolist():
                w = float(level.weight[i]) if weighted else 1.0
                ends.setdefault(key[i], []).append((int(level.node[i]), w))
            t = cf.threshold[level.node[level.split]]
            assert np.array_equal(level.above, level.x > t)
    return visits, ends


@pytest.mark.parametrize("resolve", [None, DISCARD, STOP, "mixed", BRANCH])
@pytest.mark.parametrize("by", ["rows", "trees"])
@pytest.mark.parametrize("with_kinds", [False, True])
def test_every_pair_walks_as_the_naive_walk(case, resolve, by, with_kinds):
    forest, cf, X, _ = case
    kind = node_kinds(cf, ABSENT) if with_kinds else None
    assert not with_kinds or (kind == MISSING_KIND).any()
    trees = np.array([5, 0, 3, 1])
    rule = decide if resolve == "mixed" else resolve
    weight = 1.0 if resolve in (BRANCH, "mixed") else None
    visits, ends = walked(
        cf, X, trees, by=by, resolve=rule, right_probability=probability, kind=kind, weight=weight
    )
    used = cf.feature if kind is None else kind
    for tree in trees.tolist():
        for row in range(X.shape[0]):
            want_visits, want_ends = naive(cf, used, X, tree, row, rule, 1.0)
            got_visits = sorted(visits.get((tree, row), []), key=repr)
            assert got_visits == want_visits
            assert sorted(ends.get((tree, row), [])) == want_ends  # weights bit for bit


def test_learned_walk_is_scikit_learns(case):
    # resolve=None: every missing value takes the learned direction, as scikit-learn routes it
    forest, cf, X, rf = case
    trees = np.arange(forest.n_trees)
    leaves = np.full((forest.n_trees, X.shape[0]), -1)
    for chunk in traverse(cf, X, trees):
        for level in chunk:
            rows = level.row[level.ended]
            leaves[level.pair[level.ended] // (chunk.hi - chunk.lo), rows] = level.node[level.ended]
    assert (leaves >= 0).all()
    local = leaves - forest.tree_start[:-1, None]
    assert np.array_equal(local, rf.apply(X).T)


@pytest.mark.parametrize("by", ["rows", "trees"])
def test_chunks_change_nothing(case, monkeypatch, by):
    forest, cf, X, _ = case
    trees = np.arange(forest.n_trees)
    kwargs = dict(by=by, resolve=decide, right_probability=probability, weight=1.0)
    whole = walked(cf, X, trees, **kwargs)
    assert len(list(traverse(cf, X, trees, **kwargs))) == 1
    monkeypatch.setattr(traversal, "MAX_PAIRS", 50)
    chunks = list(traverse(cf, X, trees, **kwargs))
    assert len(chunks) > 3
    assert sum(c.n_pairs for c in chunks) == forest.n_trees * X.shape[0]
    assert walked(cf, X, trees, **kwargs) == whole


def test_resolver_sees_each_depth_once_in_tree_row_order(case):
    forest, cf, X, _ = case
    trees = np.array([4, 2, 6])
    calls = []

    def record(nodes, rows):
        calls.append((nodes.copy(), rows.copy()))
        return decide(nodes, rows)

    for chunk in traverse(cf, X, trees, resolve=record):
        for _ in chunk:
            pass
    assert calls
    position = {int(t): i for i, t in enumerate(trees)}
    depths = []
    for nodes, rows in calls:
        assert nodes.size and np.isnan(X[rows, cf.feature[nodes]]).all()
        assert not cf.saw_missing[nodes].any()
        order = [
            (position[int(forest.tree_of_node[n])], int(r))
            for n, r in zip(nodes, rows, strict=True)
        ]
        assert order == sorted(order)
        depth = set(cf.depth[nodes].tolist())
        assert len(depth) == 1
        depths.append(depth.pop())
    assert depths == sorted(set(depths))


def test_weights_of_zero_are_not_walked(case):
    forest, cf, X, _ = case
    trees = np.arange(3)
    weight = np.ones((3, X.shape[0]))
    weight[1, ::2] = 0.0
    weight[2] = 2.5
    seen = set()
    for chunk in traverse(cf, X, trees, by="trees", weight=weight):
        for level in chunk:
            if level.depth == 0:
                seen |= set(level.pair.tolist())
            assert np.array_equal(level.weight, weight.reshape(-1)[level.pair])  # carried unchanged
    n = X.shape[0]
    expected = {p for p in range(3 * n) if weight.reshape(-1)[p] > 0}
    assert seen == expected


def test_layout_has_one_dtype_per_field(case):
    forest, cf, _, _ = case
    dtypes = {
        "roots": np.int64,
        "feature": np.int64,
        "threshold": np.float64,
        "children": np.int64,
        "saw_missing": np.bool_,
        "missing_right": np.int64,
        "depth": np.int64,
        "right_fraction": np.float64,
        "value": np.float64,
        "vote": np.float64,
        "surrogate_feature": np.int64,
        "surrogate_threshold": np.float64,
        "surrogate_left_le": np.bool_,
        "order": np.int64,
    }
    assert set(cf._fields) == set(dtypes)
    for name, dtype in dtypes.items():
        array = getattr(cf, name)
        assert array.dtype == dtype and array.flags.c_contiguous, name
    assert np.array_equal(cf.depth, forest.node_depth)
    assert cf.children.shape == (2 * forest.n_nodes,)


def test_order_is_the_depth_first_left_first_walk(case):
    forest, cf, _, _ = case
    expected = np.empty(forest.n_nodes, dtype=np.int64)
    position = 0
    for root in cf.roots:
        stack = [int(root)]
        while stack:
            node = stack.pop()
            expected[node] = position
            position += 1
            if cf.feature[node] >= 0:
                stack += [int(cf.children[2 * node + 1]), int(cf.children[2 * node])]
    assert np.array_equal(cf.order, expected)


def test_order_does_not_depend_on_how_a_tree_stores_its_nodes():
    # one tree stored breadth first: root 0, children 1 (left) and 2, 1's children 3 and 4
    left = np.array([1, 3, -1, -1, -1])
    right = np.array([2, 4, -1, -1, -1])
    internal = left >= 0
    depth = np.array([0, 1, 1, 2, 2])
    order = traversal.preorder(np.array([0, 5]), left, right, depth, internal)
    assert order.tolist() == [0, 1, 4, 2, 3]
