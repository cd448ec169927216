"""The job's settings against the sites' data: what :func:`check_job_against_sites` checks
when the job is built (every site whose data file is readable there) and when a site starts
(its own table).

The split each site will make (:mod:`fedforest.federation.splits`) follows its validation
mode (:meth:`~fedforest.federation.config.SiteConfig.held_validation_fraction`): a site
scoring out of bag (``oob``) holds out no validation rows, so its training rows are every
row but the test rows, and no class needs a validation row.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ConfigError
from ..validation import ConfigChecker, listing
from .config_folder import check_target_codings
from .site_rules import check_site_table
from .splits import describe_short_classes, split_sizes
from .tables import TableSummary, table_summary


def _check_classes_in_every_part(job, site, summary: TableSummary) -> None:
    """Refuse a table whose split (with the job's seed) leaves a part without a class."""
    if job.task in ("regression", "survival") or len(np.unique(summary.target)) < 2:
        # survival: the events of each part are checked instead (site_rules.check_part_events)
        return  # the single-class rule of the data checks names this case
    why = describe_short_classes(
        summary.target, site.held_validation_fraction, site.test_fraction, job.seed
    )
    if why is not None:
        raise ConfigError(
            f"{site.source}: the data file {site.data_path} cannot run in this job: "
            f"target {site.target!r} has {why}. Allowed: more rows of the short class at this "
            "site, a smaller validation_fraction or test_fraction in this file, or fewer "
            "sites sharing the rows"
        )


def check_job_against_sites(
    job,
    sites: Mapping,
    tables: Mapping[str, pd.DataFrame] | None = None,
) -> None:
    """Check the job's settings against the sites' data files.

    Checked for every site whose table is given or whose data file exists:

    * ``forest.min_samples_leaf``: a split needs that many training rows on
      each side, so ``2 * min_samples_leaf`` must not exceed the site's
      training rows (else every tree is a single leaf);
    * an integer ``forest.max_features``: at most the site's feature columns;
    * every class of the site's target keeps a row in each of its training,
      validation and test rows, in the split the site will make with the
      job's ``seed`` (:func:`~fedforest.federation.splits.describe_short_classes`).
    * of a classification job, one coding of the target at the sites read
      (:func:`~fedforest.federation.config_folder.check_target_codings`).

    When the columns of every site of ``job.sites`` are known,
    ``election.always_keep`` must name feature columns of at least one site
    (global names, after renames and ``drop_columns``).

    Parameters
    ----------
    job : JobConfig
    sites : mapping of site name to SiteConfig
        All the job's sites (at build time) or one site (when it starts).
    tables : mapping of site name to DataFrame, optional
        Tables already read (:func:`~fedforest.federation.tables.read_table`); the others are
        read from their data files when these exist.

    Raises
    ------
    ConfigError
        Naming the job file, the key, the bad value, the site file and what
        is allowed.
    """
    c = ConfigChecker(job.source)
    summaries: dict[str, TableSummary] = {}
    for name, site in sorted(sites.items()):
        if tables is not None and name in tables:
            summaries[name] = TableSummary.of(tables[name], site.target)
        elif Path(site.data_path).is_file():
            summaries[name] = table_summary(site)
    leaf = job.forest.min_samples_leaf
    max_features = job.forest.max_features
    for name, summary in summaries.items():
        site = sites[name]
        columns, n_rows = summary.columns, summary.n_rows
        check_site_table(job, site, summary)  # names, features, label_map, part sizes
        _check_classes_in_every_part(job, site, summary)
        n_train = split_sizes(n_rows, site.held_validation_fraction, site.test_fraction)[0]
        if 2 * leaf > n_train:
            c.fail(
                "forest.min_samples_leaf",
                leaf,
                f"at most {n_train // 2} for site {name!r}: {site.source} gives {n_train} "
                f"training rows ({n_rows} rows minus {site.held_out_text()}), and a "
                "split needs min_samples_leaf rows on each side, so a larger value grows "
                "one-leaf trees",
            )
        n_features = len(columns) - len(site.outcomes)
        if isinstance(max_features, int) and max_features > n_features:
            c.fail(
                "forest.max_features",
                max_features,
                f"at most {n_features}, the feature columns of site {name!r} ({site.source}), "
                "or a fraction in (0, 1], sqrt, log2 or null",
            )
    if job.task == "classification":  # two codings of the target (config_folder)
        targets = {n: np.unique(summaries[n].target).tolist() for n in summaries}
        check_target_codings(sites, targets, [*job.sites, *sorted(set(sites) - set(job.sites))])
    if set(job.sites) <= set(summaries):
        known = sorted(
            {
                col
                for name in job.sites
                for col in summaries[name].columns
                if col not in sites[name].outcomes
            }
        )
        for feature in job.election.always_keep:
            if feature not in known:
                c.fail(
                    "election.always_keep",
                    feature,
                    "feature columns of at least one site's data file (global names, after "
                    "renames and drop_columns): " + listing(known),
                )
