"""Out-of-bag prediction: each row scored only by the trees that did not train on it.

A site can fit what it fits on validation rows (``auto``'s choice, the
calibrator, ``wmp``'s guess weight) on its own *training* rows instead,
scored out of bag: a row is predicted by the pooled forest without the trees
that trained on it (the other sites' trees never saw it; the site's own trees
saw only their bootstrap sample), exactly as scikit-learn's
``oob_decision_function_`` averages only the trees a row was out of bag for.

:class:`InBag` holds "tree trained on row" for the rows of one table: one
boolean matrix for the pooled forest, and one for the intersection forest
when there is one. Passed as ``in_bag=`` to the estimators' ``fit``,
``predict_proba`` and ``predict``, a tree that trained on a row is left out
of that row's prediction exactly as a discarded tree is, for every strategy
and both engines (:func:`fedforest.prediction.pipeline.predict_rule`), and
the remaining trees are averaged with the ensemble's pooling weights.

A row that every tree trained on (or whose out-of-bag trees all weigh 0) has
no out-of-bag prediction: its values are NaN and the prediction's
diagnostics name it (``unscored_rows``); :meth:`InBag.scored` tells them
apart beforehand, and ``fit`` leaves them out (their number logged).
"""

from __future__ import annotations

import numpy as np

from ..model.forest import PooledForest
from ..model.in_bag import InBagRecord


class InBag:
    """Which trees trained on which rows of one table.

    Parameters
    ----------
    forest : ndarray of bool, shape (n_trees, n_rows)
        ``True`` where the pooled forest's tree trained on the row.
    intersection : ndarray of bool, shape (n_intersection_trees, n_rows), optional
        The same for the intersection forest.

    Examples
    --------
    >>> import numpy as np
    >>> bag = InBag(np.array([[True, False], [False, False]]))
    >>> bag.n_rows, bag.scored().tolist()
    (2, [True, True])
    >>> InBag(np.ones((2, 2), int))
    Traceback (most recent call last):
    ...
    ValueError: in_bag: the forest's matrix must be a bool array ("tree trained on row"), got int64
    """

    def __init__(self, forest, intersection=None):
        self.forest = _matrix(forest, "the forest's matrix")
        self.intersection = (
            None if intersection is None else _matrix(intersection, "the intersection matrix")
        )
        if self.intersection is not None and self.intersection.shape[1] != self.n_rows:
            raise ValueError(
                f"in_bag: the intersection matrix has {self.intersection.shape[1]} rows, the "
                f"forest's {self.n_rows}"
            )

    @classmethod
    def from_records(
        cls,
        forest: PooledForest,
        record: InBagRecord | None,
        intersection: PooledForest | None = None,
        intersection_record: InBagRecord | None = None,
    ) -> InBag:
        """The matrices of a site's records for a pooled forest (and intersection forest).

        A record that is ``None`` (the site sent no such forest) means no
        tree of that forest trained on the site's rows; at least one record
        is needed for the number of rows.
        """
        known = record or intersection_record
        if known is None:
            raise ValueError("in_bag: no in-bag record given")
        n_rows = known.n_rows

        def of(f, rec):
            if rec is None:
                return np.zeros((f.n_trees, n_rows), dtype=bool)
            return rec.matrix(f)

        inter = None if intersection is None else of(intersection, intersection_record)
        return cls(of(forest, record), inter)

    @classmethod
    def for_model(cls, model, records: tuple[InBagRecord | None, InBagRecord | None]) -> InBag:
        """A site's matrices for a pooled model's forest and intersection forest.

        ``records`` are ``(forest record, intersection record)`` as the site kept
        them when it trained (:attr:`~fedforest.federation.training.SiteModels.records`);
        ``model`` is a :class:`~fedforest.model.pooled_model.PooledModel` (its
        ``forest`` and ``intersection``). A job's site and the experiment runner
        both take their out-of-bag matrices from here.
        """
        record, intersection_record = records
        return cls.from_records(model.forest, record, model.intersection, intersection_record)

    @property
    def n_rows(self) -> int:
        """The number of rows."""
        return int(self.forest.shape[1])

    def check(self, forest: PooledForest, n_rows: int, intersection: bool = False) -> np.ndarray:
        """The matrix for ``forest`` (the intersection forest with ``intersection``), checked.

        Raises
        ------
        ValueError
            When the matrix is missing or its shape is not (forest.n_trees, n_rows).
        """
        matrix = self.intersection if intersection else self.forest
        what = "intersection forest" if intersection else "forest"
        if matrix is None:
            raise ValueError(
                f"in_bag has no matrix for the {what}; give InBag(..., intersection=...)"
            )
        if matrix.shape != (forest.n_trees, n_rows):
            raise ValueError(
                f"in_bag: the {what}'s matrix has shape {matrix.shape}, expected "
                f"({forest.n_trees}, {n_rows}): one row per tree of the {what}, one column "
                "per row of X"
            )
        return matrix

    def scored(self, weights=None, intersection_weights=None) -> np.ndarray:
        """Rows with an out-of-bag prediction: an out-of-bag tree of positive weight in the
        forest (and in the intersection forest, when there is one).

        ``weights`` are the trees' pooling weights (``None``: equal).
        """
        out = _any_out(self.forest, weights)
        if self.intersection is not None:
            out &= _any_out(self.intersection, intersection_weights)
        return out

    def rows(self, mask) -> InBag:
        """The same trees for the rows in ``mask`` (a bool mask or indices)."""
        return InBag(
            self.forest[:, mask],
            None if self.intersection is None else self.intersection[:, mask],
        )

    def __repr__(self) -> str:
        inter = "" if self.intersection is None else f", intersection={self.intersection.shape}"
        return f"InBag(forest={self.forest.shape}{inter})"


def _matrix(value, what: str) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise TypeError(f"in_bag: {what} must be a numpy array, got {type(value).__name__}")
    if value.dtype != bool:
        raise ValueError(
            f'in_bag: {what} must be a bool array ("tree trained on row"), got {value.dtype}'
        )
    if value.ndim != 2:
        raise ValueError(f"in_bag: {what} must be 2-D (trees, rows), got shape {value.shape}")
    return value


def _any_out(matrix: np.ndarray, weights) -> np.ndarray:
    out = ~matrix
    if weights is not None:
        out = out & (np.asarray(weights) > 0)[:, None]
    return out.any(axis=0)


def unscored(in_bag: np.ndarray, weights) -> np.ndarray:
    """Rows of ``in_bag`` (trees, rows) without an out-of-bag tree of positive weight."""
    return ~_any_out(in_bag, weights)


def check_in_bag(in_bag) -> InBag | None:
    """``in_bag`` as an :class:`InBag` (a bool matrix for the forest alone is wrapped), or
    ``None``; a clear error for anything else."""
    if in_bag is None or isinstance(in_bag, InBag):
        return in_bag
    if isinstance(in_bag, np.ndarray):
        return InBag(in_bag)
    raise TypeError(
        f"in_bag must be a fedforest InBag (or a bool array of shape (n_trees, n_rows)), got "
        f"{type(in_bag).__name__}"
    )


def memo_key(in_bag: InBag | None) -> tuple:
    """What a :class:`~.cache.PredictionMemo` key adds for ``in_bag``: nothing without one,
    else the identity of its matrices (which, like the table, the caller keeps alive)."""
    if in_bag is None:
        return ()
    return ("in_bag", id(in_bag.forest), id(in_bag.intersection))
