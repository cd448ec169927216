"""Real tables that ship with scikit-learn, for experiments without a download.

:func:`load_bundled` turns one of scikit-learn's bundled classification
datasets into a :class:`~fedforest.experiments.runner.Dataset`: numeric
columns named ``f0 ... f{n-1}`` and integer labels. They are read from the
scikit-learn installation, so they work offline.

Examples
--------
>>> X, y = load_bundled("wine")
>>> X.shape, sorted(set(y))
((178, 13), [0, 1, 2])
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Bundled datasets by name: what each is (rows x columns, classes).
BUNDLED = {
    "breast_cancer": "Wisconsin breast cancer, 569 x 30, 2 classes",
    "wine": "wine cultivars, 178 x 13, 3 classes",
    "digits": "8x8 handwritten digits, 1797 x 64, 10 classes",
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
    y : ndarray of int
    """
    if name not in BUNDLED:
        raise ValueError(f"unknown bundled dataset {name!r}; known: {', '.join(BUNDLED)}")
    from sklearn import datasets

    bunch = getattr(datasets, f"load_{name}")()
    data = np.asarray(bunch.data, dtype=float)
    X = pd.DataFrame(data, columns=[f"f{i}" for i in range(data.shape[1])])
    return X, np.asarray(bunch.target, dtype=int)
