"""Swarm mode's FLARE classes (flare/swarm.py) with FLARE's own Shareable, FLContext and
status reports, without a simulator run (the swarm runs are in test_swarm_job.py and
test_poc.py; the site's swarm itself in tests/federation/test_swarm.py)."""

from __future__ import annotations

import pytest
from nvflare.apis.event_type import EventType
from nvflare.apis.fl_constant import FilterKey, FLContextKey, ReservedKey, ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import Shareable
from nvflare.apis.signal import Signal
from nvflare.app_common.ccwf.common import Constant

from federation.test_site import make_job
from fedforest import protocol
from fedforest.federation.swarm import Mailbox, SwarmSite, job_digest, swarm_message
from fedforest.flare import _compat
from fedforest.flare.privacy_filter import PrivacyPolicyFilter
from fedforest.flare.swarm import (
    JOB_DIGEST_KEY,
    FedForestSwarmController,
    FedForestSwarmExecutor,
    scope_policy_filters,
)

K = 25


@pytest.fixture(scope="module")
def swarm_job(tmp_path_factory):
    """A swarm job of the three demo sites (120 rows a site) and site-1's runner."""
    config, runners = make_job(
        tmp_path_factory.mktemp("flare_swarm"), rows=120, n_estimators=4, job={"mode": "swarm"}
    )
    return config, runners["site-1"]


def site_1(swarm_job) -> FedForestSwarmExecutor:
    """site-1's executor as its start leaves it: its SwarmSite, with the executor as transport."""
    config, runner = swarm_job
    executor = FedForestSwarmExecutor()
    executor.mailbox = Mailbox("site-1", config.sites, job_digest(config))
    executor.swarm = SwarmSite(config, "site-1", runner, executor, executor.mailbox)
    return executor


def context(site: str = "site-1", peer: str | None = None) -> FLContext:
    fl_ctx = FLContext()
    fl_ctx.set_prop(ReservedKey.IDENTITY_NAME, site, private=False, sticky=False)
    if peer is not None:
        peer_ctx = FLContext()
        peer_ctx.set_prop(ReservedKey.IDENTITY_NAME, peer, private=False, sticky=False)
        fl_ctx.set_peer_context(peer_ctx)
    return fl_ctx


def shareable(**items) -> Shareable:
    out = Shareable()
    for key, value in items.items():
        out[key] = value
    return out


# ------------------------------------------------------------------ the server's side
@pytest.mark.parametrize(
    "params, match",
    [
        ({"job_config": ""}, "job_config='' must be the file name of the job YAML"),
        ({"participating_clients": ["site-1"]}, "must list the job's sites \\(at least two\\)"),
        ({"participating_clients": None}, "participating_clients=None must list"),
        ({"silent_seconds": True}, "silent_seconds=True must be a number of seconds"),
    ],
)
def test_a_controller_built_by_hand_with_bad_arguments_is_refused(params, match):
    with pytest.raises(ValueError, match=match):
        FedForestSwarmController(**{"participating_clients": ["a", "b"], **params})


def test_the_controller_configures_the_sites_with_its_job_settings(swarm_job):
    config, _ = swarm_job
    controller = FedForestSwarmController(participating_clients=list(config.sites))
    assert controller.task_name_prefix == protocol.SWARM_TASK_PREFIX
    assert controller.configure_task_name == protocol.SWARM_CONFIG
    assert controller.prepare_config() == {}  # before its job is read: nothing to check
    controller.job = config
    assert controller.prepare_config() == {JOB_DIGEST_KEY: job_digest(config)}
    assert not controller.is_sub_flow_done(FLContext())


# ------------------------------------------------------------------ a site's side
def test_a_site_executor_built_by_hand_with_bad_arguments_is_refused():
    for params in ({"site_config": ""}, {"job_config": 7}):
        with pytest.raises(ValueError, match="must be a file name in the site app's config"):
            FedForestSwarmExecutor(**params)


def test_a_site_that_did_not_start_answers_every_task_so():
    executor = FedForestSwarmExecutor()
    for name in protocol.SWARM_TASKS:
        reply = executor.execute(name, Shareable(), context(), Signal())
        assert reply.get_return_code() == ReturnCode.EXECUTION_EXCEPTION
        assert reply[protocol.ERROR] == "the site did not start"
    executor.handle_event(EventType.END_RUN, context())  # nothing to abort yet


def test_the_status_task_is_answered_with_the_status_only(swarm_job):
    executor = site_1(swarm_job)
    reply = executor.execute(protocol.SWARM_REPORT, Shareable(), context(), Signal())
    assert reply.get_return_code() == ReturnCode.OK
    status = reply[protocol.PAYLOAD]
    assert status["format"] == protocol.SWARM_STATUS and status["site"] == "site-1"
    assert (status["state"], status["phase"]) == ("waiting", "start")
    assert status["metrics"] is None and status["participants"] == ["site-1", "site-2", "site-3"]
    unknown = executor.execute("fedforest_train", Shareable(), context(), Signal())
    assert unknown.get_return_code() == ReturnCode.TASK_UNKNOWN


@pytest.mark.parametrize(
    "config, message",
    [
        (None, "the swarm configuration has no workflow id"),
        ({FLContextKey.WORKFLOW: ""}, "the swarm configuration has no workflow id"),
        (
            {FLContextKey.WORKFLOW: "swarm", Constant.CLIENTS: ["site-2", "site-3"]},
            "the server configures the sites ['site-2', 'site-3'], but this site's job.yaml",
        ),
        (
            {FLContextKey.WORKFLOW: "swarm", Constant.CLIENTS: ["site-1", "site-9"]},
            "(and this site is 'site-1')",
        ),
        (
            {FLContextKey.WORKFLOW: "swarm", Constant.CLIENTS: ["site-1", "site-2"]},
            "the server's job settings differ from this site's job.yaml; rebuild the job",
        ),
    ],
)
def test_a_configuration_for_another_job_is_refused_and_nothing_starts(swarm_job, config, message):
    executor = site_1(swarm_job)
    reply = executor.execute(
        protocol.SWARM_CONFIG, shareable(**{Constant.CONFIG: config}), context(), Signal()
    )
    assert reply.get_return_code() == ReturnCode.BAD_TASK_DATA
    assert message in reply[protocol.ERROR]
    assert executor._thread is None and executor.workflow_id is None


def test_a_peers_message_is_kept_or_refused_with_an_ok_reply(swarm_job):
    config, _ = swarm_job
    executor = site_1(swarm_job)
    body = swarm_message("payload", protocol.SCHEMA, job_digest(config), config.sites, {"n": 1})
    task = shareable(**{protocol.PAYLOAD: body})
    reply = executor.execute(protocol.SWARM_SHARE, task, context(peer="site-2"), Signal())
    assert reply.get_return_code() == ReturnCode.OK and protocol.ERROR not in reply
    got = executor.mailbox.wait(protocol.SCHEMA, "payload", ["site-2"], deadline=0)
    assert got["site-2"]["body"] == {"n": 1}
    # a refusal is an OK reply naming it: FLARE would turn another code into a retry
    other = swarm_message("payload", protocol.SCHEMA, "0" * 64, config.sites, {"n": 1})
    task = shareable(**{protocol.PAYLOAD: other})
    reply = executor.execute(protocol.SWARM_SHARE, task, context(peer="site-3"), Signal())
    assert reply.get_return_code() == ReturnCode.OK and "site-3" in reply[protocol.ERROR]
    stranger = executor.execute(protocol.SWARM_SHARE, task, context(peer="site-9"), Signal())
    assert "'site-9' is not another site of this job" in stranger[protocol.ERROR]


def test_each_task_pull_carries_a_status_report_once_configured(swarm_job):
    executor = site_1(swarm_job)
    fl_ctx = context()
    executor.handle_event(EventType.BEFORE_PULL_TASK, fl_ctx)
    assert not fl_ctx.get_prop(Constant.STATUS_REPORTS)  # not configured: no workflow yet
    executor.workflow_id = "swarm"
    executor.handle_event(EventType.BEFORE_PULL_TASK, fl_ctx)
    report = fl_ctx.get_prop(Constant.STATUS_REPORTS)["swarm"]
    assert report[Constant.ACTION] == "waiting: start" and report[Constant.ALL_DONE] is False
    assert Constant.ERROR not in report  # never an error: ccwf's server would stop the job
    executor.handle_event(EventType.END_RUN, fl_ctx)
    assert executor.swarm.abort.is_set()


def test_the_scope_filters_are_found_in_the_jobs_scope():
    ours = PrivacyPolicyFilter(min_leaf_rows=K)
    scope = _compat.new_scope()
    scope.add_task_result_filter(ours, FilterKey.OUT)
    scope.add_task_result_filter(PrivacyPolicyFilter(min_leaf_rows=3), FilterKey.IN)
    fl_ctx = FLContext()
    assert scope_policy_filters(fl_ctx) == []  # no scope (the simulator)
    fl_ctx.set_prop(FLContextKey.SCOPE_OBJECT, scope, private=True, sticky=False)
    assert scope_policy_filters(fl_ctx) == [ours]  # what leaves the site only
