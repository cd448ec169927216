"""Every private NVIDIA FLARE internal fedforest uses, in one module, behind a version gate.

fedforest is built on FLARE's public API (``nvflare.apis``, ``nvflare.job_config``,
``nvflare.recipe``, ``nvflare.app_common``). A few things it needs have no
public API: writing each participant's own ``local/`` files in the simulator,
keeping one POC running for several jobs and submitting only once every site
is connected, an MLflow run for the server's own records, FLARE's recipe
flags in the job script, and (tests) a privacy scope in the simulator. Those reach into FLARE's private modules
(``nvflare.private``) or its ``_``-prefixed functions and methods, and each
such reach is here and nowhere else: the rest of fedforest calls the
functions of this module.

:data:`INTERNALS` lists each internal (its module, its attribute, the
parameters fedforest passes, who uses it and why); :data:`SUBCLASSED` the
attributes of FLARE classes fedforest subclasses that FLARE does not document
(ccwf's server controller). :data:`VERIFIED_FLARE`
names the FLARE versions on which every one of them was checked (by
``tests/flare/test_compat.py``, the canary, and the FLARE runs of
``tests/flare``). On another version the first use logs a warning naming
every internal to check (:func:`check_version`); an internal that is gone
raises :class:`FlareCompatError` naming the attribute, the module and the
installed FLARE version.

The job ships this module in its apps' ``custom/`` folders with the rest of
the fedforest runtime (``flare/job.py``): the server's MLflow receiver and the
sites' swarm executor import it there. It imports nothing from FLARE until a
function is called.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import logging
import os
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

#: The NVIDIA FLARE versions on which every internal of :data:`INTERNALS` was checked.
VERIFIED_FLARE = ("2.9.0",)
#: The command that checks the internals on the installed FLARE (named in messages).
CANARY = "pytest tests/flare/test_compat.py"


class FlareCompatError(RuntimeError):
    """A FLARE internal fedforest relies on is not where (or what) it was."""


@dataclass(frozen=True)
class Internal:
    """One private FLARE internal: where it is, what fedforest passes it, who needs it.

    ``attribute`` is dotted inside ``module`` (``Class.method``). ``parameters``
    are what fedforest's calls (or its override of a hook) rely on: the
    leading parameters, in order, every later one with a default; with
    ``keywords`` (fedforest passes them by name) parameters of those names
    anywhere. ``None``: not called. ``attributes`` are the instance
    attributes fedforest reads, which the class's ``__init__`` sets.
    """

    module: str
    attribute: str
    used_by: str
    why: str
    parameters: tuple[str, ...] | None = None
    attributes: tuple[str, ...] = ()
    keywords: bool = False

    @property
    def name(self) -> str:
        return f"{self.module}.{self.attribute}"


_SIM = "nvflare.private.fed.app.simulator.simulator_runner"
_POC = "nvflare.tool.poc.poc_commands"
_MLFLOW = "nvflare.app_opt.tracking.mlflow.mlflow_receiver"

#: Every FLARE internal fedforest uses (``tests/flare/test_compat.py`` checks each).
INTERNALS = (
    Internal(
        _SIM,
        "SimulatorRunner",
        "flare/environments.py: simulate(site_files=)",
        "the simulator's runner, run in a process of fedforest's own (as `nvflare simulator` "
        "does) so that each participant's local/ files can be written before it starts",
        parameters=("job_folder", "workspace", "clients", "threads", "log_config"),
        keywords=True,
    ),
    Internal(
        _SIM,
        "SimulatorRunner._setup_local_startup",
        "flare/environments.py: simulate(site_files=)",
        "the hook after which a participant's local/ folder exists: fedforest writes that "
        "participant's own files (fedforest.yaml, privacy.json) into it",
        parameters=("self", "log_config_file_path", "workspace"),
    ),
    Internal(
        "nvflare.fuel.utils.log_utils",
        "LogMode.CONCISE",
        "flare/environments.py: simulate(site_files=)",
        "the log configuration `nvflare simulator` gives its runner (with FL_LOG_LEVEL)",
    ),
    Internal(
        "nvflare.fuel.utils.log_utils",
        "FL_LOG_LEVEL",
        "flare/environments.py: simulate(site_files=)",
        "the environment variable `nvflare simulator` reads its log configuration from",
    ),
    Internal(
        "nvflare.recipe.sim_env",
        "SimEnv._ensure_default_component_policy",
        "flare/environments.py: simulate(site_files=)",
        "SimEnv.deploy's first step (FLARE's default class allow-list in the workspace), "
        "repeated where fedforest runs the simulator in its own process",
        parameters=("workspace",),
        attributes=("workspace_root", "clients", "num_threads", "last_run_failed"),
    ),
    Internal(
        "nvflare.recipe.poc_env",
        "PocEnv._check_poc_running",
        "flare/environments.py: PocDeployment",
        "PocEnv.deploy's check for a POC still running (stopped before a fresh one starts)",
        parameters=("self",),
        attributes=(
            "clients",
            "num_clients",
            "poc_workspace",
            "docker_image",
            "use_he",
            "project_conf_path",
            "gpu_ids",
            "username",
        ),
    ),
    Internal(
        "nvflare.recipe.poc_env",
        "PocEnv._get_session_manager",
        "flare/environments.py: PocDeployment",
        "the admin session PocEnv submits with (its submit_job), once every site is connected",
        parameters=("self",),
    ),
    Internal(
        "nvflare.recipe.poc_env",
        "PocEnv._get_admin_startup_kit_path",
        "flare/environments.py: PocDeployment",
        "the POC admin's startup kit, to ask the server which sites are connected",
        parameters=("self",),
    ),
    Internal(
        "nvflare.recipe.session_mgr",
        "SessionManager.submit_job",
        "flare/environments.py: PocDeployment",
        "what PocEnv.deploy returns: the submitted job's id",
        parameters=("self", "job"),
    ),
    Internal(
        _POC,
        "prepare_poc_provision",
        "flare/environments.py: PocDeployment",
        "PocEnv.deploy's preparation of a fresh POC, done once for several jobs, with the "
        "sites' local/ files written before the POC starts",
        parameters=(
            "clients",
            "number_of_clients",
            "workspace",
            "docker_image",
            "use_he",
            "project_conf_path",
            "examples_dir",
        ),
        keywords=True,
    ),
    Internal(
        _POC,
        "_start_poc",
        "flare/environments.py: PocDeployment",
        "PocEnv.deploy's start of the POC services, done once for several jobs",
        parameters=("poc_workspace", "gpu_ids", "excluded", "services_list"),
        keywords=True,
    ),
    Internal(
        _POC,
        "get_prod_dir",
        "flare/environments.py: PocDeployment",
        "the POC's kit folder (<workspace>/<project>/prod_NN), where the sites' local/ folders "
        "and the server's run folders are",
        parameters=("workspace",),
    ),
    Internal(
        _MLFLOW,
        "MLflowReceiver._mlflow_setup",
        "flare/tracking.py: FedForestMLflowReceiver",
        "MLflowReceiver.initialize opens runs for the clients only: the same call opens one "
        "for the server's own records (the election)",
        parameters=(
            "self",
            "art_full_path",
            "experiment_name",
            "experiment_tags",
            "site_names",
            "fl_ctx",
        ),
        attributes=("buffer", "kw_args", "artifact_location"),
    ),
    Internal(
        _MLFLOW,
        "MLflowReceiver._get_artifact_location",
        "flare/tracking.py: FedForestMLflowReceiver",
        "the artifact folder MLflowReceiver.initialize passes to _mlflow_setup",
        parameters=("self", "relative_path", "fl_ctx"),
    ),
    Internal(
        _MLFLOW,
        "MLflowReceiver._get_tags",
        "flare/tracking.py: FedForestMLflowReceiver",
        "the experiment tags MLflowReceiver.initialize passes to _mlflow_setup",
        parameters=("self", "tag_key", "kwargs"),
    ),
    Internal(
        _MLFLOW,
        "MLflowReceiver._init_buffer",
        "flare/tracking.py: FedForestMLflowReceiver",
        "the server's record buffer, as MLflowReceiver.initialize makes the clients'",
        parameters=("self", "site_names"),
    ),
    Internal(
        "nvflare.recipe.spec",
        "_peek_recipe_args",
        "jobs/fedforest_job.py",
        "FLARE's own --export and --export-dir flags of a job script, which nvflare.recipe.spec "
        "takes out of sys.argv when it is imported",
        parameters=(),
    ),
    Internal(
        "nvflare.private.privacy_manager",
        "Scope",
        "flare/swarm.py: scope_policy_filters; tests",
        "a site's privacy scope (local/privacy.json) as FLARE's client runtime puts it in the "
        "run's context: its task_result_filters are the swarm site's own filters",
        parameters=(),
        attributes=("task_result_filters",),
    ),
    Internal(
        "nvflare.app_opt.feature_election.controller",
        "FeatureElectionController._extract_client_data",
        "tests/election/test_ballot.py",
        "the step of FLARE's own feature election that reads the clients' votes (and drops a "
        "client that selected nothing): fedforest's 'selected' rule is checked against it",
        parameters=("self", "results"),
    ),
    Internal(
        "nvflare.private.fed.utils.fed_utils",
        "create_job_processing_context_properties",
        "tests/flare/privacy_capture.py: SimulatorScope",
        "how FLARE's client runtime puts a job's privacy scope in its context, which the "
        "simulator leaves out (the tests apply it there)",
        parameters=("workspace", "job_id"),
    ),
)

#: Attributes of FLARE classes fedforest subclasses that FLARE's documentation does not
#: promise (public names, read by the subclasses themselves): checked by the canary too.
SUBCLASSED = (
    Internal(
        "nvflare.app_common.ccwf.server_ctl",
        "ServerSideController",
        "flare/swarm.py: FedForestSwarmController",
        "the sites ccwf configures and watches, its configuration task and timeout, and each "
        "site's status (a site not connected at the start is left out, not a failed job)",
        attributes=(
            "participating_clients",
            "min_clients",
            "configure_task_name",
            "configure_task_timeout",
            "client_statuses",
        ),
    ),
    Internal(
        "nvflare.app_common.ccwf.server_ctl",
        "ClientStatus",
        "flare/swarm.py: FedForestSwarmController.sub_flow",
        "when a site took its configuration (none: it never started the swarm job)",
        attributes=("ready_time",),
    ),
)


# ------------------------------------------------------------------ the gate
def flare_version() -> str:
    """The installed NVIDIA FLARE version (``"not installed"`` without it)."""
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover - Python < 3.8
        return "unknown"
    try:
        return version("nvflare")
    except PackageNotFoundError:
        return "not installed"


def unverified_message(version: str | None = None) -> str | None:
    """What to check when ``version`` (default: the installed one) is not verified; else None."""
    version = flare_version() if version is None else version
    if version in VERIFIED_FLARE:
        return None
    listed = "; ".join(f"{i.name} ({i.used_by})" for i in (*INTERNALS, *SUBCLASSED))
    return (
        f"fedforest uses private internals of NVIDIA FLARE verified on "
        f"{', '.join(VERIFIED_FLARE)}; the installed FLARE is {version}. Check them with "
        f"`{CANARY}` (it names each one that moved) and the FLARE runs of tests/flare, then add "
        f"the version to VERIFIED_FLARE in src/fedforest/flare/_compat.py. The internals: "
        f"{listed}"
    )


#: This process's check of the installed FLARE: its message ("" when verified), once known.
_checked: list[str] = []


def check_version() -> str | None:
    """Warn once per process when the installed FLARE is not in :data:`VERIFIED_FLARE`.

    Returns the warning (``None`` on a verified version). The version is read
    once per process (reading a package's metadata takes milliseconds, and every
    internal is checked through here when it is used).
    """
    if _checked:
        return _checked[0] or None
    message = unverified_message()
    if message:
        logger.warning(message)
    _checked.append(message or "")
    return message


def _moved(internal: Internal, what: str) -> FlareCompatError:
    return FlareCompatError(
        f"NVIDIA FLARE {flare_version()}: {what}; fedforest needs {internal.attribute} of "
        f"{internal.module} for {internal.used_by} ({internal.why}). It was verified on FLARE "
        f"{', '.join(VERIFIED_FLARE)}; run `{CANARY}` to see every internal that moved"
    )


def _internal(module: str, attribute: str) -> Internal:
    for internal in (*INTERNALS, *SUBCLASSED):
        if internal.module == module and internal.attribute == attribute:
            return internal
    raise KeyError(f"{module}.{attribute} is not in INTERNALS")


def resolve(internal: Internal):
    """The object ``internal`` names, imported now; :class:`FlareCompatError` if it moved."""
    check_version()
    try:
        value = importlib.import_module(internal.module)
    except ImportError as err:
        raise _moved(internal, f"module {internal.module} cannot be imported ({err})") from err
    path = internal.module
    for part in internal.attribute.split("."):
        if not hasattr(value, part):
            raise _moved(internal, f"{path} has no attribute {part!r}")
        value = getattr(value, part)
        path = f"{path}.{part}"
    return value


def _get(module: str, attribute: str):
    return resolve(_internal(module, attribute))


def _method(obj, module: str, attribute: str):
    """``obj``'s bound method named by ``attribute`` (``Class.method``), checked first."""
    _get(module, attribute)
    return getattr(obj, attribute.rsplit(".", 1)[-1])


# ------------------------------------------------------------------ the canary
def probe(internal: Internal) -> list[str]:
    """What moved of ``internal`` on the installed FLARE (empty: all as fedforest expects).

    The module is imported; where it needs a package FLARE does not require
    (``mlflow`` for the MLflow receiver), its source is read instead. Each
    problem names the attribute, the module and the FLARE version.
    """
    version = flare_version()
    where = f"{internal.attribute} of {internal.module} (FLARE {version})"
    try:
        value = resolve(internal)
    except FlareCompatError as err:
        cause = err.__cause__
        if not isinstance(cause, ModuleNotFoundError) or (cause.name or "").startswith("nvflare"):
            return [str(err)]
        return _probe_source(internal, where, f"{cause.name} is not installed")
    problems = []
    if internal.parameters is not None:
        try:
            params = inspect.signature(value).parameters.values()
        except (TypeError, ValueError) as err:
            return [f"{where}: its signature cannot be read ({err})"]
        names = tuple(p.name for p in params)
        variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        defaults = tuple(
            p.default is not inspect.Parameter.empty or p.kind in variadic for p in params
        )
        problem = _param_problem(internal, names, defaults)
        if problem:
            problems.append(f"{where}: {problem}")
    if internal.attributes:
        owner = value if inspect.isclass(value) else _owner_class(internal)
        missing = [a for a in internal.attributes if a not in _init_attributes(owner)]
        if missing:
            problems.append(
                f"{where}: {owner.__name__}.__init__ no longer sets {', '.join(missing)}"
            )
    return problems


def _param_problem(internal: Internal, names: tuple, defaults: tuple) -> str | None:
    """What no longer fits fedforest's calls in parameters ``names`` (``None``: they fit)."""
    expected = internal.parameters or ()
    if internal.keywords:
        missing = [n for n in expected if n not in names]
        if missing:
            return f"parameters are {names}; fedforest passes {', '.join(missing)} by name"
        return None
    later = zip(names[len(expected) :], defaults[len(expected) :], strict=True)
    extra = [n for n, optional in later if not optional]
    if names[: len(expected)] != expected or extra:
        return f"parameters are {names}; fedforest relies on {expected} (any others optional)"
    return None


def _owner_class(internal: Internal):
    module = importlib.import_module(internal.module)
    return getattr(module, internal.attribute.split(".")[0])


def _init_attributes(cls) -> set[str]:
    """The ``self.<name>`` assignments in the ``__init__`` of ``cls`` and its bases."""
    found: set[str] = set()
    for klass in inspect.getmro(cls):
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        try:
            source = inspect.getsource(init)
        except (OSError, TypeError):
            continue
        found |= _assigned(ast.parse(textwrap.dedent(source)))
    return found


def _assigned(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            ):
                names.add(target.attr)
    return names


def _probe_source(internal: Internal, where: str, reason: str) -> list[str]:
    """:func:`probe` from the module's source, for a module that cannot be imported here."""
    spec = importlib.util.find_spec(internal.module)
    if spec is None or not spec.origin or not Path(spec.origin).is_file():
        return [f"{where}: module {internal.module} is not there"]
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    class_name, _, member = internal.attribute.partition(".")
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    if class_name not in classes:
        return [
            f"{where}: {internal.module} defines no class {class_name} (read from source; {reason})"
        ]
    cls = classes[class_name]
    functions = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
    problems = []
    if member:
        if member not in functions:
            return [f"{where}: {class_name} has no method {member} (read from source; {reason})"]
        args = functions[member].args
        names = tuple(a.arg for a in args.args)
        defaults = (False,) * (len(names) - len(args.defaults)) + (True,) * len(args.defaults)
        problem = _param_problem(internal, names, defaults)
        if problem:
            problems.append(f"{where}: {problem} (read from source; {reason})")
    if internal.attributes:
        init = functions.get("__init__")
        missing = [a for a in internal.attributes if init is None or a not in _assigned(init)]
        if missing:
            problems.append(
                f"{where}: {class_name}.__init__ no longer sets {', '.join(missing)} "
                f"(read from source; {reason})"
            )
    return problems


# ------------------------------------------------------------ the simulator
def site_files_runner(files: Mapping[str, Mapping[str, str]], **kwargs):
    """FLARE's ``SimulatorRunner`` that writes each participant's own ``local/`` files.

    ``files`` is ``{participant: {file name: text}}``; ``kwargs`` are the
    runner's (``job_folder``, ``workspace``, ``clients``, ``threads``); the log
    configuration is the one ``nvflare simulator`` gives (``FL_LOG_LEVEL``,
    else concise).
    """
    runner_class = _get(_SIM, "SimulatorRunner")
    _get(_SIM, "SimulatorRunner._setup_local_startup")
    log_level = _get("nvflare.fuel.utils.log_utils", "FL_LOG_LEVEL")
    concise = _get("nvflare.fuel.utils.log_utils", "LogMode.CONCISE")

    class SiteFilesRunner(runner_class):
        def _setup_local_startup(self, log_config_file_path, workspace):
            super()._setup_local_startup(log_config_file_path, workspace)
            local = Path(workspace) / "local"
            for name, text in files.get(Path(workspace).name, {}).items():
                (local / name).write_text(text, encoding="utf-8")

    return SiteFilesRunner(log_config=os.environ.get(log_level, concise), **kwargs)


def ensure_default_component_policy(workspace) -> None:
    """What ``SimEnv.deploy`` does first: FLARE's default class allow-list in ``workspace``."""
    _get("nvflare.recipe.sim_env", "SimEnv._ensure_default_component_policy")(str(workspace))


# ---------------------------------------------------------------------- POC
def poc_running(env) -> bool:
    """Whether the POC services of ``env`` (a ``PocEnv``) are running."""
    return _method(env, "nvflare.recipe.poc_env", "PocEnv._check_poc_running")()


def poc_prepare(env) -> None:
    """Prepare a fresh POC for ``env``'s clients, as ``PocEnv.deploy`` does."""
    _get(_POC, "prepare_poc_provision")(
        clients=env.clients or [],
        number_of_clients=env.num_clients,
        workspace=env.poc_workspace,
        docker_image=env.docker_image,
        use_he=env.use_he,
        project_conf_path=env.project_conf_path,
        examples_dir=None,
    )


def poc_start(env) -> None:
    """Start ``env``'s POC services (server and sites, no admin console), as ``PocEnv.deploy``."""
    _get(_POC, "_start_poc")(
        poc_workspace=env.poc_workspace,
        gpu_ids=env.gpu_ids,
        excluded=[env.username],
        services_list=[],
    )


def poc_prod_dir(workspace) -> Path:
    """The kit folder of the POC in ``workspace`` (``<workspace>/<project>/prod_NN``)."""
    return Path(_get(_POC, "get_prod_dir")(str(workspace)))


def poc_admin_kit(env) -> str:
    """The POC admin's startup kit folder of ``env``."""
    return _method(env, "nvflare.recipe.poc_env", "PocEnv._get_admin_startup_kit_path")()


def poc_submit(env, job) -> str:
    """Submit ``job`` with ``env``'s admin session, as ``PocEnv.deploy`` ends; the job id."""
    manager = _method(env, "nvflare.recipe.poc_env", "PocEnv._get_session_manager")()
    return _method(manager, "nvflare.recipe.session_mgr", "SessionManager.submit_job")(job)


# ------------------------------------------------------------------- MLflow
def mlflow_add_run(receiver, site: str, fl_ctx) -> None:
    """Open an MLflow run and a record buffer for ``site`` in FLARE's ``MLflowReceiver``.

    What ``MLflowReceiver.initialize`` does for each client, for one more
    participant (the server, whose own records the receiver then keeps).
    """
    from nvflare.apis.analytix import TrackConst

    setup = _method(receiver, _MLFLOW, "MLflowReceiver._mlflow_setup")
    location = _method(receiver, _MLFLOW, "MLflowReceiver._get_artifact_location")
    tags = _method(receiver, _MLFLOW, "MLflowReceiver._get_tags")
    init_buffer = _method(receiver, _MLFLOW, "MLflowReceiver._init_buffer")
    setup(
        location(receiver.artifact_location, fl_ctx),
        receiver.kw_args.get(TrackConst.EXPERIMENT_NAME, "FLARE FL Experiment"),
        tags(TrackConst.EXPERIMENT_TAGS, kwargs=receiver.kw_args),
        [site],
        fl_ctx,
    )
    init_buffer([site])


def mlflow_has_run(receiver, site: str) -> bool:
    """Whether FLARE's ``MLflowReceiver`` keeps records of ``site`` (its ``buffer``)."""
    return site in receiver.buffer


# ------------------------------------------------------------------ recipes
def recipe_export_args() -> tuple[bool, str | None]:
    """FLARE's recipe flags of this process: ``(--export given, --export-dir)``.

    ``nvflare.recipe.spec`` takes them out of ``sys.argv`` when it is imported,
    so a job script's own parser never sees them.
    """
    export, export_dir = _get("nvflare.recipe.spec", "_peek_recipe_args")()
    return bool(export), export_dir


# ----------------------------------------------------------- privacy scopes
def scope_result_filters(scope) -> dict | None:
    """The ``task_result_filters`` of a FLARE privacy scope (``{direction: [filters]}``).

    ``scope`` is what FLARE's client runtime puts in the run's context
    (``FLContextKey.SCOPE_OBJECT``, an ``nvflare.private.privacy_manager.Scope``);
    ``None`` when there is none (the simulator) or it is of another kind.
    """
    if scope is None:
        return None
    chains = getattr(scope, "task_result_filters", None)
    return chains if isinstance(chains, dict) else None


def new_scope():
    """An empty FLARE privacy scope (``nvflare.private.privacy_manager.Scope``; tests)."""
    return _get("nvflare.private.privacy_manager", "Scope")()


def feature_election_votes(controller, replies: Mapping) -> dict:
    """The votes FLARE's ``FeatureElectionController`` reads from its clients' replies (tests).

    ``replies`` is ``{client: Shareable}`` as its executors return them; the
    result is what its ``aggregate_selections`` takes.
    """
    module = "nvflare.app_opt.feature_election.controller"
    return _method(controller, module, "FeatureElectionController._extract_client_data")(
        dict(replies)
    )


def job_scope_properties(workspace, job_id: str) -> dict:
    """The context properties FLARE's client runtime makes for a job: its privacy scope.

    ``create_job_processing_context_properties`` of ``nvflare.private``; the
    simulator leaves this step out (tests apply it there).
    """
    make = _get("nvflare.private.fed.utils.fed_utils", "create_job_processing_context_properties")
    return make(workspace, job_id)
