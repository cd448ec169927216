"""Classification metrics used to compare strategies (AUPRC, AUC, MCC, accuracy)."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import (
    accuracy_score,
    average_precision_score,
    matthews_corrcoef,
    roc_auc_score,
)
from sklearn.preprocessing import label_binarize

METRICS = ("auprc", "auc", "mcc", "accuracy")


def score(metric: str, y_true, proba: np.ndarray, classes) -> float:
    """Score predicted probabilities.

    Parameters
    ----------
    metric : {"auprc", "auc", "mcc", "accuracy"}
        AUPRC and AUC are one-vs-rest and macro-averaged over classes for
        more than two classes, as in the missing-split paper.
    y_true : array-like of shape (n_rows,)
    proba : ndarray of shape (n_rows, n_classes)
        Columns in ``classes`` order.
    classes : array-like of shape (n_classes,)

    Returns
    -------
    float
        NaN when the metric is undefined (e.g. AUC with one class present).

    Examples
    --------
    >>> import numpy as np
    >>> score("auc", [0, 1, 1], np.array([[.9, .1], [.2, .8], [.4, .6]]), [0, 1])
    1.0
    """
    if metric not in METRICS:
        raise ValueError(f"metric={metric!r} is not one of {list(METRICS)}")
    y_true = np.asarray(y_true)
    classes = np.asarray(classes)
    proba = np.asarray(proba, dtype=float)
    if proba.shape != (y_true.shape[0], classes.shape[0]):
        raise ValueError(
            f"proba has shape {proba.shape}, expected ({y_true.shape[0]}, {classes.shape[0]})"
        )
    unknown = np.setdiff1d(y_true, classes)
    if unknown.size:
        raise ValueError(f"y_true has labels {unknown.tolist()} that are not in classes")
    if metric == "accuracy":
        return float(accuracy_score(y_true, classes[np.argmax(proba, axis=1)]))
    if metric == "mcc":
        return float(matthews_corrcoef(y_true, classes[np.argmax(proba, axis=1)]))
    present = np.unique(y_true)
    if present.size < 2:
        return float("nan")
    if classes.size == 2:
        pos = y_true == classes[1]
        if metric == "auc":
            return float(roc_auc_score(pos, proba[:, 1]))
        return float(average_precision_score(pos, proba[:, 1]))
    onehot = label_binarize(y_true, classes=classes)
    keep = onehot.sum(axis=0) > 0
    if metric == "auc":
        return float(roc_auc_score(onehot[:, keep], proba[:, keep], average="macro"))
    return float(average_precision_score(onehot[:, keep], proba[:, keep], average="macro"))


def score_all(y_true, proba, classes, metrics=METRICS) -> dict[str, float]:
    """Every metric in ``metrics`` as a dict."""
    return {m: score(m, y_true, proba, classes) for m in metrics}
