"""``auto``: every candidate scored on the site's validation rows; the best is used."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest import PooledForestClassifier, rules
from fedforest.rules import auto


def test_auto_is_the_choice_rule():
    assert rules.get("auto") is auto.RULE
    assert auto.RULE.family == rules.CHOICE
    assert auto.RULE.needs_validation and not auto.RULE.deployable
    assert not auto.RULE.candidate and "auto" not in rules.deployable()


def test_it_chooses_one_of_its_candidates_on_the_validation_rows(pooled):
    clf = PooledForestClassifier(
        pooled["forest"],
        strategy="auto",
        imputers=pooled["imputers"],
        feature_std=pooled["std"],
        site="site-2",
        random_state=0,
        auto_candidates=["fpv", "mp", "local"],
    )
    clf.fit(*pooled["validation"])
    assert clf.strategy_ in ("fpv", "mp", "local")
    assert set(clf.selection_scores_) == {"fpv", "mp", "local"}
    p = clf.predict_proba(pooled["X"])
    assert p.shape == (len(pooled["X"]), 2) and np.allclose(p.sum(axis=1), 1.0)
    assert clf.diagnostics_.strategy == clf.strategy_


def test_auto_must_be_fitted_before_it_predicts(pooled):
    clf = PooledForestClassifier(pooled["forest"], strategy="auto", site="site-2")
    with pytest.raises(Exception, match="fit"):
        clf.predict_proba(pooled["X"])
