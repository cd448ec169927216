"""Build the FLARE job from ``site_configs/``: the ``FedJob`` and the exported job folder.

The builder validates ``job.yaml`` and every ``<site>.yaml`` (including the
data file and its columns), then writes a job with one app per site: the
server app runs :class:`FedForestController`, each site app runs
:class:`FedForestExecutor`; the site's YAML (data path made absolute) and the
job YAML travel in the apps' ``config/`` folders and the whole ``fedforest``
package in their ``custom/`` folders, so sites need no allow-list edits.

The job folder and the simulator's workspace are written only when they are
new, empty, or were written by the same command before and hold nothing else
(``fedforest.outputs``); a user's folder is refused, never cleared.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import logging
import math
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from .. import outputs, protocol
from ..errors import ConfigError
from ..federation.build_checks import check_sites_at_build, refuse_shared_data_files
from ..federation.config import JobConfig, SiteConfig
from ..federation.config_folder import unlisted_yaml_files
from ..federation.tables import check_data
from ..yaml_files import read_yaml_file
from . import tracking
from .controller import FedForestController
from .executor import FedForestExecutor
from .swarm import FedForestSwarmController, FedForestSwarmExecutor

logger = logging.getLogger(__name__)

JOB_FILE = "fedforest_job.yaml"
SITE_FILE = "fedforest_site.yaml"
#: Clients ask for tasks this often (seconds); FLARE's default of 2 s makes
#: every phase of a small job take seconds longer.
TASK_REQUEST_INTERVAL = 0.2


def load_configs(config_dir, data_checks: bool = True) -> tuple[JobConfig, dict[str, SiteConfig]]:
    """Load and validate ``job.yaml`` and every site's YAML in ``config_dir``.

    With ``data_checks`` (the default) every site's data file must be readable
    here and is checked (its columns, rows and classes, and the job's settings
    against it). Without, as a coordinator who has none of the hospitals' data
    builds a job, the files are checked only when each site starts.
    """
    config_dir = Path(config_dir)
    job = JobConfig.load(config_dir / "job.yaml")
    for path, why in unlisted_yaml_files(config_dir, job.sites):
        logger.warning("%s is not read by this job: %s", path, why)
    sites = {}
    for name in job.sites:
        path = config_dir / f"{name}.yaml"
        if not path.is_file():
            raise ConfigError(
                f"{job.source}: key 'job.sites' lists {name!r} but {path} does not exist; "
                "allowed: sites that have a YAML file in " + str(config_dir)
            )
        site = SiteConfig.load(path, task=job.task, validation=job.validation)
        if site.site != name:
            raise ConfigError(
                f"{path}: key 'site' is {site.site!r}; allowed: {name!r} (the file name)"
            )
        if data_checks:
            check_data(site)
        sites[name] = site
    if data_checks:
        job.check_against_sites(sites)  # always_keep, min_samples_leaf, max_features vs data
        check_sites_at_build(job, sites)  # one table per site; the schema phase's rules
    else:
        refuse_shared_data_files(sites)
        logger.info("data files not checked here: each site checks its own when it starts")
    return job, sites


#: What the job's ``custom/`` folder leaves out: code no site or server runs (the
#: experiment runner, reports and plots, the command line, and the text of the
#: configuration reference).
NOT_SHIPPED = ("experiments", "cli", "config_docs.py", "__pycache__", "*.pyc")


def _stage_package(stage: Path) -> Path:
    """Copy the fedforest runtime into ``stage`` for the apps' ``custom/`` folders.

    Only what sites and the server run travels: the package without
    :data:`NOT_SHIPPED`.
    """
    package = Path(__file__).resolve().parents[1]
    target = stage / "fedforest"
    shutil.copytree(package, target, ignore=shutil.ignore_patterns(*NOT_SHIPPED))
    return stage


#: The commands whose folders :mod:`fedforest.outputs` guards (named in markers).
BUILD_COMMAND = "fedforest job build"
SIMULATE_COMMAND = "fedforest job simulate"
#: The first line of the simulator's log: a log that starts with it is fedforest's to replace.
LOG_HEADER = "# fedforest job simulate: output of the NVIDIA FLARE simulator"


def make_fed_job(
    job_cfg: JobConfig,
    sites: dict[str, SiteConfig],
    config_dir,
    stage: Path,
    job_custom: list[object] | None = None,
    ship_code: bool = True,
    privacy_filter=None,
    scope: str | None = None,
    extra_components: Mapping[str, Sequence[object]] | None = None,
):
    """The FLARE ``FedJob`` of a validated configuration.

    One app per site and one for the server. The server app runs
    :class:`FedForestController` with the job YAML in its ``config/`` folder;
    each site app runs :class:`FedForestExecutor` with its site YAML (data path
    made absolute). With ``job.mode: swarm`` the server runs
    :class:`~fedforest.flare.swarm.FedForestSwarmController` and every site
    :class:`~fedforest.flare.swarm.FedForestSwarmExecutor`, with the job YAML
    in every app's ``config/`` folder (each site runs the job's rules itself). With ``ship_code`` the fedforest runtime travels in every
    app's ``custom/`` folder (sites need no installation and no allow-list
    edits); without it every site must have the same fedforest installed and
    allow-list its classes. ``stage`` is a scratch folder that must outlive the
    job object (its files are copied when the job is exported or run).

    With ``job.tracking`` other than ``none`` the apps also get FLARE's
    experiment tracking components (:mod:`fedforest.flare.tracking`): the
    receiver on the server, a log writer and a ``ConvertToFedEvent`` widget
    on every site. A receiver whose package is not
    installed is refused with a :class:`~fedforest.ConfigError`. Executors
    given in ``job_custom`` keep their own settings (they log nothing).

    Options (all off by default, so the job is the same without them):

    * ``privacy_filter``: a :class:`~fedforest.flare.privacy_filter.PrivacyPolicyFilter`
      (any FLARE ``Filter``) added to every site's app as the job's
      task-result filter for every fedforest task: it runs on each reply
      before it leaves the site (after the filters of the site's own privacy
      scope);
    * ``scope``: the privacy scope the job asks for (``"scope"`` in its
      ``meta.json``); each site applies the ``task_result_filters`` its own
      ``local/privacy.json`` lists for that scope. A site whose
      ``privacy.json`` does not define the scope refuses the job;
    * ``extra_components`` (tests): ``{target: [object, ...]}`` with target
      ``"server"`` or a site. A FLARE ``Filter`` becomes a task-result filter
      of that app for every fedforest task (on the server: on the results it
      receives); anything else a component. A class from outside the
      fedforest package has its module shipped in the app's ``custom/``.
    """
    from nvflare.job_config.api import FedJob
    from nvflare.job_config.defs import FilterType

    stage = Path(stage)
    overrides = dict(job_custom or [])
    extras = _check_extra_components(extra_components, ["server", *sites])
    if scope is not None and (not isinstance(scope, str) or not scope.strip()):
        raise ValueError(
            f"scope={scope!r} must be the name of a privacy scope (a non-empty string)"
        )
    # first: a tracking receiver whose package is missing is refused before anything is staged
    server_tracking = tracking.server_components(job_cfg.tracking, job_cfg.name, job_cfg.source)
    writer_id = tracking.LOG_WRITER_ID if server_tracking else ""  # the sites' log writer
    code = _stage_package(stage / "src") if ship_code else None
    meta = {"scope": scope} if scope is not None else None
    swarm = job_cfg.mode == "swarm"
    if swarm and privacy_filter is not None:
        raise ValueError(
            f"{job_cfg.source}: job.mode is swarm, where payloads go from site to site and a "
            "task-result filter never sees them; the site's privacy policy (its privacy: block) "
            "applies in swarm mode. Drop privacy_filter or set job.mode: server"
        )
    job = FedJob(name=job_cfg.name, min_clients=job_cfg.min_sites, meta_props=meta)
    if code is None:
        job.set_app_packages(["fedforest"])  # installed at every site: FLARE copies none of it
    if swarm:
        controller = FedForestSwarmController(
            job_config=JOB_FILE,
            participating_clients=list(sites),
            min_clients=job_cfg.min_sites,
            configure_task_timeout=int(math.ceil(job_cfg.timeouts.schema or 300)),
        )
    else:
        controller = FedForestController(job_config=JOB_FILE, tracking=job_cfg.tracking)
    job.to(controller, "server")
    for component_id, component in server_tracking.items():
        job.to(component, "server", id=component_id)
    job.to({"server": {"task_request_interval": TASK_REQUEST_INTERVAL}}, "server")
    tasks = protocol.SWARM_TASKS if swarm else protocol.TASKS
    _add_extras(job, "server", extras.get("server", ()), tasks)
    if code is not None:
        job.to(str(code), "server")
    shutil.copy(Path(config_dir) / "job.yaml", stage / JOB_FILE)
    job.add_file_to(str(stage / JOB_FILE), "server", app_folder_type="config")
    for name, site in sites.items():
        resolved = stage / name / SITE_FILE
        resolved.parent.mkdir(parents=True, exist_ok=True)
        data = read_yaml_file(Path(site.source))
        data["data_path"] = site.data_path
        resolved.write_text(yaml.safe_dump(data, sort_keys=False))
        if swarm:
            executor = overrides.get(name) or FedForestSwarmExecutor(
                site_config=SITE_FILE, job_config=JOB_FILE
            )
            job.to(executor, name, tasks=list(protocol.SWARM_TASKS))
            job.add_file_to(str(stage / JOB_FILE), name, app_folder_type="config")
        else:
            executor = overrides.get(name) or FedForestExecutor(
                site_config=SITE_FILE,
                log_writer_id=writer_id,
                job_task=job_cfg.task,
                job_validation=job_cfg.validation,
            )
            job.to(executor, name, tasks=list(protocol.TASKS))
        for component_id, component in tracking.site_components(job_cfg.tracking).items():
            job.to(component, name, id=component_id)
        if code is not None:
            job.to(str(code), name)
        if name in overrides:
            job.to(inspect.getfile(type(executor)), name)  # its module goes in custom/
        if privacy_filter is not None:
            job.to(
                copy.deepcopy(privacy_filter),
                name,
                filter_type=FilterType.TASK_RESULT,
                tasks=list(protocol.TASKS),
            )
        _add_extras(job, name, extras.get(name, ()), tasks)
        job.add_file_to(str(resolved), name, app_folder_type="config")
    return job


def _check_extra_components(extra, targets: list[str]) -> dict[str, list[object]]:
    """``extra_components`` as ``{target: [objects]}``, every target one of the job's."""
    if extra is None:
        return {}
    if not isinstance(extra, Mapping):
        raise ValueError(
            f"extra_components={extra!r} must map 'server' or a site to a list of components"
        )
    unknown = sorted(str(t) for t in extra if t not in targets)
    if unknown:
        raise ValueError(f"extra_components names {unknown}; the job's apps are {targets}")
    return {t: list(objs) for t, objs in extra.items()}


def _add_extras(job, target: str, objects, tasks) -> None:
    """Add filters (task results, every fedforest task) and components to one app."""
    from nvflare.apis.filter import Filter
    from nvflare.job_config.defs import FilterType

    package = Path(__file__).resolve().parents[1]
    for obj in objects:
        if isinstance(obj, Filter):
            job.to(obj, target, filter_type=FilterType.TASK_RESULT, tasks=list(tasks))
        else:
            job.to(obj, target, id=type(obj).__name__)
        source = Path(inspect.getfile(type(obj))).resolve()
        if not source.is_relative_to(package):
            job.to(str(source), target)  # its module goes in custom/


def build_job(
    config_dir,
    out_dir,
    job_custom: list[object] | None = None,
    ship_code: bool = True,
    data_checks: bool = True,
) -> Path:
    """Validate the configs and export the FLARE job; return the job folder.

    The job folder ``out_dir/<job.name>`` is written only when it does not
    exist, is empty, or was written by a previous build and holds nothing
    else (:mod:`fedforest.outputs`). FLARE's own ``export_job``
    replaces any folder whose ``meta.json`` names the same job, including a
    user's, so the job is exported into a staging folder and moved into place
    here, after that check.

    Parameters
    ----------
    config_dir : path
        Folder holding ``job.yaml`` and one ``<site>.yaml`` per site.
    out_dir : path
        Where the job folder (named after ``job.name``) is written.
    job_custom : list, optional
        ``(site, executor)`` pairs replacing the executor of some sites (used
        to rehearse faults); the executor's module must be importable and is
        shipped with the job.
    ship_code : bool, default=True
        Ship the fedforest runtime in the apps' ``custom/`` folders; ``False``
        (``fedforest job build --no-custom``) for sites that install fedforest.
    data_checks : bool, default=True
        Check every site's data file here (see :func:`load_configs`);
        ``fedforest job build --skip-data-checks`` on a coordinator's machine.
    """
    job_cfg, sites = load_configs(config_dir, data_checks)
    out_dir = Path(out_dir)
    folder = out_dir / job_cfg.name
    inputs = [config_dir, *(site.data_path for site in sites.values())]
    outputs.check_parent(out_dir, BUILD_COMMAND, inputs)  # not the demo data's folder
    outputs.check_dir(folder, BUILD_COMMAND, inputs)  # before anything is written
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, _staging(out_dir) as staging:
        job = make_fed_job(job_cfg, sites, config_dir, Path(tmp), job_custom, ship_code)
        job.export_job(str(staging))
        built = staging / job_cfg.name
        outputs.record_dir(built, BUILD_COMMAND)
        _replace_folder(folder, built, inputs)
    logger.info("job %s written to %s (sites: %s)", job_cfg.name, folder, ", ".join(sites))
    return folder


@contextlib.contextmanager
def _staging(out_dir: Path):
    """A temporary folder next to the job folder (same file system: moves are renames)."""
    staging = Path(tempfile.mkdtemp(prefix=".fedforest-build-", dir=out_dir))
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _replace_folder(folder: Path, built: Path, inputs: list) -> None:
    """Move ``built`` to ``folder``; a previous build there is removed, file by listed file
    (refused when one of the build's ``inputs`` is in it)."""
    if not folder.exists():
        os.replace(built, folder)
        return
    outputs.check_dir(folder, BUILD_COMMAND, inputs)  # again: it may have changed meanwhile
    keep = Path(tempfile.mkdtemp(prefix=f".{folder.name}.previous-", dir=folder.parent))
    old = keep / folder.name
    os.replace(folder, old)
    try:
        os.replace(built, folder)
    except BaseException:
        os.replace(old, folder)
        keep.rmdir()
        raise
    try:
        outputs.remove_dir(old, BUILD_COMMAND)
    except outputs.OutputError as err:
        raise outputs.OutputError(
            f"the job was rebuilt in {folder}, but the previous build, moved to {old}, now "
            f"holds files fedforest did not write; it was kept ({err})"
        ) from err
    keep.rmdir()


def check_workspace(workspace, log_file=None) -> None:
    """Refuse a simulator workspace or log that may be a user's; change nothing.

    The workspace must be new, empty or a previous simulator workspace holding
    only what that run wrote (``fedforest.outputs``): the simulator
    deletes what is in its workspace. An existing log must start with
    :data:`LOG_HEADER`.
    """
    outputs.check_dir(workspace, SIMULATE_COMMAND)
    if log_file is not None:
        check_log(log_file, LOG_HEADER, "the simulator log", {"the workspace": workspace})


def check_log(log_file, header: str, what: str, folders=None) -> None:
    """Refuse a log file that may be a user's, or that a run would clear; change nothing.

    The log may not be inside any of ``folders`` (``{name: folder}``, the
    folders the run clears), and an existing file is replaced only when its
    first line is ``header`` (a log an earlier run wrote).
    """
    log_file = Path(log_file)
    for name, folder in (folders or {}).items():
        if log_file.resolve().is_relative_to(Path(folder).resolve()):
            raise outputs.OutputError(
                f"{what} {log_file} is inside {name} {folder}, which the run clears; "
                "put it elsewhere"
            )
    if log_file.exists() or log_file.is_symlink():
        outputs.check_file(log_file, what, header=header, overwrite_option=None)
