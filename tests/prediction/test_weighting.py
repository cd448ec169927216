"""Weighted marginal prediction (wmp): the combination, the fitted weight, the classifier."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest import PooledForestClassifier
from fedforest.model.traversal import DISCARD, CompiledForest
from fedforest.prediction.routing import route_leaves, route_marginal
from fedforest.prediction.weighting import (
    GUESS_WEIGHTS,
    brier_score,
    check_guess_weight,
    fit_guess_weight,
    weighted_marginal,
)

SITE_A = ["x0", "x1", "x2", "x3"]  # site a's columns; x4, x5 are absent here


@pytest.fixture(scope="module")
def pooled(two_site_forest):
    return two_site_forest[0]


def per_tree_reference(forest, X, weight):
    """sum_t w_t p_t / sum_t w_t with p_t each tree's mp distribution, straight from the traversals."""
    cf = CompiledForest.build(forest)
    clf = PooledForestClassifier(forest, strategy="mp")
    Xg = np.full((len(X), forest.n_features), np.nan, dtype=np.float32)
    for j, name in enumerate(forest.feature_names):
        if name in X.columns:
            Xg[:, j] = X[name].to_numpy(dtype=np.float32)
    trees = np.arange(forest.n_trees)
    absent = np.all(np.isnan(Xg), axis=0)
    # no imputers: mp branches with N_right / N_node
    dist = route_marginal(cf, Xg, trees, lambda n, r: cf.right_fraction[n], absent)
    certain = route_leaves(cf, Xg, trees, lambda n, r: np.full(n.size, DISCARD)) >= 0
    w = np.where(certain, 1.0, weight)
    total = w.sum(axis=0)
    out = (w[:, :, None] * dist).sum(axis=0) / np.where(total > 0, total, 1.0)[:, None]
    none = total == 0
    out[none] = clf.predict_proba(X)[none]
    return out, certain


@pytest.mark.parametrize("weight", [0.0, 0.3, 1.0])
def test_wmp_equals_the_per_tree_weighted_average(pooled, table, weight):
    X, _ = table
    X = X[SITE_A][:120]
    clf = PooledForestClassifier(pooled, strategy="wmp", guess_weight=weight, engine="numpy")
    got = clf.predict_proba(X)
    want, certain = per_tree_reference(pooled, X, weight)
    assert 0 < certain.mean() < 1  # both kinds of tree occur
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-12)


def test_weight_one_is_mp_and_weight_zero_is_soft_fpv(pooled, table):
    X, _ = table
    X = X[SITE_A][:200]
    mp = PooledForestClassifier(pooled, strategy="mp").predict_proba(X)
    fpv = PooledForestClassifier(pooled, strategy="fpv", voting="hard")
    fpv_soft = PooledForestClassifier(pooled, strategy="fpv").predict_proba(X)
    one = PooledForestClassifier(pooled, strategy="wmp", guess_weight=1, voting="hard")
    zero = PooledForestClassifier(pooled, strategy="wmp", guess_weight=0.0, voting="hard")
    np.testing.assert_allclose(one.predict_proba(X), mp, atol=1e-12)
    # wmp always averages distributions, whatever the voting
    np.testing.assert_allclose(zero.predict_proba(X), fpv_soft, atol=1e-12)
    fpv.predict_proba(X)
    np.testing.assert_array_equal(zero.diagnostics_.trees_kept, fpv.diagnostics_.trees_kept)
    assert one.diagnostics_.trees_kept.min() == pooled.n_trees
    assert one.diagnostics_.strategy == "wmp"


def test_a_row_without_certain_tree_gets_mp_at_weight_zero():
    p_fpv = np.array([[0.5, 0.5], [1.0, 0.0]])  # row 0: fpv fell back to mp
    # row 1: three certain trees at [1, 0], one guessing tree at [0, 1]
    p_mp = np.array([[0.5, 0.5], [0.75, 0.25]])
    out = weighted_marginal(p_fpv, np.array([0, 3]), p_mp, 4, 0.0)
    np.testing.assert_array_equal(out, [[0.5, 0.5], [1.0, 0.0]])
    out = weighted_marginal(p_fpv, np.array([0, 3]), p_mp, 4, 0.5)
    np.testing.assert_allclose(out[1], np.array([3.0, 0.5]) / 3.5, atol=1e-15)
    np.testing.assert_array_equal(out[0], p_mp[0])
    np.testing.assert_array_equal(weighted_marginal(p_fpv, np.array([0, 3]), p_mp, 4, 1.0), p_mp)


def test_fitted_weight_is_the_candidate_with_the_lowest_validation_brier(pooled, table):
    X, y = table
    X_val, y_val = X[SITE_A][300:420], y[300:420]
    clf = PooledForestClassifier(pooled, strategy="wmp").fit(X_val, y_val)
    assert set(clf.guess_weight_scores_) == set(GUESS_WEIGHTS)
    brute = {
        w: brier_score(
            y_val,
            PooledForestClassifier(pooled, strategy="wmp", guess_weight=w).predict_proba(X_val),
            clf.classes_,
        )
        for w in GUESS_WEIGHTS
    }
    for w in GUESS_WEIGHTS:
        assert clf.guess_weight_scores_[w] == pytest.approx(brute[w], abs=1e-12)
    assert clf.guess_weight_ == min(brute, key=lambda w: (round(brute[w], 12), -w))
    fixed = PooledForestClassifier(pooled, strategy="wmp", guess_weight=clf.guess_weight_)
    np.testing.assert_array_equal(clf.predict_proba(X_val), fixed.predict_proba(X_val))


def test_ties_go_to_the_larger_weight_and_one_class_is_fine():
    p = np.array([[0.2, 0.8], [0.2, 0.8]])
    # every tree certain: the weight changes nothing, every candidate ties
    weight, scores = fit_guess_weight(p, np.array([4, 4]), p, 4, [1, 1], [0, 1])
    assert weight == 1.0 and len(set(scores.values())) == 1
    with pytest.raises(ValueError, match="validation rows"):
        fit_guess_weight(p[:0], np.array([]), p[:0], 4, [], [0, 1])


def test_engines_agree_on_wmp(pooled, table):
    pytest.importorskip("numba")
    X, y = table
    X = X[SITE_A][:150].copy()
    X.iloc[::7, 1] = np.nan  # NaN in a present column: dynamic rows too
    got = {
        e: PooledForestClassifier(pooled, strategy="wmp", guess_weight=0.2, engine=e).predict_proba(
            X
        )
        for e in ("numpy", "numba")
    }
    np.testing.assert_array_equal(got["numpy"], got["numba"])


@pytest.mark.parametrize("bad", [1.5, -0.1, "half", True, None, float("nan")])
def test_bad_guess_weights_are_refused_by_name(pooled, table, bad):
    X, _ = table
    with pytest.raises(ValueError, match="guess_weight="):
        check_guess_weight(bad)
    with pytest.raises(ValueError, match="guess_weight="):
        PooledForestClassifier(pooled, strategy="wmp", guess_weight=bad).predict_proba(X[:3])


def test_wmp_needs_fit_or_a_number_and_is_no_auto_candidate(pooled, table):
    X, y = table
    clf = PooledForestClassifier(pooled, strategy="wmp")
    with pytest.raises(ValueError, match="fit"):
        clf.predict_proba(X[SITE_A][:5])
    with pytest.raises(ValueError, match="validation rows"):
        clf.fit()
    with pytest.raises(ValueError, match="rows but y has"):
        clf.fit(X[SITE_A][:10], y[:9])
    auto = PooledForestClassifier(pooled, strategy="auto", auto_candidates=["mp", "wmp"])
    with pytest.raises(ValueError, match="cannot also be chosen"):
        auto.fit(X[SITE_A][:50], y[:50])
    chosen = PooledForestClassifier(pooled, strategy="auto").fit(X[SITE_A][:80], y[:80])
    assert "wmp" not in chosen.selection_scores_ and "node" in chosen.selection_scores_


# ------------------------------------------------------------------ pooling weights
ALL = ["x0", "x1", "x2", "x3", "x4", "x5"]


@pytest.mark.parametrize("strategy", ["fpv", "pr", "mi", "ipr", "mp", "ss", "node", "park"])
def test_rows_weights_average_the_sites_forests_by_weight(two_site_forest, table, strategy):
    # every column present: each site's trees give its scikit-learn forest's probabilities
    forest, rf_a, rf_b = two_site_forest
    X, _ = table
    X = X[ALL][:150]
    weights = {"a": 30.0, "b": 200.0}
    clf = PooledForestClassifier(forest, strategy=strategy, owner_weights=weights, site="a")
    got = clf.predict_proba(X)
    p_a, p_b = (
        rf_a.predict_proba(X[rf_a.feature_names_in_]),
        rf_b.predict_proba(X[rf_b.feature_names_in_]),
    )
    want = (30.0 * 15 * p_a + 200.0 * 15 * p_b) / (30.0 * 15 + 200.0 * 15)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("strategy", ["fpv", "mp", "ipr", "wmp", "node", "local"])
def test_equal_weights_change_nothing_bit_for_bit(two_site_forest, table, strategy):
    forest = two_site_forest[0]
    X, y = table
    X = X[SITE_A]
    params = dict(strategy=strategy, site="a", random_state=0, guess_weight=0.4)
    plain = PooledForestClassifier(forest, **params).predict_proba(X[:200])
    equal = PooledForestClassifier(forest, owner_weights={"a": 7, "b": 7}, **params)
    assert np.array_equal(equal.predict_proba(X[:200]), plain)


@pytest.mark.parametrize("engine", ["numpy", "numba"])
def test_weighted_mp_with_absent_columns_is_the_per_tree_weighted_average(
    two_site_forest, table, engine
):
    forest = two_site_forest[0]
    X, _ = table
    X = X[SITE_A][:120]
    weights = {"a": 1.0, "b": 3.0}
    got = PooledForestClassifier(
        forest, strategy="mp", owner_weights=weights, engine=engine
    ).predict_proba(X)
    cf = CompiledForest.build(forest)
    Xg = np.full((len(X), forest.n_features), np.nan, dtype=np.float32)
    for j, name in enumerate(forest.feature_names):
        if name in X.columns:
            Xg[:, j] = X[name].to_numpy(dtype=np.float32)
    absent = np.all(np.isnan(Xg), axis=0)
    dist = route_marginal(
        cf, Xg, np.arange(forest.n_trees), lambda n, r: cf.right_fraction[n], absent
    )
    w = np.where(forest.tree_owner == 0, 1.0, 3.0)
    want = (w[:, None, None] * dist).sum(axis=0) / w.sum()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_weighted_wmp_uses_summed_weights(two_site_forest, table):
    forest = two_site_forest[0]
    X, _ = table
    X = X[SITE_A][:100]
    w = {"a": 1.0, "b": 4.0}
    wmp = PooledForestClassifier(forest, strategy="wmp", guess_weight=1.0, owner_weights=w)
    mp = PooledForestClassifier(forest, strategy="mp", owner_weights=w)
    np.testing.assert_allclose(wmp.predict_proba(X), mp.predict_proba(X), atol=1e-12)
    at_zero = PooledForestClassifier(forest, strategy="wmp", guess_weight=0.0, owner_weights=w)
    fpv = PooledForestClassifier(forest, strategy="fpv", owner_weights=w)
    np.testing.assert_allclose(at_zero.predict_proba(X), fpv.predict_proba(X), atol=1e-12)


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"a": 1.0}, "missing \\['b'\\]"),
        ({"a": 1.0, "b": 1.0, "c": 1.0}, "unknown \\['c'\\]"),
        ({"a": -1.0, "b": 1.0}, "owner_weights\\['a'\\]=-1.0 must be a finite number >= 0"),
        ({"a": float("nan"), "b": 1.0}, "must be a finite number"),
        ({"a": "many", "b": 1.0}, "owner_weights\\['a'\\]='many' must be a number"),
        ({"a": 0.0, "b": 0.0}, "gives every site weight 0"),
        ([1, 2], "must map each site of the forest"),
    ],
)
def test_bad_pooling_weights_are_refused_by_name(two_site_forest, table, weights, message):
    forest = two_site_forest[0]
    X, _ = table
    with pytest.raises(ValueError, match=message):
        PooledForestClassifier(forest, strategy="mp", owner_weights=weights).predict_proba(
            X[SITE_A][:5]
        )


def test_a_site_with_weight_zero_does_not_vote(two_site_forest, table):
    forest, rf_a, _ = two_site_forest
    X, _ = table
    X = X[ALL][:50]
    clf = PooledForestClassifier(forest, strategy="fpv", owner_weights={"a": 1.0, "b": 0.0})
    np.testing.assert_allclose(
        clf.predict_proba(X), rf_a.predict_proba(X[rf_a.feature_names_in_]), atol=1e-12
    )


@pytest.mark.parametrize("weight", [0.0, 0.3, 1.0])
def test_with_every_feature_present_wmp_is_mp_and_predicts_once(pooled, table, weight, monkeypatch):
    X = table[0][list(pooled.feature_names)]
    mp = PooledForestClassifier(pooled, strategy="mp").predict_proba(X)
    clf = PooledForestClassifier(pooled, strategy="wmp", guess_weight=weight)
    calls = []
    original = type(clf)._predict_strategy
    monkeypatch.setattr(
        type(clf),
        "_predict_strategy",
        lambda self, X, strategy, voting, known_mp=None, *rest: (
            calls.append(strategy) or original(self, X, strategy, voting, known_mp, *rest)
        ),
    )
    assert np.array_equal(clf.predict_proba(X), mp)
    assert calls == ["fpv"]  # mp's part is fpv's prediction: nothing is missing
    calls.clear()
    X_half = X.copy()
    X_half.iloc[0, 0] = np.nan  # one missing value: both parts are predicted
    clf.predict_proba(X_half)
    assert calls == ["mp", "fpv"]


def test_wmp_marginalises_each_row_once(pooled, table, monkeypatch):
    """fpv's rows whose every tree was discarded take the mp prediction already made."""
    from fedforest.prediction import pipeline as pooled_module

    X = table[0][["x0", "x1"]]
    fpv = PooledForestClassifier(pooled, strategy="fpv", voting="soft")
    p_fpv = fpv.predict_proba(X)
    assert 0 < fpv.diagnostics_.n_fallback < len(X)  # some rows fall back to mp
    reference = PooledForestClassifier(pooled, strategy="wmp", guess_weight=0.3)
    rows = []
    original = pooled_module.marginal

    def counting(kernels, cf, Xg, *args, **kwargs):
        rows.append(len(Xg))
        return original(kernels, cf, Xg, *args, **kwargs)

    monkeypatch.setattr(pooled_module, "marginal", counting)
    clf = PooledForestClassifier(pooled, strategy="wmp", guess_weight=0.3)
    p_wmp = clf.predict_proba(X)
    assert rows == [len(X)]
    p_certain, *_ = clf._wmp_parts(X, "wmp")
    assert np.array_equal(p_certain, p_fpv)  # fpv's own fallback rows, bit for bit
    monkeypatch.setattr(pooled_module, "marginal", original)
    assert np.array_equal(p_wmp, reference.predict_proba(X))
