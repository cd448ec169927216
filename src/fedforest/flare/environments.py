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
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from .. import outputs
from ..federation.progress import PROGRESS_FILE, ProgressFollower, log_line
from . import _compat
from .job import LOG_HEADER, SIMULATE_COMMAND, check_log, check_workspace
from .recipe import FedForestRecipe

logger = logging.getLogger(__name__)

POC_COMMAND = "fedforest job poc"
PROD_COMMAND = "fedforest job prod"
#: The first line of the log of ``fedforest job poc`` (FLARE's output, the POC processes').
POC_LOG_HEADER = "# fedforest job poc: output of NVIDIA FLARE's POC mode"
#: The first line of the log of ``fedforest job prod`` (FLARE's output while submitting and waiting).
PROD_LOG_HEADER = "# fedforest job prod: output of NVIDIA FLARE's ProdEnv"


def simulate(
    recipe: FedForestRecipe,
    workspace,
    log_file=None,
    timeout: float = 3600,
    site_files: Mapping[str, Mapping[str, str]] | None = None,
    progress=None,
) -> Path:
    """Run the recipe in FLARE's ``SimEnv``: one simulated client per site, one thread each.

    The simulator's workspace is ``workspace/<job name>``; its output goes to
    ``log_file``. A run longer than ``timeout`` seconds is stopped. A job that
    fails still leaves its ``results.json`` with ``status: failed``: callers
    read the results, not the simulator's exit code. While the job runs, each
    progress line the server writes (``progress.txt`` in its run folder, one
    line per round) is passed to ``progress`` (default: the
    ``fedforest.progress`` logger).

    Parameters
    ----------
    site_files : dict, optional
        Files of each site's own FLARE ``local/`` folder, ``{site: {file name:
        text}}`` (``"server"`` for the server's): a hospital's
        ``fedforest.yaml`` (its data path, its ``privacy:`` block) or
        ``privacy.json`` (its privacy scopes). FLARE's simulator builds every
        participant's ``local/`` afresh, from ``<workspace>/<job name>/local/``
        only, which is the same for all; so with ``site_files`` the simulator
        runs in a process of its own (:func:`_simulator_main`) that writes each
        site's files into its ``local/`` right after the simulator built it,
        before the site starts. Linux only (the simulator must fork).

    Returns
    -------
    Path
        The server's run folder, ``workspace/<job name>/server/simulate_job``.
    """
    from nvflare.recipe import SimEnv

    files = _check_site_files(site_files, ["server", *recipe.sites])
    workspace = Path(workspace)
    check_workspace(workspace, log_file)
    outputs.claim_dir(workspace, SIMULATE_COMMAND, inputs=recipe_inputs(recipe))
    if files:
        env = _site_files_env(files, clients=recipe.sites, workspace_root=str(workspace.resolve()))
    else:
        env = SimEnv(clients=recipe.sites, workspace_root=str(workspace.resolve()))
    logger.info("SimEnv: %d sites, workspace %s", len(recipe.sites), workspace)
    run_dir = workspace / recipe.name / "server" / "simulate_job"
    try:
        with (
            _output_to(log_file, f"{LOG_HEADER} (workspace {workspace})"),
            ProgressFollower(lambda: [run_dir / PROGRESS_FILE], progress or log_line),
        ):
            _within(timeout, lambda: recipe.run(env), "the simulator")
    except RuntimeError as err:
        if "did not finish" in str(err):
            raise
        # SimEnv raises when the simulator exits non-zero, as it does after a job that
        # failed; the job's own results say why
        logger.warning("the simulator reported a failure: %s", err)
    finally:
        outputs.record_dir(workspace, SIMULATE_COMMAND)
    return run_dir


def recipe_inputs(recipe) -> list[Path]:
    """The files a recipe was made from (its configuration folder and the sites' data
    files): a folder the run writes must not hold them."""
    return [recipe.config_dir, *(Path(s.data_path) for s in recipe.site_configs.values())]


def _check_site_files(
    site_files, targets: list[str], simulator: bool = True
) -> dict[str, dict[str, str]]:
    """``site_files`` checked: known participants, plain file names, text contents."""
    if site_files is None:
        return {}
    if not isinstance(site_files, Mapping):
        raise ValueError(
            f"site_files must map a site (or 'server') to {{file name: text}}, got "
            f"{type(site_files).__name__}"
        )
    if site_files and simulator and not sys.platform.startswith("linux"):
        raise ValueError("site_files needs the simulator to fork its processes: Linux only")
    out: dict[str, dict[str, str]] = {}
    for site, files in site_files.items():
        if site not in targets:
            raise ValueError(f"site_files names {site!r}; the job's participants are {targets}")
        if not isinstance(files, Mapping):
            raise ValueError(f"site_files[{site!r}] must map file names to text")
        for name, text in files.items():
            if (
                not isinstance(name, str)
                or name in ("", ".", "..")
                or "/" in name
                or "\\" in name
                or "\0" in name
            ):
                raise ValueError(
                    f"site_files[{site!r}] names {name!r}; allowed: a file name in the site's "
                    "local/ folder (no folder part), such as 'fedforest.yaml' or 'privacy.json'"
                )
            if not isinstance(text, str):
                raise ValueError(
                    f"site_files[{site!r}][{name!r}] is a {type(text).__name__}; allowed: text"
                )
        out[str(site)] = {str(n): str(t) for n, t in files.items()}
    return out


def _site_files_env(files: dict[str, dict[str, str]], **kwargs):
    """A ``SimEnv`` whose simulator writes each site's own ``local/`` files (see :func:`simulate`)."""
    from nvflare.recipe import SimEnv

    class SiteFilesSimEnv(SimEnv):
        def deploy(self, job):
            # SimEnv.deploy, except for the simulator's command: FedJob.simulator_run runs
            # FLARE's simulator module, this runs _simulator_main
            workspace = os.path.join(self.workspace_root, job.name)
            _compat.ensure_default_component_policy(workspace)
            with tempfile.TemporaryDirectory(prefix="fedforest-sim-") as tmp:
                job.export_job(tmp)
                spec = Path(tmp) / "site_files.json"
                spec.write_text(json.dumps(files), encoding="utf-8")
                command = [
                    sys.executable,
                    "-c",
                    "from fedforest.flare.environments import _simulator_main; _simulator_main()",
                    str(Path(tmp) / job.name),
                    workspace,
                    ",".join(self.clients),
                    str(self.num_threads),
                    str(spec),
                ]
                status = subprocess.run(command, start_new_session=True, check=False).returncode
            self.last_run_failed = status != 0
            if self.last_run_failed:
                raise RuntimeError(
                    f"Simulation failed with return code {status}. Logs are in per-site "
                    f"subdirectories under {workspace}"
                )
            return job.name

    return SiteFilesSimEnv(**kwargs)


def _simulator_main() -> None:
    """The simulator's process when sites have files of their own (``simulate(site_files=)``).

    Arguments: job folder, workspace, clients (comma-separated), threads, and
    a JSON file ``{site: {file name: text}}``. It runs FLARE's
    ``SimulatorRunner`` as ``nvflare simulator`` does, with one addition: when
    the simulator has built a participant's ``local/`` folder (from the
    workspace's ``local/``, the same for all), that participant's own files
    are written into it (:func:`fedforest.flare._compat.site_files_runner`).
    """
    job_folder, workspace, clients, threads, spec = sys.argv[1:6]
    files = json.loads(Path(spec).read_text(encoding="utf-8"))
    runner = _compat.site_files_runner(
        files, job_folder=job_folder, workspace=workspace, clients=clients, threads=int(threads)
    )
    sys.exit(runner.run())


def run_poc(
    recipe: FedForestRecipe,
    workspace,
    out_dir,
    timeout: float = 900,
    log_file=None,
    progress=None,
) -> Path:
    """Run the recipe in FLARE's ``PocEnv`` and download its results into ``out_dir``.

    ``workspace`` is the POC workspace (``NVFLARE_POC_WORKSPACE``), which FLARE
    prepares afresh and clears: only a new, empty or earlier fedforest POC
    workspace is accepted. The POC processes start with the ``python3`` of
    this environment and are stopped when the job ends. With ``log_file``,
    FLARE's output in this process and the POC processes' (the job's metadata
    it prints, its messages when the POC stops) goes to that file, which may
    not be inside ``workspace`` or ``out_dir`` and is replaced only when its
    first line is :data:`POC_LOG_HEADER`. The server's progress lines are
    passed to ``progress`` as the job runs (:func:`simulate`).
    """
    workspace, out_dir = Path(workspace), Path(out_dir)
    if log_file is not None:
        check_log(log_file, POC_LOG_HEADER, "the POC log", {"--out": out_dir})
    deployment = PocDeployment(
        recipe.sites, workspace, inputs=recipe_inputs(recipe), log_file=log_file
    )
    with deployment as poc:
        return poc.run(recipe, out_dir, timeout=timeout, progress=progress)


class PocDeployment:
    """FLARE's POC mode (``PocEnv``) started once, for one job or several in turn.

    ``with PocDeployment(sites, workspace) as poc: poc.run(recipe, out_dir)``
    prepares a fresh POC workspace for ``sites``, writes each site's own
    ``local/`` files (``site_files``: ``{site: {file name: text}}``, such as a
    ``privacy.json`` with the hospital's privacy scopes, or its
    ``fedforest.yaml``), starts the server and the sites with the ``python3``
    of this environment, and stops them on leaving the block. Each
    :meth:`run` submits one job once every site is connected and downloads
    its results. ``workspace`` is guarded as :func:`run_poc` says.

    Parameters
    ----------
    sites : list of str
        The POC clients (every job run in it uses these sites).
    workspace : path
        The POC workspace (``NVFLARE_POC_WORKSPACE``).
    site_files : dict, optional
        Files for each site's ``local/`` folder.
    inputs : list of path, optional
        Files the runs were made from: no folder written may hold them.
    log_file : path, optional
        Where FLARE's output goes while the deployment is up: what FLARE prints
        in this process (each job's metadata, its messages when the POC stops)
        and the POC processes' output. It may not be inside ``workspace``, and
        an existing file is replaced only when its first line is
        :data:`POC_LOG_HEADER`. Without it the output goes where this
        process's goes.
    """

    def __init__(self, sites, workspace, site_files=None, inputs=(), log_file=None):
        self.sites = list(sites)
        self.workspace = Path(workspace).resolve()
        self.site_files = _check_site_files(site_files, self.sites, simulator=False)
        self.inputs = list(inputs)
        self.log_file = None if log_file is None else Path(log_file)
        if self.log_file is not None:
            check_log(
                self.log_file, POC_LOG_HEADER, "the POC log", {"the POC workspace": workspace}
            )
        self.env = None
        self._saved: dict[str, str | None] = {}
        self._output = contextlib.ExitStack()

    def __enter__(self) -> PocDeployment:
        from nvflare.recipe import PocEnv

        outputs.claim_dir(self.workspace, POC_COMMAND, inputs=self.inputs)
        self._output.enter_context(
            _output_to(self.log_file, f"{POC_LOG_HEADER} (workspace {self.workspace})")
        )
        self._saved = {k: os.environ.get(k) for k in ("NVFLARE_POC_WORKSPACE", "PATH")}
        os.environ["NVFLARE_POC_WORKSPACE"] = str(self.workspace)
        # the POC start scripts use the python3 on PATH: make it this environment's
        os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{self._saved['PATH'] or ''}"
        try:
            self.env = _shared_poc_env(PocEnv, self.site_files)(
                clients=self.sites, num_clients=len(self.sites)
            )
        except BaseException:
            self.__exit__()
            raise
        return self

    def run(self, recipe: FedForestRecipe, out_dir, timeout: float = 900, progress=None) -> Path:
        """Run one job in the deployment; return its server run folder under ``out_dir``.

        The server's progress lines are passed to ``progress`` as the job runs
        (default: the ``fedforest.progress`` logger).
        """
        if self.env is None:
            raise RuntimeError("PocDeployment.run is called inside its `with` block")
        if sorted(recipe.sites) != sorted(self.sites):
            raise ValueError(
                f"the job's sites {sorted(recipe.sites)} are not the POC's {sorted(self.sites)}"
            )
        out_dir = Path(out_dir).resolve()
        _separate(self.workspace, out_dir)
        if self.log_file is not None and self.log_file.resolve().is_relative_to(out_dir):
            raise outputs.OutputError(
                f"the POC log {self.log_file} is inside --out {out_dir}, which the run clears; "
                "put it elsewhere"
            )
        outputs.claim_dir(out_dir, POC_COMMAND, inputs=[*self.inputs, *recipe_inputs(recipe)])
        try:
            server = self._server_dir()
            return _run_and_download(
                recipe,
                self.env,
                out_dir,
                timeout,
                "PocEnv",
                live=lambda job_id: [server / job_id / PROGRESS_FILE],
                progress=progress,
            )
        finally:
            outputs.record_dir(out_dir, POC_COMMAND)

    def _server_dir(self) -> Path:
        """The POC server's workspace (its run folders are ``<job id>/`` there)."""
        return _compat.poc_prod_dir(self.workspace) / "server"

    def __exit__(self, *exc) -> None:
        try:
            if self.env is not None:
                self.env.shut_down()
        finally:
            self.env = None
            for key, value in self._saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            outputs.record_dir(self.workspace, POC_COMMAND)
            self._output.close()  # FLARE's output to the terminal again


def _shared_poc_env(poc_env_class, site_files: dict[str, dict[str, str]]):
    """A ``PocEnv`` that starts its services at the first job only, and stops at ``shut_down``.

    FLARE's ``PocEnv`` prepares, starts and stops a POC for every job (a run's
    ``get_result`` stops it); this one keeps it for the next job, and writes
    ``site_files`` into each site's ``local/`` folder between preparing and
    starting, where FLARE's client reads them (``privacy.json``: the site's
    privacy scopes). ``PocEnv`` also submits after a fixed wait, and a site
    that registers later is not in the job (FLARE starts it with
    ``min_clients`` sites); this one submits each job once every client of the
    environment is connected (``wait_for_sites``, up to 60 s; then it submits
    to those connected and the job names the others). The steps of
    ``PocEnv.deploy`` it takes apart are FLARE internals (:mod:`._compat`).
    """

    class SharedPocEnv(poc_env_class):
        _started = False

        def deploy(self, job):
            if not self._started:
                if _compat.poc_running(self):
                    super().stop(clean_up=True)
                _compat.poc_prepare(self)
                prod = _compat.poc_prod_dir(self.poc_workspace)
                for site, files in site_files.items():
                    local = prod / site / "local"
                    if not local.is_dir():
                        raise RuntimeError(f"PocEnv: no local/ folder for {site!r} in {prod}")
                    for name, text in files.items():
                        (local / name).write_text(text, encoding="utf-8")
                _compat.poc_start(self)
                self._started = True
                logger.info("PocEnv: POC services started for %s", self.clients)
            kit = _compat.poc_admin_kit(self)
            connected = wait_for_sites(kit, self.clients, self.username, timeout=60)
            missing = sorted(set(self.clients) - set(connected))
            if missing:
                logger.warning("PocEnv: sites not connected after 60 s: %s", missing)
            return _compat.poc_submit(self, job)

        def stop(self, clean_up: bool = False) -> None:
            """Kept running for the next job (FLARE's run calls this after each job)."""

        def shut_down(self) -> None:
            """Stop the POC services (the workspace stays, with every job's logs)."""
            if self._started:
                super().stop(clean_up=False)
                self._started = False

    return SharedPocEnv


def run_prod(
    recipe: FedForestRecipe,
    startup_kit,
    out_dir,
    username: str | None = None,
    timeout: float = 900,
    sites_timeout: float = 60,
    log_file=None,
    progress=None,
) -> Path:
    """Submit the recipe to a provisioned deployment with FLARE's ``ProdEnv``.

    With ``log_file``, what FLARE prints while it submits and waits goes to
    that file (as :func:`run_poc`). The server is elsewhere: its progress
    lines reach ``progress`` with the downloaded results, when the job ends.

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
    if log_file is not None:
        check_log(log_file, PROD_LOG_HEADER, "the production log", {"--out": out_dir})
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
    outputs.claim_dir(out_dir, PROD_COMMAND, inputs=recipe_inputs(recipe))
    try:
        env = ProdEnv(startup_kit_location=str(startup_kit), username=username, login_timeout=30)
        with _output_to(log_file, f"{PROD_LOG_HEADER} (kit {startup_kit})"):
            return _run_and_download(recipe, env, out_dir, timeout, "ProdEnv", progress=progress)
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


def _run_and_download(
    recipe, env, out_dir: Path, timeout: float, name: str, live=None, progress=None
) -> Path:
    """Submit, wait, download into ``out_dir/<job id>``; the server's run folder there.

    The progress lines are followed in ``live(job_id)`` (the server's run
    folder, where it is on this machine) while the job runs, and in the
    downloaded copy once the job is over.
    """
    run = _within(timeout + 120, lambda: recipe.run(env), name)
    job_id = run.get_job_id()
    logger.info("%s: submitted job %s", name, job_id)
    target = out_dir / job_id

    def progress_files() -> list[Path]:
        found = list(live(job_id)) if live is not None else []
        return found + (sorted(target.rglob(PROGRESS_FILE)) if target.is_dir() else [])

    with ProgressFollower(progress_files, progress or log_line):
        result = _within(
            timeout + 120, lambda: run.get_result(timeout=timeout, clean_up=False), name
        )
        if not result or not Path(result).exists():
            raise RuntimeError(f"{name}: job {job_id} did not finish within {timeout:.0f} s")
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
