"""min_leaf_rows of survival trees: every leaf sent holds at least k events."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedforest.model.forest import PooledForest
from fedforest.model.in_bag import sample_counts
from fedforest.privacy.survival import enforce_min_leaf_events, node_events
from fedforest.survival_metrics import survival_target

RandomSurvivalForest = pytest.importorskip("sksurv.ensemble").RandomSurvivalForest


@pytest.fixture(scope="module")
def survival_forest():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(200, 3)), columns=["a", "b", "c"])
    time = rng.exponential(np.exp(-X["a"].to_numpy()) * 100)
    event = rng.random(200) < 0.4
    y = survival_target(time, event)
    rsf = RandomSurvivalForest(n_estimators=8, min_samples_leaf=3, random_state=0).fit(X, y)
    grid = np.quantile(time[event], np.linspace(0.1, 0.9, 9))
    forest = PooledForest.from_sksurv(rsf, ["a", "b", "c"], "s", times=grid)
    return forest, X, event, sample_counts(rsf, len(X))


def test_every_leaf_left_holds_k_events_and_keeps_the_curves_of_its_node(survival_forest):
    forest, X, event, counts = survival_forest
    before = node_events(forest, X, event, counts)
    leaves = forest.feature < 0
    assert before[leaves].min() < 5  # the grown trees have leaves with fewer events
    pruned = enforce_min_leaf_events(forest, X, event, 5, in_bag=counts)
    assert pruned.n_trees == forest.n_trees and pruned.n_nodes < forest.n_nodes
    after = node_events(pruned, X, event, counts)
    assert after[pruned.feature < 0].min() >= 5
    # the curves are those the nodes already had: every value row of the result is a row
    # of the original forest's (a split made a leaf keeps its own curves)
    original = {row.tobytes() for row in forest.value}
    assert all(row.tobytes() in original for row in pruned.value)
    np.testing.assert_array_equal(pruned.times, forest.times)


def test_events_count_each_in_bag_row_once(survival_forest):
    forest, X, event, counts = survival_forest
    roots = forest.tree_start[:-1]
    expected = [(counts[t] > 0)[event].sum() for t in range(forest.n_trees)]
    assert node_events(forest, X, event, counts)[roots].tolist() == expected
    assert node_events(forest, X, event)[roots].tolist() == [int(event.sum())] * forest.n_trees


def test_k_of_one_changes_nothing_and_too_few_events_anywhere_is_refused(survival_forest):
    forest, X, event, counts = survival_forest
    assert enforce_min_leaf_events(forest, X, event, 1) is forest
    with pytest.raises(ValueError, match="every survival tree holds fewer events"):
        enforce_min_leaf_events(forest, X, event, int(event.sum()) + 1)


def test_only_survival_trees_are_pruned_by_events(two_site_forest, table):
    forest, _, _ = two_site_forest
    X, y = table
    with pytest.raises(ValueError, match="prunes survival trees, not classification"):
        enforce_min_leaf_events(forest, X, y == 1, 5)
