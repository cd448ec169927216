"""What a local selector reads: a site's table and target, checked and prepared.

:func:`_prepare` turns the table (a DataFrame of numeric columns, the
categorical ones as integer codes) and the target of a task into the
:class:`~fedforest.election.selector_methods._Data` every selector method
reads: a classification target as class indices, a regression target as
finite numbers (:func:`_numeric_target`), a survival target as a structured
array of ``("event", bool)`` and ``("time", float64)`` (:func:`_survival_array`).
Every refusal names the column, the target or the value at fault.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..survival_metrics import check_survival_target, survival_target
from .selector_methods import _Data


def _prepare(X: Any, y: Any, categorical: Sequence[str], task: str = "classification") -> _Data:
    if not isinstance(X, pd.DataFrame):
        raise ValueError(f"X must be a pandas DataFrame, got {type(X).__name__}")
    if X.shape[1] == 0:
        raise ValueError("X has no columns; at least one feature column is needed")
    if X.shape[0] == 0:
        raise ValueError("X has no rows; at least one row is needed")
    names = [str(c) for c in X.columns]
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"X has duplicate column names: {dupes}")
    non_numeric = [str(c) for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])]
    if non_numeric:
        raise ValueError(
            f"X columns must be numeric (categorical columns as integer codes); "
            f"non-numeric columns: {non_numeric}"
        )

    survival = task == "survival"
    if survival:
        target = _survival_array(y, "y")
        y_arr = target
    else:
        y_arr = np.asarray(y)
    if y_arr.ndim == 2 and y_arr.shape[1] == 1:
        y_arr = y_arr.ravel()
    if y_arr.ndim != 1:
        raise ValueError(f"y must be one-dimensional, got shape {y_arr.shape}")
    if len(y_arr) != X.shape[0]:
        raise ValueError(f"y has {len(y_arr)} values but X has {X.shape[0]} rows")
    if not survival and pd.isna(y_arr).any():
        raise ValueError("y (target) contains missing values")
    regression = task == "regression"
    if survival:
        classes = np.zeros(0)
    elif regression:
        target = _numeric_target(y_arr, "y")
        if np.ptp(target) == 0:
            raise ValueError(
                f"target is constant (every value is {float(target[0])!r}); feature selection for "
                "task='regression' needs a target that varies"
            )
        classes = np.zeros(0)
    else:
        classes, y_idx = np.unique(y_arr, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(
                f"target has a single class ({classes.tolist()}); "
                "feature selection needs at least two classes"
            )
        target = y_idx.astype(np.intp)

    if isinstance(categorical, str):
        categorical = [categorical]
    cat_names = [str(c) for c in categorical]
    unknown = [c for c in cat_names if c not in names]
    if unknown:
        raise ValueError(f"categorical columns not in X: {unknown}")

    values = np.column_stack(
        [X.iloc[:, j].to_numpy(dtype=np.float64, na_value=np.nan) for j in range(X.shape[1])]
    )
    infinite = [names[j] for j in range(len(names)) if np.isinf(values[:, j]).any()]
    if infinite:
        raise ValueError(f"X columns contain infinite values: {infinite}")
    is_cat = np.array([n in cat_names for n in names], dtype=bool)
    for j in np.flatnonzero(is_cat):
        col = values[:, j]
        col = col[~np.isnan(col)]
        bad = col[(col < 0) | (col != np.floor(col))]
        if bad.size:
            raise ValueError(
                f"categorical column {names[j]!r} must hold integer codes 0..K-1; "
                f"found {bad[:3].tolist()}"
            )
    return _Data(
        names=names,
        X=values,
        is_cat=is_cat,
        y=target,
        classes=classes,
        regression=regression,
        survival=survival,
    )


def _numeric_target(y: Any, name: str) -> np.ndarray:
    """A regression target as float64: numbers only (no booleans), finite, no missing value."""
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr.ravel()
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if pd.isna(arr).any():
        raise ValueError(f"{name} (target) contains missing values")
    if arr.dtype.kind == "b":
        raise ValueError(
            f"{name} holds booleans; task='regression' needs numbers (a yes/no target is "
            "task='classification')"
        )
    if arr.dtype.kind == "O":
        bad = [v for v in arr.tolist() if isinstance(v, bool) or not isinstance(v, numbers.Real)]
        if bad:
            raise ValueError(f"{name} must hold numbers for task='regression'; found {bad[:3]!r}")
    elif arr.dtype.kind not in "iuf":
        raise ValueError(
            f"{name} must hold numbers for task='regression', got dtype {arr.dtype} "
            f"(e.g. {arr[:3].tolist()!r})"
        )
    values = arr.astype(np.float64)
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} (target) contains infinite values")
    return values


def _survival_array(y: Any, name: str) -> np.ndarray:
    """A survival target as a structured array of ``("event", bool)`` and ``("time", f8)``,
    checked as :func:`~fedforest.survival_metrics.check_survival_target` checks it and
    holding at least one event."""
    event, time = check_survival_target(y, name)
    if not event.any():
        raise ValueError(
            f"{name} (survival target) has no event among its {len(event)} rows; feature "
            "selection for task='survival' needs at least one event"
        )
    return survival_target(time, event)
