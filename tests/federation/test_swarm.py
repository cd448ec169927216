"""Swarm mode without FLARE: the three demo sites run the whole job among themselves.

Every site runs a :class:`SwarmSite` in its own thread, with real data, real
:class:`SiteRunner` objects and real scikit-learn forests; messages travel by
:class:`InProcessTransport` into one :class:`Mailbox` per site. The server-mode
reference is computed in-process by the phase driver the FLARE controller
runs.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from fedforest import protocol
from fedforest.errors import PayloadError
from fedforest.federation.agreement import payload_digest
from fedforest.federation.config import JobConfig, SiteConfig
from fedforest.federation.config_sections import Timeouts
from fedforest.federation.driver import InProcessExchange, JobDriver
from fedforest.federation.messages import STATUS_FIELDS, read_message
from fedforest.federation.results import render_report, write_results_files
from fedforest.federation.server import JobServer
from fedforest.federation.site import SiteRunner
from fedforest.federation.swarm import (
    InProcessTransport,
    Mailbox,
    SwarmSite,
    job_digest,
    summarize_swarm,
    swarm_message,
)

from .test_site import SITES, make_job

#: Longest a whole swarm run may take before the test fails (it takes about 2 s).
JOIN_SECONDS = 120.0


# --------------------------------------------------------------------------- helpers
@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[JobConfig, Path]:
    """Small demo tables (150 rows a site), a swarm job of 6 trees a site, 3 tuning rounds."""
    folder = tmp_path_factory.mktemp("swarm_demo")
    config, _ = make_job(folder, rows=150, n_estimators=6, job={"mode": "swarm"})
    assert config.mode == "swarm" and config.min_sites == 2 and config.election.enabled
    return config, folder


class FailingRunner(SiteRunner):
    """A real site runner whose ``task`` raises, as a full disk at the hospital would."""

    error = "disk full while writing the trees"

    def __init__(self, config: SiteConfig, random_state: int = 0, task: str = protocol.TRAIN):
        super().__init__(config, random_state)
        self.failing_task = task

    def run_task(self, task, data, save_dir=None):
        if task == self.failing_task:
            raise OSError(self.error)
        return super().run_task(task, data, save_dir=save_dir)


def load_runners(folder: Path, config: JobConfig, failing: Sequence[str] = ()) -> dict:
    """Fresh, loaded runners of every site (``failing`` ones raise when asked to train)."""
    runners = {}
    for site in config.sites:
        cls = FailingRunner if site in failing else SiteRunner
        site_config = SiteConfig.load(
            folder / "site_configs" / f"{site}.yaml", task=config.task, validation=config.validation
        )
        runners[site] = cls(site_config, random_state=config.seed).load()
    return runners


def build_swarm(
    config: JobConfig,
    runners: Mapping,
    wrap: Mapping[str, Callable] | None = None,
    options: Mapping[str, dict] | None = None,
) -> tuple[dict[str, SwarmSite], dict[str, Mailbox]]:
    """One SwarmSite per runner, one Mailbox per site of the job.

    ``wrap[site]`` wraps that site's transport; ``options[site]`` are more
    keyword arguments of its SwarmSite.
    """
    digest = job_digest(config)
    boxes = {site: Mailbox(site, config.sites, digest) for site in config.sites}
    peers = {}
    for site, runner in runners.items():
        transport = InProcessTransport(site, boxes)
        if wrap and site in wrap:
            transport = wrap[site](transport)
        extra = (options or {}).get(site, {})
        peers[site] = SwarmSite(config, site, runner, transport, boxes[site], **extra)
    return peers, boxes


def run_swarm(peers: Mapping[str, SwarmSite]) -> dict[str, dict]:
    """Run every site in its own thread; return ``{site: final status}`` (a hang fails)."""
    out: dict[str, dict] = {}
    threads = {
        site: threading.Thread(
            target=lambda site=site: out.__setitem__(site, peers[site].run()),
            name=f"swarm-{site}",
            daemon=True,
        )
        for site in peers
    }
    for thread in threads.values():
        thread.start()
    deadline = time.monotonic() + JOIN_SECONDS
    for thread in threads.values():
        thread.join(max(0.0, deadline - time.monotonic()))
    hung = [site for site, thread in threads.items() if thread.is_alive()]
    if hung:
        for peer in peers.values():
            peer.abort.set()
    assert not hung, f"sites still running after {JOIN_SECONDS} s: {hung}"
    return out


def server_mode(config: JobConfig, runners: Mapping) -> tuple[JobServer, dict, dict]:
    """The job in server mode: the phase driver over the runners in this process.

    Every task crosses as a deep copy (as over the network); a task that raises
    drops its site, as a failed reply does. Returns the server, the pooled
    model and the checked metrics.
    """
    server = JobServer(config)
    driver = JobDriver(server, InProcessExchange(runners))
    results = driver.run()
    if not results.finished:
        raise RuntimeError(results.error)
    return server, driver.model, driver.metrics


def read_status(config: JobConfig, status: Mapping, sender: str | None = None) -> dict:
    return read_message(
        copy.deepcopy(status),
        sender or status["site"],
        protocol.SWARM_STATUS,
        sites=config.sites,
        strategies=config.strategies,
        metrics=config.metrics,
    )


# --------------------------------------------------------------------------- a full swarm job
@pytest.fixture(scope="module")
def full(demo, tmp_path_factory):
    """Every site runs to the end (each writes its own results); plus the server-mode run."""
    config, folder = demo
    save = tmp_path_factory.mktemp("swarm_full")
    options = {site: {"save_dir": save / site} for site in config.sites}
    peers, _ = build_swarm(config, load_runners(folder, config), options=options)
    statuses = run_swarm(peers)
    server, model, metrics = server_mode(config, load_runners(folder, config))
    return statuses, peers, save, (server, model, metrics)


def test_every_site_finishes_with_the_same_pooled_model(full, demo):
    config, _ = demo
    statuses, _, _, _ = full
    assert sorted(statuses) == sorted(SITES)
    for site, status in statuses.items():
        assert status["state"] == "finished", (site, status["error"])
        assert status["error"] is None and status["phase"] == "evaluate"
        assert status["participants"] == list(SITES) and status["dropped"] == {}
    digests = {status["model_digest"] for status in statuses.values()}
    assert len(digests) == 1 and None not in digests


def test_the_pooled_model_and_the_metrics_equal_the_server_modes(full):
    statuses, _, _, (server, model, metrics) = full
    assert server.dropped == {}
    for site, status in statuses.items():
        assert status["model_digest"] == payload_digest(model), site
        assert status["metrics"]["strategies"] == metrics[site]["strategies"], site
        assert status["metrics"]["rows"] == metrics[site]["rows"]


def test_the_status_holds_only_the_agreed_summary(full, demo):
    config, _ = demo
    statuses, _, _, _ = full
    for site, status in statuses.items():
        assert status["site"] == site and status["format"] == protocol.SWARM_STATUS
        assert status["version"] == protocol.FORMATS[protocol.SWARM_STATUS]
        assert set(status) == {"format", "version", *STATUS_FIELDS}
        assert not {"schema", "votes", "scores", "model", "forest"} & set(status)
        assert status["metrics_withheld"] is False
        assert {"schema", "election", "train", "pool", "evaluate"} <= set(status["phase_seconds"])
        assert all(v >= 0 for v in status["phase_seconds"].values())
        # no schema, vote, score, tree or imputer in what the server may see
        text = json.dumps(status)
        for field in ("leaf_bits", "tree_start", "n_rows", "site_columns", "scores"):
            assert f'"{field}"' not in text, field
        assert set(status["metrics"]) == {
            "format",
            "version",
            "site",
            "rows",
            "strategies",
            "privacy",
            "validation",
        }
        assert status["metrics"]["validation"] == "holdout"
        read = read_status(config, status)
        assert read["state"] == "finished" and read["model_digest"] == status["model_digest"]
        assert read["metrics"]["strategies"] == status["metrics"]["strategies"]


def test_each_site_writes_its_own_results(full):
    statuses, _, save, _ = full
    for site, status in statuses.items():
        results = json.loads((save / site / "results.json").read_text())
        assert results["status"] == "finished" and results["dropped_sites"] == {}
        assert set(results["metrics"]) == {site}  # a site knows only its own metrics
        assert results["metrics"][site] == status["metrics"]["strategies"]
        assert (save / site / "report.md").is_file()


def test_the_summary_of_a_finished_swarm(full, demo, tmp_path):
    config, _ = demo
    statuses, _, _, _ = full
    results = summarize_swarm(config, statuses)
    assert results["mode"] == "swarm" and results["status"] == "finished"
    assert results["error"] is None and results["site_errors"] == {}
    assert results["site_states"] == {site: "finished" for site in SITES}
    assert results["model_digest"] == statuses["site-1"]["model_digest"]
    assert results["model_digests"] == {} and results["dropped_sites"] == {}
    assert set(results["metrics"]) == set(SITES) and results["metrics_withheld"] == []
    write_results_files(tmp_path, results)
    assert json.loads((tmp_path / "results.json").read_text())["status"] == "finished"
    report = (tmp_path / "report.md").read_text()
    assert report.startswith(f"# fedforest job `{config.name}` (swarm mode): finished")
    assert "Every finished site pooled the same model" in report
    assert "## Phase timings (seconds, per site)" in report


# --------------------------------------------------------------------------- sites that fail
FAILED_TRAINING = f"OSError: {FailingRunner.error}"


def test_a_site_whose_training_fails_is_left_out_by_every_other_site(demo, tmp_path):
    config, folder = demo
    options = {site: {"save_dir": tmp_path / site} for site in config.sites}
    peers, _ = build_swarm(
        config, load_runners(folder, config, failing=["site-2"]), options=options
    )
    statuses = run_swarm(peers)
    failed = statuses["site-2"]
    assert failed["state"] == "failed" and failed["phase"] == "train"
    assert failed["error"] == FAILED_TRAINING
    assert failed["model_digest"] is None and failed["metrics"] is None
    reason = f"train: it failed: {FAILED_TRAINING}"
    for site in ("site-1", "site-3"):
        status = statuses[site]
        assert status["state"] == "finished", (site, status["error"])
        assert status["dropped"] == {"site-2": reason}
        assert status["participants"] == ["site-1", "site-3"]
    assert statuses["site-1"]["model_digest"] == statuses["site-3"]["model_digest"]
    # the failing site wrote its failure; the others name it in their results
    assert json.loads((tmp_path / "site-2" / "results.json").read_text())["status"] == "failed"
    assert json.loads((tmp_path / "site-1" / "results.json").read_text())["dropped_sites"] == {
        "site-2": reason
    }
    # the same model as the server pools when that site's training fails
    server, model, _ = server_mode(config, load_runners(folder, config, failing=["site-2"]))
    assert list(server.dropped) == ["site-2"]
    assert statuses["site-1"]["model_digest"] == payload_digest(model)
    # the server's summary names the failing site with its own error
    results = summarize_swarm(config, statuses)
    assert results["status"] == "finished"
    assert results["dropped_sites"] == {"site-2": reason}
    assert results["site_errors"] == {"site-2": FAILED_TRAINING}
    assert set(results["metrics"]) == {"site-1", "site-3"}


def test_below_min_sites_every_site_stops_with_the_same_message(demo):
    config, folder = demo
    strict = dataclasses.replace(config, min_sites=3)
    peers, _ = build_swarm(strict, load_runners(folder, strict, failing=["site-2"]))
    statuses = run_swarm(peers)
    assert {s: st["state"] for s, st in statuses.items()} == {s: "failed" for s in SITES}
    assert statuses["site-2"]["error"] == FAILED_TRAINING
    errors = {statuses[s]["error"] for s in ("site-1", "site-3")}
    assert len(errors) == 1
    (error,) = errors
    assert "fewer than min_sites=3" in error and "phase train" in error
    assert f"site-2 (train: it failed: {FAILED_TRAINING})" in error
    assert all(statuses[s]["model_digest"] is None for s in SITES)
    # the server's summary: failed, with the first failed site's own message
    results = summarize_swarm(strict, statuses)
    assert results["status"] == "failed" and results["error"] == error
    assert results["site_errors"]["site-2"] == FAILED_TRAINING
    assert "(swarm mode): failed" in render_report(results)


def test_a_site_that_did_not_start_is_named_with_its_reason(demo):
    config, folder = demo
    runners = load_runners(folder, config)
    runners["site-3"] = None
    why = "data file /secure/site-3.csv: no such file"
    peers, _ = build_swarm(config, runners, options={"site-3": {"startup_error": why}})
    statuses = run_swarm(peers)
    assert statuses["site-3"]["state"] == "failed" and statuses["site-3"]["error"] == why
    for site in ("site-1", "site-2"):
        assert statuses[site]["state"] == "finished", statuses[site]["error"]
        assert statuses[site]["dropped"] == {"site-3": f"schema: it failed: {why}"}
        assert statuses[site]["participants"] == ["site-1", "site-2"]


def test_sites_left_out_before_the_run_are_named_and_never_waited_for(demo):
    config, folder = demo
    runners = load_runners(folder, config)
    del runners["site-3"]  # not connected: it never runs
    peers, _ = build_swarm(config, runners)
    for peer in peers.values():
        peer.leave_out(["site-3"], "it was not connected when the job started")
    start = time.monotonic()
    statuses = run_swarm(peers)
    assert time.monotonic() - start < config.timeouts.schema  # no deadline was waited out
    for site in ("site-1", "site-2"):
        assert statuses[site]["state"] == "finished", statuses[site]["error"]
        assert statuses[site]["dropped"] == {
            "site-3": "schema: it was not connected when the job started"
        }
        assert statuses[site]["participants"] == ["site-1", "site-2"]
    assert statuses["site-1"]["model_digest"] == statuses["site-2"]["model_digest"]


def test_a_site_that_never_answers_is_left_out_at_the_deadline(demo):
    config, folder = demo
    quick = dataclasses.replace(
        config, timeouts=Timeouts(schema=1.0, election=300.0, train=300.0, evaluate=300.0)
    )
    runners = load_runners(folder, quick)
    del runners["site-3"]  # its mailbox exists, but it sends nothing
    peers, _ = build_swarm(quick, runners)
    start = time.monotonic()
    statuses = run_swarm(peers)
    assert time.monotonic() - start >= 1.0
    for site in ("site-1", "site-2"):
        assert statuses[site]["state"] == "finished", statuses[site]["error"]
        assert statuses[site]["dropped"] == {
            "site-3": "schema: no message from it reached any site in time"
        }


# --------------------------------------------------------------------------- hostile peers
class Equivocating:
    """A transport that alters the payload of one exchange for one target only."""

    def __init__(self, inner: InProcessTransport, target: str, key: str):
        self.inner, self.target, self.key = inner, target, key

    def send(self, targets, message, timeout):
        out = {}
        for target in targets:
            sent = message
            if target == self.target and message["kind"] == "payload":
                if message["key"] == self.key:
                    sent = copy.deepcopy(dict(message))
                    sent["body"] = tampered(sent["body"])
            out.update(self.inner.send([target], sent, timeout))
        return out


def tampered(body: dict) -> dict:
    """The same kind of payload with one value changed (still well-formed)."""
    if body.get("format") == protocol.SITE_SCHEMA:
        return {**body, "n_rows": body["n_rows"] + 1}
    forest = dict(body["forest"])
    forest["threshold"] = forest["threshold"].copy()
    forest["threshold"][0] += 0.25
    return {**body, "forest": forest}


@pytest.mark.parametrize("key", [protocol.SCHEMA, protocol.TRAIN])
def test_a_site_sending_different_payloads_is_left_out_by_all(demo, key):
    config, folder = demo
    wrap = {"site-2": lambda inner: Equivocating(inner, "site-3", key)}
    peers, _ = build_swarm(config, load_runners(folder, config), wrap=wrap)
    statuses = run_swarm(peers)
    phase = protocol.TASK_PHASE[key]
    reason = "it sent different payloads to different sites (2 versions)"
    for site in ("site-1", "site-3"):
        assert statuses[site]["state"] == "finished", statuses[site]["error"]
        assert statuses[site]["dropped"] == {"site-2": f"{phase}: {reason}"}
    assert statuses["site-1"]["model_digest"] == statuses["site-3"]["model_digest"]
    assert statuses["site-2"]["state"] == "failed"
    assert statuses["site-2"]["error"] == f"the other sites left this site out: {reason}"


@pytest.fixture
def mailbox(demo) -> Mailbox:
    config, _ = demo
    return Mailbox("site-1", config.sites, job_digest(config))


def message(config: JobConfig, kind="payload", key=protocol.SCHEMA, body=None, **changes) -> dict:
    out = swarm_message(kind, key, job_digest(config), config.sites, body or {"n": 1})
    out.update(changes)
    return out


def refused(box: Mailbox, sender: str, payload, *parts: str) -> str:
    with pytest.raises(PayloadError) as err:
        box.put(sender, payload)
    text = str(err.value)
    assert f"payload from {sender!r} refused" in text, text
    for part in parts:
        assert part in text, text
    return text


def test_a_well_formed_message_is_kept_and_waited_for(demo, mailbox):
    config, _ = demo
    mailbox.put("site-2", message(config, body={"n": 2}))
    got = mailbox.wait(protocol.SCHEMA, "payload", ["site-2"], time.monotonic() + 1)
    assert got == {"site-2": {"kind": "payload", "view": list(SITES), "body": {"n": 2}}}


def test_a_message_of_other_job_settings_is_refused(demo, mailbox):
    config, _ = demo
    other = dataclasses.replace(config, seed=config.seed + 1)
    assert job_digest(other) != job_digest(config)
    assert job_digest(dataclasses.replace(config, source="elsewhere.yaml")) == job_digest(config)
    refused(mailbox, "site-2", message(other), "other job settings")
    assert "other job settings" in mailbox.refusal(protocol.SCHEMA, "site-2")


@pytest.mark.parametrize("sender", ["site-9", "site-1", "Site-2"])
def test_a_message_from_an_unknown_sender_or_from_itself_is_refused(demo, mailbox, sender):
    config, _ = demo
    refused(mailbox, sender, message(config), "is not another site of this job")


RECEIPT = {"site-1": {"digest": "a" * 64}}

MALFORMED = [
    pytest.param(
        lambda m: {k: v for k, v in m.items() if k != "body"}, "'body' is missing", id="no body"
    ),
    pytest.param(
        lambda m: {k: v for k, v in m.items() if k != "job"}, "'job' is missing", id="no job"
    ),
    pytest.param(lambda m: {**m, "extra": 1}, "unknown fields ['extra']", id="extra field"),
    pytest.param(lambda m: {**m, "format": protocol.MODEL}, "field 'format'", id="wrong format"),
    pytest.param(lambda m: {**m, "version": 2}, "upgrade fedforest", id="future version"),
    pytest.param(lambda m: {**m, "body": [1, 2]}, "field 'body'", id="body a list"),
    pytest.param(lambda m: {**m, "body": "text"}, "field 'body'", id="body text"),
    pytest.param(lambda m: {**m, "kind": "gossip"}, "field 'kind'", id="unknown kind"),
    pytest.param(lambda m: {**m, "key": "k" * 81}, "at most 80 characters", id="long key"),
    pytest.param(lambda m: {**m, "view": ["site-1", "site-9"]}, "field 'view'", id="unknown view"),
    pytest.param(lambda m: [m], "expected a dict", id="not a dict"),
    pytest.param(
        lambda m: {**m, "kind": "failed", "body": {"reason": "x"}},
        "'error' is missing",
        id="failed",
    ),
    pytest.param(
        lambda m: {**m, "kind": "receipt", "body": {"site-1": {"digest": "xyz"}}},
        "a SHA-256 digest in hex",
        id="receipt bad digest",
    ),
    pytest.param(
        lambda m: {**m, "kind": "receipt", "body": {"site-1": {"digest": "A" * 64}}},
        "a SHA-256 digest in hex",
        id="receipt upper-case digest",
    ),
    pytest.param(
        lambda m: {**m, "kind": "receipt", "body": {"site-1": {"seen": "yes"}}},
        "field 'seen' is unknown",
        id="receipt unknown kind",
    ),
    pytest.param(
        lambda m: {**m, "kind": "receipt", "body": {"site-1": {"digest": "a" * 64, "failed": "x"}}},
        "expected one of",
        id="receipt two kinds",
    ),
    pytest.param(
        lambda m: {**m, "kind": "receipt", "body": {"site-9": {"digest": "a" * 64}}},
        "an entry for a site of this job",
        id="receipt unknown site",
    ),
]


@pytest.mark.parametrize(("change", "part"), MALFORMED)
def test_a_malformed_envelope_is_refused_naming_the_sender(demo, mailbox, change, part):
    config, _ = demo
    refused(mailbox, "site-2", change(message(config)), part)
    assert mailbox.wait(protocol.SCHEMA, "payload", ["site-2"], time.monotonic()) == {}


def test_a_refusal_is_remembered_for_the_receipt(demo, mailbox):
    config, _ = demo
    text = refused(mailbox, "site-3", message(config, body=None, kind="failed"), "'error'")
    assert mailbox.refusal(protocol.SCHEMA, "site-3") == text
    assert mailbox.refusal(protocol.SCHEMA, "site-2") is None
    # the wait does not block on a refused sender
    start = time.monotonic()
    assert mailbox.wait(protocol.SCHEMA, "payload", ["site-3"], start + 30) == {}
    assert time.monotonic() - start < 5


def test_a_valid_receipt_and_failure_are_kept(demo, mailbox):
    config, _ = demo
    receipt = {"site-1": {"digest": "a" * 64}, "site-3": {"failed": "OSError: x"}}
    mailbox.put("site-2", message(config, kind="receipt", body=receipt))
    mailbox.put("site-3", message(config, kind="failed", body={"error": "e" * 5000}))
    got = mailbox.wait(protocol.SCHEMA, "receipt", ["site-2"], time.monotonic() + 1)
    assert got["site-2"]["body"] == receipt
    failed = mailbox.wait(protocol.SCHEMA, "payload", ["site-3"], time.monotonic() + 1)
    assert failed["site-3"]["body"] == {"error": "e" * 2000}  # cut to MAX_REASON


def test_the_same_message_twice_is_accepted_a_different_second_one_refused(demo, mailbox):
    config, _ = demo
    first = message(config, body={"n": 1})
    mailbox.put("site-2", first)
    mailbox.put("site-2", copy.deepcopy(first))  # a retried delivery
    refused(
        mailbox,
        "site-2",
        message(config, body={"n": 2}),
        "a second, different payload message for exchange 'schema'",
    )
    got = mailbox.wait(protocol.SCHEMA, "payload", ["site-2"], time.monotonic() + 1)
    assert got["site-2"]["body"] == {"n": 1}  # the first one stays
    # a receipt is another slot of the same exchange
    mailbox.put("site-2", message(config, kind="receipt", body=RECEIPT))


# --------------------------------------------------------------------------- report_metrics
@pytest.fixture(scope="module")
def withheld(demo):
    """site-3 keeps its metrics from the server (``report_metrics: false``)."""
    config, folder = demo
    options = {"site-3": {"report_metrics": False}}
    peers, _ = build_swarm(config, load_runners(folder, config), options=options)
    return run_swarm(peers), peers


def test_a_site_can_withhold_its_metrics_from_its_status(withheld, full):
    statuses, peers = withheld
    assert all(status["state"] == "finished" for status in statuses.values())
    assert statuses["site-3"]["metrics"] is None
    assert statuses["site-3"]["metrics_withheld"] is True
    assert peers["site-3"].metrics is not None  # it evaluated, it only keeps them
    for site in ("site-1", "site-2"):
        assert statuses[site]["metrics_withheld"] is False
        assert statuses[site]["metrics"] == full[0][site]["metrics"]


def test_the_summary_shows_withheld_metrics(withheld, demo, tmp_path):
    config, _ = demo
    statuses, _ = withheld
    read = {site: read_status(config, status) for site, status in statuses.items()}
    assert read["site-3"]["metrics"] is None and read["site-3"]["metrics_withheld"] is True
    results = summarize_swarm(config, statuses)
    assert results["status"] == "finished"
    assert results["model_digest"] == statuses["site-1"]["model_digest"]
    assert set(results["metrics"]) == {"site-1", "site-2"}
    assert set(results["test_rows"]) == {"site-1", "site-2"}
    assert results["metrics_withheld"] == ["site-3"]
    write_results_files(tmp_path, results)
    report = (tmp_path / "report.md").read_text()
    assert "(swarm mode)" in report
    assert "| site-3 | finished | withheld by the site |" in report
    assert "| site-1 | finished | reported |" in report
    assert "### site-3" not in report and "### site-1" in report


def status_of(site: str, state: str, error=None, digest="b" * 64) -> dict:
    return {
        "format": protocol.SWARM_STATUS,
        "version": protocol.FORMATS[protocol.SWARM_STATUS],
        "site": site,
        "state": state,
        "phase": "train",
        "error": error,
        "participants": [],
        "dropped": {},
        "model_digest": digest if state == "finished" else None,
        "phase_seconds": {},
        "metrics": None,
        "metrics_withheld": False,
    }


def test_the_summary_fails_below_min_sites_with_the_failed_sites_error(demo):
    config, _ = demo
    statuses = {
        "site-1": status_of("site-1", "finished"),
        "site-2": status_of("site-2", "failed", error="phase train: only 1 site(s) left"),
        "site-3": status_of("site-3", "running"),
    }
    results = summarize_swarm(config, statuses)
    assert results["status"] == "failed"
    assert results["error"] == "phase train: only 1 site(s) left"
    assert results["site_errors"] == {
        "site-2": "phase train: only 1 site(s) left",
        "site-3": "it stopped in state running",
    }
    assert results["model_digest"] == "b" * 64  # the one finished site's
    # a site that never reported counts as failed
    del statuses["site-3"]
    statuses["site-2"] = status_of("site-2", "finished", digest="c" * 64)
    results = summarize_swarm(config, statuses)
    assert results["status"] == "finished"
    assert results["site_states"]["site-3"] == "failed"
    assert results["site_errors"] == {"site-3": "it never reported its status"}
    assert results["model_digest"] is None  # two different models
    assert results["model_digests"] == {"site-1": "b" * 64, "site-2": "c" * 64}
    assert "The finished sites pooled different models" in render_report(results)
    # the server's own error wins
    results = summarize_swarm(config, statuses, error="the job was aborted")
    assert results["status"] == "failed" and results["error"] == "the job was aborted"


# --------------------------------------------------------------------------- read_swarm_status
BAD_STATUS = [
    pytest.param({"site": "site-2"}, "it says it is site 'site-2'", id="another site"),
    pytest.param({"state": "done"}, "field 'state'", id="unknown state"),
    pytest.param({"model_digest": "abc"}, "a SHA-256 digest in hex", id="short digest"),
    pytest.param({"model_digest": "G" * 64}, "a SHA-256 digest in hex", id="not hex"),
    pytest.param({"participants": ["site-1", "site-9"]}, "field 'participants'", id="unknown"),
    pytest.param({"dropped": {"site-9": "gone"}}, "field 'dropped'", id="dropped unknown"),
    pytest.param({"dropped": {"site-2": 3}}, "field 'dropped'", id="dropped not text"),
    pytest.param({"phase_seconds": {"train": -1}}, "phase_seconds.train", id="negative time"),
    pytest.param({"metrics_withheld": "no"}, "field 'metrics_withheld'", id="withheld text"),
    pytest.param({"extra": 1}, "unknown fields ['extra']", id="extra field"),
    pytest.param({"version": 2}, "upgrade fedforest", id="future version"),
]


@pytest.mark.parametrize(("change", "part"), BAD_STATUS)
def test_a_bad_status_is_refused_naming_the_sender(full, demo, change, part):
    config, _ = demo
    statuses, _, _, _ = full
    status = {**copy.deepcopy(statuses["site-1"]), **change}
    with pytest.raises(PayloadError) as err:
        read_status(config, status, sender="site-1")
    text = str(err.value)
    assert "payload from 'site-1' refused" in text and part in text, text


def test_a_status_with_bad_metrics_is_refused(full, demo):
    config, _ = demo
    status = copy.deepcopy(full[0]["site-1"])
    del status["metrics"]["strategies"]["mp"]
    with pytest.raises(PayloadError, match="payload from 'site-1' refused.*strategies"):
        read_status(config, status)


def test_trees_per_site_in_swarm_mode_gives_the_server_modes_models_and_metrics(demo, tmp_path):
    """Each site keeps its own share of the forest it pooled itself, the one the server
    would send it: the same pooled model everywhere, and every site's metrics equal to
    server mode's."""
    from fedforest.model.pooled_model import load_model

    config, folder = demo
    capped = dataclasses.replace(config, trees_per_site=10)
    options = {site: {"save_dir": tmp_path / site} for site in capped.sites}
    peers, _ = build_swarm(capped, load_runners(folder, capped), options=options)
    statuses = run_swarm(peers)
    server, model, metrics = server_mode(capped, load_runners(folder, capped))
    for site, status in statuses.items():
        assert status["state"] == "finished", (site, status["error"])
        assert status["model_digest"] == payload_digest(model), site  # the whole pooled model
        assert status["metrics"]["strategies"] == metrics[site]["strategies"], site
        kept = load_model(tmp_path / site / "pooled_model.npz").forest
        assert kept.n_trees == 10 and kept.owner_mask(site).sum() == 6
