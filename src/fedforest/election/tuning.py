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
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from ..metrics import best_first, is_better, score_values
from ..metrics import score as metric_score
from ..vocabulary import LOWER_IS_BETTER, METRICS, REGRESSION_METRICS, TASKS
from .ballot import Ballot, ElectionResult, check_freedom_degree
from .selectors import _numeric_target

logger = logging.getLogger(__name__)

#: What :func:`score_mask` reports when no metric is given, per task.
DEFAULT_METRICS = {"classification": "auprc", "regression": "rmse"}
#: Every metric a mask can be scored by (classification, then regression).
TUNING_METRICS = (*METRICS, *REGRESSION_METRICS)


@dataclass
class TuningStep:
    """One evaluated freedom degree."""

    freedom_degree: float
    n_features: int
    score: float
    reused: bool = False  # the mask was already scored at another freedom degree


@dataclass
class TuningResult:
    """The chosen freedom degree, its election and the search history."""

    freedom_degree: float
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
        ``mae``, ``brier``, ``log_loss``, ``ece``) is minimised; ``None`` or
        any other metric is maximised.

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
    lower = metric in LOWER_IS_BETTER

    by_fd: dict[float, float] = {}
    by_mask: dict[tuple, float] = {}
    elections: dict[float, ElectionResult] = {}
    history: list[TuningStep] = []
    scored = 0

    def evaluate(fd: float) -> float:
        nonlocal scored
        fd = round(fd, 6)
        if fd in by_fd:
            return by_fd[fd]
        result = ballot.count(fd)
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
            "tuning: freedom degree %.4f keeps %d features, score %.4f%s",
            fd,
            len(result.selected),
            s,
            " (same mask as before)" if reused else "",
        )
        return s

    fd = round(start, 6)
    current = evaluate(fd)
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
    chosen = min(good, key=lambda f: (len(elections[f].selected), best_first(metric, by_fd[f]), f))
    return TuningResult(chosen, by_fd[chosen], elections[chosen], history)


def pool_scores(metric: str | None, scores: Sequence[float], n_rows: Sequence[int]) -> float:
    """Pool the sites' scores of one mask into the score :func:`hill_climb` compares.

    The row-weighted mean of the scores, except for ``rmse``: the root of the
    row-weighted mean of their squares, which is the RMSE over all the sites'
    validation rows together (a plain mean of RMSEs is not). ``mae`` pools
    exactly as a mean; a mean of ``r2`` (or of a ranking metric) is the usual
    approximation.

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
        lower is better; ``r2``), None means ``"rmse"``.
    n_estimators : int, default=50
    random_state : int or None
    task : {"classification", "regression"}, default="classification"
        ``"regression"`` fits a ``RandomForestRegressor``.

    Returns
    -------
    float
        The validation (or out-of-bag) score; a score the metric leaves
        undefined (AUC with one class present, R² of a constant validation
        target) is 0.0.

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
    """
    if not isinstance(task, str) or task not in TASKS:
        raise ValueError(f"task={task!r} is not one of {list(TASKS)}")
    if (X_val is None) != (y_val is None):
        raise ValueError(
            "X_val and y_val must both be given (validation rows) or both be None (the "
            "training rows scored out of bag)"
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
