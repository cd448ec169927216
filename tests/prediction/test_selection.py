"""auto's default candidates: one rule for the classifier and the job's evaluation."""

from __future__ import annotations

import pytest

from fedforest import PooledForestClassifier
from fedforest.federation.evaluation import evaluate_strategies
from fedforest.model.pooled_model import PooledModel
from fedforest.prediction.selection import default_candidates
from fedforest.vocabulary import FITTED_STRATEGIES, STRATEGIES, TREE_SELECTION

SITE_A = ["x0", "x1", "x2", "x3"]


@pytest.mark.parametrize("site", ["a", "b", "c", None])
def test_default_candidates(site):
    got = default_candidates(["a", "b"], site)
    assert not set(got) & set(FITTED_STRATEGIES)
    assert [s for s in STRATEGIES if s in got] == got  # in the vocabulary's order
    owner = site in ("a", "b")
    assert (set(TREE_SELECTION) <= set(got)) == owner
    left_out = set(FITTED_STRATEGIES) | (set() if owner else set(TREE_SELECTION))
    assert set(got) == set(STRATEGIES) - left_out


@pytest.mark.parametrize("site", ["a", "c", None])
def test_classifier_and_evaluation_try_the_same_candidates(two_site_forest, table, site):
    forest = two_site_forest[0]
    X, y = table
    X = X[SITE_A]
    clf = PooledForestClassifier(forest, strategy="auto", site=site, random_state=0)
    clf.fit(X[400:500], y[400:500])
    assert list(clf.selection_scores_) == default_candidates(forest.owners, site)
    scored = evaluate_strategies(
        PooledModel(forest),
        X[500:],
        y[500:],
        forest.classes,
        ["auto"],
        site=site,
        X_val=X[400:500],
        y_val=y[400:500],
        random_state=0,
    )
    assert list(scored["auto"]["validation"]) == list(clf.selection_scores_)
    assert scored["auto"]["chosen"] == clf.strategy_
