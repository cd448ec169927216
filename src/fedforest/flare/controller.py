"""The server side of the fedforest job: phases as broadcasts, logic in the core.

Phases: schema -> election (+ hill-climb tuning rounds) -> train -> pool &
broadcast -> evaluate. Each phase is one broadcast to the sites still alive,
with its own timeout; only OK replies with a payload are kept, every payload is
validated by :class:`fedforest.server.JobServer`, and a site that fails, sends
a malformed payload or misses the deadline is named in the results and left out
of later phases. The job stops with a clear message when fewer than
``min_sites`` sites remain.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from nvflare.apis.client import Client
from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.impl.controller import Controller, Task
from nvflare.apis.shareable import Shareable
from nvflare.apis.signal import Signal

from .. import protocol
from ..errors import ConfigError, PayloadError, SchemaError
from ..federation.config import JobConfig
from ..federation.server import JobServer

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
    """

    def __init__(self, job_config: str = "fedforest_job.yaml", task_check_period: float = 0.2):
        super().__init__(task_check_period=task_check_period)
        if not isinstance(job_config, str) or not job_config:
            raise ValueError(
                f"job_config={job_config!r} must be the file name of the job YAML in the server "
                "app's config folder; rebuild the job with `fedforest job build`"
            )
        self.job_config = job_config
        self.task_check_period = task_check_period
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
        server, config = self.server, self.server.config
        metrics: dict = {}
        model = None
        try:
            replies = self._phase(protocol.SCHEMA, {"seed": config.seed}, fl_ctx, abort_signal)
            schema = self._timed("schema", lambda: server.build_schema(replies))
            vote_on = config.election["enabled"]
            replies = self._phase(
                protocol.VOTE, {"schema": schema, "vote": vote_on}, fl_ctx, abort_signal
            )
            if vote_on:
                ballot = server.read_votes(replies)

                def score(features: list[str]) -> float:
                    scored = self._phase(
                        protocol.SCORE_MASK,
                        {"features": list(features), "metric": config.election["metric"]},
                        fl_ctx,
                        abort_signal,
                    )
                    return server.score_replies(scored)

                elected = self._timed("election", lambda: server.elect(ballot, score))
            else:
                elected = list(server.schema.features)
            want_inter = "intersection" in config.strategies
            replies = self._phase(
                protocol.TRAIN,
                {
                    "elected": elected,
                    "forest": config.forest,
                    "surrogates": config.surrogates,
                    "intersection": want_inter,
                },
                fl_ctx,
                abort_signal,
            )
            model = self._timed("pool", lambda: server.pool(replies, want_inter))
            replies = self._phase(
                protocol.EVALUATE,
                {
                    "model": model,
                    "strategies": config.strategies,
                    "voting": config.voting,
                    "depth_threshold": config.depth_threshold,
                    "metrics": config.metrics,
                    "auto_metric": config.auto_metric,
                },
                fl_ctx,
                abort_signal,
            )
            metrics = server.read_metrics(replies)
            server.check_min_sites(list(metrics), "evaluate")
            server.write_results(self.run_dir, metrics, model)
            logger.info("fedforest job finished; report: %s", self.run_dir / "report.md")
        except (RuntimeError, SchemaError, PayloadError, ValueError) as err:
            message = f"fedforest job failed: {err}"
            logger.error(message)
            server.write_results(self.run_dir, metrics, model, status="failed", error=str(err))
            self.system_panic(message, fl_ctx)

    # ---------------------------------------------------------------- helpers
    def _timed(self, name: str, fn):
        """Run ``fn`` and add its wall time to phase ``name``."""
        start = time.monotonic()
        try:
            return fn()
        finally:
            timings = self.server.timings
            timings[name] = timings.get(name, 0.0) + time.monotonic() - start

    def _phase(
        self,
        task_name: str,
        data: dict,
        fl_ctx: FLContext,
        abort_signal: Signal,
    ) -> dict:
        """Broadcast one task to the live sites; return {site: payload} of good replies."""
        server, config = self.server, self.server.config
        alive = server.alive(config.sites)
        server.check_min_sites(alive, task_name)
        if abort_signal.triggered:
            raise RuntimeError("the job was aborted")
        phase = protocol.TASK_PHASE[task_name]
        timeout = config.timeouts[phase]
        shareable = Shareable()
        shareable[protocol.PAYLOAD] = protocol.task_data(task_name, **data)
        task = Task(name=task_name, data=shareable, timeout=int(timeout))
        logger.info("phase %s: sent to %s (timeout %s s)", task_name, alive, int(timeout) or "none")
        start = time.monotonic()
        self.broadcast_and_wait(
            task=task,
            fl_ctx=fl_ctx,
            targets=alive,
            min_responses=min(config.min_sites, len(alive)),
            wait_time_after_min_received=int(config.wait_after_min),
            abort_signal=abort_signal,
        )
        spent = time.monotonic() - start
        key = phase if task_name == protocol.SCORE_MASK else task_name
        server.timings[key] = server.timings.get(key, 0.0) + spent
        good: dict = {}
        answered = set()
        for client_task in task.client_tasks:
            site = client_task.client.name
            answered.add(site)
            result = client_task.result
            if result is None:
                server.drop(
                    site,
                    task_name,
                    f"no reply (timed out after {int(timeout)} s, or the site stopped)",
                )
                continue
            rc = result.get_return_code()
            if rc != ReturnCode.OK:
                server.drop(site, task_name, f"{rc}: {result.get(protocol.ERROR, 'no details')}")
                continue
            payload = result.get(protocol.PAYLOAD)
            if payload is None:
                server.drop(site, task_name, "the reply carries no payload")
                continue
            good[site] = payload
        for site in alive:
            if site not in answered:
                server.drop(site, task_name, "never took the task")
        logger.info(
            "phase %s: %d of %d sites replied in %.1f s", task_name, len(good), len(alive), spent
        )
        server.check_min_sites(list(good), task_name)
        return dict(sorted(good.items()))  # by site name: results must not depend on timing
