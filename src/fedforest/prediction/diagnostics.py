"""What a prediction reports besides its probabilities, and aligning class columns."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def on_classes(proba: np.ndarray, have, classes) -> np.ndarray:
    """Place probability columns for the labels ``have`` into the ``classes`` order."""
    out = np.zeros((proba.shape[0], len(classes)))
    out[:, np.searchsorted(np.asarray(classes), np.asarray(have))] = proba
    return out


@dataclass
class PredictionDiagnostics:
    """What happened in the last prediction call.

    Attributes
    ----------
    strategy : str
        The strategy used (after ``auto`` selection).
    trees_available : int
        Trees the strategy could use (all of them, or the ``park`` / ``local``
        selection).
    trees_kept : ndarray of shape (n_rows,)
        Trees that voted for each row (``mp`` keeps every tree).
    fallback_rows : ndarray of shape (n_rows,), bool
        Rows whose every tree was discarded; they got their ``mp`` prediction.
    n_fallback : int
        Number of such rows.
    engine : str
        ``"compiled"``, ``"numpy"`` or ``"mixed"``: whether the rows went
        through scikit-learn's compiled trees, the dynamic traversals, or
        both (rows that fell back to ``mp`` not counted).
    dynamic_engine : str or None
        ``"numba"`` when the numba kernels ran dynamic traversals, else
        ``"numpy"`` (``None`` when every row took the compiled trees and none
        fell back).
    weight_kept : ndarray of shape (n_rows,) or None
        With pooling weights: the summed weight of the trees that voted for
        each row (``None`` without).
    unscored_rows : ndarray of shape (n_rows,), bool, or None
        Out-of-bag prediction (``in_bag=``) only: the rows no tree (of
        positive weight) left out of bag; their prediction is NaN.
    """

    strategy: str
    trees_available: int
    trees_kept: np.ndarray
    fallback_rows: np.ndarray
    n_fallback: int
    engine: str
    dynamic_engine: str | None = None
    weight_kept: np.ndarray | None = None
    unscored_rows: np.ndarray | None = None
