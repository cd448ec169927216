"""Metrics used to compare strategies.

Classification: ranking metrics (AUPRC, AUC, MCC, accuracy; higher is better)
and metrics of the probabilities themselves (Brier score, log-loss, expected
calibration error; lower is better). A clinician acts on the risk, so a
strategy that ranks well but reports another hospital's prevalence shows up in
the second group only. Regression (:func:`score_values`): RMSE and MAE (lower
is better) and R² (scikit-learn's).
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import (
    accuracy_score,
    average_precision_score,
    matthews_corrcoef,
    mean_absolute_error,
    mean_squared_error,
    r2_score,
    roc_auc_score,
)

# Binary AUC, AUPRC and MCC are computed here directly (the same values as
# scikit-learn's, checked in the tests): experiments score thousands of small
# test sets, where scikit-learn's input validation costs more than the metric.
from sklearn.preprocessing import label_binarize

from .vocabulary import LOWER_IS_BETTER, METRICS, REGRESSION_METRICS

#: Bins of the reliability diagram and of ``ece``: equal widths on [0, 1].
N_BINS = 10
#: The range of every metric (what a site's reply may report).
METRIC_RANGES: dict[str, tuple[float, float]] = {
    "auprc": (0.0, 1.0),
    "auc": (0.0, 1.0),
    "mcc": (-1.0, 1.0),
    "accuracy": (0.0, 1.0),
    "brier": (0.0, 2.0),
    # scikit-learn clips probabilities to the float64 epsilon: -log(2.2e-16) < 37
    "log_loss": (0.0, 40.0),
    "ece": (0.0, 1.0),
    # regression: a site's target is read as float32
    "rmse": (0.0, float(np.finfo(np.float32).max)),
    "mae": (0.0, float(np.finfo(np.float32).max)),
    "r2": (-float(np.finfo(np.float32).max), 1.0),
}


def score(metric: str, y_true, proba: np.ndarray, classes) -> float:
    """Score predicted probabilities.

    Parameters
    ----------
    metric : {"auprc", "auc", "mcc", "accuracy", "brier", "log_loss", "ece"}
        AUPRC and AUC are one-vs-rest and macro-averaged over classes for
        more than two classes, as in the missing-split paper. ``brier`` is
        the mean squared error of the positive class's probability for two
        classes (scikit-learn's ``brier_score_loss``) and the mean over rows
        of the squared distance to the one-hot label for more.
        ``log_loss`` is scikit-learn's (:func:`mean_log_loss`). ``ece`` is the expected calibration
        error over :data:`N_BINS` equal-width bins of the positive class's
        probability (two classes) or of the top label's (more), as
        :func:`calibration_bins` counts them. Lower is better for these
        three (:func:`is_better`).
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
    if metric in LOWER_IS_BETTER:
        return _probability_score(metric, y_true, proba, classes)
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


def _probability_score(metric: str, y_true, proba: np.ndarray, classes: np.ndarray) -> float:
    if metric == "log_loss":
        return mean_log_loss(y_true, proba, classes)
    if metric == "ece":
        _, count, total_p, total_hit = _bin_sums(y_true, proba, classes, N_BINS)
        return float(np.sum(np.abs(total_p - total_hit)) / count.sum())
    return float(np.mean(row_losses("brier", y_true, proba, classes)))


def mean_log_loss(y_true, proba: np.ndarray, classes) -> float:
    """scikit-learn's ``log_loss(y_true, proba, labels=classes)``, without its input checks.

    The probabilities clipped to ``[eps, 1 - eps]``, then the mean over rows of
    ``-sum(xlogy(onehot, p))``: scikit-learn's formula, term for term (the same
    float, tested). A site scores its calibration candidates' folds a few
    hundred times per job, where the checks cost more than the loss.
    """
    from scipy.special import xlogy

    proba = np.asarray(proba, dtype=float)
    eps = np.finfo(proba.dtype).eps
    clipped = np.clip(proba, eps, 1 - eps)
    onehot = (np.asarray(y_true)[:, None] == np.asarray(classes)[None, :]).astype(clipped.dtype)
    if not onehot.any(axis=1).all():  # a label outside classes would score 0
        unknown = np.setdiff1d(np.asarray(y_true), np.asarray(classes))
        raise ValueError(f"y_true has labels {unknown.tolist()} that are not in classes")
    return float(np.mean(-np.sum(xlogy(onehot, clipped), axis=1)))


def calibration_bins(y_true, proba, classes, n_bins: int = N_BINS) -> dict:
    """What a reliability diagram draws: predicted against observed risk per bin.

    Two classes: bins of the positive class's (``classes[1]``) probability, and
    the observed share of that class. More classes: bins of the top label's
    probability (the confidence), and the share of rows whose top label is
    right. Bins are ``n_bins`` equal widths on [0, 1], as scikit-learn's
    ``calibration_curve(strategy="uniform")`` draws them.

    Returns
    -------
    dict
        ``target`` (the positive class as a string, or ``"top-label"``),
        ``count`` (rows per bin), ``predicted`` (mean predicted probability
        per bin) and ``observed`` (observed frequency per bin); both are
        ``None`` for an empty bin. Plain values only (it goes into
        ``results.json``).

    Examples
    --------
    >>> import numpy as np
    >>> b = calibration_bins([0, 1, 1], np.array([[.9, .1], [.2, .8], [.1, .9]]), [0, 1], 2)
    >>> b["count"], b["observed"]
    ([1, 2], [0.0, 1.0])
    """
    target, count, total_p, total_hit = _bin_sums(
        np.asarray(y_true), np.asarray(proba, dtype=float), np.asarray(classes), n_bins
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        predicted, observed = total_p / count, total_hit / count
    return {
        "target": target,
        "count": [int(c) for c in count],
        "predicted": [float(v) if c else None for v, c in zip(predicted, count, strict=True)],
        "observed": [float(v) if c else None for v, c in zip(observed, count, strict=True)],
    }


def _bin_sums(y_true: np.ndarray, proba: np.ndarray, classes: np.ndarray, n_bins: int):
    """Per bin: rows, summed predicted probability and summed hits."""
    if classes.size == 2:
        target = str(classes[1])
        p = proba[:, 1]
        hit = y_true == classes[1]
    else:
        target = "top-label"
        top = np.argmax(proba, axis=1)
        p = proba[np.arange(len(proba)), top]
        hit = classes[top] == y_true
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    which = np.searchsorted(edges[1:-1], p, side="right")  # as calibration_curve
    count = np.bincount(which, minlength=n_bins)
    total_p = np.bincount(which, weights=p, minlength=n_bins)
    total_hit = np.bincount(which, weights=hit.astype(float), minlength=n_bins)
    return target, count, total_p, total_hit


#: Metrics that are a mean of per-row losses (:func:`row_losses`).
ROW_LOSSES = ("brier", "log_loss")


def row_losses(metric: str, y_true, proba, classes) -> np.ndarray:
    """Each row's loss, whose mean is ``score(metric, ...)`` (``brier``, ``log_loss``).

    Examples
    --------
    >>> import numpy as np
    >>> row_losses("brier", [0, 1], np.array([[.9, .1], [.4, .6]]), [0, 1]).round(2)
    array([0.01, 0.16])
    """
    y_true, classes = np.asarray(y_true), np.asarray(classes)
    proba = np.asarray(proba, dtype=float)
    onehot = (y_true[:, None] == classes[None, :]).astype(float)
    if metric == "brier":
        if classes.size == 2:
            return (proba[:, 1] - onehot[:, 1]) ** 2
        return np.sum((proba - onehot) ** 2, axis=1)
    if metric == "log_loss":  # as scikit-learn's log_loss: clipped, rows renormalised
        eps = np.finfo(proba.dtype).eps
        clipped = np.clip(proba, eps, 1 - eps)
        clipped /= clipped.sum(axis=1, keepdims=True)
        return -np.log(np.sum(clipped * onehot, axis=1))
    raise ValueError(f"metric={metric!r} is not a mean of row losses; one of {list(ROW_LOSSES)}")


def is_better(metric: str, a: float, b: float) -> bool:
    """Whether score ``a`` is strictly better than ``b`` for ``metric``."""
    return a < b if metric in LOWER_IS_BETTER else a > b


def best_first(metric: str, value: float) -> float:
    """A sort key that puts the best ``metric`` values first (ascending order)."""
    return value if metric in LOWER_IS_BETTER else -value


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


def score_values(metric: str, y_true, predicted) -> float:
    """Score predicted numbers (regression): ``rmse``, ``mae`` or ``r2``.

    scikit-learn's ``mean_squared_error`` (square-rooted), ``mean_absolute_error``
    and ``r2_score``; R² is NaN when the target is constant (undefined).

    Examples
    --------
    >>> score_values("rmse", [1.0, 2.0, 4.0], [1.0, 2.0, 2.0])
    1.1547005383792515
    """
    if metric not in REGRESSION_METRICS:
        raise ValueError(f"metric={metric!r} is not one of {list(REGRESSION_METRICS)}")
    y_true = np.asarray(y_true, dtype=float)
    predicted = np.asarray(predicted, dtype=float).reshape(-1)
    if predicted.shape != y_true.shape:
        raise ValueError(f"predicted has shape {predicted.shape}, expected {y_true.shape}")
    if metric == "rmse":
        return float(np.sqrt(mean_squared_error(y_true, predicted)))
    if metric == "mae":
        return float(mean_absolute_error(y_true, predicted))
    if y_true.size < 2 or np.all(y_true == y_true[0]):
        return float("nan")
    return float(r2_score(y_true, predicted))


def squared_errors(y_true, predicted) -> np.ndarray:
    """Each row's squared error (their mean is the MSE; ``auto``'s per-row losses)."""
    y_true = np.asarray(y_true, dtype=float)
    return (np.asarray(predicted, dtype=float).reshape(-1) - y_true) ** 2
