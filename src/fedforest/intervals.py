"""How sure a site's metrics are: bootstrap intervals, Wilson intervals, small-sample warnings.

A site scores each strategy on its own test rows; with 30 rows and 6 events,
an AUPRC of 1.000 says little. This module gives the numbers that say how
little, computed at the site from its rows and sent as aggregate numbers only:

* :func:`bootstrap_intervals`: percentile bootstrap 95% intervals of AUC,
  AUPRC and the Brier score (regression: RMSE and MAE) over the site's test
  rows, :data:`BOOTSTRAP_RESAMPLES` resamples drawn from the job's seed, the
  same resamples for every strategy of the site (:func:`bootstrap_weights`);
* :func:`event_count`: the rows of the outcome (the positive class);
* :func:`sample_warning`: the warning for a site with fewer than
  :data:`MIN_TEST_ROWS` test rows or :data:`MIN_EVENTS` events;
* :func:`check_interval`: what the server and the report check on receipt;
* :func:`wilson_interval`: the interval of an observed frequency (a
  reliability diagram's bin), scipy's.

Each resample is a vector of counts (how often each test row was drawn), so a
metric of all resamples is a few matrix operations over the rows sorted once:
the weighted AUC and average precision are those scikit-learn computes with
``sample_weight`` set to the counts (checked in the tests). It imports
numpy, scipy and, within fedforest, :mod:`fedforest.metrics` and
:mod:`fedforest.validation` only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from .metrics import METRIC_RANGES, row_losses
from .validation import describe

#: Resamples of the bootstrap (percentile intervals of :data:`CONFIDENCE`).
BOOTSTRAP_RESAMPLES = 1000
#: Coverage of every interval.
CONFIDENCE = 0.95
#: Metrics that get a bootstrap interval (when the job reports them).
INTERVAL_METRICS = ("auc", "auprc", "brier", "rmse", "mae")
#: Below these, a site's metrics carry a warning (:func:`sample_warning`).
MIN_TEST_ROWS, MIN_EVENTS = 50, 10
#: Share of resamples that may leave a metric undefined (one class only) and still give an
#: interval (over the others); above it, no interval.
MAX_UNDEFINED_SHARE = 0.1
#: Resamples are drawn in blocks of at most this many row counts (bounds the memory).
_BLOCK_CELLS = 2_000_000


def bootstrap_weights(n_rows: int, resamples: int = BOOTSTRAP_RESAMPLES, random_state=0):
    """The bootstrap's resamples as row counts, block by block.

    Yields arrays of shape ``(block, n_rows)`` whose row ``b`` counts how often
    each test row was drawn in resample ``b`` (each row sums to ``n_rows``).
    The same ``random_state`` gives the same resamples, so every strategy of a
    site is scored on the same resamples (paired).

    Examples
    --------
    >>> w = np.vstack(list(bootstrap_weights(5, 3, random_state=0)))
    >>> w.shape, w.sum(axis=1).tolist()
    ((3, 5), [5.0, 5.0, 5.0])
    """
    rng = np.random.default_rng(random_state)
    block = max(1, _BLOCK_CELLS // max(n_rows, 1))
    done = 0
    while done < resamples:
        size = min(block, resamples - done)
        drawn = rng.integers(0, n_rows, size=(size, n_rows))
        offsets = (np.arange(size) * n_rows)[:, None]
        counts = np.bincount((drawn + offsets).ravel(), minlength=size * n_rows)
        yield counts.reshape(size, n_rows).astype(float)
        done += size


def _ranking_curves(weights: np.ndarray, positive: np.ndarray, scores: np.ndarray):
    """Per resample: cumulative true and false positives at each distinct score, highest first."""
    order = np.argsort(-scores, kind="mergesort")
    s = scores[order]
    starts = np.r_[0, np.flatnonzero(np.diff(s)) + 1]
    w = weights[:, order]
    pos = positive[order].astype(float)
    tps = np.cumsum(np.add.reduceat(w * pos, starts, axis=1), axis=1)
    fps = np.cumsum(np.add.reduceat(w * (1.0 - pos), starts, axis=1), axis=1)
    return tps, fps


def _weighted_auc_ap(weights, positive, scores) -> tuple[np.ndarray, np.ndarray]:
    """ROC AUC and average precision of every resample (NaN where one class is absent)."""
    tps, fps = _ranking_curves(weights, positive, scores)
    total_p, total_n = tps[:, -1:], fps[:, -1:]
    defined = (total_p[:, 0] > 0) & (total_n[:, 0] > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        tp0 = np.pad(tps, ((0, 0), (1, 0)))
        fp0 = np.pad(fps, ((0, 0), (1, 0)))
        area = np.sum(np.diff(fp0, axis=1) * (tp0[:, 1:] + tp0[:, :-1]) / 2, axis=1)
        auc = area / (total_p[:, 0] * total_n[:, 0])
        drawn = tps + fps
        precision = np.divide(tps, drawn, out=np.zeros_like(tps), where=drawn > 0)
        ap = np.sum(np.diff(tp0, axis=1) * precision, axis=1) / total_p[:, 0]
    return np.where(defined, auc, np.nan), np.where(defined, ap, np.nan)


def _resampled_scores(weights, y_true, proba, classes, metrics) -> dict[str, np.ndarray]:
    """Every metric of ``metrics`` on every resample of the block ``weights``."""
    n = weights.shape[1]
    out: dict[str, np.ndarray] = {}
    if "brier" in metrics:
        out["brier"] = weights @ row_losses("brier", y_true, proba, classes) / n
    ranking = [m for m in ("auc", "auprc") if m in metrics]
    if not ranking:
        return out
    if classes.size == 2:
        auc, ap = _weighted_auc_ap(weights, y_true == classes[1], proba[:, 1])
    else:  # one against the rest, the mean over the classes each resample has (as score())
        per = [
            _weighted_auc_ap(weights, y_true == c, proba[:, k])
            for k, c in enumerate(classes)
            if np.any(y_true == c)
        ]
        with np.errstate(invalid="ignore"), _quiet_nanmean():
            auc = np.nanmean(np.stack([a for a, _ in per]), axis=0)
            ap = np.nanmean(np.stack([p for _, p in per]), axis=0)
            present = np.stack([(weights[:, y_true == c].sum(axis=1) > 0) for c in classes])
            one_class = present.sum(axis=0) < 2
        auc, ap = np.where(one_class, np.nan, auc), np.where(one_class, np.nan, ap)
    if "auc" in metrics:
        out["auc"] = auc
    if "auprc" in metrics:
        out["auprc"] = ap
    return out


class _quiet_nanmean:
    """Silence numpy's warning about an all-NaN slice (an undefined resample is NaN)."""

    def __enter__(self):
        import warnings

        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)


def bootstrap_intervals(
    y_true,
    proba=None,
    classes=None,
    metrics: Sequence[str] = INTERVAL_METRICS,
    *,
    predicted=None,
    points: Mapping[str, float | None] | None = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    random_state=0,
) -> dict[str, list[float] | None]:
    """Percentile bootstrap intervals of a site's metrics over its test rows.

    Parameters
    ----------
    y_true : array-like of shape (n_rows,)
    proba : ndarray of shape (n_rows, n_classes), optional
        Classification: probabilities in ``classes`` order.
    classes : array-like, optional
    metrics : sequence of str
        Those of :data:`INTERVAL_METRICS` get an interval: ``auc``, ``auprc``
        and ``brier`` (classification, with ``proba``), ``rmse`` and ``mae``
        (regression, with ``predicted``).
    predicted : array-like of shape (n_rows,), optional
        Regression: the predicted numbers.
    points : mapping, optional
        The metrics on all rows. An interval is widened to hold its point
        (the percentile interval of a biased statistic on few rows can miss
        it); a metric whose point is ``None`` (undefined) gets no interval.
    resamples : int
        Resamples (:data:`BOOTSTRAP_RESAMPLES`); the same ``random_state``
        draws the same resamples (:func:`bootstrap_weights`).
    random_state : int or numpy Generator

    Returns
    -------
    dict
        ``{metric: [low, high]}`` (the 2.5th and 97.5th percentiles), or
        ``None`` for a metric undefined in more than
        :data:`MAX_UNDEFINED_SHARE` of the resamples (too few events) or on
        all rows.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 200)
    >>> p = np.clip(0.3 + 0.4 * y + rng.normal(0, 0.2, 200), 0, 1)
    >>> ci = bootstrap_intervals(y, np.c_[1 - p, p], [0, 1], ["auc"], random_state=0)
    >>> 0.8 < ci["auc"][0] < ci["auc"][1] < 1.0
    True
    """
    y_true = np.asarray(y_true)
    wanted = [m for m in INTERVAL_METRICS if m in metrics]
    regression = predicted is not None
    if regression:
        wanted = [m for m in wanted if m in ("rmse", "mae")]
        errors = np.asarray(predicted, dtype=float).reshape(-1) - y_true.astype(float)
    else:
        wanted = [m for m in wanted if m in ("auc", "auprc", "brier")]
        proba = np.asarray(proba, dtype=float)
        classes = np.asarray(classes)
    if not wanted or y_true.size == 0:
        return {m: None for m in wanted}
    values: dict[str, list[np.ndarray]] = {m: [] for m in wanted}
    for w in bootstrap_weights(y_true.size, resamples, random_state):
        if regression:
            n = w.shape[1]
            if "rmse" in wanted:
                values["rmse"].append(np.sqrt(w @ errors**2 / n))
            if "mae" in wanted:
                values["mae"].append(w @ np.abs(errors) / n)
        else:
            for m, v in _resampled_scores(w, y_true, proba, classes, wanted).items():
                values[m].append(v)
    out: dict[str, list[float] | None] = {}
    alpha = (1 - CONFIDENCE) / 2
    for m in wanted:
        v = np.concatenate(values[m])
        point = None if points is None else points.get(m)
        if (points is not None and point is None) or np.mean(np.isnan(v)) > MAX_UNDEFINED_SHARE:
            out[m] = None
            continue
        lo, hi = (float(q) for q in np.nanquantile(v, [alpha, 1 - alpha]))
        if point is not None:
            lo, hi = min(lo, float(point)), max(hi, float(point))
        out[m] = [lo, hi]
    return out


def event_count(y_true, classes) -> int | None:
    """The events of a site's test rows: rows of the positive class (``classes[1]``).

    With more than two classes, the rows of the rarest class the rows have
    (what the one-against-the-rest AUC of that class rests on); ``None`` for
    regression (``classes`` is ``None``).

    Examples
    --------
    >>> event_count([0, 1, 1, 0, 0], [0, 1]), event_count([0, 1, 2, 2], [0, 1, 2])
    (2, 1)
    """
    if classes is None:
        return None
    y_true, classes = np.asarray(y_true), np.asarray(classes)
    if classes.size == 2:
        return int(np.sum(y_true == classes[1]))
    counts = [int(np.sum(y_true == c)) for c in classes]
    present = [c for c in counts if c]
    return min(present) if present else 0


def sample_warning(rows: int | None, events: int | None) -> str | None:
    """Why a site's metrics are unreliable, or ``None`` when it has enough rows and events.

    A site with fewer than :data:`MIN_TEST_ROWS` test rows or fewer than
    :data:`MIN_EVENTS` events (``None``: not known, or regression) is warned.

    Examples
    --------
    >>> sample_warning(30, 6)
    'unreliable metrics: 30 test rows (fewer than 50) and 6 events (fewer than 10); ...'
    >>> sample_warning(400, 120) is None
    True
    """
    if rows is None:
        return None
    few_rows = rows < MIN_TEST_ROWS
    few_events = events is not None and events < MIN_EVENTS
    if not (few_rows or few_events):
        return None
    counts = f"{rows} test rows" + (f" (fewer than {MIN_TEST_ROWS})" if few_rows else "")
    if events is not None:
        counts += f" and {events} events" + (f" (fewer than {MIN_EVENTS})" if few_events else "")
    return (
        f"unreliable metrics: {counts}; one row more or less moves AUC and AUPRC visibly, a "
        "perfect score can be luck, and strategies that differ by less than their 95% "
        "intervals cannot be told apart"
    )


def check_interval(metric: str, point, interval) -> str | None:
    """What is wrong with ``interval`` (``[low, high]``) for ``metric``'s ``point``, or ``None``.

    An interval is two finite numbers in the metric's range
    (:data:`~fedforest.metrics.METRIC_RANGES`), ``low <= point <= high``;
    an undefined point (``None``) has no interval.

    Examples
    --------
    >>> check_interval("auc", 0.8, [0.7, 0.9]) is None
    True
    >>> check_interval("auc", 0.8, [0.85, 0.9])
    'expected [low, high] with low <= 0.8 <= high, got [0.85, 0.9]'
    """
    if interval is None:
        return None
    low_ok, high_ok = METRIC_RANGES[metric]
    if (
        not isinstance(interval, (list, tuple))
        or len(interval) != 2
        or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            for v in interval
        )
    ):
        return f"expected [low, high], two finite numbers, got {describe(interval)}"
    lo, hi = float(interval[0]), float(interval[1])
    if not (low_ok <= lo <= hi <= high_ok):
        return (
            f"expected low <= high within [{low_ok:g}, {high_ok:g}], got {describe(list(interval))}"
        )
    if point is None:
        return (
            f"the metric is undefined (null), so it has no interval; got {describe(list(interval))}"
        )
    if not lo <= point <= hi:
        return f"expected [low, high] with low <= {point:g} <= high, got {describe(list(interval))}"
    return None


def wilson_interval(hits: float, rows: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The Wilson score interval of an observed frequency ``hits / rows`` (scipy's).

    ``hits`` is rounded to the nearest whole row (a bin's mean observed
    frequency times its rows).

    Examples
    --------
    >>> [round(v, 3) for v in wilson_interval(3, 10)]
    [0.108, 0.603]
    """
    from scipy.stats import binomtest

    if rows < 1:
        raise ValueError(f"rows={rows!r}: an interval needs at least one row")
    k = int(min(max(round(hits), 0), rows))
    ci = binomtest(k, rows).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)
