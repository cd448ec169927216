"""The numpy engine: leaf routing, marginal routing, averaging, the sigmoid (prediction/routing.py)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from conftest import make_tree_forest
from fedforest.model.inputs import to_global_matrix
from fedforest.model.traversal import DISCARD, LEFT, RIGHT, STOP, CompiledForest
from fedforest.prediction import routing

#: One tree: root "a" <= 0 -> leaf [0.8, 0.2] (6 rows), else "b" <= 1 -> leaves
#: [0.4, 0.6] (3 rows) and [0.0, 1.0] (1 row).
TREE = [
    ("split", "a", 0.0, 1, 2, 10),
    ("leaf", [0.8, 0.2], 6),
    ("split", "b", 1.0, 3, 4, 4),
    ("leaf", [0.4, 0.6], 3),
    ("leaf", [0.0, 1.0], 1),
]


@pytest.fixture(scope="module")
def hand():
    forest = make_tree_forest([TREE], ["a", "b"])
    return forest, CompiledForest.build(forest)


def rows(*values):
    return np.array(values, dtype=np.float32)


@pytest.fixture(scope="module")
def site_a(two_site_forest, table):
    """Site a's scikit-learn forest, its pooled trees and the table as a global matrix."""
    forest, rf_a, _ = two_site_forest
    X, _ = table
    Xg, _ = to_global_matrix(X, forest.feature_names, forest.categories)
    trees = np.flatnonzero(forest.tree_owner == forest.owners.index("a"))
    return forest, CompiledForest.build(forest), rf_a, X, Xg, trees


# ------------------------------------------------------------------ sigmoid
def test_sigmoid_is_the_sigmoid():
    rng = np.random.default_rng(0)
    z = np.concatenate([rng.normal(scale=s, size=20_000) for s in (0.01, 1, 10, 100)])
    z = np.concatenate([z, [0.0, -0.0, 1e-300, 36.0, 37.0, 41.0, -40.0, -700.0, -709.0]])
    got, want = routing.sigmoid(z), expit(z)
    assert np.all(np.abs(got - want) <= 4.5e-16 * want + 1e-300)  # 2 ulp
    special = routing.sigmoid(np.array([np.inf, -np.inf, np.nan, 800.0, -800.0, 0.0]))
    assert special[:2].tolist() == [1.0, 0.0] and np.isnan(special[2])
    assert special[3:].tolist() == [1.0, 0.0, 0.5]


def test_factored_probability_is_the_sigmoid():
    # sigmoid((x - t) / s) as exp(-(x - c) / s) * exp((t - c) / s), for the centre c
    rng = np.random.default_rng(2)
    x, t = rng.normal(scale=3, size=(2, 50_000)) + 40.0
    s, c = 1.7, 41.0
    a, b = routing.exp_factor(-(x - c) / s), routing.exp_factor((t - c) / s)
    got, want = routing.factored_right(a, b), expit((x - t) / s)
    assert np.all(np.abs(got - want) <= 1e-14)
    # beyond FACTOR_LIMIT there is no factor (NaN), so the probability is taken directly
    limit = routing.FACTOR_LIMIT
    edge = routing.exp_factor(np.array([limit, -limit, limit * 1.01, -np.inf, np.nan]))
    assert np.isfinite(edge[:2]).all() and np.isnan(edge[2:]).all()
    assert np.isnan(routing.factored_right(np.array([np.nan, 1.0]), np.array([1.0, np.nan]))).all()


def test_the_sigmoid_keeps_the_shape_of_its_input_across_its_pieces():
    z = np.linspace(-50, 50, 5 * 5001).reshape(5, -1)  # more than one piece
    out = routing.sigmoid(z)
    assert out.shape == z.shape
    assert np.array_equal(out.reshape(-1), routing.sigmoid(z.reshape(-1)))


# ------------------------------------------------------------------ leaves
def test_complete_rows_reach_scikit_learns_leaves(site_a):
    forest, cf, rf_a, X, Xg, trees = site_a
    leaves = routing.route_leaves(cf, Xg, trees, None)
    cols = forest.feature_names
    for i, (t, tree) in enumerate(zip(trees, rf_a.estimators_, strict=True)):
        local = tree.apply(X[[c for c in cols if c in rf_a.feature_names_in_]].to_numpy(np.float32))
        assert np.array_equal(leaves[i], local + forest.tree_start[t])


def test_all_kept_trees_average_to_scikit_learns_predict_proba_bit_for_bit(site_a):
    forest, cf, rf_a, X, Xg, trees = site_a
    leaves = routing.route_leaves(cf, Xg, trees, None)
    proba, kept = routing.average_leaves(cf, leaves, "soft")
    assert proba.tobytes() == rf_a.predict_proba(X[list(rf_a.feature_names_in_)]).tobytes()
    assert np.all(kept == len(trees))
    votes, _ = routing.average_leaves(cf, leaves, "hard")
    assert np.allclose(votes.sum(axis=1), 1.0) and set(np.unique(votes * len(trees))) <= set(
        range(len(trees) + 1)
    )


def test_the_resolver_decides_only_unresolvable_pairs(hand):
    forest, cf = hand
    X = rows([-1.0, np.nan], [np.nan, 0.5], [np.nan, 2.0], [2.0, np.nan])
    asked = []

    def resolve(nodes, rows_):
        asked.append((nodes.tolist(), rows_.tolist()))
        return np.where(rows_ == 1, RIGHT, np.where(rows_ == 2, LEFT, STOP))

    leaves = routing.route_leaves(cf, X, np.array([0]), resolve)
    # row 0 never reads b; rows 1 and 2 are asked at the root; row 3 at node 2 (on b)
    assert sorted(p for nodes, rows_ in asked for p in zip(nodes, rows_, strict=True)) == [
        (0, 1),
        (0, 2),
        (2, 3),
    ]
    assert leaves.tolist() == [[1, 3, 1, 2]]  # row 3 stopped at node 2 itself


def test_a_discarded_pair_ends_nowhere_and_counts_in_no_average(hand):
    forest, cf = hand
    X = rows([np.nan, 0.0], [1.0, 0.0])
    leaves = routing.route_leaves(cf, X, np.array([0]), lambda n, r: np.full(n.size, DISCARD))
    assert leaves.tolist() == [[-1, 3]]
    proba, kept = routing.average_leaves(cf, leaves, "soft")
    assert kept.tolist() == [0, 1]
    assert proba.tolist() == [[0.0, 0.0], [0.4, 0.6]]


def test_a_node_that_saw_missing_values_follows_its_learned_direction():
    forest = make_tree_forest(
        [
            [("split", "a", 0.0, 1, 2, 10, {"saw_missing": True, "missing_left": False})]
            + TREE[1:2]
            + [("leaf", [0.1, 0.9], 4)]
        ],
        ["a"],
    )
    cf = CompiledForest.build(forest)

    def never(nodes, rows_):
        raise AssertionError("a learned direction needs no resolver")

    assert routing.route_leaves(cf, rows([np.nan]), np.array([0]), never).tolist() == [[2]]


def test_weighted_averages_weigh_the_kept_trees(site_a):
    _, cf, _, _, Xg, trees = site_a
    leaves = routing.route_leaves(cf, Xg[:40], trees, None)
    leaves[0, :10] = -1  # the first tree discarded for ten rows
    weights = np.ones(len(trees))
    plain, kept = routing.average_leaves(cf, leaves, "soft")
    equal, kept_w = routing.average_leaves(cf, leaves, "soft", weights)
    assert np.allclose(plain, equal) and np.array_equal(kept, kept_w)
    assert kept[:10].tolist() == [len(trees) - 1] * 10
    only_first = np.zeros(len(trees))
    only_first[0] = 2.0
    first, _ = routing.average_leaves(cf, leaves, "soft", only_first)
    assert np.array_equal(first[10:], cf.value[leaves[0, 10:]])
    assert np.all(first[:10] == 0)  # no weight kept: all zero


# ------------------------------------------------------------------ marginal
def test_marginal_routing_weighs_both_children_by_the_probability(hand):
    forest, cf = hand
    X = rows([np.nan, 0.5], [np.nan, np.nan], [-1.0, 5.0])
    dist = routing.route_marginal(cf, X, np.array([0]), lambda n, r: np.full(n.size, 0.25))
    left, mid, far = np.array([0.8, 0.2]), np.array([0.4, 0.6]), np.array([0.0, 1.0])
    assert np.allclose(dist[0, 0], 0.75 * left + 0.25 * mid)
    assert np.allclose(dist[0, 1], 0.75 * left + 0.25 * (0.75 * mid + 0.25 * far))
    assert np.array_equal(dist[0, 2], left)  # nothing missing on its path: one leaf


def test_marginal_routing_of_complete_rows_is_their_leaf(site_a):
    _, cf, _, _, Xg, trees = site_a
    dist = routing.route_marginal(cf, Xg[:50], trees, lambda n, r: np.full(n.size, np.nan))
    leaves = routing.route_leaves(cf, Xg[:50], trees, None)
    assert np.array_equal(dist, cf.value[leaves])


def test_an_absent_column_gives_the_same_marginal_as_nan_values(site_a):
    forest, cf, _, _, Xg, trees = site_a
    X = Xg[:60].copy()
    j = forest.feature_names.index("x2")
    X[:, j] = np.nan
    absent = np.zeros(forest.n_features, bool)
    absent[j] = True
    p = cf.right_fraction
    both = [routing.route_marginal(cf, X, trees, lambda n, r: p[n], a) for a in (None, absent)]
    assert np.array_equal(both[0], both[1])
    assert np.allclose(both[0].sum(axis=2), 1.0)
