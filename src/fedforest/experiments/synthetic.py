"""Synthetic datasets S-500-Num, S-500-Cat and S-500-Mix (paper, section IV-B).

Every feature contributes evenly to a binary target through a logistic model:

* a numeric feature ``x ~ N(0, 1)`` contributes ``beta * x`` with a random
  sign ``beta = +-1``;
* a categorical feature has ``K`` levels (``K`` drawn from {2, 3, 4, 5}),
  values uniform over the levels and stored as integer codes ``0..K-1``; it
  contributes ``e[level]`` where the per-level effects ``e`` are drawn from
  ``N(0, 1)`` and then standardized to mean 0 and variance 1 under the
  uniform level distribution.

So every feature's contribution has mean 0 and variance 1, and
``y ~ Bernoulli(sigmoid(SCALE * sum / sqrt(n_features)))``. The linear
predictor is symmetric around 0, so the classes are balanced in expectation
(imbalance ratio close to 1, as in Table I of the paper; 1.0-1.25 for seeds 0-5).

``SCALE = 8`` was tuned so that a random forest (200 trees) on all 16 features
of a 500-row table reaches a 5-fold cross-validated AUC of about 0.85-0.93
(seeds 0-5; the Bayes-optimal AUC is about 0.985), and a site's local forest
after a 2-site split at J = 0.7 an AUPRC near 0.8, close to the "Local"
column of Table III. With ``scale = 3`` the forest stays near AUC 0.80-0.83:
an additive signal spread over 16 features is hard for trees on 500 rows.
Each feature on its own reaches an AUC of about 0.58-0.63.

Example
-------
>>> X, y, categorical = load_dataset("S-500-Mix", random_state=0)
>>> X.shape, len(categorical)
((500, 16), 8)
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

logger = logging.getLogger(__name__)

#: Multiplier of the standardized linear predictor (its standard deviation).
SCALE = 8.0

#: Dataset name -> kind of :func:`make_synthetic`.
DATASETS = {"S-500-Num": "num", "S-500-Cat": "cat", "S-500-Mix": "mix"}
KINDS = ("num", "cat", "mix")
LEVELS = (2, 3, 4, 5)

__all__ = ["DATASETS", "KINDS", "SCALE", "load_dataset", "make_synthetic"]


def make_synthetic(
    kind: str,
    n_rows: int = 500,
    n_features: int = 16,
    random_state: int | np.random.Generator | None = None,
    scale: float = SCALE,
) -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    """Generate a binary classification table where every feature counts equally.

    Parameters
    ----------
    kind : {"num", "cat", "mix"}
        All numeric, all categorical, or half of each (numeric columns get the
        extra one when ``n_features`` is odd).
    n_rows : int
        Number of rows (>= 2).
    n_features : int
        Number of features (>= 1; >= 2 for ``"mix"``).
    random_state : int, numpy.random.Generator or None
        Source of every random choice.
    scale : float
        Standard deviation of the linear predictor (default :data:`SCALE`);
        larger values make the target less noisy.

    Returns
    -------
    X : pandas.DataFrame
        Numeric columns ``num_01, num_02, ...`` (float) followed by
        categorical columns ``cat_01, cat_02, ...`` (integer codes ``0..K-1``).
    y : numpy.ndarray
        The 0/1 target (int).
    categorical : list of str
        The names of the categorical columns.

    Examples
    --------
    >>> X, y, cat = make_synthetic("cat", n_rows=100, n_features=4, random_state=1)
    >>> list(X.columns), cat == list(X.columns), sorted(set(y.tolist()))
    (['cat_01', 'cat_02', 'cat_03', 'cat_04'], True, [0, 1])
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if isinstance(n_rows, bool) or not isinstance(n_rows, (int, np.integer)) or n_rows < 2:
        raise ValueError(f"n_rows must be an integer >= 2, got {n_rows!r}")
    min_features = 2 if kind == "mix" else 1
    if (
        isinstance(n_features, bool)
        or not isinstance(n_features, (int, np.integer))
        or n_features < min_features
    ):
        raise ValueError(
            f"n_features must be an integer >= {min_features} for kind {kind!r}, got {n_features!r}"
        )
    if not np.isfinite(scale) or scale < 0:
        raise ValueError(f"scale must be a finite number >= 0, got {scale!r}")
    rng = np.random.default_rng(random_state)
    n_cat = {"num": 0, "cat": n_features, "mix": n_features // 2}[kind]
    n_num = n_features - n_cat
    width = max(2, len(str(n_features)))
    columns: dict[str, np.ndarray] = {}
    contribution = np.zeros(n_rows)
    for j in range(n_num):
        x = rng.normal(size=n_rows)
        beta = rng.choice((-1.0, 1.0))
        columns[f"num_{j + 1:0{width}d}"] = x
        contribution += beta * x
    categorical = []
    for j in range(n_cat):
        k = int(rng.choice(LEVELS))
        codes = rng.integers(0, k, size=n_rows)
        effects = rng.normal(size=k)
        effects = (effects - effects.mean()) / effects.std()  # uniform levels: mean 0, var 1
        name = f"cat_{j + 1:0{width}d}"
        columns[name] = codes
        categorical.append(name)
        contribution += effects[codes]
    eta = scale * contribution / np.sqrt(n_features)
    y = (rng.random(n_rows) < 1 / (1 + np.exp(-eta))).astype(int)
    X = pd.DataFrame(columns)
    logger.debug(
        "make_synthetic(%s): %d rows, %d numeric + %d categorical, positive share %.3f",
        kind,
        n_rows,
        n_num,
        n_cat,
        y.mean(),
    )
    return X, y, categorical


def load_dataset(
    name: str, random_state: int | np.random.Generator | None = 0
) -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    """One of the paper's synthetic datasets: 500 rows, 16 features.

    Parameters
    ----------
    name : {"S-500-Num", "S-500-Cat", "S-500-Mix"}
        The dataset (see :data:`DATASETS`).
    random_state : int, numpy.random.Generator or None
        Seed of the generator (default 0, so the dataset is fixed).

    Returns
    -------
    tuple
        ``(X, y, categorical)`` as from :func:`make_synthetic`.

    Examples
    --------
    >>> X, y, cat = load_dataset("S-500-Num")
    >>> X.shape, cat
    ((500, 16), [])
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    return make_synthetic(DATASETS[name], n_rows=500, n_features=16, random_state=random_state)
