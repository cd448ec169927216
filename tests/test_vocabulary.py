"""Every choice list, defined once; the strategy lists are the registry's."""

from __future__ import annotations

import re

from fedforest import rules, vocabulary


def test_the_strategy_lists_are_the_registrys():
    assert vocabulary.JOB_STRATEGIES == rules.names()
    assert vocabulary.STRATEGIES == rules.strategies()
    assert vocabulary.TREE_SELECTION == ("park", "local")
    assert vocabulary.PAPER_METHODS == rules.paper_methods()
    assert vocabulary.FITTED_STRATEGIES == ("wmp",)
    assert vocabulary.STRATEGY_PREFERENCE == rules.preference()
    assert vocabulary.STRATEGY_NAMES["mp"] == "Marginal prediction"


def test_the_metric_lists_fit_together():
    assert vocabulary.METRICS == vocabulary.RANKING_METRICS + vocabulary.CALIBRATION_METRICS
    assert set(vocabulary.CALIBRATION_METRICS) <= set(vocabulary.LOWER_IS_BETTER)
    assert not set(vocabulary.RANKING_METRICS) & set(vocabulary.LOWER_IS_BETTER)
    assert vocabulary.DEFAULT_AUTO_METRIC in vocabulary.AUTO_METRICS
    assert vocabulary.REGRESSION_AUTO_METRIC in vocabulary.REGRESSION_METRICS
    assert set(vocabulary.CALIBRATION_METHODS) == set(vocabulary.CALIBRATIONS) - {"auto"}


def test_site_names():
    for name in ("site-1", "H.2", "a_b", "x" * 64):
        assert re.fullmatch(vocabulary.SITE_NAME, name), name
    for name in ("-site", ".x", "a b", "x" * 65, "é", ""):
        assert not re.fullmatch(vocabulary.SITE_NAME, name), name
    assert "server" in vocabulary.RESERVED_SITE_NAMES
    assert all(n in vocabulary.SITE_NAME_RULE for n in vocabulary.RESERVED_SITE_NAMES)


def test_validation_modes():
    assert vocabulary.VALIDATIONS == ("oob", "holdout")
    assert vocabulary.DEFAULT_VALIDATION in vocabulary.VALIDATIONS
