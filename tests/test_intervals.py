"""Bootstrap intervals, event counts, small-sample warnings and Wilson intervals
(fedforest.intervals), checked against scikit-learn's metrics and scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest
from sklearn.metrics import (
    average_precision_score,
    brier_score_loss,
    mean_absolute_error,
    mean_squared_error,
    roc_auc_score,
)

from fedforest.intervals import (
    BOOTSTRAP_RESAMPLES,
    MIN_EVENTS,
    MIN_TEST_ROWS,
    _resampled_scores,
    bootstrap_intervals,
    bootstrap_weights,
    check_interval,
    event_count,
    sample_warning,
    wilson_interval,
)
from fedforest.metrics import score_all


def binary(n: int, seed: int = 0, ties: bool = False):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    p = np.clip(0.35 + 0.3 * y + rng.normal(0, 0.25, n), 0, 1)
    if ties:
        p = np.round(p, 1)  # many tied scores, as a forest's few distinct probabilities
    return y, np.c_[1 - p, p]


def counts(seed: int, n: int, resamples: int) -> np.ndarray:
    return np.vstack(list(bootstrap_weights(n, resamples, random_state=seed)))


@pytest.mark.parametrize("ties", [False, True])
def test_each_resamples_scores_are_scikit_learns_with_the_counts_as_weights(ties):
    y, proba = binary(80, seed=1, ties=ties)
    w = counts(3, 80, 40)
    got = _resampled_scores(w, y, proba, np.array([0, 1]), ("auc", "auprc", "brier"))
    for b in range(40):
        assert got["auc"][b] == pytest.approx(roc_auc_score(y, proba[:, 1], sample_weight=w[b]))
        assert got["auprc"][b] == pytest.approx(
            average_precision_score(y, proba[:, 1], sample_weight=w[b])
        )
        assert got["brier"][b] == pytest.approx(
            brier_score_loss(y, proba[:, 1], sample_weight=w[b])
        )
        # and the resample itself, its rows drawn as often as counted
        idx = np.repeat(np.arange(80), w[b].astype(int))
        assert got["auc"][b] == pytest.approx(roc_auc_score(y[idx], proba[idx, 1]))


def test_three_classes_are_scored_as_score_does_on_each_resample():
    rng = np.random.default_rng(4)
    y = rng.integers(0, 3, 90)
    proba = rng.dirichlet(np.ones(3), 90)
    proba[np.arange(90), y] += 0.5
    proba /= proba.sum(axis=1, keepdims=True)
    w = counts(5, 90, 20)
    got = _resampled_scores(w, y, proba, np.array([0, 1, 2]), ("auc", "auprc", "brier"))
    for b in range(20):
        idx = np.repeat(np.arange(90), w[b].astype(int))
        want = score_all(y[idx], proba[idx], [0, 1, 2], ("auc", "auprc", "brier"))
        for m in ("auc", "auprc", "brier"):
            assert got[m][b] == pytest.approx(want[m]), m


def test_the_interval_is_the_percentile_interval_of_the_resamples():
    y, proba = binary(60, seed=2)
    ci = bootstrap_intervals(y, proba, [0, 1], ["auc", "brier"], resamples=200, random_state=7)
    w = counts(7, 60, 200)
    aucs = [roc_auc_score(y, proba[:, 1], sample_weight=row) for row in w]
    assert ci["auc"] == pytest.approx(list(np.quantile(aucs, [0.025, 0.975])))
    assert set(ci) == {"auc", "brier"}  # only the asked metrics


def test_the_same_seed_gives_the_same_intervals_and_another_seed_others():
    y, proba = binary(100, seed=3)
    a = bootstrap_intervals(y, proba, [0, 1], random_state=11)
    assert a == bootstrap_intervals(y, proba, [0, 1], random_state=11)
    assert a != bootstrap_intervals(y, proba, [0, 1], random_state=12)
    assert BOOTSTRAP_RESAMPLES == 1000 and set(a) == {"auc", "auprc", "brier"}
    for m, (lo, hi) in a.items():
        assert 0 <= lo < hi <= 1, m


def test_resamples_in_blocks_are_the_resamples_drawn_at_once(monkeypatch):
    import fedforest.intervals as intervals

    y, proba = binary(50, seed=6)
    whole = bootstrap_intervals(y, proba, [0, 1], resamples=300, random_state=1)
    monkeypatch.setattr(intervals, "_BLOCK_CELLS", 50 * 7)  # blocks of 7 resamples
    blocks = bootstrap_intervals(y, proba, [0, 1], resamples=300, random_state=1)
    for m in whole:  # another draw order, the same distribution: close, not equal
        assert blocks[m] == pytest.approx(whole[m], abs=0.08)
    assert sum(len(b) for b in bootstrap_weights(50, 300, 1)) == 300


def test_fewer_rows_give_wider_intervals():
    y, proba = binary(400, seed=8)
    wide = bootstrap_intervals(y[:30], proba[:30], [0, 1], random_state=0)
    narrow = bootstrap_intervals(y, proba, [0, 1], random_state=0)
    for m in ("auc", "auprc", "brier"):
        assert wide[m][1] - wide[m][0] > 1.5 * (narrow[m][1] - narrow[m][0]), m


def test_too_few_events_give_no_interval_and_a_perfect_score_a_warning():
    y = np.array([0] * 13 + [1] * 2)
    p = np.r_[np.linspace(0.1, 0.4, 13), [0.8, 0.9]]
    proba = np.c_[1 - p, p]
    points = score_all(y, proba, [0, 1], ("auc", "auprc", "brier"))
    ci = bootstrap_intervals(y, proba, [0, 1], points=points, random_state=0)
    # 2 events in 15 rows: (13/15)^15 = 12% of the resamples draw no event, more than 10%
    assert ci["auc"] is None and ci["auprc"] is None
    assert ci["brier"][0] <= points["brier"] <= ci["brier"][1]
    # 3 events: every resample that has one ranks perfectly, so the interval is [1, 1];
    # the bootstrap cannot show that uncertainty, the warning says it
    y3, p3 = np.r_[y, 1], np.r_[p, 0.95]
    points = score_all(y3, np.c_[1 - p3, p3], [0, 1], ("auc", "auprc"))
    ci = bootstrap_intervals(y3, np.c_[1 - p3, p3], [0, 1], points=points, random_state=0)
    assert points["auprc"] == 1.0 and ci["auprc"] == [1.0, 1.0]
    assert "a perfect score can be luck" in sample_warning(16, event_count(y3, [0, 1]))


def test_an_undefined_point_has_no_interval():
    y, proba = binary(40)
    ci = bootstrap_intervals(y, proba, [0, 1], points={"auc": None, "auprc": 0.7, "brier": 0.2})
    assert ci["auc"] is None and ci["auprc"] is not None


def test_regression_intervals_of_rmse_and_mae():
    rng = np.random.default_rng(9)
    y = rng.normal(5, 2, 120)
    pred = y + rng.normal(0, 1, 120)
    ci = bootstrap_intervals(y, predicted=pred, metrics=("rmse", "mae", "r2"), random_state=0)
    assert set(ci) == {"rmse", "mae"}  # r2 gets none
    rmse, mae = np.sqrt(mean_squared_error(y, pred)), mean_absolute_error(y, pred)
    assert ci["rmse"][0] < rmse < ci["rmse"][1] and ci["mae"][0] < mae < ci["mae"][1]
    w = counts(0, 120, 1000)
    maes = [mean_absolute_error(y, pred, sample_weight=row) for row in w]
    assert ci["mae"] == pytest.approx(list(np.quantile(maes, [0.025, 0.975])))


def test_event_count():
    assert event_count([0, 1, 1, 0], [0, 1]) == 2
    assert event_count(["no", "yes", "no"], ["no", "yes"]) == 1
    assert event_count([0, 1, 2, 2, 1, 1], [0, 1, 2]) == 1  # the rarest class present
    assert event_count([0, 0, 2], [0, 1, 2]) == 1  # an absent class is not the rarest
    assert event_count([1.5, 2.0], None) is None  # regression


@pytest.mark.parametrize(
    ("rows", "events", "warned"),
    [
        (MIN_TEST_ROWS - 1, 30, True),
        (MIN_TEST_ROWS, 30, False),
        (400, MIN_EVENTS - 1, True),
        (400, MIN_EVENTS, False),
        (15, 3, True),
        (0, 0, True),
        (30, None, True),  # regression, or events not known: the rows alone
        (MIN_TEST_ROWS, None, False),
        (None, None, False),
    ],
)
def test_sample_warnings_below_50_rows_or_10_events(rows, events, warned):
    text = sample_warning(rows, events)
    assert (text is not None) == warned
    if warned:
        assert text.startswith("unreliable metrics: ") and f"{rows} test rows" in text
        if rows < MIN_TEST_ROWS:
            assert "fewer than 50" in text
        if events is not None and events < MIN_EVENTS:
            assert f"{events} events (fewer than 10)" in text


@pytest.mark.parametrize(
    ("metric", "point", "interval", "problem"),
    [
        ("auc", 0.8, [0.7, 0.9], None),
        ("auc", 0.8, None, None),
        ("auc", 0.8, [0.8, 0.8], None),
        ("auc", 0.8, [0.85, 0.9], "low <= 0.8 <= high"),
        ("auc", 0.8, [0.6, 0.75], "low <= 0.8 <= high"),
        ("auc", 0.8, [0.9, 0.7], "low <= high"),
        ("auprc", 0.9, [0.8, 1.2], "within [0, 1]"),
        ("brier", 0.1, [-0.1, 0.2], "within [0, 2]"),
        ("auc", 0.8, [float("nan"), 0.9], "two finite numbers"),
        ("auc", 0.8, [0.7, float("inf")], "two finite numbers"),
        ("auc", 0.8, [0.7], "two finite numbers"),
        ("auc", 0.8, [0.7, 0.8, 0.9], "two finite numbers"),
        ("auc", 0.8, "0.7-0.9", "two finite numbers"),
        ("auc", 0.8, [True, 0.9], "two finite numbers"),
        ("auc", None, [0.7, 0.9], "undefined (null)"),
        ("rmse", 3.0, [2.0, 4.0], None),
        ("rmse", 3.0, [-1.0, 4.0], "within [0,"),
    ],
)
def test_check_interval(metric, point, interval, problem):
    got = check_interval(metric, point, interval)
    if problem is None:
        assert got is None
    else:
        assert problem in got


@pytest.mark.parametrize(("hits", "rows"), [(0, 10), (3, 10), (10, 10), (1, 1), (47, 120)])
def test_wilson_intervals_are_scipys_and_hold_the_share(hits, rows):
    lo, hi = wilson_interval(hits, rows)
    ci = binomtest(hits, rows).proportion_ci(method="wilson")
    assert (lo, hi) == pytest.approx((ci.low, ci.high))
    assert 0 <= lo <= hits / rows <= hi <= 1
    z = 1.959963984540054  # the score interval by its formula
    centre = (hits / rows + z**2 / (2 * rows)) / (1 + z**2 / rows)
    half = (
        z / (1 + z**2 / rows) * np.sqrt(hits / rows * (1 - hits / rows) / rows + z**2 / 4 / rows**2)
    )
    assert (lo, hi) == pytest.approx((centre - half, centre + half))
    with pytest.raises(ValueError, match="at least one row"):
        wilson_interval(0, 0)
