"""Aligning user tables with a forest's global feature space.

**The column rule** (:func:`model_columns`), the same for the library's
estimators and ``fedforest predict``: a DataFrame is matched by column name;
the model's features it lacks are missing on every row; its other columns are
ignored (and named: the estimators warn once, the command line says so). A
table with none of the model's features is refused, naming what it has and
what the model expects. An array has no names: it must hold every feature, in
the model's order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

#: The largest magnitude a float32 holds: the trees split on float32 values.
FLOAT32_MAX = float(np.finfo(np.float32).max)


#: How many names a message lists before it says "and N more".
MAX_LISTED = 20


def names_text(names: Sequence, limit: int = MAX_LISTED) -> str:
    """Names for a message, comma-separated; after ``limit`` of them, "and N more".

    >>> names_text(["a", "b", "c"], limit=2)
    'a, b and 1 more'
    """
    names = [str(n) for n in names]
    if len(names) <= limit:
        return ", ".join(names)
    return f"{', '.join(names[:limit])} and {len(names) - limit} more"


def model_columns(X, feature_names: Sequence[str], known: Sequence[str] | None = None, what="X"):
    """Apply the column rule to ``X``; return the table to predict and the ignored columns.

    Parameters
    ----------
    X : DataFrame or array of shape (n_rows, n_features)
    feature_names : sequence of str
        The model's features, in order (an array's columns).
    known : sequence of str, optional
        Every name the model uses (default ``feature_names``; with an
        intersection forest, its features too).
    what : str
        How messages name ``X``.

    Returns
    -------
    X : DataFrame or ndarray
        ``X`` itself when nothing is ignored, else its columns the model uses.
    ignored : list of str
        The columns of ``X`` the model does not use.

    Raises
    ------
    ValueError
        A DataFrame with none of the model's features, or an array whose
        number of columns is not the number of features.

    Examples
    --------
    >>> import pandas as pd
    >>> X, ignored = model_columns(pd.DataFrame({"a": [1.0], "pid": [7]}), ["a", "b"])
    >>> list(X.columns), ignored
    (['a'], ['pid'])
    """
    names = list(feature_names)
    usable = set(names if known is None else known)
    if isinstance(X, pd.DataFrame):
        cols = [str(c) for c in X.columns]
        ignored = [c for c in cols if c not in usable]
        if len(ignored) == len(cols):
            has = names_text(cols) if cols else "no columns"
            raise ValueError(
                f"{what} has none of the model's features: it has {has}; the model expects "
                f"some of {names_text(sorted(usable))} (missing features are missing on every "
                "row, other columns are ignored)"
            )
        if ignored:
            X = X.loc[:, [c in usable for c in cols]]
        return X, ignored
    arr = np.asarray(X)
    if arr.ndim != 2 or arr.shape[1] != len(names):
        shape = f"shape {arr.shape}" if arr.ndim != 2 else f"{arr.shape[1]} columns"
        raise ValueError(
            f"{what} is an array with {shape}; an array must have one column per feature of "
            f"the model, {len(names)} ({names_text(names)}), in that order: pass a pandas "
            "DataFrame to match columns by name (features it lacks are missing)"
        )
    return X, []


def to_global_matrix(
    X,
    feature_names: Sequence[str],
    categories: Mapping[str, Sequence[str]] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Place the columns of ``X`` at their global feature positions.

    Parameters
    ----------
    X : DataFrame or ndarray of shape (n_rows, n_columns)
        A DataFrame is matched by column name; it may lack features (they are
        unavailable) but may not have columns the forest does not know. An
        ndarray must hold every feature, in ``feature_names`` order.
    feature_names : sequence of str
        The global feature names.
    categories : mapping of str to list of str, optional
        Levels of categorical features. Their columns may hold integer codes
        or the level strings themselves.

    Returns
    -------
    Xg : ndarray of shape (n_rows, n_features), float32
        Values at global positions; NaN where a column is absent or a value
        is missing.
    present : ndarray of shape (n_features,), bool
        Which features had a column in ``X``.
    """
    categories = categories or {}
    names = list(feature_names)
    index = {n: i for i, n in enumerate(names)}
    if isinstance(X, pd.DataFrame):
        cols = [str(c) for c in X.columns]
        if len(set(cols)) != len(cols):
            dup = sorted({c for c in cols if cols.count(c) > 1})
            raise ValueError(f"X has duplicate columns {dup}")
        unknown = [c for c in cols if c not in index]
        if unknown:
            raise ValueError(
                f"X has columns the forest does not know: {unknown}. Known features: {names}. "
                "Drop the other columns (the target, identifiers) before predicting."
            )
        if not cols:
            raise ValueError(f"X has no columns; expected some of {names}")
        frame = X
    else:
        arr = np.asarray(X)
        if arr.ndim != 2:
            raise ValueError(f"X must be 2-dimensional, got shape {arr.shape}")
        if arr.shape[1] != len(names):
            raise ValueError(
                f"X is an array with {arr.shape[1]} columns but the forest has {len(names)} "
                "features; pass a pandas DataFrame with column names to use a subset"
            )
        frame = pd.DataFrame(arr, columns=names)
        cols = names
    if frame.shape[0] == 0:
        raise ValueError("X has 0 rows; at least one row is needed")

    Xg = np.full((frame.shape[0], len(names)), np.nan, dtype=np.float32)
    present = np.zeros(len(names), dtype=bool)
    bad: list[str] = []
    out_of_range: list[str] = []
    for col, series in zip(cols, frame.columns, strict=True):
        j = index[col]
        present[j] = True
        values = frame[series]
        if col in categories:
            Xg[:, j] = _encode_categorical(col, values, categories[col])
            continue
        if values.dtype == bool:
            values = values.astype(np.float32)
        if not (pd.api.types.is_numeric_dtype(values.dtype)):
            converted = pd.to_numeric(values, errors="coerce")
            if converted.isna().sum() > values.isna().sum():
                bad.append(col)
                continue
            values = converted
        wide = values.to_numpy(dtype=np.float64, na_value=np.nan)
        beyond = ~(np.abs(wide) <= FLOAT32_MAX) & ~np.isnan(wide)
        if beyond.any():
            row = int(np.flatnonzero(beyond)[0])
            out_of_range.append(f"{col!r} (data row {row + 1}: {wide[row]:g})")
            continue
        Xg[:, j] = wide
    if bad:
        raise ValueError(
            f"columns {bad} hold non-numeric values but are numeric features; "
            f"categorical features are {sorted(categories)}"
        )
    if out_of_range:
        raise ValueError(
            f"column{'s' if len(out_of_range) > 1 else ''} {', '.join(out_of_range)} "
            "hold values that are infinite or beyond float32's range; allowed: "
            f"finite numbers of magnitude at most {FLOAT32_MAX:.7g} (the trees split on float32 "
            "values): rescale the column, or leave the value empty to mark it missing"
        )
    return Xg, present


def _encode_categorical(col: str, values: pd.Series, levels: Sequence[str]) -> np.ndarray:
    levels = list(levels)
    if pd.api.types.is_numeric_dtype(values.dtype) and values.dtype != bool:
        codes = values.to_numpy(dtype=np.float64, na_value=np.nan)
        ok = np.isnan(codes) | ((codes == np.round(codes)) & (codes >= 0) & (codes < len(levels)))
        if not ok.all():
            raise ValueError(
                f"column {col!r} is categorical with {len(levels)} levels {levels}; integer "
                f"codes must lie in [0, {len(levels) - 1}], got {sorted(set(codes[~ok]))[:5]}"
            )
        return codes
    lookup = {lvl: float(i) for i, lvl in enumerate(levels)}
    as_str = values.astype("string")
    codes = as_str.map(lookup).astype("Float64")
    unknown = as_str[codes.isna() & as_str.notna()].unique()
    if len(unknown):
        raise ValueError(
            f"column {col!r} has levels {sorted(map(str, unknown))[:10]} that are not among "
            f"its known levels {levels}"
        )
    return codes.to_numpy(dtype=np.float64, na_value=np.nan)
