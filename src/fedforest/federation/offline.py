"""A job in one process: a whole job from a config folder, or an election on local tables.

:func:`in_process_job` assembles the job of a ``site_configs/``-style folder
in this process, as the FLARE job runs it: one
:class:`~fedforest.federation.site.SiteRunner` per site (loaded as each site's
executor loads it), a :class:`~fedforest.federation.server.JobServer`, the
job's phase driver over an :class:`~fedforest.federation.driver.InProcessExchange`;
:func:`run_job` also runs it (the benchmarks, tests). Payloads are deep-copied
as they cross, as FLARE's serialisation would; the same configs and seed give
the FLARE job's results.

:func:`run_election` is the election alone, on tables in memory (``fedforest elect``).

The election runs the job's own code: one :class:`~fedforest.federation.site.SiteRunner`
per table and a :class:`~fedforest.federation.server.JobServer`, driven by the
job's phase driver (:meth:`~fedforest.federation.driver.JobDriver.elect`)
over an :class:`~fedforest.federation.driver.InProcessExchange`: the same
tasks and payloads as in a FLARE job (schema, votes, mask scores), only
without the network, as NVIDIA FLARE's ``simulate_election`` runs its real
controller. The offline and the federated election therefore cannot drift
apart: the same tables, settings and seed give the same elected features as
the job's election phase. Offline, a site that cannot take part is an error
to fix (the driver's strict mode), not a site to drop. Hospitals use it on
copies of their data before joining a job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..election.ballot import ElectionResult, SiteVote
from ..election.tuning import TuningResult
from ..vocabulary import DEFAULT_VALIDATION, SELECTORS
from .config import JobConfig, SiteConfig
from .driver import InProcessExchange, JobDriver
from .job_results import JobResults
from .schema import GlobalSchema
from .server import JobServer
from .site import SiteRunner

logger = logging.getLogger(__name__)


@dataclass
class InProcessJob:
    """A job assembled in this process (:func:`in_process_job`); ``results`` once run."""

    config: JobConfig
    runners: dict[str, SiteRunner]
    server: JobServer
    exchange: InProcessExchange
    driver: JobDriver
    results: JobResults | None = None

    def run(self) -> JobResults:
        """Run every phase (:meth:`JobDriver.run`: never raises; a failed job says why)."""
        self.results = self.driver.run()
        return self.results


def site_runners(
    config_dir, config: JobConfig | None = None, load: bool = True, random_state: int = 0
) -> dict[str, SiteRunner]:
    """One :class:`SiteRunner` per site of the job in ``config_dir`` (``<site>.yaml``).

    With ``load`` each reads and checks its data file now, as a site's FLARE
    executor does when the run starts; without, at its first task.
    """
    config_dir = Path(config_dir)
    config = config or JobConfig.load(config_dir / "job.yaml")
    runners = {}
    for site in config.sites:
        site_config = SiteConfig.load(
            config_dir / f"{site}.yaml", task=config.task, validation=config.validation
        )
        runner = SiteRunner(site_config, random_state)
        runners[site] = runner.load() if load else runner
    return runners


def in_process_job(
    config_dir,
    *,
    runners: Mapping[str, SiteRunner] | None = None,
    exchange: Callable[..., InProcessExchange] = InProcessExchange,
    run_dir=None,
    strict: bool = False,
    clock: Callable[[], float] | None = None,
    progress: Callable[[str], None] | None = None,
    **exchange_options,
) -> InProcessJob:
    """The job of ``config_dir`` (``job.yaml`` and one ``<site>.yaml`` per site), not yet run.

    Parameters
    ----------
    runners : mapping of site to SiteRunner, optional
        The sites (default :func:`site_runners`: every site of ``job.yaml``, loaded).
    exchange : callable
        Makes the exchange from the runners and ``exchange_options``
        (:class:`InProcessExchange` or a subclass: ``raise_errors``,
        ``ask_first``, ``save_root``).
    clock : callable, optional
        The clock of the phase timings and of the exchange's per-site seconds
        (default ``time.monotonic``; a benchmark's CPU clock).
    run_dir, strict, progress
        As :class:`~fedforest.federation.driver.JobDriver`'s (``run_dir``:
        where ``results.json`` and ``report.md`` are written; none by default).
    """
    config_dir = Path(config_dir)
    config = JobConfig.load(config_dir / "job.yaml")
    runners = dict(runners) if runners is not None else site_runners(config_dir, config)
    server = JobServer(config)
    channel = exchange(runners, clock=clock, **exchange_options)
    driver = JobDriver(
        server, channel, run_dir=run_dir, strict=strict, clock=clock, progress=progress
    )
    return InProcessJob(config, runners, server, channel, driver)


def run_job(config_dir, **options) -> InProcessJob:
    """:func:`in_process_job` with ``options``, run; its ``results`` say how it ended."""
    job = in_process_job(config_dir, **options)
    job.run()
    return job


@dataclass
class OfflineElection:
    """Everything an offline election produced."""

    schema: GlobalSchema
    votes: list[SiteVote]
    election: ElectionResult
    tuning: TuningResult | None
    #: What the tuning scored each mask by (the job's ``election.metric``).
    metric: str | None = None


def run_election(
    tables: Mapping[str, pd.DataFrame],
    target: str | None,
    selectors: Mapping[str, str] | str = "random_forest",
    categorical: Sequence[str] = (),
    freedom_degree: float = 0.5,
    aggregation: str = "weighted",
    always_keep: Sequence[str] = (),
    normalization: str = "all",
    auto_tune: bool = False,
    tuning_rounds: int = 5,
    tune_every_feature: bool = True,
    tolerance: float = 0.0,
    metric: str | None = None,
    validation_fraction: float = 0.2,
    test_fraction: float = 0.25,
    random_state: int = 0,
    files: Mapping[str, str] | None = None,
    validation: str = DEFAULT_VALIDATION,
    task: str = "classification",
    time: str | None = None,
    event: str | None = None,
) -> OfflineElection:
    """Elect features over several sites' tables with the job's site and server logic.

    Parameters
    ----------
    tables : mapping of site name to DataFrame
        Each site's table, with global column names and the target column
        (at least two sites).
    target : str or None
        The target column (``None`` for ``task="survival"``, whose outcome is
        ``time`` and ``event``).
    selectors : str or mapping of site name to str
        Local selector of every site (see :data:`fedforest.vocabulary.SELECTORS`).
    categorical : sequence of str
        Integer-coded columns to treat as categorical (non-numeric columns
        always are).
    freedom_degree, aggregation, always_keep, normalization
        As in :func:`fedforest.election.ballot.elect` (``normalization``:
        ``"all"``, the Feature Election paper's rule, or ``"selected"``, NVIDIA
        FLARE 2.9's ``feature_election`` rule).
    auto_tune : bool
        Tune the freedom degree by hill-climbing, each site scoring proposed
        masks on its validation rows (:func:`fedforest.election.tuning.hill_climb`).
    tuning_rounds, tune_every_feature, tolerance, metric
        Tuning settings, as the job's ``election`` keys (``metric=None``: the task's default, as in a job:
        ``auprc``, ``rmse`` or ``ibs``).
    validation_fraction, test_fraction : float
        Each site's held-out shares, as in a site's YAML (the job's defaults).
    random_state : int
        The job seed: selectors, splits and scoring models.
    files : mapping of site name to str, optional
        The file each table was read from, named in the messages (default:
        ``<site> (in memory)``).
    validation : {"oob", "holdout"}
        What the sites score tuning masks on, as ``evaluation.validation``:
        their training rows out of bag, or ``validation_fraction`` of their
        rows held out.
    task : {"classification", "regression", "survival"}
        The job's ``job.task``: what the selectors and the tuning's models fit.
    time, event : str, optional
        A survival job's outcome columns (the follow-up time and the 1/0 or
        true/false event), as a survival site's YAML names them.

    Returns
    -------
    OfflineElection

    Raises
    ------
    fedforest.ConfigError
        If a setting is invalid (the message names the key).
    ValueError
        If a site's table cannot take part (the message names the site).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> def table(private):
    ...     X = pd.DataFrame(rng.normal(size=(200, 3)), columns=["age", "bmi", private])
    ...     return X.assign(y=(X["age"] + X[private] > 0).astype(int))
    >>> out = run_election({"a": table("hba1c"), "b": table("insulin")}, "y", "f_classif")
    >>> out.schema.shared
    ['age', 'bmi']
    """
    if len(tables) < 2:
        raise ValueError(f"an election needs at least two sites' tables, got {len(tables)}")
    sites = list(tables)
    if isinstance(selectors, str):
        selectors = {site: selectors for site in sites}
    missing = [s for s in sites if s not in selectors]
    if missing:
        raise ValueError(f"no selector given for sites {missing}; allowed: {list(SELECTORS)}")
    election = {
        "freedom_degree": freedom_degree,
        "aggregation": aggregation,
        "always_keep": list(always_keep),
        "normalization": normalization,
        "auto_tune": auto_tune,
        "tuning_rounds": tuning_rounds,
        "tune_every_feature": tune_every_feature,
        "tolerance": tolerance,
    }
    if metric is not None:
        election["metric"] = metric
    job = JobConfig.from_dict(
        {
            "job": {
                "name": "offline-election",
                "sites": sites,
                "min_sites": 1,
                "seed": random_state,
                "task": task,
            },
            "evaluation": {"validation": validation},
            "election": election,
        },
        source="election settings",
    )
    outcome = {"time": time, "event": event} if task == "survival" else {"target": target}
    runners = {}
    for site, frame in tables.items():
        config = SiteConfig.from_dict(
            {
                "site": site,
                "data_path": (files or {}).get(site, f"{site} (in memory)"),
                **outcome,
                "categorical": [c for c in categorical if c in frame.columns],
                "selector": selectors[site],
                "validation_fraction": validation_fraction,
                "test_fraction": test_fraction,
            },
            source=f"site {site!r}",
            validation=job.validation,
            task=job.task,
        )
        runners[site] = SiteRunner(config, random_state).load(frame, job=job)
    server = JobServer(job)
    # offline, a site that cannot take part is an error to fix, not a site to drop
    JobDriver(server, InProcessExchange(runners, raise_errors=True), strict=True).elect()
    logger.info("offline election: kept %s", server.election.selected)
    return OfflineElection(
        server.schema, list(server.votes), server.election, server.tuning, job.election.metric
    )
