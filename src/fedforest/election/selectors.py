"""Local feature selectors run by each site before feature election.

Every site runs one selector on its own table (its own columns only) and
sends a boolean mask and one score per column to the feature election (see
``docs/architecture.md``, "Feature election"). The election min-max
normalises each site's scores (over all its columns, or over the ones it
selected: ``election.normalization``) and averages them across sites, so a
score here is always finite, ``>= 0`` and larger means "more useful".

Methods and their defaults for a classification target (every default can
be overridden through ``params``; the effective values are returned in
:attr:`LocalSelection.params`; regression and survival targets: see
"Regression" and "Survival" below):

=================  ========================================  ===========================
method             score (selected if)                       defaults (``params``)
=================  ========================================  ===========================
``lasso``          ``|coef|`` of an L1 logistic regression   ``C=0.1``,
                   (``saga``); multiclass: max over classes  ``max_iter=2000``,
                   (``score > threshold``)                   ``tol=1e-4``,
                                                             ``threshold=1e-6``
``elastic_net``    same with an elastic-net penalty          ``C=0.1``, ``l1_ratio=0.5``,
                   (``score > threshold``)                   ``max_iter=2000``,
                                                             ``tol=1e-4``,
                                                             ``threshold=1e-6``
``mutual_info``    ``mutual_info_classif``, categorical      ``n_neighbors=10``,
                   columns as ``discrete_features``          ``threshold="mean"``
                   (``score >= threshold`` and ``> 0``)
``random_forest``  ``RandomForestClassifier`` importance,    ``n_estimators=100``,
                   impurity (``feature_importances_``)       ``max_depth=None``,
                   or ``"permutation"`` (stratified          ``min_samples_leaf=1``,
                   held-out split, negatives clipped to 0)   ``importance="impurity"``,
                   (``score >= threshold`` and ``> 0``)      ``n_repeats=5``,
                                                             ``test_size=0.25``,
                                                             ``threshold="mean"``
``f_classif``      ``-log10(p)``: numeric ANOVA F test,      ``alpha=0.05``
                   categorical chi-square test of
                   independence (level x class table)
                   (``p < alpha``)
``chi2``           ``-log10(p)`` of scikit-learn ``chi2``    ``alpha=0.05``
                   (numeric min-max scaled to [0, 1],
                   categorical one-hot, min p over dummies)
                   (``p < alpha``)
``none``           ``1.0`` for every column (always)         (none)
=================  ========================================  ===========================

Parameters are validated by :func:`check_params` (which :func:`select_features`
runs, and which site configurations run on ``selector_params`` before any data
is read); a bad one raises :class:`SelectorParamError` naming the key, the
value and what is allowed.

``threshold`` for ``mutual_info`` and ``random_forest`` is ``"mean"``,
``"median"`` (of the site's scores) or a number ``>= 0``. A score of exactly 0
(no information at all) is never selected by these two methods, so a table in
which nothing is informative selects nothing rather than everything.

``mutual_info`` uses ``n_neighbors=10`` rather than scikit-learn's 3: with a
few hundred rows the 3-neighbour estimate of a continuous column varies so
much that equally useful columns often fall on both sides of the mean; 10
neighbours roughly halve that spread at a small bias.

``chi2`` treats the sum of a column's values per class as a count, which is
what the test is made for (counts, frequencies, one-hot dummies). On min-max
scaled continuous columns it is conservative, much more so for heavy-tailed
columns (an outlier stretches the range and squeezes the rest towards one
value); prefer ``f_classif`` for continuous data.

Categorical columns (listed in ``categorical``) hold integer codes ``0..K-1``.
They are treated as nominal everywhere except in ``random_forest``, which
splits on the raw codes (trees can isolate any level with two splits):

* ``lasso``, ``elastic_net`` and ``chi2`` one-hot encode them (one dummy per
  observed level, no reference level dropped); a column's score is the max of
  its dummies' scores (largest ``|coef|``, smallest p-value).
* ``mutual_info`` passes them as ``discrete_features``.
* ``f_classif`` tests them with :func:`scipy.stats.chi2_contingency` instead
  of the F test (the same ``-log10(p)`` scale).

Missing values (NaN) are allowed. ``random_forest`` uses them natively
(scikit-learn >= 1.4). Every other method needs complete data and fills a
numeric column with its mean and a categorical column with its most frequent
code (smallest code on ties); an entirely missing column is filled with 0 and
scores 0.

Numeric columns are standardized (zero mean, unit variance) for ``lasso`` and
``elastic_net`` so that the penalty treats them alike; dummies stay 0/1.
``chi2`` needs non-negative inputs, so numeric columns are min-max scaled to
``[0, 1]`` first. p-values are clipped to ``>= 1e-300`` (scores ``<= 300``); a
test that cannot be computed (for instance a constant column) gets p = 1,
score 0.

When ``lasso`` or ``elastic_net`` select nothing, the single best column is
kept (largest score, or, when every coefficient is 0, the column whose
gradient at the intercept-only model is largest, i.e. the first one to enter
the regularisation path) and a warning is logged. ``f_classif``,
``f_regression`` and ``chi2`` may legitimately select nothing (no test is
significant).

Regression
----------
With ``task="regression"`` the target is a number (finite, not constant) and
the selectors are :data:`REGRESSION_SELECTORS`; their parameters, defaults
and selection rules are the classification ones (a site's ``selector_params``
mean the same under both tasks):

=================  ==========================================================
method             score, with a numeric target
=================  ==========================================================
``lasso``          ``|coef|`` of scikit-learn ``Lasso`` on the standardized
                   design and the standardized target, with
                   ``alpha = 1 / (C * n_rows)``: the logistic regression's
                   objective ``C * sum(loss) + |w|_1`` with the squared error
                   (``loss = (y - Xw)^2 / 2``) as the loss, so ``C`` is the
                   inverse regularisation strength in both tasks
``elastic_net``    same with ``ElasticNet`` (``l1_ratio`` as above)
``mutual_info``    ``mutual_info_regression``, categorical columns as
                   ``discrete_features``
``random_forest``  ``RandomForestRegressor`` importance; ``"permutation"``
                   on a plain (not stratified) held-out split, scored by R²
``f_regression``   ``-log10(p)``: numeric columns scikit-learn's
                   ``f_regression`` (F test of the linear correlation);
                   categorical columns a one-way ANOVA F test of the target
                   across the column's levels (``p < alpha``, default 0.05)
``none``           ``1.0`` for every column (always)
=================  ==========================================================

``chi2`` scores class counts and ``f_classif`` compares classes: both are
refused for a regression target (:class:`SelectorTaskError`), as is
``f_regression`` for a classification one. Standardizing the target makes
``C`` independent of its unit (days or hours of stay). A linear selector or
``f_regression`` sees only the linear part of a column's effect: a column
whose effect is symmetric (a U shape) can score 0; ``mutual_info`` and
``random_forest`` see it.

Survival
--------
With ``task="survival"`` the target is a structured array of an event
indicator and a time (:func:`fedforest.survival_metrics.survival_target`;
times finite and ``>= 0``, at least one event) and the selectors are
:data:`SURVIVAL_SELECTORS`:

==================  ========================================  ===========================
method              score (selected if)                       defaults (``params``)
==================  ========================================  ===========================
``coxnet``          ``|coef|`` of scikit-survival's           ``C=0.1``, ``l1_ratio=1.0``,
                    ``CoxnetSurvivalAnalysis`` on the         ``max_iter=100000``,
                    standardized numeric and one-hot          ``tol=1e-7``,
                    categorical columns, at the penalty       ``threshold=1e-6``
                    ``alpha = 1 / (C * n_rows)``
                    (``score > threshold``)
``cox_univariate``  ``-log10(p)`` of each column's            ``alpha=0.05``
                    univariate Cox model's score test
                    (Breslow's ties); a categorical column
                    is one model of its levels (``p < alpha``)
``random_forest``   permutation importance of a               as above, but
                    ``RandomSurvivalForest`` on a held-out    ``importance="permutation"``
                    split stratified by the event, scored     (the only one)
                    by Harrell's C
                    (``score >= threshold`` and ``> 0``)
``none``            ``1.0`` for every column (always)         (none)
==================  ========================================  ===========================

``coxnet``: scikit-survival minimises the mean negative log partial
likelihood plus ``alpha`` times the elastic-net penalty; with
``alpha = 1 / (C * n_rows)`` that is ``C * (-log PL) + penalty``, the
logistic regression's objective with the partial likelihood as the loss, so
``C`` means what it means for ``lasso`` (inverse regularisation strength, the
same default 0.1). ``l1_ratio=1.0`` is the lasso; below 1 (but above 0: the
Cox model takes no pure ridge penalty) an elastic net, which keeps groups of
correlated columns together. A noise column enters the model when its Cox
score exceeds ``1 / C`` in absolute value, and that score grows with the
square root of the events, so the default admits more noise on large sites.
With ten standard normal noise columns added to scikit-survival's WHAS500,
GBSG2 and veterans data (215, 299 and 128 events; 10 draws each), ``C=0.1``
kept 41-59% of the noise columns on the whole data and 3-18% on a random
sixth of it (a site of a six-site split); ``C=0.05`` kept 9-29% and 0-3%,
but on the sixth only about one informative column where ``C=0.1`` kept two. When nothing is selected the best column is kept as for ``lasso``
(at all-zero coefficients: the largest Cox score at zero).

``cox_univariate``: the score (Rao) test of a Cox model of the column alone,
the statistic ``U^2 / I`` with ``U`` the gradient of the log partial
likelihood at zero and ``I`` its information (Breslow's handling of tied
times), one degree of freedom. It needs no fit (no divergence on a column
that separates the events). A categorical column is the model of its
``K - 1`` dummies (the first level the reference), ``K - 1`` degrees of
freedom: the log-rank test across its levels. For a binary column, and with
no tied times, it is the log-rank test scikit-survival's
``compare_survival`` computes.

``random_forest``: a random survival forest has no impurity importance, so a
survival job's ``random_forest`` takes ``importance: permutation`` only (its
default there: :func:`default_params` with ``task="survival"``); the held-out
rows are scored by the forest's Harrell's C. When a part of the split has no
event, every column scores 0.

``lasso``, ``elastic_net``, ``mutual_info``, ``f_classif``, ``f_regression``
and ``chi2`` need a class or a number, which a censored time is not; they are
refused (:class:`SelectorTaskError`, naming ``coxnet`` or ``cox_univariate``),
as are ``coxnet`` and ``cox_univariate`` for the other tasks.
"""

from __future__ import annotations

import logging
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np
import pandas as pd

from ..vocabulary import SELECTORS, TASKS
from .selector_inputs import _prepare
from .selector_methods import (
    _chi2,
    _cox_univariate,
    _coxnet,
    _Data,
    _f_classif,
    _f_regression,
    _linear,
    _mutual_info,
    _random_forest,
    _relative_mask,
)

logger = logging.getLogger(__name__)


_DEFAULTS: dict[str, dict[str, Any]] = {
    "lasso": {"C": 0.1, "max_iter": 2000, "tol": 1e-4, "threshold": 1e-6},
    "elastic_net": {"C": 0.1, "l1_ratio": 0.5, "max_iter": 2000, "tol": 1e-4, "threshold": 1e-6},
    "mutual_info": {"n_neighbors": 10, "threshold": "mean"},
    "random_forest": {
        "n_estimators": 100,
        "max_depth": None,
        "min_samples_leaf": 1,
        "importance": "impurity",
        "n_repeats": 5,
        "test_size": 0.25,
        "threshold": "mean",
    },
    "f_classif": {"alpha": 0.05},
    "f_regression": {"alpha": 0.05},
    "chi2": {"alpha": 0.05},
    "coxnet": {"C": 0.1, "l1_ratio": 1.0, "max_iter": 100_000, "tol": 1e-7, "threshold": 1e-6},
    "cox_univariate": {"alpha": 0.05},
    "none": {},
}

_COX = ("coxnet", "cox_univariate")
#: Selectors a classification target can use (not ``f_regression`` nor the Cox models).
CLASSIFICATION_SELECTORS = tuple(m for m in SELECTORS if m not in ("f_regression", *_COX))
#: Selectors a regression target can use (not ``f_classif`` or ``chi2``, which need classes,
#: nor the Cox models, which need times to an event).
REGRESSION_SELECTORS = tuple(m for m in SELECTORS if m not in ("f_classif", "chi2", *_COX))
#: Selectors a survival target can use: the Cox models, ``random_forest`` and ``none``.
SURVIVAL_SELECTORS = tuple(m for m in SELECTORS if m in ("random_forest", *_COX, "none"))
_TASK_SELECTORS = {
    "classification": CLASSIFICATION_SELECTORS,
    "regression": REGRESSION_SELECTORS,
    "survival": SURVIVAL_SELECTORS,
}
_NEEDS_SURVIVAL = (
    "models the time to an event (a Cox model), so it needs task='survival'; use '{use}' "
    "(the same kind of score for a {what})"
)
_NO_SURVIVAL = "{why}, which a censored time is not; use '{use}' ({alternative})"
_COXNET_ALTERNATIVE = "the |coef| of an L1 penalised Cox model, the same penalty C"
_UNIVARIATE_ALTERNATIVE = "-log10(p) of each column's univariate Cox score test"
#: Why a selector cannot serve a task, and what to use instead.
_WRONG_TASK = {
    ("coxnet", "classification"): _NEEDS_SURVIVAL.format(use="lasso", what="class"),
    ("coxnet", "regression"): _NEEDS_SURVIVAL.format(use="lasso", what="number"),
    ("cox_univariate", "classification"): _NEEDS_SURVIVAL.format(use="f_classif", what="class"),
    ("cox_univariate", "regression"): _NEEDS_SURVIVAL.format(use="f_regression", what="number"),
    ("lasso", "survival"): _NO_SURVIVAL.format(
        why="fits a logistic or linear regression to a class or a number",
        use="coxnet",
        alternative=_COXNET_ALTERNATIVE,
    ),
    ("elastic_net", "survival"): _NO_SURVIVAL.format(
        why="fits a logistic or linear regression to a class or a number",
        use="coxnet",
        alternative=_COXNET_ALTERNATIVE + ", with params {l1_ratio: 0.5} for an elastic net",
    ),
    ("mutual_info", "survival"): _NO_SURVIVAL.format(
        why="estimates the information a column carries about a class or a number",
        use="cox_univariate",
        alternative=_UNIVARIATE_ALTERNATIVE + "; or 'random_forest' for effects that are "
        "not monotone",
    ),
    ("f_classif", "survival"): _NO_SURVIVAL.format(
        why="compares a column across classes (ANOVA F test)",
        use="cox_univariate",
        alternative=_UNIVARIATE_ALTERNATIVE,
    ),
    ("f_regression", "survival"): _NO_SURVIVAL.format(
        why="tests a column's linear correlation with a number",
        use="cox_univariate",
        alternative=_UNIVARIATE_ALTERNATIVE,
    ),
    ("chi2", "survival"): _NO_SURVIVAL.format(
        why="scores class counts (a chi-square test of each column's sum per class)",
        use="cox_univariate",
        alternative=_UNIVARIATE_ALTERNATIVE,
    ),
    ("chi2", "regression"): (
        "scores class counts (a chi-square test of each column's sum per class), so it needs "
        "a classification target"
    ),
    ("f_classif", "regression"): (
        "compares a column across classes (ANOVA F test), so it needs a classification target; "
        "use 'f_regression' (the same p-value scores, from the F test of a linear correlation)"
    ),
    ("f_regression", "classification"): (
        "tests a column's linear correlation with a numeric target, so it needs "
        "task='regression'; use 'f_classif' (the same p-value scores, from an ANOVA F test "
        "across the classes)"
    ),
}

_IMPORTANCES = ("impurity", "permutation")
_RELATIVE_THRESHOLDS = ("mean", "median")


@dataclass
class LocalSelection:
    """The result of a local feature selector on one site's table.

    Attributes
    ----------
    features : list of str
        The site's columns, in the order of ``X``.
    mask : numpy.ndarray of bool, shape (n_features,)
        ``True`` for a selected column.
    scores : numpy.ndarray of float64, shape (n_features,)
        Usefulness of each column: finite, ``>= 0``, larger is better.
    method : str
        The selector used (one of :data:`SELECTORS`).
    params : dict
        The effective parameters of the selector, defaults filled in. They
        can be passed back as ``params`` to reproduce the selection.
    """

    features: list[str]
    mask: np.ndarray
    scores: np.ndarray
    method: str
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.features = [str(f) for f in self.features]
        self.mask = np.asarray(self.mask, dtype=bool)
        self.scores = np.asarray(self.scores, dtype=np.float64)
        n = len(self.features)
        if self.mask.shape != (n,):
            raise ValueError(f"mask has shape {self.mask.shape}, expected ({n},)")
        if self.scores.shape != (n,):
            raise ValueError(f"scores has shape {self.scores.shape}, expected ({n},)")
        if not np.all(np.isfinite(self.scores)) or np.any(self.scores < 0):
            raise ValueError("scores must be finite and >= 0")

    @property
    def selected(self) -> list[str]:
        """Names of the selected columns, in the order of ``features``."""
        return [f for f, keep in zip(self.features, self.mask, strict=True) if keep]


def default_params(method: str, task: str | None = None) -> dict[str, Any]:
    """Return a copy of the default parameters of a selector.

    Parameters
    ----------
    method : str
        One of :data:`SELECTORS`.
    task : str or None, default None
        The job's task, when known: under ``"survival"``, ``random_forest``'s
        ``importance`` is ``"permutation"`` (a random survival forest has no
        impurity importance).

    Returns
    -------
    dict
        Parameter name to default value.

    Examples
    --------
    >>> default_params("cox_univariate")
    {'alpha': 0.05}
    >>> default_params("random_forest", task="survival")["importance"]
    'permutation'
    """
    _check_method(method)
    if task is not None:
        _check_task(task)
    return _resolve_params(method, None, task)


def selectors_for(task: str) -> tuple[str, ...]:
    """Return the selectors a target of ``task`` can use.

    Parameters
    ----------
    task : {"classification", "regression", "survival"}
        One of :data:`fedforest.vocabulary.TASKS`.

    Returns
    -------
    tuple of str
        :data:`CLASSIFICATION_SELECTORS`, :data:`REGRESSION_SELECTORS` or
        :data:`SURVIVAL_SELECTORS`, in the order of :data:`SELECTORS`.

    Examples
    --------
    >>> selectors_for("regression")
    ('lasso', 'elastic_net', 'mutual_info', 'random_forest', 'f_regression', 'none')
    >>> selectors_for("survival")
    ('random_forest', 'coxnet', 'cox_univariate', 'none')
    """
    _check_task(task)
    return _TASK_SELECTORS[task]


def select_features(
    X: pd.DataFrame,
    y: Any,
    method: str,
    *,
    categorical: Sequence[str] = (),
    params: Mapping[str, Any] | None = None,
    random_state: int | np.random.RandomState | None = None,
    task: str = "classification",
) -> LocalSelection:
    """Run a local feature selector on one site's table.

    Parameters
    ----------
    X : pandas.DataFrame, shape (n_rows, n_features)
        Feature columns only, numeric dtype. Categorical columns hold integer
        codes ``0..K-1``. NaN marks a missing value.
    y : array-like, shape (n_rows,)
        The target, aligned with ``X`` by position, no missing values.
        Classification: class labels, at least two classes. Regression:
        finite numbers (not booleans) that are not all equal. Survival: a
        structured array of an event indicator and a time
        (:func:`fedforest.survival_metrics.survival_target`), times finite and
        ``>= 0``, at least one event.
    method : str
        One of :func:`selectors_for` ``(task)``: a method of
        :data:`SELECTORS` that the task cannot use raises
        :class:`SelectorTaskError`.
    categorical : sequence of str, default ()
        Names of the categorical columns of ``X``.
    params : mapping, optional
        Overrides of the method's defaults (see the module docstring). An
        unknown key raises :class:`ValueError`.
    random_state : int, numpy.random.RandomState or None, default None
        Seed of every random choice (``saga`` shuffling, nearest-neighbour
        noise of ``mutual_info``, the forest, the held-out split and the
        permutations). Pass an int for reproducible results.
    task : {"classification", "regression", "survival"}, default "classification"
        What ``y`` is (see "Regression" and "Survival" in the module docstring).

    Returns
    -------
    LocalSelection
        Mask and scores for every column of ``X``.

    Raises
    ------
    SelectorTaskError
        ``method`` cannot serve ``task`` (``chi2`` or ``f_classif`` for a
        regression target, ``f_regression`` for a classification one); the
        message names the selector to use instead.
    ValueError
        Unknown method, task or parameter, invalid parameter value, empty
        ``X``, ``X`` and ``y`` of different lengths, a single class in ``y``
        (classification), a non-numeric, infinite or constant ``y``
        (regression), a ``y`` that is no survival array, with negative or
        non-finite times or without an event (survival), missing values in ``y``, non-numeric or infinite values
        in ``X``, unknown or invalid categorical columns.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> X = pd.DataFrame({"signal": rng.normal(size=200), "noise": rng.normal(size=200)})
    >>> y = (X["signal"] + 0.3 * rng.normal(size=200) > 0).astype(int)
    >>> sel = select_features(X, y, "f_classif")
    >>> sel.selected
    ['signal']
    >>> sel.params
    {'alpha': 0.05}
    >>> select_features(X, y, "lasso", params={"C": 0.5}).params["C"]
    0.5

    A numeric target (``task="regression"``):

    >>> stay = 3 * X["signal"] + rng.normal(size=200)
    >>> select_features(X, stay, "f_regression", task="regression").selected
    ['signal']

    A time to an event (``task="survival"``):

    >>> from sksurv.util import Surv
    >>> time = rng.exponential(np.exp(-X["signal"]))
    >>> y_surv = Surv.from_arrays(event=rng.random(200) < 0.7, time=time)
    >>> select_features(X, y_surv, "cox_univariate", task="survival").selected
    ['signal']
    """
    _check_method(method)
    _check_method_task(method, task)
    effective = _resolve_params(method, params, task)
    data = _prepare(X, y, categorical, task)

    if method == "none":
        scores = np.ones(data.n_features)
        mask = np.ones(data.n_features, dtype=bool)
    elif method in ("lasso", "elastic_net"):
        scores, mask = _linear(data, method, effective, random_state)
    elif method == "mutual_info":
        scores = _mutual_info(data, effective, random_state)
        mask = _relative_mask(scores, effective["threshold"], method)
    elif method == "random_forest":
        scores = _random_forest(data, effective, random_state)
        mask = _relative_mask(scores, effective["threshold"], method)
    elif method == "f_classif":
        scores, mask = _f_classif(data, effective)
    elif method == "f_regression":
        scores, mask = _f_regression(data, effective)
    elif method == "coxnet":
        scores, mask = _coxnet(data, effective)
    elif method == "cox_univariate":
        scores, mask = _cox_univariate(data, effective)
    else:  # chi2
        scores, mask = _chi2(data, effective)

    scores = np.nan_to_num(np.asarray(scores, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    scores = np.maximum(scores, 0.0) + 0.0  # also turns -0.0 into 0.0
    logger.info(
        "selector %s: %d of %d features selected (%d rows, %s)",
        method,
        int(mask.sum()),
        data.n_features,
        data.n_rows,
        _target_summary(data),
    )
    return LocalSelection(
        features=list(data.names),
        mask=np.asarray(mask, dtype=bool),
        scores=scores,
        method=method,
        params=effective,
    )


def _target_summary(data: _Data) -> str:
    if data.survival:
        return f"{int(data.y['event'].sum())} events"
    return "regression" if data.regression else f"{len(data.classes)} classes"


# --------------------------------------------------------------------------- validation


def _check_method(method: Any) -> None:
    if not isinstance(method, str) or method not in SELECTORS:
        raise ValueError(f"selector {method!r} is not one of {list(SELECTORS)}")


def _check_task(task: Any) -> None:
    if not isinstance(task, str) or task not in TASKS:
        raise ValueError(f"task={task!r} is not one of {list(TASKS)}")


class SelectorTaskError(ValueError):
    """A selector that cannot serve the job's task (``chi2`` for a regression target, ...).

    Besides the message, it carries the ``method``, the ``task`` and the
    selectors the task can use (``allowed``, a tuple).
    """

    def __init__(self, method: str, task: str):
        self.method, self.task = method, task
        self.allowed = _TASK_SELECTORS[task]
        super().__init__(
            f"selector {method!r} {_WRONG_TASK[method, task]}; selectors for task={task!r}: "
            f"{list(self.allowed)}"
        )


def _check_method_task(method: str, task: Any) -> None:
    _check_task(task)
    if method not in _TASK_SELECTORS[task]:
        raise SelectorTaskError(method, task)


class SelectorParamError(ValueError):
    """A selector parameter that is unknown or has a bad value.

    Besides the message, it carries what a configuration error needs: the
    parameter ``key``, the bad ``value`` and what is ``allowed``.
    """

    def __init__(self, method: str, key: Any, value: Any, allowed: str, unknown: bool = False):
        self.method, self.key, self.value, self.allowed = method, key, value, allowed
        if unknown:
            message = (
                f"unknown parameter {key!r} for selector {method!r}; "
                f"allowed keys: {sorted(_DEFAULTS[method])}"
            )
        else:
            message = f"parameter {key!r} of selector {method!r} must be {allowed}, got {value!r}"
        super().__init__(message)


def check_params(
    method: str, params: Mapping[str, Any] | None, task: str | None = None
) -> dict[str, Any]:
    """Validate a selector's parameters; return them with the defaults filled in.

    This is the validation :func:`select_features` runs; configuration code
    calls it to refuse a site's ``selector_params`` before any data is read.
    A selector's parameters and their ranges are the same for both tasks, so
    they are checked whether or not the task is known; a known ``task`` also
    refuses a selector that cannot serve it.

    Parameters
    ----------
    method : str
        One of :data:`SELECTORS`.
    params : mapping or None
        Overrides of the defaults.
    task : {"classification", "regression", "survival"} or None, default None
        The job's task, when known. ``None`` checks the parameters only (as
        before tasks existed). Under ``"survival"``, ``random_forest`` takes
        ``importance: permutation`` only (its default there).

    Returns
    -------
    dict
        The effective parameters.

    Raises
    ------
    ValueError
        If ``method`` is not one of :data:`SELECTORS`, ``task`` is not one of
        :data:`fedforest.vocabulary.TASKS` or ``params`` is not a mapping.
    SelectorTaskError
        If ``task`` is given and ``method`` cannot serve it.
    SelectorParamError
        If a key is unknown to the selector or a value is out of range; it
        names the key, the value and what is allowed.

    Examples
    --------
    >>> check_params("f_regression", {"alpha": 0.01}, task="regression")
    {'alpha': 0.01}
    >>> check_params("chi2", None, task="regression")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    fedforest.election.selectors.SelectorTaskError: selector 'chi2' scores class counts ...
    """
    _check_method(method)
    if task is not None:
        _check_method_task(method, task)
    return _resolve_params(method, params, task)


#: What ``random_forest``'s ``importance`` can be for a survival target, and why.
_SURVIVAL_IMPORTANCE = (
    "'permutation' for a survival target (a random survival forest has no impurity importance)"
)


def _resolve_params(
    method: str, params: Mapping[str, Any] | None, task: str | None = None
) -> dict[str, Any]:
    effective = dict(_DEFAULTS[method])
    survival_forest = method == "random_forest" and task == "survival"
    if survival_forest:
        effective["importance"] = "permutation"
    if params is None:
        return effective
    if not isinstance(params, Mapping):
        raise ValueError(f"params must be a mapping, got {type(params).__name__}")
    for key, value in params.items():
        if key not in _DEFAULTS[method]:
            allowed = (
                f"a parameter of selector {method!r}: {', '.join(_DEFAULTS[method])}"
                if _DEFAULTS[method]
                else f"no parameter (selector {method!r} takes none)"
            )
            raise SelectorParamError(method, key, value, allowed, unknown=True)
        effective[key] = _check_param(method, key, value)
        if survival_forest and key == "importance" and value != "permutation":
            raise SelectorParamError(method, key, value, _SURVIVAL_IMPORTANCE)
    return effective


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


#: The range of a selector's ``C``: the penalties 1 / C (and 1 / (C n) for n rows) stay
#: finite and positive, and the solvers neither overflow nor lose their regularisation.
C_RANGE = (1e-10, 1e10)
#: The largest value of each integer parameter of a selector (the trees, repeats and
#: iterations of a site's vote; a larger one is a mistake that would hold the job).
_INT_BOUNDS = {
    "max_iter": 1_000_000,
    "n_neighbors": 1_000_000,
    "n_estimators": 10_000,
    "min_samples_leaf": 2**31 - 1,
    "n_repeats": 1_000,
}


def _check_param(method: str, key: str, value: Any) -> Any:
    def refuse(allowed: str) -> NoReturn:
        raise SelectorParamError(method, key, value, allowed)

    if key in _INT_BOUNDS:
        top = _INT_BOUNDS[key]
        if not _is_int(value) or not 1 <= value <= top:
            refuse(f"an integer in [1, {top}]")
        return int(value)
    if key == "max_depth":
        if value is None:
            return None
        if not _is_int(value) or not 1 <= value <= 2**31 - 1:
            refuse(f"None or an integer in [1, {2**31 - 1}]")
        return int(value)
    if key == "C":
        lo, hi = C_RANGE
        if not _is_real(value) or not lo <= value <= hi:
            refuse(
                f"a number in [{lo:g}, {hi:g}] (the inverse regularisation strength: beyond, "
                "the solvers overflow or stop regularising)"
            )
        return float(value)
    if key == "tol":
        if not _is_real(value) or value <= 0:
            refuse("a finite number > 0")
        return float(value)
    if key == "l1_ratio":
        if method == "coxnet":  # scikit-survival's Cox model takes no pure L2 penalty
            if not _is_real(value) or not 0 < value <= 1:
                refuse("a number in (0, 1] (1: L1, the lasso; below: an elastic net)")
        elif not _is_real(value) or not 0 <= value <= 1:
            refuse("a number in [0, 1]")
        return float(value)
    if key == "alpha":
        if not _is_real(value) or not 0 < value <= 1:
            refuse("a number in (0, 1]")
        return float(value)
    if key == "test_size":
        if not _is_real(value) or not 0 < value < 1:
            refuse("a number in (0, 1)")
        return float(value)
    if key == "importance":
        if not isinstance(value, str) or value not in _IMPORTANCES:
            refuse(f"one of {list(_IMPORTANCES)}")
        return value
    if key == "threshold":
        if method in ("mutual_info", "random_forest") and isinstance(value, str):
            if value not in _RELATIVE_THRESHOLDS:
                refuse(f"one of {list(_RELATIVE_THRESHOLDS)} or a number >= 0")
            return value
        if not _is_real(value) or value < 0:
            refuse("a finite number >= 0")
        return float(value)
    raise AssertionError(f"no validator for {key!r} of {method!r}")  # pragma: no cover
