"""One column rule for both estimators: names matched, missing features missing, others ignored."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor

from fedforest import PooledForest, PooledForestClassifier, PooledForestRegressor


@pytest.fixture(scope="module")
def estimators(two_site_forest, table):
    forest, _, _ = two_site_forest
    X, _ = table
    rf = RandomForestRegressor(n_estimators=5, random_state=0).fit(X, X["x0"] + X["x4"])
    reg_forest = PooledForest.from_sklearn(rf, list(X.columns), owner="a")
    return (
        PooledForestClassifier(forest, strategy="mp", random_state=0),
        PooledForestRegressor(reg_forest, strategy="mp", random_state=0),
    )


def _output(estimator, X):
    if isinstance(estimator, PooledForestClassifier):
        return estimator.predict_proba(X)
    return estimator.predict(X)


@pytest.mark.parametrize("which", [0, 1])
def test_feature_names_in_and_n_features_in_are_the_models_features(estimators, which):
    estimator = estimators[which]
    names = estimator.feature_names_in_
    assert isinstance(names, np.ndarray) and names.dtype == object
    assert names.tolist() == list(estimator.forest.feature_names)
    assert all(isinstance(n, str) for n in names)
    assert estimator.n_features_in_ == len(names) == 6


@pytest.mark.parametrize("which", [0, 1])
def test_extra_columns_are_ignored_with_one_warning_naming_them(estimators, table, which):
    estimator = estimators[which]
    X, _ = table
    rows = X[["x0", "x1", "x3"]][:50]
    expected = _output(estimator, rows)
    extra = rows.assign(**{f"note_{i}": i for i in range(23)}, pid=np.arange(50))
    with pytest.warns(UserWarning) as record:
        got = _output(estimator, extra)
    assert len(record) == 1
    message = str(record[0].message)
    assert message.startswith("X has columns the model does not use, ignored: note_0, note_1")
    assert message.endswith("and 4 more")  # 24 names, 20 listed
    assert got.tobytes() == expected.tobytes()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning without an extra column
        _output(estimator, rows)


@pytest.mark.parametrize("which", [0, 1])
def test_a_frame_without_any_feature_is_refused(estimators, table, which):
    X, _ = table
    with pytest.raises(ValueError, match="X has none of the model's features: it has pid; the"):
        _output(estimators[which], X[["x0"]].rename(columns={"x0": "pid"}))


@pytest.mark.parametrize("which", [0, 1])
def test_an_array_needs_n_features_in_columns_in_order(estimators, table, which):
    estimator = estimators[which]
    X, _ = table
    arr = X[list(estimator.feature_names_in_)].to_numpy()[:30]
    assert _output(estimator, arr).tobytes() == _output(estimator, X[:30]).tobytes()
    for bad in (arr[:, :5], np.hstack([arr, arr[:, :1]]), arr[:, 0]):
        with pytest.raises(ValueError, match="an array must have one column per feature"):
            _output(estimator, bad)


def test_fit_follows_the_same_rule(two_site_forest, table):
    forest, _, _ = two_site_forest
    X, y = table
    clf = PooledForestClassifier(forest, strategy="wmp", random_state=0)
    clf.fit(X[400:500], y[400:500])
    with pytest.warns(UserWarning, match="ignored: target"):
        other = PooledForestClassifier(forest, strategy="wmp", random_state=0).fit(
            X[400:500].assign(target=y[400:500]), y[400:500]
        )
    assert other.guess_weight_ == clf.guess_weight_
