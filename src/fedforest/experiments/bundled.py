"""Real tables bundled with scikit-learn and scikit-survival, for experiments without a download.

:func:`load_bundled` turns one of scikit-learn's bundled datasets into the
features and target of a :class:`~fedforest.experiments.datasets.Dataset`:
numeric columns named ``f0 ... f{n-1}``, and integer labels for the
classification sets or numbers for the regression set ``diabetes``
(:data:`BUNDLED_TASKS`). The survival sets ``gbsg2``, ``whas500`` and
``veterans`` come with scikit-survival: their columns keep their names, a
categorical column becomes its integer codes ``0 .. K-1`` in the data's own
order of levels (listed by :func:`load_bundled_table`), and the target is a
survival target (a structured array of ``event`` and ``time``,
:func:`~fedforest.survival_metrics.survival_target`). They are read from the
installed packages, so they work offline.

Sources and licences: scikit-learn's tables ship with scikit-learn (BSD-3-Clause);
the survival tables ship with scikit-survival (GPL-3.0), which took them from
their published sources (:data:`SURVIVAL_SOURCES`).

Examples
--------
>>> X, y = load_bundled("wine")
>>> X.shape, sorted(set(y.tolist()))
((178, 13), [0, 1, 2])
>>> X, y = load_bundled("diabetes")
>>> X.shape, y.dtype.kind, BUNDLED_TASKS["diabetes"]
((442, 10), 'f', 'regression')
>>> X, y, categorical = load_bundled_table("veterans")
>>> X.shape, y.dtype.names, categorical
((137, 6), ('event', 'time'), ['Celltype', 'Prior_therapy', 'Treatment'])
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Bundled datasets by name: what each is (rows x columns, classes or target).
BUNDLED = {
    "breast_cancer": "Wisconsin breast cancer, 569 x 30, 2 classes",
    "wine": "wine cultivars, 178 x 13, 3 classes",
    "digits": "8x8 handwritten digits, 1797 x 64, 10 classes",
    "diabetes": "diabetes progression after one year, 442 x 10, a number (25-346)",
    "gbsg2": "German Breast Cancer Study Group 2, 686 x 8, recurrence-free survival (299 events)",
    "whas500": "Worcester Heart Attack Study, 500 x 14, survival after admission (215 events)",
    "veterans": "Veterans' Administration lung cancer trial, 137 x 6, survival (128 events)",
}
#: Each bundled dataset's task (:data:`~fedforest.vocabulary.TASKS`).
BUNDLED_TASKS = {
    "breast_cancer": "classification",
    "wine": "classification",
    "digits": "classification",
    "diabetes": "regression",
    "gbsg2": "survival",
    "whas500": "survival",
    "veterans": "survival",
}
#: The scikit-survival loader of each survival set.
SURVIVAL_LOADERS = {
    "gbsg2": "load_gbsg2",
    "whas500": "load_whas500",
    "veterans": "load_veterans_lung_cancer",
}
#: Where each survival set comes from (scikit-survival's copy is the one read).
SURVIVAL_SOURCES = {
    "gbsg2": "Schumacher et al., J Clin Oncol 12:2086-2093 (1994); the R package TH.data",
    "whas500": "Hosmer, Lemeshow and May, Applied Survival Analysis, 2nd ed., Wiley (2008)",
    "veterans": "Kalbfleisch and Prentice, The Statistical Analysis of Failure Time Data, "
    "Wiley (1980); the R package survival",
}


def load_bundled(name: str) -> tuple[pd.DataFrame, np.ndarray]:
    """Features and labels of a bundled dataset.

    Parameters
    ----------
    name : str
        One of :data:`BUNDLED`.

    Returns
    -------
    X : pandas.DataFrame
        Numeric columns (``f0 ... f{n-1}`` for scikit-learn's tables; a
        survival set's own names, categorical columns as integer codes).
    y : ndarray
        Integer labels (classification), float numbers (``diabetes``), or a
        survival target (fields ``event`` and ``time``).
    """
    X, y, _ = load_bundled_table(name)
    return X, y


def load_bundled_table(name: str) -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    """Features, target and categorical columns of a bundled dataset.

    Parameters
    ----------
    name : str
        One of :data:`BUNDLED`.

    Returns
    -------
    X : pandas.DataFrame
        Float columns; a categorical column holds the codes ``0 .. K-1`` of its levels.
    y : ndarray
        As :func:`load_bundled`.
    categorical : list of str
        The categorical columns (none for scikit-learn's tables).
    """
    if name not in BUNDLED:
        raise ValueError(f"unknown bundled dataset {name!r}; known: {', '.join(BUNDLED)}")
    if BUNDLED_TASKS[name] == "survival":
        return _load_survival(name)
    from sklearn import datasets

    bunch = getattr(datasets, f"load_{name}")()
    data = np.asarray(bunch.data, dtype=float)
    X = pd.DataFrame(data, columns=[f"f{i}" for i in range(data.shape[1])])
    dtype = float if BUNDLED_TASKS[name] == "regression" else int
    return X, np.asarray(bunch.target, dtype=dtype), []


def _load_survival(name: str) -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    """A scikit-survival table: categorical columns coded, the target as ``event``/``time``."""
    from sksurv import datasets

    from ..survival_metrics import survival_target

    frame, target = getattr(datasets, SURVIVAL_LOADERS[name])()
    X = pd.DataFrame(index=pd.RangeIndex(len(frame)))
    categorical = []
    for column in frame.columns:
        values = frame[column]
        if isinstance(values.dtype, pd.CategoricalDtype):
            X[column] = values.cat.codes.astype(float).replace(-1, np.nan)
            categorical.append(column)
        else:
            X[column] = values.to_numpy(dtype=float)
    event_field, time_field = target.dtype.names
    y = survival_target(target[time_field], target[event_field])
    return X, y, categorical
