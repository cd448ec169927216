"""Shared data of the privacy tests: a small site, its scikit-learn forest, checks."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier

from fedforest.model.forest import PooledForest
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


def fitted_site():
    """The site's rows, its scikit-learn forest and that forest pooled."""
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
