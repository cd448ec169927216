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
:data:`~fedforest.vocabulary.VALIDATION_METHODS`) get them as in a job: when
any is requested, each site also holds out ``validation_fraction`` of its rows
from its training rows, and every method's forests are trained on the rest,
so all methods are compared on the same forests.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .. import outputs
from ..federation.evaluation import evaluate_strategies
from ..federation.splits import split_validation
from ..federation.training import fit_site_models, pool_site_models
from ..vocabulary import EXPERIMENT_METHODS, METRICS, PAPER_METHODS, VALIDATION_METHODS, VOTING
from .partition import split_table

logger = logging.getLogger(__name__)

#: The nine methods of the paper's comparison (the default).
METHODS = PAPER_METHODS
#: Every method the runner can score.
ALL_METHODS = EXPERIMENT_METHODS
PAPER_SITES = (2, 3, 4, 6)
PAPER_JACCARDS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
TIDY_COLUMNS = ["dataset", "n_sites", "jaccard", "rep", "site", "method", "metric", "value"]
#: The command named in the marker of an experiment's output folder (``fedforest.outputs``).
EXPERIMENT_COMMAND = "fedforest experiment"


@dataclass
class Dataset:
    """A table for experiments: features, labels and which columns are categorical."""

    name: str
    X: pd.DataFrame
    y: np.ndarray
    categorical: list[str] = field(default_factory=list)

    @property
    def categories(self) -> dict[str, list[str]]:
        """Levels of the categorical columns (integer codes 0..K-1)."""
        out = {}
        for c in self.categorical:
            k = int(np.nanmax(self.X[c].to_numpy(dtype=float))) + 1
            out[c] = [str(i) for i in range(k)]
        return out


def load_table(
    spec: str, target: str | None = None, categorical: Sequence[str] = (), random_state: int = 0
) -> Dataset:
    """A synthetic dataset by name (``S-500-Mix`` ...), a dataset bundled with scikit-learn
    (``breast_cancer``, ``wine``, ``digits``) or a CSV file with a target column.

    Non-numeric CSV columns are coded as integers and treated as categorical.
    A file of the same name as a bundled dataset is read as the file.
    """
    from .bundled import BUNDLED, load_bundled
    from .synthetic import DATASETS, load_dataset

    if spec in DATASETS:
        X, y, cats = load_dataset(spec, random_state=random_state)
        return Dataset(spec, X, np.asarray(y), list(cats))
    path = Path(spec)
    if spec in BUNDLED and not path.is_file():
        X, y = load_bundled(spec)
        return Dataset(spec, X, y, [])
    if not path.is_file():
        raise ValueError(
            f"dataset {spec!r} is neither a known synthetic set {sorted(DATASETS)}, a dataset "
            f"bundled with scikit-learn {sorted(BUNDLED)} nor a CSV file"
        )
    if not target:
        raise ValueError(f"dataset {spec}: give the target column (--target)")
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as err:  # pandas' parser errors are ValueErrors
        raise ValueError(f"dataset {spec}: cannot read it as a CSV file: {err}") from err
    columns = ", ".join(map(str, frame.columns))
    if target not in frame.columns:
        raise ValueError(
            f"dataset {spec}: the target (--target) {target!r} is not a column; columns: {columns}"
        )
    unknown = [c for c in categorical if c not in frame.columns]
    if unknown:
        raise ValueError(
            f"dataset {spec}: the categorical columns (--categorical) "
            f"{', '.join(map(repr, unknown))} are not columns; columns: {columns}"
        )
    if target in categorical:
        raise ValueError(f"dataset {spec}: --categorical names the target {target!r}")
    missing = int(frame[target].isna().sum())
    if missing:
        raise ValueError(
            f"dataset {spec}: the target {target!r} is missing in {missing} rows; drop them first"
        )
    y = frame.pop(target).to_numpy()
    cats = list(categorical)
    for col in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[col]) or col in cats:
            codes, _ = pd.factorize(frame[col], sort=True)
            frame[col] = np.where(codes < 0, np.nan, codes)
            if col not in cats:
                cats.append(col)
    return Dataset(path.stem, frame.astype(float), y, cats)


#: Share of each site's rows held out for testing (paper: 75/25).
TEST_FRACTION = 0.25
#: Share of each site's rows held out for validation when a method needs them (as in a job).
VALIDATION_FRACTION = 0.2


def rows_per_class(n_sites: int, test_fraction: float = TEST_FRACTION) -> int:
    """Rows of every class a dataset needs so that each of ``n_sites`` sites can be scored.

    A site's stratified split (test share ``f``) gives a class with ``k`` rows
    at most ``ceil(k (1 - f))`` training rows, so at least one test row when
    ``k >= 1 / f``, and then at least one training row too. With
    ``ceil(1 / f)`` rows of every class (4 for f = 0.25) at a site, its
    training and its test rows hold every class and every metric is defined.
    :func:`~.partition.split_rows` deals each class evenly, so the worst site
    gets ``floor(count / n_sites)`` rows of it: a class needs
    ``n_sites * ceil(1 / f)`` rows.

    Examples
    --------
    >>> rows_per_class(3)
    12
    """
    return n_sites * math.ceil(1 / test_fraction - 1e-9)


def check_dataset(
    data: Dataset,
    n_sites: Sequence[int],
    test_fraction: float = TEST_FRACTION,
    validation_fraction: float | None = None,
) -> None:
    """Refuse a dataset the sites cannot learn from and be scored on, naming what is lacking.

    Raises
    ------
    ValueError
        If the dataset has no feature, a single class, fewer rows of a
        class than :func:`rows_per_class` for the largest number of sites,
        or, with ``validation_fraction``, too few rows at the smallest site
        to split off validation rows (:func:`validation_split_problem`).
    """
    if data.X.shape[1] < 1:
        raise ValueError(f"dataset {data.name}: no feature column besides the target")
    labels, counts = np.unique(np.asarray(data.y), return_counts=True)
    found = ", ".join(f"{label}: {count}" for label, count in zip(labels, counts, strict=True))
    if len(labels) < 2:
        raise ValueError(
            f"dataset {data.name}: the target has a single class ({found} rows); "
            "an experiment needs at least two classes"
        )
    most = max(n_sites)
    need = rows_per_class(most, test_fraction)
    short = [str(label) for label, count in zip(labels, counts, strict=True) if count < need]
    if short:
        per_site = need // most
        raise ValueError(
            f"dataset {data.name}: {len(data.y)} rows, class counts {{{found}}}; {most} sites "
            f"need at least {need} rows of every class ({per_site} per site, so that each "
            f"site's {1 - test_fraction:.0%}/{test_fraction:.0%} split leaves every class in "
            f"its training and its test rows); too few rows of class {', '.join(short)}. "
            "Use fewer sites (--sites) or more rows"
        )
    if validation_fraction:
        for n in sorted(set(n_sites)):
            problem = validation_split_problem(counts // n, test_fraction, validation_fraction)
            if problem:
                raise ValueError(
                    f"dataset {data.name}: with validation rows (for "
                    f"{', '.join(VALIDATION_METHODS)}), {problem} at {n} sites. Use fewer sites "
                    "(--sites), a smaller --validation-fraction or more rows"
                )


def validation_split_problem(
    per_class: np.ndarray, test_fraction: float, validation_fraction: float
) -> str | None:
    """Why a site with ``per_class`` rows of each class cannot split off validation rows.

    The site's rows are split as :func:`run_repetition` does (test rows, then
    validation rows out of the rest, both stratified when every class has two
    rows), and a stratified split needs at least one row of every class on
    each side, as scikit-learn requires. ``None`` when the splits work.

    Examples
    --------
    >>> validation_split_problem(np.array([4, 4, 4, 4, 4]), 0.25, 0.2) is None
    False
    >>> validation_split_problem(np.array([6, 7, 5]), 0.25, 0.2) is None
    True
    """
    per_class = np.asarray(per_class)
    n, classes = int(per_class.sum()), int((per_class > 0).sum())
    n_test = math.ceil(test_fraction * n)
    rest = n - n_test
    n_val = math.ceil(validation_fraction / (1 - test_fraction) * rest)
    need = classes if per_class[per_class > 0].min() >= 2 else 1
    if n_test < need or rest - n_val < need or n_val < need:
        return (
            f"the smallest site has {n} rows ({classes} classes): {n_test} test, {n_val} "
            f"validation and {rest - n_val} training rows, and each part needs at least "
            f"{need} (one of every class when the split is stratified)"
        )
    return None


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
    """

    pooled: object
    splits: dict


def prepare_repetition(
    data: Dataset,
    n_sites: int,
    jaccard: float,
    rep: int,
    n_estimators: int = 100,
    test_fraction: float = TEST_FRACTION,
    validation_fraction: float | None = None,
    intersection: bool = True,
) -> Repetition:
    """Split one repetition over the sites, train every site's models and pool them.

    With ``validation_fraction`` each site splits that share of its rows off its
    training rows (as a job's site does) and trains without them.
    """
    frame = data.X.assign(__target__=data.y)
    tables = split_table(frame, "__target__", n_sites, jaccard, random_state=rep)
    sites = list(tables)
    columns = {s: [c for c in t.columns if c != "__target__"] for s, t in tables.items()}
    shared = [c for c in data.X.columns if all(c in columns[s] for s in sites)]
    categories = data.categories
    forest_params = {"n_estimators": n_estimators}
    splits, models = {}, {}
    for k, site in enumerate(sites):
        t = tables[site]
        X_tr, X_te, y_tr, y_te = split_validation(
            t[columns[site]], t["__target__"].to_numpy(), test_fraction, rep
        )
        X_val = y_val = None
        if validation_fraction:  # as SiteRunner.set_schema: out of the training rows
            X_tr, X_val, y_tr, y_val = split_validation(
                X_tr, y_tr, validation_fraction / (1 - test_fraction), rep
            )
        splits[site] = (X_te, y_te, X_val, y_val)
        models[site] = fit_site_models(
            site,
            X_tr,
            y_tr,
            columns[site],
            shared,
            categories,
            forest_params,
            random_state=rep * 1000 + k,
            intersection_columns=shared if intersection else None,
            # private columns are disjoint across sites: one imputer candidate per column,
            # so its score decides nothing and needs no cross-validation
            imputer_cv=None,
        )
    return Repetition(pool_site_models(list(models.values())), splits)


def run_repetition(
    data: Dataset,
    n_sites: int,
    jaccard: float,
    rep: int,
    methods: Sequence[str] = METHODS,
    metrics: Sequence[str] = ("auprc", "auc", "mcc"),
    voting: str = "soft",
    n_estimators: int = 100,
    depth_threshold: int = 2,
    test_fraction: float = TEST_FRACTION,
    validation_fraction: float = VALIDATION_FRACTION,
) -> list[dict]:
    """One repetition of one scenario; tidy rows (one per site, method and metric).

    When ``methods`` include one of :data:`~fedforest.vocabulary.VALIDATION_METHODS`,
    each site splits ``validation_fraction`` of its rows off its training rows
    (as a job's site does) and every forest is trained without them.
    """
    want_val = any(m in VALIDATION_METHODS for m in methods)
    prepared = prepare_repetition(
        data,
        n_sites,
        jaccard,
        rep,
        n_estimators,
        test_fraction,
        validation_fraction if want_val else None,
        intersection="intersection" in methods,
    )
    splits, pooled = prepared.splits, prepared.pooled
    sites = list(splits)
    forest, imputers = pooled.forest, pooled.imputers
    feature_std, intersection = pooled.feature_std, pooled.intersection
    classes = np.unique(data.y)
    rows = []
    for site in sites:
        X_te, y_te, X_val, y_val = splits[site]
        scores = evaluate_strategies(
            forest,
            imputers,
            feature_std,
            intersection,
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
        )
        for method, row in scores.items():
            for metric in metrics:
                value = row[metric]
                rows.append(
                    {
                        "dataset": data.name,
                        "n_sites": n_sites,
                        "jaccard": jaccard,
                        "rep": rep,
                        "site": site,
                        "method": method,
                        "metric": metric,
                        "value": float("nan") if value is None else value,
                    }
                )
    return rows


@dataclass
class ExperimentPlan:
    """What to run. See :func:`run_experiment`."""

    datasets: list[str]
    n_sites: list[int] = field(default_factory=lambda: list(PAPER_SITES))
    jaccards: list[float] = field(default_factory=lambda: list(PAPER_JACCARDS))
    reps: int = 100
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    metrics: list[str] = field(default_factory=lambda: ["auprc", "auc", "mcc"])
    voting: str = "soft"
    n_estimators: int = 100
    depth_threshold: int = 2
    target: str | None = None
    categorical: list[str] = field(default_factory=list)
    n_jobs: int = 1
    validation_fraction: float = VALIDATION_FRACTION

    def validate(self) -> None:
        if not self.datasets:
            raise ValueError("datasets is empty; name at least one dataset")
        bad = [m for m in self.methods if m not in ALL_METHODS]
        if bad:
            raise ValueError(f"methods {bad} are not among {list(ALL_METHODS)}")
        repeated = sorted({m for m in self.methods if list(self.methods).count(m) > 1})
        if repeated:
            raise ValueError(f"methods {repeated} are given twice")
        vf = self.validation_fraction
        if isinstance(vf, bool) or not isinstance(vf, (int, float)) or not 0 < vf <= 0.65:
            raise ValueError(
                f"validation_fraction={vf!r} must be a number in (0, 0.65]: the share of each "
                f"site's rows held out for validation, next to the test share {TEST_FRACTION}"
            )
        bad = [m for m in self.metrics if m not in METRICS]
        if bad:
            raise ValueError(f"metrics {bad} are not among {list(METRICS)}")
        if any((not isinstance(n, int)) or n < 2 for n in self.n_sites):
            raise ValueError(f"n_sites={self.n_sites} must be integers >= 2")
        if any(not 0 < j <= 1 for j in self.jaccards):
            raise ValueError(f"jaccards={self.jaccards} must lie in (0, 1]")
        if self.reps < 1:
            raise ValueError(f"reps={self.reps} must be at least 1")
        if self.voting not in VOTING:
            raise ValueError(f"voting={self.voting!r} must be soft or hard")
        if self.n_jobs < 1:
            raise ValueError(f"n_jobs={self.n_jobs} must be at least 1")
        if isinstance(self.n_estimators, bool) or not isinstance(self.n_estimators, int):
            raise ValueError(f"n_estimators={self.n_estimators!r} must be an integer >= 1")
        if self.n_estimators < 1:
            raise ValueError(f"n_estimators={self.n_estimators} must be at least 1")
        if (
            isinstance(self.depth_threshold, bool)
            or not isinstance(self.depth_threshold, int)
            or self.depth_threshold < 0
        ):
            raise ValueError(f"depth_threshold={self.depth_threshold!r} must be an integer >= 0")


def _init_worker() -> None:
    """One thread per worker process (BLAS, numba kernels): the processes already fill the cores."""
    from threadpoolctl import threadpool_limits

    from ..prediction.classifier import load_kernels

    threadpool_limits(1)
    kernels, _ = load_kernels()
    if kernels is not None:
        kernels.MAX_THREADS = 1


def _task(args):
    data, n_sites, jaccard, rep, plan = args
    return run_repetition(
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
    )


def run_experiment(plan: ExperimentPlan, out_dir=None) -> pd.DataFrame:
    """Run every (dataset, N, J, rep) of ``plan``; return the tidy results.

    With ``out_dir`` the tidy table is written to ``out_dir/results.csv`` as the
    batches finish (a long run can be followed, and survives interruption).
    ``out_dir`` must be new, empty or the folder of an earlier experiment that
    holds only what it wrote (``fedforest.outputs``); those files
    are cleared first. Progress is logged after every finished (dataset, N, J)
    scenario.

    Raises
    ------
    ValueError
        Before anything runs or is written: for an invalid plan, a dataset
        that cannot be read or split over the sites (:func:`check_dataset`),
        or an ``out_dir`` that may hold a user's files.
    """
    plan.validate()
    datasets = [load_table(d, plan.target, plan.categorical) for d in plan.datasets]
    for data in datasets:  # before anything runs or is written
        check_dataset(
            data,
            plan.n_sites,
            validation_fraction=(
                plan.validation_fraction
                if any(m in VALIDATION_METHODS for m in plan.methods)
                else None
            ),
        )
    names = [d.name for d in datasets]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"datasets {repeated} are given twice (by name or file stem)")
    tasks = [
        (data, n, j, r, plan)
        for data in datasets
        for n in plan.n_sites
        for j in plan.jaccards
        for r in range(plan.reps)
    ]
    total = len(tasks)
    logger.info(
        "experiment: %d repetitions (%d datasets x %d N x %d J x %d reps), %d jobs",
        total,
        len(datasets),
        len(plan.n_sites),
        len(plan.jaccards),
        plan.reps,
        plan.n_jobs,
    )
    out_path = None
    if out_dir is not None:
        # a new, empty or earlier experiment folder only; what the earlier run wrote is cleared
        out_dir = outputs.claim_dir(out_dir, EXPERIMENT_COMMAND)
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
    if out_path is not None:
        pd.DataFrame(columns=TIDY_COLUMNS).to_csv(out_path, index=False)
    rows: list[dict] = []
    done_per: dict[tuple, int] = {}
    start = time.monotonic()

    def collect(task, result) -> None:
        rows.extend(result)
        if out_path is not None:
            pd.DataFrame(result, columns=TIDY_COLUMNS).to_csv(
                out_path, mode="a", header=False, index=False
            )
        key = (task[0].name, task[1], task[2])
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
    tidy = tidy.sort_values(
        ["dataset", "n_sites", "jaccard", "rep", "site", "method", "metric"], kind="stable"
    ).reset_index(drop=True)
    if out_path is not None:
        tidy.to_csv(out_path, index=False)
    logger.info(
        "experiment finished in %.0f s (%.2f s per repetition)",
        time.monotonic() - start,
        (time.monotonic() - start) / max(total, 1),
    )
    return tidy
