"""Hill-climb tuning of the freedom degree."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

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


# --------------------------------------------------------------------------- regression


def friedman_sites(n_sites: int = 2, n: int = 300):
    """Sites of Friedman #1 (s0..s4 informative, n0..n4 noise), 200 training + 100 validation
    rows each; the second site lacks n4."""
    from sklearn.datasets import make_friedman1

    sites = []
    for k in range(n_sites):
        values, y = make_friedman1(n_samples=n, n_features=10, noise=0.5, random_state=k)
        names = [f"s{i}" for i in range(5)] + [f"n{i}" for i in range(5)]
        X = pd.DataFrame(values, columns=names)
        if k == 1:
            X = X.drop(columns="n4")
        sites.append((X[:200], y[:200], X[200:], y[200:]))
    return sites


def test_score_mask_regression_informative_columns_give_a_lower_rmse():
    X_tr, y_tr, X_va, y_va = friedman_sites(1)[0]
    kw = dict(task="regression", n_estimators=30, random_state=0)
    signal = score_mask(X_tr, y_tr, X_va, y_va, ["s0", "s1", "s3", "other_site_col"], None, **kw)
    noise = score_mask(X_tr, y_tr, X_va, y_va, ["n0", "n1", "n2"], (), **kw)
    assert signal < 0.7 * noise
    # the default metric is rmse; none of the site's columns: the training mean
    constant = score_mask(X_tr, y_tr, X_va, y_va, ["other_site_col"], None, task="regression")
    assert constant == pytest.approx(np.sqrt(np.mean((y_va - y_tr.mean()) ** 2)))
    assert noise < 1.2 * constant
    mae = score_mask(X_tr, y_tr, X_va, y_va, ["s0", "s1", "s3"], None, "mae", **kw)
    assert 0 < mae < signal  # mae <= rmse
    r2 = score_mask(X_tr, y_tr, X_va, y_va, ["s0", "s1", "s3"], None, "r2", **kw)
    assert 0.5 < r2 <= 1.0
    again = score_mask(X_tr, y_tr, X_va, y_va, ["s0", "s1", "s3", "other_site_col"], None, **kw)
    assert again == signal  # random_state fixes the forest


def test_score_mask_regression_constant_validation_target_r2_is_zero():
    X_tr, y_tr, X_va, _ = friedman_sites(1)[0]
    y_va = np.full(len(X_va), 3.0)
    r2 = score_mask(X_tr, y_tr, X_va, y_va, ["s0"], None, "r2", task="regression", n_estimators=5)
    assert r2 == 0.0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(metric="auprc"), r"metric='auprc' \(a classification metric\) cannot score a regr"),
        (dict(metric="rsme"), r"metric='rsme' cannot score .*\['rmse', 'mae', 'r2'\]"),
        (
            dict(task="ranking"),
            r"task='ranking' is not one of \['classification', 'regression', 'survival'\]",
        ),
        (dict(y_val="bools"), "y_val holds booleans"),
        (dict(y_train="short"), "y_train has 199 values but X_train has 200 rows"),
        (dict(y_train="nan"), r"y_train \(target\) contains missing values"),
    ],
)
def test_score_mask_regression_refusals(kwargs, match):
    X_tr, y_tr, X_va, y_va = friedman_sites(1)[0]
    y_tr = {"short": y_tr[:-1], "nan": np.r_[np.nan, y_tr[1:]]}.get(kwargs.pop("y_train", ""), y_tr)
    y_va = y_va > 10 if kwargs.pop("y_val", "") == "bools" else y_va
    kwargs.setdefault("task", "regression")
    with pytest.raises(ValueError, match=match):
        score_mask(X_tr, y_tr, X_va, y_va, ["s0"], None, n_estimators=5, **kwargs)


def test_hill_climb_minimises_a_lower_is_better_metric():
    ballot = ballot_with_disputed()

    def rmse(features):
        return 1.0 + abs(len(features) - 9)  # lowest at core + 8 disputed (fd = 0.4)

    result = hill_climb(ballot, rmse, start=0.1, rounds=8, metric="rmse")
    assert len(result.election.selected) == 9 and result.score == 1.0
    assert result.score == min(h.score for h in result.history)
    # the same search on the negated score, maximised, takes the same steps
    mirror = hill_climb(ballot, lambda f: -rmse(f), start=0.1, rounds=8)
    assert [h.freedom_degree for h in mirror.history] == [h.freedom_degree for h in result.history]
    assert mirror.freedom_degree == result.freedom_degree
    # without the metric, an RMSE would be maximised: the worst mask wins
    wrong = hill_climb(ballot, rmse, start=0.1, rounds=8)
    assert wrong.score == max(h.score for h in wrong.history) > 1.0


def test_hill_climb_tolerance_counts_upwards_for_a_lower_is_better_metric():
    ballot = ballot_with_disputed()

    def rmse(features):
        return 2.0 - 0.001 * (len(features) > 5)  # larger masks are (barely) better

    within = hill_climb(ballot, rmse, start=0.5, rounds=5, tolerance=0.005, metric="rmse")
    assert len(within.election.selected) == min(h.n_features for h in within.history)
    strict = hill_climb(ballot, rmse, start=0.5, rounds=5, metric="rmse")
    assert len(strict.election.selected) > 5 and strict.score == pytest.approx(1.999)


def test_hill_climb_refuses_an_unknown_metric():
    with pytest.raises(ValueError, match=r"metric='RMSE' must be None or one of \['auprc'"):
        hill_climb(ballot_with_disputed(), lambda f: 0.0, metric="RMSE")


def test_regression_tuning_chooses_the_mask_with_the_lowest_pooled_rmse():
    from fedforest.election.tuning import pool_scores

    sites = friedman_sites(2)
    core = ["s0", "s1", "s3", "s4"]
    # site-0 keeps the core; site-1 keeps all its columns and ranks the disputed ones
    # s2 (informative, a U shape) first, then the noise: k disputed kept = core + s2 + noise
    cols_1 = list(sites[1][0].columns)
    order = ["s2", "n0", "n1", "n2", "n3"]
    scores_1 = [10.0 if c in core else 5.0 - order.index(c) for c in cols_1]
    cols_0 = list(sites[0][0].columns)
    votes = [
        SiteVote("site-0", cols_0, [c in core for c in cols_0], [float(c in core) for c in cols_0], 200),
        SiteVote("site-1", cols_1, np.ones(len(cols_1), bool), scores_1, 200),
    ]  # fmt: skip
    ballot = Ballot(votes)
    assert ballot.count(0.0).selected == core
    seen = {}

    def score(features):
        per_site = [
            score_mask(X_tr, y_tr, X_va, y_va, features, None, task="regression",
                       n_estimators=20, random_state=0)
            for X_tr, y_tr, X_va, y_va in sites
        ]  # fmt: skip
        seen[tuple(features)] = pool_scores("rmse", per_site, [len(s[2]) for s in sites])
        return seen[tuple(features)]

    result = hill_climb(ballot, score, start=0.0, rounds=6, metric="rmse")
    assert result.election.selected == sorted([*core, "s2"])
    assert result.score == min(seen.values())
    assert result.score < score(core) and result.score < score(ballot.count(1.0).selected)
    assert score(["n0", "n1", "n2"]) > 1.5 * result.score


def test_a_ballot_of_regression_selections():
    from fedforest.election.selectors import select_features

    votes = []
    for k, (X_tr, y_tr, _, _) in enumerate(friedman_sites(2)):
        sel = select_features(X_tr, y_tr, "f_regression", task="regression")
        votes.append(SiteVote(f"site-{k}", sel.features, sel.mask, sel.scores, len(X_tr)))
    for normalization in ("all", "selected"):
        result = Ballot(votes, normalization=normalization).count(0.0)
        assert {"s0", "s1", "s3", "s4"} <= set(result.selected), normalization
        assert set(result.selected) <= set(result.union)


def test_pool_scores():
    from fedforest.election.tuning import pool_scores

    rng = np.random.default_rng(0)
    errors = [rng.normal(size=50), 3 * rng.normal(size=150)]
    rmse = [float(np.sqrt(np.mean(e**2))) for e in errors]
    pooled = float(np.sqrt(np.mean(np.concatenate(errors) ** 2)))
    assert pool_scores("rmse", rmse, [50, 150]) == pytest.approx(pooled)
    assert pool_scores("mae", [1.0, 2.0], [50, 150]) == pytest.approx(1.75)
    assert pool_scores(None, [0.5, 0.9], [1, 3]) == pytest.approx(0.8)
    assert pool_scores("auprc", [0.5, 0.9], [1, 3]) == float(np.average([0.5, 0.9], weights=[1, 3]))
    with pytest.raises(ValueError, match="same length"):
        pool_scores("rmse", [1.0], [1, 2])
    with pytest.raises(ValueError, match="finite"):
        pool_scores("rmse", [np.nan], [1])
    with pytest.raises(ValueError, match="n_rows must be >= 1"):
        pool_scores("rmse", [1.0], [0])
    with pytest.raises(ValueError, match="metric='accuracy!'"):
        pool_scores("accuracy!", [1.0], [1])


# ------------------------------------------------------------------ out of bag (validation oob)
def _oob_rows(n=240, seed=0):
    rng = np.random.RandomState(seed)
    X = pd.DataFrame(rng.normal(size=(n, 3)), columns=["a", "b", "c"])
    y = (X["a"] + 0.5 * rng.normal(size=n) > 0).astype(int).to_numpy()
    return X, y


def test_without_validation_rows_a_mask_is_scored_out_of_bag_as_sklearn_scores_it():
    from sklearn.ensemble import RandomForestClassifier

    X, y = _oob_rows()
    got = score_mask(X, y, None, None, ["a", "b"], [0, 1], "accuracy", random_state=3)
    forest = RandomForestClassifier(
        n_estimators=50, random_state=3, n_jobs=1, bootstrap=True, oob_score=True
    ).fit(X[["a", "b"]].to_numpy(dtype=np.float32), y)
    assert got == forest.oob_score_
    # another metric: the same out-of-bag probabilities, scored by it
    auc = score_mask(X, y, None, None, ["a", "b"], [0, 1], "auc", random_state=3)
    assert auc == pytest.approx(roc_auc_score(y, forest.oob_decision_function_[:, 1]), abs=1e-12)
    # an informative mask scores better than an uninformative one, out of bag too
    assert auc > score_mask(X, y, None, None, ["c"], [0, 1], "auc", random_state=3)


def test_a_regression_mask_is_scored_out_of_bag_as_sklearn_scores_it():
    from sklearn.ensemble import RandomForestRegressor

    X, _ = _oob_rows()
    y = 2 * X["a"].to_numpy() + 0.1 * np.random.RandomState(1).normal(size=len(X))
    got = score_mask(X, y, None, None, ["a"], None, "r2", random_state=3, task="regression")
    forest = RandomForestRegressor(
        n_estimators=50, random_state=3, n_jobs=1, bootstrap=True, oob_score=True
    ).fit(X[["a"]].to_numpy(dtype=np.float32), y)
    assert got == pytest.approx(forest.oob_score_, rel=1e-12)


def test_out_of_bag_needs_both_validation_parts_absent():
    X, y = _oob_rows(60)
    with pytest.raises(ValueError, match="both be None"):
        score_mask(X, y, X, None, ["a"], [0, 1], "auc")
    # a site with none of the mask's columns: its class frequencies, scored on its rows
    assert score_mask(X, y, None, None, ["z"], [0, 1], "auc") == 0.5


# --------------------------------------------------------------------------- survival


def whas_sites(n_sites: int = 3, seed: int = 0):
    """WHAS500 with three noise columns, split into sites of training and validation rows."""
    from sklearn.model_selection import train_test_split
    from sksurv.datasets import load_whas500
    from sksurv.util import Surv

    X, whas = load_whas500()
    y = Surv.from_arrays(event=whas["fstat"], time=whas["lenfol"])  # fields event and time
    X = X.astype(float)
    rng = np.random.default_rng(seed)
    for k in range(3):
        X[f"noise{k}"] = rng.normal(size=len(X))
    sites = []
    for rows in np.array_split(rng.permutation(len(X)), n_sites):
        X_tr, X_va, y_tr, y_va = train_test_split(
            X.iloc[rows].reset_index(drop=True),
            y[rows],
            test_size=0.3,
            stratify=y[rows]["event"],
            random_state=seed,
        )
        sites.append((X_tr.reset_index(drop=True), y_tr, X_va.reset_index(drop=True), y_va))
    return sites


INFORMATIVE = ["age", "bmi", "chf", "hr"]


def test_score_mask_survival_informative_columns_give_a_lower_ibs_and_a_higher_c():
    X_tr, y_tr, X_va, y_va = whas_sites(1)[0]
    kw = dict(task="survival", n_estimators=30, random_state=0)
    for oob in (False, True):
        parts = (X_tr, y_tr, None, None) if oob else (X_tr, y_tr, X_va, y_va)
        ibs = {
            name: score_mask(*parts, features, None, **kw)
            for name, features in [("informative", INFORMATIVE), ("noise", ["noise0", "noise1"])]
        }
        ibs["kaplan-meier"] = score_mask(*parts, ["not_at_this_site"], None, **kw)
        assert ibs["informative"] < ibs["kaplan-meier"] < ibs["noise"], (oob, ibs)
        c_informative = score_mask(*parts, INFORMATIVE, None, "cindex", **kw)
        c_noise = score_mask(*parts, ["noise0", "noise1"], None, "cindex", **kw)
        assert c_informative > 0.7 and c_noise < 0.6, (oob, c_informative, c_noise)
        # no column of the mask: one curve for every row, no ranking at all
        assert score_mask(*parts, [], None, "cindex", **kw) == 0.5


def test_score_mask_survival_is_sksurvs_integrated_brier_score_on_the_grid():
    from sksurv.ensemble import RandomSurvivalForest
    from sksurv.metrics import integrated_brier_score
    from sksurv.nonparametric import kaplan_meier_estimator

    from fedforest.election.tuning import survival_grid

    X_tr, y_tr, X_va, y_va = whas_sites(1)[0]
    # validation rows inside the training rows' follow-up, which sksurv's IBS needs
    inside = y_va["time"] <= y_tr["time"].max()
    X_va, y_va = X_va[inside].reset_index(drop=True), y_va[inside]
    grid = survival_grid(y_tr, y_va)
    lo = max(y_tr["time"].min(), y_va["time"].min())
    hi = min(y_tr["time"].max(), y_va["time"].max())
    assert 2 <= len(grid) <= 17 and np.all(np.diff(grid) > 0)
    assert grid[0] >= lo and grid[-1] < hi
    events = y_tr["time"][y_tr["event"]]
    assert grid[0] == np.quantile(events, 0.1) and grid[-1] == np.quantile(events, 0.9)

    got = score_mask(X_tr, y_tr, X_va, y_va, INFORMATIVE, None, "ibs", 20, 3, task="survival")
    forest = RandomSurvivalForest(n_estimators=20, random_state=3, n_jobs=1)
    forest.fit(X_tr[INFORMATIVE].to_numpy(dtype=np.float32), y_tr)
    curves = forest.predict_survival_function(X_va[INFORMATIVE].to_numpy(dtype=np.float32))
    expected = integrated_brier_score(y_tr, y_va, np.array([f(grid) for f in curves]), grid)
    assert got == pytest.approx(expected, abs=1e-12)

    km = score_mask(X_tr, y_tr, X_va, y_va, [], None, task="survival")
    times, survival = kaplan_meier_estimator(y_tr["event"], y_tr["time"])
    curve = survival[np.searchsorted(times, grid, side="right") - 1]
    expected = integrated_brier_score(y_tr, y_va, np.tile(curve, (len(y_va), 1)), grid)
    assert km == pytest.approx(expected, abs=1e-12)


def test_a_survival_mask_is_scored_out_of_bag_as_sksurv_scores_it():
    from sksurv.ensemble import RandomSurvivalForest

    X_tr, y_tr, _, _ = whas_sites(1)[0]
    got = score_mask(X_tr, y_tr, None, None, INFORMATIVE, None, "cindex", 20, 3, task="survival")
    forest = RandomSurvivalForest(
        n_estimators=20, random_state=3, n_jobs=1, bootstrap=True, oob_score=True
    ).fit(X_tr[INFORMATIVE].to_numpy(dtype=np.float32), y_tr)
    assert got == forest.oob_score_


def test_a_scoring_row_followed_beyond_the_training_rows_is_scored():
    from fedforest.election.tuning import survival_grid

    X_tr, y_tr, X_va, y_va = whas_sites(1)[0]
    last = y_tr["time"].max()
    late = y_va.copy()
    late["time"][:5] = last + np.arange(1, 6)  # followed longer than any training row
    kw = dict(task="survival", n_estimators=10, random_state=0)
    value = score_mask(X_tr, y_tr, X_va, late, INFORMATIVE, None, **kw)
    assert 0 < value < 0.25
    # a row at risk beyond the grid's end counts the same at any time after it: the same
    # rows with times inside the training rows' follow-up (scikit-survival's own case)
    grid = survival_grid(y_tr, late)
    inside = late.copy()
    inside["time"][:5] = (grid[-1] + last) / 2
    assert np.array_equal(survival_grid(y_tr, inside), grid)
    assert value == pytest.approx(
        score_mask(X_tr, y_tr, X_va, inside, INFORMATIVE, None, **kw), abs=1e-12
    )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (
            dict(metric="auprc"),
            r"metric='auprc' cannot score a survival mask; .*\['ibs', 'cindex'\]",
        ),
        (dict(metric="rmse"), r"metric='rmse' cannot score a survival mask"),
        (dict(y_val="plain"), r"y_val must be a survival target: a structured array"),
        (dict(y_train="short"), r"y_train has \d+ values but X_train has \d+ rows"),
        (dict(y_train="censored"), r"y_train \(survival target\) has no event"),
    ],
)
def test_score_mask_survival_refusals(kwargs, match):
    X_tr, y_tr, X_va, y_va = whas_sites(1)[0]
    if kwargs.pop("y_val", "") == "plain":
        y_va = y_va["time"]
    y_train = kwargs.pop("y_train", "")
    if y_train == "short":
        y_tr = y_tr[:-1]
    elif y_train == "censored":
        y_tr = y_tr.copy()
        y_tr["event"] = False
    with pytest.raises(ValueError, match=match):
        score_mask(X_tr, y_tr, X_va, y_va, ["age"], None, task="survival", n_estimators=5, **kwargs)


def test_the_survival_grid_needs_two_times_in_the_shared_follow_up():
    from sksurv.util import Surv

    from fedforest.election.tuning import survival_grid

    early = Surv.from_arrays(event=[True, True, False], time=[1.0, 2.0, 3.0])
    late = Surv.from_arrays(event=[True, False], time=[5.0, 6.0])
    with pytest.raises(ValueError, match=r"fewer than two distinct times in their follow-up"):
        survival_grid(early, late)
    # few events: the percentiles of every time in the window
    train = Surv.from_arrays(event=[True, False, False, False], time=[1.0, 2.0, 3.0, 4.0])
    grid = survival_grid(train, train)
    assert len(grid) >= 2 and grid[0] >= 1.0 and grid[-1] < 4.0


def test_survival_tuning_minimises_the_pooled_ibs_and_returns_a_mask_and_a_history():
    from fedforest.election.selectors import select_features
    from fedforest.election.tuning import pool_scores

    sites = whas_sites(3)
    votes = []
    for k, (X_tr, y_tr, _, _) in enumerate(sites):
        sel = select_features(X_tr, y_tr, "cox_univariate", task="survival")
        votes.append(SiteVote(f"site-{k}", sel.features, sel.mask, sel.scores, len(X_tr)))
    ballot = Ballot(votes)
    seen = {}

    def score(features):
        per_site = [
            score_mask(X_tr, y_tr, X_va, y_va, features, None, task="survival",
                       n_estimators=20, random_state=0)
            for X_tr, y_tr, X_va, y_va in sites
        ]  # fmt: skip
        seen[tuple(features)] = pool_scores("ibs", per_site, [len(s[3]) for s in sites])
        return seen[tuple(features)]

    result = hill_climb(ballot, score, start=0.5, rounds=4, metric="ibs")
    assert result.score == min(seen.values())
    assert result.election.selected and {"age", "chf"} <= set(result.election.selected)
    assert len(result.history) >= 2
    assert [h.score for h in result.history] == [seen[tuple(ballot.count(h.freedom_degree).selected)] for h in result.history]  # fmt: skip
    assert result.to_dict()["history"][0]["freedom_degree"] == 0.5
    assert result.score < score(["noise0", "noise1", "noise2"])


def test_pool_scores_pools_ibs_as_the_row_weighted_mean():
    from fedforest.election.tuning import DEFAULT_METRICS, TUNING_METRICS, pool_scores

    assert DEFAULT_METRICS["survival"] == "ibs"
    assert {"ibs", "cindex"} <= set(TUNING_METRICS)
    assert pool_scores("ibs", [0.1, 0.2, 0.4], [100, 300, 100]) == pytest.approx(0.22)
    assert pool_scores("cindex", [0.6, 0.8], [1, 3]) == pytest.approx(0.75)


def test_hill_climb_minimises_ibs():
    ballot = ballot_with_disputed()
    result = hill_climb(ballot, lambda f: abs(len(f) - 9) / 100 + 0.1, rounds=8, metric="ibs")
    assert len(result.election.selected) == 9
    assert result.score == pytest.approx(0.1)


# ------------------------------------------------------------------ every feature
def ballot_with_unselected() -> Ballot:
    """Two sites; ``u0``..``u2`` no site's selector keeps, so no freedom degree reaches them."""
    feats = ["core", "d0", "d1", "u0", "u1", "u2"]
    a = SiteVote("a", feats, [1, 1, 0, 0, 0, 0], [3, 2, 1, 0.5, 0.4, 0.3], 100)
    b = SiteVote("b", feats, [1, 0, 1, 0, 0, 0], [3, 1, 2, 0.5, 0.4, 0.3], 100)
    return Ballot([a, b])


def test_every_feature_is_scored_second_within_the_rounds_and_wins_when_best():
    ballot = ballot_with_unselected()
    calls = []

    def score(features):
        calls.append(tuple(features))
        return len(features) / 6  # more columns, better

    result = hill_climb(ballot, score, start=0.5, rounds=4, every_feature=True)
    assert calls[0] == tuple(ballot.count(0.5).selected)
    assert calls[1] == tuple(ballot.features)  # second, after the start
    assert len(calls) <= 4 and len(set(calls)) == len(calls)
    assert result.freedom_degree is None and result.score == 1.0
    assert result.election.selected == ballot.features
    assert result.election.freedom_degree is None
    assert [h.freedom_degree for h in result.history][:2] == [0.5, None]
    assert result.to_dict()["history"][1] == {
        "freedom_degree": None,
        "kept": 6,
        "score": 1.0,
        "reused": False,
    }
    # without the candidate the union is the most the tuner can keep
    plain = hill_climb(ballot, score, start=0.5, rounds=4)
    assert plain.election.selected == ["core", "d0", "d1"]


def test_every_feature_within_tolerance_of_a_smaller_mask_loses():
    ballot = ballot_with_unselected()
    result = hill_climb(
        ballot, lambda f: 0.80 + 0.001 * len(f), rounds=5, tolerance=0.005, every_feature=True
    )
    assert None in [h.freedom_degree for h in result.history]
    assert result.freedom_degree is not None
    assert len(result.election.selected) == min(h.n_features for h in result.history)


def test_one_round_scores_only_the_start():
    calls = []
    hill_climb(
        ballot_with_unselected(), lambda f: calls.append(f) or 1.0, rounds=1, every_feature=True
    )
    assert len(calls) == 1


def test_when_the_union_is_every_feature_the_freedom_degree_keeps_it():
    """Every site keeps every column: fd 1 and every feature are one mask, scored once; the
    tie goes to the freedom degree, which says how the vote reached it."""
    feats = ["x", "y", "z"]
    ballot = Ballot([SiteVote(s, feats, [1, 1, 1], [3, 2, 1], 10) for s in "ab"])
    calls = []
    result = hill_climb(ballot, lambda f: calls.append(f) or 1.0, rounds=3, every_feature=True)
    assert len(calls) == 1  # one mask, whatever the candidate
    assert result.freedom_degree == 0.5 and result.election.selected == feats


def test_every_feature_minimises_a_lower_is_better_metric():
    ballot = ballot_with_unselected()
    result = hill_climb(
        ballot, lambda f: 10.0 - len(f), metric="rmse", rounds=3, every_feature=True
    )
    assert result.freedom_degree is None and result.score == 4.0


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_every_feature_must_be_true_or_false(value):
    with pytest.raises(ValueError, match="every_feature=.* must be true or false"):
        hill_climb(ballot_with_unselected(), len, every_feature=value)


def test_the_modules_examples_run():
    import doctest

    import fedforest.election.ballot
    import fedforest.election.tuning

    for module in (fedforest.election.tuning, fedforest.election.ballot):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted >= 5, (module.__name__, result)
