"""The two engines of the dynamic traversals, behind one call each.

:func:`marginal` and :func:`resolved_leaves` run a traversal with the numba
kernels (:mod:`.numba_kernels`) when :func:`load_kernels` gives them, and
with the vectorised numpy walk (:mod:`.routing`) otherwise; both give the
same results bit for bit.
"""

from __future__ import annotations

import importlib
import logging

import numpy as np

from .routing import route_leaves, route_marginal
from .strategies import Strategy

logger = logging.getLogger(__name__)

#: ``engine="auto"`` runs the numba kernels on dynamic traversals of at least
#: this many (row, tree) pairs; smaller ones do not repay importing numba and
#: loading (or, the first time, compiling: a few seconds) the kernels.
AUTO_NUMBA_PAIRS = 200_000

#: Whether :func:`load_kernels` has logged why numba cannot be used.
_KERNELS_MISSING_LOGGED = False


def load_kernels():
    """The compiled kernels (:mod:`.numba_kernels`) if numba can be imported.

    Returns
    -------
    kernels : module or None
        ``None`` when the import failed.
    error : Exception or None
        Why it failed (logged once: numba is optional).
    """
    global _KERNELS_MISSING_LOGGED
    try:
        return importlib.import_module(".numba_kernels", __package__), None
    # numba missing, unusable with this numpy, or without a place to cache its compiled code
    except Exception as exc:  # the numpy engine gives the same predictions
        if not _KERNELS_MISSING_LOGGED:
            _KERNELS_MISSING_LOGGED = True
            missing = isinstance(exc, ImportError) and exc.name == "numba"
            logger.log(
                logging.INFO if missing else logging.WARNING,
                "numba cannot be used (%s: %s); the numpy engine runs instead",
                type(exc).__name__,
                exc,
            )
        return None, exc


def kernels_for(engine: str, n_pairs: int | None = None):
    """The numba kernels for a traversal of ``n_pairs`` (row, tree) pairs, or ``None`` for numpy.

    ``engine`` is one of :data:`~fedforest.vocabulary.ENGINES`: ``numpy`` never
    uses numba, ``auto`` uses it from :data:`AUTO_NUMBA_PAIRS` pairs on (and
    for ``n_pairs=None``) when it can be imported, ``numba`` always (an
    ``ImportError`` without it).
    """
    if engine == "numpy":
        return None
    if engine == "auto" and n_pairs is not None and n_pairs < AUTO_NUMBA_PAIRS:
        return None
    kernels, error = load_kernels()
    if kernels is None and engine == "numba":
        raise ImportError(
            f"engine='numba' needs numba, which cannot be imported ({error}); install it "
            "with `pip install 'fedforest[fast]'` (or numba>=0.59), or use engine='auto' "
            "or 'numpy'"
        ) from error
    return kernels


def marginal(kernels, cf, X, trees, rules: Strategy, absent, weights=None) -> np.ndarray:
    """Marginal prediction of ``X`` averaged over ``trees``, by either engine.

    With ``weights`` (one per tree of ``trees``) the trees of equal weight are
    averaged together, and the groups are combined by their summed weight.
    """
    if weights is not None:
        total = np.zeros((X.shape[0], cf.value.shape[1]))
        for w in np.unique(weights):
            group = trees[weights == w]
            if w > 0:
                total += (w * len(group)) * marginal(kernels, cf, X, group, rules, absent)
        return total / weights.sum()
    if kernels is None:
        dist = route_marginal(cf, X, trees, rules.right_probability, absent)
        return sum_in_order(dist) / len(trees)
    return kernels.marginal_proba(cf, X, trees, rules.kernel_tables(), absent)


def resolved_leaves(kernels, cf, X, trees, rules: Strategy | None) -> np.ndarray:
    """Leaves of ``X``, missing values resolved by ``rules`` (``None``: learned direction)."""
    if kernels is None:
        return route_leaves(cf, X, trees, None if rules is None else rules.resolver)
    return kernels.route_leaves(cf, X, trees, rules)


def sum_in_order(dist: np.ndarray) -> np.ndarray:
    """Sum per-tree distributions tree after tree (scikit-learn's order)."""
    total = np.zeros(dist.shape[1:])
    for t in range(dist.shape[0]):
        total += dist[t]
    return total


def marginal_out_of_bag(
    kernels, cf, X, trees, rules: Strategy, absent, weights, out_of_bag: np.ndarray
) -> np.ndarray:
    """:func:`marginal` of each row over its out-of-bag trees only.

    ``out_of_bag`` (bool, ``(len(trees), n_rows)``) marks the (tree, row)
    pairs that count. Each tree's marginal distributions are computed for
    every row (by the numpy walk at once, or by the kernels one tree at a
    time: no loop over rows), then summed tree after tree where the pair
    counts, as :func:`marginal` sums them, and divided by the row's number
    of such trees; with ``weights`` the trees of equal weight are averaged
    together and the groups combined by their summed weight, as
    :func:`marginal` does. A row whose every pair counts gets :func:`marginal`'s
    bits. A row without a counted tree (of positive weight) is all zero.
    """
    dist = _per_tree_marginal(kernels, cf, X, trees, rules, absent)
    if weights is None:
        return _masked_mean(dist, out_of_bag)
    weights = np.asarray(weights, dtype=np.float64)
    total = np.zeros((X.shape[0], cf.value.shape[1]))
    for w in np.unique(weights):
        group = np.flatnonzero(weights == w)
        if w > 0:
            mean = _masked_mean(dist[group], out_of_bag[group])
            total += (w * out_of_bag[group].sum(axis=0))[:, None] * mean
    # each row's counted weight, summed as weights.sum() sums a full row
    counted = np.ascontiguousarray(np.where(out_of_bag, weights[:, None], 0.0).T).sum(axis=1)
    has = counted > 0
    total[has] /= counted[has, None]
    total[~has] = 0.0
    return total


def _per_tree_marginal(kernels, cf, X, trees, rules: Strategy, absent) -> np.ndarray:
    """Each tree's marginal distribution of every row, shape (len(trees), n_rows, n_outputs)."""
    if kernels is None:
        return route_marginal(cf, X, trees, rules.right_probability, absent)
    # one tree at a time: the kernel's sum over one tree is that tree's distribution, bit for bit
    return kernels.marginal_per_tree(cf, X, trees, rules.kernel_tables(), absent)


def _masked_mean(dist: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per row, the sum in tree order of the counted trees' rows of ``dist``, divided by
    their number (0 where there is none)."""
    total = np.zeros(dist.shape[1:])
    for t in range(dist.shape[0]):
        total += np.where(counts[t][:, None], dist[t], 0.0)
    n = counts.sum(axis=0)
    has = n > 0
    total[has] /= n[has, None]
    return total
