"""Swarm mode without FLARE: the sites run the whole job among themselves.

In swarm mode (``job.mode: swarm``) no party sees every site's payloads. Each
site runs :class:`SwarmSite`: it sends its schema description, vote, mask
scores and trained payload to every other site, receives theirs, and computes
the schema, the election, the tuning steps and the pooled model itself, with
the same rules the server uses in server mode (a
:class:`~fedforest.federation.server.JobServer` at every site) in the same
order (a :class:`~fedforest.federation.driver.JobDriver` at every site, whose
exchange the site is). The rules are deterministic over inputs sorted by site
name, so every site reaches the same election and the same pooled model, and
with the same seed each site's metrics equal the server mode's.

Each exchange is made agreed by :mod:`fedforest.federation.agreement`
(payloads, then receipts); a site that fails, misses the phase's deadline, or
sends a payload that does not validate is left out by every survivor alike,
named with the same reason, and below ``job.min_sites`` every site stops with
the same message.

How messages travel is a :class:`Transport`: FLARE's peer-to-peer tasks in a
job (:mod:`fedforest.flare.swarm`), :class:`InProcessTransport` in one
process. What arrives is put in the site's :class:`Mailbox`, which validates
the envelope (format, version, the sender's job configuration, the kind and
key) and refuses a second, different message for the same exchange.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from .. import protocol
from ..errors import PayloadError
from .agreement import agree, payload_digest
from .config import JobConfig
from .driver import JobDriver, Replies, Request, SiteStopped
from .job_results import JobResults, SwarmSummary
from .messages import MAX_REASON, SwarmMessage, SwarmMessageRefused, read_message
from .server import JobServer

logger = logging.getLogger(__name__)

#: Seconds between two attempts to reach a site that could not be reached.
RETRY_SECONDS = 0.5
#: Longest single delivery attempt (seconds); a phase without a timeout retries forever.
MAX_SEND_SECONDS = 600.0
#: What :meth:`Transport.send` reports per target.
DELIVERY = ("delivered", "refused", "unreachable")


def job_digest(job: JobConfig) -> str:
    """Digest of a job's settings (its source file name left out): sites compare them."""
    fields = dataclasses.asdict(job)
    fields.pop("source", None)
    return payload_digest(fields)


def swarm_message(kind: str, key: str, job: str, view: Sequence[str], body: Mapping) -> dict:
    """A :data:`~fedforest.protocol.SWARM_MESSAGE` (:class:`~.messages.SwarmMessage`)."""
    return SwarmMessage(kind, key, job, list(view), dict(body)).to_payload()


class Transport(Protocol):
    """How a site's messages reach the other sites."""

    def send(self, targets: Sequence[str], message: Mapping, timeout: float) -> dict[str, str]:
        """Send ``message`` to every target; return ``{target: delivery}`` (:data:`DELIVERY`)."""


class Mailbox:
    """The messages a site received, validated on arrival (thread-safe).

    Parameters
    ----------
    site : str
        The receiving site.
    sites : sequence of str
        Every site of the job (``job.sites``); a message from anyone else is refused.
    job : str
        The receiving site's :func:`job_digest`; a sender whose job settings
        differ is refused.
    """

    def __init__(self, site: str, sites: Sequence[str], job: str):
        self.site = site
        self.sites = list(sites)
        self.job = job
        self._cond = threading.Condition()
        self._box: dict[tuple[str, str, str], dict] = {}
        self._refused: dict[tuple[str, str], str] = {}

    def put(self, sender: str, message: Any) -> None:
        """Validate and keep one message; raise :class:`~fedforest.PayloadError` if refused.

        A refused message about an exchange (its key readable) is remembered,
        so the site's receipt says why (:meth:`refusal`).
        """
        if sender not in self.sites or sender == self.site:
            raise PayloadError(
                f"{sender!r} is not another site of this job (sites: {self.sites})", sender=sender
            )
        try:
            read = read_message(
                message, sender, protocol.SWARM_MESSAGE, sites=self.sites, job=self.job
            )
        except SwarmMessageRefused as err:
            if err.key is not None:
                with self._cond:
                    self._refused.setdefault((err.key, sender), str(err))
                    self._cond.notify_all()
            raise
        key, kind, view, body = read.key, read.kind, read.view, read.body
        slot = (key, "receipt" if kind == "receipt" else "payload", sender)
        entry = {"kind": kind, "view": view, "body": body}
        with self._cond:
            held = self._box.get(slot)
            if held is not None:
                if payload_digest(held) == payload_digest(entry):
                    return  # the same message again (a retried delivery)
                raise PayloadError(
                    f"it sent a second, different {kind} message for exchange {key!r}",
                    sender=sender,
                )
            self._box[slot] = entry
            self._cond.notify_all()

    def refusal(self, key: str, sender: str) -> str | None:
        """Why a message of ``sender`` for exchange ``key`` was refused, if it was."""
        with self._cond:
            return self._refused.get((key, sender))

    def wait(
        self,
        key: str,
        slot: str,
        senders: Sequence[str],
        deadline: float | None,
        abort: threading.Event | None = None,
    ) -> dict[str, dict]:
        """Wait until every sender's message for ``key`` (``slot`` ``payload`` or
        ``receipt``) arrived, was refused, or ``deadline`` (``time.monotonic``)
        passed; return ``{sender: message}`` of those that arrived.
        """
        pending = set(senders)
        with self._cond:
            while True:
                got = {s: self._box[(key, slot, s)] for s in senders if (key, slot, s) in self._box}
                gone = {s for s in senders if (key, s) in self._refused}
                if pending <= set(got) | gone:
                    return got
                if abort is not None and abort.is_set():
                    raise RuntimeError("the job was aborted")
                if deadline is not None and time.monotonic() >= deadline:
                    return got
                wait = 0.2 if deadline is None else min(0.2, max(0.0, deadline - time.monotonic()))
                self._cond.wait(wait)


class InProcessTransport:
    """A transport between sites in one process: delivers into their mailboxes.

    Messages are deep-copied, so no site shares an object with another.
    """

    def __init__(self, sender: str, mailboxes: Mapping[str, Mailbox]):
        self.sender = sender
        self.mailboxes = mailboxes

    def send(self, targets: Sequence[str], message: Mapping, timeout: float) -> dict[str, str]:
        out = {}
        for target in targets:
            box = self.mailboxes.get(target)
            if box is None:
                out[target] = "unreachable"
                continue
            try:
                box.put(self.sender, copy.deepcopy(dict(message)))
                out[target] = "delivered"
            except PayloadError as err:
                logger.warning("site %s refused a message of %s: %s", target, self.sender, err)
                out[target] = "refused"
        return out


class SwarmSite:
    """One site's side of a swarm job.

    The site runs the job's phases with its own
    :class:`~fedforest.federation.driver.JobDriver` (at this site, drops named
    by phase) and is that driver's exchange (:meth:`ask`): each task is
    exchanged with the other live sites and made agreed
    (:mod:`~fedforest.federation.agreement`); the evaluation, and the vote
    when the election is off, are the site's own.

    Parameters
    ----------
    job : JobConfig
        The job settings (every site has the same ``job.yaml``).
    site : str
        This site's name.
    runner : SiteRunner or None
        The site's loaded runner; ``None`` when the site could not start
        (``startup_error`` then says why, and the site tells the others so).
    transport : Transport
        How messages reach the other sites.
    mailbox : Mailbox
        Where this site's messages arrive.
    report_metrics : bool, default=True
        Put the final test metrics in the status the server reads
        (:meth:`status`); ``False``: status only.
    save_dir : path, optional
        Where the site writes its own ``results.json``, ``report.md``, pooled
        model and metrics.
    startup_error : str, optional
        Why the site could not start.
    """

    def __init__(
        self,
        job: JobConfig,
        site: str,
        runner,
        transport: Transport,
        mailbox: Mailbox,
        report_metrics: bool = True,
        save_dir: str | Path | None = None,
        startup_error: str | None = None,
    ):
        self.job = job
        self.site = site
        self.runner = runner
        self.transport = transport
        self.mailbox = mailbox
        self.report_metrics = report_metrics
        self.save_dir = None if save_dir is None else Path(save_dir)
        self.startup_error = startup_error
        self.rules = JobServer(job)
        self.driver = JobDriver(
            self.rules,
            self,
            sites=sorted(job.sites),
            site=site,
            drops="phase",
            run_dir=self.save_dir,
            on_pooled=self._pooled,
            on_evaluated=self._evaluated,
        )
        self.digest = job_digest(job)
        self.abort = threading.Event()
        self.state = "waiting"
        self.phase = "start"
        self.error: str | None = None
        self.metrics: dict | None = None
        self.model_digest: str | None = None
        #: Whether the transport encrypts messages end to end between sites (``None``: unknown).
        self.encrypted: bool | None = None
        self._scores = 0
        self._own_metrics: dict | None = None

    @property
    def live(self) -> list[str]:
        """The sites taking part, sorted (this site's view)."""
        return self.driver.live()

    def leave_out(self, sites: Sequence[str], reason: str) -> None:
        """Before the run: ``sites`` take no part (e.g. not connected when the job started).

        Every site must be told the same ``sites`` (the workflow's configuration
        does so), so that all start from the same participants.
        """
        for site in sorted(sites):
            if site in self.live and site != self.site:
                self.rules.drop(site, "schema", reason)

    # ------------------------------------------------------------------ run
    def run(self) -> dict:
        """Run the job at this site; return its final :meth:`status` (never raises)."""
        self.state = "running"
        results = self.driver.run()
        if results.finished:
            self.state = "finished"
            logger.info("site %s: swarm job finished with %s", self.site, self.live)
        else:
            self.state, self.error = "failed", results.error
        return self.status()

    def _pooled(self, model: dict) -> None:
        self.model_digest = payload_digest(model)

    def _evaluated(self, metrics: dict) -> None:
        self.metrics = self._own_metrics

    # ------------------------------------------------------------ exchange
    def ask(self, request: Request) -> Replies:
        """The driver's exchange: this site's payload for the others, theirs for it.

        ``evaluate`` (and a task whose replies are not collected) runs at this
        site only: the others' evaluations are their own.
        """
        if request.task == protocol.EVALUATE:
            self.phase = request.phase
            payload = self.runner.run_task(
                request.task, request.data_for(self.site), save_dir=self.save_dir
            )
            self._own_metrics = payload
            return Replies(payloads={self.site: payload}, asked=[self.site])
        if not request.collect:
            payload = self.runner.run_task(request.task, request.data)
            return Replies(payloads={self.site: payload}, asked=[self.site], timed=False)
        key = request.task
        if request.task == protocol.SCORE_MASK:
            self._scores += 1
            features = sorted(request.data["features"])
            key = f"score-{self._scores}-{payload_digest(features)[:16]}"
        payloads, dropped = self._exchange(key, request)
        return Replies(payloads=payloads, errors=dropped)

    def _exchange(self, key: str, request: Request) -> tuple[dict, dict[str, str]]:
        """Send this site's payload for exchange ``key``; return the agreed payloads and the
        sites the agreement left out, with the reasons.

        If computing the payload raises (or the site did not start), the others
        are told why and this site stops.
        """
        self.phase = request.phase
        live = list(request.targets)
        start = time.monotonic()
        deadline = request.deadline.end()
        peers = [s for s in live if s != self.site]
        failure = None
        if self.runner is None:
            failure = self.startup_error or "the site did not start"
        else:
            try:
                body = self.runner.run_task(request.task, request.data)
            except Exception as err:  # noqa: BLE001 - the others are told, then this site stops
                logger.exception("site %s: %s failed", self.site, key)
                failure = f"{type(err).__name__}: {err}"
        if failure is not None:
            note = {"error": failure[:MAX_REASON]}
            self._send(peers, swarm_message("failed", key, self.digest, live, note), deadline)
            raise SiteStopped(failure)
        logger.info("swarm %s: site %s sends its payload to %s", key, self.site, peers)
        self._send(peers, swarm_message("payload", key, self.digest, live, body), deadline)
        got = self.mailbox.wait(key, "payload", peers, deadline, self.abort)
        receipt = {self.site: {"digest": payload_digest(body)}}
        for site in peers:
            message, refused = got.get(site), self.mailbox.refusal(key, site)
            if message is None:
                if refused is not None:
                    receipt[site] = {"refused": refused[:MAX_REASON]}
            elif message["kind"] == "failed":
                receipt[site] = {"failed": message["body"]["error"]}
            elif message["view"] != live:
                receipt[site] = {
                    "refused": f"it continues with sites {message['view']}, {self.site} with {live}"
                }
            else:
                receipt[site] = {"digest": payload_digest(message["body"])}
        self._send(peers, swarm_message("receipt", key, self.digest, live, receipt), deadline)
        expected = [s for s in peers if "digest" in receipt.get(s, {})]
        receipts = self.mailbox.wait(key, "receipt", expected, request.deadline.fresh(), self.abort)
        held = {self.site: receipt, **{s: m["body"] for s, m in receipts.items()}}
        participants, dropped = agree(live, held)
        logger.info(
            "swarm %s: %d of %d sites agreed in %.1f s",
            key,
            len(participants),
            len(held),
            time.monotonic() - start,
        )
        payloads = {s: body if s == self.site else got[s]["body"] for s in participants}
        return payloads, dropped

    def _send(self, targets: Sequence[str], message: dict, deadline: float | None) -> None:
        """Deliver to every target once; keep retrying the unreachable ones in the background.

        A site that cannot be reached yet (still starting, a dropped
        connection) is retried every :data:`RETRY_SECONDS` until ``deadline``,
        while this site goes on with the exchange.
        """
        if self.abort.is_set():
            raise RuntimeError("the job was aborted")
        pending = self._attempt(list(targets), message, deadline)
        if pending:
            threading.Thread(
                target=self._retry, args=(pending, message, deadline), daemon=True
            ).start()

    def _attempt(self, targets: list[str], message: dict, deadline: float | None) -> list[str]:
        """One delivery attempt; return the targets that could not be reached."""
        left = MAX_SEND_SECONDS if deadline is None else deadline - time.monotonic()
        try:
            result = self.transport.send(targets, message, max(1.0, min(left, MAX_SEND_SECONDS)))
        except Exception:  # noqa: BLE001 - a transport failure is an unreachable target
            logger.exception("site %s: sending %s failed", self.site, message["key"])
            result = {}
        for target in targets:
            if result.get(target) == "refused":
                logger.warning("site %s: %s refused its %s", self.site, target, message["key"])
        return [t for t in targets if result.get(t, "unreachable") == "unreachable"]

    def _retry(self, pending: list[str], message: dict, deadline: float | None) -> None:
        while pending and not self.abort.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                logger.warning(
                    "site %s: %s never reached %s in time", self.site, message["key"], pending
                )
                return
            time.sleep(RETRY_SECONDS)
            pending = self._attempt(pending, message, deadline)

    # --------------------------------------------------------------- status
    def status(self) -> dict:
        """What the server may see: a :data:`~fedforest.protocol.SWARM_STATUS` payload.

        The state, the phase, the error, the participants and the sites left
        out (with the reasons), the pooled model's digest, the phase timings
        and, only if ``report_metrics``, the site's final test metrics. No
        schema, vote, score, tree, imputer or standard deviation.
        """
        return {
            "format": protocol.SWARM_STATUS,
            "version": protocol.FORMATS[protocol.SWARM_STATUS],
            "site": self.site,
            "state": self.state,
            "phase": self.phase,
            "error": self.error,
            "participants": list(self.live),
            # copies first (dict.copy is atomic): the run's thread may be adding entries
            "dropped": self.rules.dropped.copy(),
            "model_digest": self.model_digest,
            "phase_seconds": {k: round(v, 3) for k, v in self.rules.timings.copy().items()},
            "metrics": self.metrics if (self.report_metrics and self.metrics) else None,
            "metrics_withheld": bool(self.metrics) and not self.report_metrics,
            "encrypted": self.encrypted,
        }


def swarm_results(
    job: JobConfig, statuses: Mapping[str, Mapping], error: str | None = None
) -> JobResults:
    """The server's results of a swarm job, from the sites' final statuses only.

    The job finished if at least ``job.min_sites`` sites finished. The sites
    left out and their reasons are those the sites report (the finished
    sites' first: they agree, by the rule of
    :mod:`~fedforest.federation.agreement`); the pooled
    model's digest is given once if every finished site pooled the same model,
    else per site. A failed job's error is the failed sites' own message (the
    first by site name), which every survivor computed alike.
    """
    states = {s: statuses.get(s, {}).get("state", "failed") for s in job.sites}
    errors = {}
    for site in sorted(job.sites):
        st = statuses.get(site)
        if st is None:
            errors[site] = "it never reported its status"
        elif st.get("state") != "finished":
            errors[site] = st.get("error") or f"it stopped in state {st.get('state')}"
    finished = [s for s in job.sites if states[s] == "finished"]
    dropped: dict[str, str] = {}
    for site in [*finished, *sorted(s for s in statuses if s not in finished)]:
        for name, why in statuses[site].get("dropped", {}).items():
            dropped.setdefault(name, why)
    digests = {s: statuses[s].get("model_digest") for s in finished}
    reported = {s: statuses[s]["metrics"] for s in finished if statuses[s].get("metrics")}
    status = "finished" if error is None and len(finished) >= job.min_sites else "failed"
    if status == "failed" and error is None:
        error = next(iter(errors.values()), "no site finished")
    return JobResults(
        job=job.name,
        status=status,
        error=error,
        sites=list(job.sites),
        dropped_sites=dropped,
        classes_missing={},
        strategies=list(job.strategies),
        metrics={s: m["strategies"] for s, m in reported.items()},
        test_rows={s: m["rows"] for s, m in reported.items()},
        phase_seconds={s: dict(statuses[s].get("phase_seconds", {})) for s in finished},
        privacy={s: m.get("privacy") for s, m in reported.items()},
        validation={s: m.get("validation") for s, m in reported.items()},
        swarm=SwarmSummary(
            site_states=states,
            site_errors=errors,
            metrics_withheld=[s for s in job.sites if statuses.get(s, {}).get("metrics_withheld")],
            model_digest=(
                next(iter(digests.values())) if len(set(digests.values())) == 1 else None
            ),
            model_digests=digests if len(set(digests.values())) > 1 else {},
            peer_messages_encrypted={
                s: statuses.get(s, {}).get("encrypted") for s in job.sites if s in statuses
            },
        ),
    )


def summarize_swarm(
    job: JobConfig, statuses: Mapping[str, Mapping], error: str | None = None
) -> dict[str, Any]:
    """:func:`swarm_results` as ``results.json`` holds it (:meth:`JobResults.to_dict`)."""
    return swarm_results(job, statuses, error).to_dict()
