"""What both estimators share (prediction/pooled.py): the column rule (names matched, missing
features missing, others ignored), the parameters' checks, wmp and the intersection forest."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from fedforest import ImputerSet, PooledForest, PooledForestClassifier, PooledForestRegressor
from fedforest.prediction.cache import PredictionMemo
from fedforest.prediction.weighting import weighted_marginal


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


# ------------------------------------------------------------------ the parameters
def test_each_parameter_is_checked_against_the_strategys_rule(two_site_forest, table):
    forest, _, _ = two_site_forest
    X, _ = table
    rows = X[["x0", "x1", "x2"]][:20]

    def refused(error, match, **params):
        with pytest.raises(error, match=match):
            PooledForestClassifier(forest, **params).predict_proba(rows)

    refused(ValueError, r"engine='gpu' is not one of \['auto', 'numba', 'numpy'\]", engine="gpu")
    refused(ValueError, "depth_threshold=True must be an integer >= 0", depth_threshold=True)
    refused(TypeError, "imputers must be a fedforest.ImputerSet, got dict", imputers={})
    refused(
        ValueError, r"feature_std\['x3'\]=-1.0 must be finite and >= 0", feature_std={"x3": -1.0}
    )
    refused(ValueError, 'strategy="intersection" needs intersection=', strategy="intersection")
    refused(ValueError, "site='c' trained no tree of this forest", strategy="local", site="c")
    # imputers are read only by the rules that use them: an empty set is valid for all
    fpv = PooledForestClassifier(forest, imputers=ImputerSet([])).predict_proba(rows)
    assert np.allclose(fpv.sum(axis=1), 1.0)


def test_the_intersection_forest_predicts_alone_on_its_own_columns(two_site_forest, table):
    forest, rf_a, _ = two_site_forest
    X, y = table
    shared = ["x0", "x1"]
    rf = RandomForestClassifier(n_estimators=4, random_state=3).fit(X[shared][:300], y[:300])
    inter = PooledForest.from_sklearn(rf, shared, owner="a")
    clf = PooledForestClassifier(forest, strategy="intersection", intersection=inter)
    rows = X[["x0", "x1", "x2"]][300:340]
    proba = clf.predict_proba(rows)
    assert proba.tobytes() == rf.predict_proba(X[shared][300:340]).tobytes()
    assert clf.diagnostics_.strategy == "intersection"
    with pytest.raises(ValueError, match="needs X as a DataFrame"):
        clf.predict_proba(X[list(forest.feature_names)][:5].to_numpy())
    reg = RandomForestRegressor(n_estimators=2, random_state=0).fit(X[shared], X["x2"])
    wrong = PooledForest.from_sklearn(reg, shared, owner="a")
    with pytest.raises(ValueError, match="the intersection forest holds regression trees"):
        PooledForestClassifier(forest, strategy="intersection", intersection=wrong).predict_proba(
            rows
        )


def test_wmp_combines_fpv_and_mp_with_the_guess_weight(two_site_forest, table):
    forest, _, _ = two_site_forest
    X, _ = table
    rows = X[["x0", "x1", "x2", "x3"]][300:360]
    params = dict(random_state=0)
    fpv = PooledForestClassifier(forest, strategy="fpv", **params)
    p_fpv = fpv.predict_proba(rows)
    p_mp = PooledForestClassifier(forest, strategy="mp", **params).predict_proba(rows)
    wmp = PooledForestClassifier(forest, strategy="wmp", guess_weight=0.25, **params)
    expected = weighted_marginal(p_fpv, fpv.diagnostics_.trees_kept, p_mp, forest.n_trees, 0.25)
    assert np.allclose(wmp.predict_proba(rows), expected)
    assert wmp.diagnostics_.strategy == "wmp"
    # nothing missing: every tree is certain, and wmp is fpv bit for bit
    full = X[list(forest.feature_names)][300:360]
    assert wmp.predict_proba(full).tobytes() == fpv.predict_proba(full).tobytes()


def test_a_shared_memo_predicts_each_table_once(two_site_forest, table):
    forest, _, _ = two_site_forest
    X, _ = table
    rows = X[["x0", "x1", "x2"]][:50]
    memo = PredictionMemo()
    clf = PooledForestClassifier(forest, strategy="wmp", guess_weight=0.5, random_state=0)
    first = clf._predict_values(rows, "wmp", memo=memo)
    assert len(memo) == 3  # wmp, and the mp and fpv predictions it combines
    again = PooledForestClassifier(forest, strategy="mp", random_state=0)
    values, _ = again._predict_values(rows, "mp", memo=memo)
    assert len(memo) == 3 and values is memo.get_or_compute((id(rows), "mp", "soft"), None)[0]
    assert clf._predict_values(rows, "wmp", memo=memo) is first
