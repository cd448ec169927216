"""Survival targets and metrics: scikit-survival's, on the grid points the rows cover."""

from __future__ import annotations

import numpy as np
import pytest
from sksurv.metrics import (
    concordance_index_censored,
    concordance_index_ipcw,
    integrated_brier_score,
)

from fedforest.survival_metrics import (
    brier_losses,
    check_survival_target,
    curves_at,
    horizon_calibration,
    risk_groups,
    score_all_survival,
    score_survival,
    survival_target,
    usable_times,
)
from fedforest.vocabulary import LOWER_IS_BETTER, SURVIVAL_METRICS


@pytest.fixture(scope="module")
def rows():
    rng = np.random.default_rng(1)
    n = 200
    risk = rng.normal(size=n)
    time = rng.exponential(np.exp(-risk))
    censor = rng.exponential(1.5, size=n)
    y = survival_target(np.minimum(time, censor), time <= censor)
    grid = np.quantile(y["time"], np.linspace(0.02, 0.98, 25))
    # survival curves of an exponential model that knows the risk
    survival = np.exp(-np.exp(risk)[:, None] * grid[None, :])
    return y, risk, survival, grid


def test_targets_are_validated():
    y = survival_target([1.0, 2.0], [True, 0])
    assert y.dtype.names == ("event", "time") and y["event"].tolist() == [True, False]
    with pytest.raises(ValueError, match="0/1 or booleans"):
        survival_target([1.0], [2])
    with pytest.raises(ValueError, match="finite and at least 0"):
        survival_target([-1.0], [1])
    with pytest.raises(ValueError, match="finite and at least 0"):
        survival_target([np.nan], [1])
    with pytest.raises(ValueError, match="2 rows but event has 1"):
        survival_target([1.0, 2.0], [1])
    with pytest.raises(ValueError, match="y must be a survival target"):
        check_survival_target(np.array([1.0, 2.0]))


def test_the_integrated_brier_score_is_scikit_survivals(rows):
    y, _, survival, grid = rows
    train, test = y[:120], y[120:]
    times = usable_times(grid, test, train)
    keep = np.isin(grid, times)
    losses = brier_losses(test, survival[120:], grid, train)
    assert losses.shape == (80,) and (losses >= 0).all()
    expected = integrated_brier_score(train, test, survival[120:, keep], times)
    assert np.mean(losses) == pytest.approx(expected, rel=1e-12)
    assert score_survival("ibs", test, survival=survival[120:], grid=grid, y_ref=train) == (
        pytest.approx(expected, rel=1e-12)
    )


def test_the_concordance_indices_are_scikit_survivals(rows):
    y, risk, _, grid = rows
    harrell = concordance_index_censored(y["event"], y["time"], risk)[0]
    assert score_survival("cindex", y, risk=risk) == harrell
    times = usable_times(grid, y)
    uno = concordance_index_ipcw(y, y, risk, tau=times[-1])[0]
    assert score_survival("uno_cindex", y, risk=risk, grid=grid) == uno
    scores = score_all_survival(y, risk, np.exp(-np.exp(risk)[:, None] * grid), grid)
    assert set(scores) == set(SURVIVAL_METRICS) and "ibs" in LOWER_IS_BETTER
    assert 0.6 < scores["td_auc"] <= 1 and 0.6 < scores["cindex"] <= 1


def test_metrics_the_rows_cannot_give_are_nan(rows):
    y, risk, survival, grid = rows
    censored = survival_target(y["time"][:10], np.zeros(10))
    assert np.isnan(score_survival("cindex", censored, risk=risk[:10]))
    # a grid outside the rows' follow-up: no usable point
    assert np.isnan(score_survival("ibs", y, survival=survival, grid=grid + 100.0))
    with pytest.raises(ValueError, match="at least two time points"):
        brier_losses(y, survival, grid + 100.0)
    with pytest.raises(ValueError, match="is not one of"):
        score_survival("auc", y, risk=risk)


def test_curves_are_read_as_steps():
    curves = np.array([[0.9, 0.5], [0.8, 0.2]])
    got = curves_at(curves, np.array([1.0, 2.0]), [0.0, 1.0, 1.9, 2.0, 9.0], 1.0)
    assert got.tolist() == [[1.0, 0.9, 0.9, 0.5, 0.5], [1.0, 0.8, 0.8, 0.2, 0.2]]


def test_risk_groups_set_each_groups_prediction_beside_its_kaplan_meier(rows):
    from sksurv.nonparametric import kaplan_meier_estimator

    y, risk, survival, grid = rows
    groups = risk_groups(y, risk, survival, grid, n_groups=4)
    assert [g["rows"] for g in groups] == [50, 50, 50, 50]
    assert groups[0]["risk"][1] <= groups[1]["risk"][0]  # lowest risk first
    order = np.argsort(risk, kind="stable")[:50]
    km_t, km_s = kaplan_meier_estimator(y["event"][order], y["time"][order])
    at = np.searchsorted(km_t, grid, side="right") - 1
    expected = np.where(at < 0, 1.0, km_s[np.maximum(at, 0)])
    np.testing.assert_allclose(groups[0]["observed"], expected)
    np.testing.assert_allclose(groups[0]["predicted"], survival[order].mean(axis=0))
    # the model knows the risk: the low-risk group survives longer, predicted and observed
    assert groups[0]["observed"][-1] > groups[-1]["observed"][-1]
    assert groups[0]["predicted"][-1] > groups[-1]["predicted"][-1]
    with pytest.raises(ValueError, match="n_groups=0"):
        risk_groups(y, risk, survival, grid, n_groups=0)


def test_calibration_at_a_horizon_compares_bins_with_kaplan_meier(rows):
    y, _, survival, grid = rows
    horizon = float(np.median(y["time"]))
    out = horizon_calibration(y, survival, grid, horizon, n_bins=5)
    assert out["rows"] == [40] * 5 and out["horizon"] == horizon
    assert out["predicted"] == sorted(out["predicted"])
    # the generating model is calibrated: every bin within sampling error of Kaplan-Meier
    assert out["ici"] < 0.12
    assert all(0 <= v <= 1 for v in out["observed"])
    overconfident = horizon_calibration(y, survival**0.2, grid, horizon, n_bins=5)
    assert overconfident["ici"] > out["ici"]


def test_rows_followed_beyond_the_reference_keep_their_brier_score(rows):
    y, _, survival, grid = rows
    order = np.argsort(y["time"])
    train, test = y[order[:150]], y[order[100:]]  # the test rows outlive the training rows
    value = score_survival("ibs", test, survival=survival[order[100:]], grid=grid, y_ref=train)
    assert np.isfinite(value) and 0 <= value < 1


def test_auc_at_one_horizon_is_scikit_survivals_and_undefined_outside_the_follow_up():
    from sksurv.metrics import cumulative_dynamic_auc

    from fedforest.survival_metrics import auc_at

    rng = np.random.default_rng(3)
    time = rng.exponential(10, size=300)
    event = rng.random(300) < 0.7
    risk = -time + rng.normal(scale=5, size=300)
    y, ref = survival_target(time[:150], event[:150]), survival_target(time[150:], event[150:])
    for horizon in (2.0, 5.0, 10.0):
        expected = cumulative_dynamic_auc(ref, y, risk[:150], [horizon])[0][0]
        assert auc_at(y, risk[:150], horizon, y_ref=ref) == pytest.approx(expected, abs=1e-12)
    assert np.isnan(auc_at(y, risk[:150], 1e6, y_ref=ref))  # beyond every row's follow-up
    assert np.isnan(auc_at(y, risk[:150], 0.0, y_ref=ref))  # no case yet
