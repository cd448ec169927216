"""The phases of a job, in one place: :class:`JobDriver`.

The driver owns the order of the phases (schema → vote → ``score_mask``
rounds while tuning → train → pool → evaluate), the data of every task
(:func:`fedforest.protocol.task_data`), the drops and their reasons, the
``min_sites`` checks, the deadline policy of a phase (:class:`Deadline`: the
phase timeout and ``wait_after_min``), the phase timings, the election's
tuning loop (the score callback of :meth:`JobServer.elect`) and the results of
a failed job. The rules it applies to the replies are
:class:`~fedforest.federation.server.JobServer`'s.

How a task reaches the sites and their replies come back is an
:class:`Exchange`:

* FLARE's broadcast-and-wait in server mode
  (``fedforest.flare.controller.FlareBroadcast``): the server sends every task
  to the live sites and polls the driver's :class:`Deadline`;
* the peer exchange of swarm mode
  (:class:`fedforest.federation.swarm.SwarmSite`): a site sends its payload to
  the other sites and the agreement rule decides who takes part; a driver runs
  at every site (``site=``), and the evaluation is the site's own;
* :class:`InProcessExchange`: :class:`~fedforest.federation.site.SiteRunner`
  objects called in this process (``fedforest elect``, tests, benchmarks).

An exchange answers one :class:`Request` with :class:`Replies`: the payloads,
the sites that replied with an error, the sites that took the task, and what
closed the phase. The driver turns every other outcome into a drop with its
reason (architecture.md §2, Failures), records the drops in site order, and
passes the payloads on sorted by site name, so that no result depends on the
order in which the sites replied.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .. import protocol
from ..rules import get as get_rule
from .job_results import JobResults
from .progress import end_line, log_line, round_line
from .results import write_brief_results, write_results_files
from .server import JobServer

logger = logging.getLogger(__name__)

#: How an exchange may say a phase closed: every asked site answered (or the task
#: ended otherwise), the phase timeout passed, or ``wait_after_min`` passed.
CLOSED_BY = ("all", "timeout", "wait_after_min")
#: How the drops of a round are named: by the task (server mode: ``vote: …``) or by
#: its phase (swarm mode: ``election: …``).
DROP_NAMES = ("task", "phase")


def seconds_text(value: float | None) -> str:
    """A duration for messages: ``0`` (or ``None``) is no limit, fractions are kept.

    Examples
    --------
    >>> seconds_text(0), seconds_text(0.5), seconds_text(900.0)
    ('no limit', '0.5 s', '900 s')
    """
    if not value:
        return "no limit"
    return f"{value:g} s"


def timing_key(task: str) -> str:
    """The ``phase_seconds`` entry of a task: its own name, the election for ``score_mask``."""
    return protocol.TASK_PHASE[task] if task == protocol.SCORE_MASK else task


class Deadline:
    """When a phase closes (the driver's policy; the exchange polls it).

    By default every asked site has the whole phase ``timeout`` (``0``: no
    limit). With ``wait_after_min`` set, the phase also closes that many
    seconds after ``min_replies`` sites replied. Times are ``time.monotonic``
    seconds from the moment the deadline was made.
    """

    def __init__(self, timeout: float, wait_after_min: float | None = None, min_replies: int = 1):
        self.timeout = float(timeout or 0)
        self.wait_after_min = wait_after_min
        self.min_replies = min_replies
        self.started = time.monotonic()
        self._enough_at: float | None = None

    def end(self) -> float | None:
        """The moment (``time.monotonic``) the timeout passes; ``None``: no limit."""
        return self.started + self.timeout if self.timeout else None

    def fresh(self) -> float | None:
        """A whole new timeout from now (swarm mode's wait for the receipts)."""
        return time.monotonic() + self.timeout if self.timeout else None

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def closes(self, replied: int) -> str | None:
        """What closes the phase now that ``replied`` sites replied: ``timeout``,
        ``wait_after_min``, or ``None`` (keep waiting)."""
        now = time.monotonic()
        if self.timeout and now - self.started >= self.timeout:
            return "timeout"
        if self.wait_after_min is not None:
            if self._enough_at is None and replied >= self.min_replies:
                self._enough_at = now
            if self._enough_at is not None and now - self._enough_at >= self.wait_after_min:
                return "wait_after_min"
        return None


@dataclass(frozen=True)
class Request:
    """One task for the live sites."""

    #: One of :data:`fedforest.protocol.TASKS`.
    task: str
    #: The task's data (:func:`fedforest.protocol.task_data`).
    data: dict
    #: Its phase (:data:`fedforest.protocol.TASK_PHASE`: the timeout it runs under).
    phase: str
    #: The live sites, in the driver's order.
    targets: list[str]
    deadline: Deadline
    #: ``False``: the replies are not used, only the sites' own state changes (the
    #: schema reaching the sites when the election is off).
    collect: bool = True
    #: ``{site: data}`` where the sites get different data (``evaluation.trees_per_site``:
    #: each its own model); ``None``: every site gets :attr:`data`.
    site_data: dict[str, dict] | None = None

    def data_for(self, site: str) -> dict:
        """The data ``site`` gets."""
        if self.site_data is not None and site in self.site_data:
            return self.site_data[site]
        return self.data


@dataclass
class Replies:
    """What came back from a :class:`Request`."""

    #: ``{site: payload}`` of the sites that replied without error (``None``: no payload).
    payloads: dict[str, Any] = field(default_factory=dict)
    #: ``{site: reason}`` of the sites whose reply is an error (or that the exchange left out).
    errors: dict[str, str] = field(default_factory=dict)
    #: The sites that took the task (``None``: every asked site).
    took: Collection[str] | None = None
    #: The sites asked (``None``: every target). A site not asked is neither waited for
    #: nor dropped, and the round is not checked against ``min_sites``.
    asked: Collection[str] | None = None
    #: One of :data:`CLOSED_BY`.
    closed_by: str = "all"
    #: Whether the round counts in ``phase_seconds``.
    timed: bool = True


class Exchange(Protocol):
    """How the tasks reach the sites and their replies come back (module docstring)."""

    def ask(self, request: Request) -> Replies:
        """Send ``request`` to its targets; return what came back before it closed."""


class SiteStopped(RuntimeError):
    """The site running a driver (swarm mode) takes no further part: it failed, or was left out."""


class JobDriver:
    """Runs a job's phases over an :class:`Exchange` (module docstring).

    Parameters
    ----------
    rules : JobServer
        The job's rules (and state: drops, timings, schema, election).
    exchange : Exchange
        How the tasks reach the sites.
    sites : sequence of str, optional
        The sites in the driver's order (default ``job.sites``).
    site : str, optional
        The site this driver runs at (swarm mode): it stops, with the reason,
        when the others or the rules leave it out.
    drops : {"task", "phase"}
        What names the drops of a round (:data:`DROP_NAMES`).
    run_dir : path, optional
        Where ``results.json`` and ``report.md`` are written (also for a failed job).
    strict : bool
        A site that cannot take part is an error, not a site to drop (``fedforest elect``).
    on_elected, on_pooled, on_evaluated : callable, optional
        Called with the rules after the election, with the model bundle once it
        is pooled and checked, and with the checked metrics.
    clock : callable, optional
        The clock of the phase timings (default ``time.monotonic``).
    progress : callable, optional
        Called with the progress line of every round and of the job's end
        (:mod:`fedforest.federation.progress`); by default the lines go to the
        ``fedforest.progress`` logger.
    """

    def __init__(
        self,
        rules: JobServer,
        exchange: Exchange,
        *,
        sites: Sequence[str] | None = None,
        site: str | None = None,
        drops: str = "task",
        run_dir: str | Path | None = None,
        strict: bool = False,
        on_elected: Callable[[JobServer], None] | None = None,
        on_pooled: Callable[[dict], None] | None = None,
        on_evaluated: Callable[[dict], None] | None = None,
        clock: Callable[[], float] | None = None,
        progress: Callable[[str], None] | None = None,
    ):
        if drops not in DROP_NAMES:
            raise ValueError(f"drops={drops!r}; allowed: {', '.join(DROP_NAMES)}")
        self.rules = rules
        self.config = rules.config
        self.exchange = exchange
        self.sites = list(rules.config.sites if sites is None else sites)
        self.site = site
        self.drops = drops
        self.run_dir = None if run_dir is None else Path(run_dir)
        self.strict = strict
        self.on_elected = on_elected
        self.on_pooled = on_pooled
        self.on_evaluated = on_evaluated
        if clock is not None:
            rules.clock = clock
        self.clock = rules.clock or time.monotonic
        self.progress = progress or log_line
        #: The number of ``score_mask`` rounds asked so far (the election's tuning rounds).
        self.tuning_rounds = 0
        #: The pooled model bundle, once pooled.
        self.model: dict | None = None
        #: The checked metrics replies (``JobServer.read_metrics``), once read.
        self.metrics: dict[str, dict] = {}
        self.results: JobResults | None = None

    def live(self) -> list[str]:
        """The sites still in the job, in the driver's order."""
        return self.rules.alive(self.sites)

    # --------------------------------------------------------------- the job
    def run(self) -> JobResults:
        """Run every phase; return the results (written to ``run_dir``). Never raises.

        Any exception fails the job: :class:`RuntimeError` and
        :class:`ValueError` (``SchemaError``, ``PayloadError``, ``SiteStopped``
        among them) by their message, any other by its type and message, with
        its traceback in the log. The failed job's results are those of the
        moment (:meth:`failed`).
        """
        try:
            model = self.train(self.elect())
            metrics = self.evaluate(model)
            results = self.rules.results(metrics, model)
            if self.run_dir is not None:
                write_results_files(self.run_dir, results)
                logger.info("%sresults written to %s", self._who(), self.run_dir)
            logger.info("%sfedforest job finished", self._who())
        except Exception as err:  # noqa: BLE001 - whatever went wrong, the results say so
            expected = isinstance(err, (RuntimeError, ValueError))
            reason = str(err) if expected else f"{type(err).__name__}: {err}"
            logger.error("%sfedforest job failed: %s", self._who(), reason, exc_info=not expected)
            results = self.failed(reason)
        self.results = results
        self._show(end_line(results.status, results.error))
        return results

    def elect(self) -> list[str]:
        """Schema, vote and election (tuned when ``auto_tune``); return the elected features."""
        config, rules = self.config, self.rules
        replies = self._ask(
            protocol.SCHEMA,
            seed=config.seed,
            # a survival job without a public grid agrees it from the sites' coarse quantiles
            time_quantiles=config.survival and config.survival_times is None,
        )
        schema = rules.timed("schema", lambda: rules.build_schema(replies))
        self._settle("schema")
        if not config.election.enabled:
            self._ask(protocol.VOTE, collect=False, schema=schema, vote=False)
            return list(rules.schema.features)
        replies = self._ask(protocol.VOTE, schema=schema, vote=True)
        ballot = rules.timed("vote", lambda: rules.read_votes(replies))
        self._settle("election")

        def score(features: list[str]) -> float:
            scored = self._ask(
                protocol.SCORE_MASK, features=list(features), metric=config.election.metric
            )
            value = rules.score_replies(scored)
            self._settle("election")
            return value

        elected = rules.timed("election", lambda: rules.elect(ballot, score))
        if self.on_elected is not None:
            self.on_elected(rules)
        return elected

    def train(self, elected: list[str]) -> dict:
        """Train at the sites and pool their models; return the model bundle."""
        config, rules = self.config, self.rules
        want_inter = any(get_rule(s).needs_intersection for s in config.strategies)
        replies = self._ask(
            protocol.TRAIN,
            elected=elected,
            forest=config.forest.to_dict(),
            surrogates=config.surrogates.to_dict(),
            intersection=want_inter,
        )
        self.model = rules.timed("pool", lambda: rules.pool(replies, want_inter))
        self._settle("train")
        if self.on_pooled is not None:
            self.on_pooled(self.model)
        return self.model

    def evaluate(self, model: dict) -> dict[str, dict]:
        """Every site scores the strategies on its test rows; return the checked metrics."""
        config, rules = self.config, self.rules
        settings = dict(
            strategies=config.strategies,
            voting=config.voting,
            depth_threshold=config.depth_threshold,
            metrics=config.metrics,
            auto_metric=config.auto_metric,
            calibration=config.calibration,
            horizons=None if config.survival_horizons is None else list(config.survival_horizons),
        )
        # with evaluation.trees_per_site each site gets a model of its own (site_trees)
        # (swarm mode: this site's own only; the others make theirs)
        models = rules.site_models(model, [self.site] if self.site is not None else self.live())
        site_data = None
        if models is not None:
            site_data = {
                site: protocol.task_data(protocol.EVALUATE, model=m, **settings)
                for site, m in models.items()
            }
        replies = self._ask(protocol.EVALUATE, site_data=site_data, model=model, **settings)
        self.metrics = rules.timed("evaluate", lambda: rules.read_metrics(replies))
        self._settle("evaluate")
        if self.on_evaluated is not None:
            self.on_evaluated(self.metrics)
        return self.metrics

    def failed(self, reason: str) -> JobResults:
        """The results of a failed job, whatever state it is in, written to ``run_dir``.

        The results hold what the job had (drops, schema, election, model,
        metrics) with ``status: failed`` and ``error``. If even those cannot be
        built or written, the brief results (job, status, error, dropped
        sites) and a one-line report are written instead.
        """
        try:
            results = self.rules.results(self.metrics, self.model, status="failed", error=reason)
            if self.run_dir is not None:
                write_results_files(self.run_dir, results)
        except Exception:  # noqa: BLE001 - the partial results themselves broke: the reason only
            logger.exception("the partial results could not be written; writing the reason only")
            results = JobResults(
                job=self.config.name,
                status="failed",
                error=reason,
                dropped_sites=dict(self.rules.dropped),
            )
            if self.run_dir is not None:
                write_brief_results(self.run_dir, results)
        return results

    # ------------------------------------------------------------- one round
    def _ask(
        self, task: str, collect: bool = True, site_data: dict | None = None, **data
    ) -> dict[str, Any]:
        """Send ``task`` to the live sites; drop the sites without a good reply.

        Returns ``{site: payload}`` of the good replies, sorted by site name.
        """
        config, rules = self.config, self.rules
        phase = protocol.TASK_PHASE[task]
        name = task if self.drops == "task" else phase
        targets = self.live()
        rules.check_min_sites(targets, name)
        timeout = config.timeouts.of(phase)
        deadline = Deadline(timeout, config.wait_after_min, min(config.min_sites, len(targets)))
        request = Request(
            task, protocol.task_data(task, **data), phase, targets, deadline, collect, site_data
        )
        before = set(rules.dropped)
        start = self.clock()
        replies = self.exchange.ask(request)
        spent = self.clock() - start
        if replies.timed:
            rules.add_time(timing_key(task), spent)
        asked = targets if replies.asked is None else [s for s in targets if s in replies.asked]
        took = set(asked if replies.took is None else replies.took)
        no_reply = self._no_reply(replies.closed_by, phase, timeout, deadline)
        good = {}
        for site in sorted(asked):  # drops in site order: never the order of the replies
            if site in replies.payloads:
                if replies.payloads[site] is None:
                    rules.drop(site, name, "the reply carries no payload")
                else:
                    good[site] = replies.payloads[site]
            elif site in replies.errors:
                rules.drop(site, name, replies.errors[site])
            else:
                rules.drop(site, name, no_reply if site in took else "never took the task")
        logger.info(
            "phase %s: %d of %d sites replied in %.1f s", task, len(good), len(asked), spent
        )
        if task == protocol.SCORE_MASK:
            self.tuning_rounds += 1
            shown = f"election tuning round {self.tuning_rounds}"
        else:
            shown = task
        self._show(round_line(shown, len(good), len(asked), spent, set(rules.dropped) - before))
        if self.site is not None and self.site in replies.errors:
            raise SiteStopped(f"the other sites left this site out: {replies.errors[self.site]}")
        if self.strict:
            self._none_dropped()
        if len(asked) == len(targets):
            rules.check_min_sites(list(good), name)
        return good

    def _no_reply(self, closed_by: str, phase: str, timeout: float, deadline: Deadline) -> str:
        """Why a site that took the task sent nothing (architecture.md §2, Failures)."""
        if closed_by == "timeout":
            return f"no reply within the {phase} timeout of {seconds_text(timeout)}"
        if closed_by == "wait_after_min":
            return (
                f"no reply within wait_after_min={seconds_text(self.config.wait_after_min)} after "
                f"min_sites={self.config.min_sites} sites had replied ({deadline.elapsed():.1f} s "
                f"into the phase; the {phase} timeout of {seconds_text(timeout)} had not passed)"
            )
        return "no reply: the site stopped or lost its connection"

    def _settle(self, phase: str) -> None:
        """After the rules read a round: stop at a site the rules left out, or below ``min_sites``.

        The sites still in are the live sites (a site not asked, as another
        site's own evaluation in swarm mode, counts as still in).
        """
        live = self.live()
        if self.strict:
            self._none_dropped()
        if self.site is not None and self.site not in live:
            raise SiteStopped(
                f"the job's rules left this site out: {self.rules.dropped.get(self.site)}"
            )
        self.rules.check_min_sites(sorted(live), phase)

    def _none_dropped(self) -> None:
        """Strict mode: a site that cannot take part is an error to fix."""
        for site, reason in self.rules.dropped.items():
            raise ValueError(f"site {site!r} cannot take part: {reason}")

    def _who(self) -> str:
        return "" if self.site is None else f"site {self.site}: "

    def _show(self, line: str) -> None:
        """Hand a progress line on; a failing receiver never stops the job."""
        try:
            self.progress(self._who() + line)
        except Exception:  # noqa: BLE001 - progress is for the console, not the results
            logger.exception("a progress line could not be shown")


class InProcessExchange:
    """The sites as runners in this process, called one after another.

    Task data and replies are deep-copied as they cross, so no party shares an
    object with another (as after FLARE's serialisation).

    Parameters
    ----------
    runners : mapping of site name to runner
        Objects with ``run_task(task, data, save_dir=None)``
        (:class:`~fedforest.federation.site.SiteRunner`). A target without a
        runner never takes the task.
    save_root : path, optional
        Each site saves its pooled model and metrics in ``save_root/<site>`` at
        ``evaluate``.
    raise_errors : bool
        Let a runner's exception through (``fedforest elect``) instead of
        dropping its site with ``"<Type>: <message>"``.
    ask_first : mapping of task to int, optional
        Ask only the first *k* targets of a task (a benchmark's sample; the
        others are left out, not dropped).
    clock : callable, optional
        The clock of :attr:`seconds` (default ``time.monotonic``).
    """

    def __init__(
        self,
        runners: Mapping[str, Any],
        *,
        save_root: str | Path | None = None,
        raise_errors: bool = False,
        ask_first: Mapping[str, int] | None = None,
        clock: Callable[[], float] | None = None,
    ):
        self.runners = runners
        self.save_root = None if save_root is None else Path(save_root)
        self.raise_errors = raise_errors
        self.ask_first = dict(ask_first or {})
        self.clock = clock or time.monotonic
        #: ``{timing key: {site: seconds}}`` each site spent on its tasks (replies only).
        self.seconds: dict[str, dict[str, float]] = {}

    def ask(self, request: Request) -> Replies:
        asked = list(request.targets)
        if self.ask_first.get(request.task):
            asked = asked[: self.ask_first[request.task]]
        payloads, errors = {}, {}
        took = [s for s in asked if self.runners.get(s) is not None]
        for site in took:
            save_dir = None
            if self.save_root is not None and request.task == protocol.EVALUATE:
                save_dir = self.save_root / site
            start = self.clock()
            try:
                reply = self.runners[site].run_task(
                    request.task, copy.deepcopy(request.data_for(site)), save_dir=save_dir
                )
            except Exception as err:  # noqa: BLE001 - as a failed reply: the site is dropped
                if self.raise_errors:
                    raise
                logger.warning("site %s: task %s failed: %s", site, request.task, err)
                errors[site] = f"{type(err).__name__}: {err}"
                continue
            payloads[site] = copy.deepcopy(reply)
            per = self.seconds.setdefault(timing_key(request.task), {})
            per[site] = per.get(site, 0.0) + self.clock() - start
        return Replies(payloads=payloads, errors=errors, took=took, asked=asked)
