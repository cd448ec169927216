"""The site side of the fedforest job: receive a task, call the core, reply.

Tasks are dispatched by :meth:`fedforest.federation.site.SiteRunner.run_task`
through its table of handlers; the names of tasks and message keys come from
:mod:`fedforest.protocol`. With ``job.tracking`` on, the site's test metrics
also go to FLARE's experiment tracking after ``evaluate``
(:mod:`fedforest.flare.tracking`).
"""

from __future__ import annotations

import logging
import traceback
from pathlib import Path

from nvflare.apis.event_type import EventType
from nvflare.apis.executor import Executor
from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import Shareable, make_reply
from nvflare.apis.signal import Signal

from .. import protocol
from ..federation.config import LOCAL_OVERRIDE, SiteConfig
from ..federation.site import SiteRunner
from ..vocabulary import DEFAULT_VALIDATION, TASKS, VALIDATIONS
from .tracking import find_writer, site_metric_records, write_records

logger = logging.getLogger(__name__)


def start_site(
    fl_ctx: FLContext,
    site_config: str,
    task: str = "classification",
    validation: str = DEFAULT_VALIDATION,
) -> tuple[SiteRunner, Path]:
    """Load this site's configuration and table; return its runner and run folder.

    The site YAML is read from the app's config folder, with the site-owned
    ``local/fedforest.yaml`` applied (:data:`~fedforest.federation.config.LOCAL_OVERRIDE`);
    ``task`` and ``validation`` are the job's ``job.task`` and ``evaluation.validation``.

    Raises
    ------
    Exception
        Whatever keeps the site from starting (the message names the file and key).
    """
    site = fl_ctx.get_identity_name()
    workspace = fl_ctx.get_engine().get_workspace()
    job_id = fl_ctx.get_job_id()
    run_dir = Path(workspace.get_run_dir(job_id))
    path = Path(workspace.get_app_config_dir(job_id)) / site_config
    override = Path(workspace.get_file_path_in_site_config(LOCAL_OVERRIDE))
    config = SiteConfig.load(path, override=override, task=task, validation=validation)
    if f"(data_path from {override})" in config.source:
        logger.info("site %s: data path taken from its own %s", site, override)
    if config.local_privacy is not None:
        # the effective policy (this block and the job's) is logged by SiteRunner.load
        logger.info("site %s: privacy policy of its own in %s", site, override)
    if config.site != site:
        raise ValueError(
            f"{config.source}: key 'site' is {config.site!r} but this site is {site!r}"
        )
    return SiteRunner(config).load(), run_dir


class FedForestExecutor(Executor):
    """Serves the fedforest phases at one site.

    Parameters
    ----------
    site_config : str
        File name of the site YAML in the site app's config folder (the job
        builder ships ``site_configs/<site>.yaml`` there). A file
        ``fedforest.yaml`` in the site's own FLARE ``local/`` folder may set
        ``data_path`` (it takes precedence) and the hospital's own ``privacy``
        block (the stricter of it and the job's block applies, key by key).
    log_writer_id : str
        Id of the FLARE log writer component (``TBWriter`` or ``MLflowWriter``)
        the site's test metrics are written through after ``evaluate``; empty
        (the default, ``job.tracking: none``): no tracking.
    job_task : {"classification", "regression"}
        The job's ``job.task``: what the site's target column holds.
    job_validation : {"oob", "holdout"}
        The job's ``evaluation.validation``: what the site scores its choices on
        unless its YAML sets ``validation``.
    """

    def __init__(
        self,
        site_config: str = "fedforest_site.yaml",
        log_writer_id: str = "",
        job_task: str = "classification",
        job_validation: str = DEFAULT_VALIDATION,
    ):
        super().__init__()
        if job_task not in TASKS:
            raise ValueError(
                f"job_task={job_task!r} must be one of {list(TASKS)} (job.task); rebuild the job "
                "with `fedforest job build`"
            )
        if job_validation not in VALIDATIONS:
            raise ValueError(
                f"job_validation={job_validation!r} must be one of {list(VALIDATIONS)} "
                "(evaluation.validation); rebuild the job with `fedforest job build`"
            )
        if not isinstance(site_config, str) or not site_config:
            raise ValueError(
                f"site_config={site_config!r} must be the file name of the site YAML in the "
                "site app's config folder; rebuild the job with `fedforest job build`"
            )
        if not isinstance(log_writer_id, str):
            raise ValueError(
                f"log_writer_id={log_writer_id!r} must be the id of a log writer component "
                "(or empty for no tracking); rebuild the job with `fedforest job build`"
            )
        self.site_config = site_config
        self.log_writer_id = log_writer_id
        self.job_task = job_task
        self.job_validation = job_validation
        self.writer = None
        self.runner: SiteRunner | None = None
        self.startup_error: str | None = None
        self.run_dir: Path | None = None

    def handle_event(self, event_type: str, fl_ctx: FLContext) -> None:
        if event_type != EventType.START_RUN:
            return
        site = fl_ctx.get_identity_name()
        self.writer = find_writer(fl_ctx, self.log_writer_id, f"site {site}")
        try:
            self.runner, self.run_dir = start_site(
                fl_ctx, self.site_config, self.job_task, self.job_validation
            )
        except Exception as err:  # noqa: BLE001 - any start-up failure stops this site
            # Reply to every task with the reason instead of dying silently: the server
            # then names this site and the exact error, and goes on if min_sites allows.
            self.startup_error = f"{type(err).__name__}: {err}"
            logger.error("site %s cannot start: %s", site, self.startup_error)

    def execute(
        self, task_name: str, shareable: Shareable, fl_ctx: FLContext, abort_signal: Signal
    ) -> Shareable:
        site = fl_ctx.get_identity_name()
        if self.runner is None:
            return self._error(
                ReturnCode.EXECUTION_EXCEPTION, self.startup_error or "the site did not start"
            )
        if task_name not in protocol.TASKS:
            return self._error(ReturnCode.TASK_UNKNOWN, f"unknown task {task_name!r}")
        data = shareable.get(protocol.PAYLOAD)
        if not isinstance(data, dict):
            return self._error(ReturnCode.BAD_TASK_DATA, f"task {task_name} carries no payload")
        try:
            payload = self.run_task(task_name, data)
        except Exception as err:  # noqa: BLE001 - reported to the server, which drops the site
            logger.error("site %s: task %s failed:\n%s", site, task_name, traceback.format_exc())
            return self._error(ReturnCode.EXECUTION_EXCEPTION, f"{type(err).__name__}: {err}")
        if task_name == protocol.EVALUATE and self.writer is not None:
            self._track_metrics(site, data, payload)
        reply = make_reply(ReturnCode.OK)
        reply[protocol.PAYLOAD] = payload
        return reply

    def run_task(self, task_name: str, data: dict):
        """Call the core for one task (the site's table of handlers)."""
        return self.runner.run_task(task_name, data, save_dir=self.run_dir)

    def _track_metrics(self, site: str, data: dict, payload: dict) -> None:
        """Write every metric of every strategy through the log writer (never fails the task)."""
        try:
            records = site_metric_records(site, payload["strategies"], data["metrics"])
            write_records(self.writer, records)
            logger.info("site %s: %d metrics sent to the experiment tracking", site, len(records))
        except Exception:  # noqa: BLE001 - tracking is a copy of the results, not the results
            logger.exception("site %s: the metrics could not be sent to the tracking", site)

    @staticmethod
    def _error(rc: str, message: str) -> Shareable:
        reply = make_reply(rc)
        reply[protocol.ERROR] = message
        return reply
