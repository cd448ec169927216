"""The same recipe in NVIDIA FLARE's POC mode (PocEnv): server and sites as separate processes."""

from __future__ import annotations

import json

import pytest
from flare_setup import DEMO_RUNS, write_configs

from fedforest.federation.config import JOB_STRATEGIES
from fedforest.flare.environments import run_poc
from fedforest.flare.recipe import FedForestRecipe

pytestmark = [pytest.mark.flare, pytest.mark.xdist_group(DEMO_RUNS)]
SITES = ["site-1", "site-2", "site-3"]


def test_poc_gives_the_simulators_results(tmp_path, demo_server_run):
    configs = write_configs(tmp_path)  # the demo configs, as demo_server_run ran them
    poc_dir = run_poc(FedForestRecipe(configs), tmp_path / "poc", tmp_path / "out", timeout=600)
    poc = json.loads((poc_dir / "results.json").read_text())
    assert poc["status"] == "finished" and poc["dropped_sites"] == {}
    assert sorted(poc["metrics"]) == SITES
    for site in SITES:
        assert set(poc["metrics"][site]) == set(JOB_STRATEGIES)
    assert (poc_dir / "report.md").is_file()
    sim = demo_server_run.results
    assert poc["metrics"] == sim["metrics"]  # the same seed gives the same results
    assert poc["election"] == sim["election"] and poc["model"] == sim["model"]


def test_poc_runs_swarm_mode_with_the_simulators_results(tmp_path, demo_swarm_run):
    configs = write_configs(tmp_path, job={"mode": "swarm"})  # as demo_swarm_run ran them
    poc_dir = run_poc(FedForestRecipe(configs), tmp_path / "poc", tmp_path / "out", timeout=600)
    poc = json.loads((poc_dir / "results.json").read_text())
    assert poc["mode"] == "swarm"
    assert poc["status"] == "finished", poc.get("error")
    assert poc["site_states"] == dict.fromkeys(SITES, "finished")
    assert poc["dropped_sites"] == {} and poc["site_errors"] == {}
    assert sorted(poc["metrics"]) == SITES
    for site in SITES:
        assert set(poc["metrics"][site]) == set(JOB_STRATEGIES)
    assert (poc_dir / "report.md").is_file()
    assert not sorted(poc_dir.rglob("*.npz"))  # no model reached the server
    sim = demo_swarm_run.results
    assert sim["status"] == "finished", sim.get("error")
    assert poc["metrics"] == sim["metrics"]  # the same seed gives the same results
    assert poc["model_digest"] == sim["model_digest"] and len(poc["model_digest"]) == 64
    # FLARE 2.9's POC runs in secure mode: private peer messages; the simulator does not
    assert poc["peer_messages_encrypted"] == dict.fromkeys(SITES, True)
    assert sim["peer_messages_encrypted"] == dict.fromkeys(SITES, False)
