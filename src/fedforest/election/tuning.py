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
per-site step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier

from ..metrics import score as metric_score
from .ballot import Ballot, ElectionResult, check_freedom_degree

logger = logging.getLogger(__name__)


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
) -> TuningResult:
    """Tune the freedom degree of ``ballot`` by hill-climbing ``score``.

    Parameters
    ----------
    ballot : Ballot
        The counted votes.
    score : callable
        ``score(selected_features) -> float``, higher is better.
    start : float, default=0.5
        First freedom degree.
    rounds : int, default=5
        Most masks scored (each costs a round of site evaluations in a job).
    step : float, default=0.1
        First step.
    tolerance : float, default=0.0
        Masks scoring within ``tolerance`` of the best count as equally good;
        the smallest of them is chosen.
    min_step : float, default=0.0125
        Stop once the step is halved below this.

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
        if s > current or elections[candidate].selected == elections[fd].selected:
            # better, or the same mask (a flat stretch of the discrete rule): keep going
            fd, current = candidate, max(s, current)
        else:
            direction, step = -direction, step / 2
    best = max(by_fd.values())
    good = [f for f, s in by_fd.items() if s >= best - tolerance]
    chosen = min(good, key=lambda f: (len(elections[f].selected), -by_fd[f], f))
    return TuningResult(chosen, by_fd[chosen], elections[chosen], history)


def score_mask(
    X_train: pd.DataFrame,
    y_train,
    X_val: pd.DataFrame,
    y_val,
    features: Sequence[str],
    classes: Sequence,
    metric: str = "auprc",
    n_estimators: int = 50,
    random_state=None,
) -> float:
    """Score a proposed mask at one site: a small forest on the site's columns of it.

    A site that has none of the features scores the constant predictor (its
    training class frequencies).

    Parameters
    ----------
    X_train, X_val : DataFrame
        The site's encoded training and validation rows.
    y_train, y_val : array-like
    features : sequence of str
        The proposed mask (global names); columns the site lacks are skipped.
    classes : sequence
        Global class list (the columns of the probabilities scored).
    metric : str, default="auprc"
    n_estimators : int, default=50
    random_state : int or None

    Returns
    -------
    float
    """
    classes = np.asarray(classes)
    cols = [f for f in features if f in X_train.columns]
    proba = np.zeros((len(X_val), len(classes)))
    if cols:
        model = RandomForestClassifier(
            n_estimators=n_estimators, random_state=random_state, n_jobs=1
        )
        model.fit(X_train[cols].to_numpy(dtype=np.float32), np.asarray(y_train))
        p = model.predict_proba(X_val[cols].to_numpy(dtype=np.float32))
        proba[:, np.searchsorted(classes, model.classes_)] = p
    else:
        labels, counts = np.unique(np.asarray(y_train), return_counts=True)
        proba[:, np.searchsorted(classes, labels)] = counts / counts.sum()
    value = metric_score(metric, y_val, proba, classes)
    return float(value) if np.isfinite(value) else 0.0
