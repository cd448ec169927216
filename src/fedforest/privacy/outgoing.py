"""What a privacy policy lets leave a site, decided on the outgoing message alone.

A privacy filter stands between a site and the network: it has the site's
policy and the message the site is about to send, but not the site's rows. So
it applies what the message alone allows and refuses what it cannot fix
(:class:`Refusal`, whose reason names features and counts, never a value of
the message). This module holds those checks and transforms; which of them a
message goes through is :mod:`fedforest.federation.message_filter`'s table, and
:mod:`fedforest.flare.privacy_filter` is FLARE's adapter. Nothing here needs
FLARE.

* the policy a filter enforces: :func:`filter_policy` (its arguments and/or
  the ``privacy:`` block of a YAML file, the stricter per key),
  :func:`enforced_policy` (the part a filter can enforce without the rows);
* aggregates: :func:`check_rows` (nothing computed on fewer than
  ``min_leaf_rows`` rows leaves), :func:`check_vote` and
  :func:`check_mask_score` (DP mode: only the ``none`` selector's vote and the
  constant :data:`DP_MASK_SCORE`);
* forests: :func:`tighten_forest` (categorical thresholds to the cut between
  level codes, :func:`cut_between_codes`; surrogates removed or, under a grid,
  those off it, :func:`off_grid`; nodes under k pruned; count noise; a split
  threshold off the grid refused), :func:`tighten_models` (a training reply's
  parts: its forests and the ``share`` switches);
* the reported policy: :func:`reported_policy` (a metrics reply names the
  policy that applied on the way out).

Every function that changes something appends a note (a line of the site's
log) to ``notes``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..model.forest import PooledForest
from ..model.imputers import ImputerSet
from ..yaml_files import read_yaml_file
from .audit import check_forest
from .policy import PrivacyPolicy, ThresholdGrid, effective_policy
from .transforms import add_count_noise, enforce_min_leaf_rows, strip_surrogates

#: The mask score a site in DP mode replies for every proposed mask (tuning): a constant
#: adds the same term to every mask's pooled score, so it never changes which scores better.
DP_MASK_SCORE = 0.0


class Refusal(Exception):
    """A message the policy does not let leave; the message is the reason (it names
    features and counts, never a value of the message)."""


# ==================================================================== the policy
def filter_policy(
    min_leaf_rows=None,
    threshold_grid=None,
    count_noise_epsilon=None,
    share=None,
    policy_file=None,
    source: str = "privacy filter",
    time_resolution=None,
) -> PrivacyPolicy:
    """A filter's policy from its arguments and/or a YAML file (the stricter per key).

    Each argument is checked as the ``privacy:`` key of the same name; an error names
    ``source``, the argument (or the file and key), the bad value and what is allowed.

    Examples
    --------
    >>> filter_policy(min_leaf_rows=20, share={"surrogates": False}).min_leaf_rows
    20
    >>> filter_policy(min_leaf_rows=0, source="F")
    Traceback (most recent call last):
    ...
    fedforest.errors.ConfigError: F: argument 'min_leaf_rows' is 0; allowed: an integer in [1, 2147483647]
    """
    block = {
        key: value
        for key, value in (
            ("min_leaf_rows", min_leaf_rows),
            ("threshold_grid", threshold_grid),
            ("count_noise_epsilon", count_noise_epsilon),
            ("share", share),
            ("time_resolution", time_resolution),
        )
        if value is not None
    }
    try:
        policy = PrivacyPolicy.from_dict(plain(block), source=source, prefix="")
    except ConfigError as err:
        raise ConfigError(str(err).replace(f"{source}: key ", f"{source}: argument ", 1)) from None
    if policy_file is None:
        return policy
    from_file = _policy_from_file(policy_file, source)
    return effective_policy(from_file, policy) if block else from_file


def _policy_from_file(policy_file, source: str) -> PrivacyPolicy:
    allowed = (
        "the path of a YAML file with a privacy: block (such as the site's local/fedforest.yaml)"
    )
    if not isinstance(policy_file, (str, os.PathLike)) or not os.fspath(policy_file):
        raise ConfigError(
            f"{source}: argument 'policy_file' is {policy_file!r}; allowed: {allowed}"
        )
    path = Path(policy_file)
    if not path.is_file():
        raise ConfigError(
            f"{source}: argument 'policy_file' is {os.fspath(policy_file)!r}, which is not a "
            f"file (a relative path is read from {Path.cwd()}); allowed: {allowed}"
        )
    try:
        data = read_yaml_file(path)
    except ConfigError as err:
        raise ConfigError(f"{err}; the file: {allowed}") from None
    if not isinstance(data, Mapping) or "privacy" not in data:
        raise ConfigError(f"{path}: key 'privacy' is missing; allowed: {allowed}")
    return PrivacyPolicy.from_dict(data["privacy"], source=str(path))


def plain(value):
    """A copy made of plain dicts and lists (a JSON reader's and the YAML reader's shapes).

    Examples
    --------
    >>> plain({"share": (False,)})
    {'share': [False]}
    """
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def enforced_policy(policy: PrivacyPolicy) -> PrivacyPolicy:
    """The part of ``policy`` a filter enforces on what it lets through: ``min_leaf_rows``,
    the grid (outside DP mode), ``count_noise_epsilon`` and ``share``. ``min_level_rows``
    and ``dp_epsilon`` need the rows: only the site enforces them."""
    return PrivacyPolicy(
        min_leaf_rows=policy.min_leaf_rows,
        threshold_grid=None if policy.dp else policy.threshold_grid,
        count_noise_epsilon=policy.count_noise_epsilon,
        share=policy.share,
        source=policy.source,
    )


# ================================================================= aggregates
def check_rows(policy: PrivacyPolicy, n_rows: int, what: str) -> None:
    """Refuse an aggregate (``what``) computed on fewer than ``min_leaf_rows`` rows."""
    k = policy.min_leaf_rows
    if n_rows < k:
        raise Refusal(f"{what} describes {n_rows} rows, fewer than min_leaf_rows={k}")


def check_vote(policy: PrivacyPolicy, n_rows: int, mask: np.ndarray, scores: np.ndarray) -> None:
    """A vote: computed on at least k rows; in DP mode, the ``none`` selector's (every
    column kept, equal scores)."""
    check_rows(policy, n_rows, "the vote")
    if policy.dp and (not np.all(mask) or np.unique(scores).size > 1):
        raise Refusal(
            "in DP mode a site votes with the 'none' selector (every column kept, equal "
            "scores); this vote was selected on the rows"
        )


def check_mask_score(policy: PrivacyPolicy, score: float, n_rows: int) -> None:
    """A mask score: computed on at least k rows; in DP mode, :data:`DP_MASK_SCORE`."""
    check_rows(policy, n_rows, "the mask score")
    if policy.dp and score != DP_MASK_SCORE:
        raise Refusal(
            f"in DP mode a site scores every mask {DP_MASK_SCORE}; this score was computed "
            "on the rows"
        )


def reported_policy(policy: PrivacyPolicy, reported: Mapping | None) -> dict:
    """The policy a metrics reply reports (``reported``, ``None`` for none) tightened with
    what the filter enforced (:func:`enforced_policy`), as ``PrivacyPolicy.to_dict``
    writes it; when the two grids do not nest, the filter's grid is the one reported."""
    enforced = enforced_policy(policy)
    try:
        base = PrivacyPolicy() if reported is None else PrivacyPolicy.from_dict(dict(reported))
        tightened = effective_policy(base, enforced)
    except ConfigError:  # two grids that do not nest: the filter's grid was enforced
        tightened = effective_policy(
            PrivacyPolicy.from_dict({**reported, "threshold_grid": None}), enforced
        )
    return tightened.to_dict()


# ===================================================================== forests
def off_grid(
    forest: PooledForest, grid: ThresholdGrid, feature: np.ndarray, threshold: np.ndarray
) -> np.ndarray:
    """Per node: a finite threshold off the grid (categorical: not a cut between codes).

    ``feature`` and ``threshold`` are the forest's split arrays or its surrogate arrays.
    """
    off = np.zeros(forest.n_nodes, bool)
    used = (feature >= 0) & np.isfinite(threshold)
    for j in np.unique(feature[used]):
        at = used & (feature == j)
        t = threshold[at]
        name = forest.feature_names[int(j)]
        if name in forest.categories:
            off[at] = np.floor(t) + 0.5 != t
        else:
            off[at] = ~grid.on_grid(name, t)
    return off


def cut_between_codes(forest: PooledForest) -> tuple[PooledForest, int]:
    """Categorical thresholds (split and surrogate) moved to ``floor(t) + 0.5``; the
    forest and the number of thresholds moved.

    Level codes are integers, so ``x <= t`` and ``x <= floor(t) + 0.5`` route
    every code alike (kept within [-0.5, K - 0.5] for K levels), and so do the
    imputed codes and the level probabilities of ``mi``, ``ipr`` and ``mp``.
    A threshold such as 1.0 (between codes 0 and 2) tells that the node saw no
    row of code 1; the cut 1.5 does not.
    """
    if not forest.categories:
        return forest, 0
    n_levels = np.array(
        [len(forest.categories.get(name, ())) for name in forest.feature_names] + [0], float
    )
    categorical = n_levels > 0
    arrays = {}
    moved = 0
    for feature, key in (
        (forest.feature, "threshold"),
        (forest.surrogate_feature, "surrogate_threshold"),
    ):
        t = getattr(forest, key)
        at = (feature >= 0) & categorical[feature] & np.isfinite(t)
        cut = np.clip(np.floor(t) + 0.5, -0.5, n_levels[feature] - 0.5)
        change = at & (cut != t)
        moved += int(change.sum())
        arrays[key] = np.where(change, cut, t)
    if not moved:
        return forest, 0
    out = forest.with_surrogates(
        forest.surrogate_feature,
        arrays["surrogate_threshold"],
        forest.surrogate_left_le,
        forest.surrogate_agreement,
    )
    out.threshold = arrays["threshold"]
    return out, moved


def tighten_forest(
    policy: PrivacyPolicy, forest: PooledForest, where: str, notes: list[str]
) -> PooledForest:
    """One outgoing forest made to comply with ``policy``, or :class:`Refusal`.

    In order: under a grid (outside DP mode) categorical thresholds move to the cut
    between codes; surrogate splits are removed (``share.surrogates`` false) or, under a
    grid, those off it; nodes under ``min_leaf_rows`` are pruned; with
    ``count_noise_epsilon``, Laplace noise on the leaf counts (as sent: scikit-learn's
    bootstrap-weighted counts) and pruning again. Refused: a split threshold off the
    grid (it cannot be snapped without the rows that route through it; the reason names
    the features, the counts and any feature the grid has no rule for), or a forest
    whose every tree has fewer than k rows. ``where`` names the forest in the notes and
    the reasons.
    """
    k = policy.min_leaf_rows
    grid = None if policy.dp else policy.threshold_grid
    if grid is not None:
        forest, moved = cut_between_codes(forest)
        if moved:
            notes.append(
                f"{where}: {moved} thresholds on categorical features moved to the cut "
                "between level codes (every code is routed as before)"
            )
    n_surrogates = int(np.sum(forest.surrogate_feature >= 0))
    if n_surrogates and not policy.share["surrogates"]:
        forest = strip_surrogates(forest)
        notes.append(f"{where}: {n_surrogates} surrogate splits removed (share.surrogates false)")
    elif n_surrogates and grid is not None:
        off = off_grid(forest, grid, forest.surrogate_feature, forest.surrogate_threshold)
        if off.any():
            keep = ~off
            forest = forest.with_surrogates(
                np.where(keep, forest.surrogate_feature, -1),
                np.where(keep, forest.surrogate_threshold, 0.0),
                np.where(keep, forest.surrogate_left_le, True),
                np.where(keep, forest.surrogate_agreement, 0.0),
            )
            notes.append(f"{where}: {int(off.sum())} surrogate splits off the grid removed")
    nodes, trees = forest.n_nodes, forest.n_trees
    try:
        forest = enforce_min_leaf_rows(forest, k)
        if policy.count_noise_epsilon is not None:
            noisy = add_count_noise(forest, policy.count_noise_epsilon)
            forest = enforce_min_leaf_rows(noisy, k)
            notes.append(
                f"{where}: Laplace noise (epsilon {policy.count_noise_epsilon:g}) on leaf counts"
            )
    except ValueError:
        raise Refusal(
            f"{where}: every tree describes fewer than min_leaf_rows={k} rows, so no tree "
            "can be sent"
        ) from None
    if forest.n_nodes != nodes:
        notes.append(
            f"{where}: {nodes - forest.n_nodes} nodes under min_leaf_rows={k} pruned"
            + (f", {trees - forest.n_trees} trees dropped" if forest.n_trees != trees else "")
        )
    if grid is not None:
        _refuse_off_grid(forest, grid, where)
    if check_forest(forest, policy):  # cannot happen after the steps above; never let it leave
        raise Refusal(f"{where}: the forest still breaks the policy after filtering")
    return forest


def _refuse_off_grid(forest: PooledForest, grid: ThresholdGrid, where: str) -> None:
    off = off_grid(forest, grid, forest.feature, forest.threshold)
    if not off.any():
        return
    by_feature: dict[str, int] = {}
    for j in forest.feature[off]:
        name = forest.feature_names[int(j)]
        by_feature[name] = by_feature.get(name, 0) + 1
    uncovered = grid.uncovered(sorted(f for f in by_feature if f not in forest.categories))
    detail = ", ".join(f"{n} on {f!r}" for f, n in sorted(by_feature.items()))
    raise Refusal(
        f"{where}: {int(off.sum())} split thresholds are off the threshold grid ({detail})"
        + (f"; the grid has no rule for {uncovered}" if uncovered else "")
        + ". The filter cannot snap a threshold without the site's rows: set "
        "privacy.threshold_grid in the site's local/fedforest.yaml so the site "
        "snaps its thresholds when it trains"
    )


def tighten_models(
    policy: PrivacyPolicy,
    forest: PooledForest,
    imputers: ImputerSet,
    feature_std: Mapping[str, float],
    intersection: PooledForest | None,
    notes: list[str],
) -> tuple[PooledForest, ImputerSet, dict[str, float], PooledForest | None]:
    """A training reply's parts made to comply: the forest (:func:`tighten_forest`, a
    :class:`Refusal` refuses the reply), the ``share`` switches (``imputers`` emptied;
    ``feature_std`` emptied, with the numeric imputers, which need it; the intersection
    forest dropped) and the intersection forest (dropped, with a note, when it cannot be
    made to comply)."""
    share = policy.share
    std = dict(feature_std)
    forest = tighten_forest(policy, forest, "forest", notes)
    if not share["imputers"] and len(imputers):
        notes.append(f"{len(imputers)} imputers withheld (share.imputers false)")
        imputers = ImputerSet([])
    if not share["feature_std"]:
        if std:
            notes.append(f"{len(std)} standard deviations withheld (share.feature_std false)")
            std = {}
        numeric = [f for f in imputers if imputers[f].kind == "numeric"]
        if (
            numeric
        ):  # a numeric imputer needs its sigma (PooledModel.from_payload refuses it without)
            notes.append(f"numeric imputers {numeric} withheld (they need feature_std)")
            imputers = ImputerSet(imputers[f] for f in imputers if f not in numeric)
    if intersection is not None and not share["intersection"]:
        notes.append("intersection forest withheld (share.intersection false)")
        intersection = None
    if intersection is not None:
        try:
            intersection = tighten_forest(policy, intersection, "intersection forest", notes)
        except Refusal as why:
            notes.append(f"intersection forest withheld: {why}")
            intersection = None
    return forest, imputers, std, intersection
