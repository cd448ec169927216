"""The time grid of a survival job: what a site sends, and the grid the server agrees."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest.errors import SchemaError
from fedforest.federation.time_grid import (
    MAX_GRID_POINTS,
    MIN_QUANTILE_EVENTS,
    QUANTILE_LEVELS,
    agree_time_grid,
    check_grid,
    round_times,
    site_time_quantiles,
)


def test_a_site_sends_rounded_deciles_of_its_event_times_and_none_of_them_exactly():
    rng = np.random.default_rng(0)
    time = rng.exponential(400.0, size=300)
    event = rng.random(300) < 0.6
    sent = site_time_quantiles(time, event, resolution=30)
    assert 2 <= len(sent) <= len(QUANTILE_LEVELS)
    assert sent == sorted(set(sent))
    assert all(t % 30 == 0 for t in sent)
    # no exact event time leaves the site (the times are continuous: none is a multiple of 30)
    assert not set(sent) & set(time[event].tolist())
    # censored rows do not move the quantiles: only the event times are read
    censored_moved = time.copy()
    censored_moved[~event] *= 10
    assert site_time_quantiles(censored_moved, event, resolution=30) == sent


def test_a_site_with_too_few_events_sends_nothing():
    time = np.arange(1.0, 101.0)
    event = np.zeros(100, bool)
    event[: MIN_QUANTILE_EVENTS - 1] = True
    assert site_time_quantiles(time, event) == []
    event[MIN_QUANTILE_EVENTS - 1] = True
    assert site_time_quantiles(time, event) != []
    # the site's min_leaf_rows raises the threshold
    assert site_time_quantiles(time, event, min_events=MIN_QUANTILE_EVENTS + 1) == []


def test_without_a_resolution_quantiles_keep_two_significant_digits():
    assert round_times([0.0, 1234.0, 0.01234]).tolist() == [0.0, 1200.0, 0.012]


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
def test_a_resolution_must_be_a_positive_number(bad):
    with pytest.raises(ValueError, match="resolution must be a finite number > 0"):
        site_time_quantiles([1.0] * 20, [True] * 20, resolution=bad)


def test_the_server_pools_the_sites_quantiles_into_one_increasing_grid():
    grid = agree_time_grid({"a": [30.0, 60.0, 90.0], "b": [60.0, 120.0], "c": []})
    assert grid.tolist() == [30.0, 60.0, 90.0, 120.0]
    many = {f"s{i}": [float(10 * i + j) for j in range(9)] for i in range(10)}
    thinned = agree_time_grid(many, grid_points=12)
    assert len(thinned) == 12 and np.all(np.diff(thinned) > 0)
    assert thinned[0] == 0.0 and thinned[-1] == 98.0  # the extremes are kept


def test_a_public_grid_wins_over_the_quantiles():
    assert agree_time_grid({"a": [1.0, 2.0]}, times=[0, 365, 730]).tolist() == [0, 365, 730]


def test_no_grid_can_be_agreed_from_sites_without_quantiles():
    with pytest.raises(SchemaError, match=r"sites that sent none.*\['a', 'b'\].*survival.times"):
        agree_time_grid({"a": [], "b": [], "c": [5.0]})


@pytest.mark.parametrize(
    "times, match",
    [
        ([1.0], "2 to"),
        (list(range(MAX_GRID_POINTS + 1)), "2 to"),
        ([0.0, -1.0], "finite times >= 0"),
        ([0.0, float("inf")], "finite times >= 0"),
        ([1.0, 1.0], "strictly increasing"),
        ("abc", "list of numbers"),
    ],
)
def test_a_grid_is_refused_unless_increasing_finite_and_non_negative(times, match):
    with pytest.raises(ValueError, match=match):
        check_grid(times)
