"""The controller's own duties that need no running job: failed results are always written."""

from __future__ import annotations

import json
import time

from fedforest.federation.config import JobConfig
from fedforest.federation.server import JobServer
from fedforest.flare.controller import FedForestController, _seconds


def controller(tmp_path) -> FedForestController:
    ctl = FedForestController()
    ctl.server = JobServer(JobConfig.from_dict({"job": {"name": "t", "sites": ["a", "b"]}}))
    ctl.run_dir = tmp_path / "run"
    return ctl


def test_a_failure_writes_results_and_report(tmp_path):
    ctl = controller(tmp_path)
    ctl.server.drop("b", "train", "no reply within the train timeout of 900 s")
    ctl._write_failure({}, None, "KeyError: 'x'")
    results = json.loads((ctl.run_dir / "results.json").read_text())
    assert results["status"] == "failed" and results["error"] == "KeyError: 'x'"
    assert results["dropped_sites"] == {"b": "train: no reply within the train timeout of 900 s"}
    assert "**Error:** KeyError: 'x'" in (ctl.run_dir / "report.md").read_text()


def test_even_broken_partial_results_leave_the_reason_on_disk(tmp_path):
    ctl = controller(tmp_path)
    ctl._write_failure({}, {"forest": "not a forest"}, "ValueError: boom")  # the model breaks it
    results = json.loads((ctl.run_dir / "results.json").read_text())
    assert results == {
        "job": "t",
        "status": "failed",
        "error": "ValueError: boom",
        "dropped_sites": {},
    }
    assert "ValueError: boom" in (ctl.run_dir / "report.md").read_text()


def test_durations_in_messages():
    assert _seconds(0) == "no limit" and _seconds(None) == "no limit"
    assert _seconds(0.5) == "0.5 s" and _seconds(900.0) == "900 s"


def test_a_timed_step_counts_the_broadcasts_it_makes_once(tmp_path, monkeypatch):
    # the election: elect() (timed) runs score_mask broadcasts that add to "election" too
    ctl = controller(tmp_path)
    clock = iter([0.0, 1.0, 4.0, 5.0, 9.0, 10.0])
    monkeypatch.setattr("fedforest.flare.controller.time.monotonic", lambda: next(clock))
    ctl.server.timings["election"] = 0.5  # an earlier step of the same phase

    def elect():
        for _ in range(2):  # two rounds as _phase times them: 3 s and 4 s
            start = time.monotonic()
            ctl.server.timings["election"] += time.monotonic() - start
        return "elected"

    assert ctl._timed("election", elect) == "elected"
    assert ctl.server.timings["election"] == 0.5 + 10.0  # not 0.5 + 3 + 4 + 10
