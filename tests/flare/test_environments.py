"""FLARE's execution environments (flare/environments.py): what each checks and refuses before
it starts anything, and how it runs and logs (the simulator, POC and production runs
themselves are in test_simulator.py, test_poc.py and test_prod.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fedforest.flare import environments as envs
from fedforest.flare.environments import check_admin_kit
from fedforest.flare.recipe import FedForestRecipe
from fedforest.outputs import OutputError

from .flare_setup import write_configs

SITES = ["site-1", "site-2", "site-3"]


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    folder = tmp_path_factory.mktemp("environments")
    return FedForestRecipe(write_configs(folder, rows=60), ship_code=False)


def snapshot(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_the_admin_is_read_from_the_startup_kit(tmp_path):
    (tmp_path / "startup").mkdir()
    (tmp_path / "startup" / "fed_admin.json").write_text(
        json.dumps({"admin": {"username": "lead@hospital.example"}})
    )
    assert check_admin_kit(tmp_path) == "lead@hospital.example"
    assert check_admin_kit(tmp_path, "lead@hospital.example") == "lead@hospital.example"
    with pytest.raises(ValueError, match="pass --username lead@hospital.example"):
        check_admin_kit(tmp_path, "admin@nvidia.com")
    with pytest.raises(ValueError, match="no startup/fed_admin.json"):
        check_admin_kit(tmp_path / "startup")


def test_an_admin_file_flare_did_not_write_is_named(tmp_path):
    (tmp_path / "startup").mkdir()
    config = tmp_path / "startup" / "fed_admin.json"
    config.write_text("[1, 2]")
    with pytest.raises(ValueError, match=f"{config} is not an admin configuration FLARE wrote"):
        check_admin_kit(tmp_path)
    config.write_text(json.dumps({"admin": {}}))
    with pytest.raises(ValueError, match="names no admin; give the admin's name"):
        check_admin_kit(tmp_path)
    assert check_admin_kit(tmp_path, "lead") == "lead"  # the kit names nobody: the name given


def test_the_files_a_recipe_was_made_from(recipe):
    inputs = envs.recipe_inputs(recipe)
    assert inputs[0] == recipe.config_dir
    assert [p.name for p in inputs[1:]] == [f"{s}.csv" for s in SITES]
    assert all(p.is_file() for p in inputs[1:])


@pytest.mark.parametrize(
    "files, match",
    [
        ([("site-1", {})], "site_files must map a site .* got list"),
        ({"site-9": {}}, r"site_files names 'site-9'; the job's participants are \['server'"),
        ({"site-1": ["privacy.json"]}, r"site_files\['site-1'\] must map file names to text"),
        ({"site-1": {"../privacy.json": "{}"}}, "names '../privacy.json'; allowed: a file name"),
        ({"site-1": {"": "{}"}}, "names ''; allowed: a file name in the site's local/ folder"),
        ({"site-1": {"privacy.json": b"{}"}}, r"\['privacy.json'\] is a bytes; allowed: text"),
    ],
)
def test_a_sites_own_files_are_checked_before_anything_starts(files, match):
    with pytest.raises(ValueError, match=match):
        envs._check_site_files(files, ["server", *SITES])


def test_a_sites_own_files_are_kept_as_plain_text():
    files = {"site-2": {"privacy.json": "{}", "fedforest.yaml": "data_path: /data/t.csv\n"}}
    assert envs._check_site_files(files, ["server", *SITES]) == files
    assert envs._check_site_files(None, SITES) == {}


def test_the_simulator_never_runs_in_a_users_folder(recipe, tmp_path):
    mine = tmp_path / "analysis"
    (mine / "server").mkdir(parents=True)
    (mine / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    with pytest.raises(OutputError, match=f"refusing to write into {mine}"):
        envs.simulate(recipe, mine, log_file=tmp_path / "sim.log")
    # the configuration folder is an input: never a workspace
    with pytest.raises(OutputError):
        envs.simulate(recipe, recipe.config_dir)
    assert snapshot(tmp_path) == before


def test_a_poc_deployment_checks_its_log_and_runs_only_inside_its_block(recipe, tmp_path):
    workspace = tmp_path / "poc"
    with pytest.raises(OutputError, match="the POC log .* is inside the POC workspace"):
        envs.PocDeployment(SITES, workspace, log_file=workspace / "poc.log")
    user_log = tmp_path / "mine.log"
    user_log.write_text("my notes\n")
    with pytest.raises(OutputError, match="mine.log"):
        envs.PocDeployment(SITES, workspace, log_file=user_log)
    with pytest.raises(ValueError, match=r"site_files names 'server'"):
        envs.PocDeployment(SITES, workspace, site_files={"server": {}})
    poc = envs.PocDeployment(SITES, workspace, log_file=tmp_path / "poc.log")
    with pytest.raises(RuntimeError, match="PocDeployment.run is called inside its `with` block"):
        poc.run(recipe, tmp_path / "out")
    assert user_log.read_text() == "my notes\n" and not workspace.exists()


def test_a_production_run_needs_an_admins_kit_before_anything(recipe, tmp_path):
    with pytest.raises(ValueError, match="has no startup/fed_admin.json"):
        envs.run_prod(recipe, tmp_path / "kit", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_two_folders_of_a_run_may_not_hold_one_another(tmp_path):
    envs._separate(tmp_path / "a", tmp_path / "b")
    with pytest.raises(ValueError, match="overlap \\(one holds the other\\); give two folders"):
        envs._separate(tmp_path / "a", tmp_path / "a" / "out")


def test_a_call_in_a_thread_gives_its_value_or_its_error():
    assert envs._within(30, lambda: 42, "the answer") == 42

    def fails():
        raise KeyError("site-9")

    with pytest.raises(KeyError, match="site-9"):
        envs._within(30, fails, "a lookup")


def test_flares_output_and_its_childrens_go_to_the_log(tmp_path, capfd):
    log = tmp_path / "logs" / "run.log"
    with envs._output_to(log, "# header line"):
        os.write(1, b"from this process\n")  # as FLARE's code writes: to the descriptor
        subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('from a child\\n')"])
    os.write(1, b"after\n")
    assert log.read_text().splitlines() == ["# header line", "from this process", "from a child"]
    assert capfd.readouterr().out == "after\n"
    with envs._output_to(None, "# unused"):
        os.write(1, b"to the terminal\n")
    assert capfd.readouterr().out == "to the terminal\n"
