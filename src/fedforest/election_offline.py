"""A whole feature election on local tables, in one process (no FLARE).

This runs exactly the steps of the job's schema and election phases: every
table is described and encoded against the global schema, each site runs its
own selector, the server counts the ballot and, with auto-tuning, every
proposed mask is scored by each site on its validation rows (row-weighted
mean). Hospitals can use it (``fedforest elect``) on copies of their data
before joining a job.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from .election import Ballot, ElectionResult, SiteVote, check_freedom_degree
from .schema import GlobalSchema, SiteSchema
from .selectors import SELECTORS, select_features
from .tuning import TuningResult, hill_climb, score_mask

logger = logging.getLogger(__name__)


def site_vote(
    site: str,
    X: pd.DataFrame,
    y,
    method: str,
    categorical: Sequence[str] = (),
    params: Mapping | None = None,
    random_state=None,
) -> SiteVote:
    """Run a site's selector on its encoded training rows and wrap the result."""
    classes = pd.Series(y).nunique()
    if classes < 2:
        raise ValueError(
            f"site {site!r}: the target has a single class ({pd.Series(y).iloc[0]!r}); a site "
            "needs at least two classes to select features"
        )
    sel = select_features(
        X,
        y,
        method,
        categorical=[c for c in categorical if c in X.columns],
        params=params,
        random_state=random_state,
    )
    logger.info(
        "site %s: %s kept %d of %d columns", site, method, int(sel.mask.sum()), len(sel.features)
    )
    return SiteVote(site, sel.features, sel.mask, sel.scores, int(len(X)))


def split_validation(X: pd.DataFrame, y, fraction: float, random_state=None):
    """Stratified train/validation split (plain split when a class is too rare)."""
    y = np.asarray(y)
    _, counts = np.unique(y, return_counts=True)
    stratify = y if counts.min() >= 2 else None
    return train_test_split(X, y, test_size=fraction, stratify=stratify, random_state=random_state)


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
    auto_tune: bool = False,
    tuning_rounds: int = 5,
    tolerance: float = 0.0,
    metric: str = "auprc",
    validation_fraction: float = 0.25,
    random_state=0,
) -> OfflineElection:
    """Elect features over several sites' tables.

    Parameters
    ----------
    tables : mapping of site name to DataFrame
        Each site's table, with global column names and the target column.
    target : str
        The target column.
    selectors : str or mapping of site name to str
        Local selector of every site (see :data:`fedforest.selectors.SELECTORS`).
    categorical : sequence of str
        Integer-coded columns to treat as categorical (non-numeric columns
        always are).
    freedom_degree, aggregation, always_keep
        As in :func:`fedforest.election.elect`.
    auto_tune : bool
        Tune the freedom degree by hill-climbing (:func:`fedforest.tuning.hill_climb`).
    tuning_rounds, tolerance, metric
        Tuning settings; ``metric`` scores masks on validation rows.
    validation_fraction : float
        Share of each site's rows held out to score masks.
    random_state : int
        Seed of selectors, splits and scoring models.

    Returns
    -------
    OfflineElection
    """
    if not tables:
        raise ValueError("no table given; pass at least two sites' tables")
    check_freedom_degree(freedom_degree)
    if isinstance(selectors, str):
        selectors = {site: selectors for site in tables}
    missing = [s for s in tables if s not in selectors]
    if missing:
        raise ValueError(f"no selector given for sites {missing}")
    for site, method in selectors.items():
        if method not in SELECTORS:
            raise ValueError(
                f"selector {method!r} for site {site!r} is not one of {list(SELECTORS)}"
            )
    if not 0 < validation_fraction < 1:
        raise ValueError(f"validation_fraction={validation_fraction!r} must be in (0, 1)")
    schemas = [
        SiteSchema.from_frame(site, frame, target, categorical) for site, frame in tables.items()
    ]
    schema = GlobalSchema.build(schemas)
    if len(tables) > 1 and not schema.shared:
        raise ValueError(
            "the sites share no column: at least one feature every site has is needed "
            f"(columns per site: {schema.site_columns})"
        )
    cat = list(schema.categories)
    splits, votes = {}, []
    for site, frame in tables.items():
        X = schema.encode(frame)
        y = frame[target].to_numpy()
        X_tr, X_val, y_tr, y_val = split_validation(X, y, validation_fraction, random_state)
        splits[site] = (X_tr, X_val, y_tr, y_val)
        votes.append(site_vote(site, X_tr, y_tr, selectors[site], cat, random_state=random_state))
    ballot = Ballot(votes, aggregation, always_keep)
    tuning = None
    if auto_tune:

        def score(features: list[str]) -> float:
            values, weights = [], []
            for X_tr, X_val, y_tr, y_val in splits.values():
                values.append(
                    score_mask(
                        X_tr,
                        y_tr,
                        X_val,
                        y_val,
                        features,
                        schema.classes,
                        metric,
                        random_state=random_state,
                    )
                )
                weights.append(len(X_val))
            return float(np.average(values, weights=weights))

        tuning = hill_climb(
            ballot, score, start=freedom_degree, rounds=tuning_rounds, tolerance=tolerance
        )
        election = tuning.election
    else:
        election = ballot.count(freedom_degree)
    return OfflineElection(schema, votes, election, tuning)
