"""The pooled-data reference: one scikit-learn forest trained on every site's rows at once.

No federation of sites that share no rows can do much better than a forest
that sees every site's rows together. This module trains that forest, so that
a benchmark can report how far a site's own forest (``local``) and what the
site deploys (``auto``) are from it:

* **rows**: every site's training and validation rows, stacked (a site that
  validates out of bag, ``X_val`` ``None``, gives its training rows only);
  each site's test rows are scored, exactly the rows the job scores
  (:class:`SiteRows`, read from the job's sites by :func:`runner_rows` or
  :func:`job_site_rows`, or from the experiment runner's repetition);
* **columns**: the union of the sites' columns, a column a site does not
  measure missing (NaN) in its rows, left to scikit-learn's own handling of
  missing values in trees (scikit-learn >= 1.4: at each split the rows with a
  missing value go to the side learned in training; a feature with no missing
  value at a node sends them to the child with more rows). Categorical columns
  are the integer codes the sites' frames hold (the global schema's codes),
  kept as numbers: the trees split them by threshold, as a site's own forest
  does;
* **forest**: a ``RandomForestClassifier`` (``RandomForestRegressor`` for a
  numeric target) with one site's forest settings (the job's ``forest``
  section: ``n_estimators``, ``max_depth``, ``min_samples_leaf``,
  ``max_features``), the job's seed and one thread; no privacy policy applies
  (the reference is not something a site may send);
* **metrics**: :func:`fedforest.metrics.score_all` (classes in the job's
  order) or :func:`fedforest.metrics.score_values`, as the job's evaluation
  computes them.

:func:`pooled_data_reference` does all of it; :func:`job_reference` for a job
run in this process (:func:`fedforest.federation.offline.run_job`). A survival
experiment's reference (:func:`pooled_survival_reference`) is the same on
time-to-event targets: one scikit-survival ``RandomSurvivalForest`` on the
pooled rows and the union of the columns (NaN where a site lacks a column),
its curves evaluated on the experiment's time grid.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from .. import protocol
from ..intervals import event_count
from ..metrics import score_all, score_values
from ..vocabulary import METRICS, REGRESSION_METRICS, TASKS

logger = logging.getLogger(__name__)

#: The reference's name in results files and tidy tables (a ``method``/``strategy`` value).
REFERENCE = "pooled_data"
#: Its name in reports.
REFERENCE_LABEL = "pooled data"
#: The scikit-learn forest keywords a job's ``forest`` section may give the reference.
FOREST_KEYS = ("n_estimators", "max_depth", "min_samples_leaf", "max_features")


@dataclass(frozen=True)
class SiteRows:
    """One site's encoded rows as the job splits them.

    ``X_val``/``y_val`` are ``None`` for a site without validation rows
    (validated out of bag): then its training rows are all it fits on.
    """

    X_train: pd.DataFrame
    y_train: np.ndarray
    X_test: pd.DataFrame
    y_test: np.ndarray
    X_val: pd.DataFrame | None = None
    y_val: np.ndarray | None = None

    def __post_init__(self) -> None:
        parts = [("train", self.X_train, self.y_train), ("test", self.X_test, self.y_test)]
        if (self.X_val is None) != (self.y_val is None):
            raise ValueError("give both X_val and y_val, or neither")
        if self.X_val is not None:
            parts.append(("validation", self.X_val, self.y_val))
        for name, X, y in parts:
            if not isinstance(X, pd.DataFrame):
                raise ValueError(f"the {name} rows are a {type(X).__name__}, not a DataFrame")
            if len(X) != len(np.asarray(y)):
                raise ValueError(
                    f"the {name} rows: {len(X)} feature rows but {len(np.asarray(y))} targets"
                )
        if len(self.X_train) == 0 or len(self.X_test) == 0:
            raise ValueError("a site needs training and test rows")

    def fit_rows(self) -> tuple[pd.DataFrame, np.ndarray]:
        """The rows the reference trains on: training and validation rows, stacked."""
        if self.X_val is None:
            return self.X_train, np.asarray(self.y_train)
        X = pd.concat([self.X_train, self.X_val], ignore_index=True)
        return X, np.concatenate([np.asarray(self.y_train), np.asarray(self.y_val)])

    @classmethod
    def of(cls, runner: Any) -> SiteRows:
        """A :class:`~fedforest.federation.site.SiteRunner`'s rows (after the schema phase)."""
        if getattr(runner, "X_train", None) is None:
            raise ValueError(
                f"site {getattr(runner, 'site', '?')!r} has not split its rows (it has not "
                "received the global schema)"
            )
        return cls(
            runner.X_train,
            np.asarray(runner.y_train),
            runner.X_test,
            np.asarray(runner.y_test),
            getattr(runner, "X_val", None),
            None if getattr(runner, "y_val", None) is None else np.asarray(runner.y_val),
        )


def runner_rows(runners: Mapping[str, Any]) -> dict[str, SiteRows]:
    """Every site's rows from its :class:`~fedforest.federation.site.SiteRunner`.

    Sites that have not split their rows (dropped before the schema reached
    them) are left out, with a warning.
    """
    out = {}
    for site, runner in runners.items():
        if getattr(runner, "X_train", None) is None:
            logger.warning("site %s has no split rows; left out of the pooled data", site)
            continue
        out[site] = SiteRows.of(runner)
    return out


def _schema_phase(config_dir):
    """The job's config, its sites' runners after the schema phase, and the global schema."""
    from ..federation.config import JobConfig
    from ..federation.offline import site_runners
    from ..federation.server import JobServer

    config_dir = Path(config_dir)
    config = JobConfig.load(config_dir / "job.yaml")
    runners = site_runners(config_dir, config)
    seed = protocol.task_data(protocol.SCHEMA, seed=config.seed, time_quantiles=False)
    described = {site: runner.run_task(protocol.SCHEMA, seed) for site, runner in runners.items()}
    server = JobServer(config)
    schema = server.build_schema(described)
    data = protocol.task_data(protocol.VOTE, schema=schema, vote=False)
    for site in server.schema.site_columns:
        runners[site].run_task(protocol.VOTE, data)
    return config, {s: runners[s] for s in server.schema.site_columns}, server.schema


def job_site_rows(config_dir) -> dict[str, SiteRows]:
    """The rows every site of the job in ``config_dir`` splits, without running the job.

    The schema phase in this process, as the job runs it: each site loaded as
    its executor loads it (:func:`~fedforest.federation.offline.site_runners`),
    sent the job's seed (``schema`` task), the server joining the schemas
    (:meth:`~fedforest.federation.server.JobServer.build_schema`) and sending
    the global schema back (``vote`` task without a vote): each site then
    encodes and splits its table, as it does in the job. So a job run in the
    FLARE simulator has the reference too.
    """
    return runner_rows(_schema_phase(config_dir)[1])


def pooled_columns(sites: Mapping[str, SiteRows]) -> list[str]:
    """The union of the sites' columns, in the order they first appear (site by site)."""
    return list(dict.fromkeys(c for rows in sites.values() for c in rows.X_train.columns))


class PooledDataReference:
    """One scikit-learn forest on every site's rows pooled (the module docstring).

    Parameters
    ----------
    forest : mapping, optional
        The forest's settings: keys of :data:`FOREST_KEYS` (a job's ``forest``
        section; default ``{}``: scikit-learn's defaults, 100 trees).
    random_state : int
        The job's seed.
    task : {"classification", "regression"}
    columns : sequence of str, optional
        The pooled columns, in this order (default :func:`pooled_columns`).

    Attributes
    ----------
    columns_ : list of str
    forest_ : RandomForestClassifier or RandomForestRegressor
    n_rows_ : dict
        Site -> the rows it gave the forest.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> def rows(cols, n=60):
    ...     X = pd.DataFrame(rng.normal(size=(n, len(cols))), columns=cols)
    ...     y = (X.iloc[:, 0] > 0).astype(int).to_numpy()
    ...     return SiteRows(X[:40], y[:40], X[40:], y[40:])
    >>> sites = {"a": rows(["age", "bmi"]), "b": rows(["age", "hba1c"])}
    >>> ref = PooledDataReference({"n_estimators": 10}, random_state=0).fit(sites)
    >>> ref.columns_, ref.predict_proba(sites["b"].X_test).shape
    (['age', 'bmi', 'hba1c'], (20, 2))
    """

    def __init__(
        self,
        forest: Mapping[str, Any] | None = None,
        random_state: int = 0,
        task: str = "classification",
        columns: Sequence[str] | None = None,
    ):
        self.forest = forest
        self.random_state = random_state
        self.task = task
        self.columns = columns

    def fit(self, sites: Mapping[str, SiteRows]) -> PooledDataReference:
        """Train on every site's training and validation rows, stacked."""
        if self.task not in TASKS:
            raise ValueError(f"task={self.task!r} is not one of {list(TASKS)}")
        if self.task == "survival":
            raise ValueError(
                "task='survival': this reference trains scikit-learn forests; a survival "
                "experiment's is pooled_survival_reference (a random survival forest)"
            )
        params = dict(self.forest or {})
        unknown = sorted(set(params) - set(FOREST_KEYS))
        if unknown:
            raise ValueError(f"forest settings {unknown} are unknown; allowed: {list(FOREST_KEYS)}")
        if not sites:
            raise ValueError("no site's rows to pool")
        columns = list(self.columns) if self.columns is not None else pooled_columns(sites)
        held = set(columns)
        for site, rows in sites.items():
            extra = [c for c in rows.X_train.columns if c not in held]
            if extra:
                raise ValueError(f"site {site!r} has columns {extra} that are not pooled")
        frames, targets, self.n_rows_ = [], [], {}
        for site, rows in sites.items():
            X, y = rows.fit_rows()
            frames.append(X.reindex(columns=columns))
            targets.append(y)
            self.n_rows_[site] = len(X)
        X = pd.concat(frames, ignore_index=True).to_numpy(dtype=np.float32)
        y = np.concatenate(targets)
        Forest = RandomForestRegressor if self.task == "regression" else RandomForestClassifier
        self.forest_ = Forest(**params, random_state=self.random_state, n_jobs=1).fit(X, y)
        self.columns_ = columns
        logger.info(
            "pooled data: %d trees on %d rows of %d sites, %d columns",
            len(self.forest_.estimators_),
            len(X),
            len(sites),
            len(columns),
        )
        return self

    def _matrix(self, X: pd.DataFrame) -> np.ndarray:
        extra = [c for c in X.columns if c not in set(self.columns_)]
        if extra:
            raise ValueError(f"columns {extra} were not among the pooled columns")
        return X.reindex(columns=self.columns_).to_numpy(dtype=np.float32)

    def predict_proba(self, X: pd.DataFrame, classes: Sequence | None = None) -> np.ndarray:
        """Class probabilities, columns in ``classes`` order (default: the forest's classes);
        a class no training row had gets probability 0."""
        proba = self.forest_.predict_proba(self._matrix(X))
        if classes is None:
            return proba
        known = list(self.forest_.classes_)
        out = np.zeros((len(X), len(classes)))
        for j, c in enumerate(classes):
            if c in known:
                out[:, j] = proba[:, known.index(c)]
        return out

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Predicted numbers (regression) or classes."""
        return self.forest_.predict(self._matrix(X))

    def score(
        self, rows: SiteRows, metrics: Sequence[str], classes: Sequence | None = None
    ) -> dict[str, Any]:
        """``{metric: value, "rows": test rows, "events": ...}`` on a site's test rows.

        ``classes`` (classification): the job's classes, in its order (default
        the forest's). A metric that is undefined on the rows is NaN, as
        :mod:`fedforest.metrics` gives it.
        """
        if self.task == "regression":
            bad = [m for m in metrics if m not in REGRESSION_METRICS]
            if bad:
                raise ValueError(f"metrics {bad} are not among {list(REGRESSION_METRICS)}")
            predicted = self.predict(rows.X_test)
            out = {m: score_values(m, rows.y_test, predicted) for m in metrics}
            return {**out, "rows": len(rows.X_test), "events": None}
        bad = [m for m in metrics if m not in METRICS]
        if bad:
            raise ValueError(f"metrics {bad} are not among {list(METRICS)}")
        classes = np.asarray(self.forest_.classes_ if classes is None else classes)
        proba = self.predict_proba(rows.X_test, classes)
        out = score_all(rows.y_test, proba, classes, list(metrics))
        return {**out, "rows": len(rows.X_test), "events": event_count(rows.y_test, classes)}


def pooled_data_reference(
    sites: Mapping[str, SiteRows],
    metrics: Sequence[str],
    forest: Mapping[str, Any] | None = None,
    random_state: int = 0,
    task: str = "classification",
    classes: Sequence | None = None,
    scored: Sequence[str] | None = None,
    columns: Sequence[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """The pooled-data reference's scores at every site: ``{site: {metric: value, "rows",
    "events"}}`` (:meth:`PooledDataReference.score`).

    Trained on every site of ``sites``; ``scored`` names the sites whose test
    rows are scored (default: all of them).
    """
    ref = PooledDataReference(forest, random_state, task, columns).fit(sites)
    scored = list(sites) if scored is None else list(scored)
    unknown = [s for s in scored if s not in sites]
    if unknown:
        raise ValueError(f"sites {unknown} have no rows; sites: {list(sites)}")
    return {site: ref.score(sites[site], metrics, classes) for site in scored}


def job_reference(
    job: Any,
    metrics: Sequence[str] | None = None,
    scored: Sequence[str] | None = None,
    sites: Mapping[str, SiteRows] | None = None,
) -> dict[str, dict[str, Any]]:
    """The pooled-data reference of a job run in this process
    (:class:`~fedforest.federation.offline.InProcessJob`).

    The sites' rows are those its site runners split (:func:`runner_rows`;
    ``sites`` gives them instead, e.g. :func:`job_site_rows`); the forest
    has the job's ``forest`` settings and seed, the classes are the global
    schema's, the metrics the job's (``metrics`` chooses others). ``scored``
    defaults to the sites the job has metrics for.
    """
    config = job.config
    rows = runner_rows(job.runners) if sites is None else dict(sites)
    schema = job.server.schema
    if scored is None:
        done = (job.results.metrics if job.results is not None else None) or {}
        scored = [s for s in rows if s in done] or list(rows)
    return pooled_data_reference(
        rows,
        list(config.metrics if metrics is None else metrics),
        forest=config.forest.to_dict(),
        random_state=config.seed,
        task=config.task,
        classes=None if config.task == "regression" else list(schema.classes),
        scored=scored,
        columns=[c for c in schema.features if c in set(pooled_columns(rows))],
    )


def config_reference(
    config_dir,
    metrics: Sequence[str] | None = None,
    scored: Sequence[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """The pooled-data reference of the job in ``config_dir``, without running the job.

    The sites' rows as they split them (:func:`job_site_rows`), the job's
    ``forest`` settings, seed, metrics (``metrics`` chooses others) and the
    global schema's classes and column order; ``scored`` defaults to every
    site. A job run anywhere from the same folder (the FLARE simulator, in
    process) scores the same test rows.
    """
    config, runners, schema = _schema_phase(config_dir)
    rows = runner_rows(runners)
    return pooled_data_reference(
        rows,
        list(config.metrics if metrics is None else metrics),
        forest=config.forest.to_dict(),
        random_state=config.seed,
        task=config.task,
        classes=None if config.task == "regression" else list(schema.classes),
        scored=list(rows) if scored is None else scored,
        columns=[c for c in schema.features if c in set(pooled_columns(rows))],
    )


def pooled_survival_reference(
    parts: Mapping[str, SiteRows],
    key: dict,
    metrics: Sequence[str],
    times: np.ndarray,
    n_estimators: int,
    rep: int,
    data,
) -> list[dict]:
    """The pooled-data reference of a survival repetition (method :data:`REFERENCE`).

    One ``RandomSurvivalForest(n_estimators, random_state=rep)`` on every site's
    training and validation rows pooled, on the union of the sites' columns in
    the dataset's order (NaN where a site lacks a column: scikit-survival's
    trees send missing values down a learned side), its curves evaluated on
    ``times`` and each site's test rows scored as the methods are.
    """
    from sksurv.ensemble import RandomSurvivalForest

    from ..survival_metrics import score_survival

    held = {c for p in parts.values() for c in p.X_train.columns}
    columns = [c for c in data.X.columns if c in held]

    def table(X: pd.DataFrame) -> np.ndarray:
        return X.reindex(columns=columns).to_numpy(dtype=np.float32)

    X_all = [table(p.X_train) for p in parts.values()]
    y_all = [p.y_train for p in parts.values()]
    X_all += [table(p.X_val) for p in parts.values() if p.X_val is not None]
    y_all += [p.y_val for p in parts.values() if p.y_val is not None]
    rsf = RandomSurvivalForest(n_estimators=n_estimators, random_state=rep, n_jobs=1)
    rsf.fit(np.vstack(X_all), np.concatenate(y_all))
    rows = []
    for site, p in parts.items():
        hazard = curves_on_grid(rsf, table(p.X_test), times)
        survival = curves_on_grid(rsf, table(p.X_test), times, "survival")
        risk = hazard.sum(axis=1)
        for metric in metrics:
            value = score_survival(metric, p.y_test, risk, survival, times, y_ref=p.y_train)
            rows.append(
                {
                    **key,
                    "site": site,
                    "method": REFERENCE,
                    "metric": metric,
                    "value": float("nan") if value is None else float(value),
                    "test_rows": len(p.y_test),
                    "events": int(np.sum(p.y_test["event"])),
                }
            )
    return rows


def curves_on_grid(estimator, X: np.ndarray, times: np.ndarray, kind: str = "hazard") -> np.ndarray:
    """A fitted scikit-survival forest's or tree's cumulative hazard (``kind="hazard"``) or
    survival curves (``"survival"``) of the rows ``X``, read at ``times`` as
    :meth:`~fedforest.model.forest.PooledForest.from_sksurv` reads a leaf's: the value at
    the last of its ``unique_times_`` at or before each point, and before the first a
    hazard of 0 and a survival of 1; shape ``(n, len(times))``."""
    from ..survival_metrics import curves_at

    if kind == "hazard":
        curves, start = estimator.predict_cumulative_hazard_function(X, return_array=True), 0.0
    else:
        curves, start = estimator.predict_survival_function(X, return_array=True), 1.0
    return curves_at(curves, estimator.unique_times_, times, start)
