"""Swarm mode on NVIDIA FLARE's client-controlled workflow (``nvflare.app_common.ccwf``).

``job.mode: swarm`` builds the job with these two classes instead of the
server-mode controller and executor:

* :class:`FedForestSwarmController` (server) is FLARE's
  ``ServerSideController``: it configures the sites (the ``<prefix>_config``
  task), starts no site in particular (every site starts when configured: no
  leader), and watches: the sites' status reports and a status task
  (``<prefix>_report``) whose replies carry only a
  :data:`~fedforest.protocol.SWARM_STATUS` (state, phase, the sites left out,
  the pooled model's digest, timings and, if the site allows it, its final
  metrics). It writes ``results.json`` and ``report.md`` from them
  (:func:`~fedforest.federation.swarm.swarm_results`); no
  schema, vote, tree, imputer or standard deviation reaches it.
* :class:`FedForestSwarmExecutor` (site) is an ``Executor`` and a FLARE
  ``TaskController``, as ccwf's ``ClientSideController`` is: once configured it
  runs :class:`~fedforest.federation.swarm.SwarmSite` in a thread, which sends
  its payloads to the other sites as ``<prefix>_share`` tasks
  (``broadcast_and_wait`` from the site) and receives theirs in its mailbox.

Peer messages travel through FLARE's cell network, relayed by the server's
process when sites have no direct connection. With ``private_p2p`` (the
default) in secure mode (a provisioned deployment, and FLARE 2.9's POC mode),
FLARE encrypts them end to end between each pair of sites, so the relay
forwards bytes it cannot read. The simulator is not secure mode: there they
are not encrypted end to end. Each site logs and reports which applies.

**A hospital's privacy scope.** FLARE applies a scope's task-result filters
to a site's replies: in swarm mode its answers to the server (configuration,
status) and to the other sites (acknowledgements), never the payloads it sends
to the other sites, which leave as the data of its own peer tasks. So the site
applies them itself: at start it takes every
:class:`~fedforest.flare.privacy_filter.PrivacyPolicyFilter` of its job's
scope (``local/privacy.json``), and passes every payload it computes (schema,
vote, mask scores, trees, and its evaluation) through each of them, as FLARE
passes a server-mode reply, before anything of it leaves. A payload a filter
refuses is not sent: the site tells the others the reason and stops. The
status replies go through the same filters in FLARE (test metrics a filter
would refuse are withheld from the status).

ccwf's ``ClientSideController`` itself is built around a persistor, a
shareable generator and a learner of model weights, which a pooled forest
does not have; the site class implements the same protocol (configure task,
status reports, end-workflow message) around the fedforest core instead.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from nvflare.apis.event_type import EventType
from nvflare.apis.executor import Executor
from nvflare.apis.fl_constant import FilterKey, FLContextKey, ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.impl.task_controller import Task, TaskController
from nvflare.apis.shareable import Shareable, make_reply
from nvflare.apis.signal import Signal
from nvflare.app_common.ccwf.common import Constant, StatusReport, topic_for_end_workflow
from nvflare.app_common.ccwf.server_ctl import ServerSideController
from nvflare.fuel.utils.validation_utils import DefaultValuePolicy

from .. import protocol
from ..errors import ConfigError, PayloadError
from ..federation.config import JobConfig
from ..federation.messages import read_message
from ..federation.progress import PROGRESS_FILE, ProgressFile, end_line, swarm_status_line
from ..federation.results import write_results_files
from ..federation.swarm import Mailbox, SwarmSite, job_digest, swarm_results
from ..privacy.outgoing import Refusal
from . import _compat
from .executor import start_site
from .privacy_filter import PrivacyPolicyFilter, policy_filters

logger = logging.getLogger(__name__)

#: Seconds between two status requests of the server.
STATUS_INTERVAL = 0.5
#: A site that answers no status request for this long is taken as gone.
SILENT_SECONDS = 120.0
#: The config key carrying the digest of the server's job settings.
JOB_DIGEST_KEY = "fedforest.job_digest"
#: Why a site of the job that was not connected when the job started is left out.
NOT_CONNECTED = "it was not connected when the job started"


class FedForestSwarmController(ServerSideController):
    """The server's side of a swarm job: configure, start, watch; never the payloads.

    Parameters
    ----------
    job_config : str
        File name of the job YAML in the server app's config folder.
    participating_clients : list of str
        The job's sites (``job.sites``).
    min_clients : int
        ``job.min_sites``.
    configure_task_timeout : int
        How long (seconds) every site has to take its configuration
        (``job.timeouts.schema``); a site configured later takes no part.
    task_check_period : float
        How often (seconds) task status is checked.
    silent_seconds : float
        A site that answers no status request for this long is taken as gone.
    """

    def __init__(
        self,
        job_config: str = "fedforest_job.yaml",
        participating_clients: list[str] | None = None,
        min_clients: int = 0,
        configure_task_timeout: int = 300,
        task_check_period: float = 0.2,
        silent_seconds: float = SILENT_SECONDS,
    ):
        if not isinstance(job_config, str) or not job_config:
            raise ValueError(
                f"job_config={job_config!r} must be the file name of the job YAML in the server "
                "app's config folder; rebuild the job with `fedforest job build`"
            )
        if not isinstance(participating_clients, list) or len(participating_clients) < 2:
            raise ValueError(
                f"participating_clients={participating_clients!r} must list the job's sites "
                "(at least two); rebuild the job with `fedforest job build`"
            )
        if isinstance(silent_seconds, bool) or not isinstance(silent_seconds, (int, float)):
            raise ValueError(f"silent_seconds={silent_seconds!r} must be a number of seconds")
        super().__init__(
            task_name_prefix=protocol.SWARM_TASK_PREFIX,
            participating_clients=participating_clients,
            starting_client="",
            starting_client_policy=DefaultValuePolicy.EMPTY,
            result_clients_policy=DefaultValuePolicy.EMPTY,
            min_clients=min_clients,
            configure_task_timeout=configure_task_timeout,
            task_check_period=task_check_period,
            job_status_check_interval=task_check_period,
        )
        self.job_config = job_config
        self.task_check_period = task_check_period
        self.silent_seconds = float(silent_seconds)
        self.job: JobConfig | None = None
        self.run_dir: Path | None = None
        self.statuses: dict[str, dict] = {}
        #: Sites of the job not connected when it started (left out).
        self.absent: list[str] = []
        self._finished = False

    def start_controller(self, fl_ctx: FLContext) -> None:
        # a site not connected when the job starts is not in the run: leave it out and name
        # it (ccwf would refuse the whole job), as server mode drops a site that never replies
        connected = {c.name for c in fl_ctx.get_engine().get_clients()}
        self.absent = [s for s in self.participating_clients if s not in connected]
        if self.absent:
            logger.warning("sites not connected when the job started, left out: %s", self.absent)
            self.participating_clients = [s for s in self.participating_clients if s in connected]
            if len(self.participating_clients) < max(2, self.min_clients):
                self.system_panic(
                    f"fedforest: only {self.participating_clients} of the job's sites are "
                    f"connected; not connected: {self.absent}; min_sites is {self.min_clients}",
                    fl_ctx,
                )
                return
        super().start_controller(fl_ctx)
        workspace = fl_ctx.get_engine().get_workspace()
        job_id = fl_ctx.get_job_id()
        self.run_dir = Path(workspace.get_run_dir(job_id))
        try:
            self.job = JobConfig.load(Path(workspace.get_app_config_dir(job_id)) / self.job_config)
        except ConfigError as err:
            self.system_panic(f"fedforest: {err}", fl_ctx)
            return
        logger.info(
            "fedforest swarm job %r: sites %s, min_sites %d; the server only configures, "
            "starts and watches",
            self.job.name,
            self.job.sites,
            self.job.min_sites,
        )

    def broadcast_and_wait(
        self,
        task,
        fl_ctx,
        targets=None,
        min_responses=1,
        wait_time_after_min_received=0,
        abort_signal=None,
    ):
        if task.name == self.configure_task_name and targets:
            # ccwf closes the configuration once min_clients replied, and a site that had
            # not yet asked for it would never start; every site gets it, up to the timeout
            min_responses = len(targets)
        return super().broadcast_and_wait(
            task=task,
            fl_ctx=fl_ctx,
            targets=targets,
            min_responses=min_responses,
            wait_time_after_min_received=wait_time_after_min_received,
            abort_signal=abort_signal,
        )

    def prepare_config(self) -> dict:
        return {JOB_DIGEST_KEY: job_digest(self.job)} if self.job else {}

    def sub_flow(self, abort_signal: Signal, fl_ctx: FLContext) -> None:
        """Ask the sites for their status until each has finished, failed or gone silent."""
        if self.job is None:
            return
        job = self.job
        last_seen = {s: time.monotonic() for s in self.participating_clients}
        final: set[str] = set()
        for site in self.absent:
            self.statuses[site] = {"state": "failed", "error": NOT_CONNECTED}
        for site, status in self.client_statuses.items():
            if not status.ready_time:  # not configured: it never started the swarm job
                self.statuses[site] = {
                    "state": "failed",
                    "error": "it did not take its configuration within "
                    f"{self.configure_task_timeout} s",
                }
                final.add(site)
        shown: dict[str, tuple] = {}
        progress = ProgressFile(self.run_dir / PROGRESS_FILE)
        try:
            while not abort_signal.triggered:
                pending = [s for s in self.participating_clients if s not in final]
                if not pending:
                    break
                task = Task(name=protocol.SWARM_REPORT, data=Shareable(), timeout=10)
                self.broadcast_and_wait(
                    task=task,
                    fl_ctx=fl_ctx,
                    targets=pending,
                    min_responses=len(pending),
                    abort_signal=abort_signal,
                )
                now = time.monotonic()
                for client_task in task.client_tasks:
                    site, result = client_task.client.name, client_task.result
                    if result is None or result.get_return_code() != ReturnCode.OK:
                        continue
                    try:
                        status = read_message(
                            result.get(protocol.PAYLOAD),
                            site,
                            protocol.SWARM_STATUS,
                            sites=job.sites,
                            strategies=job.strategies,
                            metrics=job.metrics,
                        )
                    except PayloadError as err:
                        logger.warning("site %s: status refused: %s", site, err)
                        continue
                    last_seen[site] = now
                    self.statuses[site] = status
                    if shown.get(site) != (status["state"], status["phase"]):
                        shown[site] = (status["state"], status["phase"])
                        logger.info("site %s: %s (%s)", site, status["state"], status["phase"])
                        progress(swarm_status_line(site, status))
                    if status["state"] in ("finished", "failed"):
                        final.add(site)
                for site in pending:
                    if site not in final and now - last_seen[site] > self.silent_seconds:
                        self.statuses[site] = {
                            "state": "failed",
                            "error": f"it answered no status request for {self.silent_seconds:g} s",
                        }
                        final.add(site)
                time.sleep(STATUS_INTERVAL)
            if abort_signal.triggered:
                raise RuntimeError("the job was aborted")
            results = swarm_results(job, self.statuses)
        except Exception as err:  # noqa: BLE001 - the results say what went wrong
            results = swarm_results(job, self.statuses, error=f"{type(err).__name__}: {err}")
        write_results_files(self.run_dir, results)
        logger.info("swarm results written to %s", self.run_dir)
        progress(end_line(results.status, results.error))
        self._finished = True
        if not results.finished:
            self.system_panic(f"fedforest swarm job failed: {results.error}", fl_ctx)

    def is_sub_flow_done(self, fl_ctx: FLContext) -> bool:
        return self._finished


class FedForestSwarmExecutor(Executor, TaskController):
    """One site of a swarm job (see the module docstring).

    Parameters
    ----------
    site_config : str
        File name of the site YAML in the site app's config folder.
    job_config : str
        File name of the job YAML in the site app's config folder (every site
        has the job's settings and checks that the others run the same).
    """

    def __init__(
        self, site_config: str = "fedforest_site.yaml", job_config: str = "fedforest_job.yaml"
    ):
        Executor.__init__(self)
        TaskController.__init__(self)
        for name, value in (("site_config", site_config), ("job_config", job_config)):
            if not isinstance(value, str) or not value:
                raise ValueError(
                    f"{name}={value!r} must be a file name in the site app's config folder; "
                    "rebuild the job with `fedforest job build`"
                )
        self.site_config = site_config
        self.job_config = job_config
        self.runner = None
        self.swarm: SwarmSite | None = None
        self.mailbox: Mailbox | None = None
        self.engine = None
        self.workflow_id: str | None = None
        self.private_p2p = True
        self.scope_filters: list[PrivacyPolicyFilter] = []
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ lifecycle
    def handle_event(self, event_type: str, fl_ctx: FLContext) -> None:
        if event_type == EventType.START_RUN:
            self.start_controller(fl_ctx)  # TaskController: the app's filters
            self._start(fl_ctx)
        elif event_type == EventType.BEFORE_PULL_TASK:
            self._add_status_report(fl_ctx)
        elif event_type in (EventType.ABOUT_TO_END_RUN, EventType.END_RUN):
            if self.swarm is not None:
                self.swarm.abort.set()

    def _start(self, fl_ctx: FLContext) -> None:
        site = fl_ctx.get_identity_name()
        self.engine = fl_ctx.get_engine()
        workspace = self.engine.get_workspace()
        job_id = fl_ctx.get_job_id()
        run_dir = Path(workspace.get_run_dir(job_id))
        try:
            job = JobConfig.load(Path(workspace.get_app_config_dir(job_id)) / self.job_config)
        except ConfigError as err:
            self.system_panic(f"fedforest: {err}", fl_ctx)
            return
        startup_error = None
        report = True
        try:
            runner, _ = start_site(fl_ctx, self.site_config, job.task, job.validation)
            self.runner, report = runner, runner.config.report_metrics
        except Exception as err:  # noqa: BLE001 - the other sites are told why, then it stops
            startup_error = f"{type(err).__name__}: {err}"
            logger.error("site %s cannot start: %s", site, startup_error)
        self.scope_filters = scope_policy_filters(fl_ctx)
        tasks = self
        if self.scope_filters:
            tasks = ScopeFilteredTasks(self, site, self.scope_filters)
            logger.info(
                "site %s: every payload it sends goes through the %d fedforest privacy filter(s) "
                "of its privacy scope %r (policy %s)",
                site,
                len(self.scope_filters),
                fl_ctx.get_prop(FLContextKey.EFFECTIVE_JOB_SCOPE_NAME),
                "; ".join(str(f.policy.to_dict()) for f in self.scope_filters),
            )
        self.mailbox = Mailbox(site, job.sites, job_digest(job))
        self.swarm = SwarmSite(
            job,
            site,
            tasks if self.runner is not None else None,
            self,
            self.mailbox,
            report_metrics=report,
            save_dir=run_dir,
            startup_error=startup_error,
        )
        if not report:
            logger.info("site %s: its metrics stay here (report_metrics: false)", site)

    def run_task(self, task_name: str, data: dict, save_dir=None) -> dict:
        """Call the core for one task of the job (tests override it to rehearse faults)."""
        return self.runner.run_task(task_name, data, save_dir=save_dir)

    # --------------------------------------------------------------- tasks
    def execute(
        self, task_name: str, shareable: Shareable, fl_ctx: FLContext, abort_signal: Signal
    ) -> Shareable:
        if self.swarm is None:
            return _error(ReturnCode.EXECUTION_EXCEPTION, "the site did not start")
        if task_name == protocol.SWARM_SHARE:
            return self._receive(shareable, fl_ctx)
        if task_name == protocol.SWARM_REPORT:
            reply = make_reply(ReturnCode.OK)
            reply[protocol.PAYLOAD] = self.swarm.status()
            return reply
        if task_name == protocol.SWARM_CONFIG:
            return self._configure(shareable, fl_ctx)
        return _error(ReturnCode.TASK_UNKNOWN, f"unknown task {task_name!r}")

    def _configure(self, shareable: Shareable, fl_ctx: FLContext) -> Shareable:
        config = shareable.get(Constant.CONFIG)
        site = fl_ctx.get_identity_name()
        if not isinstance(config, dict) or not config.get(FLContextKey.WORKFLOW):
            return _error(ReturnCode.BAD_TASK_DATA, "the swarm configuration has no workflow id")
        clients = config.get(Constant.CLIENTS)
        if (
            not isinstance(clients, list)
            or site not in clients
            or not set(clients) <= set(self.swarm.job.sites)
        ):
            return _error(
                ReturnCode.BAD_TASK_DATA,
                f"the server configures the sites {clients}, but this site's job.yaml lists "
                f"{self.swarm.job.sites} (and this site is {site!r})",
            )
        if config.get(JOB_DIGEST_KEY) != self.swarm.digest:
            return _error(
                ReturnCode.BAD_TASK_DATA,
                "the server's job settings differ from this site's job.yaml; rebuild the job",
            )
        if self._thread is not None:
            return make_reply(ReturnCode.OK)  # configured already
        absent = [s for s in self.swarm.job.sites if s not in clients]
        if absent:
            self.swarm.leave_out(absent, NOT_CONNECTED)
        self.workflow_id = config[FLContextKey.WORKFLOW]
        self.private_p2p = bool(config.get(Constant.PRIVATE_P2P, True))
        secure_mode = bool(fl_ctx.get_prop(FLContextKey.SECURE_MODE, False))
        self.swarm.encrypted = self.private_p2p and secure_mode
        logger.info(
            "site %s: messages to the other sites are %s (secure mode %s, private_p2p %s)",
            site,
            "encrypted end to end" if self.swarm.encrypted else "not encrypted end to end",
            secure_mode,
            self.private_p2p,
        )
        self.engine.register_aux_message_handler(
            topic=topic_for_end_workflow(self.workflow_id),
            message_handle_func=self._end_workflow,
        )
        self._thread = threading.Thread(
            target=self.swarm.run, name=f"fedforest-swarm-{site}", daemon=True
        )
        self._thread.start()
        logger.info("site %s: configured; the swarm job starts", site)
        return make_reply(ReturnCode.OK)

    def _receive(self, shareable: Shareable, fl_ctx: FLContext) -> Shareable:
        peer = fl_ctx.get_peer_context()
        sender = peer.get_identity_name() if peer is not None else None
        reply = make_reply(ReturnCode.OK)
        try:
            self.mailbox.put(sender, shareable.get(protocol.PAYLOAD))
        except PayloadError as err:
            # an OK reply naming the refusal: FLARE turns every other return code of a
            # peer task into ERROR, and the sender must not retry a refused message
            logger.warning("site %s: %s", fl_ctx.get_identity_name(), err)
            reply[protocol.ERROR] = str(err)
        return reply

    def _end_workflow(self, topic: str, request: Shareable, fl_ctx: FLContext) -> Shareable:
        self.swarm.abort.set()
        return make_reply(ReturnCode.OK)

    def _add_status_report(self, fl_ctx: FLContext) -> None:
        """ccwf's status report (state and phase; never the payloads) on each task pull."""
        if not self.workflow_id or self.swarm is None:
            return
        reports = fl_ctx.get_prop(Constant.STATUS_REPORTS)
        if not reports:
            reports = {}
            fl_ctx.set_prop(Constant.STATUS_REPORTS, reports, sticky=False, private=False)
        # never an error here: ccwf's server stops the whole job on one site's error
        report = StatusReport(
            timestamp=time.time(),
            action=f"{self.swarm.state}: {self.swarm.phase}",
            all_done=False,
        )
        reports[self.workflow_id] = report.to_dict()

    def send(self, targets, message: dict, timeout: float) -> dict[str, str]:
        """Deliver one swarm message to other sites as a peer task (the site's transport)."""
        shareable = Shareable()
        shareable[protocol.PAYLOAD] = message
        with self.engine.new_context() as fl_ctx:
            secure = self.private_p2p and bool(fl_ctx.get_prop(FLContextKey.SECURE_MODE, False))
            task = Task(
                name=protocol.SWARM_SHARE,
                data=shareable,
                timeout=max(1, int(timeout)),
                secure=secure,
            )
            replies = self.broadcast_and_wait(
                task=task, fl_ctx=fl_ctx, targets=list(targets), min_responses=len(targets)
            )
        out = {}
        for target in targets:
            reply = replies.get(target)
            if not isinstance(reply, Shareable):
                out[target] = "unreachable"
                continue
            if reply.get_return_code(ReturnCode.OK) != ReturnCode.OK:
                out[target] = "unreachable"
            else:
                out[target] = "refused" if reply.get(protocol.ERROR) else "delivered"
        return out


class PrivacyRefusal(Exception):
    """A payload a privacy filter of the site's scope does not let leave (the reason)."""


def scope_policy_filters(fl_ctx: FLContext) -> list[PrivacyPolicyFilter]:
    """The fedforest privacy filters of this job's privacy scope (its outgoing results)."""
    chains = _compat.scope_result_filters(fl_ctx.get_prop(FLContextKey.SCOPE_OBJECT))
    if chains is None:
        return []
    return policy_filters(chains.get(FilterKey.OUT) or [])


class ScopeFilteredTasks:
    """A swarm site's tasks with every payload passed through its scope's privacy filters.

    What :class:`~fedforest.federation.swarm.SwarmSite` calls instead of the
    executor: the payload of each task is what the site would reply to a
    server, and each filter treats it as FLARE's filter chain treats that
    reply (:meth:`~fedforest.flare.privacy_filter.PrivacyPolicyFilter.filter_payload`).
    A refusal, or a failure of a filter, raises :class:`PrivacyRefusal`: the
    site sends the others the reason instead of the payload and stops.
    """

    def __init__(self, executor, site: str, filters):
        self.executor = executor
        self.site = site
        self.filters = list(filters)

    def run_task(self, task_name: str, data: dict, save_dir=None) -> dict:
        payload = self.executor.run_task(task_name, data, save_dir=save_dir)
        for f in self.filters:
            try:
                payload = f.filter_payload(payload, self.site, task_name)
            except Refusal as why:
                reason = f"privacy filter at {self.site} refused the {task_name!r} payload: {why}"
                logger.warning("%s (policy: %s)", reason, f.policy.source)
                raise PrivacyRefusal(reason) from None
            except Exception as err:  # noqa: BLE001 - nothing leaves when a filter fails
                logger.exception("privacy filter at %s failed on %r", self.site, task_name)
                raise PrivacyRefusal(
                    f"privacy filter at {self.site} refused the {task_name!r} payload: the "
                    f"filter failed ({type(err).__name__}), so nothing was sent"
                ) from None
        return payload


def _error(rc: str, message: str) -> Shareable:
    reply = make_reply(rc)
    reply[protocol.ERROR] = message
    return reply
