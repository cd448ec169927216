"""PooledForestRegressor: exactness against scikit-learn, every strategy, both engines."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.ensemble import RandomForestRegressor

from conftest import make_tree_forest
from fedforest import (
    Imputer,
    ImputerSet,
    PayloadError,
    PooledForest,
    PooledForestClassifier,
    PooledForestRegressor,
)
from fedforest.model.forest import NODE_FIELDS
from fedforest.prediction import pipeline as pooled
from fedforest.vocabulary import STRATEGIES

NAMES = ["a", "b", "c", "d"]


def regression_trees(trees, feature_names) -> PooledForest:
    """Hand-written trees (``conftest.make_tree_forest``'s form) whose one value is the mean."""
    shaped = make_tree_forest(trees, feature_names, classes=("mean",))
    fields = {k: getattr(shaped, k) for k in (*NODE_FIELDS, "tree_start", "tree_owner", "value")}
    return PooledForest(
        task="regression",
        feature_names=feature_names,
        classes=[],
        owners=shaped.owners,
        categories=shaped.categories,
        **fields,
    )


# one tree: root on b (30 rows left, mean 1; 70 right), right child on a (mean 10 / 20)
TREE = [
    ("split", "b", 0.5, 1, 2, 100),
    ("leaf", [1.0], 30),
    ("split", "a", 0.0, 3, 4, 70),
    ("leaf", [10.0], 40),
    ("leaf", [20.0], 30),
]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(400, 4)), columns=NAMES)
    y = 3 * X["a"] - 2 * X["c"] + X["b"] * X["d"] + rng.normal(scale=0.3, size=400)
    return X, y.to_numpy()


@pytest.fixture(scope="module")
def forest(data):
    X, y = data
    rf = RandomForestRegressor(n_estimators=25, random_state=0).fit(X[:300], y[:300])
    return rf, PooledForest.from_sklearn(rf, NAMES, owner="s1")


def imputers_and_std(data):
    X, _ = data
    coef = np.polyfit(X["a"], X["c"], 1)
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
    return ImputerSet([imputer]), {n: float(X[n].std()) for n in NAMES}


@pytest.mark.parametrize("engine", ["numpy", "numba"])
@pytest.mark.parametrize("strategy", [*STRATEGIES, "intersection"])
def test_every_strategy_equals_sklearn_with_every_feature_bit_for_bit(
    data, forest, strategy, engine
):
    X, _ = data
    rf, pooled_forest = forest
    reg = PooledForestRegressor(
        pooled_forest,
        strategy=strategy,
        site="s1",
        engine=engine,
        guess_weight=0.3,
        random_state=0,
        intersection=pooled_forest,
    )
    assert np.array_equal(reg.predict(X[300:]), rf.predict(X[300:]))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_engines_agree_with_half_the_features_absent(data, forest, monkeypatch, strategy):
    X, _ = data
    _, pooled_forest = forest
    imputers, std = imputers_and_std(data)
    rows = X[300:][["a", "b"]].copy()
    rows.iloc[::7, 1] = np.nan  # NaN in a column the site has, too
    params = dict(
        strategy=strategy,
        site="s1",
        imputers=imputers,
        feature_std=std,
        guess_weight=0.3,
        random_state=3,
    )
    numpy = PooledForestRegressor(pooled_forest, engine="numpy", **params).predict(rows)
    numba = PooledForestRegressor(pooled_forest, engine="numba", **params).predict(rows)
    np.testing.assert_array_equal(numpy, numba)
    assert np.isfinite(numpy).all()
    # without scikit-learn's compiled trees every row takes the dynamic traversal: the same
    # numbers for the strategies that draw nothing (the random ones draw in another order)
    monkeypatch.setattr(pooled.fastpath, "available", lambda: False)
    dynamic = PooledForestRegressor(pooled_forest, engine="numba", **params).predict(rows)
    dynamic_np = PooledForestRegressor(pooled_forest, engine="numpy", **params).predict(rows)
    np.testing.assert_array_equal(dynamic, dynamic_np)
    if strategy not in ("pr", "ipr", "mi", "ss"):
        np.testing.assert_allclose(numpy, dynamic, rtol=1e-12)


def test_the_strategies_resolve_an_absent_feature_by_the_leaf_means():
    forest = regression_trees([TREE], ["a", "b"])
    row = pd.DataFrame({"a": [1.0]})  # b absent: the root cannot be resolved
    predict = lambda strategy, **kw: PooledForestRegressor(  # noqa: E731
        forest, strategy=strategy, random_state=0, **kw
    ).predict(row)[0]
    # mp: the expected leaf value, N_right / N_node at the root
    assert predict("mp") == pytest.approx(0.3 * 1.0 + 0.7 * 20.0)
    # node: the root's own mean (its value as given) is the tree's prediction
    assert predict("node") == forest.value[0, 0]
    # fpv discards the only tree: the row falls back to mp
    assert predict("fpv") == pytest.approx(predict("mp"))
    # with b present every strategy follows the tree
    full = pd.DataFrame({"a": [1.0], "b": [0.7]})
    for strategy in ("fpv", "mp", "node", "pr", "ss"):
        assert PooledForestRegressor(forest, strategy=strategy).predict(full)[0] == 20.0


def test_auto_keeps_the_lowest_validation_rmse_and_wmp_fits_its_weight(data, forest):
    X, y = data
    _, pooled_forest = forest
    imputers, std = imputers_and_std(data)
    val, y_val = X[300:350][["a", "b", "c"]], y[300:350]
    reg = PooledForestRegressor(
        pooled_forest,
        strategy="auto",
        site="s1",
        imputers=imputers,
        feature_std=std,
        random_state=0,  # the same draws when predicting as when choosing
    ).fit(val, y_val)
    scores = reg.selection_scores_
    assert set(scores) == {"fpv", "pr", "mi", "ipr", "mp", "ss", "node", "park", "local"}
    best = min(scores.values())
    assert reg.strategy_ in scores and reg.runner_up_ in scores
    rmse = np.sqrt(np.mean((reg.predict(val) - y_val) ** 2))
    assert rmse == pytest.approx(scores[reg.strategy_])
    assert scores[reg.strategy_] <= best + 0.5 * np.std(y_val)  # within the tie rule's reach
    wmp = PooledForestRegressor(
        pooled_forest, strategy="wmp", imputers=imputers, feature_std=std
    ).fit(val[["a", "b"]], y_val)
    assert wmp.guess_weight_ in wmp.guess_weight_scores_
    assert wmp.guess_weight_scores_[wmp.guess_weight_] == min(wmp.guess_weight_scores_.values())
    one = PooledForestRegressor(
        pooled_forest, strategy="wmp", guess_weight=1.0, imputers=imputers, feature_std=std
    )
    mp = PooledForestRegressor(pooled_forest, strategy="mp", imputers=imputers, feature_std=std)
    np.testing.assert_allclose(one.predict(val[["a"]]), mp.predict(val[["a"]]), rtol=1e-12)


@pytest.mark.parametrize("weight", [0.0, 0.3, 0.7, 1.0])
def test_wmp_weighs_the_certain_and_the_guessing_trees_means(data, forest, weight):
    X, _ = data
    _, pooled_forest = forest
    imputers, std = imputers_and_std(data)
    rows = X[300:][["a", "b"]]  # the trees splitting on c or d guess
    params = dict(imputers=imputers, feature_std=std, site="s1")
    fpv = PooledForestRegressor(pooled_forest, strategy="fpv", **params)
    p_fpv = fpv.predict(rows)
    n_certain = fpv.diagnostics_.trees_kept
    p_mp = PooledForestRegressor(pooled_forest, strategy="mp", **params).predict(rows)
    n = pooled_forest.n_trees
    certain = np.where(n_certain > 0, n_certain * p_fpv, 0.0)
    with np.errstate(invalid="ignore"):  # weight 0 on a row without a certain tree: 0 / 0
        expected = (certain + weight * (n * p_mp - certain)) / (
            n_certain + weight * (n - n_certain)
        )
    if weight == 0.0:  # rows without a certain tree take mp, as fpv's do
        expected = np.where(n_certain > 0, expected, p_mp)
    wmp = PooledForestRegressor(pooled_forest, strategy="wmp", guess_weight=weight, **params)
    predicted = wmp.predict(rows)
    np.testing.assert_allclose(predicted, expected, rtol=1e-12)
    # a mean of leaf means: within the trees' range, never a normalised 1.0
    assert (
        predicted.min() >= pooled_forest.value.min()
        and predicted.max() <= pooled_forest.value.max()
    )
    assert 0 < (n_certain > 0).mean() < 1 and not np.allclose(predicted, 1.0)


def test_regression_and_classification_trees_are_not_mixed(forest):
    _, pooled_forest = forest
    with pytest.raises(ValueError, match="holds regression trees; use PooledForestRegressor"):
        PooledForestClassifier(pooled_forest).predict_proba(np.zeros((1, 4)))
    classes = make_tree_forest([[("leaf", [0.5, 0.5], 3)]], ["a"])
    with pytest.raises(ValueError, match="holds classification trees; use PooledForestClassifier"):
        PooledForestRegressor(classes).predict(np.zeros((1, 1)))
    with pytest.raises(ValueError, match="cannot be pooled"):
        PooledForest.concat([pooled_forest, classes])


def test_fit_needs_finite_validation_targets(data, forest):
    X, y = data
    reg = PooledForestRegressor(forest[1], strategy="auto")
    with pytest.raises(ValueError, match="needs fit"):
        reg.fit()
    with pytest.raises(ValueError, match="missing or infinite targets"):
        reg.fit(X[:3], [1.0, np.nan, 2.0])
    with pytest.raises(ValueError, match="3 rows but y has 2 targets"):
        reg.fit(X[:3], [1.0, 2.0])


def test_it_is_a_scikit_learn_regressor(data, forest):
    X, y = data
    reg = PooledForestRegressor(forest[1], strategy="fpv")
    assert clone(reg).get_params()["strategy"] == "fpv"
    assert reg.fit().score(X[300:], y[300:]) > 0.5  # R^2, from RegressorMixin


# ------------------------------------------------------------------ payloads
def test_regression_trees_round_trip_as_version_3(forest):
    _, pooled_forest = forest
    payload = pooled_forest.to_payload()
    assert payload["version"] == 4 and payload["task"] == "regression"
    assert payload["classes"] == [] and payload["leaf_counts"].size == 0
    back = PooledForest.from_payload(payload, sender="site-9")
    assert back.task == "regression"
    for key in (*NODE_FIELDS, "value", "tree_start"):
        np.testing.assert_array_equal(getattr(back, key), getattr(pooled_forest, key), key)


def test_a_version_2_payload_holds_classification_trees():
    forest = make_tree_forest([[("leaf", [0.25, 0.75], 4)]], ["a"])
    old = {k: v for k, v in forest.to_payload().items() if k not in ("task", "times")}
    old["version"] = 2
    back = PooledForest.from_payload(old)
    assert back.task == "classification" and back.value.tolist() == [[0.25, 0.75]]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda p: p.update(task="ranking"), "field 'task'"),
        (lambda p: p.update(classes=[0, 1]), r"an empty list \(regression trees have no classes"),
        (lambda p: p["value"].__setitem__((0, 0), np.inf), "field 'value'"),
        (lambda p: p.update(value_trees=p["value_trees"][1:]), "must list every tree"),
        (lambda p: p.pop("task"), "task"),
    ],
)
def test_a_malformed_regression_payload_is_refused_naming_the_field(forest, change, message):
    payload = forest[1].to_payload()
    payload["value"] = payload["value"].copy()
    change(payload)
    with pytest.raises(PayloadError, match=message) as info:
        PooledForest.from_payload(payload, sender="site-9")
    assert "site-9" in str(info.value)


def test_a_regressor_of_a_model_is_the_regressor_of_its_parts(data, forest):
    from fedforest.model.pooled_model import PooledModel, PredictionSettings

    X, _ = data
    _, pooled_forest = forest
    imputers, std = imputers_and_std(data)
    # a regression job's model records the job's voting too: a regressor has no such parameter
    settings = PredictionSettings(depth_threshold=3, voting="soft", seed=9)
    model = PooledModel(pooled_forest, imputers, std, settings=settings)
    reg = PooledForestRegressor.from_model(model, strategy="pr")
    parts = PooledForestRegressor(
        pooled_forest,
        strategy="pr",
        imputers=imputers,
        feature_std=std,
        depth_threshold=3,
        random_state=9,
    )
    assert reg.get_params() == parts.get_params() and "voting" not in reg.get_params()
    rows = X[["a", "b"]][300:]
    np.testing.assert_array_equal(reg.predict(rows), parts.predict(rows))
