"""The imputation stage of a prediction (prediction/imputation.py), with real imputers."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest

from fedforest import ImputerSet, rules
from fedforest.model.inputs import to_global_matrix
from fedforest.prediction.imputation import impute

from .conftest import NAMES

C, K = NAMES.index("c"), NAMES.index("k")


def stage(pooled_site, X, rule="mi", imputers=None, sigma=None):
    forest = pooled_site.forest
    Xg, present = to_global_matrix(X, forest.feature_names, forest.categories)
    dirty = np.isnan(Xg[:, present]).any(axis=1)
    return impute(
        forest,
        pooled_site.imputers if imputers is None else imputers,
        pooled_site.sigma if sigma is None else sigma,
        Xg,
        ~present,
        dirty,
        rules.get(rule),
    ), Xg


def test_absent_features_get_their_imputers_values(pooled_site):
    (imputed, level_cdf), Xg = stage(pooled_site, pooled_site.lacking)
    index = {n: i for i, n in enumerate(NAMES)}
    assert np.array_equal(
        imputed[:, C], pooled_site.imputers["c"].predict(Xg, index).astype(np.float32)
    )
    proba = pooled_site.imputers["k"].predict_proba(Xg, index)
    assert np.array_equal(level_cdf[K], np.cumsum(proba, axis=1))
    assert np.allclose(level_cdf[K][:, -1], 1.0)
    assert np.array_equal(imputed[:, K], np.argmax(proba, axis=1).astype(np.float32))
    # a feature missing nowhere (b) or without an imputer (a: NaN on some rows) gets none
    assert np.isnan(imputed[:, [0, 1]]).all() and set(level_cdf) == {K}


def test_nothing_is_imputed_where_nothing_is_missing_or_the_rule_reads_no_imputer(pooled_site):
    (imputed, level_cdf), _ = stage(pooled_site, pooled_site.test)  # every column, no NaN
    assert np.isnan(imputed).all() and level_cdf == {}
    for rule in ("fpv", "node"):
        (imputed, level_cdf), _ = stage(pooled_site, pooled_site.lacking, rule=rule)
        assert np.isnan(imputed).all() and level_cdf == {}
    (imputed, _), _ = stage(pooled_site, pooled_site.lacking, imputers=ImputerSet([]))
    assert np.isnan(imputed).all()


def test_a_rule_reading_p_r_needs_the_standard_deviation_of_an_imputed_feature(pooled_site):
    sigma = pooled_site.sigma.copy()
    sigma[C] = np.nan
    with pytest.raises(ValueError, match=r"strategy='ipr' needs feature_std\['c'\]"):
        stage(pooled_site, pooled_site.lacking, rule="ipr", sigma=sigma)
    (imputed, _), _ = stage(
        pooled_site, pooled_site.lacking, rule="mi", sigma=sigma
    )  # mi reads no p_R
    assert np.isfinite(imputed[:, C]).all()


def test_an_imputer_that_does_not_fit_the_forest_is_left_out_with_a_warning(pooled_site, caplog):
    imps = pooled_site.imputers
    foreign = dataclasses.replace(imps["c"], predictors=["a", "z"])
    wrong_levels = dataclasses.replace(imps["k"], n_levels=5)
    with caplog.at_level(logging.WARNING, logger="fedforest.prediction.imputation"):
        (imputed, level_cdf), _ = stage(
            pooled_site, pooled_site.lacking, imputers=ImputerSet([foreign, wrong_levels])
        )
    assert np.isnan(imputed).all() and level_cdf == {}
    said = caplog.text
    assert "imputer for 'c' needs predictors ['z'] that the forest does not have" in said
    assert "imputer for 'k' is categorical with 5 levels" in said


def test_an_imputed_value_beyond_float32_is_clipped_not_infinite(pooled_site):
    huge = dataclasses.replace(pooled_site.imputers["c"], intercept=np.array([1e300]))
    (imputed, _), _ = stage(pooled_site, pooled_site.lacking, imputers=ImputerSet([huge]))
    assert np.all(imputed[:, C] == np.finfo(np.float32).max)
