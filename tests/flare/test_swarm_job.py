"""Swarm mode (``job.mode: swarm``) in the real NVIDIA FLARE simulator (no mocks).

Each run costs ~20 s, so the runs are fixtures shared by the tests:

* ``demo_runs``: the demo configs once in swarm mode and once in server mode,
  the same seed, each with the server-side :class:`~swarm_inspector.Inspector`
  (``demo_swarm_run`` and ``demo_server_run``, which other modules read too);
* ``faulty_run``: swarm mode, site-3 raising in training, site-1 withholding
  its metrics (``report_metrics: false``);
* ``below_min_sites_run``: the same fault with ``min_sites: 3``.
"""

from __future__ import annotations

import json

import pytest
import yaml

from fedforest import protocol

from .faulty_executors import FailingTrainSwarmExecutor
from .flare_setup import DEMO_RUNS, UNCALIBRATED, Run, write_configs

pytestmark = pytest.mark.flare
SITES = ["site-1", "site-2", "site-3"]
REHEARSED = "rehearsed fault: training crashed at this site"
#: What the server may handle in swarm mode: the sites' status, with their metrics inside.
STATUS_FORMATS = {protocol.SWARM_STATUS, protocol.SITE_METRICS}
#: What it must never handle in swarm mode: every payload of the job's work.
WORK_FORMATS = {
    protocol.SITE_SCHEMA,
    protocol.SITE_VOTE,
    protocol.MASK_SCORE,
    protocol.SITE_MODELS,
    protocol.POOLED_FOREST,
    protocol.IMPUTERS,
    protocol.GLOBAL_SCHEMA,
    protocol.MODEL,
    protocol.SWARM_MESSAGE,
}


def failing(site: str):
    executor = FailingTrainSwarmExecutor(
        site_config="fedforest_site.yaml", job_config="fedforest_job.yaml"
    )
    return [(site, executor)]


@pytest.fixture(scope="module")
def demo_runs(demo_swarm_run, demo_server_run):
    """The demo configs in swarm mode and in server mode (same seed), both inspected."""
    return demo_swarm_run, demo_server_run


@pytest.fixture(scope="module")
def faulty_run(tmp_path_factory):
    """Swarm mode: site-3 raises in training; site-1 keeps its metrics (report_metrics: false)."""
    folder = tmp_path_factory.mktemp("faulty")
    configs = write_configs(folder, job={"mode": "swarm"}, evaluation=UNCALIBRATED)
    path = configs / "site-1.yaml"
    site = yaml.safe_load(path.read_text())
    site["report_metrics"] = False
    path.write_text(yaml.safe_dump(site))
    return Run(folder, configs, custom=failing("site-3"))


@pytest.fixture(scope="module")
def below_min_sites_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("min_sites")
    configs = write_configs(folder, job={"mode": "swarm", "min_sites": 3}, evaluation=UNCALIBRATED)
    return Run(folder, configs, custom=failing("site-3"), inspect=False)


# ----------------------------------------------------------- demo configs
@pytest.mark.xdist_group(DEMO_RUNS)
def test_swarm_mode_gives_the_server_modes_metrics(demo_runs):
    swarm, server = demo_runs
    results = swarm.results
    assert server.results["status"] == "finished", server.results.get("error")
    assert results["mode"] == "swarm"
    assert results["status"] == "finished", results.get("error")
    assert results["error"] is None
    assert results["site_states"] == dict.fromkeys(SITES, "finished")
    assert results["site_errors"] == {} and results["dropped_sites"] == {}
    assert results["metrics_withheld"] == []
    # the same seed gives the same metrics, to the last digit
    assert sorted(results["metrics"]) == SITES
    assert results["metrics"] == server.results["metrics"]
    assert results["test_rows"] == server.results["test_rows"]
    # one pooled model, the same at every site
    digest = results["model_digest"]
    assert isinstance(digest, str) and len(digest) == 64, results.get("model_digests")
    assert results["model_digests"] == {}
    assert sorted(results["phase_seconds"]) == SITES
    assert "swarm mode" in (swarm.run_dir / "report.md").read_text()


@pytest.mark.xdist_group(DEMO_RUNS)
def test_each_swarm_site_keeps_its_own_results_model_and_metrics(demo_runs):
    swarm, server = demo_runs
    for site in SITES:
        folder = swarm.site_dir(site)
        for name in ("results.json", "pooled_model.npz", "metrics.json"):
            assert (folder / name).is_file(), (site, name)
        own = swarm.site_results(site)
        assert own["status"] == "finished" and own["dropped_sites"] == {}
        assert own["metrics"] == {site: server.results["metrics"][site]}
        # each site computed the server mode's election and pooled model itself
        assert own["election"] == server.results["election"], site
        assert own["model"] == server.results["model"], site
        saved = json.loads((folder / "metrics.json").read_text())
        assert saved["strategies"] == server.results["metrics"][site]


# ------------------------------------------------------ what the server saw
@pytest.mark.xdist_group(DEMO_RUNS)
def test_the_server_handles_only_the_sites_status_in_swarm_mode(demo_runs):
    swarm, _ = demo_runs
    records = swarm.records
    assert records, f"the inspector wrote nothing in {swarm.run_dir}"
    assert not [r for r in records if "inspector_error" in r]
    assert {r["task"] for r in records} <= {protocol.SWARM_CONFIG, protocol.SWARM_REPORT}
    seen = set().union(*(r["formats"] for r in records))
    assert seen <= STATUS_FORMATS, seen
    assert not seen & WORK_FORMATS
    # the inspector demonstrably works: it saw the status of every site, metrics included
    statuses = [r for r in records if protocol.SWARM_STATUS in r["formats"]]
    assert {r["site"] for r in statuses} == set(SITES)
    assert {r["site"] for r in records if protocol.SITE_METRICS in r["formats"]} == set(SITES)
    for record in statuses:
        assert record["task"] == protocol.SWARM_REPORT
        assert record["keys"] == sorted(["__headers__", protocol.PAYLOAD])
    # nothing but the status reached the server's run folder or its results
    assert not sorted(swarm.run_dir.rglob("*.npz"))
    for key in ("schema", "election", "model", "tuning"):
        assert not swarm.results.get(key), key


@pytest.mark.xdist_group(DEMO_RUNS)
def test_the_inspector_sees_trees_in_server_mode(demo_runs):
    """The control: the same inspector on a server-mode run catches the site models."""
    _, server = demo_runs
    seen = set().union(*(r["formats"] for r in server.records))
    assert protocol.SITE_MODELS in seen and protocol.SITE_SCHEMA in seen
    trained = [r for r in server.records if protocol.SITE_MODELS in r["formats"]]
    assert {r["site"] for r in trained} == set(SITES)
    assert {r["task"] for r in trained} == {protocol.TRAIN}


# ------------------------------------------------------------------ faults
def test_a_site_failing_in_train_is_left_out_by_all_with_the_reason(faulty_run):
    results = faulty_run.results
    assert results["status"] == "finished", results.get("error")
    assert results["site_states"] == {
        "site-1": "finished",
        "site-2": "finished",
        "site-3": "failed",
    }
    assert REHEARSED in results["site_errors"]["site-3"]
    assert sorted(results["site_errors"]) == ["site-3"]
    assert list(results["dropped_sites"]) == ["site-3"]
    reason = results["dropped_sites"]["site-3"]
    assert REHEARSED in reason and reason.startswith("train")
    # both survivors name site-3 with the same reason in their own results
    for site in ("site-1", "site-2"):
        own = faulty_run.site_results(site)
        assert own["status"] == "finished"
        assert own["dropped_sites"] == {"site-3": reason}, site
    assert faulty_run.site_results("site-3")["status"] == "failed"
    assert isinstance(results["model_digest"], str) and results["model_digests"] == {}


def test_a_site_with_report_metrics_false_keeps_its_metrics(faulty_run):
    results = faulty_run.results
    assert results["site_states"]["site-1"] == "finished"
    assert "site-1" not in results["metrics"] and "site-1" not in results["test_rows"]
    assert results["metrics_withheld"] == ["site-1"]
    assert sorted(results["metrics"]) == ["site-2"]  # site-3 failed, site-1 withholds
    # the metrics never left site-1: no status of it carried them to the server
    from_site_1 = [r for r in faulty_run.records if r["site"] == "site-1"]
    assert any(protocol.SWARM_STATUS in r["formats"] for r in from_site_1)
    assert not [r for r in from_site_1 if protocol.SITE_METRICS in r["formats"]]
    # ...and site-1 still has them
    folder = faulty_run.site_dir("site-1")
    saved = json.loads((folder / "metrics.json").read_text())
    assert saved["strategies"] == faulty_run.site_results("site-1")["metrics"]["site-1"]
    assert (folder / "pooled_model.npz").is_file()


def test_below_min_sites_every_site_stops_with_the_same_message(below_min_sites_run):
    results = below_min_sites_run.results
    assert results["status"] == "failed"
    assert results["site_states"] == dict.fromkeys(SITES, "failed")
    errors = results["site_errors"]
    assert errors["site-1"] == errors["site-2"]
    assert "min_sites=3" in errors["site-1"] and "site-3" in errors["site-1"]
    assert REHEARSED in errors["site-3"]
    assert "min_sites=3" in results["error"]
    assert results["metrics"] == {} and results["model_digest"] is None
    for site in ("site-1", "site-2"):
        own = below_min_sites_run.site_results(site)
        assert own["status"] == "failed" and own["error"] == errors["site-1"], site
    assert "**Error:**" in (below_min_sites_run.run_dir / "report.md").read_text()


@pytest.mark.xdist_group(DEMO_RUNS)
def test_the_console_follows_the_swarm_sites_states(demo_runs):
    """In swarm mode the server's progress lines are each site's state as it changes."""
    swarm, _ = demo_runs
    lines = [line for line, _ in swarm.progress]
    assert lines[-1] == "job finished"
    for site in SITES:
        mine = [line for line in lines if line.startswith(f"{site}: ")]
        assert mine and mine[-1] == f"{site}: finished", lines
        assert any(line.startswith(f"{site}: running (") for line in mine), lines
    # shown as the job ran: a site's running phases before the results
    assert not any(done for line, done in swarm.progress if "running" in line)


def test_a_survival_job_runs_in_swarm_mode(tmp_path):
    """``job.task: survival`` in swarm mode: every site agrees the same time grid from the
    others' coarse quantiles and pools the same survival trees; no central party sees them."""
    configs = write_configs(
        tmp_path, task="survival", job={"mode": "swarm"}, forest={"n_estimators": 10}
    )
    swarm = Run(tmp_path, configs)
    results = swarm.results
    assert results["status"] == "finished", results.get("error")
    assert results["site_states"] == dict.fromkeys(SITES, "finished")
    assert len(results["model_digest"]) == 64 and results["model_digests"] == {}
    grids = {tuple(swarm.site_results(site)["schema"]["times"]) for site in SITES}
    assert len(grids) == 1 and len(next(iter(grids))) >= 2  # one grid, agreed by every site
    for site in SITES:
        per = results["metrics"][site]
        assert all(0.5 <= row["cindex"] <= 1.0 for row in per.values()), (site, per)
