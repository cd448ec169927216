"""The survival time grid: quantiles of the event times, strictly increasing."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest.model.time_grid import DEFAULT_GRID_POINTS, event_time_grid


def test_the_grid_spans_the_event_times_and_increases():
    rng = np.random.default_rng(0)
    time = rng.exponential(100.0, size=400)
    event = rng.random(400) < 0.6
    grid = event_time_grid(time, event)
    assert len(grid) == DEFAULT_GRID_POINTS
    assert np.all(np.diff(grid) > 0)
    assert grid[0] == time[event].min() and grid[-1] == time[event].max()


def test_censored_times_do_not_move_the_grid():
    time = np.array([1.0, 2.0, 3.0, 4.0, 50.0])
    with_late_censoring = event_time_grid(time, [1, 1, 1, 1, 0], n_points=4)
    assert with_late_censoring.tolist() == [1.0, 2.0, 3.0, 4.0]


def test_tied_quantiles_are_kept_once():
    assert event_time_grid([3.0] * 9 + [8.0], [True] * 10, n_points=3).tolist() == [3.0, 8.0]


@pytest.mark.parametrize(
    ("time", "event", "n_points", "message"),
    [
        ([1.0, -2.0], [1, 1], 5, "finite and >= 0; found -2"),
        ([1.0, np.inf], [1, 1], 5, "finite and >= 0; found inf"),
        ([1.0, 2.0], [1, 2], 5, "0/1 or booleans; found 2"),
        ([1.0, 2.0], [0, 0], 5, "no event among 2 rows"),
        ([1.0, 2.0], [1], 5, "one length"),
        ([1.0, 2.0], [1, 1], 1, "n_points=1 must be an integer >= 2"),
    ],
)
def test_a_bad_input_is_refused_by_name(time, event, n_points, message):
    with pytest.raises(ValueError, match=message):
        event_time_grid(time, event, n_points=n_points)
