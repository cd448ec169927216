"""A routing rule applied to one prediction call (prediction/strategies.py), on a real forest."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from fedforest import rules
from fedforest.model.traversal import DISCARD, LEFT, RIGHT, STOP
from fedforest.prediction import fastpath
from fedforest.prediction.pipeline import prepare
from fedforest.prediction.routing import route_leaves

from .conftest import NAMES, settings

C, K = NAMES.index("c"), NAMES.index("k")


def strategy_of(pooled_site, name, depth_threshold=1, X=None):
    """The call's Strategy of rule ``name`` for ``X`` (default: the table lacking c and k)."""
    call = prepare(
        settings(pooled_site, depth_threshold),
        pooled_site.lacking if X is None else X,
        rules.get(name),
    )
    return call, call.strategy


def unresolvable(call):
    """Every (node, row) pair of an internal node on a feature the row lacks."""
    cf = call.cf
    internal = np.flatnonzero(cf.feature >= 0)
    nodes, rows = np.meshgrid(internal, np.arange(call.n_rows), indexing="ij")
    nodes, rows = nodes.ravel(), rows.ravel()
    missing = np.isnan(call.X[rows, cf.feature[nodes]]) & ~cf.saw_missing[nodes]
    return nodes[missing], rows[missing]


def test_fpv_discards_and_node_stops_at_every_unresolvable_pair(pooled_site):
    call, fpv = strategy_of(pooled_site, "fpv")
    nodes, rows = unresolvable(call)
    assert nodes.size and np.all(fpv.resolver(nodes, rows) == DISCARD)
    _, node = strategy_of(pooled_site, "node")
    assert np.all(node.resolver(nodes, rows) == STOP)


def test_pr_discards_above_the_depth_threshold_and_draws_below_it(pooled_site):
    call, pr = strategy_of(pooled_site, "pr", depth_threshold=2)
    nodes, rows = unresolvable(call)
    decision = pr.resolver(nodes, rows)
    shallow = call.cf.depth[nodes] < 2
    assert shallow.any() and (~shallow).any()
    assert np.all(decision[shallow] == DISCARD)
    assert set(decision[~shallow]) == {LEFT, RIGHT}
    # a pure function of each pair: asked in another order, or alone, the same
    order = np.random.default_rng(0).permutation(nodes.size)
    assert np.array_equal(pr.resolver(nodes[order], rows[order]), decision[order])
    assert pr.resolver(nodes[-1:], rows[-1:])[0] == decision[-1]


def test_mi_compares_the_imputed_value_with_the_threshold(pooled_site):
    call, mi = strategy_of(pooled_site, "mi", depth_threshold=0)
    nodes, rows = unresolvable(call)
    on_c = call.cf.feature[nodes] == C
    decision = mi.resolver(nodes, rows)
    imputed = mi.imputed[rows[on_c], C]
    assert np.isfinite(imputed).all()
    expected = np.where(imputed > call.cf.threshold[nodes[on_c]], RIGHT, LEFT)
    assert np.array_equal(decision[on_c], expected)


def test_ss_follows_the_surrogate_where_the_row_has_its_feature(pooled_site):
    call, ss = strategy_of(pooled_site, "ss", depth_threshold=0)
    nodes, rows = unresolvable(call)
    forest = pooled_site.forest
    sf = forest.surrogate_feature[nodes]
    has = sf >= 0
    has[has] = ~np.isnan(call.X[rows[has], sf[has]])
    assert has.any()
    xs = call.X[rows[has], sf[has]]
    left = (xs <= forest.surrogate_threshold[nodes[has]]) == forest.surrogate_left_le[nodes[has]]
    assert np.array_equal(ss.resolver(nodes[has], rows[has]), np.where(left, LEFT, RIGHT))


def test_the_probability_of_going_right(pooled_site):
    call, mp = strategy_of(pooled_site, "mp")
    nodes, rows = unresolvable(call)
    p = mp.right_probability(nodes, rows)
    assert np.all((p >= 0) & (p <= 1))
    cf = call.cf
    # a numeric imputer: sigmoid((x_hat - t) / sigma)
    on_c = cf.feature[nodes] == C
    z = (mp.imputed[rows[on_c], C] - cf.threshold[nodes[on_c]]) / pooled_site.sigma[C]
    assert np.allclose(p[on_c], expit(z), rtol=0, atol=1e-12)
    # a categorical imputer: the probability of the levels above the cut
    on_k = cf.feature[nodes] == K
    code = np.floor(cf.threshold[nodes[on_k]]).astype(int)
    cdf = mp.level_cdf[K][rows[on_k], code]
    assert np.allclose(p[on_k], 1 - cdf)
    # without imputers: N_right / N_node
    bare = prepare(
        settings(pooled_site, imputers=False), pooled_site.lacking, rules.get("mp")
    ).strategy
    assert np.array_equal(bare.right_probability(nodes, rows), cf.right_fraction[nodes])


def test_a_restricted_strategy_decides_its_rows_as_the_whole_did(pooled_site):
    call, ipr = strategy_of(pooled_site, "ipr", depth_threshold=0)
    nodes, rows = unresolvable(call)
    mask = np.zeros(call.n_rows, bool)
    mask[1::2] = True
    sub = ipr.restricted(mask)
    local = np.cumsum(mask) - 1
    pick = mask[rows]
    assert np.array_equal(
        sub.resolver(nodes[pick], local[rows[pick]]), ipr.resolver(nodes[pick], rows[pick])
    )
    assert np.array_equal(
        sub.right_probability(nodes[pick], local[rows[pick]]),
        ipr.right_probability(nodes[pick], rows[pick]),
    )


@pytest.mark.parametrize("name", ["fpv", "pr", "mi", "ss", "node"])
def test_the_rewritten_trees_route_as_the_resolver(pooled_site, name):
    complete = pooled_site.test[["a", "b"]]  # no NaN: only whole columns are missing
    call, s = strategy_of(pooled_site, name, depth_threshold=1, X=complete)
    if name == "mi":  # the rewritten trees take the rows with an imputed value
        assert np.isfinite(s.imputed[:, [C, K]]).all()
    arrays, discard, random_depths, n_columns = s.static_trees(call.absent)
    forest = pooled_site.forest
    trees = np.arange(forest.n_trees)
    treeset = fastpath.TreeSet(
        forest.tree_start,
        trees,
        n_node_samples=forest.n_node_samples,
        n_columns=n_columns,
        random_depths=random_depths,
        **arrays,
    )
    X_aug = np.zeros((call.n_rows, n_columns), dtype=np.float32)
    X_aug[:, : forest.n_features] = call.X
    X_aug[:, forest.n_features : 2 * forest.n_features] = s.imputed
    static = treeset.apply(X_aug, forest.n_features, call.draws)
    static[discard[static]] = -1
    assert np.array_equal(static, route_leaves(call.cf, call.X, trees, s.resolver))
    if name != "ss":  # ss flips a coin at the nodes without a surrogate
        assert (name == "pr") == any(d.size for d in random_depths)


def test_guesses_says_whether_rows_can_meet_a_draw(pooled_site):
    complete = pooled_site.test[["a", "b"]]
    call, pr = strategy_of(pooled_site, "pr", depth_threshold=1, X=complete)
    assert pr.guesses(call.absent)
    assert not pr.guesses(np.zeros_like(call.absent))  # nothing absent: no draw
    _, fpv = strategy_of(pooled_site, "fpv", X=complete)
    assert not fpv.guesses(call.absent)
    _, deep = strategy_of(pooled_site, "pr", depth_threshold=99, X=complete)
    assert not deep.guesses(call.absent)  # every pr node discards above the threshold


def test_the_kernel_tables_describe_each_node_and_feature(pooled_site):
    call, mp = strategy_of(pooled_site, "mp")
    tables = mp.kernel_tables()
    cf = call.cf
    kind = np.where(cf.feature == C, 1, np.where(cf.feature == K, 2, 0))
    assert np.array_equal(tables["node_kind"], kind)
    assert tables["n_levels"].tolist() == [0, 0, 0, 3] and tables["cdf_start"][K] == 0
    assert tables["cdf"].shape == (call.n_rows, 3)
    assert np.allclose(tables["cdf"][:, -1], 1.0)
    assert np.allclose(tables["inv_sigma"], 1 / pooled_site.sigma)
    assert tables["imputed"].dtype == np.float32 and tables["row_factor"].shape == (call.n_rows, 1)
    # a factor per numeric split (sigma known), none at leaves and categorical splits
    assert np.isnan(tables["node_factor"][(cf.feature < 0) | (cf.feature == K)]).all()
    assert np.isfinite(tables["node_factor"][cf.feature == C]).all()
