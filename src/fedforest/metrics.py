"""Classification metrics used to compare strategies (AUPRC, AUC, MCC, accuracy)."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import (
    accuracy_score,
    average_precision_score,
    matthews_corrcoef,
    roc_auc_score,
)

# Binary AUC, AUPRC and MCC are computed here directly (the same values as
# scikit-learn's, checked in the tests): experiments score thousands of small
# test sets, where scikit-learn's input validation costs more than the metric.
from sklearn.preprocessing import label_binarize

from .vocabulary import METRICS


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
        predicted = classes[np.argmax(proba, axis=1)]
        if classes.size == 2:
            return binary_mcc(y_true == classes[1], predicted == classes[1])
        return float(matthews_corrcoef(y_true, predicted))
    present = np.unique(y_true)
    if present.size < 2:
        return float("nan")
    if classes.size == 2:
        pos = y_true == classes[1]
        if metric == "auc":
            return binary_auc(pos, proba[:, 1])
        return binary_average_precision(pos, proba[:, 1])
    onehot = label_binarize(y_true, classes=classes)
    keep = onehot.sum(axis=0) > 0
    if metric == "auc":
        return float(roc_auc_score(onehot[:, keep], proba[:, keep], average="macro"))
    return float(average_precision_score(onehot[:, keep], proba[:, keep], average="macro"))


def _binary_curve(positive: np.ndarray, scores: np.ndarray):
    """False and true positives at each distinct score, highest first."""
    order = np.argsort(scores, kind="mergesort")[::-1]
    scores, positive = scores[order], positive[order]
    idx = np.r_[np.flatnonzero(np.diff(scores)), scores.size - 1]
    tps = np.cumsum(positive, dtype=np.float64)[idx]
    fps = 1.0 + idx - tps
    return fps, tps


def binary_auc(positive, scores) -> float:
    """ROC AUC (the same value as scikit-learn's ``roc_auc_score``, without its overhead)."""
    fps, tps = _binary_curve(np.asarray(positive, bool), np.asarray(scores, float))
    fpr = np.r_[0.0, fps / fps[-1]]
    tpr = np.r_[0.0, tps / tps[-1]]
    return float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2))


def binary_average_precision(positive, scores) -> float:
    """Average precision, as scikit-learn's ``average_precision_score`` defines it."""
    fps, tps = _binary_curve(np.asarray(positive, bool), np.asarray(scores, float))
    precision = tps / (tps + fps)
    recall = tps / tps[-1]
    recall = np.r_[recall[::-1], 0.0]
    precision = np.r_[precision[::-1], 1.0]
    return float(-np.sum(np.diff(recall) * precision[:-1]))


def binary_mcc(actual, predicted) -> float:
    """Matthews correlation of two boolean vectors (0 when undefined, as scikit-learn)."""
    actual, predicted = np.asarray(actual, bool), np.asarray(predicted, bool)
    tp = float(np.sum(actual & predicted))
    tn = float(np.sum(~actual & ~predicted))
    fp = float(np.sum(~actual & predicted))
    fn = float(np.sum(actual & ~predicted))
    denom = (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)
    return float((tp * tn - fp * fn) / np.sqrt(denom)) if denom > 0 else 0.0


def score_all(y_true, proba, classes, metrics=METRICS) -> dict[str, float]:
    """Every metric in ``metrics`` as a dict."""
    return {m: score(m, y_true, proba, classes) for m in metrics}
