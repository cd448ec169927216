"""The bounds of what a site's imputer fit can give (model/imputer_bounds.py), on real fits."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from fedforest import fit_imputers
from fedforest.model.imputer_bounds import SLACK, imputer_problem
from fedforest.model.inputs import FLOAT32_MAX


@pytest.fixture(scope="module")
def fitted():
    """A numeric and a categorical imputer fitted on 80 rows with 2 predictors."""
    rng = np.random.default_rng(3)
    X = pd.DataFrame(rng.normal(size=(80, 3)), columns=["a", "b", "c"])
    X["k"] = (X["a"] > 0).astype(float) + (X["b"] > 0)
    imps = fit_imputers(X, ["c", "k"], ["a", "b"], categories={"k": ["0", "1", "2"]}, cv=3)
    return imps["c"], imps["k"]


def test_every_fit_on_ordinary_values_is_within_the_bounds():
    from fedforest.model.imputer_bounds import imputer_problem

    rng = np.random.default_rng(1)
    for scale in (1e-30, 1.0, 1e30):
        X = pd.DataFrame(rng.normal(size=(80, 3)) * scale, columns=["a", "b", "c"])
        X["k"] = (X["a"] > 0).astype(float) + (X["b"] > 0)
        imps = fit_imputers(X, ["c", "k"], ["a", "b"], categories={"k": ["0", "1", "2"]}, cv=3)
        assert set(imps) == {"c", "k"}
        for imp in imps.values():
            assert imputer_problem(imp) is None, (scale, imp.feature)


@pytest.mark.parametrize("which", [0, 1])
def test_a_center_beyond_float32_is_named_first(fitted, which):
    imp = dataclasses.replace(fitted[which], center=np.array([0.0, 1e39]))
    problem = imputer_problem(imp)
    assert problem.startswith(
        f"field 'center' holds 1e+39; expected magnitudes at most {FLOAT32_MAX:.7g}"
    )
    assert imputer_problem(dataclasses.replace(imp, center=np.array([np.nan, 0.0])))


def test_a_numeric_imputer_has_unit_scales(fitted):
    numeric, _ = fitted
    problem = imputer_problem(dataclasses.replace(numeric, scale=np.array([1.0, 2.0])))
    assert problem == (
        "field 'scale' holds 2.0; expected 1 for every predictor (a numeric imputer's inputs "
        "are not standardised)"
    )


def test_a_numeric_imputer_stays_finite_on_every_float32_row(fitted):
    numeric, _ = fitted
    huge = dataclasses.replace(numeric, coef=np.array([1e300, 0.0]))
    assert "beyond float64's range" in imputer_problem(huge)
    # a coefficient that still gives a finite value on every row is kept
    edge = dataclasses.replace(
        numeric, intercept=np.zeros(1), coef=np.array([1e269, 0.0]), center=np.zeros(2)
    )
    assert imputer_problem(edge) is None


def test_a_numeric_fit_passes_through_the_means(fitted):
    numeric, _ = fitted
    far = dataclasses.replace(
        numeric, intercept=np.array([3e38]), coef=np.array([1.0, 0.0]), center=np.array([1e38, 0])
    )
    problem = imputer_problem(far)
    assert "give 4e+38 at the predictors' means ('center')" in problem
    assert "least-squares fit with an intercept passes through the means" in problem


def test_a_categorical_scale_is_a_positive_standard_deviation(fitted):
    _, categorical = fitted
    for bad in (0.0, -1.0, np.inf, np.nan):
        imp = dataclasses.replace(categorical, scale=np.array([1.0, bad]))
        assert imputer_problem(imp).startswith(
            f"field 'scale' holds {bad!r}; expected numbers in (0,"
        )


def test_a_categorical_coef_norm_is_at_most_sqrt_2_n_ln_k(fitted):
    _, categorical = fitted
    n, k = categorical.n_train, len(categorical.levels)
    bound = math.sqrt(2 * n * math.log(k))
    at = categorical.coef / np.sqrt(np.sum(categorical.coef**2)) * bound
    assert imputer_problem(dataclasses.replace(categorical, coef=at)) is None
    over = dataclasses.replace(categorical, coef=at * (1 + 10 * SLACK))
    problem = imputer_problem(over)
    assert problem.startswith("field 'coef' has norm ")
    assert f"= sqrt(2 n ln k) for n_train = {n} rows and k = {k} levels" in problem


def test_a_categorical_intercept_is_bounded_by_the_log_loss(fitted):
    _, categorical = fitted
    n, k, p = categorical.n_train, len(categorical.levels), categorical.coef.shape[1]
    bound = n * (math.log(k) + 2 * math.sqrt(2 * p * math.log(k)))
    spread = dataclasses.replace(categorical, intercept=np.array([-0.6, 0.0, 0.6]) * bound)
    assert "field 'intercept' has a spread (largest - smallest) of" in imputer_problem(spread)
    shifted = dataclasses.replace(categorical, intercept=np.array([1.1, 1.1, 1.1]) * bound)
    assert "field 'intercept' has a magnitude of" in imputer_problem(shifted)


@pytest.mark.parametrize("score", [-0.1, 1.5, float("nan")])
def test_a_categorical_score_is_a_macro_f1(fitted, score):
    _, categorical = fitted
    problem = imputer_problem(dataclasses.replace(categorical, score=score))
    assert problem == f"field 'score' is {score!r}; expected a macro F1 in [0, 1]"
