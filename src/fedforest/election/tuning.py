"""Hill-climb tuning of the election's freedom degree.

Starting at the configured freedom degree, the tuner steps by 0.1; when a step
does not improve the score it reverses and halves the step (a step that gives
the very same mask is no evidence either way, so the tuner walks on). It stops after
``rounds`` scored masks or when the step falls below ``min_step`` (the scores
have plateaued). A freedom degree is never evaluated twice, and two freedom
degrees that give the same mask share one score (no site is asked twice).
Among the evaluated masks whose score is within ``tolerance`` of the best, the
one with the fewest features wins (then the higher score, then the smaller
freedom degree): unlike a plain hill-climb, a flat score does not drift to a
larger mask.

The score of a mask comes from a callback. In the FLARE job each site trains a
small model on its own columns of the mask and scores it on its validation
rows, and the server takes the row-weighted mean; :func:`score_mask` is that
per-site step and :func:`pool_scores` the server's.

Regression (``task="regression"``): a site fits a ``RandomForestRegressor``
on its columns of the mask (none of them: the training mean) and reports the
validation ``rmse`` (default), ``mae`` or ``r2``. :func:`hill_climb` takes
the ``metric`` the scores are in and minimises a lower-is-better one
(:data:`fedforest.vocabulary.LOWER_IS_BETTER`): "better" steps, the best
score and the ``tolerance`` band (``best + tolerance``) all turn around, and
``tolerance`` is in the metric's unit (for ``rmse``, the target's: days,
mmol/l). :func:`pool_scores` pools per-site RMSEs as the root of the
row-weighted mean of their squares, which is the RMSE over every site's
validation rows.

Survival (``task="survival"``, the target a structured array of event
indicators and times): a site fits a ``RandomSurvivalForest`` on its columns
of the mask (none of them: the Kaplan-Meier curve of its training rows, the
same for every row) and reports the integrated Brier score (``ibs``, default,
lower is better) or Harrell's concordance (``cindex``) of its scoring rows.
The IBS is scikit-survival's ``integrated_brier_score`` (Graf's Brier score
with inverse probability of censoring weights from the training rows' censoring
distribution, integrated by the trapezoidal rule over the grid and divided by
its span) on the grid :func:`survival_grid` takes inside the follow-up of both
the training and the scoring rows. :func:`pool_scores` pools the sites' IBS as
the row-weighted mean (as for every metric but ``rmse``).
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from ..metrics import best_first, is_better, score_values
from ..metrics import score as metric_score
from ..model.in_bag import sample_counts
from ..survival_metrics import brier_losses
from ..vocabulary import (
    LOWER_IS_BETTER,
    METRICS,
    REGRESSION_METRICS,
    SURVIVAL_TUNING_METRICS,
    TASKS,
)
from .ballot import Ballot, ElectionResult, check_freedom_degree
from .selector_inputs import _numeric_target, _survival_array

logger = logging.getLogger(__name__)

#: What :func:`score_mask` reports when no metric is given, per task.
DEFAULT_METRICS = {"classification": "auprc", "regression": "rmse", "survival": "ibs"}
#: Every metric a mask can be scored by (classification, regression, then survival).
TUNING_METRICS = (*METRICS, *REGRESSION_METRICS, *SURVIVAL_TUNING_METRICS)
#: The quantiles of the training rows' event times that make :func:`survival_grid`.
GRID_QUANTILES = np.linspace(0.1, 0.9, 17)


@dataclass
class TuningStep:
    """One evaluated freedom degree (``None``: the mask of every feature)."""

    freedom_degree: float | None
    n_features: int
    score: float
    reused: bool = False  # the mask was already scored at another freedom degree


@dataclass
class TuningResult:
    """The chosen freedom degree (``None``: every feature), its election and the search
    history."""

    freedom_degree: float | None
    score: float
    election: ElectionResult
    history: list[TuningStep] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "freedom_degree": self.freedom_degree,
            "score": self.score,
            "kept": len(self.election.selected),
            "history": [
                {
                    "freedom_degree": h.freedom_degree,
                    "kept": h.n_features,
                    "score": h.score,
                    "reused": h.reused,
                }
                for h in self.history
            ],
        }


def hill_climb(
    ballot: Ballot,
    score: Callable[[list[str]], float],
    start: float = 0.5,
    rounds: int = 5,
    step: float = 0.1,
    tolerance: float = 0.0,
    min_step: float = 0.0125,
    metric: str | None = None,
    every_feature: bool = False,
) -> TuningResult:
    """Tune the freedom degree of ``ballot`` by hill-climbing ``score``.

    Parameters
    ----------
    ballot : Ballot
        The counted votes.
    score : callable
        ``score(selected_features) -> float``; higher is better unless
        ``metric`` is a lower-is-better one.
    start : float, default=0.5
        First freedom degree.
    rounds : int, default=5
        Most masks scored (each costs a round of site evaluations in a job).
    step : float, default=0.1
        First step.
    tolerance : float, default=0.0
        Masks scoring within ``tolerance`` of the best count as equally good;
        the smallest of them is chosen. In the metric's unit.
    min_step : float, default=0.0125
        Stop once the step is halved below this.
    metric : str or None, default=None
        The metric ``score`` returns (one of :data:`TUNING_METRICS`). A
        metric of :data:`fedforest.vocabulary.LOWER_IS_BETTER` (``rmse``,
        ``mae``, ``brier``, ``log_loss``, ``ece``, ``ibs``) is minimised; ``None`` or
        any other metric is maximised.
    every_feature : bool, default=False
        Also score the mask of every feature (:meth:`Ballot.every_feature`),
        second, after ``start``, within the ``rounds``. The vote reaches at most
        the union of what the sites' selectors kept; with this candidate the
        election drops a column only when the scores say dropping it is no
        worse (the usual ``tolerance`` and fewest-features rule decide). When
        it wins, the result's ``freedom_degree`` is ``None``.

    Returns
    -------
    TuningResult

    Examples
    --------
    >>> from fedforest.election.ballot import Ballot, SiteVote
    >>> votes = [SiteVote("a", ["x", "y", "z"], [1, 1, 0], [3, 2, 1], 50),
    ...          SiteVote("b", ["x", "y", "z"], [1, 0, 1], [3, 1, 2], 50)]
    >>> result = hill_climb(Ballot(votes), lambda feats: float("x" in feats), rounds=4)
    >>> result.election.selected          # every mask scores 1: the smallest wins
    ['x']
    >>> rmse = {("x",): 2.0, ("x", "y"): 1.0, ("x", "y", "z"): 1.5}
    >>> hill_climb(Ballot(votes), lambda feats: rmse[tuple(feats)], metric="rmse",
    ...            rounds=4).election.selected     # the lowest RMSE wins
    ['x', 'y']

    Every feature as a candidate: no site's selector kept ``w``, so no
    freedom degree reaches it.

    >>> votes = [SiteVote(s, ["w", "x"], [0, 1], [1, 3], 50) for s in "ab"]
    >>> by_size = lambda feats: float(len(feats))
    >>> hill_climb(Ballot(votes), by_size, rounds=3).election.selected
    ['x']
    >>> chosen = hill_climb(Ballot(votes), by_size, rounds=3, every_feature=True)
    >>> chosen.election.selected, chosen.freedom_degree
    (['w', 'x'], None)
    """
    start = check_freedom_degree(start, "start")
    if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)) or rounds < 1:
        raise ValueError(f"tuning_rounds={rounds!r} must be an integer >= 1")
    if not (isinstance(tolerance, (int, float)) and tolerance >= 0):
        raise ValueError(f"tolerance={tolerance!r} must be a number >= 0")
    if not (0 < step <= 1) or not (0 < min_step <= step):
        raise ValueError(
            f"step={step!r} and min_step={min_step!r} must satisfy 0 < min_step <= step <= 1"
        )
    if metric is not None and (not isinstance(metric, str) or metric not in TUNING_METRICS):
        raise ValueError(f"metric={metric!r} must be None or one of {list(TUNING_METRICS)}")
    if not isinstance(every_feature, (bool, np.bool_)):
        raise ValueError(f"every_feature={every_feature!r} must be true or false")
    lower = metric in LOWER_IS_BETTER

    # a candidate is a freedom degree, or None: every feature
    by_fd: dict[float | None, float] = {}
    by_mask: dict[tuple, float] = {}
    elections: dict[float | None, ElectionResult] = {}
    history: list[TuningStep] = []
    scored = 0

    def evaluate(fd: float | None) -> float:
        nonlocal scored
        if fd is not None:
            fd = round(fd, 6)
        if fd in by_fd:
            return by_fd[fd]
        result = ballot.every_feature() if fd is None else ballot.count(fd)
        key = tuple(result.selected)
        reused = key in by_mask
        if not reused:
            by_mask[key] = float(score(list(result.selected)))
            scored += 1
        s = by_mask[key]
        by_fd[fd] = s
        elections[fd] = result
        history.append(TuningStep(fd, len(result.selected), s, reused))
        logger.info(
            "tuning: %s keeps %d features, score %.4f%s",
            "every feature" if fd is None else f"freedom degree {fd:.4f}",
            len(result.selected),
            s,
            " (same mask as before)" if reused else "",
        )
        return s

    fd = round(start, 6)
    current = evaluate(fd)
    if every_feature and scored < rounds:
        evaluate(None)
    direction = 1.0
    moves = 0
    while scored < rounds and step >= min_step and moves < 64:
        moves += 1
        candidate = round(min(1.0, max(0.0, fd + direction * step)), 6)
        if candidate == fd or candidate in by_fd:
            direction, step = -direction, step / 2
            continue
        s = evaluate(candidate)
        if is_better(metric, s, current) or elections[candidate].selected == elections[fd].selected:
            # better, or the same mask (a flat stretch of the discrete rule): keep going
            fd, current = candidate, (min if lower else max)(s, current)
        else:
            direction, step = -direction, step / 2
    if lower:
        best = min(by_fd.values())
        good = [f for f, s in by_fd.items() if s <= best + tolerance]
    else:
        best = max(by_fd.values())
        good = [f for f, s in by_fd.items() if s >= best - tolerance]
    # fewest features, then the better score, then the smaller freedom degree (a freedom
    # degree before every feature, which only ties it when the union is every feature)
    chosen = min(
        good,
        key=lambda f: (
            len(elections[f].selected),
            best_first(metric, by_fd[f]),
            f is None,
            0.0 if f is None else f,
        ),
    )
    return TuningResult(chosen, by_fd[chosen], elections[chosen], history)


def pool_scores(metric: str | None, scores: Sequence[float], n_rows: Sequence[int]) -> float:
    """Pool the sites' scores of one mask into the score :func:`hill_climb` compares.

    The row-weighted mean of the scores, except for ``rmse``: the root of the
    row-weighted mean of their squares, which is the RMSE over all the sites'
    validation rows together (a plain mean of RMSEs is not). ``mae`` pools
    exactly as a mean; a mean of ``r2`` (or of a ranking metric, or of the
    sites' integrated Brier scores, ``ibs``, each on its own time grid) is the
    usual approximation.

    Parameters
    ----------
    metric : str or None
        The metric of the scores (one of :data:`TUNING_METRICS`), or None.
    scores : sequence of float
        One finite score per site.
    n_rows : sequence of int
        Each site's validation rows (>= 1), in the order of ``scores``.

    Returns
    -------
    float

    Examples
    --------
    >>> pool_scores("rmse", [1.0, 3.0], [100, 100])   # sqrt((1 + 9) / 2)
    2.23606797749979
    >>> pool_scores("auprc", [0.5, 0.8], [100, 300])
    0.725
    >>> pool_scores("ibs", [0.10, 0.20], [300, 100])
    0.125
    """
    if metric is not None and (not isinstance(metric, str) or metric not in TUNING_METRICS):
        raise ValueError(f"metric={metric!r} must be None or one of {list(TUNING_METRICS)}")
    values = np.asarray(scores, dtype=np.float64)
    weights = np.asarray(n_rows, dtype=np.float64)
    if values.ndim != 1 or values.size == 0 or weights.shape != values.shape:
        raise ValueError(
            f"scores and n_rows must be non-empty and of the same length, got {values.size} "
            f"scores and {weights.size} row counts"
        )
    if not np.all(np.isfinite(values)):
        raise ValueError(f"scores must be finite, got {values.tolist()}")
    if not np.all(weights >= 1):
        raise ValueError(f"n_rows must be >= 1 per site, got {weights.tolist()}")
    if metric == "rmse":
        return float(np.sqrt(np.average(values**2, weights=weights)))
    return float(np.average(values, weights=weights))


def score_mask(
    X_train: pd.DataFrame,
    y_train,
    X_val: pd.DataFrame | None,
    y_val,
    features: Sequence[str],
    classes: Sequence | None,
    metric: str | None = None,
    n_estimators: int = 50,
    random_state=None,
    task: str = "classification",
) -> float:
    """Score a proposed mask at one site: a small forest on the site's columns of it.

    A site that has none of the features scores the constant predictor (its
    training class frequencies; regression: its training mean).

    Without validation rows (``X_val=None`` and ``y_val=None``: validation
    mode ``oob``) the forest (bootstrapped, as scikit-learn's default) scores
    the training rows out of bag, each row by the trees that did not draw it:
    scikit-learn's ``oob_decision_function_`` (regression:
    ``oob_prediction_``), scored by the same metric. With ``metric="accuracy"``
    that is the forest's own ``oob_score_``.

    Parameters
    ----------
    X_train, X_val : DataFrame
        The site's encoded training and validation rows (``X_val=None``: none,
        the training rows are scored out of bag).
    y_train, y_val : array-like
        Class labels, or numbers (finite) for ``task="regression"`` (``y_val``
        ``None`` with ``X_val``).
    features : sequence of str
        The proposed mask (global names); columns the site lacks are skipped.
    classes : sequence or None
        Global class list (the columns of the probabilities scored). Ignored
        for regression (pass ``()`` or ``None``).
    metric : str or None, default=None
        Classification: one of :data:`fedforest.vocabulary.METRICS`, None
        means ``"auprc"``. Regression: one of
        :data:`fedforest.vocabulary.REGRESSION_METRICS` (``rmse``, ``mae``:
        lower is better; ``r2``), None means ``"rmse"``. Survival: one of
        :data:`SURVIVAL_TUNING_METRICS` (``ibs``: lower is better;
        ``cindex``), None means ``"ibs"``.
    n_estimators : int, default=50
    random_state : int or None
    task : {"classification", "regression", "survival"}, default="classification"
        ``"regression"`` fits a ``RandomForestRegressor``, ``"survival"`` a
        ``RandomSurvivalForest`` (``y_train``, ``y_val``: structured arrays of
        an event indicator and a time; out of bag, each training row's
        survival curve is the mean of the curves of the trees that did not
        draw it).

    Returns
    -------
    float
        The validation (or out-of-bag) score; a score the metric leaves
        undefined (AUC with one class present, R² of a constant validation
        target, Harrell's C of scoring rows without an event) is 0.0 (for
        Harrell's C: 0.5, a random ranking's).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.RandomState(0)
    >>> X = pd.DataFrame({"a": rng.normal(size=300), "b": rng.normal(size=300)})
    >>> stay = 5 + 2 * X["a"].to_numpy() + 0.1 * rng.normal(size=300)
    >>> tr, va = slice(0, 200), slice(200, 300)
    >>> with_a = score_mask(X[tr], stay[tr], X[va], stay[va], ["a"], None,
    ...                     task="regression", random_state=0)
    >>> only_b = score_mask(X[tr], stay[tr], X[va], stay[va], ["b"], None,
    ...                     task="regression", random_state=0)
    >>> bool(with_a < only_b)                           # RMSE: lower is better
    True
    >>> oob = score_mask(X[tr], stay[tr], None, None, ["a"], None,
    ...                  task="regression", random_state=0)  # out of bag
    >>> bool(oob < only_b)
    True

    A survival target (``task="survival"``): the integrated Brier score, lower is better.

    >>> from sksurv.util import Surv
    >>> t = rng.exponential(np.exp(-X["a"].to_numpy()))
    >>> y = Surv.from_arrays(event=rng.random(300) < 0.8, time=t)
    >>> ibs_a = score_mask(X[tr], y[tr], X[va], y[va], ["a"], None, task="survival",
    ...                    n_estimators=20, random_state=0)
    >>> ibs_none = score_mask(X[tr], y[tr], X[va], y[va], [], None, task="survival")
    >>> bool(ibs_a < ibs_none)                          # the Kaplan-Meier curve
    True
    """
    if not isinstance(task, str) or task not in TASKS:
        raise ValueError(f"task={task!r} is not one of {list(TASKS)}")
    if (X_val is None) != (y_val is None):
        raise ValueError(
            "X_val and y_val must both be given (validation rows) or both be None (the "
            "training rows scored out of bag)"
        )
    if task == "survival":
        return _score_mask_survival(
            X_train, y_train, X_val, y_val, features, metric, n_estimators, random_state
        )
    if task == "regression":
        return _score_mask_regression(
            X_train, y_train, X_val, y_val, features, metric, n_estimators, random_state
        )
    if metric is None:
        metric = DEFAULT_METRICS["classification"]
    classes = np.asarray(classes)
    cols = [f for f in features if f in X_train.columns]
    oob = X_val is None
    if oob:
        y_val = y_train
    proba = np.zeros((len(y_val), len(classes)))
    if cols:
        model = RandomForestClassifier(
            n_estimators=n_estimators,
            random_state=random_state,
            n_jobs=1,
            **({"bootstrap": True, "oob_score": True} if oob else {}),
        )
        model.fit(X_train[cols].to_numpy(dtype=np.float32), np.asarray(y_train))
        if oob:
            p = model.oob_decision_function_
        else:
            p = model.predict_proba(X_val[cols].to_numpy(dtype=np.float32))
        proba[:, np.searchsorted(classes, model.classes_)] = p
    else:
        labels, counts = np.unique(np.asarray(y_train), return_counts=True)
        proba[:, np.searchsorted(classes, labels)] = counts / counts.sum()
    value = metric_score(metric, y_val, proba, classes)
    return float(value) if np.isfinite(value) else 0.0


def _score_mask_regression(
    X_train: pd.DataFrame,
    y_train,
    X_val: pd.DataFrame,
    y_val,
    features: Sequence[str],
    metric: str | None,
    n_estimators: int,
    random_state,
) -> float:
    if metric is None:
        metric = DEFAULT_METRICS["regression"]
    if not isinstance(metric, str) or metric not in REGRESSION_METRICS:
        hint = " (a classification metric)" if metric in METRICS else ""
        raise ValueError(
            f"metric={metric!r}{hint} cannot score a regression mask; for task='regression' "
            f"use one of {list(REGRESSION_METRICS)}"
        )
    oob = X_val is None
    y_tr = _numeric_target(y_train, "y_train")
    y_va = y_tr if oob else _numeric_target(y_val, "y_val")
    parts = [("train", "training", X_train, y_tr)]
    if not oob:
        parts.append(("val", "validation", X_val, y_va))
    for part, rows, X, y in parts:
        if len(y) != len(X):
            raise ValueError(f"y_{part} has {len(y)} values but X_{part} has {len(X)} rows")
        if len(y) == 0:
            raise ValueError(f"the site has no {rows} rows; a mask needs at least one to be scored")
    cols = [f for f in features if f in X_train.columns]
    if cols:
        model = RandomForestRegressor(
            n_estimators=n_estimators,
            random_state=random_state,
            n_jobs=1,
            **({"bootstrap": True, "oob_score": True} if oob else {}),
        )
        model.fit(X_train[cols].to_numpy(dtype=np.float32), y_tr)
        if oob:
            predicted = model.oob_prediction_
        else:
            predicted = model.predict(X_val[cols].to_numpy(dtype=np.float32))
    else:
        predicted = np.full(len(y_va), y_tr.mean())
    value = score_values(metric, y_va, predicted)
    if math.isfinite(value):
        return float(value)
    if metric == "r2":  # undefined on a constant validation target: no better than a constant
        return 0.0
    raise ValueError(f"the {metric} of the mask is not finite ({value}); the target overflows")


def survival_grid(y_train, y_score) -> np.ndarray:
    """The times at which a survival mask's integrated Brier score is taken.

    The 10th, 15th, ..., 90th percentiles of the training rows' event times,
    kept where they lie inside the follow-up of both parts: at or after the
    later of the two first times and before the earlier of the two last
    times (scikit-survival's ``integrated_brier_score`` needs the grid inside
    ``[min, max)`` of the scoring rows' times, and the censoring distribution
    of the training rows is known only up to their last time). Quantiles of
    the event times put the grid where the events are, and leave out the
    tails, where few rows are at risk and the censoring weights explode.
    When fewer than two distinct percentiles remain, the same percentiles of
    every distinct time of both parts inside that window are taken.

    Parameters
    ----------
    y_train, y_score : structured arrays
        Event indicator and time of the training and of the scoring rows.

    Returns
    -------
    numpy.ndarray of float64
        At least two increasing times.

    Raises
    ------
    ValueError
        If the window holds fewer than two distinct times (too few rows or
        events to integrate a Brier score; Harrell's C, ``metric="cindex"``,
        needs no grid).

    Examples
    --------
    >>> from sksurv.util import Surv
    >>> y = Surv.from_arrays(event=[1, 1, 0, 1, 1, 0, 1, 1], time=[1, 2, 3, 4, 5, 6, 7, 8])
    >>> [round(float(t), 2) for t in survival_grid(y, y[1:7])]  # inside [2, 7)
    [2.0, 2.5, 3.0, 3.5, 4.0, 4.25, 4.5, 4.75, 5.0, 5.5, 6.0, 6.5]
    """
    y_train = _survival_array(y_train, "y_train")
    y_score = _survival_array(y_score, "y_score")
    lo = max(y_train["time"].min(), y_score["time"].min())
    hi = min(y_train["time"].max(), y_score["time"].max())
    for pool in (
        y_train["time"][y_train["event"]],
        np.unique(np.r_[y_train["time"], y_score["time"]]),
    ):
        grid = np.unique(np.quantile(pool, GRID_QUANTILES))
        grid = grid[(grid >= lo) & (grid < hi)]
        if len(grid) >= 2:
            return grid
        pool = pool[(pool >= lo) & (pool < hi)]
        if len(np.unique(pool)) >= 2:
            return np.unique(np.quantile(pool, GRID_QUANTILES))
    raise ValueError(
        f"the training and scoring rows share fewer than two distinct times in their "
        f"follow-up [{lo:g}, {hi:g}); too few rows or events to integrate a Brier score "
        "(metric='cindex' needs no grid)"
    )


def _step_values(times: np.ndarray, values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """A right-continuous step function (``values[..., k]`` from ``times[k]`` on; 1 before the
    first time) evaluated on ``grid``."""
    at = np.searchsorted(times, grid, side="right") - 1
    out = np.ones((*values.shape[:-1], len(grid)))
    out[..., at >= 0] = values[..., at[at >= 0]]
    return out


def _score_mask_survival(
    X_train: pd.DataFrame,
    y_train,
    X_val: pd.DataFrame | None,
    y_val,
    features: Sequence[str],
    metric: str | None,
    n_estimators: int,
    random_state,
) -> float:
    from sksurv.ensemble import RandomSurvivalForest
    from sksurv.metrics import concordance_index_censored
    from sksurv.nonparametric import kaplan_meier_estimator

    if metric is None:
        metric = DEFAULT_METRICS["survival"]
    if not isinstance(metric, str) or metric not in SURVIVAL_TUNING_METRICS:
        raise ValueError(
            f"metric={metric!r} cannot score a survival mask; for task='survival' use one of "
            f"{list(SURVIVAL_TUNING_METRICS)}"
        )
    oob = X_val is None
    y_tr = _survival_array(y_train, "y_train")
    y_sc = y_tr if oob else _survival_array(y_val, "y_val")
    parts = [("train", X_train, y_tr)]
    if not oob:
        parts.append(("val", X_val, y_sc))
    for part, X, y in parts:
        if len(y) != len(X):
            raise ValueError(f"y_{part} has {len(y)} values but X_{part} has {len(X)} rows")
    grid = survival_grid(y_tr, y_sc) if metric == "ibs" else None
    cols = [f for f in features if f in X_train.columns]
    if cols:
        model = RandomSurvivalForest(
            n_estimators=n_estimators,
            random_state=random_state,
            n_jobs=1,
            **({"bootstrap": True, "oob_score": True} if oob else {}),
        )
        X_tr = X_train[cols].to_numpy(dtype=np.float32)
        with warnings.catch_warnings():
            # a row that no tree left out (a chance of 0.37 ** n_estimators) is scored as
            # scikit-survival scores it; the survival curves take the mean over every tree
            warnings.filterwarnings("ignore", message="Some inputs do not have OOB scores")
            model.fit(X_tr, y_tr)
        if oob:
            risk = model.oob_prediction_
        else:
            X_sc = X_val[cols].to_numpy(dtype=np.float32)
            risk = model.predict(X_sc)
        if grid is not None:
            if oob:
                survival = _oob_survival(model, X_tr, grid)
            else:
                curves = model.predict_survival_function(X_sc, return_array=True)
                survival = _step_values(model.unique_times_, curves, grid)
    else:
        risk = np.zeros(len(y_sc))
        if grid is not None:
            km_times, km_survival = kaplan_meier_estimator(y_tr["event"], y_tr["time"])
            survival = np.tile(_step_values(km_times, km_survival, grid), (len(y_sc), 1))
    if metric == "cindex":
        if not y_sc["event"].any():
            logger.warning("scoring rows without an event: Harrell's C undefined, scored 0.5")
            return 0.5
        return float(concordance_index_censored(y_sc["event"], y_sc["time"], risk)[0])
    # scikit-survival's integrated Brier score, the censoring weights from the training rows
    value = float(brier_losses(y_sc, survival, grid, y_ref=y_tr).mean())
    if not math.isfinite(value):
        raise ValueError(f"the integrated Brier score of the mask is not finite ({value})")
    return value


def _oob_survival(model, X: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Each training row's survival curve on ``grid``: the mean over the trees that did not
    draw it (over every tree for a row that every tree drew)."""
    counts = sample_counts(model, len(X))
    total = np.zeros((len(X), len(grid)))
    n_trees = np.zeros(len(X))
    every = np.zeros((len(X), len(grid)))
    for tree, count in zip(model.estimators_, counts, strict=True):
        curves = _step_values(
            model.unique_times_, tree.predict_survival_function(X, return_array=True), grid
        )
        every += curves
        out = count == 0
        total[out] += curves[out]
        n_trees[out] += 1
    return np.where(
        (n_trees > 0)[:, None],
        total / np.maximum(n_trees, 1)[:, None],
        every / len(model.estimators_),
    )
