"""The transforms of an outgoing forest (privacy/transforms.py), on real scikit-learn forests."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from fedforest.model.forest import PooledForest
from fedforest.model.surrogates import fit_surrogates
from fedforest.privacy.audit import check_forest, smallest_leaf_rows, threshold_midpoint_share
from fedforest.privacy.policy import PrivacyPolicy, ThresholdGrid
from fedforest.privacy.transforms import (
    add_count_noise,
    bootstrap_weights,
    enforce_min_leaf_rows,
    prepare_forest,
    recount,
    snap_thresholds,
)

from .privacy_data import (
    GRID,
    LEVELS,
    NAMES,
    assert_consistent,
    assert_predicts,
    fit_forest,
    fitted_site,
    hand_forest,
    make_data,
    payload_equal,
    round_trip,
)


@pytest.fixture(scope="module")
def site():
    return fitted_site()


# ------------------------------------------------------------------ machinery
def test_recount_with_the_bootstrap_reproduces_scikit_learn(site):
    X, y, rf, forest = site
    again = recount(forest, X, y, in_bag=bootstrap_weights(rf, len(X)))
    assert np.array_equal(again.children_left, forest.children_left)
    assert np.array_equal(again.threshold, forest.threshold)
    assert np.array_equal(again.n_node_samples, forest.n_node_samples)
    assert np.allclose(again.value, forest.value)
    assert np.array_equal(again.saw_missing, forest.saw_missing)


def test_recount_without_weights_counts_every_row_once(site):
    X, y, _, forest = site
    out = round_trip(recount(forest, X, y))
    assert np.all(out.n_node_samples[out.tree_start[:-1]] == len(X))
    assert_consistent(out)
    counts = out.value * out.n_node_samples[:, None]
    assert np.allclose(counts, np.round(counts))


# ------------------------------------------------------------ default policy
def test_the_default_policy_changes_nothing(site):
    X, y, rf, forest = site
    for policy in (PrivacyPolicy(), PrivacyPolicy.from_dict(None), PrivacyPolicy.from_dict({})):
        assert policy.is_default
        out = prepare_forest(forest, policy, X, y, in_bag=bootstrap_weights(rf, len(X)))
        assert payload_equal(out.to_payload(), forest.to_payload())
        assert check_forest(out, policy) == []
    assert enforce_min_leaf_rows(forest, 1) is forest
    assert PrivacyPolicy().to_dict()["share"] == dict.fromkeys(
        ("imputers", "feature_std", "surrogates", "intersection"), True
    )


# ------------------------------------------------------------ min_leaf_rows
def test_min_leaf_rows_makes_the_parent_a_leaf():
    # the root's left child has 2 rows: the root becomes a leaf with its own distribution
    out = enforce_min_leaf_rows(hand_forest(2), 3)
    assert out.n_nodes == 1 and out.feature[0] == -1 and out.children_left[0] == -1
    assert np.allclose(out.value[0], [0.5, 0.5]) and out.n_node_samples[0] == 10
    # 4 rows left, 6 right split 5 / 1: only the right subtree is pruned
    out = round_trip(enforce_min_leaf_rows(hand_forest(4), 3))
    assert list(out.children_left) == [1, -1, -1] and list(out.children_right) == [2, -1, -1]
    assert list(out.n_node_samples) == [10, 4, 6]
    assert np.allclose(out.value[2], [0.3, 0.7])


@pytest.mark.parametrize("k", [5, 25])
def test_min_leaf_rows_leaves_no_node_under_k(site, k):
    X, _, _, forest = site
    assert smallest_leaf_rows(forest) < k
    out = round_trip(enforce_min_leaf_rows(forest, k))
    assert smallest_leaf_rows(out) >= k and out.n_node_samples.min() >= k
    assert out.n_trees == forest.n_trees and out.n_nodes < forest.n_nodes
    assert not np.any(out.surrogate_feature[out.feature < 0] >= 0)
    assert check_forest(out, PrivacyPolicy(min_leaf_rows=k)) == []
    assert check_forest(forest, PrivacyPolicy(min_leaf_rows=k))
    assert_predicts(out, X)


def test_min_leaf_rows_refuses_when_no_tree_is_large_enough():
    with pytest.raises(ValueError, match="min_leaf_rows=11"):
        enforce_min_leaf_rows(hand_forest(4), 11)


# --------------------------------------------------------------- snapping
def test_snapped_thresholds_lie_on_the_grid_and_trees_stay_consistent(site):
    X, y, _, forest = site
    grid = ThresholdGrid.from_dict(GRID)
    assert threshold_midpoint_share(forest, X, pairs="any") > 0.9
    assert (
        0 < threshold_midpoint_share(forest, X) < threshold_midpoint_share(forest, X, pairs="any")
    )
    out = round_trip(snap_thresholds(forest, X, y, grid))
    finite = (out.feature >= 0) & np.isfinite(out.threshold)
    for j, name in enumerate(NAMES):
        t = out.threshold[finite & (out.feature == j)]
        if name == "cat":
            assert np.all(np.floor(t) + 0.5 == t) and np.all((t >= -0.5) & (t <= 3.5))
        elif name == "x1":
            assert np.isin(t, GRID["edges"]["x1"]).all()
        else:
            assert np.allclose(t / 0.5, np.round(t / 0.5))
    assert threshold_midpoint_share(out, X) == 0.0
    assert threshold_midpoint_share(out, X, pairs="any") < 0.05
    assert check_forest(out, PrivacyPolicy(threshold_grid=grid)) == []
    assert check_forest(forest, PrivacyPolicy(threshold_grid=grid))
    # re-routed: every row reaches each root, counts add up, no empty node
    assert np.all(out.n_node_samples[out.tree_start[:-1]] == len(X))
    assert_consistent(out)
    assert out.n_node_samples.min() >= 1
    assert_predicts(out, X)


def test_snapping_keeps_the_routing_of_category_codes(site):
    X, y, _, _ = site
    rf = RandomForestClassifier(n_estimators=4, random_state=0).fit(X[["cat"]], y)
    forest = PooledForest.from_sklearn(rf, ["cat"], owner="s1", categories={"cat": LEVELS})
    out = round_trip(snap_thresholds(forest, X[["cat"]], y, {"step": 1}))
    before = recount(forest, X[["cat"]], y)
    assert np.array_equal(out.children_left, before.children_left)
    assert np.array_equal(out.n_node_samples, before.n_node_samples)
    t = out.threshold[out.feature >= 0]
    assert np.all(np.floor(t) + 0.5 == t)


def test_snapping_also_snaps_and_rescores_surrogates(site):
    X, y, _, forest = site
    with_sur = fit_surrogates(forest, X, ["x0", "x1", "cat"], min_agreement=0.0, min_rows=6)
    assert np.any(with_sur.surrogate_feature >= 0)
    assert threshold_midpoint_share(with_sur, X, surrogates=True, pairs="any") > 0.9
    out = round_trip(snap_thresholds(with_sur, X, y, GRID, min_agreement=0.1))
    has = out.surrogate_feature >= 0
    assert has.any()
    assert np.all(out.surrogate_agreement[has] >= 0.1)
    assert threshold_midpoint_share(out, X, surrogates=True) == 0.0
    assert check_forest(out, PrivacyPolicy(threshold_grid=ThresholdGrid.from_dict(GRID))) == []


def test_snapping_refuses_an_uncovered_or_a_categorical_feature(site):
    X, y, _, forest = site
    with pytest.raises(ValueError, match=r"no rule for numeric features \['x0', 'x2', 'x3'\]"):
        snap_thresholds(forest, X, y, {"edges": {"x1": [0.0]}})
    with pytest.raises(ValueError, match="categorical features"):
        snap_thresholds(forest, X, y, {"step": 1, "steps": {"cat": 1}})


# ------------------------------------------------------------ count noise
@pytest.fixture(scope="module")
def big_leaves():
    X, y = make_data(n=2000, seed=1)
    _, forest = fit_forest(X, y, n_estimators=25, max_depth=2, bootstrap=False)
    return forest


@pytest.mark.parametrize("epsilon", [0.1, 0.5])
def test_count_noise_has_the_documented_variance(big_leaves, epsilon):
    forest = big_leaves
    leaf = forest.feature < 0
    true = (forest.value * forest.n_node_samples[:, None])[leaf]
    assert np.allclose(true, np.round(true))  # plain counts without a bootstrap
    far = true >= 15 / epsilon  # clipping at 0 practically never happens here
    diffs = []
    for seed in range(60):
        noisy = add_count_noise(forest, epsilon, random_state=seed)
        counts = (noisy.value * noisy.n_node_samples[:, None])[noisy.feature < 0]
        diffs.append((counts - true)[far])
    d = np.concatenate(diffs)
    assert d.size > 5000
    assert abs(d.mean()) < 0.1 / epsilon
    assert d.var() == pytest.approx(2 / epsilon**2, rel=0.1)


def test_count_noise_keeps_the_forest_valid(big_leaves):
    forest = big_leaves
    noisy = round_trip(add_count_noise(forest, 0.05, random_state=0))
    assert np.array_equal(noisy.feature, forest.feature)
    assert np.array_equal(noisy.threshold, forest.threshold)
    assert not np.array_equal(noisy.n_node_samples, forest.n_node_samples)
    left, right = noisy.global_children
    internal = noisy.feature >= 0
    n = noisy.n_node_samples
    assert np.all(n[left[internal]] <= n[internal]) and np.all(n[right[internal]] <= n[internal])
    # a root's distribution is the sum of its children's noisy counts, normalised
    kids = [left[0], right[0]]
    counts = noisy.value[kids] * n[kids, None]
    assert np.allclose(noisy.value[0], counts.sum(0) / counts.sum(), atol=0.01)
    with pytest.raises(ValueError, match="count_noise_epsilon"):
        add_count_noise(forest, 0)


# ------------------------------------------------------------ the pipeline
def test_prepare_forest_applies_every_step(site):
    X, y, rf, forest = site
    with_sur = fit_surrogates(forest, X, ["x0", "x1", "cat"])
    policy = PrivacyPolicy.from_dict(
        {
            "min_leaf_rows": 8,
            "threshold_grid": GRID,
            "count_noise_epsilon": 1.0,
            "share": {"surrogates": False},
        },
        "site.yaml",
    )
    out = prepare_forest(
        with_sur, policy, X, y, in_bag=bootstrap_weights(rf, len(X)), noise_state=0
    )
    out = round_trip(out)
    assert check_forest(out, policy) == []
    assert not np.any(out.surrogate_feature >= 0)
    assert smallest_leaf_rows(out) >= 8
    assert_predicts(out, X)
    with pytest.raises(ValueError, match="needs the site's rows"):
        prepare_forest(forest, policy)
