"""The measurements: how much an outgoing forest or schema still discloses.

:func:`check_forest` says what in a forest breaks a policy (what can be
checked from the forest alone); :func:`smallest_leaf_rows`,
:func:`threshold_midpoint_share` and :func:`disclosed_rare_levels` measure
what a forest or a schema tells about the site's rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..columns import as_level_strings
from ..model.forest import PooledForest
from ..model.inputs import to_global_matrix
from ..model.traversal import MAX_PAIRS
from .levels import OTHER_LEVEL
from .policy import PrivacyPolicy


def check_forest(forest: PooledForest, policy: PrivacyPolicy) -> list[str]:
    """What in an outgoing (or received) forest breaks ``policy``; empty when nothing does.

    Checks what can be checked from the forest alone: every node's
    ``n_node_samples >= min_leaf_rows``; outside DP mode, every finite split
    and surrogate threshold on the grid (categorical ones on half-integers);
    no surrogate when ``share.surrogates`` is false. Count noise cannot be
    checked from the forest.
    """
    problems = []
    k = policy.min_leaf_rows
    smallest = smallest_leaf_rows(forest)
    if smallest < k:
        n_small = int(np.sum(forest.n_node_samples < k))
        problems.append(
            f"{n_small} nodes describe fewer than min_leaf_rows={k} rows (smallest: {smallest})"
        )
    if policy.threshold_grid is not None and not policy.dp:
        for what, feature, threshold in (
            ("split", forest.feature, forest.threshold),
            ("surrogate", forest.surrogate_feature, forest.surrogate_threshold),
        ):
            splits = (feature >= 0) & np.isfinite(threshold)
            for j in np.unique(feature[splits]):
                name = forest.feature_names[j]
                t = threshold[splits & (feature == j)]
                if name in forest.categories:
                    off = np.floor(t) + 0.5 != t
                else:
                    off = ~policy.threshold_grid.on_grid(name, t)
                if off.any():
                    problems.append(
                        f"{int(off.sum())} {what} thresholds on {name!r} are off the grid "
                        f"(e.g. {float(t[off][0])!r})"
                    )
    if not policy.share["surrogates"] and np.any(forest.surrogate_feature >= 0):
        problems.append("the forest carries surrogate splits but share.surrogates is false")
    return problems


def smallest_leaf_rows(forest: PooledForest) -> int:
    """The fewest training rows any leaf describes (a child never has more than its parent,
    so this is also the smallest count of any node)."""
    leaf = forest.feature < 0
    return int(forest.n_node_samples[leaf].min()) if leaf.any() else 0


def threshold_midpoint_share(
    forest: PooledForest, X, *, surrogates: bool = False, pairs: str = "consecutive"
) -> float:
    """Share of the sent numeric thresholds that are midpoints of the site's training values.

    A threshold counts when it equals ``a / 2 + b / 2`` (in float64 from the
    float32 values, as scikit-learn computes its thresholds) for two distinct
    values ``a < b`` of its feature in ``X``, i.e. when it discloses two
    training values:

    * ``pairs="consecutive"``: ``a`` and ``b`` consecutive among the distinct
      values of the whole table. A tree grown on a bootstrap sample, or a deep
      node, places thresholds between values that are consecutive only among
      its node's rows, which this does not count: a lower bound (about 0.1 to
      0.2 for a bootstrap forest on a few hundred rows);
    * ``pairs="any"``: any two values of the table. This counts nearly every
      threshold scikit-learn places, but on coarse data (integer ages, grid
      points) it also counts thresholds that merely happen to be such a
      midpoint: an upper bound. It costs (thresholds x distinct values)
      operations: seconds for 100 deep trees on 5 000 rows.

    Only finite thresholds on numeric features are counted (categorical cuts
    disclose levels, which the schema sends anyway; +inf splits disclose
    nothing).

    Parameters
    ----------
    forest : PooledForest
    X : DataFrame or ndarray
        The site's training rows.
    surrogates : bool
        Also count surrogate thresholds.
    pairs : {"consecutive", "any"}

    Returns
    -------
    float
        In [0, 1]; NaN when there is no such threshold.
    """
    if pairs not in ("consecutive", "any"):
        raise ValueError(f"pairs must be 'consecutive' or 'any', got {pairs!r}")
    Xg, present = to_global_matrix(X, forest.feature_names, forest.categories)
    numeric = np.append(~forest.is_categorical, False)  # trailing entry: feature -1
    found = [(forest.feature, forest.threshold)]
    if surrogates:
        found.append((forest.surrogate_feature, forest.surrogate_threshold))
    feats, thrs = [], []
    for feature, threshold in found:
        sel = (feature >= 0) & numeric[feature] & np.isfinite(threshold)
        feats.append(feature[sel])
        thrs.append(threshold[sel])
    feats_a, thrs_a = np.concatenate(feats), np.concatenate(thrs)
    if feats_a.size == 0:
        return float("nan")
    hits = 0
    for j in np.unique(feats_a):
        if not present[j]:
            raise ValueError(f"X lacks column {forest.feature_names[j]!r}")
        col = Xg[:, j]
        v = np.unique(col[~np.isnan(col)]).astype(np.float64)
        if v.size < 2:
            continue
        t = thrs_a[feats_a == j]
        if pairs == "consecutive":
            mids = v[:-1] / 2.0 + v[1:] / 2.0
            mids = np.where((mids == v[1:]) | ~np.isfinite(mids), v[:-1], mids)
            hits += int(np.isin(t, mids).sum())
            continue
        # t = a/2 + b/2 with a < b in v  <=>  b = 2t - a is in v (exact for float32 values);
        # scikit-learn uses a itself when the midpoint rounds to b
        uniq, inverse = np.unique(t, return_inverse=True)
        mid = np.isin(uniq, v)
        below = np.searchsorted(v, uniq)  # values v[:below] are < t
        step = max(1, MAX_PAIRS // v.size)
        for lo in range(0, uniq.size, step):
            tt = uniq[lo : lo + step, None]
            b = 2.0 * tt - v[None, :]
            pos = np.minimum(np.searchsorted(v, b), v.size - 1)
            hit = (v[pos] == b) & (np.arange(v.size)[None, :] < below[lo : lo + step, None])
            mid[lo : lo + step] |= hit.any(axis=1)
        is_mid = mid[inverse]
        hits += int(is_mid.sum())
    return hits / feats_a.size


def disclosed_rare_levels(
    levels_sent: Mapping[str, Sequence[str]], frame: pd.DataFrame, min_rows: int
) -> dict[str, list[str]]:
    """The levels sent that have between 1 and ``min_rows - 1`` rows in ``frame``.

    ``levels_sent`` is what left the site (``SiteSchema.levels``, or the
    ``levels`` of its schema payload); ``frame`` is the site's original table.
    A level the site has no row of discloses nothing about its rows, and
    :data:`~fedforest.privacy.levels.OTHER_LEVEL` is the pooled group, so neither counts. Only columns
    with a disclosed level appear.
    """
    out: dict[str, list[str]] = {}
    for col, levels in levels_sent.items():
        if col not in frame.columns:
            continue
        counts = as_level_strings(frame[col]).dropna().value_counts()
        found = sorted(
            str(lvl)
            for lvl in levels
            if lvl != OTHER_LEVEL and 0 < int(counts.get(lvl, 0)) < min_rows
        )
        if found:
            out[col] = found
    return out
