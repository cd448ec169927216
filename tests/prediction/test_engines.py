"""The two engines of the dynamic traversals behind one call each (prediction/engines.py)."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest import rules
from fedforest.model.inputs import to_global_matrix
from fedforest.prediction import engines
from fedforest.prediction.cache import forest_cache
from fedforest.prediction.draws import Draws
from fedforest.prediction.routing import route_leaves, route_marginal
from fedforest.prediction.strategies import Strategy


@pytest.fixture(scope="module")
def call(two_site_forest, table):
    """The pooled forest, a table lacking site b's private columns, and mp's strategy."""
    forest, rf_a, _ = two_site_forest
    X, _ = table
    Xg, present = to_global_matrix(X[["x0", "x1", "x2", "x3"]][:80], forest.feature_names, {})
    cache = forest_cache(forest)
    cf = cache.compiled(forest)
    none = np.full(Xg.shape, np.nan, dtype=np.float32)
    mp = Strategy(
        rules.get("mp").routing,
        forest,
        cf,
        Xg,
        none,
        {},
        np.full(forest.n_features, np.nan),
        2,
        Draws(0, Xg, forest.tree_of_node, cf.depth),
        cache,
    )
    return forest, cf, Xg, ~present, mp


def test_the_numpy_engine_is_never_numba():
    assert engines.kernels_for("numpy") is None
    assert engines.kernels_for("numpy", 10**9) is None


def test_auto_takes_numba_from_the_pairs_threshold_on():
    pytest.importorskip("numba")
    small = engines.AUTO_NUMBA_PAIRS - 1
    assert engines.kernels_for("auto", small) is None
    kernels = engines.kernels_for("auto", engines.AUTO_NUMBA_PAIRS)
    assert kernels is not None and kernels.__name__ == "fedforest.prediction.numba_kernels"
    assert engines.kernels_for("auto") is kernels  # an unknown size: numba when it loads
    assert engines.kernels_for("numba", 1) is kernels
    assert engines.load_kernels() == (kernels, None)


def test_marginal_is_the_trees_average_of_the_marginal_routing(call):
    forest, cf, Xg, absent, mp = call
    trees = np.arange(forest.n_trees)
    got = engines.marginal(None, cf, Xg, trees, mp, absent)
    dist = route_marginal(cf, Xg, trees, mp.right_probability, absent)
    assert np.allclose(got, dist.mean(axis=0), rtol=0, atol=1e-15)
    assert np.allclose(got.sum(axis=1), 1.0)


def test_weighted_marginals_average_each_weight_group_then_combine(call):
    forest, cf, Xg, absent, mp = call
    trees = np.arange(forest.n_trees)
    plain = engines.marginal(None, cf, Xg, trees, mp, absent)
    assert np.allclose(engines.marginal(None, cf, Xg, trees, mp, absent, np.full(30, 3.0)), plain)
    a_only = np.where(forest.tree_owner == 0, 1.0, 0.0)  # site b's trees weigh nothing
    own = engines.marginal(None, cf, Xg, trees[a_only > 0], mp, absent)
    assert np.allclose(engines.marginal(None, cf, Xg, trees, mp, absent, a_only), own)
    mixed = np.where(forest.tree_owner == 0, 2.0, 1.0)
    b_only = engines.marginal(None, cf, Xg, trees[a_only == 0], mp, absent)
    expected = (2.0 * 15 * own + 1.0 * 15 * b_only) / 45.0
    assert np.allclose(engines.marginal(None, cf, Xg, trees, mp, absent, mixed), expected)


def test_resolved_leaves_follow_the_learned_direction_without_a_rule(call, two_site_forest):
    forest, cf, Xg, _, _ = call
    _, rf_a, _ = two_site_forest
    complete = Xg[:, :4]  # site a's columns, all there
    trees = np.arange(15)  # site a's trees
    leaves = engines.resolved_leaves(None, cf, Xg, trees, None)
    assert np.array_equal(leaves, route_leaves(cf, Xg, trees, None))
    for t, tree in enumerate(rf_a.estimators_):
        assert np.array_equal(leaves[t], tree.apply(complete) + forest.tree_start[t])


def test_trees_are_summed_one_after_the_other():
    rng = np.random.default_rng(0)
    dist = rng.normal(size=(7, 5, 3)) * 10.0 ** rng.integers(-8, 8, size=(7, 1, 1))
    expected = np.zeros((5, 3))
    for t in range(7):
        expected = expected + dist[t]
    assert engines.sum_in_order(dist).tobytes() == expected.tobytes()
