"""The site's privacy policy (federation/privacy.py), on real scikit-learn forests."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

from fedforest.errors import ConfigError
from fedforest.federation.privacy import (
    OTHER_LEVEL,
    PrivacyPolicy,
    ThresholdGrid,
    add_count_noise,
    bootstrap_weights,
    check_forest,
    disclosed_rare_levels,
    dp_budget,
    effective_policy,
    enforce_min_leaf_rows,
    fit_dp_forest,
    hide_levels,
    hide_rare_levels,
    prepare_forest,
    rare_levels,
    recount,
    smallest_leaf_rows,
    snap_thresholds,
    threshold_midpoint_share,
)
from fedforest.federation.schema import GlobalSchema, SiteSchema
from fedforest.model.forest import PooledForest
from fedforest.model.surrogates import fit_surrogates
from fedforest.prediction.classifier import PooledForestClassifier

LEVELS = ["a", "b", "c", "d"]
NUMERIC = ["x0", "x1", "x2", "x3"]
NAMES = NUMERIC + ["cat"]
GRID = {"step": 0.5, "edges": {"x1": [-2.0, -0.7, 0.0, 0.9, 2.5]}}
RANGES = {"x0": (-4, 4), "x1": (-4, 4), "x2": (-4, 4), "x3": (-4, 4)}


def make_data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 4)), columns=NUMERIC)
    X["cat"] = rng.integers(0, 4, size=n).astype(float)
    logit = 1.5 * X["x0"] - X["x1"] + 0.8 * (X["cat"] >= 2) + 0.5 * X["x3"]
    y = (logit + rng.normal(scale=0.7, size=n) > 0).astype(int).to_numpy()
    X.loc[rng.random(n) < 0.05, "x2"] = np.nan
    return X, y


def fit_forest(X, y, **params):
    params = {"n_estimators": 8, "random_state": 0, "n_jobs": 1, **params}
    rf = RandomForestClassifier(**params).fit(X.to_numpy(np.float32), y)
    forest = PooledForest.from_sklearn(rf, NAMES, owner="s1", X=X, categories={"cat": LEVELS})
    return rf, forest


@pytest.fixture(scope="module")
def site():
    X, y = make_data()
    rf, forest = fit_forest(X, y)
    return X, y, rf, forest


def round_trip(forest: PooledForest) -> PooledForest:
    back = PooledForest.from_payload(forest.to_payload(), sender="test")
    assert back.n_nodes == forest.n_nodes and back.n_trees == forest.n_trees
    return back


def assert_consistent(forest: PooledForest):
    """Every internal node's count is its children's sum (plain row counts)."""
    left, right = forest.global_children
    internal = forest.feature >= 0
    n = forest.n_node_samples
    assert np.all(n[internal] == n[left[internal]] + n[right[internal]])


def assert_predicts(forest: PooledForest, X):
    proba = PooledForestClassifier(forest, strategy="fpv").predict_proba(X)
    assert np.isfinite(proba).all()
    assert np.allclose(proba.sum(axis=1), 1.0)


def payload_equal(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for key in a:
        x, y = a[key], b[key]
        if isinstance(x, np.ndarray):
            if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
                return False
        elif x != y:
            return False
    return True


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
def hand_forest(n_left: int):
    """root (10 rows) x <= 0 -> leaf (n_left), right: x <= 1 -> leaves 5 and 10 - n_left - 5."""
    n_right = 10 - n_left
    return PooledForest(
        feature_names=["x"],
        classes=[0, 1],
        owners=["s1"],
        tree_start=[0, 5],
        tree_owner=[0],
        children_left=[1, -1, 3, -1, -1],
        children_right=[2, -1, 4, -1, -1],
        feature=[0, -1, 0, -1, -1],
        threshold=[0.0, 0.0, 1.0, 0.0, 0.0],
        n_node_samples=[10, n_left, n_right, 5, n_right - 5],
        missing_left=[True] * 5,
        saw_missing=[False] * 5,
        value=[[0.5, 0.5], [1.0, 0.0], [0.3, 0.7], [0.2, 0.8], [0.4, 0.6]],
    )


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


# ---------------------------------------------------------------- DP mode
def test_dp_structure_does_not_depend_on_the_rows():
    X, y = make_data()
    X2, y2 = X.iloc[1:], y[1:]  # neighbours: one row removed
    args = (RANGES, {"cat": LEVELS}, 6, 4, 1.0)
    a = fit_dp_forest(X, y, *args, random_state=7, classes=[0, 1], noise_state=1)
    b = fit_dp_forest(X2, y2, *args, random_state=7, classes=[0, 1], noise_state=1)
    for key in ("tree_start", "children_left", "children_right", "feature", "threshold"):
        assert np.array_equal(getattr(a, key), getattr(b, key)), key
    assert not np.array_equal(a.value, b.value)
    c = fit_dp_forest(X, y, *args, random_state=8, classes=[0, 1], noise_state=1)
    assert not np.array_equal(a.threshold, c.threshold)
    out = round_trip(a)
    assert out.n_trees == 6 and np.all(out.node_depth <= 4)
    internal = out.feature >= 0
    for j, name in enumerate(NAMES):
        t = out.threshold[internal & (out.feature == j)]
        if name == "cat":
            assert np.all(np.floor(t) + 0.5 == t) and np.all((t > 0) & (t < 3))
        else:
            assert np.all((t >= -4) & (t <= 4))
    assert not out.saw_missing.any()
    assert_predicts(out, X)


def test_dp_leaf_counts_have_laplace_noise_of_scale_trees_over_epsilon():
    X, y = make_data()
    n_trees, epsilon = 4, 2.0  # scale 2, variance 8
    args = (X, y, RANGES, {"cat": LEVELS}, n_trees, 1, epsilon)
    structure = fit_dp_forest(*args, random_state=3, classes=[0, 1], noise_state=0)
    true = recount(structure, X, y)  # the plain counts of every row, same structure
    assert np.array_equal(true.feature, structure.feature)
    leaf = true.feature < 0
    true_counts = (true.value * true.n_node_samples[:, None])[leaf]
    far = true_counts >= 30
    diffs = []
    for seed in range(150):
        noisy = fit_dp_forest(*args, random_state=3, classes=[0, 1], noise_state=seed)
        counts = (noisy.value * noisy.n_node_samples[:, None])[leaf]
        diffs.append((counts - true_counts)[far])
    d = np.concatenate(diffs)
    assert d.var() == pytest.approx(2 * (n_trees / epsilon) ** 2, rel=0.15)


def test_dp_forest_learns_with_a_large_budget_and_needs_public_ranges():
    X, y = make_data()
    forest = fit_dp_forest(
        X, y, RANGES, {"cat": LEVELS}, 20, 4, 1e6, random_state=0, classes=[0, 1]
    )
    proba = PooledForestClassifier(forest, strategy="fpv").predict_proba(X)
    assert np.mean((proba[:, 1] > 0.5) == y) > 0.7
    with pytest.raises(ValueError, match=r"columns \['x3'\] have no public range"):
        fit_dp_forest(X, y, {k: RANGES[k] for k in NUMERIC[:3]}, {"cat": LEVELS}, 2, 2, 1.0)
    with pytest.raises(ValueError, match="max_depth"):
        fit_dp_forest(X, y, RANGES, {"cat": LEVELS}, 2, 0, 1.0)


def test_dp_budget_and_dp_mode_withholds_unprotected_parts():
    policy = PrivacyPolicy.from_dict({"dp_epsilon": 2.0}, "job.yaml")
    assert policy.share == {
        "imputers": False,
        "feature_std": False,
        "surrogates": False,
        "intersection": True,
    }
    assert dp_budget(policy, intersection=True) == {"forest": 1.0, "intersection": 1.0}
    assert dp_budget(policy, intersection=False) == {"forest": 2.0}
    assert dp_budget(PrivacyPolicy(), intersection=True) == {}
    assert (policy.n_dp_trees, policy.dp_depth) == (10, 4)
    with pytest.raises(ValueError, match="fit_dp_forest"):
        prepare_forest(hand_forest(4), policy)


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


# ------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("data", "key", "value", "allowed"),
    [
        ({"min_leaf_rows": 0}, "privacy.min_leaf_rows", "0", "an integer in [1, "),
        ({"min_leaf_rows": True}, "privacy.min_leaf_rows", "True", "an integer"),
        ({"min_level_rows": -1}, "privacy.min_level_rows", "-1", "an integer >= 0"),
        ({"count_noise_epsilon": 0}, "privacy.count_noise_epsilon", "0", "a finite number > 0"),
        ({"dp_epsilon": "high"}, "privacy.dp_epsilon", "'high'", "a finite number > 0"),
        ({"k": 5}, "privacy.k", "5", "one of the known keys privacy.min_leaf_rows"),
        ({"share": {"votes": False}}, "privacy.share.votes", "False", "privacy.share.imputers"),
        ({"share": {"imputers": "no"}}, "privacy.share.imputers", "'no'", "true or false"),
        ({"share": [True]}, "privacy.share", "[True]", "a mapping of imputers"),
        (
            {"dp_epsilon": 1, "share": {"surrogates": True}},
            "privacy.share.surrogates",
            "True",
            "false when privacy.dp_epsilon is set",
        ),
        ({"threshold_grid": {}}, "privacy.threshold_grid", "{}", "a mapping with step"),
        ({"threshold_grid": 0.5}, "privacy.threshold_grid", "0.5", "a mapping with step"),
        ({"threshold_grid": {"step": -1}}, "privacy.threshold_grid.step", "-1", "> 0"),
        (
            {"threshold_grid": {"step": 1, "significant_digits": 2}},
            "privacy.threshold_grid.significant_digits",
            "2",
            "null when privacy.threshold_grid.step is set",
        ),
        (
            {"threshold_grid": {"significant_digits": 0}},
            "privacy.threshold_grid.significant_digits",
            "0",
            "an integer in [1, 15]",
        ),
        (
            {"threshold_grid": {"edges": {"age": [3, 1]}}},
            "privacy.threshold_grid.edges.age",
            "[3, 1]",
            "strictly increasing",
        ),
        (
            {"threshold_grid": {"steps": {"age": 1}, "edges": {"age": [1]}}},
            "privacy.threshold_grid.edges.age",
            "[1]",
            "only one of",
        ),
        (
            {"threshold_grid": {"bins": 3}},
            "privacy.threshold_grid.bins",
            "3",
            "one of the known keys step",
        ),
        ({"feature_ranges": {"age": [5, 5]}}, "privacy.feature_ranges.age", "[5, 5]", "low < high"),
        ({"dp_max_depth": 40}, "privacy.dp_max_depth", "40", "an integer in [1, 16]"),
    ],
)
def test_policy_errors_name_file_key_value_and_what_is_allowed(data, key, value, allowed):
    with pytest.raises(ConfigError) as err:
        PrivacyPolicy.from_dict(data, "site_configs/site-1.yaml")
    message = str(err.value)
    assert message.startswith("site_configs/site-1.yaml: ")
    assert f"key '{key}' is {value}" in message
    assert "allowed: " in message and allowed in message


def test_a_policy_round_trips_through_to_dict():
    data = {
        "min_leaf_rows": 5,
        "threshold_grid": {"significant_digits": 2, "steps": {"age": 1.0}, "edges": {"b": [1.0]}},
        "count_noise_epsilon": 0.5,
        "min_level_rows": 3,
        "share": {"imputers": False, "feature_std": True, "surrogates": True, "intersection": True},
        "dp_epsilon": None,
        "dp_trees": 20,
        "dp_max_depth": None,
        "feature_ranges": {"age": [0.0, 120.0]},
    }
    policy = PrivacyPolicy.from_dict(data, "job.yaml")
    assert policy.to_dict() == data
    assert PrivacyPolicy.from_dict(policy.to_dict()) == policy
    assert not policy.is_default


def test_check_features_refuses_what_cannot_be_applied():
    grid_policy = PrivacyPolicy.from_dict({"threshold_grid": {"steps": {"age": 1}}}, "site-1.yaml")
    with pytest.raises(ConfigError, match=r"site-1.yaml: .*\['bmi'\] have none"):
        grid_policy.check_features(["age", "bmi"], ["smoker"])
    grid_policy.check_features(["age"], ["smoker"])
    cat_policy = PrivacyPolicy.from_dict({"threshold_grid": {"step": 1, "edges": {"smoker": [0]}}})
    with pytest.raises(ConfigError, match="numeric features only"):
        cat_policy.check_features(["age"], ["smoker"])
    dp = PrivacyPolicy.from_dict({"dp_epsilon": 1, "feature_ranges": {"age": [0, 100]}}, "job.yaml")
    with pytest.raises(ConfigError, match=r"job.yaml: key 'privacy.feature_ranges'.*\['bmi'\]"):
        dp.check_features(["age", "bmi"])


# ---------------------------------------------------------- stricter of two
def policy(source="site.yaml", **data):
    return PrivacyPolicy.from_dict(data, source)


def test_the_stricter_value_wins_for_every_key():
    site_p = policy(
        min_leaf_rows=10,
        min_level_rows=2,
        count_noise_epsilon=1.0,
        share={"imputers": False},
        dp_trees=5,
        feature_ranges={"age": [0, 100], "bmi": [10, 60]},
    )
    job_p = policy(
        "job.yaml",
        min_leaf_rows=3,
        min_level_rows=5,
        dp_epsilon=4.0,
        share={"intersection": False},
        dp_trees=8,
        feature_ranges={"age": [0, 120]},
    )
    out = effective_policy(site_p, job_p)
    assert out.min_leaf_rows == 10 and out.min_level_rows == 5
    assert out.count_noise_epsilon == 1.0 and out.dp_epsilon == 4.0  # None is infinity
    assert out.share == dict.fromkeys(
        ("imputers", "feature_std", "surrogates", "intersection"), False
    )
    assert out.dp_trees == 8  # keys that do not change the guarantee: the job's
    assert out.feature_ranges == {"age": (0.0, 120.0), "bmi": (10.0, 60.0)}
    assert out.source == "site.yaml + job.yaml"
    both = effective_policy(policy(count_noise_epsilon=2.0), policy("j", count_noise_epsilon=0.5))
    assert both.count_noise_epsilon == 0.5
    # a job can never loosen a hospital's policy
    assert effective_policy(site_p, PrivacyPolicy()).to_dict() == site_p.to_dict()
    assert effective_policy(PrivacyPolicy(), PrivacyPolicy()).is_default


def test_grids_merge_to_the_coarser_one_or_are_refused():
    def grid_of(source, **grid):
        return policy(source, threshold_grid=grid)

    merged = effective_policy(grid_of("site.yaml", step=0.5), PrivacyPolicy()).threshold_grid
    assert merged == ThresholdGrid(("step", 0.5), {})
    merged = effective_policy(grid_of("site.yaml", step=0.5), grid_of("job.yaml", step=1.5))
    assert merged.threshold_grid.default == ("step", 1.5)
    merged = effective_policy(
        grid_of("site.yaml", significant_digits=3), grid_of("job.yaml", significant_digits=2)
    )
    assert merged.threshold_grid.default == ("digits", 2)
    # public edges that lie on the hospital's step are coarser than it, feature by feature
    merged = effective_policy(
        grid_of("site.yaml", step=0.5), grid_of("job.yaml", step=1, edges={"age": [20, 40.5]})
    ).threshold_grid
    assert merged.default == ("step", 1.0) and merged.features == {"age": ("edges", (20.0, 40.5))}
    with pytest.raises(ConfigError) as err:
        effective_policy(grid_of("site.yaml", step=0.5), grid_of("job.yaml", step=0.3))
    message = str(err.value)
    assert "site.yaml" in message and "job.yaml" in message
    assert "step 0.5 (site.yaml) against step 0.3 (job.yaml)" in message
    with pytest.raises(ConfigError, match="feature 'age'"):
        effective_policy(
            grid_of("site.yaml", step=1, edges={"age": [18, 65]}),
            grid_of("job.yaml", step=1, edges={"age": [20, 60]}),
        )


# ------------------------------------------------------------------ levels
def level_table():
    cat = ["x"] * 10 + ["y"] * 2 + ["z"] + [None] * 2
    code = [1.0] * 10 + [2.0] * 3 + [7.0] * 2
    return pd.DataFrame(
        {"ward": cat, "code": code, "age": np.arange(15.0), "label": ["r"] * 5 + ["s"] * 10}
    )


def test_rare_levels_are_sent_as_one_other_level():
    frame = level_table()
    hidden = rare_levels(frame, ["code", "label"], 3, target="label")
    assert hidden == {"ward": ["y", "z"], "code": ["7"]}
    assert rare_levels(frame, ["code"], 0, target="label") == {}
    out, hidden2 = hide_rare_levels(frame, ["code"], 3, target="label")
    assert hidden2 == hidden
    assert list(out["ward"][10:13]) == [OTHER_LEVEL] * 3 and out["ward"].isna().sum() == 2
    assert list(out["code"][13:]) == [OTHER_LEVEL] * 2 and out["code"][0] == "1"
    assert list(out["label"]) == list(frame["label"])  # the target is never touched
    schema = SiteSchema.from_frame("s1", out, "label", ["code"])
    assert schema.levels == {"code": ["1", "2", OTHER_LEVEL], "ward": [OTHER_LEVEL, "x"]}
    raw = SiteSchema.from_frame("s1", frame, "label", ["code"])
    assert disclosed_rare_levels(raw.levels, frame, 3) == {"code": ["7"], "ward": ["y", "z"]}
    assert disclosed_rare_levels(schema.levels, frame, 3) == {}
    # the rewritten table encodes with the global schema of two sites
    other_site = SiteSchema.from_frame("s2", frame, "label", ["code"])
    glob = GlobalSchema.build([schema, other_site])
    codes = glob.encode(out, ["ward", "code"])
    assert codes["ward"][11] == glob.categories["ward"].index(OTHER_LEVEL)
    # rows with a hidden level at a new table map the same way; NaN instead when asked
    assert hide_levels(frame, hidden, other=None)["ward"].isna().sum() == 5
    clash = frame.assign(ward=[OTHER_LEVEL] * 15)
    with pytest.raises(ValueError, match="already has a level"):
        hide_levels(clash, {"ward": ["x"]})
