"""The local selectors' computations (:func:`~fedforest.election.selectors.select_features`).

Each method turns a prepared table (:class:`_Data`: numeric matrix with NaN
for a missing value, the categorical columns marked, the target as class
indices, for regression numbers, for survival a structured array of event
indicators and times) into per-column scores and a mask. The
choice of method, its parameters and the checks of its inputs are in
:mod:`fedforest.election.selectors`; this module holds the arithmetic.
"""

from __future__ import annotations

import inspect
import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import chi2 as chi2_distribution
from scipy.stats import chi2_contingency
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_selection import chi2 as sk_chi2
from sklearn.feature_selection import f_classif as sk_f_classif
from sklearn.feature_selection import f_regression as sk_f_regression
from sklearn.feature_selection import mutual_info_classif, mutual_info_regression
from sklearn.inspection import permutation_importance
from sklearn.linear_model import ElasticNet, Lasso, LogisticRegression
from sklearn.model_selection import train_test_split

logger = logging.getLogger(__name__)

#: Smallest p-value used for a score, so that ``-log10(p) <= 300``.
MIN_P = 1e-300


@dataclass
class _Data:
    names: list[str]
    X: np.ndarray  # float64, NaN = missing
    is_cat: np.ndarray  # bool per column
    y: np.ndarray  # class index 0..n_classes-1, the float64 target (regression), or
    # a structured array of ("event", bool) and ("time", float64) fields (survival)
    classes: np.ndarray  # empty for regression and survival
    regression: bool = False
    survival: bool = False

    @property
    def n_rows(self) -> int:
        return self.X.shape[0]

    @property
    def n_features(self) -> int:
        return self.X.shape[1]


# --------------------------------------------------------------------------- helpers


def _filled(data: _Data) -> np.ndarray:
    """Copy of ``X`` with NaN filled: numeric by mean, categorical by mode."""
    out = data.X.copy()
    for j in range(data.n_features):
        col = out[:, j]
        missing = np.isnan(col)
        if not missing.any():
            continue
        observed = col[~missing]
        if observed.size == 0:
            fill = 0.0
            logger.warning("column %r is entirely missing; filled with 0", data.names[j])
        elif data.is_cat[j]:
            levels, counts = np.unique(observed, return_counts=True)
            fill = float(levels[np.argmax(counts)])
        else:
            fill = float(observed.mean())
        col[missing] = fill
    return out


def _design(data: _Data, filled: np.ndarray, numeric: str) -> tuple[np.ndarray, np.ndarray]:
    """Numeric columns scaled (``"standard"`` or ``"minmax"``), categorical one-hot.

    Returns the design matrix and, for each of its columns, the index of the
    original feature it comes from. A constant numeric column becomes zeros.
    """
    blocks: list[np.ndarray] = []
    owner: list[int] = []
    for j in range(data.n_features):
        col = filled[:, j]
        if data.is_cat[j]:
            levels = np.unique(col)
            blocks.append((col[:, None] == levels[None, :]).astype(np.float64))
            owner.extend([j] * len(levels))
            continue
        if numeric == "standard":
            spread = col.std()
            scaled = (col - col.mean()) / spread if spread > 0 else np.zeros_like(col)
        else:
            lo, hi = col.min(), col.max()
            scaled = (col - lo) / (hi - lo) if hi > lo else np.zeros_like(col)
        blocks.append(scaled[:, None])
        owner.append(j)
    return np.hstack(blocks), np.asarray(owner, dtype=np.intp)


def _max_by_owner(values: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n)
    np.maximum.at(out, owner, np.nan_to_num(values, nan=0.0))
    return out


def _min_by_owner(p: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    out = np.ones(n)
    np.minimum.at(out, owner, np.where(np.isnan(p), 1.0, p))
    return out


def _p_to_score(p: np.ndarray) -> np.ndarray:
    p = np.where(np.isnan(p), 1.0, p)
    return -np.log10(np.clip(p, MIN_P, 1.0))


@contextmanager
def _silence_convergence(what: str) -> Iterator[None]:
    """Silence ConvergenceWarning inside the block, log it, re-emit anything else."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    n_convergence = 0
    for w in caught:
        if issubclass(w.category, ConvergenceWarning):
            n_convergence += 1
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if n_convergence:
        logger.warning(
            "%s did not converge (%d ConvergenceWarning silenced); "
            "the scores may be approximate, consider a larger max_iter",
            what,
            n_convergence,
        )


def _penalty_kwargs(l1_ratio: float) -> dict[str, Any]:
    """Penalty arguments for LogisticRegression without deprecation warnings.

    scikit-learn >= 1.8 deprecates ``penalty`` and reads the mix from
    ``l1_ratio`` alone; older versions need ``penalty``.
    """
    penalty = inspect.signature(LogisticRegression).parameters.get("penalty")
    if penalty is None or penalty.default == "deprecated":
        return {"l1_ratio": l1_ratio}
    if l1_ratio == 1.0:
        return {"penalty": "l1"}
    return {"penalty": "elasticnet", "l1_ratio": l1_ratio}


# --------------------------------------------------------------------------- methods


def _linear(
    data: _Data, method: str, params: dict[str, Any], random_state: Any
) -> tuple[np.ndarray, np.ndarray]:
    design, owner = _design(data, _filled(data), numeric="standard")
    l1_ratio = 1.0 if method == "lasso" else params["l1_ratio"]
    if data.regression:
        # C * sum((y - Xw)^2 / 2) + penalty(w), as LogisticRegression's C * sum(log-loss) +
        # penalty(w), is scikit-learn's 1/(2n) * |y - Xw|^2 + alpha * penalty(w) with
        # alpha = 1 / (C n). The target is standardized so that C does not depend on its unit.
        target = (data.y - data.y.mean()) / data.y.std()
        alpha = 1.0 / (params["C"] * data.n_rows)
        common = {"alpha": alpha, "max_iter": params["max_iter"], "tol": params["tol"]}
        if method == "lasso":
            model: Any = Lasso(**common)
        else:
            model = ElasticNet(l1_ratio=l1_ratio, **common)
        solver = "coordinate descent"
    else:
        target = data.y
        model = LogisticRegression(
            C=params["C"],
            solver="saga",
            max_iter=params["max_iter"],
            tol=params["tol"],
            random_state=random_state,
            **_penalty_kwargs(l1_ratio),
        )
        solver = "saga"
    with _silence_convergence(f"selector {method!r} ({solver})"):
        model.fit(design, target)
    coef = np.abs(np.atleast_2d(model.coef_)).max(axis=0)
    scores = _max_by_owner(coef, owner, data.n_features)

    def gradient() -> np.ndarray:
        # Gradient of the log-likelihood (regression: of the squared error) at the
        # intercept-only model: the column with the largest one is the first to enter
        # the L1 path.
        if data.regression:
            residual = target[:, None]  # standardized: the intercept-only residual
        else:
            onehot = (data.y[:, None] == np.arange(len(data.classes))[None, :]).astype(float)
            residual = onehot - onehot.mean(axis=0)
        return np.abs(design.T @ residual).max(axis=1)

    mask = _threshold_or_best(method, scores, gradient, owner, data, params)
    return scores, mask


def _coxnet(data: _Data, params: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """|coef| of scikit-survival's penalised Cox model at the penalty ``alpha = 1 / (C n)``.

    scikit-survival minimises ``-log PL(w) / n + alpha * penalty(w)`` (the mean
    negative log partial likelihood), which for ``alpha = 1 / (C n)`` is
    ``C * (-log PL(w)) + penalty(w)`` over ``C``: the logistic regression's
    objective with the partial likelihood as the loss, so that ``C`` means
    what it means for ``lasso``.
    """
    from sksurv.linear_model import CoxnetSurvivalAnalysis

    design, owner = _design(data, _filled(data), numeric="standard")
    alpha = 1.0 / (params["C"] * data.n_rows)
    model = CoxnetSurvivalAnalysis(
        alphas=[alpha],
        l1_ratio=params["l1_ratio"],
        max_iter=params["max_iter"],
        tol=params["tol"],
        fit_baseline_model=False,
    )
    with _silence_convergence("selector 'coxnet' (coordinate descent)"), warnings.catch_warnings():
        # all coefficients 0 is handled below (the best column kept, a warning logged)
        warnings.filterwarnings("ignore", message="all coefficients are zero", category=UserWarning)
        model.fit(design, data.y)
    coef = np.abs(np.asarray(model.coef_, dtype=np.float64)[:, -1])
    scores = _max_by_owner(coef, owner, data.n_features)

    def gradient() -> np.ndarray:
        # The gradient of the log partial likelihood at w = 0 (the Cox score): the column
        # with the largest one is the first to enter the L1 path.
        return np.abs(_cox_score(data.y["time"], data.y["event"], design)[0])

    mask = _threshold_or_best("coxnet", scores, gradient, owner, data, params)
    return scores, mask


def _threshold_or_best(method, scores, gradient, owner, data, params) -> np.ndarray:
    """The columns whose |coef| score passes ``params["threshold"]``; when none does, the
    single best one (logged): the largest |coef|, or, with every coefficient 0, the
    largest ``gradient()`` at the null model (the first column to enter the L1 path)."""
    mask = scores > params["threshold"]
    if mask.any():
        return mask
    if scores.max() > 0:
        best = int(np.argmax(scores))
        how = "largest |coef|"
    else:
        best = int(np.argmax(_max_by_owner(gradient(), owner, data.n_features)))
        how = "all coefficients are 0; first to enter the regularisation path"
    mask[best] = True
    logger.warning(
        "selector %r selected no feature (C=%g, threshold=%g); keeping the single best one, "
        "%r (%s)",
        method,
        params["C"],
        params["threshold"],
        data.names[best],
        how,
    )
    return mask


def _cox_score(
    time: np.ndarray, event: np.ndarray, Z: np.ndarray, joint: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The score vector and information of a Cox model at ``w = 0`` (Breslow's ties).

    ``U_j = sum over events i of (Z_ij - mean of Z_j over the rows at risk at t_i)``
    and ``I`` the sum over events of the variance (``joint``: covariance
    matrix) of ``Z`` over the rows at risk (time ``>= t_i``). Without
    ``joint`` each column is its own univariate model: ``I`` has shape
    ``(p,)``; with ``joint`` the columns are one model's: ``(p, p)``.
    """
    Z = np.asarray(Z, dtype=np.float64)
    Z = Z - Z.mean(axis=0)  # the score test does not depend on the location: fewer roundings
    order = np.argsort(-time, kind="stable")  # longest time first: a risk set is a prefix
    t, e, Zs = time[order], event[order].astype(bool), Z[order]
    last = np.searchsorted(-t, -t, side="right") - 1  # end of each row's tied block
    at_risk = (np.arange(len(t)) + 1.0)[last][e]
    s1 = np.cumsum(Zs, axis=0)[last][e]
    mean = s1 / at_risk[:, None]
    U = (Zs[e] - mean).sum(axis=0)
    if joint:
        outer = np.cumsum(Zs[:, :, None] * Zs[:, None, :], axis=0)[last][e]
        information = (outer / at_risk[:, None, None] - mean[:, :, None] * mean[:, None, :]).sum(
            axis=0
        )
    else:
        s2 = np.cumsum(Zs**2, axis=0)[last][e]
        information = (s2 / at_risk[:, None] - mean**2).sum(axis=0)
    return U, information


def _cox_univariate(data: _Data, params: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """-log10 p of each column's univariate Cox score test; categorical: one test over levels."""
    filled = _filled(data)
    time, event = data.y["time"], data.y["event"]
    p = np.ones(data.n_features)
    numeric = [j for j in np.flatnonzero(~data.is_cat) if np.ptp(filled[:, j]) > 0]
    if numeric:
        U, information = _cox_score(time, event, filled[:, numeric])
        with np.errstate(divide="ignore", invalid="ignore"):
            statistic = np.where(information > 1e-12 * len(time), U**2 / information, 0.0)
        p[numeric] = chi2_distribution.sf(statistic, 1)
    for j in np.flatnonzero(data.is_cat):
        levels = np.unique(filled[:, j])
        if len(levels) < 2:
            continue
        # one dummy per level but the first: the score test of the K-level Cox model is the
        # log-rank test across the levels (K - 1 degrees of freedom)
        dummies = (filled[:, j][:, None] == levels[None, 1:]).astype(np.float64)
        U, information = _cox_score(time, event, dummies, joint=True)
        rank = np.linalg.matrix_rank(information)
        if rank == 0:
            continue
        statistic = float(U @ np.linalg.pinv(information) @ U)
        p[j] = float(chi2_distribution.sf(max(statistic, 0.0), rank))
    return _p_to_score(p), p < params["alpha"]


def _mutual_info(data: _Data, params: dict[str, Any], random_state: Any) -> np.ndarray:
    filled = _filled(data)
    if not data.regression:
        return mutual_info_classif(
            filled,
            data.y,
            discrete_features=data.is_cat.copy(),
            n_neighbors=params["n_neighbors"],
            random_state=random_state,
        )
    scores = mutual_info_regression(
        filled,
        data.y,
        discrete_features=data.is_cat.copy(),
        n_neighbors=params["n_neighbors"],
        random_state=random_state,
    )
    # A constant column carries no information; the estimator can leave rounding noise (1e-16).
    return np.where(np.ptp(filled, axis=0) > 0, scores, 0.0)


def _random_forest(data: _Data, params: dict[str, Any], random_state: Any) -> np.ndarray:
    if data.survival:
        return _random_survival_forest(data, params, random_state)
    Forest = RandomForestRegressor if data.regression else RandomForestClassifier
    model = Forest(
        n_estimators=params["n_estimators"],
        max_depth=params["max_depth"],
        min_samples_leaf=params["min_samples_leaf"],
        random_state=random_state,
    )
    if params["importance"] == "impurity":
        model.fit(data.X, data.y)
        return np.asarray(model.feature_importances_, dtype=np.float64)

    # regression: no classes to stratify on; the held-out rows are scored by R² (the
    # regressor's score)
    strata = None if data.regression else data.y
    X_tr, X_te, y_tr, y_te = _held_out_split(data, strata, "", params, random_state)
    return _permutation_scores(model, X_tr, X_te, y_tr, y_te, params, random_state)


def _random_survival_forest(data: _Data, params: dict[str, Any], random_state: Any) -> np.ndarray:
    """Permutation importance of a random survival forest, scored by Harrell's C.

    The held-out split is stratified by the event indicator (a plain split
    when a part would get too few events or censored rows).
    """
    from sksurv.ensemble import RandomSurvivalForest

    model = RandomSurvivalForest(
        n_estimators=params["n_estimators"],
        max_depth=params["max_depth"],
        min_samples_leaf=params["min_samples_leaf"],
        random_state=random_state,
        n_jobs=1,
    )
    X_tr, X_te, y_tr, y_te = _held_out_split(
        data, data.y["event"], " by event", params, random_state
    )
    if not y_tr["event"].any() or not y_te["event"].any():
        logger.warning(
            "selector 'random_forest': a part of the held-out split has no event; every "
            "column scores 0"
        )
        return np.zeros(data.n_features)
    return _permutation_scores(model, X_tr, X_te, y_tr, y_te, params, random_state)


def _held_out_split(data: _Data, strata, by: str, params: dict[str, Any], random_state: Any):
    """The rows split into training and held-out rows for permutation importance, stratified
    by ``strata`` (a plain random split, logged, when a part would lack a stratum)."""
    try:
        return train_test_split(
            data.X,
            data.y,
            test_size=params["test_size"],
            stratify=strata,
            random_state=random_state,
        )
    except ValueError as exc:
        logger.warning(
            "selector 'random_forest': held-out split stratified%s impossible (%s); using a "
            "plain random split",
            by,
            exc,
        )
        return train_test_split(
            data.X, data.y, test_size=params["test_size"], random_state=random_state
        )


def _permutation_scores(
    model: Any,
    X_tr: np.ndarray,
    X_te: np.ndarray,
    y_tr: np.ndarray,
    y_te: np.ndarray,
    params: dict[str, Any],
    random_state: Any,
) -> np.ndarray:
    model.fit(X_tr, y_tr)
    result = permutation_importance(
        model, X_te, y_te, n_repeats=params["n_repeats"], random_state=random_state
    )
    return np.clip(np.asarray(result.importances_mean, dtype=np.float64), 0.0, None)


def _relative_mask(scores: np.ndarray, threshold: Any, method: str) -> np.ndarray:
    scores = np.nan_to_num(scores, nan=0.0)
    if threshold == "mean":
        cut = float(scores.mean())
    elif threshold == "median":
        cut = float(np.median(scores))
    else:
        cut = float(threshold)
    mask = (scores >= cut) & (scores > 0)
    if not mask.any():
        logger.warning("selector %r: no score is > 0 and >= %g; nothing selected", method, cut)
    return mask


def _numeric_f_test(data: _Data, test) -> tuple[np.ndarray, np.ndarray]:
    """The filled table and the p-value of scikit-learn's F ``test`` per numeric column.

    Categorical columns, and constant numeric ones (no test: leaving them out
    avoids 0/0 warnings), keep p = 1 for the caller to fill or leave.
    """
    filled = _filled(data)
    p = np.ones(data.n_features)
    varying = [j for j in np.flatnonzero(~data.is_cat) if np.ptp(filled[:, j]) > 0]
    if varying:
        with np.errstate(divide="ignore", invalid="ignore"):
            _, p_num = test(filled[:, varying], data.y)
        p[varying] = np.where(np.isnan(p_num), 1.0, p_num)
    return filled, p


def _f_classif(data: _Data, params: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    filled, p = _numeric_f_test(data, sk_f_classif)
    n_classes = len(data.classes)
    for j in np.flatnonzero(data.is_cat):
        levels, codes = np.unique(filled[:, j], return_inverse=True)
        if len(levels) < 2:
            continue
        table = np.zeros((len(levels), n_classes))
        np.add.at(table, (codes, data.y), 1.0)
        p[j] = float(chi2_contingency(table)[1])
    scores = _p_to_score(p)
    return scores, p < params["alpha"]


def _f_regression(data: _Data, params: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    filled, p = _numeric_f_test(data, sk_f_regression)
    target = data.y[:, None]
    for j in np.flatnonzero(data.is_cat):
        levels, codes = np.unique(filled[:, j], return_inverse=True)
        if len(levels) < 2:
            continue
        # One-way ANOVA of the target across the levels: f_classif with the levels as
        # the groups. No within-level degree of freedom (one row per level) gives NaN, p = 1.
        with np.errstate(divide="ignore", invalid="ignore"):
            _, p_cat = sk_f_classif(target, codes)
        p[j] = 1.0 if np.isnan(p_cat[0]) else float(p_cat[0])
    scores = _p_to_score(p)
    return scores, p < params["alpha"]


def _chi2(data: _Data, params: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    design, owner = _design(data, _filled(data), numeric="minmax")
    p_design = np.ones(design.shape[1])
    # A constant column carries no information (p = 1); leaving it out also
    # avoids 0/0 warnings for all-zero columns and rounding noise for the rest.
    varying = np.flatnonzero(np.ptp(design, axis=0) > 0)
    if varying.size:
        with np.errstate(divide="ignore", invalid="ignore"):
            _, p_varying = sk_chi2(design[:, varying], data.y)
        p_design[varying] = p_varying
    p = _min_by_owner(p_design, owner, data.n_features)
    return _p_to_score(p), p < params["alpha"]
