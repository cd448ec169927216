"""A site's pooled forest with surrogates and imputers, and the tables it predicts.

The forest is a real scikit-learn forest on four features (``c`` numeric, ``k``
categorical with three levels); the predicting site lacks ``c`` and ``k`` and
has NaN in ``a`` on some rows.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

from fedforest import PooledForest, fit_imputers, fit_surrogates
from fedforest.prediction.pipeline import Settings

LEVELS = ["lo", "mid", "hi"]
NAMES = ["a", "b", "c", "k"]


@pytest.fixture(scope="session")
def pooled_site():
    rng = np.random.RandomState(7)
    n = 500
    g = rng.normal(size=n)
    X = pd.DataFrame(
        {
            "a": g + 0.3 * rng.normal(size=n),
            "b": rng.normal(size=n),
            "c": g + 0.2 * rng.normal(size=n),
            "k": np.digitize(g + 0.5 * rng.normal(size=n), [-0.5, 0.5]).astype(float),
        }
    )
    y = (g + 0.5 * X["b"] + rng.normal(scale=0.4, size=n) > 0).astype(int)
    train, test = X[:400], X[400:].reset_index(drop=True)
    rf = RandomForestClassifier(n_estimators=6, max_depth=5, random_state=0).fit(train, y[:400])
    forest = PooledForest.from_sklearn(rf, NAMES, owner="s1", categories={"k": LEVELS})
    forest = fit_surrogates(forest, train, ["a", "b"])
    imputers = fit_imputers(
        train, ["c", "k"], ["a", "b"], categories={"k": LEVELS}, owner="s1", random_state=0
    )
    sigma = train.std().to_numpy()
    lacking = test[["a", "b"]].copy()
    lacking.loc[::5, "a"] = np.nan  # NaN in a column the site has
    return SimpleNamespace(
        rf=rf, forest=forest, imputers=imputers, sigma=sigma, test=test, lacking=lacking, y=y
    )


def settings(
    pooled_site, depth_threshold=1, engine="numpy", random_state=0, imputers=True
) -> Settings:
    """The prediction settings of ``pooled_site``'s forest (no pooling weights, no site name)."""
    return Settings(
        forest=pooled_site.forest,
        imputers=pooled_site.imputers if imputers else None,
        sigma=pooled_site.sigma,
        depth_threshold=depth_threshold,
        site=None,
        random_state=random_state,
        engine=engine,
        owner_weights=None,
    )
