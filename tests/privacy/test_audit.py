"""The measurements of what a forest or a schema discloses (privacy/audit.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

from fedforest.model.forest import PooledForest
from fedforest.privacy.audit import (
    check_forest,
    disclosed_rare_levels,
    smallest_leaf_rows,
    threshold_midpoint_share,
)
from fedforest.privacy.levels import OTHER_LEVEL
from fedforest.privacy.policy import PrivacyPolicy, ThresholdGrid

from .privacy_data import LEVELS, fitted_site, hand_forest


@pytest.fixture(scope="module")
def site():
    return fitted_site()


def stumps(thresholds, feature_names=("x",), categories=None, features=None) -> PooledForest:
    """One stump per threshold (10 rows, 5 a side), on ``features`` (default: the first)."""
    n = len(thresholds)
    features = [0] * n if features is None else features
    return PooledForest(
        feature_names=list(feature_names),
        classes=[0, 1],
        owners=["s1"],
        categories=categories,
        tree_start=np.arange(0, 3 * n + 1, 3),
        tree_owner=np.zeros(n, int),
        children_left=[1, -1, -1] * n,
        children_right=[2, -1, -1] * n,
        feature=[v for f in features for v in (f, -1, -1)],
        threshold=[v for t in thresholds for v in (t, 0.0, 0.0)],
        n_node_samples=[10, 5, 5] * n,
        missing_left=[True] * 3 * n,
        saw_missing=[False] * 3 * n,
        value=[[0.5, 0.5], [1.0, 0.0], [0.0, 1.0]] * n,
    )


# ------------------------------------------------------------------ check_forest
def test_a_forest_within_the_policy_has_no_problem():
    forest = hand_forest(3)  # leaves of 3, 5 and 2 rows
    assert smallest_leaf_rows(forest) == 2
    assert check_forest(forest, PrivacyPolicy(min_leaf_rows=2)) == []
    assert check_forest(stumps([0.5, 1.0]), PrivacyPolicy(min_leaf_rows=5)) == []


def test_nodes_under_min_leaf_rows_are_counted_with_the_smallest():
    problems = check_forest(hand_forest(3), PrivacyPolicy(min_leaf_rows=4))
    assert problems == ["2 nodes describe fewer than min_leaf_rows=4 rows (smallest: 2)"]


def test_thresholds_off_the_grid_are_named_per_feature_with_an_example():
    grid = ThresholdGrid.from_dict({"step": 0.5})
    names = ("x", "colour")
    forest = stumps(
        [0.5, 0.7, 1.5, 0.5, 1.0],
        feature_names=names,
        categories={"colour": ["red", "green", "blue"]},
        features=[0, 0, 0, 1, 1],
    )
    problems = check_forest(forest, PrivacyPolicy(threshold_grid=grid))
    # categorical cuts must lie halfway between two codes, whatever the grid
    assert problems == [
        "1 split thresholds on 'x' are off the grid (e.g. 0.7)",
        "1 split thresholds on 'colour' are off the grid (e.g. 1.0)",
    ]
    # an infinite threshold sends every row one way: it holds no value
    assert check_forest(stumps([0.5, np.inf]), PrivacyPolicy(threshold_grid=grid)) == []
    # DP mode's random thresholds are not snapped to a grid
    assert check_forest(forest, PrivacyPolicy(threshold_grid=grid, dp_epsilon=1.0)) == []


def test_surrogates_are_checked_against_the_grid_and_the_share_switch():
    forest = stumps([0.5], feature_names=("x", "z"))
    n = forest.n_nodes
    with_sur = forest.with_surrogates(
        [1, -1, -1], [0.3, 0.0, 0.0], np.ones(n, bool), [0.9, 0.0, 0.0]
    )
    grid = ThresholdGrid.from_dict({"step": 0.5})
    assert check_forest(with_sur, PrivacyPolicy(threshold_grid=grid)) == [
        "1 surrogate thresholds on 'z' are off the grid (e.g. 0.3)"
    ]
    withheld = PrivacyPolicy(share={"surrogates": False})
    assert check_forest(with_sur, withheld) == [
        "the forest carries surrogate splits but share.surrogates is false"
    ]
    assert check_forest(forest, withheld) == []


# ------------------------------------------------------------------ midpoints
def test_midpoints_of_consecutive_and_of_any_two_training_values():
    X = pd.DataFrame({"x": [0.0, 1.0, 2.0, 4.0, 4.0, np.nan]})
    # 0.5 and 1.5: consecutive midpoints; 2.0: (0 + 4) / 2 only; 3.3: no midpoint
    forest = stumps([0.5, 1.5, 2.0, 3.3])
    assert threshold_midpoint_share(forest, X) == 0.5
    assert threshold_midpoint_share(forest, X, pairs="any") == 0.75


def test_a_real_forest_discloses_midpoints_and_the_bounds_are_ordered(site):
    X, y, _, forest = site
    low = threshold_midpoint_share(forest, X)
    high = threshold_midpoint_share(forest, X, pairs="any")
    # scikit-learn places every threshold at a midpoint of two training values
    assert 0 < low <= high and high > 0.9
    one = X[["x0"]]
    rf = RandomForestClassifier(n_estimators=2, bootstrap=False, random_state=0).fit(one, y)
    whole = PooledForest.from_sklearn(rf, ["x0"], owner="s1")
    # every row, one feature: each node holds an interval of the table's values, so each
    # threshold lies between two values consecutive in the whole table
    assert threshold_midpoint_share(whole, one) == 1.0


def test_only_finite_numeric_thresholds_count_and_none_gives_nan():
    X = pd.DataFrame({"x": [0.0, 1.0], "colour": [0.0, 1.0]})
    categorical = stumps(
        [0.5], feature_names=("x", "colour"), categories={"colour": ["a", "b"]}, features=[1]
    )
    assert np.isnan(threshold_midpoint_share(categorical, X))
    assert threshold_midpoint_share(stumps([0.5, np.inf]), X[["x"]]) == 1.0


def test_midpoints_refuse_an_unknown_pairing_and_a_table_without_the_column():
    forest = stumps([0.5])
    with pytest.raises(ValueError, match="pairs must be 'consecutive' or 'any', got 'all'"):
        threshold_midpoint_share(forest, pd.DataFrame({"x": [0.0, 1.0]}), pairs="all")
    two = stumps([0.5, 0.5], feature_names=("x", "z"), features=[0, 1])
    with pytest.raises(ValueError, match="X lacks column 'z'"):
        threshold_midpoint_share(two, pd.DataFrame({"x": [0.0, 1.0]}))


# ------------------------------------------------------------------ rare levels
def test_rare_levels_are_those_with_one_to_min_rows_minus_one_rows():
    frame = pd.DataFrame(
        {
            "ward": ["a"] * 5 + ["b"] * 2 + ["c"] + [None] * 2,
            "code": [1.0] * 9 + [7.0],
            "kept": ["z"] * 10,
        }
    )
    sent = {
        "ward": ["a", "b", "c", "d", OTHER_LEVEL],  # d: no row here; (other): the pooled group
        "code": ["1", "7"],
        "kept": ["z"],
        "absent": ["q"],  # a column the table does not have
    }
    assert disclosed_rare_levels(sent, frame, 3) == {"ward": ["b", "c"], "code": ["7"]}
    assert disclosed_rare_levels(sent, frame, 1) == {}


def test_the_fitted_sites_levels_are_checked_as_the_schema_sends_them(site):
    X, _, _, _ = site
    frame = X.assign(cat=X["cat"].map(dict(enumerate(LEVELS))))
    counts = frame["cat"].value_counts()
    limit = int(counts.min()) + 1
    found = disclosed_rare_levels({"cat": LEVELS}, frame, limit)
    assert found == {"cat": sorted(counts.index[counts < limit])} and found["cat"]
