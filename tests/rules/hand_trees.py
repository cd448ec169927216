"""Hand-written trees (``conftest.make_tree_forest``) whose predictions each rule's test
works out by hand: the same two trees, with feature ``b`` absent from the rows."""

from __future__ import annotations

import numpy as np
import pandas as pd

from conftest import make_tree_forest
from fedforest import Imputer, ImputerSet, PooledForestClassifier

NAMES = ["a", "b", "c"]
#: Root on b (depth 0); its right child splits on a. N_right / N_node = 70 / 100.
T1 = [
    ("split", "b", 0.5, 1, 2, 100),
    ("leaf", [1.0, 0.0], 30),
    ("split", "a", 0.0, 3, 4, 70),
    ("leaf", [0.0, 1.0], 40),
    ("leaf", [0.2, 0.8], 30),
]
#: Only a.
T2 = [
    ("split", "a", 0.0, 1, 2, 100),
    ("leaf", [0.9, 0.1], 55),
    ("leaf", [0.3, 0.7], 45),
]


def forest(trees=(T1, T2), **kwargs):
    return make_tree_forest(list(trees), NAMES, **kwargs)


def rows(a_values, **cols) -> pd.DataFrame:
    frame = pd.DataFrame({"a": np.asarray(a_values, dtype=float)})
    for name, values in cols.items():
        frame[name] = values
    return frame


def proba(pooled_forest, X, **params):
    clf = PooledForestClassifier(pooled_forest, **params)
    return clf.predict_proba(X), clf


def b_imputer() -> ImputerSet:
    """``b`` imputed as ``a + 2`` from ``a``."""
    return ImputerSet(
        [
            Imputer(
                feature="b",
                kind="numeric",
                predictors=["a"],
                intercept=np.array([2.0]),
                coef=np.array([1.0]),
                center=np.array([0.0]),
                scale=np.ones(1),
                score=0.9,
                n_train=100,
                owner="s1",
            )
        ]
    )
