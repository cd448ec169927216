"""Synthetic datasets: S-500-Num, S-500-Cat and S-500-Mix (paper, section IV-B) for
classification, and F-500-Num and F-500-Mix (Friedman #1) for regression.

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

The regression sets (:func:`make_friedman`, :data:`REGRESSION_DATASETS`)
extend scikit-learn's ``make_friedman1`` (Friedman 1991): five of the 16
features carry the signal

``y = 10 sin(pi x1 x2) + 20 (x3 - 1/2)^2 + 10 x4 + 5 x5 + NOISE * N(0, 1)``

with ``x ~ U(0, 1)``, and the other eleven are noise. In F-500-Mix half of
the columns are categorical, among them the linear terms ``x4`` and ``x5``:
a categorical column of ``K`` levels (``K`` drawn from {3, 4, 5}) holds the
level of ``x`` (``x = (code + 1/2) / K``). Under the paper's split (eq. 24)
few columns are shared (4 of 16 at 6 sites and J = 0.5), so most of the five
informative columns are private to one site each: every other site misses
them at prediction time, the missing split the strategies must handle.
Every column is independent of the others, so a missing column cannot be
recovered from the shared ones; what the pooled forest adds is the other
sites' rows. The noise (sd :data:`NOISE` = 1) is small against the signal
(sd about 4.9; the Bayes RMSE is 1).

Example
-------
>>> X, y, categorical = load_dataset("S-500-Mix", random_state=0)
>>> X.shape, len(categorical)
((500, 16), 8)
>>> X, y, categorical = load_dataset("F-500-Mix")
>>> X.shape, categorical[:2], y.dtype.kind
((500, 16), ['cat_01', 'cat_02'], 'f')
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

logger = logging.getLogger(__name__)

#: Multiplier of the standardized linear predictor (its standard deviation).
SCALE = 8.0

#: Dataset name -> kind of :func:`make_synthetic` (classification sets).
DATASETS = {"S-500-Num": "num", "S-500-Cat": "cat", "S-500-Mix": "mix"}
KINDS = ("num", "cat", "mix")
LEVELS = (2, 3, 4, 5)

#: Regression dataset name -> kind of :func:`make_friedman`.
REGRESSION_DATASETS = {"F-500-Num": "num", "F-500-Mix": "mix"}
#: Kinds of :func:`make_friedman`.
FRIEDMAN_KINDS = ("num", "mix")
#: Standard deviation of the Gaussian noise of :func:`make_friedman`'s target.
NOISE = 1.0
#: Informative columns of :func:`make_friedman` (Friedman #1 has five).
FRIEDMAN_INFORMATIVE = 5
#: Levels of a categorical column of :func:`make_friedman` (at least 3: a level carries
#: most of its ``x``).
FRIEDMAN_LEVELS = (3, 4, 5)
#: Every synthetic dataset's task (:data:`~fedforest.vocabulary.TASKS`).
DATASET_TASKS = {
    **{name: "classification" for name in DATASETS},
    **{name: "regression" for name in REGRESSION_DATASETS},
}

__all__ = [
    "DATASETS",
    "DATASET_TASKS",
    "FRIEDMAN_KINDS",
    "KINDS",
    "NOISE",
    "REGRESSION_DATASETS",
    "SCALE",
    "load_dataset",
    "make_friedman",
    "make_synthetic",
]


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


def make_friedman(
    kind: str,
    n_rows: int = 500,
    n_features: int = 16,
    random_state: int | np.random.Generator | None = None,
    noise: float = NOISE,
) -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    """Generate a regression table of Friedman #1 (five informative columns, the rest noise).

    ``y = 10 sin(pi x1 x2) + 20 (x3 - 1/2)^2 + 10 x4 + 5 x5 + noise * N(0, 1)``
    with every ``x ~ U(0, 1)``, as scikit-learn's ``make_friedman1``; see the
    module docstring for the categorical columns of ``"mix"``.

    Parameters
    ----------
    kind : {"num", "mix"}
        All numeric (``x1 .. x5`` are ``num_01 .. num_05``), or half of the
        columns categorical (numeric columns get the extra one when
        ``n_features`` is odd): ``x1, x2, x3`` are ``num_01 .. num_03`` and the
        levels of ``cat_01`` and ``cat_02`` give ``x4`` and ``x5``.
    n_rows : int
        Number of rows (>= 2).
    n_features : int
        Number of features (>= 5, the informative ones).
    random_state : int, numpy.random.Generator or None
        Source of every random choice.
    noise : float
        Standard deviation of the Gaussian noise (>= 0; default :data:`NOISE`).

    Returns
    -------
    X : pandas.DataFrame
        Numeric columns ``num_01, num_02, ...`` (float in [0, 1)) followed by
        categorical columns ``cat_01, cat_02, ...`` (integer codes ``0..K-1``).
    y : numpy.ndarray
        The target (float).
    categorical : list of str
        The names of the categorical columns.

    Examples
    --------
    >>> X, y, cat = make_friedman("num", n_rows=200, n_features=6, random_state=0, noise=0)
    >>> list(X.columns), cat
    (['num_01', 'num_02', 'num_03', 'num_04', 'num_05', 'num_06'], [])
    >>> x = X.to_numpy()
    >>> bool(np.allclose(y, 10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2
    ...                  + 10 * x[:, 3] + 5 * x[:, 4]))
    True
    """
    if kind not in FRIEDMAN_KINDS:
        raise ValueError(f"kind must be one of {', '.join(FRIEDMAN_KINDS)}, got {kind!r}")
    if isinstance(n_rows, bool) or not isinstance(n_rows, (int, np.integer)) or n_rows < 2:
        raise ValueError(f"n_rows must be an integer >= 2, got {n_rows!r}")
    if (
        isinstance(n_features, bool)
        or not isinstance(n_features, (int, np.integer))
        or n_features < FRIEDMAN_INFORMATIVE
    ):
        raise ValueError(
            f"n_features must be an integer >= {FRIEDMAN_INFORMATIVE} (the informative columns), "
            f"got {n_features!r}"
        )
    if isinstance(noise, bool) or not np.isfinite(noise) or noise < 0:
        raise ValueError(f"noise must be a finite number >= 0, got {noise!r}")
    rng = np.random.default_rng(random_state)
    n_cat = n_features // 2 if kind == "mix" else 0
    n_num = n_features - n_cat
    width = max(2, len(str(n_features)))
    # x1 .. x5: the first informative columns of each kind (x4, x5 categorical in "mix")
    n_num_informative = 3 if kind == "mix" else FRIEDMAN_INFORMATIVE
    columns: dict[str, np.ndarray] = {}
    informative = []
    for j in range(n_num):
        x = rng.random(n_rows)
        columns[f"num_{j + 1:0{width}d}"] = x
        if j < n_num_informative:
            informative.append(x)
    categorical = []
    for j in range(n_cat):
        k = int(rng.choice(FRIEDMAN_LEVELS))
        codes = rng.integers(0, k, size=n_rows)
        name = f"cat_{j + 1:0{width}d}"
        columns[name] = codes
        categorical.append(name)
        if len(informative) < FRIEDMAN_INFORMATIVE:
            informative.append((codes + 0.5) / k)
    x1, x2, x3, x4, x5 = informative
    signal = 10 * np.sin(np.pi * x1 * x2) + 20 * (x3 - 0.5) ** 2 + 10 * x4 + 5 * x5
    y = signal + noise * rng.normal(size=n_rows)
    X = pd.DataFrame(columns)
    logger.debug(
        "make_friedman(%s): %d rows, %d numeric + %d categorical, target sd %.2f",
        kind,
        n_rows,
        n_num,
        n_cat,
        y.std(),
    )
    return X, y, categorical


def load_dataset(
    name: str, random_state: int | np.random.Generator | None = 0
) -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    """One of the synthetic datasets: 500 rows, 16 features.

    Parameters
    ----------
    name : str
        A classification set of the paper (:data:`DATASETS`: ``S-500-Num``,
        ``S-500-Cat``, ``S-500-Mix``, from :func:`make_synthetic`) or a
        regression set (:data:`REGRESSION_DATASETS`: ``F-500-Num``,
        ``F-500-Mix``, from :func:`make_friedman`); :data:`DATASET_TASKS`
        gives each one's task.
    random_state : int, numpy.random.Generator or None
        Seed of the generator (default 0, so the dataset is fixed).

    Returns
    -------
    tuple
        ``(X, y, categorical)`` as from :func:`make_synthetic` or :func:`make_friedman`.

    Examples
    --------
    >>> X, y, cat = load_dataset("S-500-Num")
    >>> X.shape, cat
    ((500, 16), [])
    """
    if name in REGRESSION_DATASETS:
        return make_friedman(
            REGRESSION_DATASETS[name], n_rows=500, n_features=16, random_state=random_state
        )
    if name not in DATASETS:
        raise ValueError(
            f"unknown dataset {name!r}; known: {', '.join([*DATASETS, *REGRESSION_DATASETS])}"
        )
    return make_synthetic(DATASETS[name], n_rows=500, n_features=16, random_state=random_state)
