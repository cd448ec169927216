"""Choosing a strategy on a site's own validation rows (``strategy="auto"``).

The choice is a pure function of the candidates' validation scores: the best
score wins and ties go to the first strategy in
:data:`fedforest.vocabulary.STRATEGY_PREFERENCE`. It knows nothing of the
classifier; :meth:`fedforest.PooledForestClassifier.fit` hands it one predict
function that reuses the compiled forest for every candidate. The default
candidates (:func:`default_candidates`) are the same for the classifier and
for the job's evaluation (:func:`fedforest.federation.evaluation.evaluate_strategies`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..metrics import ROW_LOSSES, row_losses, score
from ..vocabulary import AUTO_METRICS, FITTED_STRATEGIES, STRATEGIES, TREE_SELECTION
from ..vocabulary import STRATEGY_PREFERENCE as PREFERENCE

logger = logging.getLogger(__name__)


def default_candidates(owners: Sequence[str], site: str | None) -> list[str]:
    """The strategies ``auto`` tries when it is given none.

    Every strategy that fits no parameter of its own on the validation rows
    (not :data:`~fedforest.vocabulary.FITTED_STRATEGIES`); the tree selection
    strategies (``park``, ``local``) only when ``site`` is one of ``owners``
    (the sites that trained trees of the forest), since they keep that site's
    trees.

    Examples
    --------
    >>> default_candidates(["s1", "s2"], "s1")
    ['fpv', 'pr', 'mi', 'ipr', 'mp', 'ss', 'node', 'park', 'local']
    >>> default_candidates(["s1", "s2"], None)
    ['fpv', 'pr', 'mi', 'ipr', 'mp', 'ss', 'node']
    """
    own_trees = site is not None and site in owners
    return [
        s
        for s in STRATEGIES
        if s not in FITTED_STRATEGIES and (s not in TREE_SELECTION or own_trees)
    ]


#: What ``auto`` can choose: the strategies and the intersection forest.
CANDIDATES = (*STRATEGIES, "intersection")
#: Order in which equally scoring candidates are preferred.
CANDIDATE_PREFERENCE = (*PREFERENCE, "intersection")


def check_candidates(candidates: Sequence[str]) -> list[str]:
    """Validate a list of candidate strategies (``intersection`` included)."""
    candidates = list(candidates)
    if not candidates:
        raise ValueError("candidates is empty; name at least one strategy")
    bad = [c for c in candidates if c not in CANDIDATES]
    if bad:
        raise ValueError(f"unknown strategies {bad}; choose from {list(CANDIDATES)}")
    fitted = [c for c in candidates if c in FITTED_STRATEGIES]
    if fitted:
        allowed = [s for s in CANDIDATES if s not in FITTED_STRATEGIES]
        raise ValueError(
            f"candidates {fitted} fit their own parameter on the validation rows and cannot "
            f"also be chosen on them; choose from {allowed}"
        )
    return candidates


def choose_strategy(
    predict_proba: Callable[[str], np.ndarray],
    candidates: Sequence[str],
    y_val,
    classes,
    metric: str = "auprc",
) -> tuple[str, dict[str, float]]:
    """Score every candidate on validation rows and return the best.

    Parameters
    ----------
    predict_proba : callable
        ``predict_proba(strategy)`` gives the validation rows' probabilities,
        columns in ``classes`` order.
    candidates : sequence of str
    y_val : array-like
        The validation labels.
    classes : array-like
    metric : str, default="auprc"

    Returns
    -------
    best : str
        The best strategy (ties: the first in the preference order).
    scores : dict of str to float
        Validation score of every candidate.

    Examples
    --------
    >>> import numpy as np
    >>> fixed = {"fpv": np.array([[.9, .1], [.2, .8]]), "mp": np.array([[.4, .6], [.2, .8]])}
    >>> choose_strategy(fixed.get, ["fpv", "mp"], [0, 1], [0, 1], metric="accuracy")
    ('fpv', {'fpv': 1.0, 'mp': 0.5})
    """
    scores: dict[str, float] = {}
    for name in check_candidates(candidates):
        scores[name] = score(metric, y_val, predict_proba(name), classes)
        logger.info("strategy %s: validation %s = %.4f", name, metric, scores[name])
    finite = {k: v for k, v in scores.items() if not math.isnan(v)}
    if not finite:
        raise ValueError(
            f"validation {metric} is undefined for every strategy (one class only in y_val?)"
        )
    order = {s: i for i, s in enumerate(PREFERENCE)}
    best = max(finite, key=lambda s: (finite[s], -order[s]))
    return best, scores


@dataclass
class Selection:
    """What ``auto`` chose on the validation rows.

    Attributes
    ----------
    best, runner_up : str or None
        The winning candidate and the second best (``None`` with one candidate).
    scores : dict of str to float
        Validation score of every candidate (cross-fitted when calibrated).
    fits : dict of str to CalibrationFit
        Every candidate's calibration, fitted on all validation rows.
    """

    best: str
    runner_up: str | None
    scores: dict
    fits: dict


def choose_calibrated(
    predict_proba: Callable[[str], np.ndarray],
    candidates: Sequence[str],
    y_val,
    classes,
    metric: str = "log_loss",
    calibration: str = "none",
    train_prior: Callable[[str], np.ndarray] | None = None,
    random_state=0,
    fit_for: Callable[[str], object] | None = None,
) -> Selection:
    """Score every candidate, calibrated as asked, on validation rows; keep the best.

    Each candidate's validation probabilities are calibrated with
    ``calibration`` (:func:`~fedforest.prediction.calibration.fit_calibration`;
    ``auto`` picks the method per candidate) and scored out of fold, so a
    calibrated variant competes on rows its calibrator did not see. With
    ``calibration="none"`` the scores are those of :func:`choose_strategy`.

    Parameters
    ----------
    predict_proba : callable
        ``predict_proba(candidate)`` gives the validation rows' probabilities.
    candidates : sequence of str
        Strategies, and ``intersection``.
    y_val, classes : array-like
    metric : str, default="log_loss"
        One of :data:`~fedforest.vocabulary.AUTO_METRICS` (lower is better for
        ``log_loss`` and ``brier``).
    calibration : str, default="none"
    train_prior : callable, optional
        ``train_prior(candidate)``: the class distribution its trees were
        trained on (``prior`` calibration).
    random_state : int, default=0
        Seed of the cross-fitting folds.
    fit_for : callable, optional
        ``fit_for(candidate)`` gives the candidate's
        :class:`~fedforest.prediction.calibration.CalibrationFit` when the
        caller already has it (the same as the one fitted here would be).

    Returns
    -------
    Selection

    Examples
    --------
    >>> import numpy as np
    >>> fixed = {"fpv": np.array([[.9, .1], [.2, .8]]), "mp": np.array([[.6, .4], [.4, .6]])}
    >>> sel = choose_calibrated(fixed.get, ["fpv", "mp"], [0, 1], [0, 1], "brier")
    >>> sel.best, sel.runner_up
    ('fpv', 'mp')
    """
    from .calibration import choose_variant, fit_calibration

    if metric not in AUTO_METRICS:
        raise ValueError(f"metric={metric!r} is not one of {list(AUTO_METRICS)}")
    scores: dict[str, float] = {}
    fits = {}
    for name in check_candidates(candidates):
        if fit_for is not None:
            fit = fit_for(name)
        else:
            proba = predict_proba(name)
            prior = train_prior(name) if train_prior is not None else None
            fit = fit_calibration(proba, y_val, classes, calibration, prior, random_state)
        fits[name] = fit
        scores[name] = score(metric, y_val, fit.cross_fitted, classes)
        logger.info(
            "candidate %s (calibration %s): validation %s = %.4f",
            name,
            fit.calibrator.method,
            metric,
            scores[name],
        )
    losses = None
    if metric in ROW_LOSSES:
        losses = {n: row_losses(metric, y_val, f.cross_fitted, classes) for n, f in fits.items()}
    best, runner_up = choose_variant(scores, metric, CANDIDATE_PREFERENCE, losses)
    return Selection(best, runner_up, scores, fits)
