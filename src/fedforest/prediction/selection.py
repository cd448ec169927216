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

import numpy as np

from ..metrics import score
from ..vocabulary import FITTED_STRATEGIES, STRATEGIES, TREE_SELECTION
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


def check_candidates(candidates: Sequence[str]) -> list[str]:
    """Validate a list of candidate strategies."""
    candidates = list(candidates)
    if not candidates:
        raise ValueError("candidates is empty; name at least one strategy")
    bad = [c for c in candidates if c not in STRATEGIES]
    if bad:
        raise ValueError(f"unknown strategies {bad}; choose from {list(STRATEGIES)}")
    fitted = [c for c in candidates if c in FITTED_STRATEGIES]
    if fitted:
        allowed = [s for s in STRATEGIES if s not in FITTED_STRATEGIES]
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
