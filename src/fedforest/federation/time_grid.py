"""The time grid of a survival job: one grid every site's survival curves are read on.

A random survival forest's leaf holds a step function over the event times
of its rows; pooling trees from several hospitals needs every leaf evaluated
on one grid of times, agreed before any site trains. Exact event times
identify patients, so no site sends one. The rule:

* **at each site** (:func:`site_time_quantiles`, in the schema phase): the
  quantiles :data:`QUANTILE_LEVELS` (the deciles) of the event times of its
  rows, rounded to the site's ``time_resolution`` (its site YAML; ``null``:
  :data:`DEFAULT_DIGITS` significant digits), and only when the site has at
  least ``min_events`` events (its ``privacy.min_leaf_rows``, at least
  :data:`MIN_QUANTILE_EVENTS`): a site with fewer sends no quantile. A
  quantile interpolates between order statistics and is rounded, so it names
  no patient's time; each decile has a tenth of the site's events on either
  side of it.
* **at the server** (:func:`agree_time_grid`): the pooled quantiles of every
  site, at most ``grid_points`` of them (evenly spaced order statistics of
  the pooled values when there are more), sorted and distinct. A job may
  give a public grid instead (``survival.times`` in ``job.yaml``): the sites
  then send no quantile at all.

The server broadcasts the grid with the global schema (field ``times``), and
every site converts its forest's step functions on it
(``PooledForest.from_sksurv(..., times=grid)``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import SchemaError

#: The quantile levels of its event times a site sends (the deciles).
QUANTILE_LEVELS = tuple(round(i / 10, 1) for i in range(1, 10))
#: Significant digits of a quantile when the site sets no ``time_resolution``.
DEFAULT_DIGITS = 2
#: The fewest events a site needs before it sends any quantile (besides its
#: ``privacy.min_leaf_rows``): with fewer, a decile sits next to one patient's time.
MIN_QUANTILE_EVENTS = 10
#: The most points of a grid (the leaf values of a survival tree are ``2 * points`` wide).
MAX_GRID_POINTS = 200
#: The most horizons a survival job reports its time-dependent AUC and calibration at
#: (``survival.horizons``).
MAX_HORIZONS = 10
#: Points of an agreed grid when the job sets none (``survival.grid_points``).
DEFAULT_GRID_POINTS = 30


def round_times(values, resolution: float | None = None) -> np.ndarray:
    """Round times to multiples of ``resolution`` (``None``: :data:`DEFAULT_DIGITS`
    significant digits).

    Examples
    --------
    >>> round_times([12.3, 187.0, 1543.0]).tolist()
    [12.0, 190.0, 1500.0]
    >>> round_times([12.3, 187.0], resolution=30).tolist()
    [0.0, 180.0]
    """
    v = np.asarray(values, dtype=np.float64)
    if resolution is not None:
        return np.round(v / resolution) * resolution
    out = np.zeros_like(v)
    nonzero = v != 0
    mag = np.floor(np.log10(np.abs(v[nonzero])))
    scale = 10.0 ** (DEFAULT_DIGITS - 1 - mag)
    out[nonzero] = np.round(v[nonzero] * scale) / scale
    return out


def site_time_quantiles(
    time,
    event,
    *,
    resolution: float | None = None,
    min_events: int = MIN_QUANTILE_EVENTS,
) -> list[float]:
    """The coarse quantiles of a site's event times that it sends in the schema phase.

    Parameters
    ----------
    time : array-like of float
        Every row's follow-up time (non-negative, finite).
    event : array-like of bool
        Whether the row's time is an event (``True``) or a censoring.
    resolution : float, optional
        The site's ``time_resolution``: quantiles are rounded to its
        multiples (``None``: :data:`DEFAULT_DIGITS` significant digits).
    min_events : int
        The fewest events for the site to send anything (at least
        :data:`MIN_QUANTILE_EVENTS` apply whatever this says).

    Returns
    -------
    list of float
        The distinct rounded quantiles :data:`QUANTILE_LEVELS` of the event
        times, ascending; empty when the site has too few events.

    Examples
    --------
    >>> t = np.arange(1.0, 41.0) * 10
    >>> site_time_quantiles(t, np.ones(40, bool), resolution=50)
    [50.0, 100.0, 150.0, 200.0, 250.0, 300.0, 350.0]
    >>> site_time_quantiles(t[:5], np.ones(5, bool))
    []
    """
    t = np.asarray(time, dtype=np.float64)
    e = np.asarray(event, dtype=bool)
    if t.shape != e.shape or t.ndim != 1:
        raise ValueError(f"time and event must be 1-d of one length, got {t.shape}, {e.shape}")
    if resolution is not None and not (math.isfinite(resolution) and resolution > 0):
        raise ValueError(f"resolution must be a finite number > 0, got {resolution!r}")
    events = t[e]
    if events.size < max(int(min_events), MIN_QUANTILE_EVENTS):
        return []
    q = np.quantile(events, QUANTILE_LEVELS)
    rounded = np.unique(round_times(q, resolution))
    return [float(x) for x in rounded if x >= 0]


def check_grid(
    times, where: str = "time grid", min_points: int = 2, max_points: int = MAX_GRID_POINTS
) -> np.ndarray:
    """A time grid as float64, refused unless strictly increasing, finite and >= 0, with
    ``min_points`` to ``max_points`` points (2 to :data:`MAX_GRID_POINTS`; a job's
    ``survival.horizons``: 1 to :data:`MAX_HORIZONS`).

    Examples
    --------
    >>> check_grid([0, 30, 60]).tolist()
    [0.0, 30.0, 60.0]
    >>> check_grid([30, 30])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: time grid must be strictly increasing, ...
    """
    try:
        t = np.asarray(times, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{where} must be a list of numbers, got {times!r}") from None
    if t.ndim != 1 or not min_points <= t.size <= max_points:
        raise ValueError(
            f"{where} must be a list of {min_points} to {max_points} times, got {np.size(t)} "
            "value(s)"
        )
    if not np.isfinite(t).all() or (t < 0).any():
        raise ValueError(f"{where} must hold finite times >= 0, got {t.tolist()}")
    if (np.diff(t) <= 0).any():
        raise ValueError(f"{where} must be strictly increasing, got {t.tolist()}")
    return t


def agree_time_grid(
    quantiles: Mapping[str, Sequence[float]],
    *,
    grid_points: int = DEFAULT_GRID_POINTS,
    times: Sequence[float] | None = None,
) -> np.ndarray:
    """The job's time grid, from the sites' coarse quantiles or a public grid.

    Parameters
    ----------
    quantiles : mapping of str to list of float
        Each site's :func:`site_time_quantiles` (empty: the site sent none).
    grid_points : int
        The most points of an agreed grid: with more distinct pooled
        quantiles, the grid takes ``grid_points`` evenly spaced order
        statistics of them.
    times : sequence of float, optional
        A public grid (``survival.times`` in ``job.yaml``): returned as it is
        (checked), and the quantiles are not used.

    Returns
    -------
    ndarray of float64
        Strictly increasing, finite and >= 0 (:func:`check_grid`).

    Raises
    ------
    SchemaError
        When no public grid is given and the sites' quantiles give fewer
        than two distinct times, naming the sites that sent none.

    Examples
    --------
    >>> agree_time_grid({"a": [100.0, 200.0, 300.0], "b": [150.0, 300.0]}).tolist()
    [100.0, 150.0, 200.0, 300.0]
    >>> agree_time_grid({"a": [100.0, 200.0, 300.0, 400.0]}, grid_points=2).tolist()
    [100.0, 400.0]
    >>> agree_time_grid({"a": []}, times=[0, 365, 730]).tolist()
    [0.0, 365.0, 730.0]
    """
    if times is not None:
        return check_grid(times, "survival.times")
    if not 2 <= int(grid_points) <= MAX_GRID_POINTS:
        raise ValueError(f"grid_points must be in [2, {MAX_GRID_POINTS}], got {grid_points!r}")
    pooled = np.unique(
        np.asarray([float(v) for q in quantiles.values() for v in q], dtype=np.float64)
    )
    pooled = pooled[np.isfinite(pooled) & (pooled >= 0)]
    if pooled.size < 2:
        silent = sorted(site for site, q in quantiles.items() if not len(q))
        raise SchemaError(
            "the sites' event-time quantiles give fewer than two distinct times "
            f"({pooled.tolist()}; sites that sent none, for too few events: "
            f"{silent or 'none'}); allowed: sites with at least {MIN_QUANTILE_EVENTS} events "
            "(and privacy.min_leaf_rows), or a public grid survival.times in job.yaml"
        )
    if pooled.size > grid_points:
        index = np.unique(np.round(np.linspace(0, pooled.size - 1, int(grid_points))).astype(int))
        pooled = pooled[index]
    return check_grid(pooled)
