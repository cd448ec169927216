"""Choosing a strategy on a site's own validation rows (``strategy="auto"``)."""

from __future__ import annotations

import logging
import math

from sklearn.base import clone

from .metrics import score
from .strategies import STRATEGIES, TREE_SELECTION

logger = logging.getLogger(__name__)

#: Order in which equally scoring strategies are preferred.
PREFERENCE = ("mp", "ipr", "ss", "mi", "pr", "fpv", "park", "local")


def select_strategy(forest, X_val, y_val, candidates=None, metric="auprc", **params):
    """Score strategies on validation rows and return the best.

    Parameters
    ----------
    forest : PooledForest or PooledForestClassifier
        The pooled forest, or a classifier whose other parameters (imputers,
        feature_std, site, seed, ...) are used for every candidate.
    X_val : DataFrame
        Validation rows, with the site's columns.
    y_val : array-like
        Their labels.
    candidates : sequence of str, optional
        Strategies to try; default every strategy that applies (``park`` and
        ``local`` only when ``site`` is given).
    metric : str, default="auprc"
        Metric to maximise (see :func:`fedforest.metrics.score`).
    **params
        Classifier parameters when ``forest`` is a PooledForest.

    Returns
    -------
    best : str
        The best strategy (ties: the first in :data:`PREFERENCE`).
    scores : dict of str to float
        Validation score of every candidate.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from fedforest import PooledForest, select_strategy
    >>> rng = np.random.RandomState(0)
    >>> X = pd.DataFrame(rng.normal(size=(300, 3)), columns=["a", "b", "c"])
    >>> y = (X["a"] + X["c"] > 0).astype(int)
    >>> rf = RandomForestClassifier(n_estimators=20, random_state=0).fit(X[:200], y[:200])
    >>> forest = PooledForest.from_sklearn(rf, ["a", "b", "c"], owner="s1")
    >>> best, scores = select_strategy(forest, X[200:][["a", "b"]], y[200:],
    ...                                candidates=["fpv", "mp"], random_state=0)
    >>> best in ("fpv", "mp")
    True
    """
    from .classifier import PooledForestClassifier

    if isinstance(forest, PooledForestClassifier):
        template = clone(forest)
        template.set_params(**params)
    else:
        template = PooledForestClassifier(forest, **params)
    if candidates is None:
        candidates = [s for s in STRATEGIES if s not in TREE_SELECTION or template.site is not None]
    candidates = list(candidates)
    if not candidates:
        raise ValueError("candidates is empty; name at least one strategy")
    bad = [c for c in candidates if c not in STRATEGIES]
    if bad:
        raise ValueError(f"unknown strategies {bad}; choose from {list(STRATEGIES)}")
    scores: dict[str, float] = {}
    for name in candidates:
        clf = clone(template).set_params(strategy=name)
        proba = clf.predict_proba(X_val)
        scores[name] = score(metric, y_val, proba, clf.classes_)
        logger.info("strategy %s: validation %s = %.4f", name, metric, scores[name])
    finite = {k: v for k, v in scores.items() if not math.isnan(v)}
    if not finite:
        raise ValueError(
            f"validation {metric} is undefined for every strategy (one class only in y_val?)"
        )
    order = {s: i for i, s in enumerate(PREFERENCE)}
    best = max(finite, key=lambda s: (finite[s], -order[s]))
    return best, scores
