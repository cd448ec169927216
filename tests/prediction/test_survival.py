"""PooledForestSurvival: exactness against scikit-survival, every strategy, both engines."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sksurv.ensemble import RandomSurvivalForest
from sksurv.metrics import concordance_index_censored

from fedforest import (
    Imputer,
    ImputerSet,
    PayloadError,
    PooledForest,
    PooledForestRegressor,
    PooledForestSurvival,
)
from fedforest.prediction import pipeline as pooled
from fedforest.prediction.cache import PredictionMemo, forest_cache
from fedforest.survival_metrics import brier_losses, survival_target
from fedforest.vocabulary import STRATEGIES

NAMES = ["a", "b", "c", "d"]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(400, 4)), columns=NAMES)
    hazard = np.exp(0.9 * X["a"] - 0.6 * X["c"] + 0.3 * X["b"] * X["d"])
    time = rng.exponential(1.0 / hazard)
    censor = rng.exponential(2.0, size=400)
    y = survival_target(np.minimum(time, censor), time <= censor)
    return X, y


@pytest.fixture(scope="module")
def fitted(data):
    X, y = data
    rsf = RandomSurvivalForest(n_estimators=20, min_samples_leaf=5, random_state=0)
    rsf.fit(X[:300], y[:300])
    grid = rsf.unique_times_[rsf.is_event_time_]
    return rsf, PooledForest.from_sksurv(rsf, NAMES, "s1", times=grid)


def imputers_and_std(data):
    X, _ = data
    coef = np.polyfit(X["a"][:300], X["c"][:300], 1)
    imputer = Imputer(
        feature="c",
        kind="numeric",
        predictors=["a"],
        intercept=np.array([coef[1]]),
        coef=np.array([coef[0]]),
        center=np.array([0.0]),
        scale=np.ones(1),
        score=0.5,
        n_train=300,
        owner="s1",
    )
    return ImputerSet([imputer]), X.std().to_dict()


@pytest.mark.parametrize("engine", ["numpy", "numba"])
@pytest.mark.parametrize("strategy", [*STRATEGIES, "intersection"])
def test_every_strategy_equals_scikit_survival_with_every_feature(data, fitted, strategy, engine):
    X, _ = data
    rsf, forest = fitted
    est = PooledForestSurvival(
        forest,
        strategy=strategy,
        site="s1",
        engine=engine,
        guess_weight=0.3,
        random_state=0,
        intersection=forest,
    )
    rows = X[300:]
    on_events = rsf.is_event_time_
    chf = rsf.predict_cumulative_hazard_function(rows, return_array=True)[:, on_events]
    surv = rsf.predict_survival_function(rows, return_array=True)[:, on_events]
    np.testing.assert_allclose(
        est.predict_cumulative_hazard_function(rows, return_array=True), chf, rtol=0, atol=1e-12
    )
    np.testing.assert_allclose(
        est.predict_survival_function(rows, return_array=True), surv, rtol=0, atol=1e-12
    )
    np.testing.assert_allclose(est.predict(rows), rsf.predict(rows), rtol=1e-12, atol=0)


def test_a_coarser_grid_reads_each_curve_at_its_points(data, fitted):
    X, y = data
    rsf, _ = fitted
    grid = np.quantile(y["time"][:300][y["event"][:300]], np.linspace(0.05, 0.95, 12))
    forest = PooledForest.from_sksurv(rsf, NAMES, "s1", times=grid)
    steps = rsf.predict_cumulative_hazard_function(X[300:])
    expected = np.array([fn(grid) for fn in steps])
    got = PooledForestSurvival(forest).predict_cumulative_hazard_function(X[300:])
    assert got.shape == (100,) and got[0].x.tolist() == grid.tolist()
    np.testing.assert_allclose(np.array([fn.y for fn in got]), expected, atol=1e-12, rtol=0)
    # before the forest's first time: no hazard yet, everyone alive
    early = PooledForest.from_sksurv(rsf, NAMES, "s1", times=[0.0, *grid])
    values = PooledForestSurvival(early).predict_survival_function(X[300:], return_array=True)
    assert (values[:, 0] == 1.0).all()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_engines_agree_with_half_the_features_absent(data, fitted, monkeypatch, strategy):
    X, _ = data
    _, forest = fitted
    imputers, std = imputers_and_std(data)
    rows = X[300:][["a", "b"]].copy()
    rows.iloc[::7, 1] = np.nan
    params = dict(
        strategy=strategy,
        site="s1",
        imputers=imputers,
        feature_std=std,
        guess_weight=0.3,
        random_state=3,
    )
    numpy = PooledForestSurvival(forest, engine="numpy", **params)
    numba = PooledForestSurvival(forest, engine="numba", **params)
    chf = numpy.predict_cumulative_hazard_function(rows, return_array=True)
    np.testing.assert_array_equal(chf, numba.predict_cumulative_hazard_function(rows, True))
    surv = numpy.predict_survival_function(rows, return_array=True)
    # curves: hazards from 0 up, survival from 1 down
    assert np.all(np.diff(chf, axis=1) >= -1e-12) and (chf >= 0).all()
    assert np.all(np.diff(surv, axis=1) <= 1e-12) and ((surv >= 0) & (surv <= 1 + 1e-12)).all()
    monkeypatch.setattr(pooled.fastpath, "available", lambda: False)
    dynamic = PooledForestSurvival(forest, engine="numba", **params).predict(rows)
    dynamic_np = PooledForestSurvival(forest, engine="numpy", **params).predict(rows)
    np.testing.assert_array_equal(dynamic, dynamic_np)


@pytest.mark.parametrize("engine", ["numpy", "numba"])
@pytest.mark.parametrize("strategy", [*STRATEGIES, "intersection"])
def test_each_curve_alone_is_that_half_of_both_bit_for_bit(data, fitted, strategy, engine):
    """A call that needs the cumulative hazard (or the survival curve) averages only it."""
    X, _ = data
    _, forest = fitted
    imputers, std = imputers_and_std(data)
    rows = X[300:][["a", "b", "d"]].copy()  # c absent
    rows.iloc[::5, 1] = np.nan
    est = PooledForestSurvival(
        forest,
        strategy=strategy,
        site="s1",
        imputers=imputers,
        feature_std=std,
        engine=engine,
        guess_weight=0.3,
        random_state=2,
        intersection=forest,
    )
    both = est._curves(rows)
    n = forest.n_times
    hazard = est.predict_cumulative_hazard_function(rows, return_array=True)
    survival = est.predict_survival_function(rows, return_array=True)
    assert hazard.shape == survival.shape == (len(rows), n)
    np.testing.assert_array_equal(hazard, both[:, :n])
    np.testing.assert_array_equal(survival, both[:, n:])
    np.testing.assert_array_equal(est.predict(rows), both[:, :n].sum(axis=1))
    # with a memo both curves are predicted once and shared by the calls
    memo = PredictionMemo()
    np.testing.assert_array_equal(est.predict(rows, memo=memo), est.predict(rows))
    np.testing.assert_array_equal(
        est.predict_survival_function(rows, return_array=True, memo=memo), survival
    )
    assert len(memo) >= 1 and not any("outputs" in key for key in memo._entries)


def test_a_range_of_value_columns_is_checked(fitted):
    _, forest = fitted
    cache = forest_cache(forest)
    whole = cache.compiled(forest)
    assert whole.vote.shape == (forest.n_nodes, 0)  # curves have no hard vote
    assert cache.compiled(forest, (0, whole.value.shape[1])) is whole
    part = cache.compiled(forest, (0, forest.n_times))
    assert part.value.shape == (forest.n_nodes, forest.n_times) and part.vote.shape[1] == 0
    assert part.children is whole.children  # the layout is shared; only the values are cut
    assert cache.compiled(forest, (0, forest.n_times)) is part
    for bad in [(0, 0), (-1, 3), (0, whole.value.shape[1] + 1)]:
        with pytest.raises(ValueError, match="is not a range of the forest's"):
            cache.compiled(forest, bad)


def test_mp_averages_the_reachable_leaves_curves(data, fitted):
    X, _ = data
    _, forest = fitted
    rows = X[300:][["a", "b", "d"]]  # c absent
    est = PooledForestSurvival(forest, strategy="mp", feature_std=X.std().to_dict())
    chf = est.predict_cumulative_hazard_function(rows, return_array=True)
    leaf = forest.feature < 0
    lo, hi = (
        forest.value[leaf, : forest.n_times].min(0),
        forest.value[leaf, : forest.n_times].max(0),
    )
    assert np.all(chf >= lo - 1e-12) and np.all(chf <= hi + 1e-12)
    assert est.predict(rows).shape == (100,)


def test_auto_and_wmp_are_fitted_by_the_integrated_brier_score(data, fitted):
    X, y = data
    _, forest = fitted
    imputers, std = imputers_and_std(data)
    val, y_val = X[300:360][["a", "b"]], y[300:360]
    est = PooledForestSurvival(
        forest, strategy="auto", site="s1", imputers=imputers, feature_std=std, random_state=0
    ).fit(val, y_val)
    scores = est.selection_scores_
    assert {"mp", "fpv", "node", "local"} <= set(scores) and est.strategy_ in scores
    surv = est.predict_survival_function(val, return_array=True)
    assert np.mean(brier_losses(y_val, surv, forest.times)) == pytest.approx(scores[est.strategy_])
    by_c = PooledForestSurvival(
        forest, strategy="auto", site="s1", feature_std=std, auto_metric="cindex"
    ).fit(val, y_val)
    best_c = max(by_c.selection_scores_.values())
    assert by_c.selection_scores_[by_c.strategy_] == best_c
    wmp = PooledForestSurvival(forest, strategy="wmp", imputers=imputers, feature_std=std)
    wmp.fit(val, y_val)
    chosen = wmp.guess_weight_scores_[wmp.guess_weight_]
    assert chosen == min(wmp.guess_weight_scores_.values())


def test_score_is_harrells_concordance(data, fitted):
    X, y = data
    _, forest = fitted
    est = PooledForestSurvival(forest)
    risk = est.predict(X[300:])
    expected = concordance_index_censored(y["event"][300:], y["time"][300:], risk)[0]
    assert est.score(X[300:], y[300:]) == expected
    assert est.times_ is forest.times and est.unique_times_ is forest.times


def test_survival_trees_are_not_taken_for_another_task(fitted):
    _, forest = fitted
    with pytest.raises(ValueError, match="holds survival trees; use PooledForestSurvival"):
        PooledForestRegressor(forest).predict(np.zeros((1, 4)))
    with pytest.raises(ValueError, match="auto_metric='auc' is not one of"):
        PooledForestSurvival(forest, strategy="auto", auto_metric="auc").fit(
            pd.DataFrame(np.zeros((3, 4)), columns=NAMES), survival_target([1, 2, 3], [1, 1, 0])
        )


def test_fit_needs_a_survival_target(data, fitted):
    X, y = data
    est = PooledForestSurvival(fitted[1], strategy="auto")
    with pytest.raises(ValueError, match="needs fit"):
        est.fit()
    with pytest.raises(ValueError, match="must be a survival target"):
        est.fit(X[:3], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="3 rows but y has 2 targets"):
        est.fit(X[:3], y[:2])
    with pytest.raises(ValueError, match="0/1 or booleans"):
        bad = np.array([(2, 1.0), (1, 2.0)], dtype=[("e", int), ("t", float)])
        est.fit(X[:2], bad)


def test_survival_forests_round_trip_and_refuse_bad_curves(fitted):
    _, forest = fitted
    payload = forest.to_payload()
    assert payload["version"] == 4 and payload["task"] == "survival"
    back = PooledForest.from_payload(payload)
    assert np.array_equal(back.value, forest.value) and np.array_equal(back.times, forest.times)
    t = forest.n_times

    def refused(change, message):
        bad = {**forest.to_payload()}
        bad["value"] = bad["value"].copy()
        bad["times"] = bad["times"].copy()
        change(bad)
        with pytest.raises(PayloadError, match=message) as info:
            PooledForest.from_payload(bad, sender="site-9")
        assert "site-9" in str(info.value)

    refused(lambda p: p["value"].__setitem__((0, 1), -1.0), "field 'value'")
    refused(lambda p: p["value"].__setitem__((0, t - 1), 0.0), "non-decreasing")
    refused(lambda p: p["value"].__setitem__((0, t), 1.5), "field 'value'")
    refused(lambda p: p["value"].__setitem__((0, 2 * t - 1), 0.999), "does not increase")
    refused(lambda p: p["times"].__setitem__(1, p["times"][0]), "strictly increasing")
    refused(lambda p: p.update(times=np.zeros(0)), "field 'times'")
    refused(lambda p: p.update(times=p["times"][:-1]), "field 'value'")
    refused(lambda p: p.update(classes=[0, 1]), r"survival trees have no classes")


def test_forests_on_different_grids_do_not_pool(data, fitted):
    rsf, forest = fitted
    other = PooledForest.from_sksurv(rsf, NAMES, "s2", times=forest.times[::2])
    with pytest.raises(ValueError, match="different time grids"):
        PooledForest.concat([forest, other])
    same = PooledForest.from_sksurv(rsf, NAMES, "s2", times=forest.times)
    pooled_forest = PooledForest.concat([forest, same])
    assert pooled_forest.n_trees == 40 and pooled_forest.owners == ["s1", "s2"]


def test_the_docstring_examples_run():
    import doctest

    import fedforest.model.forest
    import fedforest.prediction.survival
    import fedforest.survival_metrics

    for module in (
        fedforest.prediction.survival,
        fedforest.survival_metrics,
        fedforest.model.forest,  # PooledForest.from_sksurv
    ):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__
