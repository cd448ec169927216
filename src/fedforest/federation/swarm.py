"""Swarm mode without FLARE: the sites run the whole job among themselves.

In swarm mode (``job.mode: swarm``) no party sees every site's payloads. Each
site runs :class:`SwarmSite`: it sends its schema description, vote, mask
scores and trained payload to every other site, receives theirs, and computes
the schema, the election, the tuning steps and the pooled model itself, with
the same rules the server uses in server mode (a
:class:`~fedforest.federation.server.JobServer` at every site). The rules are
deterministic over inputs sorted by site name, so every site reaches the same
election and the same pooled model, and with the same seed each site's
metrics equal the server mode's.

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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from .. import protocol
from ..errors import PayloadError
from ..validation import PayloadReader, describe
from .agreement import RECEIPT_KINDS, agree, payload_digest
from .config import JobConfig
from .evaluation import read_site_metrics
from .server import JobServer

logger = logging.getLogger(__name__)

#: Longest error text a site may send as the reason it failed.
MAX_REASON = 2000
#: Longest exchange key (``schema``, ``vote``, ``score-3-…``, ``train``).
MAX_KEY = 80
#: Seconds between two attempts to reach a site that could not be reached.
RETRY_SECONDS = 0.5
#: Longest single delivery attempt (seconds); a phase without a timeout retries forever.
MAX_SEND_SECONDS = 600.0
#: The fields of a :data:`~fedforest.protocol.SWARM_STATUS` besides ``format`` and ``version``.
STATUS_FIELDS = frozenset(
    {
        "site",
        "state",
        "phase",
        "error",
        "participants",
        "dropped",
        "model_digest",
        "phase_seconds",
        "metrics",
        "metrics_withheld",
        "encrypted",
    }
)
#: What :meth:`Transport.send` reports per target.
DELIVERY = ("delivered", "refused", "unreachable")


def job_digest(job: JobConfig) -> str:
    """Digest of a job's settings (its source file name left out): sites compare them."""
    fields = dataclasses.asdict(job)
    fields.pop("source", None)
    return payload_digest(fields)


def swarm_message(kind: str, key: str, job: str, view: Sequence[str], body: Mapping) -> dict:
    """A :data:`~fedforest.protocol.SWARM_MESSAGE`."""
    return {
        "format": protocol.SWARM_MESSAGE,
        "version": protocol.FORMATS[protocol.SWARM_MESSAGE],
        "kind": kind,
        "key": key,
        "job": job,
        "view": list(view),
        "body": dict(body),
    }


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
        key = None
        try:
            reader = PayloadReader(message, protocol.SWARM_MESSAGE, sender)
            reader.check_keys({"kind", "key", "job", "view", "body"})
            key = reader.read_string("key")
            if len(key) > MAX_KEY:
                reader.refuse("key", key, f"at most {MAX_KEY} characters")
            kind = reader.read_choice("kind", protocol.SWARM_KINDS)
            job = reader.read_string("job")
            if job != self.job:
                reader.fail(
                    f"it runs other job settings (digest {job[:12]}…) than this site "
                    f"({self.job[:12]}…); every site must run the same job.yaml"
                )
            view = reader.read_str_list("view", len(self.sites))
            unknown = sorted(set(view) - set(self.sites))
            if unknown:
                reader.refuse("view", view, f"sites of this job ({self.sites})")
            body = reader.read_mapping("body")
            if kind == "failed":
                error = reader.entry(body, "body").read_string("error")
                body = {"error": error[:MAX_REASON]}
            elif kind == "receipt":
                body = _read_receipt(reader.entry(body, "body"), self.sites)
        except PayloadError as err:
            if key is not None:
                with self._cond:
                    self._refused.setdefault((key, sender), str(err))
                    self._cond.notify_all()
            raise
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


def is_digest(text: str) -> bool:
    """Whether ``text`` is a SHA-256 digest as :func:`payload_digest` writes it (64 hex digits)."""
    return len(text) == 64 and not set(text) - set("0123456789abcdef")


def _read_receipt(reader: PayloadReader, sites: Sequence[str]) -> dict[str, dict[str, str]]:
    """A receipt: ``{site: {"digest"|"failed"|"refused": text}}`` over the job's sites."""
    out = {}
    for site, entry in reader.payload.items():
        if site not in sites:
            reader.refuse(site, entry, f"an entry for a site of this job ({list(sites)})")
        item = reader.entry(entry, f"entry {site!r}")
        if len(item.payload) != 1:
            item.fail(f"expected one of {list(RECEIPT_KINDS)}, got {describe(entry)}")
        (kind,) = item.payload
        if kind not in RECEIPT_KINDS:
            item.fail(f"field {kind!r} is unknown; expected one of {list(RECEIPT_KINDS)}")
        text = item.read_string(kind)
        if kind == "digest" and not is_digest(text):
            item.refuse(kind, text, "a SHA-256 digest in hex")
        out[site] = {kind: text[:MAX_REASON]}
    return out


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


class _Stopped(Exception):
    """This site stops taking part (it failed, or was left out)."""


class SwarmSite:
    """One site's side of a swarm job.

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
        self.digest = job_digest(job)
        self.live: list[str] = sorted(job.sites)
        self.abort = threading.Event()
        self.state = "waiting"
        self.phase = "start"
        self.error: str | None = None
        self.metrics: dict | None = None
        self.model_digest: str | None = None
        #: Whether the transport encrypts messages end to end between sites (``None``: unknown).
        self.encrypted: bool | None = None
        self._scores = 0

    def leave_out(self, sites: Sequence[str], reason: str) -> None:
        """Before the run: ``sites`` take no part (e.g. not connected when the job started).

        Every site must be told the same ``sites`` (the workflow's configuration
        does so), so that all start from the same participants.
        """
        for site in sorted(sites):
            if site in self.live and site != self.site:
                self.rules.drop(site, "schema", reason)
        self.live = self.rules.alive(self.live)

    # ------------------------------------------------------------------ run
    def run(self) -> dict:
        """Run the job at this site; return its final :meth:`status` (never raises)."""
        self.state = "running"
        try:
            self._run()
            self.state = "finished"
            logger.info("site %s: swarm job finished with %s", self.site, self.live)
        except _Stopped as err:
            self._failed(str(err))
        except Exception as err:  # noqa: BLE001 - whatever went wrong, the status says so
            expected = isinstance(err, (RuntimeError, PayloadError, ValueError))
            reason = str(err) if expected else f"{type(err).__name__}: {err}"
            logger.error("site %s: swarm job failed: %s", self.site, reason, exc_info=not expected)
            self._failed(reason)
        return self.status()

    def _failed(self, reason: str) -> None:
        self.state, self.error = "failed", reason
        if self.save_dir is not None:
            try:
                self.rules.write_results(self.save_dir, {}, None, status="failed", error=reason)
            except Exception:  # noqa: BLE001 - the status still carries the reason
                logger.exception("site %s: the failure could not be written", self.site)

    def _run(self) -> None:
        config, rules = self.job, self.rules
        if self.runner is None:
            self._exchange(protocol.SCHEMA, "schema", None)  # tells the others why, then stops
        payloads = self._exchange(
            protocol.SCHEMA,
            "schema",
            lambda: self._task(protocol.SCHEMA, seed=config.seed),
        )
        schema = rules.timed("schema", lambda: rules.build_schema(payloads))
        self._live_after_rules("schema")
        vote_on = config.election["enabled"]
        if vote_on:
            payloads = self._exchange(
                protocol.VOTE,
                "election",
                lambda: self._task(protocol.VOTE, schema=schema, vote=True),
            )
            ballot = rules.read_votes(payloads)
            self._live_after_rules("election")

            def score(features: list[str]) -> float:
                self._scores += 1
                key = f"score-{self._scores}-{payload_digest(sorted(features))[:16]}"
                replies = self._exchange(
                    key,
                    "election",
                    lambda: self._task(
                        protocol.SCORE_MASK,
                        features=list(features),
                        metric=config.election["metric"],
                    ),
                )
                value = rules.score_replies(replies)
                self._live_after_rules("election")
                return value

            elected = rules.timed("election", lambda: rules.elect(ballot, score))
        else:
            self._task(protocol.VOTE, schema=schema, vote=False)
            elected = list(rules.schema.features)
        want_inter = "intersection" in config.strategies
        payloads = self._exchange(
            protocol.TRAIN,
            "train",
            lambda: self._task(
                protocol.TRAIN,
                elected=elected,
                forest=config.forest,
                surrogates=config.surrogates,
                intersection=want_inter,
            ),
        )
        model = rules.timed("pool", lambda: rules.pool(payloads, want_inter))
        self._live_after_rules("train")
        self.model_digest = payload_digest(model)
        self.phase = "evaluate"
        start = time.monotonic()
        metrics = self.runner.run_task(
            protocol.EVALUATE,
            protocol.task_data(
                protocol.EVALUATE,
                model=model,
                strategies=config.strategies,
                voting=config.voting,
                depth_threshold=config.depth_threshold,
                metrics=config.metrics,
                auto_metric=config.auto_metric,
            ),
            save_dir=self.save_dir,
        )
        rules.add_time("evaluate", time.monotonic() - start)
        checked = rules.read_metrics({self.site: metrics})
        self._live_after_rules("evaluate")
        self.metrics = metrics
        if self.save_dir is not None:
            rules.write_results(self.save_dir, checked, model)

    # -------------------------------------------------------------- helpers
    def _task(self, task: str, **data) -> dict:
        return self.runner.run_task(task, protocol.task_data(task, **data))

    def _live_after_rules(self, phase: str) -> None:
        """Leave out the sites the job's rules dropped (the same at every site)."""
        self.live = self.rules.alive(self.live)
        if self.site not in self.live:
            raise _Stopped(
                f"the job's rules left this site out: {self.rules.dropped.get(self.site)}"
            )
        self.rules.check_min_sites(self.live, phase)

    def _deadline(self, phase: str) -> float | None:
        timeout = self.job.timeouts[phase]
        return time.monotonic() + timeout if timeout else None

    def _exchange(self, key: str, phase: str, compute: Callable[[], dict] | None) -> dict:
        """Send this site's payload for exchange ``key``; return the agreed ``{site: payload}``.

        ``compute`` makes the payload; if it raises (or is ``None``: the site
        did not start), the others are told why and this site stops.
        """
        self.phase = phase
        start = time.monotonic()
        deadline = self._deadline(phase)
        peers = [s for s in self.live if s != self.site]
        failure = None
        if compute is None:
            failure = self.startup_error or "the site did not start"
        else:
            try:
                body = compute()
            except Exception as err:  # noqa: BLE001 - the others are told, then this site stops
                logger.exception("site %s: %s failed", self.site, key)
                failure = f"{type(err).__name__}: {err}"
        if failure is not None:
            note = {"error": failure[:MAX_REASON]}
            self._send(peers, swarm_message("failed", key, self.digest, self.live, note), deadline)
            raise _Stopped(failure)
        logger.info("swarm %s: site %s sends its payload to %s", key, self.site, peers)
        self._send(peers, swarm_message("payload", key, self.digest, self.live, body), deadline)
        got = self.mailbox.wait(key, "payload", peers, deadline, self.abort)
        receipt = {self.site: {"digest": payload_digest(body)}}
        for site in peers:
            message, refused = got.get(site), self.mailbox.refusal(key, site)
            if message is None:
                if refused is not None:
                    receipt[site] = {"refused": refused[:MAX_REASON]}
            elif message["kind"] == "failed":
                receipt[site] = {"failed": message["body"]["error"]}
            elif message["view"] != self.live:
                receipt[site] = {
                    "refused": f"it continues with sites {message['view']}, "
                    f"{self.site} with {self.live}"
                }
            else:
                receipt[site] = {"digest": payload_digest(message["body"])}
        self._send(peers, swarm_message("receipt", key, self.digest, self.live, receipt), deadline)
        expected = [s for s in peers if "digest" in receipt.get(s, {})]
        receipts = self.mailbox.wait(key, "receipt", expected, self._deadline(phase), self.abort)
        held = {self.site: receipt, **{s: m["body"] for s, m in receipts.items()}}
        participants, dropped = agree(self.live, held)
        for site, why in dropped.items():
            self.rules.drop(site, phase, why)
        spent = time.monotonic() - start
        timing = phase if key.startswith("score-") else key
        self.rules.add_time(timing, spent)
        if self.site not in participants:
            raise _Stopped(f"the other sites left this site out: {dropped[self.site]}")
        self.live = participants
        self.rules.check_min_sites(self.live, phase)
        logger.info(
            "swarm %s: %d of %d sites agreed in %.1f s", key, len(participants), len(held), spent
        )
        payloads = {self.site: body}
        payloads.update({s: got[s]["body"] for s in participants if s != self.site})
        return dict(sorted(payloads.items()))

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


def read_swarm_status(
    payload: Any, sender: str, sites: Sequence[str], strategies, metrics
) -> dict[str, Any]:
    """Validate a site's :data:`~fedforest.protocol.SWARM_STATUS` (the server's side).

    Raises
    ------
    fedforest.PayloadError
        Naming the sender and the field.
    """
    r = PayloadReader(payload, protocol.SWARM_STATUS, sender)
    r.check_keys(STATUS_FIELDS)
    site = r.read_string("site")
    if site != sender:
        r.fail(f"it says it is site {site!r}")
    out: dict[str, Any] = {
        "state": r.read_choice("state", protocol.SWARM_STATES),
        "phase": r.read_string("phase")[:MAX_KEY],
        "error": None if r.get("error") is None else r.read_string("error")[:MAX_REASON],
        "participants": r.read_str_list("participants", len(sites), allow_empty=True),
        "model_digest": None,
        "metrics_withheld": r.read_boolean("metrics_withheld"),
        "encrypted": None if r.get("encrypted") is None else r.read_boolean("encrypted"),
    }
    unknown = sorted(set(out["participants"]) - set(sites))
    if unknown:
        r.refuse("participants", out["participants"], f"sites of this job ({list(sites)})")
    dropped = r.read_mapping("dropped", len(sites))
    for name, why in dropped.items():
        if name not in sites or not isinstance(why, str):
            r.refuse("dropped", dropped, "a dict of a site of this job to the reason")
    out["dropped"] = {k: v[:MAX_REASON] for k, v in dropped.items()}
    if r.get("model_digest") is not None:
        text = r.read_string("model_digest")
        if not is_digest(text):
            r.refuse("model_digest", text, "a SHA-256 digest in hex")
        out["model_digest"] = text
    seconds = r.read_mapping("phase_seconds", 16)
    for name, value in seconds.items():
        r.number(f"phase_seconds.{name}", value, 0)
    out["phase_seconds"] = {k: float(v) for k, v in seconds.items()}
    out["metrics"] = (
        None
        if r.get("metrics") is None
        else read_site_metrics(r.get("metrics"), sender, strategies, metrics)
    )
    return out


def summarize_swarm(
    job: JobConfig, statuses: Mapping[str, Mapping], error: str | None = None
) -> dict[str, Any]:
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
    return {
        "job": job.name,
        "mode": "swarm",
        "status": status,
        "error": error,
        "sites": list(job.sites),
        "site_states": states,
        "site_errors": errors,
        "dropped_sites": dropped,
        "classes_missing": {},
        "strategies": list(job.strategies),
        "metrics": {s: m["strategies"] for s, m in reported.items()},
        "test_rows": {s: m["rows"] for s, m in reported.items()},
        "metrics_withheld": [s for s in job.sites if statuses.get(s, {}).get("metrics_withheld")],
        "model_digest": next(iter(digests.values())) if len(set(digests.values())) == 1 else None,
        "model_digests": digests if len(set(digests.values())) > 1 else {},
        "phase_seconds": {s: dict(statuses[s].get("phase_seconds", {})) for s in finished},
        "privacy": {s: m.get("privacy") for s, m in reported.items()},
        "peer_messages_encrypted": {
            s: statuses.get(s, {}).get("encrypted") for s in job.sites if s in statuses
        },
    }
