"""Out-of-bag prediction: each row scored by the trees that did not train on it.

Real scikit-learn forests, their bootstrap samples (``sample_counts``) and
scikit-learn's own ``oob_decision_function_`` / ``oob_prediction_`` as the
reference; every rule of the registry on both engines.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from fedforest import PooledForest, PooledForestClassifier, PooledForestRegressor, rules
from fedforest.model.imputers import fit_imputers
from fedforest.model.in_bag import InBagRecord, sample_counts
from fedforest.model.surrogates import fit_surrogates
from fedforest.prediction import classifier as classifier_module
from fedforest.prediction import pooled as pooled_module
from fedforest.prediction.calibration import fit_calibration
from fedforest.prediction.out_of_bag import InBag, check_in_bag
from fedforest.prediction.weighting import fit_guess_weight

NAMES = ["a", "b", "c", "d"]
ENGINES = ("numpy", "numba")


def own_forest_rules():
    """Every deployable rule that predicts with the pooled forest itself."""
    found = [rules.get(name) for name in rules.names()]
    return [r.name for r in found if r.deployable and not r.needs_intersection]


@pytest.fixture(scope="module")
def site():
    """Two sites' forests pooled (s2's first); the rows are s1's training rows."""
    rng = np.random.RandomState(3)
    n = 240
    X = pd.DataFrame(rng.normal(size=(n, 4)), columns=NAMES)
    y = ((X["a"] + X["c"] + 0.6 * rng.normal(size=n)) > 0).astype(int)
    rf = RandomForestClassifier(n_estimators=15, max_depth=6, random_state=0, oob_score=True)
    rf.fit(X.to_numpy(np.float32), y)
    other = RandomForestClassifier(n_estimators=7, max_depth=6, random_state=5)
    other.fit(X.to_numpy(np.float32)[::-1], y[::-1])
    own = PooledForest.from_sklearn(rf, NAMES, owner="s1", X=X)
    own = fit_surrogates(own, X, ["a", "b", "d"])
    pooled = PooledForest.concat([PooledForest.from_sklearn(other, NAMES, owner="s2"), own])
    record = InBagRecord.build("s1", own, sample_counts(rf, n))
    imputers = fit_imputers(X, ["c"], ["a", "b", "d"], owner="s1", random_state=0)
    lacking = X.drop(columns="c")
    lacking.iloc[::6, 0] = np.nan  # NaN in a column the site has
    return {
        "X": X,
        "y": y,
        "rf": rf,
        "own": own,
        "pooled": pooled,
        "bag": InBag(record.matrix(pooled)),
        "imputers": imputers,
        "std": X.std().to_dict(),
        "lacking": lacking,
    }


def classifier(site, strategy, engine="numpy", **params):
    params = {
        "site": "s1",
        "engine": engine,
        "guess_weight": 0.3,
        "imputers": site["imputers"],
        "feature_std": site["std"],
        "random_state": 4,
        **params,
    }
    return PooledForestClassifier(site["pooled"], strategy=strategy, **params)


# ------------------------------------------------------------------ scikit-learn's OOB
@pytest.mark.parametrize("strategy", own_forest_rules())
def test_with_every_feature_it_is_scikit_learns_oob_decision_function(site, strategy):
    rf, X = site["rf"], site["X"]
    forest = site["own"]  # a single site's forest
    bag = InBag(sample_counts(rf, len(X)) > 0)
    has = (~bag.forest).any(axis=0)
    assert not has.all()  # scikit-learn leaves these rows at 0; fedforest marks them NaN
    for engine in ENGINES:
        clf = PooledForestClassifier(
            forest, strategy=strategy, site="s1", engine=engine, guess_weight=0.3
        )
        proba = clf.predict_proba(X, in_bag=bag)
        np.testing.assert_allclose(proba[has], rf.oob_decision_function_[has], rtol=0, atol=1e-12)
        assert np.isnan(proba[~has]).all()
        assert np.array_equal(clf.diagnostics_.unscored_rows, ~has)


@pytest.mark.parametrize("strategy", own_forest_rules())
def test_with_every_feature_it_is_scikit_learns_oob_prediction(strategy):
    rng = np.random.RandomState(1)
    X = pd.DataFrame(rng.normal(size=(200, 3)), columns=["a", "b", "c"])
    y = 2 * X["a"] - X["c"] + rng.normal(scale=0.3, size=200)
    rf = RandomForestRegressor(n_estimators=20, max_depth=5, random_state=0, oob_score=True)
    rf.fit(X.to_numpy(np.float32), y)
    forest = PooledForest.from_sklearn(rf, ["a", "b", "c"], owner="s1")
    bag = InBag(sample_counts(rf, 200) > 0)
    has = (~bag.forest).any(axis=0)
    for engine in ENGINES:
        reg = PooledForestRegressor(
            forest, strategy=strategy, site="s1", engine=engine, guess_weight=0.3
        )
        predicted = reg.predict(X, in_bag=bag)
        np.testing.assert_allclose(predicted[has], rf.oob_prediction_[has], rtol=0, atol=1e-12)


# ------------------------------------------------------------------ in_bag=None unchanged
@pytest.mark.parametrize("strategy", own_forest_rules())
def test_an_empty_in_bag_is_the_plain_prediction_bit_for_bit(site, strategy):
    empty = InBag(np.zeros_like(site["bag"].forest))
    for weights in (None, {"s1": 30.0, "s2": 200.0}):
        for engine in ENGINES:
            clf = classifier(site, strategy, engine, owner_weights=weights)
            plain = clf.predict_proba(site["lacking"])
            assert np.array_equal(clf.predict_proba(site["lacking"], in_bag=empty), plain)
            assert clf.diagnostics_.unscored_rows is not None
            assert not clf.diagnostics_.unscored_rows.any()


@pytest.mark.parametrize("strategy", own_forest_rules())
def test_rows_without_an_in_bag_tree_keep_their_plain_bits(site, strategy):
    """Only some rows' columns hold in-bag trees: the others are predicted as without in_bag."""
    matrix = site["bag"].forest.copy()
    matrix[:, ::2] = False
    for weights in (None, {"s1": 30.0, "s2": 200.0}):
        for engine in ENGINES:
            clf = classifier(site, strategy, engine, owner_weights=weights)
            plain = clf.predict_proba(site["lacking"])
            masked = clf.predict_proba(site["lacking"], in_bag=InBag(matrix))
            assert np.array_equal(masked[::2], plain[::2])
            assert not np.array_equal(masked[1::2], plain[1::2])


# ------------------------------------------------------------------ invariants with in_bag
@pytest.mark.parametrize("strategy", own_forest_rules())
def test_the_engines_agree_bit_for_bit_out_of_bag(site, strategy):
    for weights in (None, {"s1": 30.0, "s2": 200.0}):
        out = [
            classifier(site, strategy, engine, owner_weights=weights).predict_proba(
                site["lacking"], in_bag=site["bag"]
            )
            for engine in ENGINES
        ]
        assert np.array_equal(out[0], out[1], equal_nan=True)


@pytest.mark.parametrize("strategy", own_forest_rules())
def test_a_rows_out_of_bag_prediction_does_not_depend_on_its_batch(site, strategy):
    clf = classifier(site, strategy, "numpy")
    whole = clf.predict_proba(site["lacking"], in_bag=site["bag"])
    rows = np.arange(40, 100)[::-1]  # another batch, in another order
    part = clf.predict_proba(site["lacking"].iloc[rows], in_bag=site["bag"].rows(rows))
    assert np.array_equal(part, whole[rows], equal_nan=True)


def test_owner_weights_weigh_the_out_of_bag_trees(site):
    """With every feature present: each row the weighted mean of its out-of-bag trees."""
    pooled, X = site["pooled"], site["X"]
    weights = {"s1": 3.0, "s2": 7.0}
    bag = site["bag"]
    per_tree = np.stack(
        [
            PooledForestClassifier(
                pooled.select_trees(np.arange(pooled.n_trees) == t)
            ).predict_proba(X)
            for t in range(pooled.n_trees)
        ]
    )
    w = np.where(np.asarray(pooled.tree_owner) == pooled.owners.index("s1"), 3.0, 7.0)
    counted = np.where(bag.forest, 0.0, w[:, None])
    expected = (counted[:, :, None] * per_tree).sum(axis=0) / counted.sum(axis=0)[:, None]
    for strategy in ("fpv", "mp", "wmp"):
        clf = PooledForestClassifier(pooled, strategy=strategy, owner_weights=weights)
        clf.guess_weight = 0.5
        np.testing.assert_allclose(clf.predict_proba(X, in_bag=bag), expected, atol=1e-12)


def test_a_row_every_tree_trained_on_is_nan_and_named(site):
    matrix = site["bag"].forest.copy()
    matrix[:, 5] = True
    for strategy in ("fpv", "mp", "wmp", "local"):
        clf = classifier(site, strategy)
        proba = clf.predict_proba(site["lacking"], in_bag=InBag(matrix))
        assert np.isnan(proba[5]).all() and not np.isnan(np.delete(proba, 5, axis=0)).any()
        assert np.flatnonzero(clf.diagnostics_.unscored_rows).tolist() == [5]


def test_a_rows_own_trees_all_in_bag_fall_back_to_its_other_trees(site):
    """local keeps s1's trees: a row they all trained on falls back to mp over s2's trees."""
    matrix = site["bag"].forest.copy()
    matrix[site["pooled"].owner_mask("s1"), 7] = True
    clf = classifier(site, "local")
    proba = clf.predict_proba(site["X"], in_bag=InBag(matrix))
    assert clf.diagnostics_.fallback_rows[7] and clf.diagnostics_.trees_kept[7] == 0
    others = PooledForestClassifier(
        site["pooled"].select_trees(site["pooled"].owner_mask("s2")), strategy="mp"
    ).predict_proba(site["X"].iloc[[7]])
    np.testing.assert_allclose(proba[7], others[0], atol=1e-12)


# ------------------------------------------------------------------ fits on OOB rows
def oob_proba(clf, X, bag, strategy):
    return clf._predict_values(X, strategy, in_bag=bag)[0]


def test_wmp_fits_its_weight_on_the_out_of_bag_scores(site):
    X, y, bag = site["lacking"], site["y"], site["bag"]
    clf = classifier(site, "wmp", guess_weight="auto").fit(X, y, in_bag=bag)
    parts = clf._wmp_parts(X, "wmp", None, bag)
    weight, scores = fit_guess_weight(*parts[:4], y, clf.classes_)
    assert clf.guess_weight_ == weight and clf.guess_weight_scores_ == scores
    plain = classifier(site, "wmp", guess_weight="auto").fit(X, y)
    assert plain.guess_weight_scores_ != scores  # in-sample scores differ


def test_calibration_is_fitted_on_the_out_of_bag_scores(site):
    X, y, bag = site["lacking"], site["y"], site["bag"]
    clf = classifier(site, "mp", calibration="sigmoid").fit(X, y, in_bag=bag)
    expected = fit_calibration(
        oob_proba(clf, X, bag, "mp"), y, clf.classes_, "sigmoid", clf._training_prior("mp"), 4
    )
    assert clf.calibrator_.method == "sigmoid"
    for key in ("a", "b"):
        assert np.array_equal(clf.calibrator_.params[key], expected.calibrator.params[key])


def test_auto_chooses_on_the_out_of_bag_scores(site):
    X, y, bag = site["lacking"], site["y"], site["bag"]
    candidates = ["fpv", "mp", "node", "local"]
    clf = classifier(site, "auto", auto_candidates=candidates, auto_metric="brier")
    clf.fit(X, y, in_bag=bag)
    from fedforest.metrics import score

    for name in candidates:
        expected = score("brier", y, oob_proba(clf, X, bag, name), clf.classes_)
        assert clf.selection_scores_[name] == pytest.approx(expected, abs=1e-12)
    in_sample = classifier(site, "auto", auto_candidates=candidates, auto_metric="brier").fit(X, y)
    # in sample the site's own trees have seen the rows: local looks better than it is
    assert in_sample.selection_scores_["local"] < clf.selection_scores_["local"]


def test_out_of_bag_the_lowest_score_wins(site, monkeypatch):
    """A tie within one standard error is for a few held-out rows; scored out of bag, every
    training row counts and the lowest score wins."""
    X, y, bag = site["lacking"], site["y"], site["bag"]
    asked = []
    original = classifier_module.choose_calibrated
    monkeypatch.setattr(
        classifier_module,
        "choose_calibrated",
        lambda *a, **k: asked.append(k["standard_error_ties"]) or original(*a, **k),
    )
    candidates = ["fpv", "mp", "node", "local"]
    clf = classifier(site, "auto", auto_candidates=candidates).fit(X, y, in_bag=bag)
    classifier(site, "auto", auto_candidates=candidates).fit(X, y)
    assert asked == [False, True]  # out of bag, then held out
    assert clf.selection_scores_[clf.strategy_] == min(clf.selection_scores_.values())


def test_the_regressor_fits_auto_and_wmp_out_of_bag(monkeypatch):
    rng = np.random.RandomState(2)
    X = pd.DataFrame(rng.normal(size=(180, 3)), columns=["a", "b", "c"])
    y = X["a"] - 2 * X["c"] + rng.normal(scale=0.3, size=180)
    rf = RandomForestRegressor(n_estimators=12, max_depth=5, random_state=0).fit(X, y)
    forest = PooledForest.from_sklearn(rf, ["a", "b", "c"], owner="s1")
    bag = InBag(sample_counts(rf, 180) > 0)
    keep = (~bag.forest).any(axis=0)
    Xm = X[["a", "b"]]
    ties = []
    original = pooled_module.choose_variant
    monkeypatch.setattr(
        pooled_module,
        "choose_variant",
        lambda scores, metric, preference, losses: (
            ties.append(losses is not None) or original(scores, metric, preference, losses)
        ),
    )
    reg = PooledForestRegressor(forest, strategy="auto", auto_candidates=["fpv", "mp"])
    reg.fit(Xm, y, in_bag=bag)
    PooledForestRegressor(forest, strategy="auto", auto_candidates=["fpv", "mp"]).fit(Xm, y)
    assert ties == [False, True]  # out of bag the lowest wins; held out, ties count
    for name in ("fpv", "mp"):
        oob = reg._predict_values(Xm, name, in_bag=bag)[0][:, 0]
        rmse = float(np.sqrt(np.mean((y[keep] - oob[keep]) ** 2)))
        assert reg.selection_scores_[name] == pytest.approx(rmse, abs=1e-12)
    assert reg.selection_scores_[reg.strategy_] == min(reg.selection_scores_.values())
    wmp = PooledForestRegressor(forest, strategy="wmp").fit(Xm, y, in_bag=bag)
    assert wmp.guess_weight_ in (0.0, 0.03, 0.1, 0.2, 0.3, 0.5, 1.0)


def test_fit_leaves_out_the_rows_without_an_out_of_bag_tree(site, caplog):
    X, y = site["lacking"], site["y"]
    matrix = site["bag"].forest.copy()
    matrix[:, :3] = True
    clf = classifier(site, "wmp", guess_weight="auto")
    with caplog.at_level("INFO"):
        clf.fit(X, y, in_bag=InBag(matrix))
    assert "3 of 240 rows have no out-of-bag tree" in caplog.text
    rows = np.arange(3, len(X))
    same = classifier(site, "wmp", guess_weight="auto")
    same.fit(X.iloc[rows], y[rows], in_bag=InBag(matrix[:, rows]))
    assert same.guess_weight_scores_ == clf.guess_weight_scores_
    with pytest.raises(ValueError, match="none of the 240 rows has an out-of-bag tree"):
        clf.fit(X, y, in_bag=InBag(np.ones_like(matrix)))


# ------------------------------------------------------------------ refusals
def test_in_bag_is_checked_where_it_enters(site):
    X, bag = site["lacking"], site["bag"]
    clf = classifier(site, "fpv")
    with pytest.raises(ValueError, match=r"must be a bool array .* got int64"):
        InBag(bag.forest.astype(np.int64))
    with pytest.raises(ValueError, match="must be 2-D"):
        InBag(bag.forest[0])
    with pytest.raises(TypeError, match="in_bag must be a fedforest InBag"):
        check_in_bag([[True]])
    with pytest.raises(ValueError, match=r"expected \(22, 100\): one row per tree"):
        clf.predict_proba(X.iloc[:100], in_bag=bag)
    with pytest.raises(ValueError, match=r"shape \(21, 240\), expected \(22, 240\)"):
        clf.predict_proba(X, in_bag=InBag(bag.forest[1:]))
    with pytest.raises(ValueError, match="in_bag has 240 rows, X 100 and y 100"):
        clf.fit(X.iloc[:100], site["y"][:100], in_bag=bag)
    with pytest.raises(ValueError, match="intersection matrix has 2 rows, the forest's 240"):
        InBag(bag.forest, np.zeros((3, 2), bool))


def test_the_intersection_strategy_needs_its_matrix(site):
    X = site["X"]
    inter = PooledForest.from_sklearn(
        RandomForestClassifier(n_estimators=4, random_state=0).fit(X[["a", "b"]], site["y"]),
        ["a", "b"],
        owner="s1",
    )
    clf = classifier(site, "intersection", intersection=inter)
    with pytest.raises(ValueError, match="in_bag has no matrix for the intersection forest"):
        clf.predict_proba(X, in_bag=site["bag"])
    both = InBag(site["bag"].forest, np.zeros((4, len(X)), bool))
    assert np.array_equal(clf.predict_proba(X, in_bag=both), clf.predict_proba(X))
