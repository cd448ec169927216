from __future__ import annotations

import copy
import logging

import numpy as np
import pandas as pd
import pytest

from fedforest.errors import PayloadError
from fedforest.model.imputers import Imputer, ImputerSet, fit_imputers

LEVELS = ["red", "green", "blue", "never"]  # code 3 never occurs


def _linear_frame(n=200, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n)})
    X["y"] = 2 * X["a"] - X["b"] + 1 + rng.normal(scale=0.01, size=n)
    return X


def _categorical_frame(n=240, seed=1):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-3, 3, size=n)
    b = rng.normal(size=n)
    # three well-separated bands of a -> codes 0, 1, 2 (with a gap around the cuts)
    a = np.where(np.abs(np.abs(a) - 1) < 0.2, a + 0.5 * np.sign(a), a)
    code = np.where(a < -1, 0, np.where(a < 1, 1, 2))
    return pd.DataFrame({"a": a, "b": b, "c": code})


def _index(names):
    return {n: i for i, n in enumerate(names)}


# ------------------------------------------------------------------ fitting
def test_numeric_imputer_recovers_coefficients():
    X = _linear_frame()
    imps = fit_imputers(X, ["y"], ["a", "b"], owner="s1", random_state=0)
    imp = imps["y"]
    assert imp.kind == "numeric" and imp.predictors == ["a", "b"]
    np.testing.assert_allclose(imp.coef, [2.0, -1.0], atol=0.01)
    np.testing.assert_allclose(imp.intercept, [1.0], atol=0.01)
    assert imp.score > 0.99
    assert imp.n_train == 200 and imp.owner == "s1"
    assert imp.levels.shape == (0,) and imp.n_levels == 0
    np.testing.assert_array_equal(imp.scale, np.ones(2))
    Xg = X[["a", "b", "y"]].to_numpy()
    Xg[:, 2] = np.nan
    pred = imp.predict(Xg, _index(["a", "b", "y"]))
    assert pred.dtype == np.float64 and pred.shape == (200,)
    np.testing.assert_allclose(pred, X["y"], atol=0.05)


def test_categorical_imputer_predicts_levels_and_probabilities():
    X = _categorical_frame()
    imps = fit_imputers(X, ["c"], ["a", "b"], categories={"c": LEVELS}, random_state=0)
    imp = imps["c"]
    assert imp.kind == "categorical"
    assert imp.n_levels == 4
    np.testing.assert_array_equal(imp.levels, [0, 1, 2])
    assert imp.coef.shape == (3, 2) and imp.intercept.shape == (3,)
    assert imp.score > 0.9
    names = ["a", "b", "c"]
    Xg = X[names].to_numpy(dtype=float)
    Xg[:, 2] = np.nan
    pred = imp.predict(Xg, _index(names))
    assert (pred == X["c"].to_numpy()).mean() > 0.95
    proba = imp.predict_proba(Xg, _index(names))
    assert proba.shape == (len(X), 4)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert np.all(proba[:, 3] == 0.0)
    np.testing.assert_array_equal(np.argmax(proba, axis=1), pred)


def test_binary_categorical_imputer():
    rng = np.random.default_rng(3)
    a = rng.normal(size=100)
    X = pd.DataFrame({"a": a, "c": (a > 0).astype(int)})
    imp = fit_imputers(X, ["c"], ["a"], categories={"c": ["no", "yes", "maybe"]})["c"]
    np.testing.assert_array_equal(imp.levels, [0, 1])
    assert imp.coef.shape == (2, 1)
    proba = imp.predict_proba(X[["a", "c"]].to_numpy(), {"a": 0, "c": 1})
    assert proba.shape == (100, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert (np.argmax(proba, axis=1) == X["c"]).mean() > 0.95


def test_nan_predictors_filled_with_center():
    X = _linear_frame()
    X.loc[::5, "a"] = np.nan  # training NaN: filled with the mean of the observed rows
    imps = fit_imputers(X, ["y"], ["a", "b"], random_state=0)
    imp = imps["y"]
    np.testing.assert_allclose(imp.center[0], X["a"].mean())
    idx = _index(["a", "b"])
    at_center = imp.predict(imp.center[None, :], idx)
    nan_row = imp.predict(np.array([[np.nan, np.nan]]), idx)
    np.testing.assert_allclose(nan_row, at_center)
    half = imp.predict(np.array([[np.nan, 0.7]]), idx)
    np.testing.assert_allclose(half, imp.predict(np.array([[imp.center[0], 0.7]]), idx))

    C = _categorical_frame()
    cimp = fit_imputers(C, ["c"], ["a", "b"], categories={"c": LEVELS})["c"]
    cidx = _index(["a", "b"])
    np.testing.assert_allclose(
        cimp.predict_proba(np.full((1, 2), np.nan), cidx),
        cimp.predict_proba(cimp.center[None, :], cidx),
    )


def test_predictor_order_follows_feature_index():
    X = _linear_frame()
    imp = fit_imputers(X, ["y"], ["a", "b"])["y"]
    Xg = X[["b", "a"]].to_numpy()
    np.testing.assert_allclose(
        imp.predict(Xg, {"b": 0, "a": 1}), imp.predict(X[["a", "b"]].to_numpy(), _index("ab"))
    )
    with pytest.raises(KeyError, match="'b'"):
        imp.predict(Xg, {"a": 1})
    with pytest.raises(ValueError, match="predict_proba"):
        imp.predict_proba(Xg, {"b": 0, "a": 1})


def test_too_few_rows_skipped(caplog):
    X = _linear_frame(n=20)
    X.loc[5:, "y"] = np.nan  # 5 observed rows
    with caplog.at_level(logging.INFO, logger="fedforest.model.imputers"):
        imps = fit_imputers(X, ["y"], ["a", "b"])
    assert len(imps) == 0 and "y" not in imps
    assert "observed rows" in caplog.text


def test_single_level_gives_constant_model():
    X = _categorical_frame(n=30)
    X["c"] = 2
    imp = fit_imputers(X, ["c"], ["a", "b"], categories={"c": LEVELS})["c"]
    np.testing.assert_array_equal(imp.levels, [2])
    assert np.all(imp.coef == 0)
    proba = imp.predict_proba(X[["a", "b"]].to_numpy(), _index("ab"))
    np.testing.assert_allclose(proba[:, 2], 1.0)
    assert imp.score == 0.0


def test_too_few_rows_per_level_uses_in_sample_score(caplog):
    X = _categorical_frame(n=6, seed=4)
    X["c"] = [0, 1, 1, 1, 1, 1]  # the fold testing the 0 trains on a single level
    with caplog.at_level(logging.INFO, logger="fedforest.model.imputers"):
        imp = fit_imputers(X, ["c"], ["a", "b"], categories={"c": LEVELS}, random_state=0)["c"]
    assert "in-sample" in caplog.text
    assert np.isfinite(imp.score) and 0.0 <= imp.score <= 1.0
    np.testing.assert_array_equal(imp.levels, [0, 1])


def test_no_predictors_gives_marginal_model():
    X = _linear_frame()
    imp = fit_imputers(X, ["y"], [])["y"]
    assert imp.coef.shape == (0,)
    np.testing.assert_allclose(imp.intercept, [X["y"].mean()])
    np.testing.assert_allclose(imp.predict(np.zeros((3, 0)), {}), X["y"].mean())


def test_bad_inputs_raise_value_error():
    X = _linear_frame()
    X["s"] = "text"
    with pytest.raises(ValueError, match="zz"):
        fit_imputers(X, ["zz"], ["a"])
    with pytest.raises(ValueError, match="qq"):
        fit_imputers(X, ["y"], ["a", "qq"])
    with pytest.raises(ValueError, match="both targets and predictors"):
        fit_imputers(X, ["y", "a"], ["a", "b"])
    with pytest.raises(ValueError, match="not numeric"):
        fit_imputers(X, ["y"], ["a", "s"])
    with pytest.raises(ValueError, match="not numeric"):
        fit_imputers(X, ["s"], ["a"])
    with pytest.raises(ValueError, match="duplicates"):
        fit_imputers(X, ["y"], ["a", "a"])
    with pytest.raises(ValueError, match="codes"):
        fit_imputers(X.assign(c=7), ["c"], ["a"], categories={"c": ["x", "y"]})
    with pytest.raises(ValueError, match="DataFrame"):
        fit_imputers(X.to_numpy(), ["y"], ["a"])


# ---------------------------------------------------------------- selection
def _imp(owner, score, n_train, feature="x", coef=0.0):
    return Imputer(
        feature=feature,
        kind="numeric",
        predictors=["a"],
        intercept=np.zeros(1),
        coef=np.array([coef]),
        center=np.zeros(1),
        scale=np.ones(1),
        score=score,
        n_train=n_train,
        owner=owner,
    )


def test_select_picks_highest_score_then_larger_training_set():
    s1 = ImputerSet([_imp("s1", 0.9, 10), _imp("s1", 0.2, 500, feature="z")])
    s2 = ImputerSet([_imp("s2", 0.5, 100), _imp("s2", 0.2, 600, feature="z")])
    s3 = ImputerSet([_imp("s3", 0.9, 10, feature="w")])
    best = ImputerSet.select([s1, s2, s3])
    assert best.features == ["x", "z", "w"]
    assert best["x"].owner == "s1"  # higher score
    assert best["z"].owner == "s2"  # tie on score: larger n_train
    tie = ImputerSet.select([ImputerSet([_imp("b", 0.5, 10)]), ImputerSet([_imp("a", 0.5, 10)])])
    assert tie["x"].owner == "a"  # full tie: owner name
    nan = ImputerSet.select([ImputerSet([_imp("a", np.nan, 99)]), ImputerSet([_imp("b", -3, 1)])])
    assert nan["x"].owner == "b"


def test_select_refuses_kind_conflicts():
    cat = Imputer(
        feature="x",
        kind="categorical",
        predictors=["a"],
        intercept=np.zeros(1),
        coef=np.zeros((1, 1)),
        center=np.zeros(1),
        scale=np.ones(1),
        levels=np.array([0]),
        n_levels=2,
        score=0.1,
        n_train=5,
        owner="s2",
    )
    with pytest.raises(ValueError, match="disagree"):
        ImputerSet.select([ImputerSet([_imp("s1", 0.5, 10)]), ImputerSet([cat])])


def test_imputer_set_mapping_behaviour():
    s = ImputerSet([_imp("s1", 0.5, 10), _imp("s1", 0.5, 10, feature="z")])
    assert len(s) == 2 and "x" in s and "q" not in s
    assert list(s) == ["x", "z"] == s.features
    with pytest.raises(KeyError):
        s["q"]
    with pytest.raises(ValueError, match="two imputers"):
        ImputerSet([_imp("s1", 0.5, 10), _imp("s2", 0.5, 10)])


# ------------------------------------------------------------------ payload
def _fitted_set():
    X = _categorical_frame()
    X["y"] = 2 * X["a"] - X["b"] + 1
    return fit_imputers(
        X, ["y", "c"], ["a", "b"], categories={"c": LEVELS}, owner="s1", random_state=0
    )


def test_payload_round_trip_identical_predictions():
    imps = _fitted_set()
    payload = imps.to_payload()
    assert payload["format"] == "fedforest/imputers" and payload["version"] == 1
    for item in payload["imputers"]:
        for v in item.values():
            assert isinstance(v, (str, int, float, list, np.ndarray))
            if isinstance(v, np.ndarray):
                assert v.dtype in (np.float64, np.int64)
    back = ImputerSet.from_payload(payload, sender="s1")
    assert back.features == imps.features
    rng = np.random.default_rng(5)
    Xg = rng.normal(size=(50, 4))
    Xg[::7, 0] = np.nan
    idx = _index(["a", "b", "y", "c"])
    for f in imps:
        np.testing.assert_array_equal(back[f].predict(Xg, idx), imps[f].predict(Xg, idx))
        assert back[f].score == imps[f].score and back[f].n_train == imps[f].n_train
    np.testing.assert_array_equal(
        back["c"].predict_proba(Xg, idx), imps["c"].predict_proba(Xg, idx)
    )


def _mutated(path, value):
    payload = copy.deepcopy(_fitted_set().to_payload())
    target = payload
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return payload


_DELETE = object()
_CAT = 1  # index of the categorical imputer in the payload list


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("version",), 2, "version"),
        (("format",), "fedforest/pooled-forest", "format"),
        (("imputers", 0, "coef"), np.array([1, 2]), "coef"),  # int dtype
        (("imputers", 0, "coef"), np.array([1.0, 2.0, 3.0]), "coef"),  # wrong length
        (("imputers", 0, "coef"), np.array([1.0, np.inf]), "coef"),
        (("imputers", 0, "intercept"), np.array([np.nan]), "intercept"),
        (("imputers", 0, "center"), [0.0, 0.0], "center"),  # not an array
        (("imputers", 0, "scale"), np.array([1.0, 0.0]), "scale"),
        (("imputers", 0, "kind"), "ordinal", "kind"),
        (("imputers", 0, "n_train"), 0, "n_train"),
        (("imputers", 0, "n_train"), 3.5, "n_train"),
        (("imputers", 0, "score"), float("nan"), "score"),
        (("imputers", 0, "owner"), "", "owner"),
        (("imputers", 0, "predictors"), ["a", "a"], "predictors"),
        (("imputers", 0, "predictors"), ["a", "y"], "predictors"),
        (("imputers", 0, "extra"), 1, "extra"),
        (("imputers", 0, "feature"), _DELETE, "feature"),
        (("imputers", _CAT, "levels"), np.array([0, 1, 4]), "levels"),
        (("imputers", _CAT, "levels"), np.array([0.0, 1.0, 2.0]), "levels"),
        (("imputers", _CAT, "levels"), np.array([0, 0, 2]), "levels"),
        (("imputers", _CAT, "n_levels"), 2, "levels"),
        (("imputers", _CAT, "coef"), np.zeros((3, 3)), "coef"),
        (("imputers", _CAT, "coef"), np.zeros(3), "coef"),
        (("imputers", _CAT, "intercept"), np.zeros(2), "intercept"),
        (("imputers", _CAT, "feature"), "y", "two imputers"),
        (("imputers",), "nope", "imputers"),
        (("imputers", 0), "nope", "imputers[0]"),
    ],
)
def test_malformed_payloads_refused(path, value, field):
    payload = _mutated(path, value)
    with pytest.raises(PayloadError) as info:
        ImputerSet.from_payload(payload, sender="site-9")
    msg = str(info.value)
    assert field in msg
    assert "site-9" in msg


def test_payload_not_a_dict():
    with pytest.raises(PayloadError, match="expected a dict"):
        ImputerSet.from_payload([1, 2], sender="x")


def test_a_fit_no_receiver_would_read_is_not_kept_and_the_site_says_why(caplog):
    # predictors of magnitude 1e-300 and a target of order 1: coefficients near 1e300, whose
    # value on a row of ordinary magnitude (within float32's range) overflows float64
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=60) * 1e-300, "b": rng.normal(size=60) * 1e-300})
    X["t"] = X["a"] * 1e300 + rng.normal(scale=0.1, size=60)
    with caplog.at_level("WARNING", logger="fedforest.model.imputers"):
        imps = fit_imputers(X[["t", "a", "b"]], ["t"], ["a", "b"], owner="s1", cv=None)
    assert "t" not in imps
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "no imputer for 't' at s1" in said and "'coef'" in said and "float64" in said
