"""Site-side calibration of a pooled forest's probabilities.

A pooled forest's probabilities carry the prevalence of the hospitals that
trained its trees. A site corrects them on its own validation rows, after any
strategy, with one of :data:`~fedforest.vocabulary.CALIBRATIONS`:

``none``
    the probabilities as the strategy gives them;
``prior``
    Bayes' rule on the class priors: ``p'(c|x) ∝ p(c|x) π_site(c) / π_train(c)``,
    where ``π_train`` is the class distribution the trees were trained on (the
    mean of their root nodes' distributions, :func:`training_prior`) and
    ``π_site`` the site's validation class shares with one pseudo-row per
    class (Laplace). It moves every probability to the site's prevalence
    without changing the order of the rows (two classes);
``sigmoid`` / ``isotonic``
    Platt scaling / isotonic regression of each class's probability (one
    against the rest, then normalised): scikit-learn's maps, fitted as its
    ``CalibratedClassifierCV`` fits them around the frozen probabilities. The isotonic
    steps are kept within ``[1 / (n + 2), (n + 1) / (n + 2)]`` for ``n``
    validation rows: a step never claims a certainty its rows cannot show;
``auto``
    the method with the lowest cross-fitted validation log-loss (ties: the
    simpler method, in :data:`~fedforest.vocabulary.CALIBRATION_METHODS` order).

A sigmoid map whose slope would make a higher probability a lower risk (few
validation rows can fit one) is not used: calibration never reverses the order
of a site's risks.

Scores of a calibrated variant are *cross-fitted*: the validation rows are cut
into stratified folds, each fold is calibrated by a calibrator fitted on the
other folds, and the score is taken over these out-of-fold probabilities. A
calibrator scored on the rows it was fitted on would always look best
(isotonic regression most of all); cross-fitting scores it as it will be
used, on rows it has not seen. The calibrator that is kept is then fitted on
every validation row.

scikit-learn fits the sigmoid and isotonic maps. A fitted map is kept as plain
arrays (slopes and intercepts, or the isotonic breakpoints) so that a site
can save it beside its model without pickle; :meth:`Calibrator.transform`
applies the arrays as scikit-learn's ``predict_proba`` does (tested equal).
scikit-learn has no prior-shift correction; it is a one-line rule written here.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from ..metrics import best_first, row_losses, score
from ..model.calibrator import (
    ISOTONIC_TIE_BREAK,
    MAX_PRIOR_RATIO,
    MAX_SIGMOID_PARAMETER,
    Calibrator,
)
from ..vocabulary import CALIBRATION_METHODS, CALIBRATIONS

logger = logging.getLogger(__name__)

#: Folds of the cross-fitted validation scores (fewer when a class has fewer rows).
CV_FOLDS = 3
#: Validation rows of every class that ``sigmoid`` and ``isotonic`` need: a
#: two-parameter map needs a few; a step function, many more (with fewer it
#: fits the rows' noise).
MIN_CLASS_ROWS = {"sigmoid": 2, "isotonic": 10}


def check_calibration(value, where: str = "calibration") -> str:
    """Validate a calibration name (one of :data:`~fedforest.vocabulary.CALIBRATIONS`)."""
    if not isinstance(value, str) or value not in CALIBRATIONS:
        raise ValueError(f"{where}={value!r} is not one of {list(CALIBRATIONS)}")
    return value


class _Probabilities(ClassifierMixin, BaseEstimator):
    """A fitted classifier whose input already is the probability matrix.

    It lets scikit-learn's ``CalibratedClassifierCV`` calibrate probabilities
    computed elsewhere (a pooled forest with any strategy) without predicting
    them again.
    """

    def __init__(self, classes=None):
        self.classes = classes

    def fit(self, X=None, y=None):
        self.classes_ = np.asarray(self.classes)
        return self

    def predict_proba(self, X):
        return np.asarray(X, dtype=float)

    def predict(self, X):
        return self.classes_[np.argmax(np.asarray(X, dtype=float), axis=1)]


def training_prior(value: np.ndarray, roots: np.ndarray, weights=None) -> np.ndarray:
    """The class distribution the trees were trained on: their roots' mean distribution.

    Parameters
    ----------
    value : ndarray of shape (n_nodes, n_classes)
        Every node's class distribution (rows sum to 1).
    roots : ndarray of int
        The root node of every tree that is used.
    weights : ndarray, optional
        Each of these trees' weight in the pooled vote.
    """
    dist = np.asarray(value, dtype=float)[np.asarray(roots)]
    w = np.ones(len(dist)) if weights is None else np.asarray(weights, dtype=float)
    prior = (w[:, None] * dist).sum(axis=0) / w.sum()
    return prior / prior.sum()


def _class_maps(method: str, proba, y, classes) -> list:
    """scikit-learn's fitted maps of ``method``, one per class (one for two classes).

    ``CalibratedClassifierCV`` around the frozen probabilities fits, for each
    class, ``IsotonicRegression(out_of_bounds="clip")`` or its
    ``_SigmoidCalibration`` on that class's probability against the rest, and
    nothing else (the frozen estimator is not refitted). The same maps are fitted
    here directly: a site fits them some 20 times per strategy (a calibrator and
    its cross-fitted folds), and the wrapper's own input checks cost twice the
    fit. Where this scikit-learn keeps the sigmoid under another name, the
    wrapper fits it (:func:`_class_maps_by_wrapper`; the tests compare both).
    """
    try:
        from sklearn.calibration import _SigmoidCalibration
    except ImportError:  # pragma: no cover - another scikit-learn's private name
        return _class_maps_by_wrapper(method, proba, y, classes)
    from sklearn.isotonic import IsotonicRegression

    # as scikit-learn's _fit_calibrator: label_binarize's columns (the positive class's
    # alone for two classes), the i-th probability against the column of the i-th class
    # in sorted order (LabelEncoder's code)
    classes = np.asarray(classes)
    predictions = proba[:, 1:] if len(classes) == 2 else proba
    targets = classes[1:] if len(classes) == 2 else classes
    columns = np.searchsorted(np.sort(classes), classes)
    maps = []
    for column, this_pred in zip(columns, predictions.T, strict=False):
        if method == "isotonic":
            one = IsotonicRegression(out_of_bounds="clip")
        else:
            one = _SigmoidCalibration()
        maps.append(one.fit(this_pred, (y == targets[column]).astype(int)))
    return maps


def _class_maps_by_wrapper(method: str, proba, y, classes) -> list:
    """:func:`_class_maps` through scikit-learn's ``CalibratedClassifierCV``."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.frozen import FrozenEstimator

    frozen = FrozenEstimator(_Probabilities(classes).fit())
    # a frozen estimator is not refitted: one "split" of every row gives its
    # predictions as they are (the default 5-fold split would only repeat them
    # and need 5 rows of every class)
    every_row = np.arange(len(y))
    fitted = CalibratedClassifierCV(frozen, method=method, cv=[(every_row, every_row)])
    fitted.fit(proba, y)
    return fitted.calibrated_classifiers_[0].calibrators


def _fit_one(method, proba, y, classes, train_prior) -> Calibrator:
    """Fit one method on these rows (every class has rows when needed)."""
    if method == "none":
        return Calibrator("none", classes)
    if method == "prior":
        counts = np.array([(y == c).sum() for c in classes], dtype=float)
        site = (counts + 1.0) / (counts.sum() + len(classes))
        ratio = np.where(train_prior > 0, site / np.maximum(train_prior, 1e-300), 1.0)
        return Calibrator("prior", classes, {"ratio": np.minimum(ratio, MAX_PRIOR_RATIO)})
    maps = _class_maps(method, proba, y, classes)
    if method == "sigmoid":
        return Calibrator(
            "sigmoid",
            classes,
            {
                "a": np.array([m.a_ for m in maps], float),
                "b": np.array([m.b_ for m in maps], float),
            },
        )
    xs = [np.asarray(m.X_thresholds_, float) for m in maps]
    # a step fitted on n rows claims no risk beyond what n rows can show: its levels are
    # kept within [1 / (n + 2), (n + 1) / (n + 2)] (a block of rows that were all events
    # would otherwise give a probability of exactly 1, and a non-event there a log-loss of 36)
    margin = 1.0 / (len(y) + 2)
    ys = [np.clip(np.asarray(m.y_thresholds_, float), margin, 1 - margin) for m in maps]
    offsets = np.r_[0, np.cumsum([len(x) for x in xs])].astype(np.int64)
    params = {
        "x": np.concatenate(xs),
        "y": np.concatenate(ys),
        "offsets": offsets,
        # rows on one step keep the trees' order (ISOTONIC_TIE_BREAK)
        "tie_break": np.array([ISOTONIC_TIE_BREAK]),
    }
    return Calibrator("isotonic", classes, params)


def _folds(y: np.ndarray, classes: np.ndarray, random_state) -> list | None:
    """Stratified folds of the validation rows, or ``None`` when a class has < 2 rows."""
    from sklearn.model_selection import StratifiedKFold

    counts = np.array([(y == c).sum() for c in classes])
    k = int(min(CV_FOLDS, counts.min()))
    if k < 2:
        return None
    seed = random_state if isinstance(random_state, (int, np.integer)) else 0
    cv = StratifiedKFold(n_splits=k, shuffle=True, random_state=int(seed))
    return list(cv.split(np.zeros(len(y)), y))


@dataclass
class CalibrationFit:
    """A fitted calibration and how it scored on the validation rows.

    Attributes
    ----------
    calibrator : Calibrator
        The map fitted on every validation row.
    cross_fitted : ndarray of shape (n_rows, n_classes)
        Out-of-fold calibrated probabilities of the validation rows (the raw
        probabilities for ``none``): what a candidate is scored on.
    log_losses : dict of str to float
        Cross-fitted validation log-loss of every method tried.
    skipped : dict of str to str
        Methods that could not be fitted, and why.
    """

    calibrator: Calibrator
    cross_fitted: np.ndarray
    log_losses: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)


def _cannot_fit(name: str, train_prior, counts: dict) -> str | None:
    """Why ``name`` cannot be fitted on these validation rows (``None``: it can)."""
    if name == "prior" and train_prior is None:
        return "the training prior of the trees is not known"
    if name in MIN_CLASS_ROWS and min(counts.values()) < MIN_CLASS_ROWS[name]:
        return (
            f"it needs {MIN_CLASS_ROWS[name]} validation rows of every class; class counts {counts}"
        )
    return None


def _unusable(name: str, full: Calibrator) -> str | None:
    """Why a fitted ``name`` is not used (``None``: it is)."""
    if name != "sigmoid":
        return None
    if np.any(full.params["a"] >= 0):
        # p = expit(-(a f + b)) falls as f rises when a >= 0: few validation rows can
        # fit such a map, which would turn the ranking upside down
        return "the fitted map would reverse the order of the risks"
    if np.any(np.abs(np.r_[full.params["a"], full.params["b"]]) > MAX_SIGMOID_PARAMETER):
        return (
            f"the fitted map is steeper than {MAX_SIGMOID_PARAMETER:g} (it would turn the "
            "risks into 0 and 1)"
        )
    return None


def _out_of_fold(name, full, proba, y, classes, train_prior, folds) -> np.ndarray:
    """The validation rows' probabilities calibrated by ``name`` fitted without them."""
    if name == "none":
        return proba
    if folds is None:  # prior with a class of one row: scored on its own rows
        return full.transform(proba)
    oof = np.empty_like(proba)
    for train, test in folds:
        part = _fit_one(name, proba[train], y[train], classes, train_prior)
        oof[test] = part.transform(proba[test])
    return oof


def fit_calibration(
    proba,
    y,
    classes,
    method: str = "auto",
    train_prior=None,
    random_state=0,
) -> CalibrationFit:
    """Fit a site's calibration on its validation rows.

    Parameters
    ----------
    proba : ndarray of shape (n_rows, n_classes)
        The strategy's probabilities of the validation rows, columns in
        ``classes`` order.
    y : array-like of shape (n_rows,)
        Their labels.
    classes : array-like of shape (n_classes,)
    method : {"none", "prior", "sigmoid", "isotonic", "auto"}, default="auto"
        ``auto`` tries every method and keeps the lowest cross-fitted
        log-loss (ties: the simpler). A method that cannot be fitted
        (``prior`` without ``train_prior``; ``sigmoid`` or ``isotonic`` with
        fewer than :data:`MIN_CLASS_ROWS` validation rows of a class) is
        skipped with a warning and ``none`` is used.
    train_prior : ndarray of shape (n_classes,), optional
        The class distribution the trees were trained on (``prior``;
        :func:`training_prior`).
    random_state : int, default=0
        Seed of the cross-fitting folds.

    Returns
    -------
    CalibrationFit

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = (rng.random(200) < 0.8).astype(int)           # the site: 80 % positive
    >>> p = np.clip(0.3 + 0.3 * (y - 0.5) + rng.normal(0, .1, 200), 0.01, 0.99)
    >>> proba = np.c_[1 - p, p]                            # trained where 30 % were
    >>> fit = fit_calibration(proba, y, [0, 1], "prior", train_prior=np.array([.7, .3]))
    >>> fit.calibrator.method, bool(fit.calibrator.transform(proba)[:, 1].mean() > p.mean())
    ('prior', True)
    """
    check_calibration(method, "method")
    proba = np.asarray(proba, dtype=float)
    y, classes = np.asarray(y), np.asarray(classes)
    if proba.shape != (len(y), len(classes)):
        raise ValueError(f"proba has shape {proba.shape}, expected ({len(y)}, {len(classes)})")
    methods = list(CALIBRATION_METHODS) if method == "auto" else [method]
    folds = _folds(y, classes, random_state)
    counts = {str(c): int((y == c).sum()) for c in classes}
    skipped: dict[str, str] = {}
    results: dict[str, tuple[Calibrator, np.ndarray]] = {}
    for name in methods:
        why = _cannot_fit(name, train_prior, counts)
        full = None if why else _fit_one(name, proba, y, classes, train_prior)
        why = why or _unusable(name, full)
        if why:
            skipped[name] = why
            continue
        results[name] = (full, _out_of_fold(name, full, proba, y, classes, train_prior, folds))
    for name, why in skipped.items():
        (logger.warning if method != "auto" else logger.info)(
            "calibration %s is not fitted: %s", name, why
        )
    if not results:
        results["none"] = (Calibrator("none", classes), proba)
    losses = {name: score("log_loss", y, oof, classes) for name, (_, oof) in results.items()}
    per_row = {name: row_losses("log_loss", y, oof, classes) for name, (_, oof) in results.items()}
    best, _ = choose_variant(losses, "log_loss", CALIBRATION_METHODS, per_row)
    return CalibrationFit(results[best][0], results[best][1], losses, skipped)


def choose_variant(
    scores: Mapping[str, float],
    metric: str,
    preference: Sequence[str],
    losses: Mapping[str, np.ndarray] | None = None,
) -> tuple[str, str | None]:
    """The best candidate by ``metric`` and the runner-up (ties: ``preference`` order).

    NaN scores never win. With ``losses`` (each candidate's per-row losses on
    the same validation rows, for a metric that is their mean: Brier,
    log-loss), a candidate whose mean loss is within one standard error of the
    paired difference from the lowest counts as tied with it: the validation
    rows cannot tell them apart, and the first of the tied candidates in
    ``preference`` wins. With few validation rows this keeps ``auto`` from
    chasing noise among many candidates; ``auto``'s strategy fitted out of
    bag, on every training row, passes no ``losses`` and the lowest score
    wins (:func:`~fedforest.prediction.selection.choose_calibrated`'s
    ``standard_error_ties``). The runner-up is the best-scoring
    other candidate. Returns ``(best, runner_up)``; ``runner_up`` is ``None``
    with one finite candidate.

    Examples
    --------
    >>> import numpy as np
    >>> choose_variant({"mp": 0.50, "fpv": 0.40}, "log_loss", ["mp", "fpv"])
    ('fpv', 'mp')
    >>> noisy = {"mp": np.array([0.5, 0.5, 0.5, 0.5]), "fpv": np.array([0.1, 0.9, 0.1, 0.5])}
    >>> choose_variant({"mp": 0.5, "fpv": 0.4}, "log_loss", ["mp", "fpv"], noisy)
    ('mp', 'fpv')
    """
    finite = {k: v for k, v in scores.items() if not math.isnan(v)}
    if not finite:
        raise ValueError(
            f"validation {metric} is undefined for every candidate (one class only in y_val?)"
        )
    rank = {s: i for i, s in enumerate(preference)}
    ordered = sorted(finite, key=lambda s: (best_first(metric, finite[s]), rank.get(s, len(rank))))
    best = ordered[0]
    if losses is not None and len(ordered) > 1:
        tied = [best]
        for other in ordered[1:]:
            diff = np.asarray(losses[other]) - np.asarray(losses[best])
            se = diff.std(ddof=1) / math.sqrt(len(diff)) if len(diff) > 1 else 0.0
            if diff.mean() <= se:
                tied.append(other)
        best = min(tied, key=lambda s: rank.get(s, len(rank)))
    others = [s for s in ordered if s != best]
    return best, (others[0] if others else None)
