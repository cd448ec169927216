"""Build the FLARE job folder from ``site_configs/`` (and run it in the simulator).

The builder validates ``job.yaml`` and every ``<site>.yaml`` (including the
data file and its columns), then writes a job with one app per site: the
server app runs :class:`FedForestController`, each site app runs
:class:`FedForestExecutor`; the site's YAML (data path made absolute) and the
job YAML travel in the apps' ``config/`` folders and the whole ``fedforest``
package in their ``custom/`` folders, so sites need no allow-list edits.

The job folder and the simulator's workspace are written only when they are
new, empty, or were written by the same command before and hold nothing else
(``fedforest.federation.outputs``); a user's folder is refused, never cleared.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from .. import outputs, protocol
from ..errors import ConfigError
from ..federation.config import JobConfig, SiteConfig
from .controller import FedForestController
from .executor import FedForestExecutor

logger = logging.getLogger(__name__)

JOB_FILE = "fedforest_job.yaml"
SITE_FILE = "fedforest_site.yaml"
#: Clients ask for tasks this often (seconds); FLARE's default of 2 s makes
#: every phase of a small job take seconds longer.
TASK_REQUEST_INTERVAL = 0.2


def load_configs(config_dir) -> tuple[JobConfig, dict[str, SiteConfig]]:
    """Load and validate ``job.yaml`` and every site's YAML in ``config_dir``."""
    config_dir = Path(config_dir)
    job = JobConfig.load(config_dir / "job.yaml")
    sites = {}
    for name in job.sites:
        path = config_dir / f"{name}.yaml"
        if not path.is_file():
            raise ConfigError(
                f"{job.source}: key 'job.sites' lists {name!r} but {path} does not exist; "
                "allowed: sites that have a YAML file in " + str(config_dir)
            )
        site = SiteConfig.load(path)
        if site.site != name:
            raise ConfigError(
                f"{path}: key 'site' is {site.site!r}; allowed: {name!r} (the file name)"
            )
        site.check_data()
        sites[name] = site
    job.check_against_sites(sites)  # always_keep, min_samples_leaf, max_features vs the data
    return job, sites


#: What the job's ``custom/`` folder leaves out: code no site or server runs (the
#: experiment runner, reports and plots, and the command line).
NOT_SHIPPED = ("experiments", "cli.py", "__pycache__", "*.pyc")


def _stage_package(stage: Path) -> Path:
    """Copy the fedforest runtime into ``stage`` for the apps' ``custom/`` folders.

    Only what sites and the server run travels: the package without
    :data:`NOT_SHIPPED`.
    """
    package = Path(__file__).resolve().parents[1]
    target = stage / "fedforest"
    shutil.copytree(package, target, ignore=shutil.ignore_patterns(*NOT_SHIPPED))
    return stage


#: The commands whose folders :mod:`fedforest.federation.outputs` guards (named in markers).
BUILD_COMMAND = "fedforest job build"
SIMULATE_COMMAND = "fedforest job simulate"
#: The first line of the simulator's log: a log that starts with it is fedforest's to replace.
LOG_HEADER = "# fedforest job simulate: output of the NVIDIA FLARE simulator"


def build_job(config_dir, out_dir, job_custom: list[object] | None = None) -> Path:
    """Validate the configs and export the FLARE job; return the job folder.

    The job folder ``out_dir/<job.name>`` is written only when it does not
    exist, is empty, or was written by a previous build and holds nothing
    else (``fedforest.federation.outputs``). FLARE's own ``export_job``
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
    """
    from nvflare.job_config.api import FedJob

    job_cfg, sites = load_configs(config_dir)
    out_dir = Path(out_dir)
    folder = out_dir / job_cfg.name
    outputs.check_dir(folder, BUILD_COMMAND)  # before anything is written
    out_dir.mkdir(parents=True, exist_ok=True)
    overrides = dict(job_custom or [])
    with tempfile.TemporaryDirectory() as tmp, _staging(out_dir) as staging:
        tmp = Path(tmp)
        stage = _stage_package(tmp / "src")
        job = FedJob(name=job_cfg.name, min_clients=job_cfg.min_sites)
        job.to(FedForestController(job_config=JOB_FILE), "server")
        job.to({"server": {"task_request_interval": TASK_REQUEST_INTERVAL}}, "server")
        job.to(str(stage), "server")
        shutil.copy(Path(config_dir) / "job.yaml", tmp / JOB_FILE)
        job.add_file_to(str(tmp / JOB_FILE), "server", app_folder_type="config")
        for name, site in sites.items():
            resolved = tmp / name / SITE_FILE
            resolved.parent.mkdir()
            data = yaml.safe_load(Path(site.source).read_text())
            data["data_path"] = site.data_path
            resolved.write_text(yaml.safe_dump(data, sort_keys=False))
            executor = overrides.get(name) or FedForestExecutor(site_config=SITE_FILE)
            job.to(executor, name, tasks=list(protocol.TASKS))
            job.to(str(stage), name)
            if name in overrides:
                job.to(inspect.getfile(type(executor)), name)  # its module goes in custom/
            job.add_file_to(str(resolved), name, app_folder_type="config")
        job.export_job(str(staging))
        built = staging / job_cfg.name
        outputs.record_dir(built, BUILD_COMMAND)
        _replace_folder(folder, built)
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


def _replace_folder(folder: Path, built: Path) -> None:
    """Move ``built`` to ``folder``; a previous build there is removed, file by listed file."""
    if not folder.exists():
        os.replace(built, folder)
        return
    outputs.check_dir(folder, BUILD_COMMAND)  # again: it may have changed during the build
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
    only what that run wrote (``fedforest.federation.outputs``): the simulator
    deletes what is in its workspace. An existing log must start with
    :data:`LOG_HEADER`.
    """
    outputs.check_dir(workspace, SIMULATE_COMMAND)
    if log_file is not None:
        log_file = Path(log_file)
        if log_file.resolve().is_relative_to(Path(workspace).resolve()):
            raise outputs.OutputError(
                f"the simulator log {log_file} is inside the workspace {workspace}, which the "
                "simulator clears; put it elsewhere"
            )
        if log_file.exists() or log_file.is_symlink():
            outputs.check_file(
                log_file, "the simulator log", header=LOG_HEADER, overwrite_option=None
            )


def simulate(job_dir, workspace, sites: list[str], log_file=None, timeout: float = 3600) -> Path:
    """Run the job in the NVIDIA FLARE simulator, one thread per site.

    Returns the server's run folder (``results.json``, ``report.md``). A run
    that takes longer than ``timeout`` seconds is stopped. The simulator clears
    its workspace, so the workspace must be new, empty or the workspace of a
    previous run holding only what that run wrote (:func:`check_workspace`);
    after the run its marker lists everything there.
    """
    workspace = Path(workspace)
    check_workspace(workspace, log_file)
    outputs.claim_dir(workspace, SIMULATE_COMMAND)
    if log_file:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "nvflare.cli",
        "simulator",
        str(job_dir),
        "-w",
        str(workspace),
        "-c",
        ",".join(sites),
        "-t",
        str(len(sites)),
    ]
    logger.info("simulator: %s", " ".join(cmd))
    out = open(log_file, "w") if log_file else subprocess.DEVNULL  # noqa: SIM115
    try:
        if log_file:
            out.write(f"{LOG_HEADER} (workspace {workspace})\n")
            out.flush()
        subprocess.run(
            cmd,
            check=False,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as err:
        raise RuntimeError(f"the simulator did not finish within {timeout:.0f} s") from err
    finally:
        if log_file:
            out.close()
        # the simulator deleted the marker with the rest of the workspace: mark it again
        outputs.record_dir(workspace, SIMULATE_COMMAND)
    return workspace / "server" / "simulate_job"
