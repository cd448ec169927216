"""Prediction diagnostics, and placing probability columns in the classes' order."""

from __future__ import annotations

import numpy as np

from fedforest.prediction.diagnostics import PredictionDiagnostics, on_classes


def test_columns_go_to_their_classes_and_missing_classes_get_zero():
    proba = np.array([[0.2, 0.8], [0.6, 0.4]])
    out = on_classes(proba, have=[1, 3], classes=[0, 1, 2, 3])
    assert np.array_equal(out, [[0, 0.2, 0, 0.8], [0, 0.6, 0, 0.4]])
    same = on_classes(proba, have=["a", "b"], classes=["a", "b"])
    assert np.array_equal(same, proba)


def test_diagnostics_defaults(table, two_site_forest):
    from fedforest import PooledForestClassifier

    X, _ = table
    forest, _, _ = two_site_forest
    clf = PooledForestClassifier(forest, strategy="fpv")
    clf.predict_proba(X[["x0", "x1", "x2"]][:20])
    d = clf.diagnostics_
    assert isinstance(d, PredictionDiagnostics) and d.strategy == "fpv"
    assert d.trees_available == forest.n_trees and d.trees_kept.shape == (20,)
    assert d.n_fallback == int(d.fallback_rows.sum()) and d.weight_kept is None
    bare = PredictionDiagnostics("mp", 3, np.ones(1), np.zeros(1, bool), 0, "numpy")
    assert bare.dynamic_engine is None and bare.weight_kept is None
