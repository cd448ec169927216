"""The server side of the fedforest job: the phase driver's exchange over FLARE.

:class:`FedForestController` runs :class:`fedforest.federation.driver.JobDriver`,
which owns the order of the phases, the task data, the drops, the
``min_sites`` checks, the deadline policy, the timings and the results (also
of a failed job). This module only moves payloads: :class:`FlareBroadcast`
sends each task as one FLARE broadcast to the live sites (one task per site
when the sites get data of their own: ``evaluation.trees_per_site``), polls the driver's
:class:`~fedforest.federation.driver.Deadline`, and hands back the replies,
the error replies and the sites that took the task. With ``job.tracking`` on,
the election (its tuning history and outcome) is also logged to FLARE's
experiment tracking (:mod:`fedforest.flare.tracking`), through the driver's
``on_elected`` hook. The driver's progress lines (one per round) go to
``progress.txt`` in the run folder (:class:`~fedforest.federation.progress.ProgressFile`),
which the command that started the job follows to show them on the console.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from nvflare.apis.client import Client
from nvflare.apis.controller_spec import TaskCompletionStatus
from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.impl.controller import Controller, Task
from nvflare.apis.shareable import Shareable
from nvflare.apis.signal import Signal

from .. import protocol
from ..errors import ConfigError
from ..federation.config import JobConfig
from ..federation.driver import Deadline, JobDriver, Replies, Request, seconds_text
from ..federation.progress import PROGRESS_FILE, ProgressFile
from ..federation.server import JobServer
from ..vocabulary import TRACKING
from .tracking import election_records, fire_records

logger = logging.getLogger(__name__)


class FedForestController(Controller):
    """Runs the fedforest phases.

    Parameters
    ----------
    job_config : str
        File name of the job YAML in the server app's config folder (the job
        builder ships ``site_configs/job.yaml`` there).
    task_check_period : float
        How often (seconds) task status is checked.
    tracking : str
        ``job.tracking``: with ``tensorboard`` or ``mlflow`` the election is
        also sent to the receiver in the server app as FLARE analytics
        events; ``none`` (the default): no tracking.
    """

    def __init__(
        self,
        job_config: str = "fedforest_job.yaml",
        task_check_period: float = 0.2,
        tracking: str = "none",
    ):
        super().__init__(task_check_period=task_check_period)
        if not isinstance(job_config, str) or not job_config:
            raise ValueError(
                f"job_config={job_config!r} must be the file name of the job YAML in the server "
                "app's config folder; rebuild the job with `fedforest job build`"
            )
        if tracking not in TRACKING:
            raise ValueError(
                f"tracking={tracking!r} must be one of {', '.join(TRACKING)}; rebuild the job "
                "with `fedforest job build`"
            )
        self.job_config = job_config
        self.task_check_period = task_check_period
        self.tracking = tracking
        self.server: JobServer | None = None
        self.run_dir: Path | None = None

    # -------------------------------------------------------------- lifecycle
    def start_controller(self, fl_ctx: FLContext) -> None:
        workspace = fl_ctx.get_engine().get_workspace()
        job_id = fl_ctx.get_job_id()
        self.run_dir = Path(workspace.get_run_dir(job_id))
        path = Path(workspace.get_app_config_dir(job_id)) / self.job_config
        try:
            config = JobConfig.load(path)
        except ConfigError as err:
            self.system_panic(f"fedforest: {err}", fl_ctx)
            return
        self.server = JobServer(config)
        logger.info(
            "fedforest job %r: sites %s, min_sites %d", config.name, config.sites, config.min_sites
        )

    def stop_controller(self, fl_ctx: FLContext) -> None:
        logger.info("fedforest controller stopped")

    def process_result_of_unknown_task(
        self,
        client: Client,
        task_name: str,
        client_task_id: str,
        result: Shareable,
        fl_ctx: FLContext,
    ) -> None:
        logger.info("late or unknown result for task %s from %s ignored", task_name, client.name)

    # ------------------------------------------------------------- the phases
    def control_flow(self, abort_signal: Signal, fl_ctx: FLContext) -> None:
        if self.server is None:
            return
        driver = JobDriver(
            self.server,
            FlareBroadcast(self, fl_ctx, abort_signal),
            run_dir=self.run_dir,
            on_elected=lambda rules: self._track_election(fl_ctx),
            progress=ProgressFile(self.run_dir / PROGRESS_FILE),
        )
        results = driver.run()
        if results.finished:
            logger.info("fedforest job finished; report: %s", self.run_dir / "report.md")
        else:
            self.system_panic(f"fedforest job failed: {results.error}", fl_ctx)

    def _track_election(self, fl_ctx: FLContext) -> None:
        """Log the tuning history and the outcome of the election (never fails the job)."""
        if self.tracking == "none":
            return
        server = self.server
        try:
            records = election_records(
                server.tuning.to_dict() if server.tuning else None,
                server.election.to_dict() if server.election else None,
                server.config.election.metric,
            )
            fire_records(self, fl_ctx, records, self.tracking)
            logger.info("election: %d records sent to the experiment tracking", len(records))
        except Exception:  # noqa: BLE001 - tracking is a copy of the results, not the results
            logger.exception("the election could not be sent to the experiment tracking")


class FlareBroadcast:
    """The driver's exchange in server mode: one FLARE broadcast per request.

    Each task goes with FLARE timeout 0 to the request's targets; the
    deadlines are the driver's (FLARE's task timeouts count whole seconds),
    polled at most every 0.05 s. The task is cancelled when the deadline
    closes the phase or the job is aborted (``RuntimeError``). A request whose
    sites get different data (:attr:`Request.site_data`: each site's own
    model under ``evaluation.trees_per_site``) goes as one task per site,
    since a FLARE broadcast sends every client the same copy; the tasks are
    waited for, closed and cancelled together.

    Parameters
    ----------
    controller : Controller
        The FLARE controller that broadcasts.
    fl_ctx : FLContext
    abort_signal : Signal
    """

    def __init__(self, controller: Controller, fl_ctx: FLContext, abort_signal: Signal):
        self.controller = controller
        self.fl_ctx = fl_ctx
        self.abort_signal = abort_signal
        self.period = min(getattr(controller, "task_check_period", 0.05), 0.05)

    def ask(self, request: Request) -> Replies:
        if self.abort_signal.triggered:
            raise RuntimeError("the job was aborted")
        targets = list(request.targets)
        logger.info(
            "phase %s: sent to %s (timeout %s)",
            request.task,
            targets,
            seconds_text(request.deadline.timeout),
        )
        if request.site_data is None:  # one broadcast: every site gets the same data
            batches = [(targets, request.data)]
        else:  # FLARE's broadcast sends one copy to all: one task per site instead
            batches = [([site], request.data_for(site)) for site in targets]
        tasks = []
        for sites, data in batches:
            shareable = Shareable()
            shareable[protocol.PAYLOAD] = data
            task = Task(name=request.task, data=shareable, timeout=0)
            self.controller.broadcast(
                task=task, fl_ctx=self.fl_ctx, targets=sites, min_responses=len(sites)
            )
            tasks.append(task)
        closed_by = self._wait(tasks, request.deadline)
        payloads, errors, took = {}, {}, set()
        for client_task in (ct for task in tasks for ct in task.client_tasks):
            site, result = client_task.client.name, client_task.result
            took.add(site)
            if result is None:
                continue
            rc = result.get_return_code()
            if rc != ReturnCode.OK:
                errors[site] = f"{rc}: {result.get(protocol.ERROR, 'no details')}"
            else:
                payloads[site] = result.get(protocol.PAYLOAD)
        return Replies(payloads=payloads, errors=errors, took=took, closed_by=closed_by)

    def _wait(self, tasks: list[Task], deadline: Deadline) -> str:
        """Poll the tasks until FLARE ends them all (``"all"``) or ``deadline`` closes them."""
        while any(task.completion_status is None for task in tasks):
            if self.abort_signal.triggered:
                self._cancel(tasks, TaskCompletionStatus.ABORTED)
                raise RuntimeError("the job was aborted")
            replied = sum(ct.result is not None for task in tasks for ct in task.client_tasks)
            closed = deadline.closes(replied)
            if closed is not None:
                status = (
                    TaskCompletionStatus.TIMEOUT
                    if closed == "timeout"
                    else TaskCompletionStatus.CANCELLED
                )
                self._cancel(tasks, status)
                return closed
            time.sleep(self.period)
        return "all"

    def _cancel(self, tasks: list[Task], status) -> None:
        for task in tasks:
            if task.completion_status is None:
                self.controller.cancel_task(task, status, self.fl_ctx)
