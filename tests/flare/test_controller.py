"""The controller's own duties that need no running job: it only moves payloads.

The phases, drops, deadline policy and results are the driver's
(``tests/federation/test_driver.py``); here: the FLARE exchange broadcasts,
polls the driver's deadline, cancels the task it closes, and hands back the
replies; a failed job leaves its results and stops the run.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from nvflare.apis.controller_spec import TaskCompletionStatus
from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.shareable import make_reply

from fedforest import protocol
from fedforest.federation.config import JobConfig
from fedforest.federation.driver import Deadline, Request
from fedforest.federation.server import JobServer
from fedforest.flare.controller import FedForestController, FlareBroadcast


class FakeController:
    """Records what the exchange asks of FLARE; ``replies`` arrive at the broadcast."""

    task_check_period = 0.2

    def __init__(self, replies=None, finish=True):
        self.replies = replies or {}
        self.finish = finish
        self.cancelled = []
        self.sent = []

    def broadcast(self, task, fl_ctx, targets, min_responses):
        self.sent.append((task.name, list(targets), min_responses, task.data[protocol.PAYLOAD]))
        task.client_tasks = [
            SimpleNamespace(client=SimpleNamespace(name=site), result=result)
            for site, result in self.replies.items()
        ]
        if self.finish:
            task.completion_status = TaskCompletionStatus.OK

    def cancel_task(self, task, completion_status, fl_ctx):
        self.cancelled.append(completion_status)
        task.completion_status = completion_status


def reply(payload=None, rc=ReturnCode.OK, error=None):
    out = make_reply(rc)
    if payload is not None:
        out[protocol.PAYLOAD] = payload
    if error is not None:
        out[protocol.ERROR] = error
    return out


def request(targets=("a", "b", "c"), deadline=None) -> Request:
    return Request(protocol.SCHEMA, {"seed": 0}, "schema", list(targets), deadline or Deadline(60))


def test_the_exchange_broadcasts_and_hands_back_every_kind_of_reply():
    ctl = FakeController(
        {
            "a": reply({"format": "x"}),
            "b": reply(rc=ReturnCode.EXECUTION_EXCEPTION, error="OSError: disk full"),
            "c": None,  # took the task, no reply yet
        }
    )
    signal = SimpleNamespace(triggered=False)
    replies = FlareBroadcast(ctl, None, signal).ask(request(("a", "b", "c", "d")))
    assert ctl.sent == [(protocol.SCHEMA, ["a", "b", "c", "d"], 4, {"seed": 0})]
    assert replies.payloads == {"a": {"format": "x"}}
    assert replies.errors == {"b": "EXECUTION_EXCEPTION: OSError: disk full"}
    assert set(replies.took) == {"a", "b", "c"} and replies.closed_by == "all"


def test_an_ok_reply_without_payload_is_handed_back_as_none():
    ctl = FakeController({"a": reply()})
    replies = FlareBroadcast(ctl, None, SimpleNamespace(triggered=False)).ask(request(("a",)))
    assert replies.payloads == {"a": None}


@pytest.mark.parametrize(
    ("deadline", "closed", "status"),
    [
        # made when the test runs: a deadline counts from the moment it is made
        (lambda: Deadline(0.05), "timeout", TaskCompletionStatus.TIMEOUT),
        (lambda: Deadline(60, wait_after_min=0.05, min_replies=1), "wait_after_min", "cancelled"),
    ],
)
def test_the_drivers_deadline_closes_the_broadcast(deadline, closed, status):
    ctl = FakeController({"a": reply({"format": "x"}), "b": None}, finish=False)
    replies = FlareBroadcast(ctl, None, SimpleNamespace(triggered=False)).ask(
        request(("a", "b"), deadline())
    )
    expected = TaskCompletionStatus.CANCELLED if status == "cancelled" else status
    assert replies.closed_by == closed and ctl.cancelled == [expected]
    assert replies.payloads == {"a": {"format": "x"}}


def test_an_abort_cancels_the_task_and_fails_the_job():
    ctl = FakeController({"a": None}, finish=False)
    signal = SimpleNamespace(triggered=False)
    exchange = FlareBroadcast(ctl, None, signal)
    deadline = Deadline(60)
    original = deadline.closes

    def abort_while_waiting(replied):
        signal.triggered = True
        return original(replied)

    deadline.closes = abort_while_waiting
    with pytest.raises(RuntimeError, match="the job was aborted"):
        exchange.ask(request(("a",), deadline))
    assert ctl.cancelled == [TaskCompletionStatus.ABORTED]
    with pytest.raises(RuntimeError, match="the job was aborted"):  # before any broadcast
        exchange.ask(request(("a",)))


def test_a_failed_job_writes_its_results_and_stops_the_run(tmp_path, monkeypatch):
    ctl = FedForestController()
    ctl.server = JobServer(JobConfig.from_dict({"job": {"name": "t", "sites": ["a", "b"]}}))
    ctl.run_dir = tmp_path / "run"
    fake = FakeController()  # every site of the job ignores the task
    monkeypatch.setattr(ctl, "broadcast", fake.broadcast)
    panics = []
    monkeypatch.setattr(ctl, "system_panic", lambda reason, fl_ctx: panics.append(reason))
    ctl.control_flow(SimpleNamespace(triggered=False), None)
    results = json.loads((ctl.run_dir / "results.json").read_text())
    assert results["status"] == "failed"
    assert results["dropped_sites"] == {
        "a": "schema: never took the task",
        "b": "schema: never took the task",
    }
    assert panics == [f"fedforest job failed: {results['error']}"]
    assert "phase schema: only 0 site(s) left (none)" in results["error"]
