"""The site side of a server-mode job (flare/executor.py): FLARE's task in, the core's reply
out, with FLARE's own Shareable, FLContext and return codes (no simulator run: the runs are
in test_simulator.py and conftest.py)."""

from __future__ import annotations

import pytest
from nvflare.apis.event_type import EventType
from nvflare.apis.fl_constant import ReservedKey, ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import Shareable
from nvflare.apis.signal import Signal

from federation.test_site import make_job
from fedforest import protocol
from fedforest.flare.executor import FedForestExecutor

from .faulty_executors import FailingTrainExecutor


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    """site-1's real runner, its table loaded (the demo data, 120 rows a site)."""
    _, runners = make_job(tmp_path_factory.mktemp("executor"), rows=120, n_estimators=4)
    return runners["site-1"]


def context(site: str = "site-1") -> FLContext:
    fl_ctx = FLContext()
    fl_ctx.set_prop(ReservedKey.IDENTITY_NAME, site, private=False, sticky=False)
    return fl_ctx


def task(payload=None) -> Shareable:
    shareable = Shareable()
    if payload is not None:
        shareable[protocol.PAYLOAD] = payload
    return shareable


def started(executor, runner, tmp_path):
    executor.runner, executor.run_dir = runner, tmp_path
    return executor


@pytest.mark.parametrize(
    "params, match",
    [
        ({"job_task": "ranking"}, r"job_task='ranking' must be one of \['classification'"),
        ({"job_validation": "cross"}, r"job_validation='cross' must be one of \['oob', 'holdout'"),
        ({"site_config": ""}, "site_config='' must be the file name of the site YAML"),
        ({"site_config": None}, "site_config=None must be the file name"),
        ({"log_writer_id": 3}, "log_writer_id=3 must be the id of a log writer component"),
    ],
)
def test_a_job_built_by_hand_with_bad_arguments_is_refused(params, match):
    with pytest.raises(ValueError, match=match) as info:
        FedForestExecutor(**params)
    assert "rebuild the job with `fedforest job build`" in str(info.value)


def test_the_schema_task_is_answered_with_the_sites_schema(runner, tmp_path):
    executor = started(FedForestExecutor(), runner, tmp_path)
    reply = executor.execute(
        protocol.SCHEMA, task({"seed": 0, "time_quantiles": False}), context(), Signal()
    )
    assert isinstance(reply, Shareable) and reply.get_return_code() == ReturnCode.OK
    payload = reply[protocol.PAYLOAD]
    assert payload["format"] == protocol.SITE_SCHEMA and payload["site"] == "site-1"
    assert payload["n_rows"] > 0 and protocol.ERROR not in reply


@pytest.mark.parametrize(
    "name, payload, rc, message",
    [
        ("shuffle", {"seed": 0}, ReturnCode.TASK_UNKNOWN, "unknown task 'shuffle'"),
        (protocol.SCHEMA, None, ReturnCode.BAD_TASK_DATA, "task schema carries no payload"),
        (protocol.SCHEMA, [0], ReturnCode.BAD_TASK_DATA, "task schema carries no payload"),
        (
            protocol.SCHEMA,
            {"seed": 0, "rows": "all"},
            ReturnCode.EXECUTION_EXCEPTION,
            "PayloadError: ",
        ),
    ],
)
def test_a_task_it_cannot_serve_gets_a_return_code_and_the_reason(
    runner, tmp_path, name, payload, rc, message
):
    executor = started(FedForestExecutor(), runner, tmp_path)
    reply = executor.execute(name, task(payload), context(), Signal())
    assert reply.get_return_code() == rc
    assert message in reply[protocol.ERROR] and protocol.PAYLOAD not in reply


def test_a_site_that_could_not_start_answers_every_task_with_why(caplog):
    executor = FedForestExecutor()
    reply = executor.execute(
        protocol.SCHEMA, task({"seed": 0, "time_quantiles": False}), context(), Signal()
    )
    assert reply.get_return_code() == ReturnCode.EXECUTION_EXCEPTION
    assert reply[protocol.ERROR] == "the site did not start"
    executor.handle_event(EventType.END_RUN, context())  # other events change nothing
    assert executor.startup_error is None
    # START_RUN in a context without FLARE's engine: the site cannot reach its workspace
    with caplog.at_level("ERROR", logger="fedforest.flare.executor"):
        executor.handle_event(EventType.START_RUN, context())
    assert executor.runner is None and executor.startup_error.startswith("AttributeError: ")
    assert "site site-1 cannot start: AttributeError" in caplog.text
    for name in protocol.TASKS:
        reply = executor.execute(name, task({}), context(), Signal())
        assert reply.get_return_code() == ReturnCode.EXECUTION_EXCEPTION
        assert reply[protocol.ERROR] == executor.startup_error


def test_a_failure_in_the_core_is_reported_not_raised(runner, tmp_path, caplog):
    # the rehearsal executor of the simulator tests: its train raises
    executor = started(FailingTrainExecutor(), runner, tmp_path)
    data = dict.fromkeys(protocol.TASK_DATA[protocol.TRAIN])
    with caplog.at_level("ERROR", logger="fedforest.flare.executor"):
        reply = executor.execute(protocol.TRAIN, task(data), context(), Signal())
    assert reply.get_return_code() == ReturnCode.EXECUTION_EXCEPTION
    assert reply[protocol.ERROR] == "RuntimeError: rehearsed fault: training crashed at this site"
    assert "site site-1: task train failed" in caplog.text
