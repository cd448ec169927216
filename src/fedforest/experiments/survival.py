"""The paper's protocol on time-to-event targets (``task="survival"``), in one process.

The repetition follows :mod:`~.runner`'s: one table (a survival dataset,
:func:`~.bundled.load_bundled_table`) is dealt evenly over the sites,
stratified by event, its columns assigned for the overlap J
(:func:`~.partition.split_table`); each site splits its rows into training and
test rows (and, under ``validation="holdout"``, validation rows for the
methods fitted on them; under ``"oob"`` those are fitted on the training rows scored
out of bag), all stratified by event. The time grid every leaf curve is evaluated on is
:func:`~fedforest.model.time_grid.event_time_grid` of the sites' training rows
pooled (the one rule of the grid, :mod:`fedforest.model.time_grid`). Each site trains a
scikit-survival ``RandomSurvivalForest`` on its columns (its ``random_state``
from the repetition), converted by
:meth:`~fedforest.model.forest.PooledForest.from_sksurv` on the grid, with
surrogate splits, imputers for its private columns, its columns' standard
deviations and, when a method asks, an intersection forest on the shared
columns. The forests are pooled, and every method predicts each site's test
rows through :class:`~fedforest.prediction.survival.PooledForestSurvival`,
scored by :func:`~fedforest.survival_metrics.score_survival` (Harrell's and
Uno's C, integrated Brier score, time-dependent AUC); the censoring
distribution of Uno's C, the Brier score and the AUC is the site's own
training rows'.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from .. import rules
from ..federation.splits import split_validation
from ..federation.training import SiteModels, owner_weights, pool_site_models
from ..model.forest import PooledForest
from ..model.imputers import ImputerSet, fit_imputers
from ..model.in_bag import InBagRecord, sample_counts
from ..model.surrogates import fit_surrogates
from ..model.time_grid import event_time_grid
from ..prediction.out_of_bag import InBag
from .datasets import TEST_FRACTION, Dataset
from .partition import split_table
from .reference import SiteRows, pooled_survival_reference

logger = logging.getLogger(__name__)

#: The column that carries each row's event through the deal of the rows (stratified by it).
EVENT_COLUMN = "__target__"


def survival_site_tables(
    data: Dataset, n_sites: int, jaccard: float, rep: int
) -> dict[str, tuple[pd.DataFrame, np.ndarray]]:
    """The sites' columns and survival targets of one repetition.

    The rows are dealt stratified by event (:func:`~.partition.split_table`,
    seeded by ``rep``); each site's target keeps its rows' event and time.

    Returns
    -------
    dict of str to (pandas.DataFrame, numpy.ndarray)
        Site name -> (its feature columns, its survival target).
    """
    y = np.asarray(data.y)
    frame = data.X.assign(**{EVENT_COLUMN: y["event"].astype(int)})
    tables = split_table(frame, EVENT_COLUMN, n_sites, jaccard, random_state=rep)
    return {
        site: (t.drop(columns=EVENT_COLUMN), y[t.index.to_numpy()]) for site, t in tables.items()
    }


def split_survival_rows(X: pd.DataFrame, y: np.ndarray, fraction: float, seed: int):
    """``fraction`` of a site's rows held out, stratified by event
    (:func:`~fedforest.federation.splits.split_validation`; a plain split when a site has
    fewer than two censored rows). Returns ``X_rest, X_held, y_rest, y_held``."""
    positions = np.arange(len(X))
    rest, held, _, _ = split_validation(
        pd.DataFrame({"row": positions}), y["event"].astype(int), fraction, seed
    )
    r, h = rest["row"].to_numpy(), held["row"].to_numpy()
    return X.iloc[r], X.iloc[h], y[r], y[h]


def fit_survival_site(
    site: str,
    X_train: pd.DataFrame,
    y_train: np.ndarray,
    shared: Sequence[str],
    categories: Mapping[str, Sequence[str]],
    times: np.ndarray,
    n_estimators: int = 100,
    random_state: int = 0,
    intersection: bool = False,
) -> SiteModels:
    """What one survival site trains: its random survival forest on its columns (with
    surrogate splits), imputers of its private columns from the shared ones, its columns'
    standard deviations and, with ``intersection``, a forest on the ``shared`` columns.
    The result keeps the in-bag records of its forests (``SiteModels.records``), to score
    the training rows out of bag.

    Every forest is a scikit-survival ``RandomSurvivalForest(n_estimators,
    random_state=random_state)`` converted on the grid ``times``. A simulated site's
    private columns are its own (no other site imputes them), so the imputers' scores
    decide nothing and are not cross-validated.
    """
    from sksurv.ensemble import RandomSurvivalForest

    own = list(X_train.columns)
    shared = [c for c in shared if c in own]
    private = [c for c in own if c not in shared]
    cats = {c: list(categories[c]) for c in own if c in categories}

    def forest_on(columns: list[str]) -> tuple[PooledForest, np.ndarray]:
        X = X_train[columns]
        rsf = RandomSurvivalForest(n_estimators=n_estimators, random_state=random_state, n_jobs=1)
        rsf.fit(X.to_numpy(dtype=np.float32), y_train)
        forest = PooledForest.from_sksurv(
            rsf,
            columns,
            site,
            times=times,
            X=X,
            categories={c: cats[c] for c in columns if c in cats},
        )
        return forest, sample_counts(rsf, len(X))

    forest, counts = forest_on(own)
    imputers = ImputerSet([])
    if shared and private:
        forest = fit_surrogates(forest, X_train, shared)
        imputers = fit_imputers(
            X_train,
            private,
            shared,
            categories=cats,
            owner=site,
            cv=None,
            random_state=random_state,
        )
    numeric = [c for c in own if c not in cats]
    std = {c: float(v) for c, v in X_train[numeric].std(ddof=0).fillna(0.0).items()}
    record = InBagRecord.build(site, forest, counts)
    inter = inter_record = None
    if intersection and shared:
        inter, inter_counts = forest_on(shared)
        inter_record = InBagRecord.build(site, inter, inter_counts)
    return SiteModels(forest, imputers, std, inter, record, inter_record)


def run_survival_repetition(
    data: Dataset,
    n_sites: int,
    jaccard: float,
    rep: int,
    methods: Sequence[str],
    metrics: Sequence[str],
    n_estimators: int = 100,
    depth_threshold: int = 2,
    test_fraction: float = TEST_FRACTION,
    validation_fraction: float | None = None,
    pooling_weights: str = "equal",
    auto_metric: str | None = None,
    pooled_reference: bool = False,
    grid_points: int | None = None,
    validation: str = "holdout",
) -> list[dict]:
    """One repetition of one survival scenario; tidy rows (one per site, method and metric).

    ``validation_fraction`` (given when a method is fitted on validation rows:
    ``wmp``'s weight, ``auto``'s choice) is split off each site's training rows,
    stratified by event, and no forest trains on it. ``events`` in the rows
    counts each site's test events. ``validation="oob"`` (a job's default) holds out no
    validation rows (``validation_fraction`` is then ignored): every forest trains on all
    the site's rows but its test rows, and ``wmp`` and ``auto`` are fitted on those training
    rows scored out of bag, each by the pooled trees that did not train on it
    (:class:`~fedforest.prediction.out_of_bag.InBag`, from the records the site's training
    keeps). With ``pooled_reference`` the rows also hold
    method :data:`~.reference.REFERENCE`: one random survival forest on every
    site's training and validation rows pooled (:func:`pooled_survival_reference`).
    """
    from ..prediction.survival import PooledForestSurvival
    from ..survival_metrics import score_survival

    sites = survival_site_tables(data, n_sites, jaccard, rep)
    parts = {}
    for site, (X, y) in sites.items():
        X_tr, X_te, y_tr, y_te = split_survival_rows(X, y, test_fraction, rep)
        X_val = y_val = None
        if validation_fraction and validation == "holdout":  # out of the training rows
            X_tr, X_val, y_tr, y_val = split_survival_rows(
                X_tr, y_tr, validation_fraction / (1 - test_fraction), rep
            )
        parts[site] = SiteRows(X_tr, y_tr, X_te, y_te, X_val, y_val)
    y_pooled = np.concatenate([p.y_train for p in parts.values()])
    grid_options = {} if grid_points is None else {"n_points": grid_points}
    times = event_time_grid(y_pooled["time"], y_pooled["event"], **grid_options)
    columns = {s: list(p.X_train.columns) for s, p in parts.items()}
    shared = [c for c in data.X.columns if all(c in cols for cols in columns.values())]
    intersection = any(rules.get(m).needs_intersection for m in methods)
    models = [
        fit_survival_site(
            site,
            p.X_train,
            p.y_train,
            shared,
            data.categories,
            times,
            n_estimators,
            random_state=rep * 1000 + k,
            intersection=intersection,
        )
        for k, (site, p) in enumerate(parts.items())
    ]
    pooled = pool_site_models(models)
    weights = owner_weights(pooling_weights, {s: len(p.X_train) for s, p in parts.items()})
    options = {} if auto_metric is None else {"auto_metric": auto_metric}
    key = {"dataset": data.name, "n_sites": n_sites, "jaccard": jaccard, "rep": rep}
    rows = []
    for site, p in parts.items():
        for method in methods:
            estimator = PooledForestSurvival(
                pooled.forest,
                strategy=method,
                imputers=pooled.imputers,
                feature_std=pooled.feature_std,
                depth_threshold=depth_threshold,
                site=site,
                random_state=rep,
                owner_weights=weights,
                intersection=pooled.intersection,
                **options,
            )
            if rules.get(method).needs_validation and p.X_val is not None:
                estimator.fit(p.X_val, p.y_val)
            elif rules.get(method).needs_validation:  # out of bag, as a job's site
                model = models[list(parts).index(site)]
                in_bag = InBag.from_records(
                    pooled.forest, model.in_bag, pooled.intersection, model.intersection_in_bag
                )
                estimator.fit(p.X_train, p.y_train, in_bag=in_bag)
            else:
                estimator.fit()
            risk = estimator.predict(p.X_test)
            survival = estimator.predict_survival_function(p.X_test, return_array=True)
            for metric in metrics:
                value = score_survival(metric, p.y_test, risk, survival, times, y_ref=p.y_train)
                rows.append(_row(key, site, method, metric, value, p.y_test))
    if pooled_reference:
        rows += pooled_survival_reference(parts, key, metrics, times, n_estimators, rep, data)
    return rows


def _row(key: dict, site: str, method: str, metric: str, value, y_test) -> dict:
    return {
        **key,
        "site": site,
        "method": method,
        "metric": metric,
        "value": float("nan") if value is None else float(value),
        "test_rows": len(y_test),
        "events": int(np.sum(y_test["event"])),
    }
