"""Real tables that ship with scikit-learn, for experiments without a download.

:func:`load_bundled` turns one of scikit-learn's bundled datasets into the
features and target of a :class:`~fedforest.experiments.datasets.Dataset`:
numeric columns named ``f0 ... f{n-1}``, and integer labels for the
classification sets or numbers for the regression set ``diabetes``
(:data:`BUNDLED_TASKS`). They are read from the scikit-learn installation,
so they work offline.

Examples
--------
>>> X, y = load_bundled("wine")
>>> X.shape, sorted(set(y.tolist()))
((178, 13), [0, 1, 2])
>>> X, y = load_bundled("diabetes")
>>> X.shape, y.dtype.kind, BUNDLED_TASKS["diabetes"]
((442, 10), 'f', 'regression')
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
}
#: Each bundled dataset's task (:data:`~fedforest.vocabulary.TASKS`).
BUNDLED_TASKS = {
    "breast_cancer": "classification",
    "wine": "classification",
    "digits": "classification",
    "diabetes": "regression",
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
        Numeric columns ``f0 ... f{n-1}``.
    y : ndarray
        Integer labels (classification), or float numbers (``diabetes``).
    """
    if name not in BUNDLED:
        raise ValueError(f"unknown bundled dataset {name!r}; known: {', '.join(BUNDLED)}")
    from sklearn import datasets

    bunch = getattr(datasets, f"load_{name}")()
    data = np.asarray(bunch.data, dtype=float)
    X = pd.DataFrame(data, columns=[f"f{i}" for i in range(data.shape[1])])
    dtype = float if BUNDLED_TASKS[name] == "regression" else int
    return X, np.asarray(bunch.target, dtype=dtype)
