"""The rows routed through the trees and the counts set from leaves (privacy/counts.py)."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest.model.forest import PooledForest
from fedforest.privacy.counts import (
    check_epsilon,
    check_target_range,
    class_index,
    node_counts,
    site_matrix,
    target_codes,
    with_leaf_counts,
    with_leaf_means,
)
from fedforest.privacy.transforms import bootstrap_weights

from .privacy_data import NAMES, fitted_site, hand_forest, hand_regression_forest


@pytest.fixture(scope="module")
def site():
    return fitted_site()


# ------------------------------------------------------------------ the target
def test_labels_read_as_the_forests_class_indices_and_unknown_ones_are_named():
    forest = PooledForest.from_structure(
        feature_names=["x"],
        classes=["no", "yes"],
        owner="s",
        tree_start=[0, 1],
        children_left=[-1],
        children_right=[-1],
        feature=[-1],
        threshold=[0.0],
        missing_left=[True],
    )
    assert class_index(forest, ["yes", "no", "yes"]).tolist() == [1, 0, 1]
    assert target_codes(forest, np.array(["no"])).dtype == np.int64
    with pytest.raises(ValueError, match=r"y has labels \['maybe'\] that are not classes"):
        class_index(forest, ["yes", "maybe"])


def test_a_regression_target_must_be_finite_numbers():
    forest = hand_regression_forest(3)
    assert target_codes(forest, [1, 2.5]).tolist() == [1.0, 2.5]
    with pytest.raises(ValueError, match="must be numbers"):
        target_codes(forest, ["a", "b"])
    with pytest.raises(ValueError, match="2 values are missing or infinite"):
        target_codes(forest, [1.0, np.nan, np.inf])


def test_the_site_matrix_needs_every_column_the_trees_split_on(site):
    X, _, _, forest = site
    Xg = site_matrix(forest, X[list(reversed(NAMES))])  # any column order: placed by name
    assert Xg.shape == (len(X), len(NAMES))
    assert np.array_equal(Xg[:, 0], X["x0"].to_numpy(np.float32))
    with pytest.raises(ValueError, match=r"X lacks columns \['x1'\] that the trees split on"):
        site_matrix(forest, X.drop(columns="x1"))


# ------------------------------------------------------------------ routing
def test_node_counts_reproduce_scikit_learns_bootstrap_counts(site):
    X, y, rf, forest = site
    Xg = site_matrix(forest, X)
    in_bag = bootstrap_weights(rf, len(X))
    sums, weight, distinct, saw = node_counts(forest, Xg, target_codes(forest, y), in_bag)
    for t, tree in enumerate(rf.estimators_):
        lo, hi = forest.tree_start[t], forest.tree_start[t + 1]
        assert np.array_equal(weight[lo:hi], tree.tree_.weighted_n_node_samples)
        assert np.array_equal(distinct[lo:hi], tree.tree_.n_node_samples)
    # the class columns add up to the weighted rows, and NaN was met where training met it
    assert np.allclose(sums.sum(axis=1), weight)
    assert np.array_equal(saw, forest.saw_missing)


def test_without_weights_every_row_reaches_each_root_once(site):
    X, y, _, forest = site
    sums, weight, distinct, _ = node_counts(
        forest, site_matrix(forest, X), y.astype(np.int64), None
    )
    roots = forest.tree_start[:-1]
    assert np.all(weight[roots] == len(X)) and np.all(distinct[roots] == len(X))
    assert np.all(sums[roots] == np.bincount(y, minlength=2))


def test_a_regression_tree_sums_the_target_at_every_node():
    forest = hand_regression_forest(3)
    x = np.array([[-1.0], [-0.5], [0.5], [0.7], [2.0], [np.nan]], dtype=np.float32)
    y = np.array([1.0, 2.0, 10.0, 20.0, 100.0, 5.0])
    sums, weight, distinct, saw = node_counts(forest, x, y, None)
    # root, left leaf (x <= 0 and the NaN row, missing_left), right, its leaves
    assert sums[:, 0].tolist() == [138.0, 8.0, 130.0, 30.0, 100.0]
    assert weight.tolist() == [6, 3, 3, 2, 1] and distinct.tolist() == [6, 3, 3, 2, 1]
    assert saw.tolist() == [True, False, False, False, False]


# ------------------------------------------------------------------ counts from leaves
def test_leaf_counts_set_every_node_and_keep_children_below_parents():
    forest = hand_forest(3)
    leaf_counts = np.array([[0, 0], [2.4, 0.4], [0, 0], [1.0, 3.0], [0.0, 0.0]])
    out = with_leaf_counts(forest, leaf_counts)
    # internal nodes sum their leaves; an empty leaf is uniform with one row
    assert np.allclose(out.value[3], [0.25, 0.75]) and np.allclose(out.value[4], [0.5, 0.5])
    assert np.allclose(out.value[0], np.array([3.4, 3.4]) / 6.8)
    assert out.n_node_samples.tolist() == [7, 3, 4, 4, 1]
    assert forest.n_node_samples.tolist() == [10, 3, 7, 5, 2]  # the input is not changed


def test_leaf_means_are_count_weighted_and_clipped_to_the_bounds():
    forest = hand_regression_forest(3)
    means = np.array([0.0, 2.0, 0.0, 6.0, 50.0])
    counts = np.array([0.0, 1.0, 0.0, 3.0, 0.2])  # a count under 1 counts as 1
    out = with_leaf_means(forest, means, counts, bounds=(-10.0, 10.0))
    assert out.value[:, 0].tolist() == [
        pytest.approx((2 + 18 + 10) / 5),
        2.0,
        pytest.approx((18 + 10) / 4),
        6.0,
        10.0,
    ]
    assert out.n_node_samples.tolist() == [5, 1, 4, 3, 1]


# ------------------------------------------------------------------ budgets and ranges
@pytest.mark.parametrize("good", [0.5, 2, np.float32(1.5), np.int64(3)])
def test_an_epsilon_is_a_finite_number_above_zero(good):
    assert check_epsilon(good, "dp_epsilon") == float(good)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), True, "1", None])
def test_a_bad_epsilon_is_refused_naming_what_it_is(bad):
    with pytest.raises(ValueError, match=r"count_noise_epsilon must be a finite number > 0, got"):
        check_epsilon(bad, "count_noise_epsilon")


@pytest.mark.parametrize(
    "bad", [(1, 1), (2, 1), (0, float("inf")), (True, 2), (0,), (0, 1, 2), "01", None]
)
def test_a_target_range_is_two_finite_increasing_numbers(bad):
    assert check_target_range(np.array([-1, 2.5])) == (-1.0, 2.5)
    with pytest.raises(ValueError, match=r"privacy.target_range must be \(low, high\)"):
        check_target_range(bad, "privacy.target_range")
