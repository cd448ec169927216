"""How fedforest reads a table's columns: their kind, class labels and level strings.

A column is categorical when it is listed as such or is not numeric
(:func:`column_kind`). Class labels are plain integers when every label is an
integer-valued number, else strings (:func:`normalize_labels`,
:func:`class_labels`). Category levels travel as strings, integer-valued
numbers without a trailing ``.0`` (:func:`as_level_strings`). The site's schema,
its table checks, its privacy policy and the ``predict`` command all read
columns this way, so that they agree.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def normalize_labels(y) -> np.ndarray:
    """Labels as an int64 array (integer-valued numbers) or a string array."""
    series = pd.Series(y)
    if pd.api.types.is_numeric_dtype(series.dtype) and series.dtype != bool:
        values = series.to_numpy(dtype=float)
        if np.all(np.isfinite(values)) and np.all(values == np.round(values)):
            return values.astype(np.int64)
    return series.astype(str).to_numpy(dtype=str)


def column_kind(series: pd.Series, listed_categorical: bool = False) -> str:
    """``"categorical"`` for a listed column or any non-numeric one, else ``"numeric"``."""
    numeric = pd.api.types.is_numeric_dtype(series.dtype) or series.dtype == bool
    return "categorical" if listed_categorical or not numeric else "numeric"


def class_labels(y) -> list:
    """Sorted distinct class labels of ``y`` as plain ints or strings.

    The same labels :func:`normalize_labels` gives each row, so that the
    schema's class list and a site's encoded targets always agree.
    """
    values = normalize_labels(pd.Series(y).dropna())
    return sorted(set(values.tolist()))


def as_level_strings(series: pd.Series) -> pd.Series:
    """Category levels as strings; integer-valued numbers without a trailing '.0'."""
    if pd.api.types.is_numeric_dtype(series.dtype) and series.dtype != bool:
        values = series.to_numpy(dtype=float, na_value=np.nan)
        finite = values[~np.isnan(values)]
        if np.all(finite == np.round(finite)):
            return pd.Series(values, index=series.index).astype("Int64").astype("string")
    return series.astype("string")
