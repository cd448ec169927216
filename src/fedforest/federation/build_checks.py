"""Checks across the sites of a job that run when it is built, before anything starts.

:func:`check_sites_at_build` applies, where the job is built, what the job's
schema phase would refuse once it runs:

* one table, one site: two site YAMLs whose ``data_path`` name the same file
  (a hard or symbolic link included) or two files with the same bytes
  (:func:`fedforest.input_files.refuse_same_tables`);
* each site's table as the site itself loads and describes it
  (:meth:`SiteRunner.load <fedforest.federation.site.SiteRunner.load>`, then
  :class:`~fedforest.federation.schema.SiteSchema`), so that every rule of
  the site's start applies;
* the sites' schemas joined by the server's own rules
  (:meth:`GlobalSchema.build <fedforest.federation.schema.GlobalSchema.build>`
  and :func:`~fedforest.federation.schema.refuse_no_shared_feature`): a
  column numeric at one site and categorical at another, column names,
  levels or class labels that read alike across sites (``never`` and
  ``NEVER``, ``glucosé`` in two Unicode forms), too many levels over all
  sites, no feature every site has.

Each refusal is a :class:`~fedforest.errors.ConfigError` naming the files.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .. import protocol
from ..errors import ConfigError
from ..input_files import refuse_same_tables
from .messages import read_message
from .schema import GlobalSchema, SchemaError, refuse_no_shared_feature
from .site import SiteRunner


def refuse_shared_data_files(sites: Mapping) -> None:
    """Refuse two sites whose ``data_path`` is one table (one file, or the same bytes)."""
    refuse_same_tables(
        [(f"{site.source}: key 'data_path'", site.data_path) for site in sites.values()],
        "give each site its own data file in its YAML",
    )


def check_sites_at_build(job, sites: Mapping) -> GlobalSchema | None:
    """The schema phase's rules on the sites whose data files are readable here.

    Parameters
    ----------
    job : JobConfig
    sites : mapping of site name to SiteConfig

    Returns
    -------
    GlobalSchema or None
        The schema the readable sites would join into (None with fewer than two).

    Raises
    ------
    ConfigError
        Naming the site file(s) and the rule, with the schema phase's message and fix.
    """
    refuse_shared_data_files(sites)
    schemas = []
    for name, site in sites.items():
        if not Path(site.data_path).is_file():
            continue
        runner = SiteRunner(site, job.seed).load(job=job)
        try:
            schemas.append(read_message(runner.describe(), name, protocol.SITE_SCHEMA))
        except SchemaError as err:
            raise ConfigError(f"{site.source}: data file {site.data_path}: {err}") from None
    if len(schemas) < 2:
        return None
    try:
        schema = GlobalSchema.build(schemas)
        refuse_no_shared_feature(schema)
    except SchemaError as err:
        files = ", ".join(sites[s.site].source for s in schemas)
        raise ConfigError(
            f"the sites' data files do not fit in one job (site files {files}): {err}"
        ) from None
    return schema
