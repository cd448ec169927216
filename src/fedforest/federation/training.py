"""What a site trains and how the sites' models are pooled.

:func:`fit_site_models` is a site's training step (its forest with surrogate
splits, imputers for its private columns, per-feature standard deviations and
the optional intersection forest); :func:`pool_site_models` is the pooling
step every party runs on the sites' validated models. The job's site and
server and the experiment runner call exactly these functions.

A site's :class:`~fedforest.privacy.policy.PrivacyPolicy` (``privacy=``)
shapes what :func:`fit_site_models` returns, which is what the site sends:

* trees are grown with ``min_samples_leaf`` of at least ``min_leaf_rows`` and
  then go through :func:`~fedforest.privacy.transforms.prepare_forest`
  (surrogates stripped, thresholds snapped to the grid and the trees recounted,
  count noise, pruning to ``min_leaf_rows``), the intersection forest too;
* ``share`` switches: withheld imputers, std, surrogates or intersection forest
  are not computed. A site that withholds ``feature_std`` also withholds its
  numeric imputers (a numeric imputer needs the feature's σ for ``ipr`` and
  ``mp``, and a model with a numeric imputer but no σ is refused by
  ``PooledModel.from_payload``); its categorical imputers, which need no σ, are still sent;
* DP mode (``dp_epsilon``): :func:`~fedforest.privacy.dp_forest.fit_dp_forest`
  trees (``dp_trees`` of depth ``dp_max_depth``, drawn from the public
  ``feature_ranges`` and the job seed, with Laplace noise on the leaf counts
  (regression: on each leaf's count and its sum of the target clipped to the
  public ``target_range``) from the operating system's entropy) replace the
  scikit-learn forest, pruned
  to ``min_leaf_rows`` on their noisy counts; no imputer, no std, no surrogate.
  The intersection forest, when shared, is a second DP forest, and
  :func:`~fedforest.privacy.policy.dp_budget` splits ``dp_epsilon`` between
  the two.

Every random choice derives from ``random_state`` (the job seed) except the
noise (count noise and DP noise), which must stay secret from the server and
so comes from the operating system: runs with noise are not bit-reproducible.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from ..model.forest import PooledForest
from ..model.imputers import ImputerSet, fit_imputers
from ..model.in_bag import InBagRecord, sample_counts, tagged_by_tree, tree_origin
from ..model.surrogates import fit_surrogates
from ..privacy.dp_forest import fit_dp_forest
from ..privacy.policy import PrivacyPolicy, dp_budget
from ..privacy.survival import enforce_min_leaf_events
from ..privacy.transforms import enforce_min_leaf_rows, prepare_forest
from ..vocabulary import POOLING_WEIGHTS, TASKS

logger = logging.getLogger(__name__)


@dataclass
class SiteModels:
    """What one site trains: its forest (with surrogates), imputers, std, baseline.

    ``in_bag`` and ``intersection_in_bag`` (:class:`~fedforest.model.in_bag.InBagRecord`)
    are which of the site's training rows each tree it sends trained on: set
    by :func:`fit_site_models` for the site's own models, ``None`` for pooled
    or received ones. They stay at the site: no payload carries them.
    """

    forest: PooledForest
    imputers: ImputerSet
    feature_std: dict[str, float]
    intersection: PooledForest | None
    in_bag: InBagRecord | None = None
    intersection_in_bag: InBagRecord | None = None

    @property
    def records(self) -> tuple[InBagRecord | None, InBagRecord | None]:
        """``(in_bag, intersection_in_bag)``: what the site keeps to score its training rows
        out of bag (:meth:`~fedforest.prediction.out_of_bag.InBag.for_model`)."""
        return self.in_bag, self.intersection_in_bag


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
    privacy: PrivacyPolicy | None = None,
    classes: Sequence | None = None,
    task: str = "classification",
    times: Sequence[float] | None = None,
) -> SiteModels:
    """Train a site's forest on ``own`` columns, with surrogates, imputers and std.

    Surrogate splits and imputers are fitted for the private columns (``own``
    minus ``shared``) from the ``shared`` ones. With ``intersection_columns``
    a second forest on those columns is trained as the intersection baseline.
    ``imputer_cv`` is passed to :func:`fedforest.fit_imputers` (``None`` when
    no other site can impute the same columns, so scores need no CV).

    ``privacy`` (default: the default policy, which changes nothing) is
    applied to everything returned, as the module docstring says: the result
    is what the site may send. ``classes`` (the global schema's) are the
    classes of DP trees (their leaves then cover every class of the job).
    ``task="regression"`` trains ``RandomForestRegressor`` forests (numeric
    ``y_train``); everything else is the same. ``task="survival"`` trains
    scikit-survival's ``RandomSurvivalForest`` (``y_train``: the structured
    array of :func:`fedforest.survival_metrics.survival_target`), whose trees
    are read on the job's time grid ``times``
    (:meth:`~fedforest.model.forest.PooledForest.from_sksurv`), and
    ``min_leaf_rows`` then also counts each leaf's events
    (:func:`~fedforest.privacy.survival.enforce_min_leaf_events`).

    The result keeps the in-bag records of the forests it returns
    (``in_bag``, ``intersection_in_bag``: which rows of ``X_train`` each
    tree as sent trained on; trees a transform removed have no entry), for
    the site's out-of-bag scores (:mod:`fedforest.prediction.out_of_bag`).
    DP trees count as trained on every row (their counts are).
    """
    if task not in TASKS:
        raise ValueError(f"task={task!r} is not one of {list(TASKS)}")
    Forest = RandomForestRegressor if task == "regression" else RandomForestClassifier
    if task == "survival":
        from sksurv.ensemble import RandomSurvivalForest as Forest  # the survival extra

        if times is None:
            raise ValueError("task='survival' needs the job's time grid (times=...)")
    policy = PrivacyPolicy() if privacy is None else privacy
    own, shared = list(own), [c for c in shared if c in own]
    cats = {c: list(categories[c]) for c in own if c in categories}
    X = X_train[own]
    private = [c for c in own if c not in shared]
    sur_params = dict(surrogate_params or {})
    if policy.dp:
        return _fit_dp_models(
            site,
            X_train,
            y_train,
            own,
            categories,
            policy,
            random_state,
            intersection_columns,
            classes,
            task,
        )
    params = forest_params_for(policy, forest_params, len(X))
    rf = Forest(**params, random_state=random_state, n_jobs=1)
    rf.fit(X.to_numpy(dtype=np.float32), y_train)
    forest = _converted(rf, own, site, X, cats, times)
    imputers = ImputerSet([])
    if shared and private:
        if policy.share["surrogates"]:
            forest = fit_surrogates(forest, X, shared, **sur_params)
        if policy.share["imputers"]:
            imputers = fit_imputers(
                X,
                private,
                shared,
                categories=cats,
                owner=site,
                cv=imputer_cv,
                random_state=random_state,
            )
            if not policy.share["feature_std"]:  # no σ for them: numeric imputers stay here
                imputers = ImputerSet(imp for imp in imputers.values() if imp.kind != "numeric")
    forest, record = _prepared(forest, rf, policy, site, X, y_train, sur_params)
    std: dict[str, float] = {}
    if policy.share["feature_std"]:
        numeric = [c for c in own if c not in cats]
        std = {c: float(v) for c, v in X[numeric].std(ddof=0).fillna(0.0).items()}
    inter = inter_record = None
    if intersection_columns and policy.share["intersection"]:
        common = list(intersection_columns)
        Xc = X_train[common]
        rf_i = Forest(**params, random_state=random_state, n_jobs=1)
        rf_i.fit(Xc.to_numpy(dtype=np.float32), y_train)
        inter = _converted(
            rf_i,
            common,
            site,
            Xc,
            {c: list(categories[c]) for c in common if c in categories},
            times,
        )
        inter, inter_record = _prepared(inter, rf_i, policy, site, Xc, y_train, sur_params)
    logger.info(
        "site %s: trained %d trees on %d columns (%d private), %d imputers",
        site,
        forest.n_trees,
        len(own),
        len(private),
        len(imputers),
    )
    return SiteModels(forest, imputers, std, inter, record, inter_record)


def _converted(rf, columns, site, X, categories, times) -> PooledForest:
    """A fitted scikit-learn (or scikit-survival, read on ``times``) forest as a PooledForest."""
    if times is not None:
        return PooledForest.from_sksurv(
            rf, list(columns), site, times=np.asarray(times), X=X, categories=categories
        )
    return PooledForest.from_sklearn(rf, list(columns), owner=site, X=X, categories=categories)


def _prepared(forest, rf, policy, site, X, y, sur_params) -> tuple[PooledForest, InBagRecord]:
    """The forest as the site sends it (:func:`prepare_forest`; survival trees also
    :func:`~fedforest.privacy.survival.enforce_min_leaf_events`) and its in-bag record."""
    counts = sample_counts(rf, len(X))
    if policy.is_default:
        return forest, InBagRecord.build(site, forest, counts)
    # one owner per tree while the transforms run: the trees that remain say where they came from
    tagged = tagged_by_tree(forest)
    if forest.is_survival:  # before any tree is dropped, while counts[i] is tree i's sample
        tagged = enforce_min_leaf_events(
            tagged, X, np.asarray(y)["event"], policy.min_leaf_rows, in_bag=counts
        )
        # survival policies have no threshold grid nor count noise (check_task): no recount
        tagged = prepare_forest(tagged, policy, X, None, **sur_params)
    else:
        tagged = prepare_forest(tagged, policy, X, y, in_bag=counts, **sur_params)
    forest, origin = tree_origin(tagged, site)
    return forest, InBagRecord.build(site, forest, counts[origin])


def forest_params_for(
    policy: PrivacyPolicy, forest_params: Mapping[str, Any], n_rows: int
) -> dict[str, Any]:
    """The scikit-learn forest's parameters under ``policy`` for ``n_rows`` training rows.

    ``min_samples_leaf`` is raised to ``min_leaf_rows`` (leaves of at least k
    rows from the start), and with ``tree_sample_fraction`` each tree's
    bootstrap draws ``max_samples`` rows
    (:meth:`~fedforest.privacy.policy.PrivacyPolicy.tree_rows`).

    Examples
    --------
    >>> from fedforest.privacy.policy import PrivacyPolicy
    >>> p = PrivacyPolicy(min_leaf_rows=5, tree_sample_fraction=0.3)
    >>> forest_params_for(p, {"n_estimators": 10}, 1000)
    {'n_estimators': 10, 'min_samples_leaf': 5, 'max_samples': 300}
    """
    params = dict(forest_params)
    k = policy.min_leaf_rows
    if k > 1 and params.get("min_samples_leaf", 1) < k:
        params["min_samples_leaf"] = k
    rows = policy.tree_rows(n_rows)
    if rows is not None and params.get("bootstrap", True):
        params["max_samples"] = rows
    return params


def _fit_dp_models(
    site: str,
    X_train: pd.DataFrame,
    y_train,
    own: list[str],
    categories: Mapping[str, Sequence[str]],
    policy: PrivacyPolicy,
    random_state,
    intersection_columns: Sequence[str] | None,
    classes: Sequence | None,
    task: str = "classification",
) -> SiteModels:
    """DP mode: random trees with noisy counts; nothing else computed from the rows.

    The structure of both forests is drawn from one generator seeded with the
    job seed (the forest first, so it does not depend on whether an
    intersection forest is trained). The noise comes from the operating
    system (``noise_state=None``), never from the seed. Regression trees
    (``task="regression"``) release noisy leaf means within the policy's
    public ``target_range``, which
    :meth:`~fedforest.privacy.policy.PrivacyPolicy.check_task` requires (a
    :class:`~fedforest.errors.ConfigError` otherwise, before any row is used).
    """
    policy.check_task(task)
    want_inter = bool(intersection_columns) and policy.share["intersection"]
    budget = dp_budget(policy, want_inter)
    structure = np.random.default_rng(random_state)
    k = policy.min_leaf_rows

    def dp_forest(columns: Sequence[str], epsilon: float) -> PooledForest:
        columns = list(columns)
        forest = fit_dp_forest(
            X_train[columns],
            y_train,
            policy.feature_ranges,
            {c: list(categories[c]) for c in columns if c in categories},
            policy.n_dp_trees,
            policy.dp_depth,
            epsilon,
            random_state=structure,
            classes=None if task == "regression" else classes,
            owner=site,
            task=task,
            target_range=policy.target_range if task == "regression" else None,
        )
        return enforce_min_leaf_rows(forest, k)

    forest = dp_forest(own, budget["forest"])
    inter = dp_forest(intersection_columns, budget["intersection"]) if want_inter else None
    n = len(X_train)

    def every_row(f):  # a DP tree's counts are of every row
        return None if f is None else InBagRecord.build(site, f, np.ones((f.n_trees, n), bool))

    logger.info(
        "site %s: DP mode, %d random trees of depth %d on %d columns (epsilon %g%s)",
        site,
        forest.n_trees,
        policy.dp_depth,
        len(own),
        budget["forest"],
        f", intersection forest epsilon {budget['intersection']:g}" if want_inter else "",
    )
    return SiteModels(forest, ImputerSet([]), {}, inter, every_row(forest), every_row(inter))


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


def owner_weights(kind: str, n_rows: Mapping[str, int]) -> dict[str, float] | None:
    """The pooling weight of each site's trees (``pooling.weights``).

    ``equal`` gives ``None`` (every tree one vote, as the paper pools);
    ``rows`` weighs each site's trees by its training rows, so that a site
    with 30 rows counts less than one with 200.

    Examples
    --------
    >>> owner_weights("rows", {"a": 30, "b": 200})
    {'a': 30.0, 'b': 200.0}
    >>> owner_weights("equal", {"a": 30, "b": 200}) is None
    True
    """
    if kind not in POOLING_WEIGHTS:
        raise ValueError(f"pooling weights {kind!r} is not one of {list(POOLING_WEIGHTS)}")
    if kind == "equal":
        return None
    return {str(site): float(rows) for site, rows in n_rows.items()}
