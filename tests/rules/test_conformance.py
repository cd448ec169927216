"""Every rule of the registry, the same bits whichever engine runs it; with every feature
present, scikit-learn's ``predict_proba`` of the same trees."""

from __future__ import annotations

import doctest

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

import fedforest.rules
from fedforest import PooledForest, PooledForestClassifier, rules
from fedforest.prediction import pipeline

from .conftest import numba_available

#: The rules one estimator predicts with on its own (auto chooses one of them).
PREDICTING = [r.name for r in rules.all_rules() if r.deployable]


def classifier(pooled, strategy, engine, intersection=None):
    return PooledForestClassifier(
        pooled["forest"],
        strategy=strategy,
        imputers=pooled["imputers"],
        feature_std=pooled["std"],
        site="site-2",
        depth_threshold=1,
        random_state=5,
        engine=engine,
        guess_weight=0.3,
        intersection=intersection,
    )


@pytest.mark.parametrize("strategy", PREDICTING)
def test_numpy_numba_and_the_fast_path_agree_bit_for_bit(pooled, strategy, monkeypatch):
    intersection = pooled["forest"]  # any forest: here the pooled one's own trees
    X = pooled["X"]
    clf = classifier(pooled, strategy, "numpy", intersection)
    fast = clf.predict_proba(X)
    kept = clf.diagnostics_.trees_kept
    with monkeypatch.context() as m:
        m.setattr(pipeline.fastpath, "available", lambda: False)
        clf = classifier(pooled, strategy, "numpy", intersection)
        dynamic = clf.predict_proba(X)
        assert np.array_equal(kept, clf.diagnostics_.trees_kept)
        if numba_available():
            clf = classifier(pooled, strategy, "numba", intersection)
            assert np.array_equal(clf.predict_proba(X), dynamic)
            assert np.array_equal(kept, clf.diagnostics_.trees_kept)
    assert np.array_equal(fast, dynamic)


@pytest.mark.parametrize("engine", ["numpy", "numba"])
@pytest.mark.parametrize("strategy", PREDICTING)
def test_with_every_feature_each_rule_is_scikit_learn(strategy, engine):
    if engine == "numba" and not numba_available():
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(7)
    X = pd.DataFrame(rng.normal(size=(240, 4)), columns=["a", "b", "c", "d"])
    y = (X["a"] + X["c"] - X["d"] > 0).astype(int)
    rf = RandomForestClassifier(n_estimators=15, random_state=2).fit(X[:160], y[:160])
    forest = PooledForest.from_sklearn(rf, list(X.columns), owner="s1")
    clf = PooledForestClassifier(
        forest,
        strategy=strategy,
        site="s1",
        engine=engine,
        guess_weight=0.3,
        intersection=forest,
        random_state=0,
    )
    assert np.array_equal(clf.predict_proba(X[160:]), rf.predict_proba(X[160:]))


def test_every_rule_declares_what_it_is():
    for rule in rules.all_rules():
        assert rule.help and rule.display_name and rule.colour, rule.name
        assert rule.family in (rules.ROUTING, rules.MARGINAL, rules.SELECTION) or rule.family in (
            rules.WEIGHTED,
            rules.CHOICE,
        )
        if rule.candidate:
            assert not rule.fitted and rule.preference is not None
        if rule.routing is not None:
            assert rule.draws == rule.routing.draws
    assert rules.get("pr").draws and not rules.get("fpv").draws
    assert rules.tree_selections() == ("park", "local")
    assert rules.get("intersection").needs_intersection


def test_the_rules_package_examples():
    for module in (fedforest.rules, fedforest.rules.base, fedforest.rules.routing):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__
    result = doctest.testmod(fedforest.rules.registry)
    assert result.failed == 0
