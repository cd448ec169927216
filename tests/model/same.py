"""Two forests are the same: every array bit for bit, every strategy's probabilities bit for bit."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fedforest import PooledForest, PooledForestClassifier
from fedforest.model.forest import NODE_FIELDS
from fedforest.vocabulary import STRATEGIES

ARRAYS = ("tree_start", "tree_owner", "value", *NODE_FIELDS)


def assert_same_arrays(a: PooledForest, b: PooledForest, skip=()) -> None:
    """Same names, classes, owners, categories and every array (dtype, shape and bits)."""
    assert a.feature_names == b.feature_names and a.owners == b.owners
    assert a.categories == b.categories
    assert a.classes.tolist() == b.classes.tolist()
    for key in ARRAYS:
        if key in skip:
            continue
        x, y = getattr(a, key), getattr(b, key)
        assert x.dtype == y.dtype and x.shape == y.shape, key
        assert np.array_equal(x.view(np.uint8), y.view(np.uint8)), f"{key} differs in its bits"


def frames(forest: PooledForest, n: int = 40, seed: int = 0) -> list[pd.DataFrame]:
    """Rows with every column, rows lacking half of the columns, NaN here and there."""
    rng = np.random.default_rng(seed)
    full = pd.DataFrame(index=range(n))
    for name in forest.feature_names:
        levels = forest.categories.get(name)
        if levels is not None:
            values = rng.integers(0, len(levels), size=n).astype(float)
        else:
            values = rng.normal(size=n)
        full[name] = values
    holes = full.copy()
    holes = holes.mask(rng.random(holes.shape) < 0.15)
    half = holes[forest.feature_names[: max(1, forest.n_features // 2)]]
    return [full, holes, half]


def assert_same_predictions(
    a: PooledForest,
    b: PooledForest,
    imputers=None,
    feature_std=None,
    strategies=STRATEGIES,
    depth_threshold: int = 1,
) -> int:
    """Every strategy gives bit-identical probabilities with ``a`` and ``b``."""
    checked = 0
    for X in frames(a):
        for strategy in strategies:
            for voting in ("soft", "hard"):
                kwargs = dict(
                    strategy=strategy,
                    imputers=imputers,
                    feature_std=feature_std,
                    depth_threshold=depth_threshold,
                    voting=voting,
                    site=a.owners[0],
                    random_state=3,
                    guess_weight=0.3,
                )
                pa = PooledForestClassifier(a, **kwargs).predict_proba(X)
                pb = PooledForestClassifier(b, **kwargs).predict_proba(X)
                where = f"{strategy} ({voting}), columns {list(X.columns)}"
                assert pa.dtype == pb.dtype and pa.shape == pb.shape, where
                assert np.array_equal(pa.view(np.uint8), pb.view(np.uint8)), where
                checked += 1
    return checked
