"""The fedforest job as an NVIDIA FLARE 2.9 recipe, built from ``site_configs/``.

A FLARE recipe is a job that runs unchanged in every execution environment:
``SimEnv`` (the simulator), ``PocEnv`` (server and sites as local processes)
and ``ProdEnv`` (a provisioned deployment, reached through the admin's
startup kit). :class:`FedForestRecipe` validates ``job.yaml`` and every site's
YAML (and the data files it can read) when it is made, exactly as ``fedforest
job build`` does, and wraps the same ``FedJob``.

Examples
--------
>>> from nvflare.recipe import SimEnv  # doctest: +SKIP
>>> recipe = FedForestRecipe("site_configs")  # doctest: +SKIP
>>> run = recipe.run(SimEnv(clients=recipe.sites, workspace_root="workspaces/demo"))  # doctest: +SKIP
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from nvflare.recipe.spec import Recipe

from .job import JOB_FILE, SITE_FILE, load_configs, make_fed_job


class FedForestRecipe(Recipe):
    """The fedforest job, built from a folder of YAML files, as a FLARE recipe.

    Parameters
    ----------
    config_dir : path, default="site_configs"
        Folder holding ``job.yaml`` and one ``<site>.yaml`` per site.
    job_custom : list of (site, executor), optional
        Executors replacing some sites' (used to rehearse faults).
    data_checks : bool, default=True
        Read and check every site's data file now; ``False`` when the sites'
        data are not readable here (a coordinator's machine): each site then
        checks its own data when it starts.
    ship_code : bool, default=True
        Ship the fedforest runtime in the apps' ``custom/`` folders (needs the
        ``byoc`` right in a provisioned deployment); ``False`` when every site
        installs fedforest itself.
    privacy_filter : PrivacyPolicyFilter, optional
        The job's own task-result filter on every site
        (:mod:`fedforest.flare.privacy_filter`).
    scope : str, optional
        The privacy scope the job asks for (``meta.json``): each site applies
        the ``task_result_filters`` its ``local/privacy.json`` lists for it.
    extra_components : dict, optional
        (tests) ``{target: [component or filter, ...]}`` added to the apps
        (:func:`~fedforest.flare.job.make_fed_job`).

    Raises
    ------
    fedforest.ConfigError
        If a configuration file, key or data file is invalid (the message
        names the file, the key, the value and what is allowed).
    """

    def __init__(
        self,
        config_dir="site_configs",
        job_custom=None,
        ship_code: bool = True,
        privacy_filter=None,
        scope: str | None = None,
        extra_components=None,
        data_checks: bool = True,
    ):
        self.config_dir = Path(config_dir)
        self.job_config, self.site_configs = load_configs(self.config_dir, data_checks)
        # the job copies its files from here when it is exported or run
        self._stage = tempfile.TemporaryDirectory(prefix="fedforest-recipe-")
        job = make_fed_job(
            self.job_config,
            self.site_configs,
            self.config_dir,
            Path(self._stage.name),
            job_custom=job_custom,
            ship_code=ship_code,
            privacy_filter=privacy_filter,
            scope=scope,
            extra_components=extra_components,
        )
        super().__init__(job)

    @classmethod
    def from_job_folder(cls, job_dir, ship_code: bool = True) -> FedForestRecipe:
        """The recipe of a job folder made by ``fedforest job build``.

        The YAML files the builder shipped in the apps' ``config/`` folders
        (the job's, and each site's with its data path) are read back and
        validated again, so the folder runs in any environment.
        """
        job_dir = Path(job_dir)
        meta = job_dir / "meta.json"
        if not meta.is_file():
            raise ValueError(
                f"{job_dir} is not a FLARE job folder (no meta.json); build it with "
                "`fedforest job build`"
            )
        configs = tempfile.TemporaryDirectory(prefix="fedforest-job-configs-")
        folder = Path(configs.name)
        shutil.copy(job_dir / "app_server" / "config" / JOB_FILE, folder / "job.yaml")
        for app in sorted(job_dir.glob("app_*")):
            site_file = app / "config" / SITE_FILE
            if app.name != "app_server" and site_file.is_file():
                shutil.copy(site_file, folder / f"{app.name.removeprefix('app_')}.yaml")
        recipe = cls(folder, ship_code=ship_code)
        recipe._configs = configs  # kept as long as the recipe
        return recipe

    @property
    def sites(self) -> list[str]:
        """The job's site names, as FLARE clients."""
        return list(self.job_config.sites)
