"""Fitted scikit-learn and scikit-survival forests as pooled forests."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier
from sksurv.ensemble import RandomSurvivalForest

from fedforest import PooledForest
from fedforest.model.forest_sources import check_times
from fedforest.survival_metrics import survival_target


@pytest.fixture(scope="module")
def survival_forest():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(150, 3))
    X[::9, 1] = np.nan  # scikit-survival's trees learn where a missing value goes
    y = survival_target(rng.exponential(np.exp(-X[:, 0])), rng.random(150) < 0.7)
    rsf = RandomSurvivalForest(n_estimators=4, min_samples_leaf=5, random_state=0).fit(X, y)
    return X, y, rsf


def test_each_tree_is_read_at_the_grid_as_a_step_function(survival_forest):
    X, _, rsf = survival_forest
    grid = np.array([0.0, 0.2, 0.7, 1.5, 100.0])
    forest = PooledForest.from_sksurv(rsf, ["a", "b", "c"], "s1", times=grid, X=X)
    assert forest.task == "survival" and forest.value.shape == (forest.n_nodes, 10)
    first = rsf.estimators_[0].tree_
    at = np.searchsorted(rsf.unique_times_, grid, side="right") - 1
    chf = forest.value[: first.node_count, :5]
    surv = forest.value[: first.node_count, 5:]
    for j, k in enumerate(at):
        expected_chf = 0.0 if k < 0 else first.value[:, k, 0]
        expected_surv = 1.0 if k < 0 else first.value[:, k, 1]
        np.testing.assert_array_equal(chf[:, j], expected_chf)
        np.testing.assert_array_equal(surv[:, j], expected_surv)
    assert forest.saw_missing.any()  # the training rows' NaN reached some nodes


def test_what_cannot_be_converted_is_refused(survival_forest):
    X, y, rsf = survival_forest
    with pytest.raises(ValueError, match="use PooledForest.from_sksurv"):
        PooledForest.from_sklearn(rsf, ["a", "b", "c"], "s1")
    with pytest.raises(ValueError, match="strictly increasing"):
        PooledForest.from_sksurv(rsf, ["a", "b", "c"], "s1", times=[2.0, 1.0])
    with pytest.raises(ValueError, match="feature_names has 2 names"):
        PooledForest.from_sksurv(rsf, ["a", "b"], "s1", times=[1.0])
    lean = RandomSurvivalForest(n_estimators=2, low_memory=True, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="low_memory=True"):
        PooledForest.from_sksurv(lean, ["a", "b", "c"], "s1", times=[1.0])
    rf = RandomForestClassifier(n_estimators=2, random_state=0).fit(np.nan_to_num(X), y["event"])
    with pytest.raises(ValueError, match="use from_sklearn"):
        PooledForest.from_sksurv(rf, ["a", "b", "c"], "s1", times=[1.0])


@pytest.mark.parametrize(
    "times, task, message",
    [
        (np.zeros(0), "survival", "non-empty"),
        (np.array([1.0, np.inf]), "survival", "finite"),
        (np.array([-1.0, 1.0]), "survival", "at least 0"),
        (np.array([1.0, 1.0]), "survival", "strictly increasing"),
        (np.array([1.0]), "regression", "no time grid"),
    ],
)
def test_time_grids_are_checked(times, task, message):
    with pytest.raises(ValueError, match=message):
        check_times(times, task)
