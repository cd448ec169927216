"""Local feature selectors (fedforest.election.selectors), on real scikit-learn models."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from fedforest.election.selectors import (
    CLASSIFICATION_SELECTORS,
    REGRESSION_SELECTORS,
    SELECTORS,
    SURVIVAL_SELECTORS,
    LocalSelection,
    SelectorParamError,
    SelectorTaskError,
    check_params,
    default_params,
    select_features,
    selectors_for,
)

SIGNAL = ["s0", "s1", "s2", "s3", "cat"]
NUMERIC_SIGNAL = ["s0", "s1", "s2", "s3"]
NOISE = ["n0", "n1", "n2", "n3", "n4", "ncat"]
CATEGORICAL = ["cat", "ncat"]
METHODS = [m for m in CLASSIFICATION_SELECTORS if m != "none"]
#: Most noise columns a method may select on the synthetic table.
MAX_NOISE = {
    "lasso": 3,
    "elastic_net": 3,
    "f_classif": 3,
    "chi2": 3,
    "mutual_info": 4,
    "random_forest": 4,
}


def make_table(seed: int = 37, n: int = 600) -> tuple[pd.DataFrame, np.ndarray]:
    """4 numeric signals, 1 categorical signal (3 levels), 5 numeric + 1 categorical noise.

    The target follows a logistic model ``5 * (s0 + s1 - s2 + s3) + 7 * effect[cat]``
    with ``effect = (-1, 0, 1)``; numeric columns are uniform with unit variance
    (bounded, so that ``chi2`` on min-max scaled values has power). The
    strengths and the seed were chosen so that every method finds every signal
    with a margin (and regardless of the selector's ``random_state``): the
    mean-threshold methods need signals of similar strength, and the
    3-level categorical needs a strong effect to beat continuous noise in
    impurity importance.
    """
    rng = np.random.default_rng(seed)

    def draw() -> np.ndarray:
        return rng.uniform(-np.sqrt(3), np.sqrt(3), size=n)

    X = pd.DataFrame({f"s{i}": draw() for i in range(4)})
    X["cat"] = rng.integers(0, 3, size=n)
    for i in range(5):
        X[f"n{i}"] = draw()
    X["ncat"] = rng.integers(0, 4, size=n)
    logit = 5.0 * (X["s0"] + X["s1"] - X["s2"] + X["s3"]) + np.array([-7.0, 0.0, 7.0])[X["cat"]]
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(int)
    return X, y


@pytest.fixture(scope="module")
def table() -> tuple[pd.DataFrame, np.ndarray]:
    return make_table()


def run(table, method, **kwargs) -> LocalSelection:
    X, y = table
    kwargs.setdefault("random_state", 0)
    return select_features(X, y, method, categorical=CATEGORICAL, **kwargs)


def scores_of(sel: LocalSelection) -> dict[str, float]:
    return dict(zip(sel.features, sel.scores, strict=True))


# --------------------------------------------------------------------------- behaviour


@pytest.mark.parametrize("method", METHODS)
def test_finds_signal_and_little_noise(table, method):
    sel = run(table, method)
    assert sel.method == method
    assert sel.features == list(table[0].columns)
    assert sel.mask.dtype == bool and sel.mask.shape == (11,)
    assert sel.scores.dtype == np.float64 and sel.scores.shape == (11,)
    assert np.all(np.isfinite(sel.scores)) and np.all(sel.scores >= 0)

    missing = [f for f in SIGNAL if f not in sel.selected]
    assert not missing, f"{method} missed signal columns {missing}: {scores_of(sel)}"
    noise = [f for f in sel.selected if f in NOISE]
    assert len(noise) <= MAX_NOISE[method], f"{method} selected noise {noise}"
    assert sel.selected == [f for f in sel.features if f in sel.selected]

    scores = scores_of(sel)
    median_noise = np.median([scores[f] for f in NOISE])
    assert all(scores[f] > median_noise for f in SIGNAL), scores


def test_none_keeps_everything(table):
    sel = run(table, "none")
    assert sel.mask.all()
    assert sel.selected == list(table[0].columns)
    np.testing.assert_array_equal(sel.scores, np.ones(11))
    assert sel.params == {}


@pytest.mark.parametrize(
    "method, params",
    [
        ("mutual_info", None),
        ("random_forest", None),
        ("random_forest", {"importance": "permutation"}),
        ("lasso", None),
    ],
)
def test_same_random_state_same_result(table, method, params):
    a = run(table, method, params=params, random_state=7)
    b = run(table, method, params=params, random_state=7)
    np.testing.assert_array_equal(a.mask, b.mask)
    np.testing.assert_array_equal(a.scores, b.scores)
    assert a.params == b.params


def test_random_forest_permutation_importance(table):
    sel = run(table, "random_forest", params={"importance": "permutation", "n_repeats": 3})
    assert sel.params["importance"] == "permutation"
    assert sel.params["n_repeats"] == 3
    assert np.all(sel.scores >= 0) and np.all(np.isfinite(sel.scores))
    scores = scores_of(sel)
    assert min(scores[f] for f in SIGNAL) > max(scores[f] for f in NOISE)


def test_multiclass_lasso_uses_max_over_classes():
    rng = np.random.default_rng(3)
    n = 600
    X = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n), "z": rng.normal(size=n)})
    # class 0 / 1 / 2 driven by a and b in different directions
    y = np.argmax(
        np.column_stack([2 * X["a"], 2 * X["b"], -2 * X["a"] - 2 * X["b"]])
        + rng.gumbel(size=(n, 3)),
        axis=1,
    )
    sel = select_features(X, y, "lasso", random_state=0)
    assert {"a", "b"} <= set(sel.selected)
    assert sel.scores[2] < min(sel.scores[0], sel.scores[1])


# --------------------------------------------------------------------------- categoricals


@pytest.fixture(scope="module")
def middle_level_table() -> tuple[pd.DataFrame, np.ndarray]:
    """Only code 1 of ``mid`` matters: the effect is non-monotone in the code."""
    rng = np.random.default_rng(11)
    n = 600
    X = pd.DataFrame(
        {
            "mid": rng.integers(0, 3, size=n),
            "n0": rng.normal(size=n),
            "n1": rng.normal(size=n),
        }
    )
    logit = -1.0 + 2.5 * (X["mid"] == 1)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(int)
    return X, y


@pytest.mark.parametrize("method", ["lasso", "f_classif", "chi2", "elastic_net", "mutual_info"])
def test_categorical_is_nominal(middle_level_table, method):
    X, y = middle_level_table
    sel = select_features(X, y, method, categorical=["mid"], random_state=0)
    assert "mid" in sel.selected
    assert sel.scores[0] == sel.scores.max()


def test_ordinal_treatment_would_miss_the_middle_level(middle_level_table):
    # The same column declared numeric is (nearly) invisible to a linear test:
    # the categorical handling is what finds it.
    X, y = middle_level_table
    as_numeric = select_features(X, y, "f_classif")
    as_categorical = select_features(X, y, "f_classif", categorical=["mid"])
    assert as_categorical.scores[0] > 10 * max(as_numeric.scores[0], 1.0)


def test_constant_and_single_level_columns_score_zero():
    rng = np.random.default_rng(5)
    n = 200
    X = pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "const": np.full(n, 3.0),
            "onelevel": np.zeros(n, dtype=int),
        }
    )
    y = (X["x"] + 0.5 * rng.normal(size=n) > 0).astype(int)
    for method in METHODS:
        sel = select_features(X, y, method, categorical=["onelevel"], random_state=0)
        assert np.all(np.isfinite(sel.scores)) and np.all(sel.scores >= 0), method
        assert sel.scores[1] == 0.0 and sel.scores[2] == 0.0, (method, sel.scores)
        assert sel.selected == ["x"], (method, sel.selected)


# --------------------------------------------------------------------------- missing values


@pytest.mark.parametrize("method", CLASSIFICATION_SELECTORS)
def test_nan_values_are_accepted(table, method):
    X, y = table
    rng = np.random.default_rng(1)
    X = X.astype(float).mask(rng.random(X.shape) < 0.05)
    X["empty"] = np.nan
    params = {"n_repeats": 2} if method == "random_forest" else None
    sel = select_features(X, y, method, categorical=CATEGORICAL, params=params, random_state=0)
    assert np.all(np.isfinite(sel.scores)) and np.all(sel.scores >= 0)
    if method != "none":
        assert set(SIGNAL) <= set(sel.selected), (method, scores_of(sel))
        assert "empty" not in sel.selected


def test_nullable_integer_categorical_is_accepted(table):
    X, y = table
    X = X.copy()
    X["cat"] = X["cat"].astype("Int64")
    X.loc[X.index[:10], "cat"] = pd.NA
    sel = select_features(X, y, "f_classif", categorical=CATEGORICAL)
    assert "cat" in sel.selected


# --------------------------------------------------------------------------- params


def test_default_params_are_reported(table):
    assert run(table, "lasso").params == {
        "C": 0.1,
        "max_iter": 2000,
        "tol": 1e-4,
        "threshold": 1e-6,
    }
    assert run(table, "elastic_net").params["l1_ratio"] == 0.5
    assert run(table, "f_classif").params == {"alpha": 0.05}
    assert run(table, "chi2").params == {"alpha": 0.05}
    assert run(table, "mutual_info").params["threshold"] == "mean"
    rf = run(table, "random_forest").params
    assert rf["n_estimators"] == 100 and rf["importance"] == "impurity"
    for method in CLASSIFICATION_SELECTORS:
        assert run(table, method).params == default_params(method)


def test_params_override(table):
    default = run(table, "f_classif")
    strict = run(table, "f_classif", params={"alpha": 1e-12})
    assert strict.params == {"alpha": 1e-12}
    assert strict.mask.sum() < default.mask.sum()
    np.testing.assert_array_equal(strict.scores, default.scores)

    sel = run(table, "lasso", params={"C": 0.5})
    assert sel.params["C"] == 0.5 and sel.params["max_iter"] == 2000

    sel = run(table, "mutual_info", params={"threshold": 0.02})
    assert sel.params["threshold"] == 0.02
    assert sel.mask.tolist() == (sel.scores >= 0.02).tolist()


def test_params_roundtrip(table):
    first = run(table, "elastic_net")
    again = run(table, "elastic_net", params=first.params)
    np.testing.assert_array_equal(first.scores, again.scores)


@pytest.mark.parametrize(
    "method, params, key",
    [
        ("lasso", {"alpha": 0.1}, "alpha"),
        ("f_classif", {"C": 1.0}, "C"),
        ("none", {"threshold": 0.5}, "threshold"),
        ("random_forest", {"n_trees": 10}, "n_trees"),
    ],
)
def test_unknown_params_are_refused(table, method, params, key):
    with pytest.raises(ValueError, match=rf"unknown parameter '{key}'.*allowed keys"):
        run(table, method, params=params)


@pytest.mark.parametrize(
    "method, params, key",
    [
        ("lasso", {"C": 0}, "C"),
        ("lasso", {"C": float("nan")}, "C"),
        ("elastic_net", {"l1_ratio": 1.5}, "l1_ratio"),
        ("f_classif", {"alpha": 0.0}, "alpha"),
        ("random_forest", {"importance": "gain"}, "importance"),
        ("random_forest", {"n_estimators": True}, "n_estimators"),
        ("mutual_info", {"threshold": "max"}, "threshold"),
        ("lasso", {"threshold": "mean"}, "threshold"),
    ],
)
def test_bad_param_values_are_refused(table, method, params, key):
    with pytest.raises(ValueError, match=rf"parameter '{key}'"):
        run(table, method, params=params)


def test_lasso_keeps_best_feature_when_nothing_selected(table, caplog):
    with caplog.at_level(logging.WARNING, logger="fedforest.election.selectors"):
        sel = run(table, "lasso", params={"C": 1e-5})
    assert sel.mask.sum() == 1
    assert sel.selected[0] in SIGNAL
    assert "selected no feature" in caplog.text


# --------------------------------------------------------------------------- validation


def test_unknown_method(table):
    with pytest.raises(ValueError, match=r"selector 'foo' is not one of \['lasso'"):
        run(table, "foo")


@pytest.mark.parametrize(
    "make_args, match",
    [
        (lambda X, y: (X, np.zeros(len(y), dtype=int)), "target has a single class"),
        (lambda X, y: (X[[]], y), "X has no columns"),
        (lambda X, y: (X.iloc[:0], y[:0]), "X has no rows"),
        (lambda X, y: (X, y[:-1]), "y has 599 values but X has 600 rows"),
        (lambda X, y: (X.assign(s0=X["s0"].astype(str)), y), r"non-numeric columns: \['s0'\]"),
        (lambda X, y: (X.assign(s0=np.inf), y), r"infinite values: \['s0'\]"),
        (lambda X, y: (X, np.where(np.arange(len(y)) == 0, np.nan, y)), "y .*missing"),
        (lambda X, y: (X.to_numpy(), y), "X must be a pandas DataFrame"),
    ],
)
def test_invalid_data(table, make_args, match):
    X, y = make_args(*table)
    with pytest.raises(ValueError, match=match):
        select_features(X, y, "f_classif")


def test_categorical_not_in_x(table):
    X, y = table
    with pytest.raises(ValueError, match=r"categorical columns not in X: \['colour'\]"):
        select_features(X, y, "lasso", categorical=["cat", "colour"])


@pytest.mark.parametrize("bad", [1.5, -1])
def test_categorical_codes_must_be_non_negative_integers(table, bad):
    X, y = table
    X = X.assign(cat=X["cat"].astype(float))
    X.loc[X.index[3], "cat"] = bad
    with pytest.raises(ValueError, match=r"categorical column 'cat' must hold integer codes"):
        select_features(X, y, "lasso", categorical=CATEGORICAL)


def test_local_selection_checks_its_fields():
    with pytest.raises(ValueError, match="scores"):
        LocalSelection(["a"], np.array([True]), np.array([-1.0]), "none")
    with pytest.raises(ValueError, match="mask"):
        LocalSelection(["a", "b"], np.array([True]), np.array([1.0, 1.0]), "none")


def test_check_params_is_the_validation_select_features_runs():
    assert check_params("lasso", {"C": 1}) == {**default_params("lasso"), "C": 1.0}
    assert check_params("none", None) == {}
    with pytest.raises(SelectorParamError) as info:
        check_params("random_forest", {"n_estimators": 0})
    err = info.value
    assert (err.method, err.key, err.value, err.allowed) == (
        "random_forest",
        "n_estimators",
        0,
        "an integer in [1, 10000]",
    )
    assert str(err) == (
        "parameter 'n_estimators' of selector 'random_forest' must be an integer in [1, 10000], "
        "got 0"
    )
    with pytest.raises(SelectorParamError) as info:
        check_params("f_classif", {"C": 1.0})
    assert (
        info.value.key == "C" and info.value.allowed == "a parameter of selector 'f_classif': alpha"
    )
    assert str(info.value).startswith("unknown parameter 'C' for selector 'f_classif'")
    with pytest.raises(ValueError, match="is not one of"):
        check_params("magic", {})


# --------------------------------------------------------------------------- regression

#: Friedman #1 columns: s2 enters as 20 * (s2 - 0.5)^2, a U shape that a linear
#: selector cannot see; the others (and ``cat``) have a linear part.
REG_SIGNAL = ["s0", "s1", "s2", "s3", "s4", "cat"]
REG_LINEAR = ["s0", "s1", "s3", "s4", "cat"]
#: The strongest signals: every method keeps them (the mean threshold of
#: ``mutual_info`` and ``random_forest`` may drop the weak s2 and s4).
REG_STRONG = ["s0", "s1", "s3", "cat"]
REG_NOISE = ["n0", "n1", "n2", "n3", "n4", "ncat"]
FAST_FOREST = {"n_estimators": 30}


def make_regression_table(seed: int = 0, n: int = 400) -> tuple[pd.DataFrame, np.ndarray]:
    """scikit-learn's Friedman #1 (s0..s4 informative, n0..n4 uniform noise) plus
    a categorical signal ``cat`` (3 levels, effects -4, 0, 4) and a categorical
    noise column ``ncat`` (4 levels)."""
    from sklearn.datasets import make_friedman1

    values, y = make_friedman1(n_samples=n, n_features=10, noise=1.0, random_state=seed)
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(values[:, :5], columns=[f"s{i}" for i in range(5)])
    X["cat"] = rng.integers(0, 3, size=n)
    for i in range(5):
        X[f"n{i}"] = values[:, 5 + i]
    X["ncat"] = rng.integers(0, 4, size=n)
    return X, y + np.array([-4.0, 0.0, 4.0])[X["cat"]]


@pytest.fixture(scope="module")
def reg_table() -> tuple[pd.DataFrame, np.ndarray]:
    return make_regression_table()


def run_reg(reg_table, method, **kwargs) -> LocalSelection:
    X, y = reg_table
    kwargs.setdefault("random_state", 0)
    return select_features(X, y, method, categorical=CATEGORICAL, task="regression", **kwargs)


#: method, params, the columns that must score above every noise column, the
#: columns that must be selected, most noise columns selected.
REGRESSION_CASES = [
    ("lasso", None, REG_LINEAR, REG_LINEAR, 1),
    ("elastic_net", None, REG_LINEAR, REG_LINEAR, 6),  # the L2 part keeps tiny coefficients
    ("f_regression", None, REG_LINEAR, REG_LINEAR, 1),
    ("mutual_info", None, REG_STRONG, REG_STRONG, 1),
    ("random_forest", FAST_FOREST, REG_SIGNAL, REG_STRONG, 0),
    (
        "random_forest",
        {**FAST_FOREST, "importance": "permutation", "n_repeats": 2},
        REG_STRONG,
        ["s1", "s3", "cat"],
        0,
    ),
]


@pytest.mark.parametrize("method, params, above_noise, kept, max_noise", REGRESSION_CASES)
def test_regression_selectors_find_the_informative_columns(
    reg_table, method, params, above_noise, kept, max_noise
):
    sel = run_reg(reg_table, method, params=params)
    assert sel.method == method and sel.features == list(reg_table[0].columns)
    assert np.all(np.isfinite(sel.scores)) and np.all(sel.scores >= 0)
    scores = scores_of(sel)
    top_noise = max(scores[f] for f in REG_NOISE)
    assert all(scores[f] > top_noise for f in above_noise), (method, scores)
    assert set(kept) <= set(sel.selected), (method, sel.selected, scores)
    noise = [f for f in sel.selected if f in REG_NOISE]
    assert len(noise) <= max_noise, (method, noise)


def test_regression_selector_lists():
    assert "f_regression" in SELECTORS
    assert selectors_for("regression") == REGRESSION_SELECTORS
    assert selectors_for("classification") == CLASSIFICATION_SELECTORS
    assert set(REGRESSION_SELECTORS) | set(CLASSIFICATION_SELECTORS) | set(
        SURVIVAL_SELECTORS
    ) == set(SELECTORS)
    assert {"chi2", "f_classif"}.isdisjoint(REGRESSION_SELECTORS)
    assert "f_regression" not in CLASSIFICATION_SELECTORS
    with pytest.raises(ValueError, match=r"task='ordinal' is not one of \['classification'"):
        selectors_for("ordinal")


def test_regression_none_and_params_are_the_classification_ones(reg_table):
    sel = run_reg(reg_table, "none")
    assert sel.mask.all() and np.all(sel.scores == 1.0) and sel.params == {}
    assert run_reg(reg_table, "f_regression").params == {"alpha": 0.05}
    assert default_params("f_regression") == {"alpha": 0.05}
    for method in ("lasso", "elastic_net", "mutual_info"):
        assert run_reg(reg_table, method).params == default_params(method)


def test_regression_lasso_strength_is_c_and_the_target_unit_does_not_matter(reg_table):
    X, y = reg_table
    default = run_reg(reg_table, "lasso")
    strong = run_reg(reg_table, "lasso", params={"C": 0.01})  # 10x the penalty
    assert strong.mask.sum() < default.mask.sum()
    assert set(strong.selected) <= set(default.selected)
    # the target is standardized: days or hours of stay give the same selection
    hours = select_features(X, 24 * y + 100, "lasso", categorical=CATEGORICAL, task="regression")
    np.testing.assert_allclose(hours.scores, default.scores, atol=1e-6)
    assert hours.selected == default.selected


def test_regression_lasso_keeps_best_feature_when_nothing_selected(reg_table, caplog):
    with caplog.at_level(logging.WARNING, logger="fedforest.election.selectors"):
        sel = run_reg(reg_table, "lasso", params={"C": 1e-4})
    assert sel.mask.sum() == 1 and sel.selected[0] in REG_LINEAR
    assert "selected no feature" in caplog.text


def test_regression_f_regression_is_deterministic_and_alpha_selects(reg_table):
    default = run_reg(reg_table, "f_regression")
    strict = run_reg(reg_table, "f_regression", params={"alpha": 1e-12}, random_state=5)
    np.testing.assert_array_equal(strict.scores, default.scores)
    assert strict.mask.sum() < default.mask.sum()
    p = 10.0**-default.scores
    assert default.mask.tolist() == (p < 0.05).tolist()


@pytest.mark.parametrize("method, params", [("mutual_info", None), ("random_forest", FAST_FOREST)])
def test_regression_same_random_state_same_result(reg_table, method, params):
    a = run_reg(reg_table, method, params=params, random_state=7)
    b = run_reg(reg_table, method, params=params, random_state=7)
    np.testing.assert_array_equal(a.scores, b.scores)
    np.testing.assert_array_equal(a.mask, b.mask)


def test_regression_categorical_is_nominal_for_f_regression():
    # only level 1 of ``mid`` matters: invisible to a linear test of the codes
    rng = np.random.default_rng(11)
    n = 300
    X = pd.DataFrame({"mid": rng.integers(0, 3, size=n), "n0": rng.normal(size=n)})
    y = 2.0 * (X["mid"] == 1) + rng.normal(size=n)
    as_numeric = select_features(X, y, "f_regression", task="regression")
    as_categorical = select_features(X, y, "f_regression", categorical=["mid"], task="regression")
    assert as_categorical.selected == ["mid"]
    assert as_categorical.scores[0] > 10 * max(as_numeric.scores[0], 1.0)
    for method in ("lasso", "mutual_info"):
        sel = select_features(X, y, method, categorical=["mid"], task="regression", random_state=0)
        assert sel.scores[0] == sel.scores.max(), method


def test_regression_constant_columns_score_zero_and_nan_is_accepted():
    rng = np.random.default_rng(5)
    n = 200
    X = pd.DataFrame(
        {"x": rng.normal(size=n), "const": np.full(n, 3.0), "onelevel": np.zeros(n, dtype=int)}
    )
    y = 2.0 * X["x"] + 0.5 * rng.normal(size=n)
    X.loc[X.index[:20], "x"] = np.nan
    X["empty"] = np.nan
    for method in REGRESSION_SELECTORS:
        params = FAST_FOREST if method == "random_forest" else None
        sel = select_features(
            X, y, method, categorical=["onelevel"], params=params, task="regression", random_state=0
        )
        assert np.all(np.isfinite(sel.scores)) and np.all(sel.scores >= 0), method
        if method != "none":
            assert sel.selected == ["x"], (method, sel.selected)
            assert np.all(sel.scores[1:] == 0.0), (method, sel.scores)


@pytest.mark.parametrize(
    "method, task, match",
    [
        (
            "chi2",
            "regression",
            r"selector 'chi2' scores class counts .* classification target; selectors for "
            r"task='regression': \['lasso', 'elastic_net', 'mutual_info', 'random_forest', "
            r"'f_regression', 'none'\]",
        ),
        ("f_classif", "regression", r"selector 'f_classif' .* use 'f_regression'"),
        ("f_regression", "classification", r"selector 'f_regression' .* use 'f_classif'"),
    ],
)
def test_selector_for_the_wrong_task_is_refused(reg_table, table, method, task, match):
    X, y = reg_table if task == "regression" else table
    with pytest.raises(SelectorTaskError, match=match) as info:
        select_features(X, y, method, categorical=CATEGORICAL, task=task)
    assert (info.value.method, info.value.task) == (method, task)
    assert info.value.allowed == selectors_for(task)
    with pytest.raises(SelectorTaskError, match=match):
        check_params(method, None, task=task)


def test_check_params_with_and_without_task():
    assert check_params("f_regression", {"alpha": 0.01}) == {"alpha": 0.01}
    assert check_params("f_regression", None, task="regression") == {"alpha": 0.05}
    assert check_params("chi2", None) == {"alpha": 0.05}  # task unknown: parameters only
    assert check_params("lasso", {"C": 2}, task="regression")["C"] == 2.0
    with pytest.raises(SelectorParamError, match=r"parameter 'alpha' of selector 'f_regression'"):
        check_params("f_regression", {"alpha": 2.0}, task="regression")
    with pytest.raises(SelectorParamError, match=r"unknown parameter 'C' for selector 'f_reg"):
        check_params("f_regression", {"C": 1.0})
    with pytest.raises(SelectorTaskError, match=r"selector 'lasso' .* use 'coxnet'"):
        check_params("lasso", None, task="survival")
    with pytest.raises(ValueError, match=r"task='ranking' is not one of"):
        check_params("lasso", None, task="ranking")


@pytest.mark.parametrize(
    "make_y, match",
    [
        (lambda y: np.full(len(y), 4.0), r"target is constant \(every value is 4\.0\)"),
        (lambda y: y > y.mean(), "holds booleans; task='regression' needs numbers"),
        (lambda y: np.where(y > y.mean(), "long", "short"), "must hold numbers"),
        (lambda y: np.array([*y[:-1], "x"], dtype=object), r"must hold numbers.*'x'"),
        (lambda y: np.r_[y[:-1], np.inf], "infinite values"),
        (lambda y: np.r_[y[:-1], np.nan], "missing values"),
    ],
)
def test_invalid_regression_targets(reg_table, make_y, match):
    X, y = reg_table
    with pytest.raises(ValueError, match=match):
        select_features(X, make_y(y), "f_regression", task="regression")


def test_regression_accepts_an_integer_or_object_target(reg_table):
    X, y = reg_table
    days = np.round(y).astype(int)
    a = select_features(X, days, "f_regression", task="regression")
    b = select_features(X, pd.Series(days, dtype=object), "f_regression", task="regression")
    np.testing.assert_array_equal(a.scores, b.scores)


def test_unknown_task_is_refused(table):
    X, y = table
    with pytest.raises(ValueError, match=r"task='Regression' is not one of"):
        select_features(X, y, "lasso", task="Regression")


# --------------------------------------------------------------------------- survival

SURV_SIGNAL = ["s0", "s1", "s2", "cat"]
SURV_NOISE = ["n0", "n1", "n2", "n3", "n4", "ncat"]
FAST_SURVIVAL_FOREST = {"n_estimators": 50, "n_repeats": 3}


def make_survival_table(seed: int = 6, n: int = 500) -> tuple[pd.DataFrame, np.ndarray]:
    """3 numeric signals and a 3-level categorical one in a Cox model; 5 + 1 noise columns.

    Event times are exponential with the log-hazard ``0.8 s0 - 0.8 s1 + 0.6 s2 +
    effect[cat]`` (``effect = (-0.8, 0, 0.8)``), censored by an independent
    exponential time (about 35% censored). The seed was chosen so that every
    selector keeps every signal.
    """
    from sksurv.util import Surv

    rng = np.random.default_rng(seed)
    X = pd.DataFrame({f"s{i}": rng.normal(size=n) for i in range(3)})
    X["cat"] = rng.integers(0, 3, size=n)
    for i in range(5):
        X[f"n{i}"] = rng.normal(size=n)
    X["ncat"] = rng.integers(0, 4, size=n)
    lp = 0.8 * X["s0"] - 0.8 * X["s1"] + 0.6 * X["s2"] + np.array([-0.8, 0.0, 0.8])[X["cat"]]
    event_time = rng.exponential(np.exp(-lp))
    censor_time = rng.exponential(2.0, size=n)
    y = Surv.from_arrays(event=event_time <= censor_time, time=np.minimum(event_time, censor_time))
    return X, y


@pytest.fixture(scope="module")
def surv_table() -> tuple[pd.DataFrame, np.ndarray]:
    return make_survival_table()


def run_surv(surv_table, method, **kwargs) -> LocalSelection:
    X, y = surv_table
    kwargs.setdefault("random_state", 0)
    return select_features(X, y, method, categorical=CATEGORICAL, task="survival", **kwargs)


@pytest.mark.parametrize(
    "method, params, max_noise",
    [
        ("coxnet", None, 4),
        ("coxnet", {"l1_ratio": 0.5}, 5),
        ("cox_univariate", None, 1),
        ("random_forest", FAST_SURVIVAL_FOREST, 1),
    ],
)
def test_survival_selectors_find_the_informative_columns(surv_table, method, params, max_noise):
    sel = run_surv(surv_table, method, params=params)
    assert sel.method == method and sel.features == list(surv_table[0].columns)
    assert np.all(np.isfinite(sel.scores)) and np.all(sel.scores >= 0)
    scores = scores_of(sel)
    top_noise = max(scores[f] for f in SURV_NOISE)
    assert all(scores[f] > top_noise for f in SURV_SIGNAL), (method, scores)
    assert set(SURV_SIGNAL) <= set(sel.selected), (method, sel.selected)
    assert len(set(sel.selected) & set(SURV_NOISE)) <= max_noise, (method, sel.selected)


@pytest.mark.parametrize("method", ["coxnet", "cox_univariate", "random_forest"])
def test_survival_selectors_on_whas500_rank_age_and_heart_failure_above_noise(method):
    from sksurv.datasets import load_whas500

    X, y = load_whas500()
    X = X.astype(float)
    rng = np.random.default_rng(0)
    noise = [f"noise{k}" for k in range(5)]
    for name in noise:
        X[name] = rng.normal(size=len(X))
    params = FAST_SURVIVAL_FOREST if method == "random_forest" else None
    sel = select_features(X, y, method, params=params, task="survival", random_state=0)
    scores = scores_of(sel)
    # age and congestive heart failure are the strongest risk factors of the WHAS500 cohort
    assert min(scores["age"], scores["chf"]) > max(scores[f] for f in noise), scores
    assert {"age", "chf"} <= set(sel.selected)


def test_survival_selectors_treat_a_categorical_column_as_nominal():
    from sksurv.datasets import load_veterans_lung_cancer

    X, y = load_veterans_lung_cancer()
    X["Celltype"] = pd.Categorical(X["Celltype"]).codes
    X = X[["Celltype", "Karnofsky_score", "Age_in_years"]].astype(float)
    for method in ("coxnet", "cox_univariate"):
        sel = select_features(X, y, method, categorical=["Celltype"], task="survival")
        assert {"Celltype", "Karnofsky_score"} <= set(sel.selected), (method, sel.selected)
    # the four cell types are one log-rank test, three degrees of freedom
    from sksurv.compare import compare_survival

    levels = pd.Categorical(load_veterans_lung_cancer()[0]["Celltype"]).codes
    sel = select_features(X, y, "cox_univariate", categorical=["Celltype"], task="survival")
    _, p_logrank = compare_survival(y, levels)
    assert 10.0 ** -scores_of(sel)["Celltype"] == pytest.approx(p_logrank, rel=0.2)


def test_survival_selector_lists_and_defaults():
    assert selectors_for("survival") == SURVIVAL_SELECTORS
    assert SURVIVAL_SELECTORS == ("random_forest", "coxnet", "cox_univariate", "none")
    assert {"coxnet", "cox_univariate"}.isdisjoint(CLASSIFICATION_SELECTORS)
    assert {"coxnet", "cox_univariate"}.isdisjoint(REGRESSION_SELECTORS)
    assert default_params("coxnet") == {
        "C": 0.1,
        "l1_ratio": 1.0,
        "max_iter": 100_000,
        "tol": 1e-7,
        "threshold": 1e-6,
    }
    assert default_params("cox_univariate") == {"alpha": 0.05}
    assert default_params("random_forest")["importance"] == "impurity"
    assert default_params("random_forest", task="survival")["importance"] == "permutation"


def test_survival_none_keeps_everything_and_params_are_reported(surv_table):
    sel = run_surv(surv_table, "none")
    assert sel.mask.all() and np.all(sel.scores == 1.0) and sel.params == {}
    assert run_surv(surv_table, "coxnet").params == default_params("coxnet")
    forest = run_surv(surv_table, "random_forest", params=FAST_SURVIVAL_FOREST)
    assert forest.params == {**default_params("random_forest", "survival"), **FAST_SURVIVAL_FOREST}


@pytest.mark.parametrize(
    "method, task, match",
    [
        ("lasso", "survival", r"selector 'lasso' fits a logistic .* use 'coxnet'"),
        ("elastic_net", "survival", r"selector 'elastic_net' .* use 'coxnet' .*l1_ratio: 0.5"),
        ("mutual_info", "survival", r"selector 'mutual_info' .* use 'cox_univariate'"),
        ("f_classif", "survival", r"selector 'f_classif' .* use 'cox_univariate'"),
        ("f_regression", "survival", r"selector 'f_regression' .* use 'cox_univariate'"),
        (
            "chi2",
            "survival",
            r"selector 'chi2' scores class counts .*; selectors for task='survival': "
            r"\['random_forest', 'coxnet', 'cox_univariate', 'none'\]",
        ),
        ("coxnet", "classification", r"selector 'coxnet' .* task='survival'; use 'lasso'"),
        ("coxnet", "regression", r"selector 'coxnet' .* task='survival'; use 'lasso'"),
        ("cox_univariate", "classification", r"selector 'cox_univariate' .* use 'f_classif'"),
        ("cox_univariate", "regression", r"selector 'cox_univariate' .* use 'f_regression'"),
    ],
)
def test_a_selector_the_survival_task_cannot_use_is_refused(
    surv_table, table, reg_table, method, task, match
):
    X, y = {"survival": surv_table, "classification": table, "regression": reg_table}[task]
    with pytest.raises(SelectorTaskError, match=match) as info:
        select_features(X, y, method, categorical=CATEGORICAL, task=task)
    assert (info.value.method, info.value.task) == (method, task)
    assert info.value.allowed == selectors_for(task)
    with pytest.raises(SelectorTaskError, match=match):
        check_params(method, None, task=task)


def test_survival_random_forest_takes_permutation_importance_only(surv_table):
    message = r"'permutation' for a survival target \(a random survival forest has no impurity"
    with pytest.raises(SelectorParamError, match=message) as info:
        run_surv(surv_table, "random_forest", params={"importance": "impurity"})
    assert (info.value.key, info.value.value) == ("importance", "impurity")
    with pytest.raises(SelectorParamError, match=message):
        check_params("random_forest", {"importance": "impurity"}, task="survival")
    # without the task (a classification job's params): impurity is fine
    assert check_params("random_forest", {"importance": "impurity"})["importance"] == "impurity"
    assert check_params("random_forest", None, task="survival")["importance"] == "permutation"


def test_coxnet_strength_is_c_and_the_time_unit_does_not_matter(surv_table):
    X, y = surv_table
    default = run_surv(surv_table, "coxnet")
    strong = run_surv(surv_table, "coxnet", params={"C": 0.01})
    assert strong.mask.sum() < default.mask.sum()
    assert set(strong.selected) <= set(default.selected)
    days = y.copy()
    days["time"] = 365.25 * y["time"]  # the partial likelihood sees the order of the times only
    in_days = select_features(X, days, "coxnet", categorical=CATEGORICAL, task="survival")
    np.testing.assert_allclose(in_days.scores, default.scores, atol=1e-9)


def test_coxnet_keeps_the_best_feature_when_nothing_is_selected(surv_table, caplog):
    with caplog.at_level(logging.WARNING, logger="fedforest.election.selector_methods"):
        sel = run_surv(surv_table, "coxnet", params={"C": 1e-4})
    assert sel.mask.sum() == 1 and sel.selected[0] in SURV_SIGNAL
    assert "selector 'coxnet' selected no feature" in caplog.text
    assert "first to enter the regularisation path" in caplog.text


@pytest.mark.parametrize("l1_ratio", [0, 0.0, 1.5, True])
def test_coxnet_takes_no_pure_ridge_penalty(l1_ratio):
    with pytest.raises(SelectorParamError, match=r"parameter 'l1_ratio' of selector 'coxnet' must"):
        check_params("coxnet", {"l1_ratio": l1_ratio}, task="survival")
    assert check_params("elastic_net", {"l1_ratio": 0.0})["l1_ratio"] == 0.0


def test_cox_univariate_is_deterministic_and_alpha_selects(surv_table):
    default = run_surv(surv_table, "cox_univariate")
    strict = run_surv(surv_table, "cox_univariate", params={"alpha": 1e-12}, random_state=5)
    np.testing.assert_array_equal(strict.scores, default.scores)
    assert strict.mask.sum() < default.mask.sum()
    p = 10.0**-default.scores
    assert default.mask.tolist() == (p < 0.05).tolist()


def test_survival_random_forest_same_random_state_same_result(surv_table):
    a = run_surv(surv_table, "random_forest", params=FAST_SURVIVAL_FOREST, random_state=7)
    b = run_surv(surv_table, "random_forest", params=FAST_SURVIVAL_FOREST, random_state=7)
    np.testing.assert_array_equal(a.scores, b.scores)


@pytest.mark.parametrize("method", SURVIVAL_SELECTORS)
def test_survival_constant_columns_score_zero_and_nan_is_accepted(surv_table, method):
    X, y = surv_table
    X = X[["s0", "s1"]].copy()
    X.loc[X.index[:30], "s0"] = np.nan
    X["const"] = 3.0
    X["onelevel"] = 0
    X["empty"] = np.nan
    params = FAST_SURVIVAL_FOREST if method == "random_forest" else None
    sel = select_features(
        X, y, method, categorical=["onelevel"], params=params, task="survival", random_state=0
    )
    assert np.all(np.isfinite(sel.scores)) and np.all(sel.scores >= 0)
    if method != "none":
        assert set(sel.selected) == {"s0", "s1"}, (method, sel.selected)
        assert np.all(sel.scores[2:] == 0.0), (method, sel.scores)
