"""The time grid a survival forest's leaf curves are evaluated on.

Every site's random survival forest carries, in each leaf, its cumulative
hazard and survival function at the same times (``PooledForest.times``), so
the sites' leaves can be averaged. :func:`event_time_grid` is the one rule
that builds that grid: quantiles of the event times at evenly spaced levels,
from the first to the last event, with repeated values dropped. A quantile
is an interpolated value, not a patient's event time, and a few dozen of
them describe only the shape of the event-time distribution.

Examples
--------
>>> grid = event_time_grid([5.0, 1.0, 3.0, 9.0, 7.0], [1, 1, 0, 1, 1], n_points=3)
>>> grid.tolist()
[1.0, 6.0, 9.0]
"""

from __future__ import annotations

import numpy as np

#: Points of the grid when none is asked for: coarse enough to say little of any one patient,
#: fine enough for the integrated Brier score.
DEFAULT_GRID_POINTS = 30


def event_time_grid(time, event, n_points: int = DEFAULT_GRID_POINTS) -> np.ndarray:
    """The time grid of a survival job: quantiles of the event times.

    Parameters
    ----------
    time : array-like of float, shape (n,)
        Follow-up times, finite and >= 0.
    event : array-like of bool or 0/1, shape (n,)
        Whether each row's time is an event (``True``) or a censoring.
    n_points : int
        Quantile levels ``0, 1/(n_points-1), ..., 1`` of the event times
        (linear interpolation); at least 2.

    Returns
    -------
    numpy.ndarray
        The strictly increasing grid (float64), at most ``n_points`` long (tied
        quantiles are kept once), from the first to the last event time.

    Raises
    ------
    ValueError
        If the lengths differ, a time is negative or not finite, an event is
        not 0/1, there is no event, or ``n_points`` is below 2.

    Examples
    --------
    >>> event_time_grid([2.0, 2.0, 4.0], [True, True, False]).tolist()
    [2.0]
    """
    if isinstance(n_points, bool) or not isinstance(n_points, (int, np.integer)) or n_points < 2:
        raise ValueError(f"n_points={n_points!r} must be an integer >= 2")
    time = np.asarray(time, dtype=float)
    event = np.asarray(event)
    if time.ndim != 1 or time.shape != event.shape:
        raise ValueError(
            f"time and event must be one-dimensional and of one length, got shapes "
            f"{time.shape} and {event.shape}"
        )
    if not np.isfinite(time).all() or (time < 0).any():
        bad = time[~(np.isfinite(time) & (time >= 0))][0]
        raise ValueError(f"times must be finite and >= 0; found {bad:g}")
    if event.dtype != bool:
        if not np.isin(event, (0, 1)).all():
            raise ValueError(
                f"events must be 0/1 or booleans; found {event[~np.isin(event, (0, 1))][0]}"
            )
        event = event.astype(bool)
    if not event.any():
        raise ValueError(f"no event among {len(time)} rows: a time grid needs event times")
    levels = np.linspace(0.0, 1.0, int(n_points))
    return np.unique(np.quantile(time[event], levels))
