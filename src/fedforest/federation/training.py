"""What a site trains and how the sites' models are pooled.

:func:`fit_site_models` is a site's training step (its forest with surrogate
splits, imputers for its private columns, per-feature standard deviations and
the optional intersection forest); :func:`pool_site_models` is the pooling
step every party runs on the sites' validated models. The job's site and
server and the experiment runner call exactly these functions.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier

from ..model.forest import PooledForest
from ..model.imputers import ImputerSet, fit_imputers
from ..model.surrogates import fit_surrogates

logger = logging.getLogger(__name__)


@dataclass
class SiteModels:
    """What one site trains: its forest (with surrogates), imputers, std, baseline."""

    forest: PooledForest
    imputers: ImputerSet
    feature_std: dict[str, float]
    intersection: PooledForest | None


def fit_site_models(
    site: str,
    X_train: pd.DataFrame,
    y_train,
    own: Sequence[str],
    shared: Sequence[str],
    categories: Mapping[str, Sequence[str]],
    forest_params: Mapping[str, Any],
    surrogate_params: Mapping[str, Any] | None = None,
    random_state=0,
    intersection_columns: Sequence[str] | None = None,
    imputer_cv: int | None = 3,
) -> SiteModels:
    """Train a site's forest on ``own`` columns, with surrogates, imputers and std.

    Surrogate splits and imputers are fitted for the private columns (``own``
    minus ``shared``) from the ``shared`` ones. With ``intersection_columns``
    a second forest on those columns is trained as the intersection baseline.
    ``imputer_cv`` is passed to :func:`fedforest.fit_imputers` (``None`` when
    no other site can impute the same columns, so scores need no CV).
    """
    own, shared = list(own), [c for c in shared if c in own]
    cats = {c: list(categories[c]) for c in own if c in categories}
    X = X_train[own]
    rf = RandomForestClassifier(**forest_params, random_state=random_state, n_jobs=1)
    rf.fit(X.to_numpy(dtype=np.float32), y_train)
    forest = PooledForest.from_sklearn(rf, own, owner=site, X=X, categories=cats)
    private = [c for c in own if c not in shared]
    imputers = ImputerSet([])
    if shared and private:
        forest = fit_surrogates(forest, X, shared, **(surrogate_params or {}))
        imputers = fit_imputers(
            X,
            private,
            shared,
            categories=cats,
            owner=site,
            cv=imputer_cv,
            random_state=random_state,
        )
    numeric = [c for c in own if c not in cats]
    std = X[numeric].std(ddof=0).fillna(0.0)
    inter = None
    if intersection_columns:
        common = list(intersection_columns)
        Xc = X_train[common]
        rf_i = RandomForestClassifier(**forest_params, random_state=random_state, n_jobs=1)
        rf_i.fit(Xc.to_numpy(dtype=np.float32), y_train)
        inter = PooledForest.from_sklearn(
            rf_i,
            common,
            owner=site,
            X=Xc,
            categories={c: list(categories[c]) for c in common if c in categories},
        )
    logger.info(
        "site %s: trained %d trees on %d columns (%d private), %d imputers",
        site,
        forest.n_trees,
        len(own),
        len(private),
        len(imputers),
    )
    return SiteModels(forest, imputers, {c: float(v) for c, v in std.items()}, inter)


def pool_site_models(models: Sequence[SiteModels]) -> SiteModels:
    """Pool what the sites trained: all trees, the best imputer per feature, the mean std.

    σ_f is the mean of the standard deviations of ``f`` over the sites that
    have it; intersection forests are pooled too when the sites trained them.
    """
    models = list(models)
    forest = PooledForest.concat([m.forest for m in models])
    imputers = ImputerSet.select([m.imputers for m in models])
    feature_std = {}
    for name in forest.feature_names:
        values = [m.feature_std[name] for m in models if name in m.feature_std]
        if values:
            feature_std[name] = float(np.mean(values))
    inters = [m.intersection for m in models if m.intersection is not None]
    intersection = PooledForest.concat(inters) if inters else None
    return SiteModels(forest, imputers, feature_std, intersection)
