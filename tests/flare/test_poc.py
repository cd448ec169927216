"""The recipe in NVIDIA FLARE's POC mode (PocEnv): server and sites as separate processes.

One POC deployment (module fixture) runs four jobs in turn: the demo job in
server mode and in swarm mode, compared with the simulator's runs of the same
configs, a small regression job (``job.task: regression``) in swarm mode,
in the privacy scope that site-1's own ``local/privacy.json`` defines, where
FLARE applies the scope (the simulator does not), and a small survival job
(``job.task: survival``, the survival demo's configs) in server mode.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedforest.flare.environments import PocDeployment
from fedforest.flare.recipe import FedForestRecipe
from fedforest.model.pooled_model import load_model
from fedforest.vocabulary import JOB_STRATEGIES

from .flare_setup import DEMO_RUNS, terminal, write_configs

pytestmark = [pytest.mark.flare, pytest.mark.xdist_group(DEMO_RUNS)]
SITES = ["site-1", "site-2", "site-3"]
K = 25
FILTER = "fedforest.flare.privacy_filter.PrivacyPolicyFilter"


def privacy_json(filters: list) -> str:
    """A site's privacy scopes: ``fedforest`` with ``filters``; ``open`` (the default) empty."""
    scopes = [{"name": "fedforest", "task_result_filters": filters}, {"name": "open"}]
    return json.dumps({"scopes": scopes, "default_scope": "open"})


@pytest.fixture(scope="module")
def poc(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("poc")
    # a small regression job in swarm mode, in the privacy scope of site-1's own privacy.json
    scoped = write_configs(
        tmp / "scoped",
        rows=300,
        task="regression",
        job={"mode": "swarm"},
        forest={"n_estimators": 8},
        election={"auto_tune": False},
    )
    jobs = {
        # the demo configs, as demo_server_run and demo_swarm_run ran them
        "server": FedForestRecipe(write_configs(tmp / "server")),
        "swarm": FedForestRecipe(write_configs(tmp / "swarm", job={"mode": "swarm"})),
        "scoped": FedForestRecipe(scoped, scope="fedforest"),
        "survival": FedForestRecipe(
            write_configs(tmp / "survival", task="survival", forest={"n_estimators": 8})
        ),
    }
    site_1 = [{"path": FILTER, "args": {"min_leaf_rows": K, "share": {"surrogates": False}}}]
    site_files = {
        site: {"privacy.json": privacy_json(site_1 if site == "site-1" else [])} for site in SITES
    }
    ws, log, shown = tmp / "ws", tmp / "poc.log", tmp / "terminal.txt"
    progress: dict[str, list[tuple[str, bool]]] = {name: [] for name in jobs}

    def follow(name: str):
        # each line with whether any results.json was downloaded yet (False: shown as it ran)
        out = tmp / f"out-{name}"
        return lambda line: progress[name].append((line, any(out.rglob("results.json"))))

    with terminal(shown), PocDeployment(SITES, ws, site_files=site_files, log_file=log) as poc:
        runs = {
            name: poc.run(recipe, tmp / f"out-{name}", timeout=600, progress=follow(name))
            for name, recipe in jobs.items()
        }
    results = {name: json.loads((d / "results.json").read_text()) for name, d in runs.items()}
    # each run is downloaded into <out>/<job id>/
    job_ids = {name: d.relative_to(tmp / f"out-{name}").parts[0] for name, d in runs.items()}
    return {
        "runs": runs,
        "results": results,
        "ws": ws,
        "job_ids": job_ids,
        "progress": progress,
        "log": log,
        "terminal": shown,
    }


def site_run_dir(poc, site: str, job: str):
    """A site's own folder of one job in the POC workspace (<site>/<job id>/)."""
    (found,) = [
        d for d in poc["ws"].rglob(poc["job_ids"][job]) if d.is_dir() and d.parent.name == site
    ]
    return found


def test_poc_gives_the_simulators_results(poc, demo_server_run):
    run_dir, results = poc["runs"]["server"], poc["results"]["server"]
    assert results["status"] == "finished" and results["dropped_sites"] == {}
    assert sorted(results["metrics"]) == SITES
    for site in SITES:
        assert set(results["metrics"][site]) == set(JOB_STRATEGIES)
    assert (run_dir / "report.md").is_file()
    sim = demo_server_run.results
    assert results["metrics"] == sim["metrics"]  # the same seed gives the same results
    assert results["election"] == sim["election"] and results["model"] == sim["model"]


def test_poc_runs_swarm_mode_with_the_simulators_results(poc, demo_swarm_run):
    run_dir, results = poc["runs"]["swarm"], poc["results"]["swarm"]
    assert results["mode"] == "swarm"
    assert results["status"] == "finished", results.get("error")
    assert results["site_states"] == dict.fromkeys(SITES, "finished")
    assert results["dropped_sites"] == {} and results["site_errors"] == {}
    assert sorted(results["metrics"]) == SITES
    for site in SITES:
        assert set(results["metrics"][site]) == set(JOB_STRATEGIES)
    assert (run_dir / "report.md").is_file()
    assert not sorted(run_dir.rglob("*.npz"))  # no model reached the server
    sim = demo_swarm_run.results
    assert sim["status"] == "finished", sim.get("error")
    assert results["metrics"] == sim["metrics"]  # the same seed gives the same results
    assert results["model_digest"] == sim["model_digest"] and len(results["model_digest"]) == 64
    # FLARE 2.9's POC runs in secure mode: private peer messages; the simulator does not
    assert results["peer_messages_encrypted"] == dict.fromkeys(SITES, True)
    assert sim["peer_messages_encrypted"] == dict.fromkeys(SITES, False)


def test_a_hospitals_privacy_scope_holds_in_swarm_mode(poc):
    results = poc["results"]["scoped"]
    assert results["mode"] == "swarm"
    assert results["status"] == "finished", results.get("error")
    assert results["site_states"] == dict.fromkeys(SITES, "finished")
    # site-1's policy comes from its privacy scope alone, and its report says so
    reported = results["privacy"]["site-1"]
    assert reported["min_leaf_rows"] == K and reported["share"]["surrogates"] is False
    assert results["privacy"]["site-2"]["min_leaf_rows"] < K
    for site in ("site-2", "site-3"):  # the trees site-1 sent, as the other sites pooled them
        (path,) = site_run_dir(poc, site, "scoped").rglob("pooled_model.npz")
        forest = load_model(path).forest
        mine = np.isin(forest.tree_of_node, np.flatnonzero(forest.owner_mask("site-1")))
        assert mine.any()
        assert forest.n_node_samples[mine].min() >= K
        assert not np.any(forest.surrogate_feature[mine] >= 0)
        assert forest.n_node_samples[~mine].min() < K  # sites without a filter send as trained
    log = "".join(p.read_text() for p in site_run_dir(poc, "site-1", "scoped").rglob("log*.txt"))
    assert "goes through the 1 fedforest privacy filter(s) of its privacy scope 'fedforest'" in log


def test_a_regression_job_runs_in_swarm_mode(poc):
    results = poc["results"]["scoped"]  # job.task: regression
    assert results["mode"] == "swarm"
    assert results["status"] == "finished", results.get("error")
    assert results["site_states"] == dict.fromkeys(SITES, "finished")
    assert len(results["model_digest"]) == 64  # every site pooled the same regression trees
    for site in SITES:
        per = results["metrics"][site]
        assert set(per) == set(JOB_STRATEGIES)
        assert all(row["rmse"] > 0 and row["bins"] is None for row in per.values())
        (path,) = site_run_dir(poc, site, "scoped").rglob("pooled_model.npz")
        assert load_model(path).forest.task == "regression"


def test_a_survival_job_runs_in_poc_mode(poc):
    results = poc["results"]["survival"]  # job.task: survival, server mode
    assert results["status"] == "finished", results.get("error")
    times = results["schema"]["times"]
    assert len(times) >= 2 and times == sorted(times)
    for site in SITES:
        per = results["metrics"][site]
        assert set(per) == set(JOB_STRATEGIES)
        assert all(0.5 <= row["cindex"] <= 1 and row["ibs"] < 0.25 for row in per.values())
        (path,) = site_run_dir(poc, site, "survival").rglob("pooled_model.npz")
        assert load_model(path).forest.times.tolist() == times


def test_the_console_shows_the_phases_and_none_of_flares_output(poc, demo_server_run):
    lines = poc["progress"]["server"]
    # the same rounds as the simulator's run of the same configs, shown as the job ran
    expected = [line.split(":")[0] for line, _ in demo_server_run.progress]
    assert [line.split(":")[0] for line, _ in lines] == expected and lines[-1][0] == "job finished"
    assert not any(done for _, done in lines[:-2])  # as the job ran (test_simulator.py)
    swarm = [line for line, _ in poc["progress"]["swarm"]]
    assert swarm[-1] == "job finished" and "site-2: finished" in swarm
    # FLARE prints each job's metadata and, when the POC stops, that the server is gone:
    # into the log, never to the terminal
    log, shown = poc["log"].read_text(), poc["terminal"].read_text()
    assert log.startswith("# fedforest job poc: output of NVIDIA FLARE's POC mode")
    for flare_line in ("Job Meta:", "Submitted job", "'deploy_map':"):
        assert flare_line in log and flare_line not in shown, shown[:3000]
    assert "target_unreachable" not in shown and "nvflare" not in shown, shown[:3000]
