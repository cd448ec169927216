"""A whole feature election on local tables, in one process (``fedforest elect``).

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from ..election.ballot import ElectionResult, SiteVote
from ..election.tuning import TuningResult
from ..vocabulary import SELECTORS
from .config import JobConfig, SiteConfig
from .driver import InProcessExchange, JobDriver
from .schema import GlobalSchema
from .server import JobServer
from .site import SiteRunner

logger = logging.getLogger(__name__)


@dataclass
class OfflineElection:
    """Everything an offline election produced."""

    schema: GlobalSchema
    votes: list[SiteVote]
    election: ElectionResult
    tuning: TuningResult | None


def run_election(
    tables: Mapping[str, pd.DataFrame],
    target: str,
    selectors: Mapping[str, str] | str = "random_forest",
    categorical: Sequence[str] = (),
    freedom_degree: float = 0.5,
    aggregation: str = "weighted",
    always_keep: Sequence[str] = (),
    normalization: str = "all",
    auto_tune: bool = False,
    tuning_rounds: int = 5,
    tolerance: float = 0.0,
    metric: str = "auprc",
    validation_fraction: float = 0.2,
    test_fraction: float = 0.25,
    random_state: int = 0,
    files: Mapping[str, str] | None = None,
) -> OfflineElection:
    """Elect features over several sites' tables with the job's site and server logic.

    Parameters
    ----------
    tables : mapping of site name to DataFrame
        Each site's table, with global column names and the target column
        (at least two sites).
    target : str
        The target column.
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
    tuning_rounds, tolerance, metric
        Tuning settings.
    validation_fraction, test_fraction : float
        Each site's held-out shares, as in a site's YAML (the job's defaults).
    random_state : int
        The job seed: selectors, splits and scoring models.
    files : mapping of site name to str, optional
        The file each table was read from, named in the messages (default:
        ``<site> (in memory)``).

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
    job = JobConfig.from_dict(
        {
            "job": {
                "name": "offline-election",
                "sites": sites,
                "min_sites": 1,
                "seed": random_state,
            },
            "election": {
                "freedom_degree": freedom_degree,
                "aggregation": aggregation,
                "always_keep": list(always_keep),
                "normalization": normalization,
                "auto_tune": auto_tune,
                "tuning_rounds": tuning_rounds,
                "tolerance": tolerance,
                "metric": metric,
            },
        },
        source="election settings",
    )
    runners = {}
    for site, frame in tables.items():
        config = SiteConfig.from_dict(
            {
                "site": site,
                "data_path": (files or {}).get(site, f"{site} (in memory)"),
                "target": target,
                "categorical": [c for c in categorical if c in frame.columns],
                "selector": selectors[site],
                "validation_fraction": validation_fraction,
                "test_fraction": test_fraction,
            },
            source=f"site {site!r}",
        )
        runners[site] = SiteRunner(config, random_state).load(frame, job=job)
    server = JobServer(job)
    # offline, a site that cannot take part is an error to fix, not a site to drop
    JobDriver(server, InProcessExchange(runners, raise_errors=True), strict=True).elect()
    logger.info("offline election: kept %s", server.election.selected)
    return OfflineElection(server.schema, list(server.votes), server.election, server.tuning)
