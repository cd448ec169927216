"""Production mode on one machine: deploy/project.yml provisioned, the server and the
sites started from their startup kits, the recipe submitted with the admin's kit (ProdEnv)."""

from __future__ import annotations

import json
import sys

import psutil
import pytest

from fedforest.flare.recipe import FedForestRecipe
from fedforest.vocabulary import JOB_STRATEGIES

from .flare_setup import DEMO_RUNS, ROOT, write_configs

sys.path.insert(0, str(ROOT / "deploy"))

import prod_local  # noqa: E402

pytestmark = pytest.mark.flare
SITES = ["site-1", "site-2", "site-3"]


def processes_using(folder) -> list[str]:
    """Running processes whose command line names ``folder`` (the FLARE kits and jobs)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if str(folder) in " ".join(proc.info["cmdline"] or []):
            found.append(f"{proc.info['pid']}: {' '.join(proc.info['cmdline'])}")
    return found


@pytest.mark.xdist_group(DEMO_RUNS)
def test_prod_on_one_machine_gives_the_simulators_results(tmp_path, demo_server_run):
    configs = write_configs(tmp_path)  # the demo configs, as demo_server_run ran them
    sim = demo_server_run.results

    recipe = FedForestRecipe(configs)  # built and checked where the job says site-2's data is
    # site-2 then moves its data and tells only its own FLARE kit (local/fedforest.yaml)
    private = tmp_path / "site-2-private" / "cohort.csv"
    private.parent.mkdir()
    (tmp_path / "data" / "site-2.csv").rename(private)
    workspace = tmp_path / "prod"
    run_dir, procs = prod_local.run(
        recipe,
        ROOT / "deploy" / "project.yml",
        workspace,
        tmp_path / "out",
        local_data={"site-2": private},
        timeout=300,
        connect_timeout=60,
    )

    prod = json.loads((run_dir / "results.json").read_text())
    assert prod["status"] == "finished" and prod["dropped_sites"] == {}
    assert sorted(prod["metrics"]) == SITES
    for site in SITES:
        assert set(prod["metrics"][site]) == set(JOB_STRATEGIES)
    assert (run_dir / "report.md").is_file()
    assert prod["metrics"] == sim["metrics"]  # the same configs and seed give the same results
    assert prod["election"] == sim["election"] and prod["model"] == sim["model"]

    kit = next((workspace / "provision" / "fedforest").glob("prod_*"))
    site_2_log = "".join(p.read_text() for p in (kit / "site-2").glob("*/log.txt"))
    assert f"data path taken from its own {kit / 'site-2' / 'local' / 'fedforest.yaml'}" in (
        site_2_log
    )
    assert (kit / "site-2" / "local" / "fedforest.yaml").read_text().count(str(private)) == 1
    assert not (kit / "site-1" / "local" / "fedforest.yaml").exists()

    # the server, the three sites and the job processes they started: all stopped
    assert set(procs.started) == {"server", *SITES} and len(procs.seen) > 4
    assert procs.running() == []
    assert processes_using(workspace) == []
    assert json.loads((workspace / "processes.json").read_text())


@pytest.mark.xdist_group(DEMO_RUNS)  # its server port is the other production run's
def test_prod_local_refuses_a_folder_it_did_not_make(tmp_path, capsys):
    configs = write_configs(tmp_path, rows=60)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    args = ["--config", str(configs), "--workspace", str(mine), "--out", str(tmp_path / "out")]
    assert prod_local.main(args) == 1
    assert "refusing to write into" in capsys.readouterr().err
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    assert processes_using(mine) == []


def test_without_custom_code_each_participant_allow_lists_the_fedforest_class_it_runs(tmp_path):
    configs = write_configs(tmp_path, rows=60)
    classes = prod_local.fedforest_classes(FedForestRecipe(configs, ship_code=False))
    assert classes == {
        "server": {"fedforest.flare.controller.FedForestController"},
        **{site: {"fedforest.flare.executor.FedForestExecutor"} for site in SITES},
    }
    kit = tmp_path / "kit"
    (kit / "local").mkdir(parents=True)
    default = {"format_version": 2, "class_allow_list": ["nvflare.app_common.np.np_trainer."]}
    (kit / "local" / "resources.json.default").write_text(json.dumps(default))
    prod_local.allow_class(kit, "fedforest.flare.executor.FedForestExecutor")
    resources = json.loads((kit / "local" / "resources.json").read_text())
    assert resources["class_allow_list"] == [  # FLARE's defaults kept: the list replaces them
        "nvflare.app_common.np.np_trainer.",
        "fedforest.flare.executor.FedForestExecutor",
    ]
