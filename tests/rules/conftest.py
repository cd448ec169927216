"""Pooled forests of real scikit-learn forests, with imputers and surrogates, and tables that
miss a column (absent) and some values (NaN)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

from fedforest import ImputerSet, PooledForest, fit_imputers, fit_surrogates

SHARED = ["age", "bmi", "glucose"]
#: What site-2 predicts with: "insulin", site-1's private column, is absent.
SITE_2 = SHARED + ["skin"]


def hospital(rng, n):
    g = rng.normal(size=n)
    X = pd.DataFrame(
        {
            "age": rng.normal(size=n),
            "bmi": g + rng.normal(size=n),
            "glucose": rng.normal(size=n),
            "insulin": g + 0.3 * rng.normal(size=n),
            "skin": -g + rng.normal(size=n),
        }
    )
    return X, (g + 0.5 * rng.normal(size=n) > 0).astype(int)


@pytest.fixture(scope="package")
def pooled():
    """Two sites' forests pooled, their imputers and pooled std, a site-2 table, validation rows."""
    rng = np.random.default_rng(3)
    forests, imputer_sets, stds = [], [], []
    for site, private in [("site-1", "insulin"), ("site-2", "skin")]:
        X, y = hospital(rng, 300)
        X = X[SHARED + [private]]
        rf = RandomForestClassifier(n_estimators=12, max_depth=7, random_state=1).fit(X, y)
        forest = PooledForest.from_sklearn(rf, list(X.columns), owner=site, X=X)
        forests.append(fit_surrogates(forest, X, SHARED[:2]))
        imputer_sets.append(fit_imputers(X, [private], SHARED, owner=site, random_state=0))
        stds.append(X.std().to_dict())
    forest = PooledForest.concat(forests)
    X_test, _ = hospital(rng, 150)
    X_test = X_test[SITE_2].copy()
    X_test.loc[::5, "bmi"] = np.nan  # NaN in a column the site has: the dynamic traversals
    X_val, y_val = hospital(rng, 100)
    return {
        "forest": forest,
        "imputers": ImputerSet.select(imputer_sets),
        "std": pd.DataFrame(stds).mean().to_dict(),
        "X": X_test,
        "validation": (X_val[SITE_2], y_val),
    }


def numba_available() -> bool:
    try:
        import fedforest.prediction.numba_kernels  # noqa: F401
    except ImportError:
        return False
    return True
