"""The server side of the fedforest job: phases as broadcasts, logic in the core.

Phases: schema -> election (+ hill-climb tuning rounds) -> train -> pool &
broadcast -> evaluate. Each phase is one broadcast to the sites still alive,
with its own timeout; only OK replies with a payload are kept, every payload is
validated by :class:`fedforest.server.JobServer`, and a site that fails, sends
a malformed payload or misses the deadline is named in the results and left out
of later phases. The job stops with a clear message when fewer than
``min_sites`` sites remain. With ``job.tracking`` on, the election (its tuning
history and outcome) is also logged to FLARE's experiment tracking
(:mod:`fedforest.flare.tracking`).
"""

from __future__ import annotations

import json
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
from ..errors import ConfigError, PayloadError, SchemaError
from ..federation.config import JobConfig
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
                self._track_election(fl_ctx)
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
        except Exception as err:  # noqa: BLE001 - whatever went wrong, the results say so
            expected = isinstance(err, (RuntimeError, SchemaError, PayloadError, ValueError))
            reason = str(err) if expected else f"{type(err).__name__}: {err}"
            logger.error("fedforest job failed: %s", reason, exc_info=not expected)
            self._write_failure(metrics, model, reason)
            self.system_panic(f"fedforest job failed: {reason}", fl_ctx)

    def _track_election(self, fl_ctx: FLContext) -> None:
        """Log the tuning history and the outcome of the election (never fails the job)."""
        if self.tracking == "none":
            return
        server = self.server
        try:
            records = election_records(
                server.tuning.to_dict() if server.tuning else None,
                server.election.to_dict() if server.election else None,
                server.config.election["metric"],
            )
            fire_records(self, fl_ctx, records, self.tracking)
            logger.info("election: %d records sent to the experiment tracking", len(records))
        except Exception:  # noqa: BLE001 - tracking is a copy of the results, not the results
            logger.exception("the election could not be sent to the experiment tracking")

    def _write_failure(self, metrics, model, reason: str) -> None:
        """Write results.json and report.md with ``status: failed``, whatever state the job is in."""
        try:
            self.server.write_results(self.run_dir, metrics, model, status="failed", error=reason)
        except Exception:  # noqa: BLE001 - the partial results themselves broke: write the reason
            logger.exception("the partial results could not be written; writing the reason only")
            self.run_dir.mkdir(parents=True, exist_ok=True)
            results = {
                "job": self.server.config.name,
                "status": "failed",
                "error": reason,
                "dropped_sites": dict(self.server.dropped),
            }
            (self.run_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
            (self.run_dir / "report.md").write_text(
                f"# fedforest job `{results['job']}`: failed\n\n**Error:** {reason}\n"
            )

    # ---------------------------------------------------------------- helpers
    def _wait(self, task, fl_ctx, abort_signal, start, timeout, n_targets) -> str:
        """Wait for a broadcast; return what closed it.

        By default every live site has the whole phase timeout. With
        ``wait_after_min`` set, the phase also closes that many seconds after
        ``min_sites`` sites replied. Returns ``"all"`` (every site replied, or
        FLARE ended the task), ``"timeout"`` or ``"wait_after_min"``.
        """
        config = self.server.config
        wait_after = config.wait_after_min
        enough = min(config.min_sites, n_targets)
        reached_min_at = None
        while task.completion_status is None:
            if abort_signal.triggered:
                self.cancel_task(task, TaskCompletionStatus.ABORTED, fl_ctx)
                raise RuntimeError("the job was aborted")
            now = time.monotonic()
            if timeout and now - start >= timeout:
                self.cancel_task(task, TaskCompletionStatus.TIMEOUT, fl_ctx)
                return "timeout"
            if wait_after is not None:
                replied = sum(ct.result is not None for ct in task.client_tasks)
                if reached_min_at is None and replied >= enough:
                    reached_min_at = now
                if reached_min_at is not None and now - reached_min_at >= wait_after:
                    self.cancel_task(task, TaskCompletionStatus.CANCELLED, fl_ctx)
                    return "wait_after_min"
            time.sleep(min(self.task_check_period, 0.05))
        return "all"

    def _timed(self, name: str, fn):
        """Run ``fn`` and add its wall time to phase ``name`` (:meth:`JobServer.timed`)."""
        return self.server.timed(name, fn)

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
        # the deadlines are kept here (FLARE's task timeouts count whole seconds)
        task = Task(name=task_name, data=shareable, timeout=0)
        logger.info("phase %s: sent to %s (timeout %s)", task_name, alive, _seconds(timeout))
        start = time.monotonic()
        self.broadcast(task=task, fl_ctx=fl_ctx, targets=alive, min_responses=len(alive))
        closed_by = self._wait(task, fl_ctx, abort_signal, start, timeout, len(alive))
        spent = time.monotonic() - start
        key = phase if task_name == protocol.SCORE_MASK else task_name
        server.add_time(key, spent)
        if closed_by == "timeout":
            no_reply = f"no reply within the {phase} timeout of {_seconds(timeout)}"
        elif closed_by == "wait_after_min":
            no_reply = (
                f"no reply within wait_after_min={_seconds(config.wait_after_min)} after "
                f"min_sites={config.min_sites} sites had replied ({spent:.1f} s into the phase; "
                f"the {phase} timeout of {_seconds(timeout)} had not passed)"
            )
        else:
            no_reply = "no reply: the site stopped or lost its connection"
        good: dict = {}
        answered = set()
        for client_task in task.client_tasks:
            site = client_task.client.name
            answered.add(site)
            result = client_task.result
            if result is None:
                server.drop(site, task_name, no_reply)
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


def _seconds(value: float | None) -> str:
    """A duration for messages: ``0`` is no limit, fractions are kept."""
    if not value:
        return "no limit"
    return f"{value:g} s"
