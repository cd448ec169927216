"""Regression trees through every privacy transform, count noise and DP mode."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedforest.errors import ConfigError
from fedforest.federation.training import fit_site_models
from fedforest.privacy.audit import check_forest, smallest_leaf_rows, threshold_midpoint_share
from fedforest.privacy.dp_forest import fit_dp_forest
from fedforest.privacy.levels import hide_rare_levels
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
    RANGES,
    TARGET_RANGE,
    assert_consistent,
    assert_predicts_numbers,
    fit_regressor,
    hand_regression_forest,
    make_regression_data,
    node_rows,
    regression_site,
    round_trip,
)

STRUCTURE = ("tree_start", "children_left", "children_right", "feature", "threshold")


@pytest.fixture(scope="module")
def site():
    return regression_site()


def assert_means_between_children(forest):
    """An internal node's mean lies between its children's (a count-weighted mean of them)."""
    left, right = forest.global_children
    internal = np.flatnonzero(forest.feature >= 0)
    v = forest.value[:, 0]
    lo = np.minimum(v[left[internal]], v[right[internal]])
    hi = np.maximum(v[left[internal]], v[right[internal]])
    assert np.all((v[internal] >= lo - 1e-9) & (v[internal] <= hi + 1e-9))


# ------------------------------------------------------------------ recount
def test_recount_with_the_bootstrap_reproduces_scikit_learn_means(site):
    X, y, rf, forest = site
    again = recount(forest, X, y, in_bag=bootstrap_weights(rf, len(X)))
    for key in STRUCTURE:
        assert np.array_equal(getattr(again, key), getattr(forest, key)), key
    assert again.is_regression and again.value.shape == (forest.n_nodes, 1)
    assert np.array_equal(again.n_node_samples, forest.n_node_samples)
    assert np.allclose(again.value, forest.value, rtol=1e-9, atol=1e-9)


def test_snapping_recounts_the_exact_mean_of_y_at_every_node(site):
    X, y, rf, forest = site
    out = round_trip(snap_thresholds(forest, X, y, GRID))
    assert check_forest(out, PrivacyPolicy(threshold_grid=ThresholdGrid.from_dict(GRID))) == []
    assert threshold_midpoint_share(out, X) == 0.0
    rows = node_rows(out, X)
    assert all(r.size for r in rows)  # empty sides were collapsed
    assert np.array_equal(out.n_node_samples, [r.size for r in rows])
    assert np.allclose(out.value[:, 0], [y[r].mean() for r in rows], rtol=1e-12, atol=1e-12)
    assert_consistent(out)
    # with the bootstrap: each node's weighted mean of y, its distinct rows as the count
    weights = bootstrap_weights(rf, len(X))
    bagged = snap_thresholds(forest, X, y, GRID, in_bag=weights)
    tree = bagged.tree_of_node
    rows = node_rows(bagged, X)
    for node in range(bagged.n_nodes):
        w = weights[tree[node], rows[node]]
        assert bagged.n_node_samples[node] == np.count_nonzero(w)
        assert bagged.value[node, 0] == pytest.approx(np.average(y[rows[node]], weights=w))


def test_recount_refuses_targets_that_are_not_finite_numbers(site):
    X, y, _, forest = site
    with pytest.raises(ValueError, match="must be finite; 1 values"):
        recount(forest, X, np.where(np.arange(len(y)) == 3, np.nan, y))
    with pytest.raises(ValueError, match="must be numbers"):
        recount(forest, X, np.array(["a"] * len(y)))


# ------------------------------------------------------------ min_leaf_rows
def test_min_leaf_rows_keeps_each_node_its_own_mean(site):
    out = round_trip(enforce_min_leaf_rows(hand_regression_forest(2), 3))
    assert out.n_nodes == 1 and out.is_regression
    assert out.value[0, 0] == 2.0 and out.n_node_samples[0] == 10
    out = round_trip(enforce_min_leaf_rows(hand_regression_forest(4), 3))
    assert list(out.n_node_samples) == [10, 4, 6]
    assert np.allclose(out.value[:, 0], [2.0, 1.0, 16 / 6])
    # a real forest: every node kept (leaf or not) still holds its rows' (bootstrap) mean
    X, y, rf, forest = site
    weights = bootstrap_weights(rf, len(X))
    for k in (5, 25):
        pruned = round_trip(enforce_min_leaf_rows(forest, k))
        assert smallest_leaf_rows(pruned) >= k and pruned.n_nodes < forest.n_nodes
        assert check_forest(pruned, PrivacyPolicy(min_leaf_rows=k)) == []
        again = recount(pruned, X, y, in_bag=weights)
        assert np.array_equal(again.n_node_samples, pruned.n_node_samples)
        assert np.allclose(again.value, pruned.value, rtol=1e-9, atol=1e-9)
        assert_predicts_numbers(pruned, X)
    assert check_forest(forest, PrivacyPolicy(min_leaf_rows=5))


# -------------------------------------------------------------- count noise
@pytest.fixture(scope="module")
def big_leaves():
    X, y = make_regression_data(n=2000, seed=1)
    _, forest = fit_regressor(X, y, n_estimators=20, max_depth=2, bootstrap=False)
    return X, y, forest


def test_count_noise_on_sums_and_counts_keeps_nodes_over_k_and_means_finite(big_leaves):
    X, y, forest = big_leaves
    for epsilon, k in ((0.05, 5), (1.0, 40)):
        noisy = add_count_noise(forest, epsilon, random_state=0)
        for key in STRUCTURE:
            assert np.array_equal(getattr(noisy, key), getattr(forest, key)), key
        assert not np.array_equal(noisy.value, forest.value)
        assert np.isfinite(noisy.value).all() and noisy.n_node_samples.min() >= 1
        assert_means_between_children(noisy)
        left, right = noisy.global_children
        internal = noisy.feature >= 0
        n = noisy.n_node_samples
        assert np.all(n[left[internal]] <= n[internal])
        assert np.all(n[right[internal]] <= n[internal])
        sent = round_trip(enforce_min_leaf_rows(noisy, k))
        assert sent.n_node_samples.min() >= k
        assert check_forest(sent, PrivacyPolicy(min_leaf_rows=k)) == []
        assert_predicts_numbers(sent, X)
    # a public target range: every mean sent inside it
    bounded = add_count_noise(forest, 0.01, random_state=1, target_range=(-2, 2))
    assert np.all((bounded.value >= -2) & (bounded.value <= 2))
    with pytest.raises(ValueError, match="target_range must be"):
        add_count_noise(forest, 1.0, target_range=(3, 3))


def test_count_noise_on_regression_leaves_has_the_documented_scale(big_leaves):
    _, _, forest = big_leaves
    epsilon = 0.5
    leaf = forest.feature < 0
    n, mean = forest.n_node_samples[leaf], forest.value[leaf, 0]
    count_noise, mean_error = [], []
    for seed in range(40):
        noisy = add_count_noise(forest, epsilon, random_state=seed)
        count_noise.append(noisy.n_node_samples[leaf] - n)
        mean_error.append(noisy.value[leaf, 0] - mean)
    d = np.concatenate(count_noise)
    assert d.var() == pytest.approx(2 * (2 / epsilon) ** 2 + 1 / 12, rel=0.2)  # rounded
    # means: a noisy sum over a noisy count of hundreds of rows, about h * Laplace / n
    assert np.abs(np.concatenate(mean_error)).mean() < 0.2


def test_count_noise_without_the_rows_works_on_a_bootstrap_forest(site):
    """The FLARE filter's case: the counts and means as sent, no rows."""
    X, _, _, forest = site
    out = round_trip(enforce_min_leaf_rows(add_count_noise(forest, 1.0, random_state=2), 5))
    assert smallest_leaf_rows(out) >= 5 and np.isfinite(out.value).all()
    assert_predicts_numbers(out, X)
    with pytest.raises(ValueError, match="count_noise_epsilon"):
        add_count_noise(forest, -1.0)


# ------------------------------------------------------------ the pipeline
def test_prepare_forest_applies_every_step_to_a_regression_forest(site):
    X, y, rf, forest = site
    policy = PrivacyPolicy.from_dict(
        {"min_leaf_rows": 8, "threshold_grid": GRID, "count_noise_epsilon": 1.0}, "site.yaml"
    )
    out = round_trip(
        prepare_forest(forest, policy, X, y, in_bag=bootstrap_weights(rf, len(X)), noise_state=0)
    )
    assert out.is_regression and check_forest(out, policy) == []
    assert smallest_leaf_rows(out) >= 8
    assert_predicts_numbers(out, X)


# ----------------------------------------------------- through the site's training
OWN = ["x0", "x1", "x3", "cat"]
SHARED = ["x0", "x1"]
FOREST = {"n_estimators": 6, "max_depth": None, "min_samples_leaf": 1, "max_features": "sqrt"}


def fit_regression_site(policy, X, y):
    return fit_site_models(
        "s1",
        X,
        y,
        OWN,
        SHARED,
        {"cat": LEVELS},
        FOREST,
        {"min_agreement": 0.1, "min_rows": 6},
        random_state=0,
        intersection_columns=SHARED,
        privacy=policy,
        classes=[],
        task="regression",
    )


def test_a_regression_site_sends_what_its_policy_allows(site):
    X, y, _, _ = site
    grid = {"step": 0.5, "edges": {"x1": [-2.0, -0.7, 0.0, 0.9, 2.5]}}
    policy = PrivacyPolicy.from_dict({"min_leaf_rows": 5, "threshold_grid": grid}, "site.yaml")
    models = fit_regression_site(policy, X, y)
    for forest in (models.forest, models.intersection):
        forest = round_trip(forest)
        assert forest.is_regression and check_forest(forest, policy) == []
        assert smallest_leaf_rows(forest) >= 5
        assert threshold_midpoint_share(forest, X[forest.feature_names]) == 0.0
        assert_predicts_numbers(forest, X[forest.feature_names])
    assert len(models.imputers) and models.feature_std
    withheld = PrivacyPolicy.from_dict(
        {
            "count_noise_epsilon": 2.0,
            "share": {"imputers": False, "feature_std": False, "surrogates": False},
        },
        "site.yaml",
    )
    models = fit_regression_site(withheld, X, y)
    assert not len(models.imputers) and models.feature_std == {}
    assert not np.any(models.forest.surrogate_feature >= 0)
    assert check_forest(models.forest, withheld) == []


def test_rare_levels_of_a_regression_table_leave_the_target_alone():
    X, y = make_regression_data(n=60)
    frame = X.assign(cat=pd.Series(np.array(LEVELS)[X["cat"].astype(int)]), y=y)
    frame.loc[:2, "cat"] = "rare"
    out, hidden = hide_rare_levels(frame, ["cat"], 5, target="y")
    assert hidden == {"cat": ["rare"]}
    assert (out.loc[:2, "cat"] == "(other)").all()
    assert np.array_equal(out["y"].to_numpy(), y)


# ------------------------------------------------------------------ DP mode
def dp(X, y, seed=7, noise=1, n_trees=6, epsilon=1.0, **kwargs):
    """A DP regression forest of depth 4 on the test rows (``TARGET_RANGE`` by default)."""
    args = {"task": "regression", "target_range": TARGET_RANGE, **kwargs}
    return fit_dp_forest(
        X, y, RANGES, {"cat": LEVELS}, n_trees, 4, epsilon, seed, noise_state=noise, **args
    )


def test_dp_regression_structure_does_not_depend_on_the_rows():
    X, y = make_regression_data()
    a = dp(X, y)
    X2, y2 = X.copy(), y.copy()  # neighbours: one row changed
    X2.iloc[0] = [3.9, -3.9, 0.0, 3.9, 1.0]
    y2[0] = TARGET_RANGE[1]
    b = dp(X2, y2)
    c = dp(X.iloc[1:], y[1:])  # ... or removed
    for key in STRUCTURE:
        assert np.array_equal(getattr(a, key), getattr(b, key)), key
        assert np.array_equal(getattr(a, key), getattr(c, key)), key
    assert not np.array_equal(a.value, b.value)
    assert not np.array_equal(a.threshold, dp(X, y, seed=8).threshold)
    # the structure is the classification DP forest's (the task does not draw)
    labels = (y > 0).astype(int)
    cls = fit_dp_forest(X, labels, RANGES, {"cat": LEVELS}, 6, 4, 1.0, random_state=7)
    assert np.array_equal(a.threshold, cls.threshold)
    out = round_trip(a)
    assert out.is_regression and out.n_trees == 6 and np.all(out.node_depth <= 4)
    assert not out.saw_missing.any()
    assert_means_between_children(out)
    assert_predicts_numbers(out, X)


def test_dp_regression_means_stay_inside_the_target_range():
    X, y = make_regression_data()
    for epsilon in (0.01, 1.0, 1e7):
        out = dp(X, y * 10, seed=0, noise=3, target_range=(-1.0, 5.0), epsilon=epsilon)
        assert np.all((out.value >= -1.0) & (out.value <= 5.0))
        assert out.n_node_samples.min() >= 1
        assert_means_between_children(out)
    # each row's target counts clipped to the range: the leaf means of the clipped targets
    rows = node_rows(out, X)
    reached = [i for i in np.flatnonzero(out.feature < 0) if rows[i].size]
    clipped = np.clip(y * 10, -1.0, 5.0)
    assert np.allclose(out.value[reached, 0], [clipped[rows[i]].mean() for i in reached], atol=1e-3)


def test_dp_regression_noise_has_the_documented_scale():
    X, y = make_regression_data()
    n_trees, epsilon = 4, 2.0  # counts: Laplace(2 * 4 / 2 = 4), sums: Laplace(4 * h = 80)
    structure = dp(X, y, seed=3, n_trees=n_trees, epsilon=epsilon)
    n_rows = np.array([r.size for r in node_rows(structure, X)])
    far = (structure.feature < 0) & (n_rows >= 30)  # leaves where clipping at 1 never happens
    d = np.concatenate(
        [
            dp(X, y, seed=3, noise=seed, n_trees=n_trees, epsilon=epsilon).n_node_samples[far]
            - n_rows[far]
            for seed in range(100)
        ]
    )
    assert d.size > 500
    assert d.var() == pytest.approx(2 * (2 * n_trees / epsilon) ** 2 + 1 / 12, rel=0.2)


def test_dp_regression_learns_with_a_large_budget():
    X, y = make_regression_data()
    forest = dp(X, y, seed=0, noise=None, n_trees=20, epsilon=1e6)
    pred = assert_predicts_numbers(forest, X)
    assert 1 - np.mean((pred - y) ** 2) / np.var(y) > 0.25  # random trees of depth 4
    # the noiseless limit: each leaf's mean of y (inside the range, so not clipped)
    rows = node_rows(forest, X)
    reached = [i for i in np.flatnonzero(forest.feature < 0) if rows[i].size]
    assert np.allclose(forest.value[reached, 0], [y[rows[i]].mean() for i in reached], atol=0.05)


def test_dp_regression_is_refused_without_a_valid_target_range():
    X, y = make_regression_data(n=50)
    args = (X, y, RANGES, {"cat": LEVELS}, 2, 2, 1.0)
    with pytest.raises(ValueError, match=r"task='regression' needs target_range=\(low, high\)"):
        fit_dp_forest(*args, task="regression")
    for bad in ((1, 1), (0, np.inf), (0,), "ab", (True, 2)):
        with pytest.raises(ValueError, match="target_range must be"):
            fit_dp_forest(*args, task="regression", target_range=bad)
    with pytest.raises(ValueError, match="regression trees have no classes"):
        fit_dp_forest(*args, task="regression", target_range=(0, 1), classes=[0, 1])
    with pytest.raises(ValueError, match="target_range bounds the target of regression trees"):
        fit_dp_forest(X, (y > 0).astype(int), *args[2:], target_range=(0, 1))
    with pytest.raises(ValueError, match="task="):
        fit_dp_forest(*args, task="ranking")
    with pytest.raises(ValueError, match="must be finite"):
        fit_dp_forest(X, np.full(len(y), np.nan), *args[2:], task="regression", target_range=(0, 1))


def test_dp_mode_of_a_regression_site_needs_target_range():
    X, y = make_regression_data(n=200)
    ranges = {f: list(RANGES[f]) for f in ("x0", "x1", "x3")}
    block = {"dp_epsilon": 4.0, "dp_trees": 4, "dp_max_depth": 3, "feature_ranges": ranges}
    policy = PrivacyPolicy.from_dict({**block, "target_range": [-20, 20]}, "site.yaml")
    models = fit_regression_site(policy, X, y)
    for forest in (models.forest, models.intersection):
        assert forest.is_regression and forest.n_trees == 4
        assert np.all((forest.value >= -20) & (forest.value <= 20))
    assert not len(models.imputers) and models.feature_std == {}
    with pytest.raises(ConfigError, match=r"site.yaml: key 'privacy.target_range' is None"):
        fit_regression_site(PrivacyPolicy.from_dict(block, "site.yaml"), X, y)
