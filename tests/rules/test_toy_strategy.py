"""A new strategy is one file plus its registration: ``toy_rule.py`` runs in both engines and
on the compiled fast path, is listed by ``fedforest strategies`` and is an ``auto`` candidate."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest import PooledForestClassifier, rules
from fedforest.cli import main
from fedforest.prediction import pipeline
from fedforest.prediction.selection import default_candidates

from .conftest import numba_available
from .toy_rule import RULE


@pytest.fixture
def toy():
    with rules.registered(RULE) as rule:
        yield rule
    assert rules.find(RULE.name) is None


def predict(pooled, strategy, engine, **params):
    clf = PooledForestClassifier(
        pooled["forest"],
        strategy=strategy,
        imputers=pooled["imputers"],
        feature_std=pooled["std"],
        site="site-2",
        depth_threshold=1,
        random_state=0,
        engine=engine,
        **params,
    )
    if strategy == "auto":
        clf.fit(*pooled["validation"])
    return clf, clf.predict_proba(pooled["X"])


def test_the_toy_runs_in_both_engines_and_on_the_fast_path(pooled, toy, monkeypatch):
    clf, fast = predict(pooled, toy.name, "numpy")
    assert clf.diagnostics_.engine == "mixed"  # clean rows compiled, the NaN rows dynamic
    with monkeypatch.context() as m:
        m.setattr(pipeline.fastpath, "available", lambda: False)
        _, dynamic = predict(pooled, toy.name, "numpy")
        if numba_available():
            clf, compiled = predict(pooled, toy.name, "numba")
            assert clf.diagnostics_.dynamic_engine == "numba"
            assert np.array_equal(compiled, dynamic)
    assert np.array_equal(fast, dynamic)
    # it composes ss's first step and node's fallback: never discards, so no row falls back
    assert clf.diagnostics_.n_fallback == 0
    _, ss = predict(pooled, "ss", "numpy")
    _, node = predict(pooled, "node", "numpy")
    assert not np.array_equal(fast, ss) and not np.array_equal(fast, node)


def test_the_toy_is_listed_and_is_an_auto_candidate(pooled, toy, capsys):
    assert main(["strategies"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert toy.help in lines[toy.name]
    assert toy.name in default_candidates(pooled["forest"].owners, "site-2")
    assert rules.preference()[0] == toy.name
    clf, _ = predict(pooled, "auto", "numpy")
    assert toy.name in clf.selection_scores_
    assert toy.name in rules.deployable() and rules.display_name(toy.name) == toy.display_name


def test_a_name_is_registered_once(toy):
    with pytest.raises(ValueError, match="registered already"):
        rules.register(RULE)
