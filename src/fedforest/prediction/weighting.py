"""Weighted marginal prediction (``wmp``): trees that had to guess count less.

For a row at a site, a tree of the pooled forest is *certain* when the row's
path reaches a leaf without meeting a split on a feature the row lacks (nodes
that learned a direction for missing values count as seen); otherwise the tree
*guesses*, and marginal prediction (``mp``) spreads the row over the children
of every such split. ``wmp`` averages the trees' ``mp`` distributions with
weight 1 for a certain tree and ``w`` (the *guess weight*, in [0, 1]) for a
guessing one::

    p_wmp = (sum_certain p_t + w * sum_guessing p_t) / (n_certain + w * n_guessing)

``w = 1`` is ``mp``; ``w = 0`` keeps the certain trees only, which is ``fpv``
with soft voting (a row without a certain tree gets its ``mp`` prediction,
as ``fpv`` rows do). A site fits ``w`` on its own validation rows: the value of
:data:`GUESS_WEIGHTS` with the lowest Brier score (a proper score, defined
even when the validation rows hold one class; ties go to the larger weight,
the closer to ``mp``).

Both sums come from two predictions the classifier already makes: ``fpv``
(soft) averages the certain trees, ``mp`` averages all of them, so
``sum_certain p_t = n_certain * p_fpv`` and
``sum_guessing p_t = n * p_mp - n_certain * p_fpv``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import numpy as np

from ..metrics import squared_errors

logger = logging.getLogger(__name__)

#: Guess weights a site chooses from on its validation rows.
GUESS_WEIGHTS = (0.0, 0.03, 0.1, 0.2, 0.3, 0.5, 1.0)


def check_guess_weight(value, name: str = "guess_weight"):
    """``"auto"`` or a number in [0, 1]; a clear error otherwise."""
    if isinstance(value, str) and value == "auto":
        return value
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not 0.0 <= float(value) <= 1.0
    ):
        raise ValueError(f"{name}={value!r} must be 'auto' or a number in [0, 1]")
    return float(value)


def weighted_marginal(
    p_certain: np.ndarray,
    n_certain: np.ndarray,
    p_mp: np.ndarray,
    n_trees,
    weight: float,
    distribution: bool = True,
) -> np.ndarray:
    """Combine the certain trees' average and the ``mp`` average with a guess weight.

    Parameters
    ----------
    p_certain : ndarray of shape (n_rows, n_classes)
        Average distribution of the certain trees (``fpv``, soft voting);
        any value where ``n_certain`` is 0.
    n_certain : ndarray of shape (n_rows,)
        Number of certain trees per row.
    p_mp : ndarray of shape (n_rows, n_classes)
        Average ``mp`` distribution of all ``n_trees`` trees.
    n_trees : int or ndarray of shape (n_rows,)
        The number of trees (or their summed weight); per row for an
        out-of-bag prediction, where each row has its own trees.
    weight : float
        The guess weight, in [0, 1].
    distribution : bool, default=True
        Whether the rows are class distributions (each sums to 1): the
        guessing trees' share, a difference, is clipped at 0 and every row
        renormalised against rounding. ``False`` for regression, whose one
        column is a mean of any sign, taken as it is.

    Returns
    -------
    ndarray of shape (n_rows, n_classes)
        ``p_mp`` for ``weight == 1`` and for rows without a certain tree at
        ``weight == 0``; ``p_certain`` (unchanged, bit for bit) for rows whose
        every tree is certain and, at ``weight == 0``, for every row with a
        certain tree.

    Examples
    --------
    >>> import numpy as np
    >>> p_fpv, p_mp = np.array([[1.0, 0.0]]), np.array([[0.5, 0.5]])
    >>> weighted_marginal(p_fpv, np.array([2]), p_mp, 4, 0.0)
    array([[1., 0.]])
    >>> weighted_marginal(p_fpv, np.array([2]), p_mp, 4, 1.0)
    array([[0.5, 0.5]])
    >>> weighted_marginal(np.array([[-2.0]]), np.array([2]), np.array([[1.0]]), 4, 0.5,
    ...                   distribution=False)  # (2 * -2 + 0.5 * (4 * 1 + 4)) / 3
    array([[0.]])
    """
    counts = np.asarray(n_certain, dtype=np.float64)
    if weight == 1.0:
        return np.array(p_mp, dtype=np.float64)
    n_certain = counts[:, None]
    # per row (out of bag) or one number for every row
    n_rows = n_trees if np.ndim(n_trees) == 0 else np.asarray(n_trees, dtype=np.float64)
    n_trees = n_rows if np.ndim(n_trees) == 0 else n_rows[:, None]
    certain_sum = n_certain * np.where(n_certain > 0, p_certain, 0.0)
    guessing_sum = n_trees * p_mp - certain_sum
    if distribution:
        guessing_sum = np.clip(guessing_sum, 0.0, None)
    total = n_certain + weight * (n_trees - n_certain)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (certain_sum + weight * guessing_sum) / total
    if distribution:
        # rounding in the subtraction: renormalise so that every row sums to 1 as p_mp does
        sums = out.sum(axis=1, keepdims=True)
        out = np.where(sums > 0, out / np.where(sums > 0, sums, 1.0), p_mp)
    # the limits exactly: only certain trees (every tree, or weight 0), or none at all
    exact = (counts >= n_rows) | ((weight == 0.0) & (counts > 0))
    out[exact] = p_certain[exact]
    none = total[:, 0] <= 0
    out[none] = p_mp[none]
    return out


def brier_score(y, proba: np.ndarray, classes) -> float:
    """Mean over rows of the squared distance between ``proba`` and the one-hot label."""
    classes = np.asarray(classes)
    onehot = (np.asarray(y)[:, None] == classes[None, :]).astype(np.float64)
    return float(((proba - onehot) ** 2).sum(axis=1).mean())


def fit_guess_weight(
    p_certain: np.ndarray,
    n_certain: np.ndarray,
    p_mp: np.ndarray,
    n_trees,
    y,
    classes,
    candidates: Sequence[float] = GUESS_WEIGHTS,
    loss=None,
) -> tuple[float, dict[float, float]]:
    """The guess weight with the lowest Brier score (regression: squared error) on validation rows.

    Parameters
    ----------
    p_certain, n_certain, p_mp, n_trees
        As for :func:`weighted_marginal`, on the validation rows.
    y : array-like of shape (n_rows,)
        The validation labels.
    classes : array-like or None
        Column order of the probabilities; ``None`` for regression (one
        column, the prediction), scored by the mean squared error.
    candidates : sequence of float, default=GUESS_WEIGHTS
    loss : callable, optional
        ``loss(values) -> float``, the mean loss of combined values (rows of
        any width, taken as they are): survival curves are scored by their
        integrated Brier score. Replaces the Brier score and squared error.

    Returns
    -------
    weight : float
        The best candidate (ties: the larger).
    scores : dict of float to float
        Validation Brier score of every candidate (lower is better).

    Raises
    ------
    ValueError
        Without validation rows.

    Examples
    --------
    >>> import numpy as np
    >>> p_fpv, p_mp = np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[0.6, 0.4], [0.5, 0.5]])
    >>> fit_guess_weight(p_fpv, np.array([5, 5]), p_mp, 10, [0, 1], [0, 1], (0.0, 1.0))[0]
    0.0
    """
    y = np.asarray(y)
    if y.size == 0:
        raise ValueError("strategy 'wmp' fits its guess weight on validation rows; none given")

    def error(w):
        predicted = weighted_marginal(
            p_certain, n_certain, p_mp, n_trees, w, distribution=classes is not None
        )
        if loss is not None:
            return float(loss(predicted))
        if classes is None:  # regression: the mean squared error
            return float(np.mean(squared_errors(y, predicted)))
        return brier_score(y, predicted, classes)

    scores = {float(w): error(w) for w in candidates}
    best = min(scores, key=lambda w: (scores[w], -w))
    logger.info(
        "wmp: guess weight %g (validation %s %s)",
        best,
        "loss" if loss is not None else "Brier" if classes is not None else "squared error",
        ", ".join(f"{w:g}: {s:.4f}" for w, s in scores.items()),
    )
    return best, scores


def tree_weights(forest, owner_weights) -> np.ndarray | None:
    """Each tree's pooling weight from its owner's (``None``: every tree counts the same).

    Parameters
    ----------
    forest : PooledForest
    owner_weights : mapping of str to float or None
        A weight >= 0 for every site in ``forest.owners`` (``pooling.weights:
        rows`` gives each site its training rows), at least one positive.
        Equal weights give ``None``: the unweighted average, bit for bit.

    Examples
    --------
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> forest = SimpleNamespace(owners=["a", "b"], tree_owner=np.array([0, 0, 1]))
    >>> tree_weights(forest, {"a": 30, "b": 200})
    array([ 30.,  30., 200.])
    >>> tree_weights(forest, {"a": 5, "b": 5}) is None
    True
    """
    if owner_weights is None:
        return None
    if not isinstance(owner_weights, Mapping):
        raise ValueError(
            f"owner_weights must map each site of the forest to a weight >= 0, got "
            f"{type(owner_weights).__name__}"
        )
    missing = [o for o in forest.owners if o not in owner_weights]
    extra = [o for o in owner_weights if o not in forest.owners]
    if missing or extra:
        raise ValueError(
            f"owner_weights must name exactly the forest's sites {forest.owners}; "
            + (f"missing {missing}" if missing else f"unknown {extra}")
        )
    values = np.asarray([_owner_weight(owner, owner_weights[owner]) for owner in forest.owners])
    if not np.any(values > 0):
        raise ValueError(f"owner_weights={dict(owner_weights)} gives every site weight 0")
    if np.all(values == values[0]):
        return None
    return values[np.asarray(forest.tree_owner)]


def _owner_weight(owner: str, w) -> float:
    """One site's pooling weight: a finite number >= 0."""
    if isinstance(w, bool) or not isinstance(w, (int, float, np.integer, np.floating)):
        raise ValueError(f"owner_weights[{owner!r}]={w!r} must be a number >= 0")
    if not np.isfinite(w) or w < 0:
        raise ValueError(f"owner_weights[{owner!r}]={w!r} must be a finite number >= 0")
    return float(w)
