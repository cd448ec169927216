"""The job as a FLARE recipe (flare/recipe.py): validated when made, exported by FLARE's own
recipe export (no simulator run; the runs are in test_simulator.py and conftest.py)."""

from __future__ import annotations

import json

import pytest
import yaml

from fedforest.errors import ConfigError
from fedforest.flare.recipe import FedForestRecipe

from .faulty_executors import FailingTrainExecutor
from .flare_setup import write_configs
from .swarm_inspector import Inspector

SITES = ["site-1", "site-2", "site-3"]


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    return write_configs(tmp_path_factory.mktemp("recipe"), rows=60)


def exported(recipe, folder):
    recipe.export(str(folder))
    return folder / recipe.name


def test_the_recipe_is_the_jobs_configuration(configs):
    recipe = FedForestRecipe(configs)
    assert recipe.name == "fedforest-demo" and recipe.sites == SITES
    assert recipe.job_config.sites == SITES and sorted(recipe.site_configs) == SITES
    assert recipe.site_configs["site-2"].renames == {"glucose_mg_dl": "glucose"}
    assert recipe.config_dir == configs


def test_the_export_holds_one_app_per_site_with_the_fedforest_classes(configs, tmp_path):
    # without the runtime in custom/ (FLARE parses every file it ships: seconds; the job
    # builder's tests ship it)
    job = exported(FedForestRecipe(configs, ship_code=False), tmp_path)
    meta = json.loads((job / "meta.json").read_text())
    assert meta["deploy_map"] == {"app_server": ["server"], **{f"app_{s}": [s] for s in SITES}}
    server = json.loads((job / "app_server/config/config_fed_server.json").read_text())
    assert [w["path"] for w in server["workflows"]] == [
        "fedforest.flare.controller.FedForestController"
    ]
    assert (job / "app_server/config/fedforest_job.yaml").read_text() == (
        configs / "job.yaml"
    ).read_text()
    for site in SITES:
        app = job / f"app_{site}"
        client = json.loads((app / "config/config_fed_client.json").read_text())
        (executor,) = client["executors"]
        assert executor["executor"]["path"] == "fedforest.flare.executor.FedForestExecutor"
        shipped = yaml.safe_load((app / "config/fedforest_site.yaml").read_text())
        assert shipped["site"] == site and shipped["data_path"].endswith(f"{site}.csv")
    assert not list(job.rglob("custom/fedforest"))


def test_a_sites_executor_and_extra_components_ship_their_own_module(configs, tmp_path):
    # test components live in the tests' package flare: FLARE ships the module by its name
    recipe = FedForestRecipe(
        configs,
        job_custom=[("site-2", FailingTrainExecutor(site_config="fedforest_site.yaml"))],
        extra_components={"server": [Inspector()]},
        ship_code=False,
    )
    job = exported(recipe, tmp_path)
    client = json.loads((job / "app_site-2/config/config_fed_client.json").read_text())
    path = client["executors"][0]["executor"]["path"]
    assert path == f"{FailingTrainExecutor.__module__}.FailingTrainExecutor"
    module = FailingTrainExecutor.__module__.replace(".", "/") + ".py"
    assert (job / "app_site-2/custom" / module).is_file()
    other = json.loads((job / "app_site-1/config/config_fed_client.json").read_text())
    assert other["executors"][0]["executor"]["path"].endswith(".FedForestExecutor")
    server = json.loads((job / "app_server/config/config_fed_server.json").read_text())
    inspector = Inspector.__module__.replace(".", "/") + ".py"
    assert (job / "app_server/custom" / inspector).is_file()
    assert any(f"{Inspector.__module__}.Inspector" in json.dumps(part) for part in server.values())


def test_the_jobs_privacy_scope_goes_in_its_meta(configs, tmp_path):
    job = exported(FedForestRecipe(configs, scope="hospital", ship_code=False), tmp_path)
    assert json.loads((job / "meta.json").read_text())["scope"] == "hospital"
    with pytest.raises(ValueError, match="scope=' ' must be the name of a privacy scope"):
        FedForestRecipe(configs, scope=" ")
    with pytest.raises(ValueError, match=r"extra_components names \['site-9'\]"):
        FedForestRecipe(configs, extra_components={"site-9": [Inspector()]})


def test_a_bad_configuration_is_refused_when_the_recipe_is_made(tmp_path):
    configs = write_configs(tmp_path, rows=60)
    (tmp_path / "data" / "site-3.csv").unlink()
    with pytest.raises(ConfigError, match="key 'data_path'"):
        FedForestRecipe(configs)
    # a coordinator without the sites' data: each site checks its own when it starts
    assert FedForestRecipe(configs, data_checks=False).sites == SITES


def test_a_built_job_folder_gives_back_its_recipe(configs, tmp_path):
    job = exported(FedForestRecipe(configs, ship_code=False), tmp_path / "jobs")
    again = FedForestRecipe.from_job_folder(job, ship_code=False)
    assert again.sites == SITES and again.name == "fedforest-demo"
    assert again.site_configs["site-3"].data_path == str(configs.parent / "data" / "site-3.csv")
    assert again.job_config.forest == FedForestRecipe(configs).job_config.forest
    with pytest.raises(ValueError, match="is not a FLARE job folder \\(no meta.json\\)"):
        FedForestRecipe.from_job_folder(tmp_path)
