"""Compiled traversal through scikit-learn's own tree engine (prediction/fastpath.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

from fedforest import PooledForest
from fedforest.prediction import fastpath
from fedforest.prediction.draws import Draws


def plain_treeset(forest, trees, n_columns=None, random_depths=None):
    return fastpath.TreeSet(
        forest.tree_start,
        trees,
        left=forest.children_left,
        right=forest.children_right,
        feature=forest.feature.astype(np.int64),
        threshold=forest.threshold,
        n_node_samples=forest.n_node_samples,
        missing_left=forest.missing_left,
        n_columns=2 * forest.n_features if n_columns is None else n_columns,
        random_depths=random_depths or [np.zeros(0, np.int64)] * forest.n_trees,
    )


@pytest.fixture(scope="module")
def with_nan():
    """A forest trained on rows with NaN (nodes that learned where missing values go)."""
    rng = np.random.default_rng(5)
    X = pd.DataFrame(rng.normal(size=(300, 3)), columns=["a", "b", "c"])
    y = (X["a"] - X["b"] > 0).astype(int)
    X.loc[rng.random(300) < 0.2, "a"] = np.nan
    rf = RandomForestClassifier(n_estimators=5, max_depth=6, random_state=0).fit(X, y)
    return X, rf, PooledForest.from_sklearn(rf, ["a", "b", "c"], owner="s1")


def test_scikit_learns_tree_engine_is_usable_here():
    assert fastpath.available()


def test_the_trees_reach_scikit_learns_leaves_with_their_missing_directions(with_nan):
    X, rf, forest = with_nan
    rows = X.to_numpy(np.float32)
    X_aug = np.hstack([rows, np.zeros_like(rows)])
    trees = np.array([1, 3, 4])  # a selection: offsets into the whole forest
    leaves = plain_treeset(forest, trees).apply(X_aug, 3, draws=None)
    for i, t in enumerate(trees):
        assert np.array_equal(leaves[i], rf.estimators_[t].apply(rows) + forest.tree_start[t])
    # the leaves' values are the forest's: the same probabilities as scikit-learn
    treeset = plain_treeset(forest, np.arange(5))
    proba = forest.value[treeset.apply(X_aug, 3, None)].mean(axis=0)
    assert np.allclose(proba, rf.predict_proba(X))
    # the trees only route: they hold one zero per node, not a copy of the value table
    assert all(t.value.shape[1:] == (1, 1) and not t.value.any() for t in treeset._trees)


def test_rows_are_traversed_in_chunks_with_the_same_result(with_nan, monkeypatch):
    X, _, forest = with_nan
    rows = X.to_numpy(np.float32)
    X_aug = np.hstack([rows, np.zeros_like(rows)])
    whole = plain_treeset(forest, np.arange(5)).apply(X_aug, 3, None)
    monkeypatch.setattr(fastpath, "ROW_CHUNK", 7)
    assert np.array_equal(plain_treeset(forest, np.arange(5)).apply(X_aug, 3, None), whole)


def test_a_split_on_a_column_of_draws_goes_right_below_the_fraction():
    # one stump on feature 0, rewritten to split at depth 0 on the draw column (2 * 1 + 0)
    forest = PooledForest.from_structure(
        feature_names=["x"],
        classes=[0, 1],
        owner="s",
        tree_start=[0, 3],
        children_left=[1, -1, -1],
        children_right=[2, -1, -1],
        feature=[0, -1, -1],
        threshold=[0.5, 0.0, 0.0],
        missing_left=[True] * 3,
    )
    fraction = 0.3
    treeset = fastpath.TreeSet(
        forest.tree_start,
        np.array([0]),
        left=forest.children_left,
        right=forest.children_right,
        feature=np.array([2, -1, -1]),
        threshold=np.array([-fraction, 0.0, 0.0]),
        n_node_samples=np.array([10, 7, 3]),
        missing_left=forest.missing_left,
        n_columns=3,
        random_depths=[np.array([0])],
    )
    rows = np.random.default_rng(1).normal(size=(2000, 1)).astype(np.float32)
    draws = Draws(11, rows, forest.tree_of_node, forest.node_depth)
    X_aug = np.zeros((len(rows), 3), dtype=np.float32)
    X_aug[:, 0] = rows[:, 0]
    leaves = treeset.apply(X_aug, 1, draws)
    u = draws.tree_uniforms(0, np.array([0]))[:, 0]
    # the column holds minus the draw as a float32, compared with minus the fraction
    assert np.array_equal(leaves[0] == 2, u.astype(np.float32).astype(np.float64) < fraction)
    assert abs((leaves[0] == 2).mean() - fraction) < 0.05
