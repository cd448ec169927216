"""Shared data of the privacy tests: a small site, its scikit-learn forests, checks."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from fedforest.model.forest import PooledForest
from fedforest.prediction.classifier import PooledForestClassifier
from fedforest.prediction.regressor import PooledForestRegressor

LEVELS = ["a", "b", "c", "d"]
NUMERIC = ["x0", "x1", "x2", "x3"]
NAMES = NUMERIC + ["cat"]
GRID = {"step": 0.5, "edges": {"x1": [-2.0, -0.7, 0.0, 0.9, 2.5]}}
RANGES = {"x0": (-4, 4), "x1": (-4, 4), "x2": (-4, 4), "x3": (-4, 4)}
#: Public bounds of the regression target of :func:`make_regression_data` (it lies within).
TARGET_RANGE = (-20.0, 20.0)


def make_data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 4)), columns=NUMERIC)
    X["cat"] = rng.integers(0, 4, size=n).astype(float)
    logit = 1.5 * X["x0"] - X["x1"] + 0.8 * (X["cat"] >= 2) + 0.5 * X["x3"]
    y = (logit + rng.normal(scale=0.7, size=n) > 0).astype(int).to_numpy()
    X.loc[rng.random(n) < 0.05, "x2"] = np.nan
    return X, y


def make_regression_data(n=400, seed=0):
    """The rows of :func:`make_data` with a numeric target in ``TARGET_RANGE``."""
    X, _ = make_data(n, seed)
    rng = np.random.default_rng(seed + 100)
    signal = 3 * X["x0"] - 2 * X["x1"] + 2.5 * (X["cat"] >= 2) + X["x3"] ** 2
    y = np.clip(signal.to_numpy() + rng.normal(scale=0.5, size=n), *TARGET_RANGE)
    return X, y


def fit_regressor(X, y, **params):
    params = {"n_estimators": 8, "random_state": 0, "n_jobs": 1, **params}
    rf = RandomForestRegressor(**params).fit(X.to_numpy(np.float32), y)
    forest = PooledForest.from_sklearn(rf, NAMES, owner="s1", X=X, categories={"cat": LEVELS})
    return rf, forest


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


def regression_site():
    """The site's rows and targets, its scikit-learn regressor and that forest pooled."""
    X, y = make_regression_data()
    rf, forest = fit_regressor(X, y)
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


def assert_predicts_numbers(forest: PooledForest, X):
    pred = PooledForestRegressor(forest, strategy="fpv").predict(X)
    assert pred.shape == (len(X),) and np.isfinite(pred).all()
    return pred


def node_rows(forest: PooledForest, X) -> list[np.ndarray]:
    """Per node, the rows of ``X`` that reach it (``x <= t`` left; NaN follows missing_left)."""
    Xg = X[forest.feature_names].to_numpy(np.float64)
    rows = [np.zeros(0, np.int64)] * forest.n_nodes
    left, right = forest.global_children
    for root in forest.tree_start[:-1]:
        stack = [(int(root), np.arange(len(Xg)))]
        while stack:
            node, at = stack.pop()
            rows[node] = at
            if forest.feature[node] < 0:
                continue
            x = Xg[at, forest.feature[node]]
            go_left = np.where(np.isnan(x), forest.missing_left[node], x <= forest.threshold[node])
            stack += [(int(left[node]), at[go_left]), (int(right[node]), at[~go_left])]
    return rows


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


def hand_regression_forest(n_left: int, means=(2.0, 1.0, 16 / 6, 3.0, 1.0)):
    """:func:`hand_forest`'s shape as a regression tree: node means instead of distributions."""
    forest = hand_forest(n_left)
    return PooledForest(
        feature_names=forest.feature_names,
        classes=[],
        owners=forest.owners,
        task="regression",
        tree_start=forest.tree_start,
        tree_owner=forest.tree_owner,
        children_left=forest.children_left,
        children_right=forest.children_right,
        feature=forest.feature,
        threshold=forest.threshold,
        n_node_samples=forest.n_node_samples,
        missing_left=forest.missing_left,
        saw_missing=forest.saw_missing,
        value=np.asarray(means, float)[:, None],
    )
