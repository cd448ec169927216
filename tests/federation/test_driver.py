"""The phase driver without FLARE: the order, the drops, min_sites, the deadline, the results."""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import re
import time
from pathlib import Path

import numpy as np
import pytest

from fedforest import protocol
from fedforest.federation.agreement import payload_digest
from fedforest.federation.config import JobConfig, SiteConfig
from fedforest.federation.driver import (
    Deadline,
    InProcessExchange,
    JobDriver,
    Replies,
    SiteStopped,
    seconds_text,
)
from fedforest.federation.job_results import RESULTS_FORMAT, RESULTS_VERSION
from fedforest.federation.server import JobServer
from fedforest.federation.site import SiteRunner

from .test_site import SITES, make_job, run_job


# --------------------------------------------------------------------------- helpers
@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[JobConfig, Path]:
    """Small demo tables (150 rows a site), 6 trees a site, 3 tuning rounds, min_sites 2."""
    folder = tmp_path_factory.mktemp("driver_demo")
    config, _ = make_job(folder, rows=150, n_estimators=6)
    assert config.min_sites == 2 and config.election.auto_tune
    return config, folder


class FailingRunner(SiteRunner):
    """A real site runner whose ``task`` raises, as a full disk at the hospital would."""

    def __init__(self, config: SiteConfig, random_state: int = 0, task: str = protocol.TRAIN):
        super().__init__(config, random_state)
        self.failing_task = task

    def run_task(self, task, data, save_dir=None):
        if task == self.failing_task:
            raise OSError("disk full")
        return super().run_task(task, data, save_dir=save_dir)


def runners(folder: Path, config: JobConfig, failing: dict[str, str] | None = None) -> dict:
    """Fresh, loaded runners; ``failing`` maps a site to the task it fails in."""
    out = {}
    for site in config.sites:
        site_config = SiteConfig.load(
            folder / "site_configs" / f"{site}.yaml", task=config.task, validation=config.validation
        )
        if site in (failing or {}):
            out[site] = FailingRunner(site_config, config.seed, failing[site]).load()
        else:
            out[site] = SiteRunner(site_config, config.seed).load()
    return out


class Scripted:
    """An exchange that changes the replies of one task after the sites answered."""

    def __init__(self, inner, task: str, change):
        self.inner, self.task, self.change = inner, task, change
        self.requests = []

    def ask(self, request):
        self.requests.append(request)
        replies = self.inner.ask(request)
        if request.task == self.task:
            self.change(replies)
        return replies


def no_election(config: JobConfig, **job) -> JobConfig:
    """The job with the election off (a schema round, then the schema to the sites)."""
    election = dataclasses.replace(config.election, enabled=False)
    return dataclasses.replace(config, election=election, **job)


def results_file(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text())


# --------------------------------------------------------------------------- the whole job
@pytest.fixture(scope="module")
def full(demo, tmp_path_factory):
    config, folder = demo
    run_dir = tmp_path_factory.mktemp("driver_full")
    seen = Scripted(InProcessExchange(runners(folder, config), save_root=run_dir), None, None)
    hooks = {"elected": [], "pooled": [], "evaluated": [], "progress": []}
    driver = JobDriver(
        JobServer(config),
        seen,
        run_dir=run_dir,
        on_elected=lambda rules: hooks["elected"].append(rules.election.selected),
        on_pooled=lambda model: hooks["pooled"].append(payload_digest(model)),
        on_evaluated=lambda metrics: hooks["evaluated"].append(sorted(metrics)),
        progress=hooks["progress"].append,
    )
    return driver, driver.run(), seen, hooks, run_dir


def test_the_phases_run_in_order_with_the_protocols_task_data(full):
    driver, results, seen, _, _ = full
    assert results.finished, results.error
    tasks = [r.task for r in seen.requests]
    rounds = tasks.count(protocol.SCORE_MASK)
    assert tasks == [
        protocol.SCHEMA,
        protocol.VOTE,
        *[protocol.SCORE_MASK] * rounds,
        protocol.TRAIN,
        protocol.EVALUATE,
    ]
    for request in seen.requests:
        assert list(request.data) == list(protocol.TASK_DATA[request.task])
        assert request.phase == protocol.TASK_PHASE[request.task]
        assert request.targets == list(SITES) and request.collect
    # one score_mask round per mask the tuning scored (a mask seen before is reused)
    history = results.tuning["history"]
    assert rounds == sum(not h["reused"] for h in history) >= 1


def test_the_driver_gives_the_same_job_as_the_phase_by_phase_harness(full, demo, tmp_path):
    config, folder = demo
    driver, results, _, _, _ = full
    job = run_job(config, runners(folder, config), tmp_path / "run")
    assert results.election["selected"] == job.elected
    assert results.tuning == job.server.tuning.to_dict()
    assert payload_digest(driver.model) == payload_digest(job.model)
    assert results.metrics == {s: m["strategies"] for s, m in job.metrics.items()}
    assert results.dropped_sites == {} and results.sites == list(SITES)


def test_results_timings_and_files(full):
    driver, results, _, _, run_dir = full
    saved = results_file(run_dir)
    assert saved["format"] == RESULTS_FORMAT and saved["version"] == RESULTS_VERSION
    assert saved == json.loads(json.dumps(results.to_dict(), default=str))
    assert set(saved["phase_seconds"]) == {
        "schema",
        "vote",
        "election",
        "train",
        "pool",
        "evaluate",
    }
    assert (run_dir / "report.md").read_text().startswith("# fedforest job `fedforest-demo`")
    for site in SITES:  # the sites saved the pooled model and their metrics
        assert (run_dir / site / "pooled_model.npz").is_file()
        assert (run_dir / site / "metrics.json").is_file()


def test_the_hooks_are_called_once_each(full):
    driver, results, _, hooks, _ = full
    assert hooks["elected"] == [results.election["selected"]]
    assert hooks["pooled"] == [payload_digest(driver.model)]
    assert hooks["evaluated"] == [list(SITES)]


def test_one_progress_line_per_round_and_one_at_the_end(full):
    _, results, seen, hooks, _ = full
    lines = hooks["progress"]
    rounds = [r.task for r in seen.requests].count(protocol.SCORE_MASK)
    shown = [
        "schema",
        "vote",
        *[f"election tuning round {k}" for k in range(1, rounds + 1)],
        "train",
        "evaluate",
    ]
    assert len(lines) == len(shown) + 1 and lines[-1] == "job finished"
    for line, phase in zip(lines, shown, strict=False):
        assert re.fullmatch(rf"{phase}: 3 of 3 sites replied, \d+\.\d s", line), line


def test_progress_lines_go_to_the_progress_logger_by_default(demo, caplog):
    config, folder = demo
    quick = no_election(config)
    with caplog.at_level(logging.INFO, logger="fedforest.progress"):
        JobDriver(JobServer(quick), InProcessExchange(runners(folder, quick))).run()
    lines = [r.getMessage() for r in caplog.records if r.name == "fedforest.progress"]
    assert [line.split(":")[0] for line in lines] == [
        "schema",
        "vote",
        "train",
        "evaluate",
        "job finished",
    ]


def test_a_failing_progress_receiver_never_fails_the_job(demo):
    config, folder = demo
    quick = no_election(config)

    def broken(line):
        raise OSError("the terminal went away")

    exchange = InProcessExchange(runners(folder, quick))
    assert JobDriver(JobServer(quick), exchange, progress=broken).run().finished


# --------------------------------------------------------------------------- faults
@pytest.mark.parametrize(
    "task", [protocol.SCHEMA, protocol.VOTE, protocol.SCORE_MASK, protocol.TRAIN, protocol.EVALUATE]
)
def test_a_site_failing_in_any_phase_is_dropped_and_the_job_goes_on(demo, task):
    config, folder = demo
    exchange = InProcessExchange(runners(folder, config, failing={"site-2": task}))
    driver = JobDriver(JobServer(config), exchange)
    results = driver.run()
    assert results.finished, results.error
    assert results.dropped_sites == {"site-2": f"{task}: OSError: disk full"}
    assert sorted(results.metrics) == ["site-1", "site-3"]
    if task != protocol.EVALUATE:
        assert results.model.owners == ["site-1", "site-3"]


def test_below_min_sites_the_job_fails_and_says_why(demo, tmp_path):
    config, folder = demo
    strict = dataclasses.replace(config, min_sites=3)
    exchange = InProcessExchange(runners(folder, strict, failing={"site-2": protocol.TRAIN}))
    lines = []
    results = JobDriver(JobServer(strict), exchange, run_dir=tmp_path, progress=lines.append).run()
    assert results.status == "failed"
    # the round names the site it dropped; the last line says why the job failed
    assert re.fullmatch(r"train: 2 of 3 sites replied, \d+\.\d s \(dropped: site-2\)", lines[-2])
    assert lines[-1] == f"job failed: {results.error}"
    assert results.error == (
        "phase train: only 2 site(s) left (site-1, site-3), fewer than min_sites=3. "
        "Dropped: site-2 (train: OSError: disk full)"
    )
    saved = results_file(tmp_path)
    assert saved["status"] == "failed" and saved["error"] == results.error
    assert saved["election"]["selected"] and "model" not in saved and saved["metrics"] == {}
    assert f"**Error:** {results.error}" in (tmp_path / "report.md").read_text()


def test_min_sites_is_checked_before_a_round(demo):
    config, folder = demo
    rules = JobServer(dataclasses.replace(config, min_sites=3))
    rules.drop("site-3", "schema", "it was not connected")
    seen = Scripted(InProcessExchange(runners(folder, config)), None, None)
    results = JobDriver(rules, seen).run()
    assert results.error.startswith("phase schema: only 2 site(s) left (site-1, site-2)")
    assert seen.requests == []  # nothing was sent


def test_an_unexpected_error_fails_the_job_with_its_type(demo, tmp_path):
    class Broken:
        def ask(self, request):
            raise KeyError("x")

    config, _ = demo
    results = JobDriver(JobServer(config), Broken(), run_dir=tmp_path).run()
    assert results.status == "failed" and results.error == "KeyError: 'x'"
    assert results_file(tmp_path)["error"] == "KeyError: 'x'"


# --------------------------------------------------------------------------- drop reasons
def remove(site: str, **changes):
    """A change of the replies: ``site``'s payload is gone; ``changes`` set other fields."""

    def change(replies: Replies) -> None:
        replies.payloads.pop(site, None)
        for key, value in changes.items():
            setattr(replies, key, value)

    return change


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (remove("site-3", closed_by="timeout"), "no reply within the schema timeout of 120 s"),
        (remove("site-3"), "no reply: the site stopped or lost its connection"),
        (remove("site-3", took=["site-1", "site-2"]), "never took the task"),
        (lambda r: r.payloads.update({"site-3": None}), "the reply carries no payload"),
        (
            lambda r: (r.payloads.pop("site-3"), r.errors.update({"site-3": "EXEC: boom"})),
            "EXEC: boom",
        ),
    ],
    ids=["timeout", "no-reply", "never-took", "no-payload", "error"],
)
def test_what_a_missing_reply_is_called(demo, change, reason):
    config, folder = demo
    config = no_election(config)
    exchange = Scripted(InProcessExchange(runners(folder, config)), protocol.SCHEMA, change)
    driver = JobDriver(JobServer(config), exchange)
    driver.elect()
    assert driver.rules.dropped == {"site-3": f"schema: {reason}"}
    assert driver.live() == ["site-1", "site-2"]
    assert exchange.requests[-1].targets == ["site-1", "site-2"]  # not sent to site-3 again


def test_the_reason_when_wait_after_min_closes_the_phase(demo, monkeypatch):
    config, folder = demo
    config = no_election(config, wait_after_min=2.5)
    exchange = Scripted(
        InProcessExchange(runners(folder, config)),
        protocol.SCHEMA,
        remove("site-3", closed_by="wait_after_min"),
    )
    driver = JobDriver(JobServer(config), exchange)
    driver.elect()
    reason = driver.rules.dropped["site-3"]
    assert reason.startswith(
        "schema: no reply within wait_after_min=2.5 s after min_sites=2 sites had replied ("
    )
    assert reason.endswith(" s into the phase; the schema timeout of 120 s had not passed)")
    deadline = exchange.requests[0].deadline
    assert (deadline.timeout, deadline.wait_after_min, deadline.min_replies) == (120.0, 2.5, 2)


def test_drops_and_payloads_do_not_depend_on_the_order_of_the_replies(demo):
    def reverse(replies: Replies) -> None:
        replies.payloads = dict(reversed(list(replies.payloads.items())))
        replies.errors = dict(reversed(list(replies.errors.items())))

    config, folder = demo
    config = no_election(config)
    out = []
    for change in (lambda r: None, reverse):
        inner = InProcessExchange(runners(folder, config, failing={"site-3": protocol.TRAIN}))
        drop = remove("site-1", closed_by="timeout")
        exchange = Scripted(inner, protocol.TRAIN, lambda r, c=change, d=drop: (c(r), d(r)))
        driver = JobDriver(JobServer(dataclasses.replace(config, min_sites=1)), exchange)
        results = driver.run()
        assert results.finished, results.error
        out.append((list(results.dropped_sites.items()), payload_digest(driver.model)))
    assert out[0] == out[1]
    assert [site for site, _ in out[0][0]] == ["site-1", "site-3"]  # site order


def test_a_site_not_asked_is_neither_waited_for_nor_dropped(demo):
    config, folder = demo
    every = dataclasses.replace(no_election(config), min_sites=3)
    exchange = InProcessExchange(runners(folder, every), ask_first={protocol.EVALUATE: 2})
    results = JobDriver(JobServer(every), exchange).run()
    assert results.finished, results.error
    assert sorted(results.metrics) == ["site-1", "site-2"] and results.dropped_sites == {}


# --------------------------------------------------------------------------- modes
def test_strict_mode_refuses_a_site_that_cannot_take_part(demo):
    def impostor(replies: Replies) -> None:
        replies.payloads["site-3"]["site"] = "site-1"

    config, folder = demo
    exchange = Scripted(InProcessExchange(runners(folder, config)), protocol.SCHEMA, impostor)
    with pytest.raises(ValueError, match="site 'site-3' cannot take part: schema: payload from"):
        JobDriver(JobServer(config), exchange, strict=True).elect()


def test_a_site_driver_stops_when_the_others_leave_it_out(demo):
    config, folder = demo
    exchange = Scripted(
        InProcessExchange(runners(folder, config)),
        protocol.SCHEMA,
        lambda r: (r.payloads.pop("site-2"), r.errors.update({"site-2": "it sent two payloads"})),
    )
    driver = JobDriver(JobServer(config), exchange, site="site-2", drops="phase")
    results = driver.run()
    assert results.status == "failed"
    assert results.error == "the other sites left this site out: it sent two payloads"
    assert driver.rules.dropped == {"site-2": "schema: it sent two payloads"}


def test_a_site_driver_stops_when_the_rules_leave_it_out(demo):
    def impostor(replies: Replies) -> None:
        replies.payloads["site-2"]["site"] = "site-9"

    config, folder = demo
    exchange = Scripted(InProcessExchange(runners(folder, config)), protocol.SCHEMA, impostor)
    driver = JobDriver(JobServer(config), exchange, site="site-2", drops="phase")
    results = driver.run()
    assert results.error.startswith(
        "the job's rules left this site out: schema: payload from 'site-2' refused: it says"
    )
    with pytest.raises(SiteStopped):
        driver._settle("schema")


def test_the_drops_are_named_by_phase_in_swarm_mode(demo):
    config, folder = demo
    config = no_election(config)
    change = remove("site-3", closed_by="timeout")
    exchange = Scripted(InProcessExchange(runners(folder, config)), protocol.VOTE, change)
    driver = JobDriver(JobServer(config), exchange, drops="phase")
    driver.elect()
    assert driver.rules.dropped == {
        "site-3": "election: no reply within the election timeout of 300 s"
    }


def test_drops_must_be_named_by_task_or_phase(demo):
    config, _ = demo
    with pytest.raises(ValueError, match="drops='site'"):
        JobDriver(JobServer(config), InProcessExchange({}), drops="site")


# --------------------------------------------------------------------------- the deadline
@pytest.fixture
def clock(monkeypatch):
    now = [100.0]
    monkeypatch.setattr("fedforest.federation.driver.time.monotonic", lambda: now[0])
    return now


def test_the_phase_timeout_closes_a_phase(clock):
    deadline = Deadline(10, None, 2)
    assert deadline.end() == 110.0
    clock[0] = 109.9
    assert deadline.closes(replied=3) is None
    clock[0] = 110.0
    assert deadline.closes(replied=3) == "timeout"
    assert Deadline(0).end() is None and Deadline(0).fresh() is None
    assert Deadline(0).closes(0) is None  # 0: no limit


def test_wait_after_min_counts_from_the_min_sites_th_reply(clock):
    deadline = Deadline(0, 2.0, 2)
    assert deadline.closes(replied=1) is None
    clock[0] = 101.0
    assert deadline.closes(replied=2) is None  # min_sites replied: 2 s from now
    clock[0] = 102.9
    assert deadline.closes(replied=2) is None
    clock[0] = 103.0
    assert deadline.closes(replied=2) == "wait_after_min"


def test_the_timeout_comes_first_when_both_pass(clock):
    deadline = Deadline(5, 2.0, 2)
    clock[0] = 104.0
    assert deadline.closes(replied=2) is None
    clock[0] = 105.0
    assert deadline.closes(replied=2) == "timeout"
    assert deadline.fresh() == 110.0 and deadline.elapsed() == 5.0


def test_without_wait_after_min_every_site_has_the_whole_timeout(clock):
    deadline = Deadline(60, None, 1)
    clock[0] = 159.0
    assert deadline.closes(replied=1) is None


# --------------------------------------------------------------------------- failed results
def driver(tmp_path) -> JobDriver:
    rules = JobServer(JobConfig.from_dict({"job": {"name": "t", "sites": ["a", "b"]}}))
    return JobDriver(rules, InProcessExchange({}), run_dir=tmp_path / "run")


def test_a_failure_writes_results_and_report(tmp_path):
    drv = driver(tmp_path)
    drv.rules.drop("b", "train", "no reply within the train timeout of 900 s")
    drv.failed("KeyError: 'x'")
    results = json.loads((drv.run_dir / "results.json").read_text())
    assert results["status"] == "failed" and results["error"] == "KeyError: 'x'"
    assert results["dropped_sites"] == {"b": "train: no reply within the train timeout of 900 s"}
    assert "**Error:** KeyError: 'x'" in (drv.run_dir / "report.md").read_text()


def test_even_broken_partial_results_leave_the_reason_on_disk(tmp_path):
    drv = driver(tmp_path)
    drv.model = {"forest": "not a forest"}  # the model breaks the partial results
    returned = drv.failed("ValueError: boom")
    results = json.loads((drv.run_dir / "results.json").read_text())
    assert (results.pop("format"), results.pop("version")) == (RESULTS_FORMAT, RESULTS_VERSION)
    assert results == {
        "job": "t",
        "status": "failed",
        "error": "ValueError: boom",
        "dropped_sites": {},
    }
    assert "ValueError: boom" in (drv.run_dir / "report.md").read_text()
    assert returned.status == "failed" and returned.error == "ValueError: boom"


def test_durations_in_messages():
    assert seconds_text(0) == "no limit" and seconds_text(None) == "no limit"
    assert seconds_text(0.5) == "0.5 s" and seconds_text(900.0) == "900 s"


def test_a_timed_step_counts_the_broadcasts_it_makes_once(tmp_path, monkeypatch):
    # the election: elect() (timed) runs score_mask broadcasts that add to "election" too
    drv = driver(tmp_path)
    clock = iter([0.0, 1.0, 4.0, 5.0, 9.0, 10.0])
    monkeypatch.setattr("fedforest.federation.server.time.monotonic", lambda: next(clock))
    drv.rules.timings["election"] = 0.5  # an earlier step of the same phase

    def elect():
        for _ in range(2):  # two rounds as the driver times them: 3 s and 4 s
            start = time.monotonic()
            drv.rules.timings["election"] += time.monotonic() - start
        return "elected"

    assert drv.rules.timed("election", elect) == "elected"
    assert drv.rules.timings["election"] == 0.5 + 10.0  # not 0.5 + 3 + 4 + 10


def test_the_clock_of_the_timings_can_be_given(demo):
    config, _ = demo
    ticks = iter(range(1000))
    rules = JobServer(copy.deepcopy(config))
    JobDriver(rules, InProcessExchange({}), clock=lambda: float(next(ticks)))
    assert rules.timed("pool", lambda: None) is None and rules.timings["pool"] == 1.0


# --------------------------------------------------------------------------- trees per site
@pytest.mark.parametrize("cap", [4, 10])
def test_trees_per_site_sends_each_site_its_own_model(demo, tmp_path, cap):
    """3 sites x 6 trees: each site gets its own trees and the others its columns reach
    best, ``cap`` in all (its own 6 even when ``cap`` is smaller); the job's results are
    the pooled forest's."""
    from fedforest.federation.site_trees import trees_for_site
    from fedforest.model.pooled_model import PooledModel, load_model

    config, folder = demo
    capped = dataclasses.replace(no_election(config), trees_per_site=cap)
    seen = Scripted(InProcessExchange(runners(folder, capped), save_root=tmp_path), None, None)
    driver = JobDriver(JobServer(capped), seen, run_dir=tmp_path)
    results = driver.run()
    assert results.finished, results.error
    assert sorted(results.metrics) == list(SITES)
    (request,) = [r for r in seen.requests if r.task == protocol.EVALUATE]
    assert sorted(request.site_data) == list(SITES)
    pooled = PooledModel.from_payload(driver.model).forest
    assert pooled.n_trees == 18 and results.model.trees == 18
    columns = driver.rules.schema.site_columns
    for site in SITES:
        data = request.data_for(site)
        assert list(data) == list(protocol.TASK_DATA[protocol.EVALUATE])
        assert {k: v for k, v in data.items() if k != "model"} == {
            k: v for k, v in request.data.items() if k != "model"
        }
        sent_model = PooledModel.from_payload(data["model"])
        sent = sent_model.forest
        assert sent.n_trees == max(cap, 6) and sent.owner_mask(site).sum() == 6
        # the intersection forest too: the site's own trees, then the others in pooled order
        inter = sent_model.intersection
        assert inter.n_trees == max(cap, 6) and inter.owner_mask(site).sum() == 6
        keep = trees_for_site(pooled, site, columns[site], cap)
        assert np.array_equal(sent.tree_owner, pooled.tree_owner[keep])
        assert np.array_equal(sent.threshold, pooled.select_trees(keep).threshold)
        # what the site evaluated with is what it keeps to predict with
        assert load_model(tmp_path / site / "pooled_model.npz").forest.n_trees == sent.n_trees
        assert results.model.site_models[site]["trees"] == sent.n_trees
    assert list(results.model.site_models) == list(SITES)
    saved = results_file(tmp_path)["model"]["site_models"]
    assert saved == results.model.site_models
    assert all(0 < v["bytes"] < results.model.bytes for v in saved.values())
    report = (tmp_path / "report.md").read_text()
    assert "## The models the sites were sent" in report
    assert f"- `site-1`: {saved['site-1']['trees']} trees" in report


def test_without_trees_per_site_or_below_it_every_site_gets_the_same_model(demo):
    config, folder = demo
    for cap in (None, 18, 100):
        capped = dataclasses.replace(no_election(config), trees_per_site=cap)
        seen = Scripted(InProcessExchange(runners(folder, capped)), None, None)
        assert JobDriver(JobServer(capped), seen).run().finished
        (request,) = [r for r in seen.requests if r.task == protocol.EVALUATE]
        assert request.site_data is None
