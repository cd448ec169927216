"""The same job in NVIDIA FLARE's POC mode: server and sites as separate processes."""

from __future__ import annotations

import json

import pytest
from flare_setup import write_configs

from fedforest.federation.config import JOB_STRATEGIES
from fedforest.flare.job import build_job
from fedforest.flare.poc import run_poc

pytestmark = pytest.mark.flare
SITES = ["site-1", "site-2", "site-3"]


def test_poc_run_produces_results_for_every_site(tmp_path):
    configs = write_configs(tmp_path, election={"tuning_rounds": 2})
    job = build_job(configs, tmp_path / "jobs")
    # site-2 moves its data after the job was built and tells only its own FLARE
    # workspace where it is now: its local/fedforest.yaml must take precedence
    private = tmp_path / "site-2-private" / "cohort.csv"
    private.parent.mkdir()
    (tmp_path / "data" / "site-2.csv").rename(private)
    override = {"site-2": {"fedforest.yaml": f"data_path: {private}\n"}}
    run_dir = run_poc(
        job, SITES, tmp_path / "poc", tmp_path / "downloads", timeout=600, site_files=override
    )
    results = json.loads((run_dir / "results.json").read_text())
    assert results["status"] == "finished" and results["dropped_sites"] == {}
    assert sorted(results["metrics"]) == SITES
    for site in SITES:
        assert set(results["metrics"][site]) == set(JOB_STRATEGIES)
        assert 0.5 <= results["metrics"][site]["mp"]["auc"] <= 1.0
    assert (run_dir / "report.md").is_file()
