"""Hill-climb tuning of the freedom degree."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedforest.election.ballot import Ballot, SiteVote
from fedforest.election.tuning import hill_climb, score_mask


def ballot_with_disputed(n_disputed: int = 20) -> Ballot:
    feats = ["core"] + [f"d{i:02d}" for i in range(n_disputed)]
    scores_a = np.r_[1.0, np.linspace(1.0, 0.0, n_disputed)]
    a = SiteVote("a", feats, np.ones(len(feats), bool), scores_a, 100)
    b = SiteVote(
        "b", feats, np.r_[True, np.zeros(n_disputed, bool)], np.r_[1.0, np.zeros(n_disputed)], 100
    )
    return Ballot([a, b])


def test_climbs_towards_the_best_mask_and_keeps_it():
    ballot = ballot_with_disputed()
    calls = []

    def score(features):
        calls.append(len(features))
        return -abs(len(features) - 9)  # best: core + 8 disputed, i.e. fd = 0.4

    result = hill_climb(ballot, score, start=0.1, rounds=8)
    assert len(result.election.selected) == 9
    assert result.election.selected == ballot.count(0.4).selected
    assert len(calls) <= 8
    fds = [h.freedom_degree for h in result.history]
    assert len(fds) == len(set(fds))  # never the same freedom degree twice


def test_flat_scores_choose_the_smallest_mask_within_tolerance():
    ballot = ballot_with_disputed()
    result = hill_climb(
        ballot, lambda f: 0.80 + 0.001 * (len(f) > 5), start=0.5, rounds=5, tolerance=0.005
    )
    kept = [h.n_features for h in result.history]
    assert len(result.election.selected) == min(kept)
    # without tolerance the strictly better (larger) mask wins
    strict = hill_climb(ballot, lambda f: 0.80 + 0.001 * (len(f) > 5), start=0.5, rounds=5)
    assert len(strict.election.selected) > 5


def test_tie_break_prefers_the_smaller_of_two_equal_masks():
    ballot = ballot_with_disputed(10)
    result = hill_climb(ballot, lambda f: 0.5, start=0.5, rounds=3)
    assert len(result.election.selected) == min(h.n_features for h in result.history)
    assert result.election.selected == ballot.count(result.freedom_degree).selected


def test_identical_masks_are_scored_once():
    ballot = ballot_with_disputed(2)  # only three distinct masks exist
    calls = []
    result = hill_climb(ballot, lambda f: calls.append(tuple(f)) or len(f), start=0.0, rounds=5)
    assert len(calls) == len(set(calls))
    assert any(h.reused for h in result.history) or len(result.history) == len(calls)
    assert result.election.selected == ["core", "d00", "d01"]


def test_rounds_bound_the_number_of_scored_masks():
    ballot = ballot_with_disputed(40)
    calls = []
    hill_climb(ballot, lambda f: calls.append(1) or len(f), start=0.0, rounds=3)
    assert len(calls) == 3


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(start=1.2), "start"),
        (dict(rounds=0), "tuning_rounds"),
        (dict(rounds=2.5), "tuning_rounds"),
        (dict(tolerance=-1), "tolerance"),
        (dict(step=0.0), "step"),
    ],
)
def test_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        hill_climb(ballot_with_disputed(), lambda f: 0.0, **kwargs)


def test_score_mask_uses_only_the_sites_columns_and_falls_back_to_priors():
    rng = np.random.RandomState(0)
    X = pd.DataFrame({"a": rng.normal(size=300), "b": rng.normal(size=300)})
    y = (X["a"] > 0).astype(int).to_numpy()
    tr, va = slice(0, 200), slice(200, 300)
    good = score_mask(
        X[tr], y[tr], X[va], y[va], ["a", "other_site_col"], [0, 1], "auc", random_state=0
    )
    assert good > 0.9
    none = score_mask(X[tr], y[tr], X[va], y[va], ["other_site_col"], [0, 1], "auc")
    assert none == pytest.approx(0.5)
