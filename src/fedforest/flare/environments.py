"""Running the fedforest recipe in NVIDIA FLARE 2.9's execution environments.

* :func:`simulate`: ``SimEnv``, the simulator, one thread per site;
* :func:`run_poc`: ``PocEnv``, server and sites as separate local processes
  (``nvflare poc`` prepared and started by FLARE, stopped afterwards);
* :func:`run_prod`: ``ProdEnv``, a provisioned deployment reached through the
  admin's startup kit.

Each returns the server's run folder (``results.json``, ``report.md``); the
same configs and seed give the same results in all three. Folders they write
are guarded by :mod:`fedforest.outputs`: a user's folder is refused, never
cleared.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import shutil
import sys
import threading
import time
from pathlib import Path

from .. import outputs
from .job import LOG_HEADER, SIMULATE_COMMAND, check_workspace
from .recipe import FedForestRecipe

logger = logging.getLogger(__name__)

POC_COMMAND = "fedforest job poc"
PROD_COMMAND = "fedforest job prod"


def simulate(recipe: FedForestRecipe, workspace, log_file=None, timeout: float = 3600) -> Path:
    """Run the recipe in FLARE's ``SimEnv``: one simulated client per site, one thread each.

    The simulator's workspace is ``workspace/<job name>``; its output goes to
    ``log_file``. A run longer than ``timeout`` seconds is stopped. A job that
    fails still leaves its ``results.json`` with ``status: failed``: callers
    read the results, not the simulator's exit code.

    Returns
    -------
    Path
        The server's run folder, ``workspace/<job name>/server/simulate_job``.
    """
    from nvflare.recipe import SimEnv

    workspace = Path(workspace)
    check_workspace(workspace, log_file)
    outputs.claim_dir(workspace, SIMULATE_COMMAND)
    env = SimEnv(clients=recipe.sites, workspace_root=str(workspace.resolve()))
    logger.info("SimEnv: %d sites, workspace %s", len(recipe.sites), workspace)
    try:
        with _output_to(log_file, f"{LOG_HEADER} (workspace {workspace})"):
            _within(timeout, lambda: recipe.run(env), "the simulator")
    except RuntimeError as err:
        if "did not finish" in str(err):
            raise
        # SimEnv raises when the simulator exits non-zero, as it does after a job that
        # failed; the job's own results say why
        logger.warning("the simulator reported a failure: %s", err)
    finally:
        outputs.record_dir(workspace, SIMULATE_COMMAND)
    return workspace / recipe.name / "server" / "simulate_job"


def run_poc(recipe: FedForestRecipe, workspace, out_dir, timeout: float = 900) -> Path:
    """Run the recipe in FLARE's ``PocEnv`` and download its results into ``out_dir``.

    ``workspace`` is the POC workspace (``NVFLARE_POC_WORKSPACE``), which FLARE
    prepares afresh and clears: only a new, empty or earlier fedforest POC
    workspace is accepted. The POC processes start with the ``python3`` of
    this environment and are stopped when the job ends.
    """
    from nvflare.recipe import PocEnv

    workspace, out_dir = Path(workspace).resolve(), Path(out_dir).resolve()
    _separate(workspace, out_dir)
    outputs.claim_dir(workspace, POC_COMMAND)
    outputs.claim_dir(out_dir, POC_COMMAND)
    saved = {k: os.environ.get(k) for k in ("NVFLARE_POC_WORKSPACE", "PATH")}
    os.environ["NVFLARE_POC_WORKSPACE"] = str(workspace)
    # the POC start scripts use the python3 on PATH: make it this environment's
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{saved['PATH'] or ''}"
    try:
        env = PocEnv(clients=recipe.sites, num_clients=len(recipe.sites))
        return _run_and_download(recipe, env, out_dir, timeout, "PocEnv")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        outputs.record_dir(workspace, POC_COMMAND)
        outputs.record_dir(out_dir, POC_COMMAND)


def run_prod(
    recipe: FedForestRecipe,
    startup_kit,
    out_dir,
    username: str | None = None,
    timeout: float = 900,
    sites_timeout: float = 60,
) -> Path:
    """Submit the recipe to a provisioned deployment with FLARE's ``ProdEnv``.

    Before submitting, the sites connected to the server are checked (up to
    ``sites_timeout`` seconds): fewer than the job's ``min_sites`` is an error
    naming the missing sites; some missing is a warning naming them (the job
    runs without them).

    Parameters
    ----------
    startup_kit : path
        The admin's startup kit (the folder holding ``startup/fed_admin.json``).
    out_dir : path
        Where the job's results are downloaded.
    username : str, optional
        The admin's name in ``project.yml``; by default the one the startup kit
        was made for. A different name is refused.
    """
    from nvflare.recipe import ProdEnv

    startup_kit = Path(startup_kit).resolve()
    username = check_admin_kit(startup_kit, username)
    out_dir = Path(out_dir).resolve()
    outputs.check_dir(out_dir, PROD_COMMAND)
    connected = wait_for_sites(startup_kit, recipe.sites, username, sites_timeout)
    missing = sorted(set(recipe.sites) - set(connected))
    min_sites = recipe.job_config.min_sites
    if len(recipe.sites) - len(missing) < min_sites:
        raise RuntimeError(
            f"only {len(recipe.sites) - len(missing)} of the job's sites are connected to the "
            f"server (missing: {', '.join(missing)}) and the job needs min_sites={min_sites}; "
            + SITE_HINT
        )
    if missing:
        logger.warning("ProdEnv: %s not connected; the job runs without them", ", ".join(missing))
    outputs.claim_dir(out_dir, PROD_COMMAND)
    try:
        env = ProdEnv(startup_kit_location=str(startup_kit), username=username, login_timeout=30)
        return _run_and_download(recipe, env, out_dir, timeout, "ProdEnv")
    finally:
        outputs.record_dir(out_dir, PROD_COMMAND)


#: What to check when a site does not join (named in errors).
SITE_HINT = (
    "at each missing site check that its start.sh is running and its log.txt (in its kit folder) "
    "shows 'Successfully registered client'; that it reaches the server's host and "
    "fed_learn_port (startup/fed_client.json, 'target'); that its kit comes from the same "
    "provisioning as the server's (a certificate error otherwise); and that its name is the "
    "site's name in site_configs/job.yaml"
)


def check_admin_kit(startup_kit, username: str | None = None) -> str:
    """The admin's name of a startup kit (``startup/fed_admin.json``), checked against ``username``.

    Raises
    ------
    ValueError
        If the folder is not an admin's startup kit, or was made for another admin.
    """
    config = Path(startup_kit) / "startup" / "fed_admin.json"
    if not config.is_file():
        raise ValueError(
            f"startup kit {startup_kit} has no startup/fed_admin.json; give the admin's "
            "startup kit folder made by `nvflare provision`"
        )
    try:
        owner = json.loads(config.read_text())["admin"].get("username")
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"{config} is not an admin configuration FLARE wrote ({err})") from None
    if username is None:
        if not owner:
            raise ValueError(f"{config} names no admin; give the admin's name (--username)")
        return owner
    if owner and owner != username:
        raise ValueError(
            f"the startup kit {startup_kit} is {owner!r}'s, not {username!r}'s; "
            f"pass --username {owner} (or the kit of {username})"
        )
    return username


def connected_sites(startup_kit, username: str, timeout: float = 10) -> list[str]:
    """The clients now connected to the server of an admin's startup kit (FLARE API).

    Raises
    ------
    RuntimeError
        If the server cannot be reached or the admin cannot log in within ``timeout``.
    """
    from nvflare.fuel.flare_api.flare_api import new_secure_session

    with contextlib.redirect_stdout(io.StringIO()):  # "Connecting to FLARE ..."
        try:
            session = new_secure_session(username, str(startup_kit), timeout=timeout)
        except Exception as err:  # noqa: BLE001 - FLARE raises several kinds
            raise RuntimeError(
                f"cannot log in to the server of {startup_kit} as {username} within "
                f"{timeout:g} s ({type(err).__name__}: {err}); check that the server is running "
                "and that its host and admin_port (startup/fed_admin.json) are reachable"
            ) from err
    try:
        return sorted(c.name for c in session.get_system_info().client_info)
    finally:
        session.close()


def wait_for_sites(startup_kit, sites, username: str, timeout: float = 60) -> list[str]:
    """Wait until every one of ``sites`` is connected, or ``timeout`` seconds; return the connected.

    Asks the server twice a second. The server must answer (a login that fails
    until the deadline raises :class:`RuntimeError`).
    """
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            connected = connected_sites(startup_kit, username, timeout=max(min(left, 10), 1))
        except RuntimeError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)
            continue
        if set(sites) <= set(connected) or time.monotonic() >= deadline:
            return connected
        time.sleep(0.5)


def _run_and_download(recipe, env, out_dir: Path, timeout: float, name: str) -> Path:
    run = _within(timeout + 120, lambda: recipe.run(env), name)
    job_id = run.get_job_id()
    logger.info("%s: submitted job %s", name, job_id)
    result = _within(timeout + 120, lambda: run.get_result(timeout=timeout, clean_up=False), name)
    if not result or not Path(result).exists():
        raise RuntimeError(f"{name}: job {job_id} did not finish within {timeout:.0f} s")
    target = out_dir / job_id
    shutil.copytree(result, target, dirs_exist_ok=True)
    found = sorted(target.rglob("results.json"))
    if not found:
        raise RuntimeError(
            f"{name}: job {job_id} ended with status {run.get_status()} and left no results.json "
            f"(downloaded to {target}); the server's and the sites' log.txt say why (a component "
            "'not in allow_list' means a site has not allow-listed fedforest's classes)"
        )
    return found[0].parent


def _separate(*folders: Path) -> None:
    for a in folders:
        for b in folders:
            if a != b and (a.is_relative_to(b) or b.is_relative_to(a)):
                raise ValueError(f"{a} and {b} overlap (one holds the other); give two folders")


def _within(timeout: float, fn, what: str):
    """Run ``fn`` in a thread; after ``timeout`` seconds stop its child processes and fail."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as err:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = err

    thread = threading.Thread(target=target, name=f"fedforest {what}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        _stop_children()
        thread.join(30)
        raise RuntimeError(f"{what} did not finish within {timeout:.0f} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _stop_children() -> None:
    """Terminate every process this one started (the simulator runs in its own session)."""
    import psutil

    children = psutil.Process().children(recursive=True)
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.terminate()
    _, alive = psutil.wait_procs(children, timeout=10)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()


@contextlib.contextmanager
def _output_to(log_file, header: str):
    """Send this process's standard output and error (and its children's) to ``log_file``."""
    if log_file is None:
        yield
        return
    log_file = Path(log_file)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    with open(log_file, "w") as log:
        log.write(header + "\n")
        log.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
