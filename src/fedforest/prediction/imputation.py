"""The imputation stage of a prediction: imputed values and level CDFs for one call.

For every feature missing anywhere in the call's rows that has an imputer
(``docs/architecture.md``, "Imputers"): a numeric feature's imputed value, a
categorical one's most probable level code and the cumulative probabilities of
its levels. Nothing is imputed for a rule that does not declare ``imputers``
(:class:`fedforest.rules.Rule`).
"""

from __future__ import annotations

import logging

import numpy as np

logger = logging.getLogger(__name__)

_F32_MAX = float(np.finfo(np.float32).max)


def impute(forest, imputers, sigma, Xg, absent, dirty, rule):
    """Imputed values and level CDFs for the features missing anywhere in ``Xg``.

    Parameters
    ----------
    forest : PooledForest
    imputers : ImputerSet or None
    sigma : ndarray of shape (n_features,)
        The pooled standard deviations (NaN where unknown).
    Xg : ndarray of shape (n_rows, n_features), float32
        The global matrix (NaN = unavailable).
    absent : ndarray of bool, shape (n_features,)
        The columns the table lacks.
    dirty : ndarray of bool, shape (n_rows,)
        The rows with a NaN in a column the table has.
    rule : Rule

    Returns
    -------
    imputed : ndarray of shape (n_rows, n_features), float32
        NaN where the feature has no (usable) imputer.
    level_cdf : dict of int to ndarray of shape (n_rows, n_levels)

    Raises
    ------
    ValueError
        A rule that reads p_R (``rule.needs_std``) and a numeric imputer
        without its feature's standard deviation.
    """
    n_rows, n_feat = Xg.shape
    imputed = np.full((n_rows, n_feat), np.nan, dtype=np.float32)
    level_cdf: dict[int, np.ndarray] = {}
    if imputers is None or not rule.imputers or not (absent.any() or dirty.any()):
        return imputed, level_cdf
    index = {n: i for i, n in enumerate(forest.feature_names)}
    missing_any = absent | np.isnan(Xg).any(axis=0)
    for j in np.flatnonzero(missing_any):
        name = forest.feature_names[j]
        imp = imputers[name] if name in imputers else None
        if imp is None or not _usable(forest, name, imp, index):
            continue
        if name in forest.categories:
            proba = imp.predict_proba(Xg, index)
            level_cdf[j] = np.cumsum(proba, axis=1)
            imputed[:, j] = np.argmax(proba, axis=1)
            continue
        if rule.needs_std and not np.isfinite(sigma[j]):
            raise ValueError(
                f"strategy={rule.name!r} needs feature_std[{name!r}] (the pooled "
                "standard deviation) because an imputer exists for it"
            )
        # beyond float32 the direction of every comparison is already decided;
        # NaN (an undefined prediction) means no imputed value for that row
        imputed[:, j] = np.clip(imp.predict(Xg, index), -_F32_MAX, _F32_MAX)
    return imputed, level_cdf


def _usable(forest, name: str, imp, index: dict) -> bool:
    """Whether ``imp`` can impute the forest's feature ``name`` (else a warning says why)."""
    if any(p not in index for p in imp.predictors):
        logger.warning(
            "imputer for %r needs predictors %s that the forest does not have; unused",
            name,
            [p for p in imp.predictors if p not in index],
        )
        return False
    levels = forest.categories.get(name)
    if imp.kind != ("numeric" if levels is None else "categorical") or (
        levels is not None and imp.n_levels != len(levels)
    ):
        logger.warning(
            "imputer for %r is %s with %d levels, which does not match the forest's "
            "feature; unused",
            name,
            imp.kind,
            imp.n_levels,
        )
        return False
    return True
