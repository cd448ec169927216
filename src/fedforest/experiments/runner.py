"""The missing-split paper's experimental protocol, in one process (no FLARE).

For every dataset, number of sites N, Jaccard overlap J and repetition r
(everything seeded by r): the rows are dealt evenly and stratified over N
sites, the features assigned so that the site feature sets have pairwise
Jaccard overlap J (paper eq. 23-24), each site splits 75/25 stratified into
train and test, trains its forest on its columns (plus surrogate splits,
imputers and an intersection forest on the shared columns), the forests are
pooled, and every method is scored on every site's test rows. Results are a
tidy table: one row per (dataset, n_sites, jaccard, rep, site, method, metric).

Methods fitted on validation rows (``wmp``'s guess weight, ``auto``'s choice;
:data:`~fedforest.vocabulary.VALIDATION_METHODS`) and the calibration get them
as in a job, by the validation mode. ``validation="holdout"`` (the paper's
protocol): when any is requested, each site also holds out
``validation_fraction`` of its rows from its training rows, and every
method's forests are trained on the rest, so all methods are compared on the
same forests. ``validation="oob"`` (a job's default): no site holds out
validation rows; the forests train on every row but the test rows, and the
fits use those training rows scored out of bag
(:mod:`~fedforest.prediction.out_of_bag`), from the in-bag records each
site's training keeps (:attr:`~fedforest.federation.training.SiteModels.records`),
as a job's site does.

Beside the paper's even deal of the rows (``partition="jaccard"``), the rows
can be skewed (:mod:`~.skew`): label skew (``"dirichlet"``, Dirichlet
concentration ``alpha`` over each class's shares) or quantity skew
(``"quantity"``, Dirichlet site sizes); the columns are still assigned for
the overlap J, and every site gets at least :func:`~.datasets.class_floor` rows of every
class. Natural sites (:mod:`~.sites`, one CSV file per site) keep their own
rows and columns; each repetition splits every site's rows afresh.

A regression target (``task="regression"``, a dataset of numbers:
:func:`~.datasets.dataset_task`) runs the same protocol with regression
forests (:func:`~fedforest.federation.training.fit_site_models` with
``task="regression"``), scored by RMSE, MAE or R²
(:data:`~fedforest.vocabulary.REGRESSION_METRICS`; default RMSE). Nothing
is stratified by the target: the rows are dealt in one random order
(:func:`~.partition.split_rows` with ``stratify=False``) and each site's
test and validation rows are plain random splits. Label skew (Dirichlet)
needs classes and is refused; the quantity skew deals the rows as one
class, every site getting :func:`~.datasets.regression_floor` rows first.
Calibration, hard voting and ``auto_metric`` are classification's and
are refused (``auto`` and ``wmp`` choose by validation RMSE).

A survival target (``task="survival"``: ``gbsg2``, ``whas500``, ``veterans``)
runs the protocol of :mod:`~.survival`: rows dealt and split stratified by
event, random survival forests on a time grid of the pooled training event
times, scored by Harrell's and Uno's C, the integrated Brier score and the
time-dependent AUC (:data:`~fedforest.vocabulary.SURVIVAL_METRICS`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from .. import outputs, rules
from ..federation.evaluation import evaluate_strategies
from ..federation.splits import split_validation
from ..federation.training import fit_site_models, owner_weights, pool_site_models
from ..model.pooled_model import PooledModel, PredictionSettings
from ..prediction.out_of_bag import InBag
from ..vocabulary import (
    CALIBRATION_METRICS,
    TASKS,
)
from .calibration_figures import CALIBRATION_COLUMNS
from .datasets import (
    TEST_FRACTION,
    VALIDATION_FRACTION,
    Dataset,
    check_dataset,
    class_floor,
    load_table,
    regression_floor,
)
from .markdown import CALIBRATION_FILE
from .partition import split_table
from .plan import (  # noqa: F401  (re-exported: the runner's public names)
    ALL_METHODS,
    DEFAULT_METRICS,
    METHODS,
    PAPER_JACCARDS,
    PAPER_SITES,
    TASK_METRICS,
    ExperimentPlan,
    check_task_metrics,
    check_validation,
)
from .reference import REFERENCE, SiteRows, pooled_data_reference
from .sites import load_site_files
from .skew import scenario_name, skewed_table
from .survival import run_survival_repetition

logger = logging.getLogger(__name__)

#: Columns of the runner's tidy table (``results.csv``): one row per site, method and metric;
#: ``test_rows`` and ``events`` are the site's test rows and its events (rows of the positive
#: class; empty for regression), what the report's small-sample warning rests on.
TIDY_COLUMNS = [
    "dataset",
    "n_sites",
    "jaccard",
    "rep",
    "site",
    "method",
    "metric",
    "value",
    "test_rows",
    "events",
]
#: The command named in the marker of an experiment's output folder (``fedforest.outputs``).
EXPERIMENT_COMMAND = "fedforest experiment"


@dataclass
class Repetition:
    """One repetition's sites, trained and pooled: what every method is scored on.

    Attributes
    ----------
    pooled : SiteModels
        The pooled forest, imputers, standard deviations and intersection forest.
    splits : dict
        ``site -> (X_test, y_test, X_val, y_val)``; the validation parts are
        ``None`` without validation rows.
    train_rows : dict
        ``site -> rows its forests were trained on`` (the pooling weights of
        ``pooling_weights="rows"``).
    rows : dict
        ``site -> SiteRows``: its training, validation and test rows
        (:class:`~.reference.SiteRows`, what the pooled-data reference trains on).
    in_bag : dict
        ``site -> (forest record, intersection record)``: which of its training
        rows each tree it trained trained on
        (:attr:`~fedforest.federation.training.SiteModels.records`), to score
        them out of bag (:meth:`out_of_bag`).
    """

    pooled: object
    splits: dict
    train_rows: dict = field(default_factory=dict)
    rows: dict = field(default_factory=dict)
    in_bag: dict = field(default_factory=dict)

    def out_of_bag(self, site: str, model: PooledModel) -> InBag:
        """Which trees of ``model`` trained on which of ``site``'s training rows
        (:meth:`~fedforest.prediction.out_of_bag.InBag.for_model`)."""
        return InBag.for_model(model, self.in_bag[site])


def resolve_task(data: Dataset, task: str | None = None) -> str:
    """The task of a repetition: ``task``, or the dataset's own when ``None``.

    Raises
    ------
    ValueError
        For an unknown task, or a dataset of the other task (naming the ``--task`` it takes).
    """
    if task is None:
        return data.task
    if task not in TASKS:
        raise ValueError(f"task={task!r} must be one of {', '.join(TASKS)}")
    if task != data.task:
        check_dataset(data, [2], task=task)  # refuses the other task by name
    return task


def _split(X: pd.DataFrame, y, fraction: float, seed: int, task: str):
    """``fraction`` of a site's rows held out: stratified by class
    (:func:`~fedforest.federation.splits.split_validation`), a plain random split for
    regression."""
    if task == "regression":
        return train_test_split(X, np.asarray(y), test_size=fraction, random_state=seed)
    return split_validation(X, y, fraction, seed)


def prepare_repetition(
    data: Dataset,
    n_sites: int,
    jaccard: float,
    rep: int,
    n_estimators: int = 100,
    test_fraction: float = TEST_FRACTION,
    validation_fraction: float | None = None,
    intersection: bool = True,
    partition: str = "jaccard",
    alpha: float | None = None,
    task: str | None = None,
) -> Repetition:
    """Split one repetition over the sites, train every site's models and pool them.

    With ``validation_fraction`` each site splits that share of its rows off its
    training rows (as a job's site does) and trains without them. Every site
    keeps the in-bag records of what it trained (``Repetition.in_bag``). ``partition``
    and ``alpha`` choose the deal of the rows (:func:`site_tables`). ``task``
    (default: the dataset's, :func:`resolve_task`) ``"regression"`` trains
    regression forests on rows dealt and split without stratification.
    """
    task = resolve_task(data, task)
    tables = site_tables(
        data, n_sites, jaccard, rep, partition, alpha, test_fraction, validation_fraction, task
    )
    sites = list(tables)
    columns = {s: [c for c in t.columns if c != "__target__"] for s, t in tables.items()}
    shared = [c for c in data.X.columns if all(c in columns[s] for s in sites)]
    # a simulated split's private columns are disjoint across sites: one imputer candidate per
    # column, so its score decides nothing and needs no cross-validation; natural sites may
    # share a column that not every site has, and then the candidates' scores are compared
    held = [sum(c in columns[s] for s in sites) for c in data.X.columns if c not in shared]
    imputer_cv = 3 if any(k > 1 for k in held) else None
    categories = data.categories
    forest_params = {"n_estimators": n_estimators}
    splits, models, train_rows, site_rows, in_bag = {}, {}, {}, {}, {}
    for k, site in enumerate(sites):
        t = tables[site]
        X_tr, X_te, y_tr, y_te = _split(
            t[columns[site]], t["__target__"].to_numpy(), test_fraction, rep, task
        )
        X_val = y_val = None
        if validation_fraction:  # as SiteRunner.set_schema: out of the training rows
            X_tr, X_val, y_tr, y_val = _split(
                X_tr, y_tr, validation_fraction / (1 - test_fraction), rep, task
            )
        splits[site] = (X_te, y_te, X_val, y_val)
        train_rows[site] = len(X_tr)
        site_rows[site] = SiteRows(X_tr, y_tr, X_te, y_te, X_val, y_val)
        models[site] = fit_site_models(
            site,
            X_tr,
            y_tr,
            columns[site],
            shared,
            categories,
            forest_params,
            random_state=rep * 1000 + k,
            intersection_columns=shared if intersection and shared else None,
            imputer_cv=imputer_cv,
            task=task,
        )
        in_bag[site] = models[site].records  # as SiteRunner.train keeps them
    pooled = pool_site_models(list(models.values()))
    return Repetition(pooled, splits, train_rows, site_rows, in_bag)


def site_tables(
    data: Dataset,
    n_sites: int,
    jaccard: float,
    rep: int,
    partition: str = "jaccard",
    alpha: float | None = None,
    test_fraction: float = TEST_FRACTION,
    validation_fraction: float | None = None,
    task: str = "classification",
) -> dict[str, pd.DataFrame]:
    """The sites' tables of one repetition: their columns and the target ``__target__``.

    Natural sites (``data.sites``) are their own files, whatever ``n_sites``
    and ``jaccard`` say. A single table is split by
    :func:`~.partition.split_table` (``partition="jaccard"``, the paper's
    even deal) or :func:`~.skew.skewed_table` (``"dirichlet"`` or
    ``"quantity"`` with concentration ``alpha``, at least
    :func:`~.datasets.class_floor` rows of every class per site), seeded by ``rep``.
    For ``task="regression"`` nothing is stratified by the target, and the
    quantity skew gives every site :func:`~.datasets.regression_floor` rows first.
    """
    frame = data.X.assign(__target__=data.y)
    if data.sites is not None:
        return {
            site: frame.iloc[rows][data.sites.columns[site] + ["__target__"]]
            for site, rows in data.sites.rows.items()
        }
    stratify = task != "regression"
    if partition == "jaccard":
        return split_table(
            frame, "__target__", n_sites, jaccard, random_state=rep, stratify=stratify
        )
    if stratify:
        floor = class_floor(len(np.unique(data.y)), test_fraction, validation_fraction)
    else:
        floor = regression_floor(test_fraction, validation_fraction)
    return skewed_table(
        frame, "__target__", n_sites, jaccard, partition, alpha, floor, rep, stratify=stratify
    )


def run_repetition(
    data: Dataset,
    n_sites: int,
    jaccard: float,
    rep: int,
    methods: Sequence[str] = METHODS,
    metrics: Sequence[str] | None = None,
    voting: str = "soft",
    n_estimators: int = 100,
    depth_threshold: int = 2,
    test_fraction: float = TEST_FRACTION,
    validation_fraction: float = VALIDATION_FRACTION,
    partition: str = "jaccard",
    alpha: float | None = None,
    calibration: str = "none",
    pooling_weights: str = "equal",
    auto_metric: str | None = None,
    calibration_rows: list | None = None,
    task: str | None = None,
    pooled_reference: bool = False,
    validation: str = "holdout",
) -> list[dict]:
    """One repetition of one scenario; tidy rows (one per site, method and metric).

    ``task`` (default: the dataset's own, :func:`resolve_task`) ``"regression"``
    trains regression forests and scores them by ``metrics`` of
    :data:`~fedforest.vocabulary.REGRESSION_METRICS` (default
    :data:`DEFAULT_METRICS`: the paper's three, or RMSE); ``voting``,
    ``calibration`` and ``auto_metric`` are classification's.

    When ``methods`` include one of :data:`~fedforest.vocabulary.VALIDATION_METHODS`,
    or ``calibration`` is not ``"none"`` (every strategy's calibrator is fitted
    on validation rows), each site splits ``validation_fraction`` of its rows
    off its training rows (as a job's site does under ``validation="holdout"``)
    and every forest is trained without them (``"oob"``: below). ``calibration``,
    ``pooling_weights`` (``"rows"``: each site's trees weighted by its training
    rows, :func:`~fedforest.federation.training.owner_weights`) and
    ``auto_metric`` (``None``: ``evaluate_strategies``' default) go to
    :func:`~fedforest.federation.evaluation.evaluate_strategies`. With
    ``calibration_rows`` (a list), each scored row's non-empty calibration bins
    are appended to it as :data:`CALIBRATION_COLUMNS` dicts. A skewed
    ``partition`` names the rows' dataset ``<name>@<partition>-<alpha>``
    (:func:`~.skew.scenario_name`); natural sites' rows carry ``n_sites`` and
    ``jaccard`` as given (the caller passes the number of files and their
    realised overlap).

    ``validation`` is the paper's ``"holdout"`` (above) or ``"oob"`` (a job's
    default): no site holds out validation rows, every forest trains on all
    the site's rows but its test rows, and what the holdout fits on validation
    rows is fitted on those training rows scored out of bag, passed to
    :func:`~fedforest.federation.evaluation.evaluate_strategies` with their
    in-bag matrices (``in_bag=``) exactly as a job's
    :meth:`~fedforest.federation.site.SiteRunner.evaluate` does. Without a
    method fitted on validation rows or a calibration, both modes give the
    same rows.

    With ``pooled_reference`` the rows also hold the pooled-data reference
    (method :data:`~.reference.REFERENCE`, :func:`reference_rows`): one
    scikit-learn forest of ``n_estimators`` trees, seeded by ``rep``, trained
    on every site's training and validation rows pooled (every row but the
    test rows under ``"oob"``, as the methods' forests) and scored on each
    site's test rows. It adds rows only: every method's rows are the same
    with it or without.
    """
    check_validation(validation)
    task = resolve_task(data, task)
    metrics = list(DEFAULT_METRICS[task] if metrics is None else metrics)
    check_task_metrics(task, metrics)
    if task == "survival":
        return run_survival_repetition(
            data,
            n_sites,
            jaccard,
            rep,
            methods,
            metrics,
            n_estimators,
            depth_threshold,
            test_fraction,
            validation_fraction if needs_validation(methods) else None,
            pooling_weights=pooling_weights,
            auto_metric=auto_metric,
            pooled_reference=pooled_reference,
            validation=validation,
        )
    want_val = needs_validation(methods, calibration)
    out_of_bag = want_val and validation == "oob"
    prepared = prepare_repetition(
        data,
        n_sites,
        jaccard,
        rep,
        n_estimators,
        test_fraction,
        validation_fraction if holds_out(methods, calibration, validation) else None,
        intersection=any(rules.get(m).needs_intersection for m in methods),
        partition=partition,
        alpha=alpha,
        task=task,
    )
    dataset = data.name if data.sites is not None else scenario_name(data.name, partition, alpha)
    splits, pooled = prepared.splits, prepared.pooled
    sites = list(splits)
    weights = owner_weights(pooling_weights, prepared.train_rows)
    model = PooledModel(
        pooled.forest,
        pooled.imputers,
        pooled.feature_std,
        pooled.intersection,
        PredictionSettings(owner_weights=weights),
    )
    classes = None if task == "regression" else np.unique(data.y)
    options = {} if auto_metric is None else {"auto_metric": auto_metric}
    rows = []
    for site in sites:
        X_te, y_te, X_val, y_val = splits[site]
        in_bag = None
        if out_of_bag:  # as SiteRunner.evaluate: the training rows, scored out of bag
            X_val, y_val = prepared.rows[site].X_train, prepared.rows[site].y_train
            in_bag = prepared.out_of_bag(site, model)
        scores = evaluate_strategies(
            model,
            X_te,
            y_te,
            classes,
            list(methods),
            site=site,
            voting=voting,
            depth_threshold=depth_threshold,
            metrics=metrics,
            X_val=X_val,
            y_val=y_val,
            random_state=rep,
            calibration=calibration,
            resamples=0,  # spread over repetitions instead of a bootstrap per test set
            in_bag=in_bag,
            **options,
        )
        key = {"dataset": dataset, "n_sites": n_sites, "jaccard": jaccard, "rep": rep}
        for method, row in scores.items():
            if calibration_rows is not None and row.get("bins"):
                calibration_rows.extend(_bin_rows(key, site, method, row["bins"]))
            for metric in metrics:
                value = row[metric]
                rows.append(
                    {
                        **key,
                        "site": site,
                        "method": method,
                        "metric": metric,
                        "value": float("nan") if value is None else value,
                        "test_rows": row["rows"],
                        "events": row["events"],
                    }
                )
    if pooled_reference:
        key = {"dataset": dataset, "n_sites": n_sites, "jaccard": jaccard, "rep": rep}
        rows += reference_rows(data, prepared, key, metrics, n_estimators, rep, task, classes)
    return rows


def reference_rows(
    data: Dataset,
    prepared: Repetition,
    key: dict,
    metrics: Sequence[str],
    n_estimators: int,
    rep: int,
    task: str,
    classes=None,
) -> list[dict]:
    """The pooled-data reference's tidy rows (method :data:`~.reference.REFERENCE`) for one
    repetition: every site's training and validation rows of ``prepared`` pooled, the
    columns in the dataset's order, each site's test rows scored."""
    sites = prepared.rows
    held = {c for r in sites.values() for c in r.X_train.columns}
    scores = pooled_data_reference(
        sites,
        metrics,
        forest={"n_estimators": n_estimators},
        random_state=rep,
        task=task,
        classes=classes,
        columns=[c for c in data.X.columns if c in held],
    )
    return [
        {
            **key,
            "site": site,
            "method": REFERENCE,
            "metric": metric,
            "value": row[metric],
            "test_rows": row["rows"],
            "events": row["events"],
        }
        for site, row in scores.items()
        for metric in metrics
    ]


def needs_validation(methods: Sequence[str], calibration: str = "none") -> bool:
    """Whether anything is fitted on validation rows: a method fitted on them, or calibration
    (held out under ``validation="holdout"``, :func:`holds_out`; out of bag under ``"oob"``)."""
    return calibration != "none" or any(rules.get(m).needs_validation for m in methods)


def holds_out(
    methods: Sequence[str], calibration: str = "none", validation: str = "holdout"
) -> bool:
    """Whether the sites hold out validation rows: a method fitted on them, or calibration
    (:func:`needs_validation`), under ``validation="holdout"``; never under ``"oob"``.

    Examples
    --------
    >>> holds_out(["mp", "auto"]), holds_out(["mp", "auto"], validation="oob")
    (True, False)
    >>> holds_out(["mp"], calibration="sigmoid"), holds_out(["mp"])
    (True, False)
    """
    return validation == "holdout" and needs_validation(methods, calibration)


def writes_calibration(metrics: Sequence[str], calibration: str = "none") -> bool:
    """Whether an experiment writes ``calibration.csv``: a calibration metric
    (:data:`~fedforest.vocabulary.CALIBRATION_METRICS`) is scored or ``calibration``
    is not ``"none"``."""
    return calibration != "none" or any(m in CALIBRATION_METRICS for m in metrics)


def _bin_rows(key: dict, site: str, method: str, bins: dict) -> list[dict]:
    """One :data:`CALIBRATION_COLUMNS` row per non-empty bin of a scored row."""
    return [
        {
            **key,
            "site": site,
            "method": method,
            "bin": b,
            "count": count,
            "predicted": p,
            "observed": o,
        }
        for b, (count, p, o) in enumerate(
            zip(bins["count"], bins["predicted"], bins["observed"], strict=True)
        )
        if count
    ]


def _init_worker() -> None:
    """One thread per worker process (BLAS, numba kernels): the processes already fill the cores."""
    from threadpoolctl import threadpool_limits

    from ..prediction.engines import load_kernels

    threadpool_limits(1)
    kernels, _ = load_kernels()
    if kernels is not None:
        kernels.MAX_THREADS = 1


def _task(args):
    """One repetition's tidy rows and its calibration rows (``None`` when not written)."""
    data, n_sites, jaccard, alpha, rep, plan = args
    bins = [] if writes_calibration(plan.metrics, plan.calibration) else None
    rows = run_repetition(
        data,
        n_sites,
        jaccard,
        rep,
        plan.methods,
        plan.metrics,
        plan.voting,
        plan.n_estimators,
        plan.depth_threshold,
        validation_fraction=plan.validation_fraction,
        partition=plan.partition,
        alpha=alpha,
        calibration=plan.calibration,
        pooling_weights=plan.pooling_weights,
        auto_metric=plan.auto_metric,
        calibration_rows=bins,
        task=plan.task,
        pooled_reference=plan.pooled_reference,
        validation=plan.validation,
    )
    return rows, bins


def _scenarios(plan: ExperimentPlan, data: Dataset) -> list[tuple]:
    """``(n_sites, jaccard, alpha)`` of every scenario of ``data``."""
    if data.sites is not None:
        return [(len(data.sites.names), data.sites.jaccard, None)]
    alphas = plan.alphas or [None]
    return [(n, j, a) for n in plan.n_sites for j in plan.jaccards for a in alphas]


def run_experiment(plan: ExperimentPlan, out_dir=None) -> pd.DataFrame:
    """Run every (dataset, N, J, rep) of ``plan``; return the tidy results.

    With ``out_dir`` the tidy table is written to ``out_dir/results.csv`` as the
    batches finish (a long run can be followed, and survives interruption).
    When a calibration metric (:data:`~fedforest.vocabulary.CALIBRATION_METRICS`)
    is scored or ``plan.calibration`` is not ``"none"``
    (:func:`writes_calibration`), ``out_dir/calibration.csv`` beside it gets
    every scored row's reliability bins, one row per non-empty bin
    (:data:`CALIBRATION_COLUMNS`; ``predicted`` and ``observed`` are the
    bin's means), written the same way.
    ``out_dir`` must be new, empty or the folder of an earlier experiment that
    holds only what it wrote (``fedforest.outputs``); those files
    are cleared first. Progress is logged after every finished (dataset, N, J)
    scenario.

    Raises
    ------
    ValueError
        Before anything runs or is written: for an invalid plan, a dataset
        that cannot be read or split over the sites (:func:`~.datasets.check_dataset`),
        or an ``out_dir`` that may hold a user's files; a dataset of the other task than
        ``plan.task``.
    """
    plan.validate()
    if plan.site_files:
        datasets = [
            load_site_files(
                plan.site_files, plan.target, plan.categorical, plan.name, task=plan.task
            )
        ]
    else:
        datasets = [
            load_table(d, plan.target, plan.categorical, task=plan.task) for d in plan.datasets
        ]
    for data in datasets:  # before anything runs or is written
        check_dataset(
            data,
            plan.n_sites,
            validation_fraction=(
                plan.validation_fraction
                if holds_out(plan.methods, plan.calibration, plan.validation)
                else None
            ),
            partition=plan.partition,
            alphas=plan.alphas,
            task=plan.task,
        )
        if data.sites is not None and any(rules.get(m).needs_intersection for m in plan.methods):
            if not any(all(c in cols for cols in data.sites.columns.values()) for c in data.X):
                raise ValueError(
                    f"site files {', '.join(data.sites.files.values())}: no column is in every "
                    "file, so there is no intersection forest; leave intersection out of "
                    "--methods"
                )
    names = [d.name for d in datasets]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"datasets {repeated} are given twice (by name or file stem)")
    tasks = [
        (data, n, j, a, r, plan)
        for data in datasets
        for n, j, a in _scenarios(plan, data)
        for r in range(plan.reps)
    ]
    total = len(tasks)
    logger.info(
        "experiment: %d repetitions (%d scenarios over %d datasets x %d reps), %d jobs",
        total,
        total // plan.reps,
        len(datasets),
        plan.reps,
        plan.n_jobs,
    )
    out_path = None
    if out_dir is not None:
        # a new, empty or earlier experiment folder only; what the earlier run wrote is cleared
        inputs = [*plan.site_files, *(d for d in plan.datasets if Path(d).is_file())]
        out_dir = outputs.claim_dir(out_dir, EXPERIMENT_COMMAND, inputs=inputs)
        out_path = out_dir / "results.csv"
        try:
            return _run_tasks(plan, tasks, out_path)
        finally:
            outputs.record_dir(out_dir, EXPERIMENT_COMMAND)
    return _run_tasks(plan, tasks, None)


def _run_tasks(plan: ExperimentPlan, tasks: list, out_path) -> pd.DataFrame:
    """Run the repetitions (writing ``out_path`` as they finish); the sorted tidy table."""
    per_scenario = plan.reps
    total = len(tasks)
    bins_path = None
    if out_path is not None:
        pd.DataFrame(columns=TIDY_COLUMNS).to_csv(out_path, index=False)
        if writes_calibration(plan.metrics, plan.calibration):
            bins_path = out_path.parent / CALIBRATION_FILE
            pd.DataFrame(columns=list(CALIBRATION_COLUMNS)).to_csv(bins_path, index=False)
    rows: list[dict] = []
    bin_rows: list[dict] = []
    done_per: dict[tuple, int] = {}
    start = time.monotonic()

    def collect(task, result) -> None:
        result, bins = result
        rows.extend(result)
        bin_rows.extend(bins or [])
        if out_path is not None:
            pd.DataFrame(result, columns=TIDY_COLUMNS).to_csv(
                out_path, mode="a", header=False, index=False
            )
        if bins_path is not None:
            pd.DataFrame(bins, columns=list(CALIBRATION_COLUMNS)).to_csv(
                bins_path, mode="a", header=False, index=False
            )
        data, n_sites, jaccard, alpha = task[:4]
        name = (
            data.name if data.sites is not None else scenario_name(data.name, plan.partition, alpha)
        )
        key = (name, n_sites, jaccard)
        done_per[key] = done_per.get(key, 0) + 1
        finished = sum(done_per.values())
        if done_per[key] == per_scenario:
            elapsed = time.monotonic() - start
            eta = elapsed / finished * (total - finished)
            logger.info(
                "%s N=%d J=%.2f done: %d/%d repetitions, %.0f s elapsed, ~%.0f s left",
                key[0],
                key[1],
                key[2],
                finished,
                total,
                elapsed,
                eta,
            )

    if plan.n_jobs == 1:
        for task in tasks:
            collect(task, _task(task))
    else:
        workers = min(plan.n_jobs, os.cpu_count() or 1)
        with ProcessPoolExecutor(max_workers=workers, initializer=_init_worker) as pool:
            futures = {pool.submit(_task, t): t for t in tasks}
            for future in as_completed(futures):
                collect(futures[future], future.result())
    tidy = pd.DataFrame(rows, columns=TIDY_COLUMNS)
    tidy["events"] = pd.to_numeric(tidy["events"])  # None (regression) as NaN, as the CSV reads
    tidy = tidy.sort_values(
        ["dataset", "n_sites", "jaccard", "rep", "site", "method", "metric"], kind="stable"
    ).reset_index(drop=True)
    if out_path is not None:
        tidy.to_csv(out_path, index=False)
    if bins_path is not None:
        bins = pd.DataFrame(bin_rows, columns=list(CALIBRATION_COLUMNS))
        bins.sort_values(list(CALIBRATION_COLUMNS[:7]), kind="stable").to_csv(
            bins_path, index=False
        )
    logger.info(
        "experiment finished in %.0f s (%.2f s per repetition)",
        time.monotonic() - start,
        (time.monotonic() - start) / max(total, 1),
    )
    return tidy
