"""Site-side calibration: scikit-learn's maps kept as arrays, the prior shift, auto's choice."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.calibration import CalibratedClassifierCV
from sklearn.ensemble import RandomForestClassifier
from sklearn.frozen import FrozenEstimator
from sklearn.metrics import roc_auc_score

from fedforest import PooledForest, PooledForestClassifier
from fedforest.metrics import score
from fedforest.model.calibrator import ISOTONIC_TIE_BREAK, Calibrator
from fedforest.prediction.calibration import (
    _class_maps,
    _class_maps_by_wrapper,
    _Probabilities,
    check_calibration,
    fit_calibration,
    training_prior,
)


def _probabilities(n_classes: int, seed: int, rows: int = 300):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, rows)
    proba = rng.dirichlet(np.ones(n_classes), rows)
    proba[np.arange(rows), y] += 0.5  # informative, miscalibrated
    return proba / proba.sum(axis=1, keepdims=True), y


@pytest.mark.parametrize("method", ["sigmoid", "isotonic"])
@pytest.mark.parametrize("n_classes", [2, 3, 4])
def test_saved_maps_predict_what_scikit_learn_predicts(method, n_classes):
    proba, y = _probabilities(n_classes, seed=n_classes)
    classes = np.arange(n_classes)
    fit = fit_calibration(proba, y, classes, method)
    assert fit.calibrator.method == method
    reference = CalibratedClassifierCV(
        FrozenEstimator(_Probabilities(classes).fit()), method=method
    ).fit(proba, y)
    new, _ = _probabilities(n_classes, seed=100 + n_classes, rows=80)
    calibrator = fit.calibrator
    if method == "isotonic":  # scikit-learn's steps, kept within [1/(n+2), (n+1)/(n+2)]
        maps = reference.calibrated_classifiers_[0].calibrators
        steps = np.concatenate([m.y_thresholds_ for m in maps])
        margin = 1 / (len(y) + 2)
        assert np.array_equal(calibrator.params["y"], np.clip(steps, margin, 1 - margin))
        assert np.array_equal(
            calibrator.params["x"], np.concatenate([m.X_thresholds_ for m in maps])
        )
        calibrator = Calibrator("isotonic", classes, {**calibrator.params, "y": steps})
        # scikit-learn's map but for the tie-break, which moves no risk by more than its share
        tolerance = 4 * ISOTONIC_TIE_BREAK
    else:
        tolerance = 1e-12
    assert np.allclose(calibrator.transform(new), reference.predict_proba(new), atol=tolerance)
    again = Calibrator.from_payload(fit.calibrator.to_payload(), classes)
    assert np.array_equal(again.transform(new), fit.calibrator.transform(new))


def test_an_isotonic_map_keeps_the_trees_order_within_its_steps():
    proba, y = _probabilities(2, seed=11, rows=200)
    classes = np.arange(2)
    calibrator = fit_calibration(proba, y, classes, "isotonic").calibrator
    new, y_new = _probabilities(2, seed=12, rows=500)
    risk = new[:, 1]
    params = calibrator.params
    steps = np.interp(risk, params["x"], params["y"])
    assert len(np.unique(steps)) < len(risk) / 4  # the steps alone tie most rows
    out = calibrator.transform(new)[:, 1]
    tie_break = ISOTONIC_TIE_BREAK
    assert np.array_equal(out, (1 - tie_break) * steps + tie_break * risk)
    assert np.abs(out - steps).max() <= tie_break
    order = np.argsort(risk)
    assert np.all(np.diff(out[order]) > 0)  # strictly increasing: no two rows tied
    # the AUC is the trees' own (the steps alone lose some of it)
    assert roc_auc_score(y_new, out) == roc_auc_score(y_new, risk) > roc_auc_score(y_new, steps)


@pytest.mark.parametrize("method", ["sigmoid", "isotonic"])
@pytest.mark.parametrize("n_classes", [2, 3, 4])
def test_the_maps_are_the_ones_calibrated_classifier_cv_fits_bit_for_bit(method, n_classes):
    proba, y = _probabilities(n_classes, seed=7 * n_classes, rows=90)
    classes = np.arange(n_classes)
    direct = _class_maps(method, proba, y, classes)
    wrapped = _class_maps_by_wrapper(method, proba, y, classes)
    assert len(direct) == len(wrapped) == (1 if n_classes == 2 else n_classes)
    names = ("a_", "b_") if method == "sigmoid" else ("X_thresholds_", "y_thresholds_")
    for mine, theirs in zip(direct, wrapped, strict=True):
        for name in names:
            assert np.array_equal(getattr(mine, name), getattr(theirs, name)), name


def test_prior_shift_is_bayes_rule_on_the_class_priors():
    proba = np.array([[0.5, 0.5], [0.8, 0.2], [0.1, 0.9]])
    y = np.array([1] * 7 + [0] * 1)
    fit = fit_calibration(np.tile(proba[:1], (8, 1)), y, [0, 1], "prior", np.array([0.5, 0.5]))
    site = np.array([1 + 1, 7 + 1]) / (8 + 2)  # one pseudo-row per class
    expected = proba * (site / 0.5)
    expected /= expected.sum(axis=1, keepdims=True)
    assert np.allclose(fit.calibrator.transform(proba), expected)
    # for two classes the order of the rows is kept: the AUC cannot change
    rng = np.random.default_rng(0)
    p = rng.random(200)
    y = (rng.random(200) < p).astype(int)
    shifted = fit.calibrator.transform(np.c_[1 - p, p])
    assert score("auc", y, shifted, [0, 1]) == score("auc", y, np.c_[1 - p, p], [0, 1])


def test_prior_brings_the_mean_risk_to_the_sites_prevalence():
    rng = np.random.default_rng(1)
    y = (rng.random(400) < 0.8).astype(int)  # this hospital: 80 % positive
    p = np.clip(0.3 + 0.25 * (y - 0.5) + rng.normal(0, 0.1, 400), 0.01, 0.99)
    proba = np.c_[1 - p, p]  # trees trained where 30 % were positive
    fit = fit_calibration(proba, y, [0, 1], "prior", np.array([0.7, 0.3]))
    calibrated = fit.calibrator.transform(proba)
    assert abs(calibrated[:, 1].mean() - 0.8) < abs(p.mean() - 0.8)
    assert score("brier", y, calibrated, [0, 1]) < score("brier", y, proba, [0, 1])


def test_auto_keeps_the_lowest_cross_fitted_log_loss_and_ties_go_to_the_simpler():
    proba, y = _probabilities(2, seed=3)
    fit = fit_calibration(proba, y, [0, 1], "auto", np.array([0.5, 0.5]), random_state=0)
    assert set(fit.log_losses) == {"none", "prior", "sigmoid", "isotonic"}
    chosen = fit.calibrator.method
    assert score("log_loss", y, fit.cross_fitted, [0, 1]) == pytest.approx(fit.log_losses[chosen])
    # the lowest wins unless a simpler method is within one standard error of it
    lowest = min(fit.log_losses, key=fit.log_losses.get)
    order = ["none", "prior", "sigmoid", "isotonic"]
    assert order.index(chosen) <= order.index(lowest)
    # already calibrated probabilities that every method leaves alone: none wins the tie
    perfect = np.eye(2)[y]
    tie = fit_calibration(perfect, y, [0, 1], "auto", None)
    assert tie.calibrator.method in ("none", "sigmoid", "isotonic")
    order = ["none", "prior", "sigmoid", "isotonic"]
    winners = [m for m in order if tie.log_losses.get(m) == min(tie.log_losses.values())]
    assert tie.calibrator.method == winners[0]


def test_cross_fitting_is_seeded():
    proba, y = _probabilities(3, seed=4)
    a = fit_calibration(proba, y, [0, 1, 2], "isotonic", random_state=5)
    b = fit_calibration(proba, y, [0, 1, 2], "isotonic", random_state=5)
    assert np.array_equal(a.cross_fitted, b.cross_fitted)


def test_methods_that_cannot_be_fitted_are_skipped_with_the_reason(caplog):
    proba, _ = _probabilities(2, seed=5, rows=20)
    y = np.array([0] * 19 + [1])  # one positive validation row
    fit = fit_calibration(proba, y, [0, 1], "auto", np.array([0.5, 0.5]))
    assert set(fit.skipped) == {"sigmoid", "isotonic"}
    assert "2 validation rows of every class" in fit.skipped["sigmoid"]
    assert "10 validation rows of every class" in fit.skipped["isotonic"]
    assert fit.calibrator.method in ("none", "prior")
    ten = np.array([0] * 10 + [1] * 9)  # isotonic needs 10 rows of every class
    assert (
        "10 validation rows" in fit_calibration(proba[:19], ten, [0, 1], "auto").skipped["isotonic"]
    )
    with caplog.at_level("WARNING"):
        alone = fit_calibration(proba, y, [0, 1], "isotonic")
    assert alone.calibrator.method == "none" and "isotonic is not fitted" in caplog.text
    assert fit_calibration(proba, y, [0, 1], "prior").skipped == {
        "prior": "the training prior of the trees is not known"
    }


def test_bad_names_and_payloads_are_refused():
    with pytest.raises(ValueError, match=r"calibration='platt' is not one of \['none', 'prior'"):
        check_calibration("platt")
    classes = np.array([0, 1])
    good = fit_calibration(*_probabilities(2, 6), classes, "isotonic").calibrator.to_payload()
    with pytest.raises(ValueError, match="calibrator.method is 'magic'"):
        Calibrator.from_payload({**good, "method": "magic"}, classes)
    bad = {**good, "params": {**good["params"], "y": good["params"]["y"][::-1] + 2}}
    with pytest.raises(ValueError, match="increasing|in \\[0, 1\\]"):
        Calibrator.from_payload(bad, classes)
    with pytest.raises(ValueError, match="a prior calibrator has \\['ratio'\\]"):
        Calibrator.from_payload({"method": "prior", "params": {}}, classes)
    with pytest.raises(ValueError, match="finite"):
        Calibrator.from_payload(
            {"method": "prior", "params": {"ratio": np.array([np.nan, 1.0])}}, classes
        )


def test_training_prior_is_the_mean_root_distribution():
    value = np.array([[0.2, 0.8], [1, 0], [0, 1], [0.6, 0.4], [1, 0], [0, 1]])
    roots = np.array([0, 3])
    assert np.allclose(training_prior(value, roots), [0.4, 0.6])
    assert np.allclose(training_prior(value, roots, np.array([3.0, 1.0])), [0.3, 0.7])


@pytest.fixture(scope="module")
def shifted_sites():
    """Two sites trained at 30 % prevalence; a third site with 75 %."""
    rng = np.random.default_rng(0)

    def table(n, prevalence):
        y = (rng.random(n) < prevalence).astype(int)
        X = pd.DataFrame(rng.normal(size=(n, 3)) + y[:, None] * 0.8, columns=["a", "b", "c"])
        return X, y

    forests = []
    for k in range(2):
        X, y = table(400, 0.3)
        rf = RandomForestClassifier(n_estimators=20, random_state=k, min_samples_leaf=3)
        forests.append(PooledForest.from_sklearn(rf.fit(X, y), ["a", "b", "c"], f"s{k}"))
    return PooledForest.concat(forests), table(300, 0.75), table(600, 0.75)


@pytest.mark.parametrize("method", ["prior", "sigmoid", "isotonic", "auto"])
def test_a_calibrated_classifier_lowers_the_brier_score_at_a_shifted_site(shifted_sites, method):
    forest, (X_val, y_val), (X_test, y_test) = shifted_sites
    raw = PooledForestClassifier(forest, strategy="mp", random_state=0)
    clf = PooledForestClassifier(forest, strategy="mp", calibration=method, random_state=0)
    clf.fit(X_val[["a", "b"]], y_val)
    before = raw.predict_proba(X_test[["a", "b"]])
    after = clf.predict_proba(X_test[["a", "b"]])
    assert clf.calibrator_.method == (method if method != "auto" else clf.calibrator_.method)
    assert score("brier", y_test, after, [0, 1]) < score("brier", y_test, before, [0, 1])
    assert np.allclose(after.sum(axis=1), 1.0)


def test_calibration_none_changes_nothing(shifted_sites):
    forest, (X_val, y_val), (X_test, _) = shifted_sites
    for strategy in ("fpv", "mp", "ipr", "node"):
        plain = PooledForestClassifier(forest, strategy=strategy, random_state=3)
        fitted = PooledForestClassifier(
            forest, strategy=strategy, calibration="none", random_state=3
        )
        fitted.fit(X_val[["a", "c"]], y_val)
        assert np.array_equal(
            plain.predict_proba(X_test[["a", "c"]]), fitted.predict_proba(X_test[["a", "c"]])
        )


def test_calibration_needs_validation_rows(shifted_sites):
    forest, _, (X_test, _) = shifted_sites
    clf = PooledForestClassifier(forest, strategy="mp", calibration="prior")
    with pytest.raises(ValueError, match="calibration='prior' is fitted in fit\\(X_val, y_val\\)"):
        clf.fit()
    with pytest.raises(ValueError, match="call fit first"):
        clf.predict_proba(X_test)


def test_auto_scores_calibrated_candidates_and_names_the_runner_up(shifted_sites):
    forest, (X_val, y_val), (X_test, y_test) = shifted_sites
    clf = PooledForestClassifier(
        forest, strategy="auto", calibration="auto", random_state=0, auto_metric="brier"
    )
    clf.fit(X_val[["a", "b"]], y_val)
    scores = clf.selection_scores_
    lowest = min(scores, key=scores.get)
    assert clf.strategy_ == lowest or scores[clf.strategy_] - scores[lowest] < 0.05
    assert clf.runner_up_ in scores and clf.runner_up_ != clf.strategy_
    assert set(clf.candidate_calibrations_) == set(scores)
    # the deployed prediction is the chosen strategy, calibrated by the chosen calibrator
    alone = PooledForestClassifier(forest, strategy=clf.strategy_, random_state=0)
    expected = clf.calibrator_.transform(alone.predict_proba(X_test[["a", "b"]]))
    assert np.array_equal(clf.predict_proba(X_test[["a", "b"]]), expected)


def test_a_sigmoid_that_would_reverse_the_risks_is_not_used():
    rng = np.random.default_rng(7)
    p = rng.random(60)
    y = (p < 0.5).astype(int)  # validation rows where a higher risk means fewer events
    fit = fit_calibration(np.c_[1 - p, p], y, [0, 1], "auto", np.array([0.5, 0.5]))
    assert fit.skipped["sigmoid"] == "the fitted map would reverse the order of the risks"
    assert fit.calibrator.method != "sigmoid"


def test_candidates_within_one_standard_error_tie_and_the_preferred_wins():
    from fedforest.prediction.calibration import choose_variant

    rng = np.random.default_rng(0)
    base = rng.random(40)
    losses = {"mp": base + 0.01, "fpv": base, "local": base + 0.5}
    scores = {k: float(v.mean()) for k, v in losses.items()}
    # fpv is lower by 0.01 on every row: a consistent difference, no tie
    assert choose_variant(scores, "brier", ["mp", "fpv", "local"], losses) == ("fpv", "mp")
    # mp is higher by 0.02 on average, but by +0.32 and -0.28 row by row: within noise
    noisy = {"mp": base + np.tile([0.32, -0.28], 20), "fpv": base}
    noisy_scores = {k: float(v.mean()) for k, v in noisy.items()}
    assert noisy_scores["mp"] > noisy_scores["fpv"]
    assert choose_variant(noisy_scores, "brier", ["mp", "fpv"], noisy) == ("mp", "fpv")
    # without per-row losses (auprc): the best score wins, ties by preference
    assert choose_variant({"mp": 0.8, "fpv": 0.8}, "auprc", ["fpv", "mp"]) == ("fpv", "mp")


def test_an_isotonic_step_never_claims_certainty():
    rng = np.random.default_rng(8)
    p = rng.random(100)
    y = (p > 0.5).astype(int)  # perfectly separated validation rows
    fit = fit_calibration(np.c_[1 - p, p], y, [0, 1], "isotonic")
    out = fit.calibrator.transform(np.c_[1 - p, p])
    assert out.min() >= 1 / 102 - 1e-12 and out.max() <= 101 / 102 + 1e-12
