"""Survival targets and the metrics of predicted survival curves.

A survival target is what scikit-survival takes: a structured array with a
boolean ``event`` field (the event was observed) and a float ``time`` field
(the time of the event, or of the last follow-up when censored). The metrics
are scikit-survival's (:mod:`sksurv.metrics`), taken on the time points of a
forest's grid that the scored rows' follow-up covers:

============== ==========================================================
``cindex``     Harrell's concordance index of the risk score
``uno_cindex`` Uno's concordance index (censoring-weighted), truncated at
               the last usable time point
``ibs``        the integrated Brier score of the survival curves (lower is
               better; a proper scoring rule)
``td_auc``     the mean cumulative/dynamic AUC of the risk score over the
               usable time points that have a case (an event by then) and
               a control (event-free then)
============== ==========================================================

At one chosen horizon, :func:`auc_at` gives the cumulative/dynamic AUC and
:func:`horizon_calibration` the calibration of the survival curves.

The censoring distribution of the censoring-weighted metrics is the
Kaplan-Meier estimate of ``y_ref`` (the training rows where they are known;
else the scored rows themselves). :func:`brier_losses` gives each row's own
integrated Brier score, whose mean is scikit-survival's
``integrated_brier_score``: ``auto`` compares candidates on them with their
standard errors, as it does with per-row log-losses for a classifier.

scikit-survival is imported when a function needs it, so that fedforest runs
without it for classification and regression.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .vocabulary import SURVIVAL_METRICS

#: Events a survival part (training rows, validation rows, test rows) must hold at least.
MIN_EVENTS = 2


def survival_target(time, event) -> np.ndarray:
    """The survival target of ``time`` and ``event``, as scikit-survival takes it.

    Parameters
    ----------
    time : array-like of shape (n_rows,)
        Time of the event, or of the last follow-up when censored (finite, at least 0).
    event : array-like of shape (n_rows,)
        Whether the event was observed (booleans or 0/1).

    Returns
    -------
    ndarray
        A structured array with fields ``event`` (bool) and ``time`` (float64).

    Examples
    --------
    >>> y = survival_target([5.0, 3.0], [1, 0])
    >>> y["event"].tolist(), y["time"].tolist()
    ([True, False], [5.0, 3.0])
    """
    time = np.asarray(time, dtype=np.float64).ravel()
    raw = np.asarray(event).ravel()
    if raw.dtype != bool:
        as_float = np.asarray(raw, dtype=np.float64)
        if not np.isin(as_float, (0.0, 1.0)).all():
            bad = raw[~np.isin(as_float, (0.0, 1.0))][:3].tolist()
            raise ValueError(f"events must be 0/1 or booleans; found {bad}")
        raw = as_float == 1.0
    if time.shape != raw.shape:
        raise ValueError(f"time has {time.shape[0]} rows but event has {raw.shape[0]}")
    bad_time = ~np.isfinite(time) | (time < 0)
    if bad_time.any():
        raise ValueError(
            f"times must be finite and at least 0; found {time[bad_time][:3].tolist()}"
        )
    y = np.empty(time.shape[0], dtype=[("event", bool), ("time", np.float64)])
    y["event"] = raw
    y["time"] = time
    return y


def check_survival_target(y, name: str = "y") -> tuple[np.ndarray, np.ndarray]:
    """The events and times of a survival target, validated.

    Parameters
    ----------
    y : structured ndarray
        Two fields, the event indicator first and the time second (as
        :func:`survival_target` and ``sksurv.util.Surv`` build it).
    name : str, default "y"
        How messages name the target.

    Returns
    -------
    event : ndarray of bool
    time : ndarray of float64

    Examples
    --------
    >>> event, time = check_survival_target(survival_target([2.0, 1.0], [True, False]))
    >>> event.tolist(), time.tolist()
    ([True, False], [2.0, 1.0])
    """
    arr = np.asarray(y)
    names = arr.dtype.names
    if arr.ndim != 1 or names is None or len(names) != 2:
        raise ValueError(
            f"{name} must be a survival target: a structured array with an event field and a "
            "time field (fedforest.survival_metrics.survival_target(time, event))"
        )
    try:
        checked = survival_target(arr[names[1]], arr[names[0]])
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name} (event field {names[0]!r}, time field {names[1]!r}): {exc}"
        ) from None
    return checked["event"], checked["time"]


def curves_at(curves: np.ndarray, grid: np.ndarray, times, start: float) -> np.ndarray:
    """Step curves given on ``grid`` read at ``times`` (the value at the last grid point at
    or before each time; ``start`` before the first).

    Examples
    --------
    >>> curves_at(np.array([[0.9, 0.5]]), np.array([1.0, 2.0]), [0.5, 1.5, 3.0], 1.0)
    array([[1. , 0.9, 0.5]])
    """
    at = np.searchsorted(np.asarray(grid, np.float64), np.asarray(times, np.float64), "right") - 1
    out = np.asarray(curves, np.float64)[:, np.maximum(at, 0)]
    out[:, at < 0] = start
    return out


def usable_times(grid, y, y_ref=None) -> np.ndarray:
    """The grid points the censoring-weighted metrics can use on rows ``y``.

    scikit-survival takes time points within the scored rows' follow-up
    (from their first time up to, not including, their last) and where the
    censoring distribution of ``y_ref`` is estimated (before its last time).

    Examples
    --------
    >>> y = survival_target([1.0, 2.0, 3.0, 4.0], [1, 1, 0, 1])
    >>> usable_times([0.5, 1.5, 2.5, 3.5, 4.5], y).tolist()
    [1.5, 2.5, 3.5]
    """
    grid = np.asarray(grid, np.float64)
    _, time = check_survival_target(y)
    _, ref_time = check_survival_target(y if y_ref is None else y_ref, "y_ref")
    keep = (grid >= time.min()) & (grid < time.max()) & (grid < ref_time.max())
    return grid[keep]


def brier_losses(y, survival: np.ndarray, grid, y_ref=None) -> np.ndarray:
    """Each row's integrated Brier score (censoring-weighted) over the usable grid points.

    Their mean is ``sksurv.metrics.integrated_brier_score(y_ref, y, survival, times)``
    on the usable points (:func:`usable_times`).

    Parameters
    ----------
    y : structured ndarray
        The scored rows' survival target.
    survival : ndarray of shape (n_rows, n_times)
        Predicted survival probabilities at every point of ``grid``.
    grid : array-like of shape (n_times,)
    y_ref : structured ndarray, optional
        The rows whose censoring distribution weighs the scores (default: ``y``).

    Returns
    -------
    ndarray of shape (n_rows,)

    Raises
    ------
    ValueError
        Fewer than two grid points within the rows' follow-up.
    """
    from sksurv.nonparametric import CensoringDistributionEstimator

    event, time = check_survival_target(y)
    ref = y if y_ref is None else y_ref
    grid = np.asarray(grid, np.float64)
    times = usable_times(grid, y, ref)
    if times.shape[0] < 2:
        raise ValueError(
            f"the integrated Brier score needs at least two time points of the grid within the "
            f"rows' follow-up [{time.min():g}, {time.max():g}); the grid has {times.shape[0]}"
        )
    surv = np.asarray(survival, np.float64)[:, np.isin(grid, times)]
    cens = CensoringDistributionEstimator().fit(_sksurv_target(ref))
    g_t = cens.predict_proba(times)
    g_t[g_t == 0] = np.inf
    # a row followed beyond y_ref's last time weighs only where it is a case, before its own
    # time; reading the censoring curve there at y_ref's last time changes no term it enters
    _, ref_time = check_survival_target(ref, "y_ref")
    g_y = cens.predict_proba(np.minimum(time, ref_time.max()))
    g_y[g_y == 0] = np.inf
    case = (time[:, None] <= times[None, :]) & event[:, None]
    control = time[:, None] > times[None, :]
    scores = np.square(surv) * case / g_y[:, None] + np.square(1.0 - surv) * control / g_t
    return np.trapezoid(scores, times, axis=1) / (times[-1] - times[0])


def score_survival(
    metric: str,
    y,
    risk: np.ndarray | None = None,
    survival: np.ndarray | None = None,
    grid=None,
    y_ref=None,
) -> float:
    """One survival metric of predictions of rows ``y``.

    Parameters
    ----------
    metric : str
        One of :data:`fedforest.vocabulary.SURVIVAL_METRICS`.
    y : structured ndarray
        The rows' survival target.
    risk : ndarray of shape (n_rows,), optional
        Risk scores (higher: the event sooner); needed by every metric but ``ibs``.
    survival : ndarray of shape (n_rows, n_times), optional
        Survival probabilities on ``grid``; needed by ``ibs``.
    grid : array-like of shape (n_times,), optional
        The forest's time grid; needed by every metric but ``cindex``.
    y_ref : structured ndarray, optional
        Rows whose censoring distribution weighs ``uno_cindex``, ``ibs`` and
        ``td_auc`` (the training rows; default ``y``).

    Returns
    -------
    float
        NaN when the rows cannot give the metric (no comparable pair, or too
        few time points within their follow-up).

    Examples
    --------
    >>> y = survival_target([1.0, 2.0, 3.0, 4.0], [1, 1, 0, 1])
    >>> score_survival("cindex", y, risk=np.array([4.0, 3.0, 2.0, 1.0]))
    1.0
    """
    from sksurv.metrics import (
        concordance_index_censored,
        concordance_index_ipcw,
        cumulative_dynamic_auc,
    )

    if metric not in SURVIVAL_METRICS:
        raise ValueError(f"metric={metric!r} is not one of {list(SURVIVAL_METRICS)}")
    event, time = check_survival_target(y)
    if metric == "ibs":
        if survival is None or grid is None:
            raise ValueError("the integrated Brier score needs survival curves and their grid")
        try:
            return float(np.mean(brier_losses(y, survival, grid, y_ref)))
        except ValueError:
            return float("nan")
    if risk is None:
        raise ValueError(f"{metric} needs risk scores")
    risk = np.asarray(risk, np.float64)
    if metric == "cindex":
        if not event.any():
            return float("nan")
        try:
            return float(concordance_index_censored(event, time, risk)[0])
        except ValueError:  # no comparable pair
            return float("nan")
    if grid is None:
        raise ValueError(f"{metric} needs the time grid")
    ref = _sksurv_target(y if y_ref is None else y_ref)
    times = usable_times(grid, y, ref)
    try:
        if metric == "uno_cindex":
            if times.size == 0:
                return float("nan")
            return float(concordance_index_ipcw(ref, _sksurv_target(y), risk, tau=times[-1])[0])
        # a time point needs a case (an event by then) and a control (still event-free)
        cases = (time[None, :] <= times[:, None]) & event[None, :]
        controls = time[None, :] > times[:, None]
        times = times[cases.any(axis=1) & controls.any(axis=1)]
        if times.size == 0:
            return float("nan")
        return float(cumulative_dynamic_auc(ref, _sksurv_target(y), risk, times)[1])
    except (ValueError, ZeroDivisionError):
        return float("nan")


def score_all_survival(
    y, risk, survival, grid, y_ref=None, metrics: Sequence[str] = SURVIVAL_METRICS
) -> dict[str, float]:
    """Every metric of :data:`~fedforest.vocabulary.SURVIVAL_METRICS` (or ``metrics``)."""
    return {m: score_survival(m, y, risk, survival, grid, y_ref) for m in metrics}


def _sksurv_target(y) -> np.ndarray:
    event, time = check_survival_target(y)
    return survival_target(time, event)


def risk_groups(y, risk, survival, grid, n_groups: int = 3) -> list[dict]:
    """Predicted survival against Kaplan-Meier in groups of rows by risk.

    The rows are cut into ``n_groups`` groups of (nearly) equal size by their
    risk score, lowest first; for each group, the mean predicted survival
    curve and the Kaplan-Meier estimate of the group's rows, both at every
    point of ``grid`` (Kaplan-Meier read as a step function: 1 before the
    group's first time). A model that separates and is calibrated has each
    group's two curves close and the groups apart.

    Parameters
    ----------
    y : structured ndarray
        The rows' survival target.
    risk : ndarray of shape (n_rows,)
    survival : ndarray of shape (n_rows, n_times)
        Predicted survival probabilities on ``grid``.
    grid : array-like of shape (n_times,)
    n_groups : int, default 3

    Returns
    -------
    list of dict
        Per group: ``rows``, ``events``, ``risk`` ([lowest, highest]),
        ``predicted`` and ``observed`` (lists over ``grid``).

    Examples
    --------
    >>> y = survival_target([1.0, 2.0, 3.0, 4.0], [1, 1, 1, 0])
    >>> surv = np.array([[0.2, 0.1], [0.5, 0.3], [0.7, 0.6], [0.9, 0.8]])
    >>> groups = risk_groups(y, np.array([4.0, 3.0, 2.0, 1.0]), surv, [1.5, 3.5], n_groups=2)
    >>> groups[0]["rows"], groups[0]["observed"]
    (2, [1.0, 0.5])
    """
    from sksurv.nonparametric import kaplan_meier_estimator

    event, time = check_survival_target(y)
    risk = np.asarray(risk, np.float64)
    if n_groups < 1 or n_groups > len(risk):
        raise ValueError(f"n_groups={n_groups} must be in [1, {len(risk)}] (the rows)")
    grid = np.asarray(grid, np.float64)
    order = np.argsort(risk, kind="stable")
    groups = []
    for rows in np.array_split(order, n_groups):
        km_times, km_survival = kaplan_meier_estimator(event[rows], time[rows])
        observed = curves_at(km_survival[None, :], km_times, grid, 1.0)[0]
        groups.append(
            {
                "rows": int(rows.size),
                "events": int(event[rows].sum()),
                "risk": [float(risk[rows].min()), float(risk[rows].max())],
                "predicted": np.asarray(survival, np.float64)[rows].mean(axis=0).tolist(),
                "observed": observed.tolist(),
            }
        )
    return groups


def auc_at(y, risk, horizon: float, y_ref=None) -> float:
    """The cumulative/dynamic AUC of the risk score at one horizon.

    scikit-survival's ``cumulative_dynamic_auc`` at ``horizon``: how well the
    risk score ranks the rows with an event by then (cases) above the rows
    still event-free then (controls), censoring-weighted by ``y_ref``'s
    censoring distribution (default ``y``).

    Returns
    -------
    float
        NaN when ``horizon`` lies outside the rows' follow-up
        (:func:`usable_times`) or no row is a case, or none a control, then.

    Examples
    --------
    >>> y = survival_target([1.0, 2.0, 3.0, 4.0, 5.0], [1, 1, 0, 1, 0])
    >>> auc_at(y, np.array([5.0, 4.0, 3.0, 2.0, 1.0]), 2.5)
    1.0
    """
    from sksurv.metrics import cumulative_dynamic_auc

    event, time = check_survival_target(y)
    ref = y if y_ref is None else y_ref
    if usable_times([horizon], y, ref).size == 0:
        return float("nan")
    if not ((time <= horizon) & event).any() or not (time > horizon).any():
        return float("nan")
    risk = np.asarray(risk, np.float64)
    try:
        auc, _ = cumulative_dynamic_auc(_sksurv_target(ref), _sksurv_target(y), risk, [horizon])
    except (ValueError, ZeroDivisionError):
        return float("nan")
    return float(auc[0])


def horizon_calibration(y, survival, grid, horizon: float, n_bins: int = 5) -> dict:
    """Calibration at one horizon: predicted against Kaplan-Meier survival, by bins of risk.

    The rows are cut into ``n_bins`` groups of (nearly) equal size by their
    predicted survival at ``horizon`` (the curve's value at the last grid
    point at or before it); in each, the mean prediction beside the
    Kaplan-Meier estimate of the bin's rows at ``horizon`` (censoring
    accounted for, as a plain proportion of survivors would not).

    Returns
    -------
    dict
        ``horizon``; ``predicted`` and ``observed`` per bin (lowest predicted
        survival first); ``rows`` per bin; ``ici``, the mean absolute
        difference between them weighted by rows.

    Examples
    --------
    >>> y = survival_target([1.0, 2.0, 3.0, 5.0], [1, 1, 0, 0])
    >>> out = horizon_calibration(y, np.array([[0.1], [0.2], [0.9], [0.9]]), [0.5], 4.0, 2)
    >>> out["predicted"], out["observed"]
    ([0.15000000000000002, 0.9], [0.0, 1.0])
    """
    from sksurv.nonparametric import kaplan_meier_estimator

    event, time = check_survival_target(y)
    at = curves_at(np.asarray(survival, np.float64), np.asarray(grid, np.float64), [horizon], 1.0)
    predicted_at = at[:, 0]
    if n_bins < 1 or n_bins > len(predicted_at):
        raise ValueError(f"n_bins={n_bins} must be in [1, {len(predicted_at)}] (the rows)")
    order = np.argsort(predicted_at, kind="stable")
    predicted, observed, rows_per_bin = [], [], []
    for rows in np.array_split(order, n_bins):
        km_times, km_survival = kaplan_meier_estimator(event[rows], time[rows])
        observed.append(float(curves_at(km_survival[None, :], km_times, [horizon], 1.0)[0, 0]))
        predicted.append(float(predicted_at[rows].mean()))
        rows_per_bin.append(int(rows.size))
    weights = np.asarray(rows_per_bin, np.float64) / len(predicted_at)
    ici = float(np.sum(weights * np.abs(np.asarray(predicted) - np.asarray(observed))))
    return {
        "horizon": float(horizon),
        "predicted": predicted,
        "observed": observed,
        "rows": rows_per_bin,
        "ici": ici,
    }
