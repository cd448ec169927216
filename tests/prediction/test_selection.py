"""auto's default candidates: one rule for the classifier and the job's evaluation."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest import PooledForestClassifier
from fedforest.federation.evaluation import evaluate_strategies
from fedforest.model.pooled_model import PooledModel
from fedforest.prediction.selection import choose_calibrated, default_candidates
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


def test_a_tie_within_one_standard_error_is_for_held_out_rows():
    y = np.array([0, 1] * 4)
    mp = np.full((8, 2), 0.5)
    right = np.where(y == 1, 0.8, 0.2)
    wrong = np.where(y == 1, 0.3, 0.7)
    fpv_1 = np.where(np.arange(8) < 5, right, wrong)  # five rows right, three wrong
    fpv = np.column_stack([1 - fpv_1, fpv_1])
    fixed = {"mp": mp, "fpv": fpv}.get
    tied = choose_calibrated(fixed, ["fpv", "mp"], y, [0, 1])
    lowest = choose_calibrated(fixed, ["fpv", "mp"], y, [0, 1], standard_error_ties=False)
    # fpv's log-loss is lower, by less than one standard error of the paired row losses
    assert tied.scores == lowest.scores and tied.scores["fpv"] < tied.scores["mp"]
    assert (tied.best, tied.runner_up) == ("mp", "fpv")  # the preferred candidate
    assert (lowest.best, lowest.runner_up) == ("fpv", "mp")  # the lowest score
