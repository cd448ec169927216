"""Choosing a strategy on a site's own validation rows (``strategy="auto"``).

Each candidate (a strategy, or the intersection forest) is calibrated as the
classifier's ``calibration`` says and scored on cross-fitted validation
probabilities (:func:`choose_calibrated`). The choice is a pure function of
these scores: the best wins, and ties go to the first candidate in the
registry's preference order (:func:`fedforest.rules.preference`). On held-out
validation rows a tie, for log-loss and Brier, is a difference within one
standard error of the per-row losses; out of bag (every training row scored)
the lowest score wins. It
knows nothing of the classifier; :meth:`fedforest.PooledForestClassifier.fit` hands it one predict
function that reuses the compiled forest for every candidate. The default
candidates (:func:`default_candidates`) are the same for the classifier and
for the job's evaluation (:func:`fedforest.federation.evaluation.evaluate_strategies`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .. import rules
from ..metrics import ROW_LOSSES, row_losses, score
from ..vocabulary import AUTO_METRICS

logger = logging.getLogger(__name__)


def default_candidates(
    owners: Sequence[str], site: str | None, intersection: bool = False
) -> list[str]:
    """The strategies ``auto`` tries when it is given none.

    Every rule of the registry that declares itself a candidate (none that
    fits a parameter of its own on the validation rows, :func:`fedforest.rules.fitted`),
    in registration order; the tree selections (``park``, ``local``) only when
    ``site`` is one of ``owners`` (the sites that trained trees of the
    forest), since they keep that site's trees; ``intersection`` only with an
    intersection forest.

    Examples
    --------
    >>> default_candidates(["s1", "s2"], "s1")
    ['fpv', 'pr', 'mi', 'ipr', 'mp', 'ss', 'node', 'park', 'local']
    >>> default_candidates(["s1", "s2"], None, intersection=True)
    ['fpv', 'pr', 'mi', 'ipr', 'mp', 'ss', 'node', 'intersection']
    """
    return rules.candidates(site is not None and site in owners, intersection)


def candidate_preference() -> tuple[str, ...]:
    """Order in which equally scoring candidates are preferred (the registry's)."""
    return rules.preference()


def check_candidates(candidates: Sequence[str]) -> list[str]:
    """Validate a list of candidate strategies (``intersection`` included): what ``auto``
    can choose (:func:`fedforest.rules.deployable`), none of them fitted."""
    candidates = list(candidates)
    if not candidates:
        raise ValueError("candidates is empty; name at least one strategy")
    choosable = rules.deployable()
    bad = [c for c in candidates if c not in choosable]
    if bad:
        raise ValueError(f"unknown strategies {bad}; choose from {list(choosable)}")
    fitted = [c for c in candidates if rules.get(c).fitted]
    if fitted:
        allowed = [s for s in choosable if not rules.get(s).fitted]
        raise ValueError(
            f"candidates {fitted} fit their own parameter on the validation rows and cannot "
            f"also be chosen on them; choose from {allowed}"
        )
    return candidates


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
    standard_error_ties: bool = True,
) -> Selection:
    """Score every candidate, calibrated as asked, on validation rows; keep the best.

    Each candidate's validation probabilities are calibrated with
    ``calibration`` (:func:`~fedforest.prediction.calibration.fit_calibration`;
    ``auto`` picks the method per candidate) and scored out of fold, so a
    calibrated variant competes on rows its calibrator did not see. With
    ``calibration="none"`` each candidate is scored on its own probabilities.

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
    standard_error_ties : bool, default=True
        Whether, for a metric that is a mean of per-row losses, a candidate
        within one standard error of the lowest counts as tied with it (the
        first tied candidate in the preference order wins:
        :func:`~fedforest.prediction.calibration.choose_variant`), as on a few
        held-out validation rows. ``False``: the lowest score wins, as on
        every training row scored out of bag.

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
    if standard_error_ties and metric in ROW_LOSSES:
        losses = {n: row_losses(metric, y_val, f.cross_fitted, classes) for n, f in fits.items()}
    best, runner_up = choose_variant(scores, metric, candidate_preference(), losses)
    return Selection(best, runner_up, scores, fits)
