"""Building the job from site_configs/, and configuration errors at build and at a site."""

from __future__ import annotations

import json
import logging
import os

import pandas as pd
import pytest
import yaml

from fedforest.cli import main
from fedforest.errors import ConfigError
from fedforest.federation.tables import check_data
from fedforest.flare.job import build_job, load_configs
from fedforest.flare.recipe import FedForestRecipe

from .flare_setup import write_configs

SITES = ["site-1", "site-2", "site-3"]


def edit(path, fn):
    data = yaml.safe_load(path.read_text())
    fn(data)
    path.write_text(yaml.safe_dump(data))


def test_built_job_has_one_app_per_site_with_code_and_configs(tmp_path):
    configs = write_configs(tmp_path, rows=60)
    job = build_job(configs, tmp_path / "jobs")
    meta = json.loads((job / "meta.json").read_text())
    assert meta["deploy_map"] == {"app_server": ["server"], **{f"app_{s}": [s] for s in SITES}}
    server = json.loads((job / "app_server/config/config_fed_server.json").read_text())
    assert server["workflows"][0]["path"] == "fedforest.flare.controller.FedForestController"
    for site in SITES:
        app = job / f"app_{site}"
        assert (app / "custom/fedforest/model/forest.py").is_file()
        assert (app / "custom/fedforest/flare/executor.py").is_file()
        # the FLARE internals the sites reach (swarm scopes) travel with the code
        assert (app / "custom/fedforest/flare/_compat.py").is_file()
        for part in ("election", "privacy"):  # the sites run them
            assert (app / f"custom/fedforest/{part}/__init__.py").is_file()
        for part in ("experiments", "cli"):  # flare.job.NOT_SHIPPED
            assert not (app / f"custom/fedforest/{part}").exists()
        shipped = yaml.safe_load((app / "config/fedforest_site.yaml").read_text())
        assert shipped["site"] == site and os.path.isabs(shipped["data_path"])
    assert (job / "app_server/config/fedforest_job.yaml").is_file()
    # and those the server reaches (the MLflow receiver)
    assert (job / "app_server/custom/fedforest/flare/_compat.py").is_file()


@pytest.mark.parametrize(
    "target, change, message",
    [
        ("site-2", lambda d: d.update(data_path="missing.csv"), "key 'data_path'"),
        ("site-1", lambda d: d.update(target="diagnosis"), "key 'target' is 'diagnosis'"),
        ("site-3", lambda d: d.update(selector="magic"), "key 'selector' is 'magic'"),
        ("site-3", lambda d: d.update(test_fraction="a lot"), "key 'test_fraction'"),
        ("site-1", lambda d: d.update(renames={"sugar": "glucose"}), "key 'renames.sugar'"),
        ("job", lambda d: d["evaluation"].update(strategies=["mp", "guess"]), "'guess'"),
        ("job", lambda d: d["forest"].update(n_estimators="many"), "forest.n_estimators"),
        ("job", lambda d: d["job"].update(sites=SITES + ["site-4"]), "site-4"),
        ("job", lambda d: d["election"].update(freedom_degree=2), "election.freedom_degree"),
        # checked against the site's selector and the sites' data files
        ("site-1", lambda d: d.update(selector_params={"C": 0}), "key 'selector_params.C' is 0"),
        ("site-2", lambda d: d.update(drop_columns=["ssn"]), "key 'drop_columns' is 'ssn'"),
        ("site-3", lambda d: d.update(label_map={"yes": 1}), "key 'label_map.yes' is 'yes'"),
        (
            "job",
            lambda d: d["election"].update(always_keep=["glucose_mg_dl"]),
            "key 'election.always_keep' is 'glucose_mg_dl'; allowed: feature columns of",
        ),
        (
            "job",
            lambda d: d["forest"].update(min_samples_leaf=20),
            r"key 'forest.min_samples_leaf' is 20; allowed: at most 16 for site 'site-1'",
        ),
    ],
)
def test_config_errors_stop_the_build_with_a_precise_message(tmp_path, target, change, message):
    configs = write_configs(tmp_path, rows=60)
    edit(configs / f"{target}.yaml", change)
    with pytest.raises(ConfigError, match=message) as err:
        build_job(configs, tmp_path / "jobs")
    assert f"{target}.yaml" in str(err.value) or "site-4" in str(err.value)
    assert not (tmp_path / "jobs").exists() or not any((tmp_path / "jobs").iterdir())


def test_a_data_file_breaking_a_table_rule_stops_the_build(tmp_path):
    configs = write_configs(tmp_path, rows=60)
    data = tmp_path / "data" / "site-2.csv"
    pd.read_csv(data).to_csv(data)  # saved with its index: an unnamed first column
    with pytest.raises(ConfigError) as err:
        build_job(configs, tmp_path / "jobs")
    msg = str(err.value)
    assert msg.startswith(f"{configs / 'site-2.yaml'}: data file {data}: column 'Unnamed: 0'")
    assert "drop_columns: ['Unnamed: 0']" in msg
    edit(configs / "site-2.yaml", lambda d: d.update(drop_columns=["Unnamed: 0"]))
    job_cfg, sites = load_configs(configs)
    assert "Unnamed: 0" not in check_data(sites["site-2"])


def test_always_keep_names_a_column_some_site_has_after_renames(tmp_path):
    configs = write_configs(tmp_path, rows=60)
    edit(configs / "job.yaml", lambda d: d["election"].update(always_keep=["glucose", "hba1c"]))
    job_cfg, _ = load_configs(configs)
    assert job_cfg.election.always_keep == ("glucose", "hba1c")


def test_cli_build_reports_config_errors(tmp_path, capsys):
    configs = write_configs(tmp_path, rows=60)
    edit(configs / "site-1.yaml", lambda d: d.update(selector="magic"))
    assert main(["job", "build", "--config", str(configs), "--out", str(tmp_path / "j")]) == 1
    err = capsys.readouterr().err
    assert "site-1.yaml: key 'selector' is 'magic'; allowed: lasso" in err


def test_build_warns_of_a_site_yaml_the_job_does_not_list(tmp_path, caplog):
    configs = write_configs(tmp_path, rows=60)
    (configs / "site-4.yaml").write_text((configs / "site-3.yaml").read_text())
    (configs / "site-1.yml").write_text((configs / "site-1.yaml").read_text())
    with caplog.at_level(logging.WARNING, logger="fedforest.flare.job"):
        assert main(["job", "build", "--config", str(configs), "--out", str(tmp_path / "j")]) == 0
    err = "\n".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert f"{configs / 'site-4.yaml'} is not read by this job: key 'job.sites' in " in err
    assert "not 'site-4'; add 'site-4' to job.sites" in err
    assert f"{configs / 'site-1.yml'} is not read by this job: only <site>.yaml files are " in err
    assert "site-1.yaml is read, not this file" in err


def test_cli_build_refuses_two_codings_of_the_target(tmp_path, capsys):
    configs = write_configs(tmp_path, rows=60)
    data = tmp_path / "data" / "site-2.csv"
    frame = pd.read_csv(data)
    frame["outcome"] = frame["outcome"].map({1: "M", 0: "B"})
    frame.to_csv(data, index=False)
    out = tmp_path / "j"
    assert main(["job", "build", "--config", str(configs), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{configs / 'site-2.yaml'}: key 'target' ('outcome') of site 'site-2'" in err
    assert "site-2: label_map: {B: 0, M: 1}" in err and "site 'site-1'" in err
    assert not out.exists()  # refused before anything is written
    # simulate and poc build first: the same refusal, before FLARE starts
    assert main(["job", "simulate", "--config", str(configs), "-q",
                 "--workspace", str(tmp_path / "ws")]) == 1  # fmt: skip
    assert "site-2: label_map: {B: 0, M: 1}" in capsys.readouterr().err
    assert not (tmp_path / "ws").exists() and not (tmp_path / "ws.log").exists()
    edit(configs / "site-2.yaml", lambda d: d.update(label_map={"B": 0, "M": 1}))
    assert main(["job", "build", "--config", str(configs), "--out", str(out)]) == 0


@pytest.mark.flare
def test_no_custom_ships_no_code_and_a_job_folder_gives_back_its_recipe(tmp_path):
    configs = write_configs(tmp_path, rows=60)
    job = build_job(configs, tmp_path / "jobs", ship_code=False)
    for app in ("app_server", *(f"app_{s}" for s in SITES)):
        assert not (job / app / "custom" / "fedforest").exists(), app
        assert (job / app / "config").is_dir()
    full = build_job(configs, tmp_path / "full")
    recipe = FedForestRecipe.from_job_folder(full)
    assert recipe.sites == SITES and recipe.name == "fedforest-demo"
    assert recipe.site_configs["site-2"].renames == {"glucose_mg_dl": "glucose"}
    with pytest.raises(ValueError, match="no meta.json"):
        FedForestRecipe.from_job_folder(tmp_path)


def test_a_coordinator_without_the_data_can_build_with_skip_data_checks(tmp_path, capsys):
    configs = write_configs(tmp_path, rows=60)
    for site in SITES:
        (tmp_path / "data" / f"{site}.csv").unlink()  # the hospitals keep their data
    out = tmp_path / "jobs"
    assert main(["job", "build", "--config", str(configs), "--out", str(out)]) == 1
    assert "key 'data_path'" in capsys.readouterr().err
    args = ["job", "build", "--config", str(configs), "--out", str(out), "--skip-data-checks"]
    assert main(args) == 0
    assert (out / "fedforest-demo" / "meta.json").is_file()
    assert FedForestRecipe(configs, data_checks=False).sites == SITES


def test_the_job_script_exports_with_flares_recipe_flags(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    configs = write_configs(tmp_path, rows=60)
    script = Path(__file__).resolve().parents[2] / "jobs" / "fedforest_job.py"
    out = tmp_path / "exported"
    args = ["--config", str(configs), "--export", "--export-dir", str(out)]
    done = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (out / "fedforest-demo" / "meta.json").is_file()
    assert (out / "fedforest-demo" / "app_site-2" / "config" / "fedforest_site.yaml").is_file()


def test_a_swarm_job_runs_the_swarm_controller_and_a_swarm_executor_at_every_site(tmp_path):
    from fedforest import protocol

    configs = write_configs(tmp_path, rows=60, job={"mode": "swarm"})
    job = build_job(configs, tmp_path / "jobs")
    meta = json.loads((job / "meta.json").read_text())
    assert meta["deploy_map"] == {"app_server": ["server"], **{f"app_{s}": [s] for s in SITES}}
    server = json.loads((job / "app_server/config/config_fed_server.json").read_text())
    (workflow,) = server["workflows"]
    assert workflow["path"] == "fedforest.flare.swarm.FedForestSwarmController"
    assert workflow["args"]["participating_clients"] == SITES
    job_yaml = (configs / "job.yaml").read_text()
    assert (job / "app_server/config/fedforest_job.yaml").read_text() == job_yaml
    for site in SITES:
        app = job / f"app_{site}"
        client = json.loads((app / "config/config_fed_client.json").read_text())
        (executor,) = client["executors"]
        assert executor["executor"]["path"] == "fedforest.flare.swarm.FedForestSwarmExecutor"
        assert executor["tasks"] == list(protocol.SWARM_TASKS)
        # every site has the job's settings: it runs the job's rules itself
        assert (app / "config/fedforest_job.yaml").read_text() == job_yaml, site
        shipped = yaml.safe_load((app / "config/fedforest_site.yaml").read_text())
        assert shipped["site"] == site and os.path.isabs(shipped["data_path"])
        assert (app / "custom/fedforest/flare/swarm.py").is_file()
        assert (app / "custom/fedforest/federation/swarm.py").is_file()


def test_a_swarm_job_with_the_privacy_filter_is_refused_naming_job_mode(tmp_path):
    from fedforest.flare.privacy_filter import PrivacyPolicyFilter

    configs = write_configs(tmp_path, rows=60, job={"mode": "swarm"})
    with pytest.raises(ValueError, match=r"job\.mode") as err:
        FedForestRecipe(configs, privacy_filter=PrivacyPolicyFilter(min_leaf_rows=5))
    assert "swarm" in str(err.value)
    # the same filter is accepted in server mode
    server = write_configs(tmp_path / "server", rows=60)
    FedForestRecipe(server, privacy_filter=PrivacyPolicyFilter(min_leaf_rows=5))


# ------------------------------------------------------------------ refused at build, not at run
def _build(configs, out, capsys) -> tuple[int, str]:
    code = main(["job", "build", "--config", str(configs), "--out", str(out)])
    return code, capsys.readouterr().err


def test_build_refuses_an_out_folder_of_another_command_or_holding_inputs(tmp_path, capsys):
    configs = write_configs(tmp_path, rows=60)
    data = tmp_path / "data"  # make_demo_data's folder, with its marker
    before = sorted(p.name for p in data.iterdir())
    for out, words in (
        (data, "data_prep/make_demo_data.py"),
        (data / "jobs", "data_prep/make_demo_data.py"),
        (configs, "an input folder"),
        (tmp_path, "it holds"),
    ):
        code, err = _build(configs, out, capsys)
        assert code == 1 and str(out) in err and words in err, err
    assert sorted(p.name for p in data.iterdir()) == before
    assert _build(configs, tmp_path / "jobs", capsys)[0] == 0


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda d: d.update(renames={"age": "BMI"}), "key 'renames.age'"),
        (
            lambda d: d.update(
                drop_columns=["age", "bmi", "systolic_bp", "smoker", "glucose", "insulin", "ldl"]
            ),
            "key 'drop_columns'",
        ),
        (lambda d: d.update(label_map={0: 1, 1: 1}), "key 'label_map'"),
        (lambda d: d.update(validation_fraction=0.001), "key 'validation_fraction' is 0.001"),
        (lambda d: d.update(calibration="isotonic"), "key 'calibration' is 'isotonic'"),
        (lambda d: d.update(privacy={"count_noise_epsilon": 1e-320}), "count_noise_epsilon"),
    ],
)
def test_what_the_job_would_refuse_when_it_runs_is_refused_at_build(
    tmp_path, capsys, change, words
):
    configs = write_configs(tmp_path, rows=60)
    edit(configs / "site-1.yaml", change)
    code, err = _build(configs, tmp_path / "jobs", capsys)
    assert code == 1 and "site-1.yaml" in err and words in err, err
    assert not (tmp_path / "jobs").exists() or not any((tmp_path / "jobs").iterdir())


def test_build_refuses_look_alike_columns_and_one_table_at_two_sites(tmp_path, capsys):
    configs = write_configs(tmp_path, rows=60)
    data = tmp_path / "data"
    table = pd.read_csv(data / "site-1.csv")
    table.assign(BMI=table["bmi"] + 1).to_csv(data / "site-1.csv", index=False)
    code, err = _build(configs, tmp_path / "jobs", capsys)
    assert code == 1 and "column 'bmi' and column 'BMI' have names that read alike" in err
    table.to_csv(data / "site-1.csv", index=False)
    os.remove(data / "site-3.csv")
    os.link(data / "site-1.csv", data / "site-3.csv")
    code, err = _build(configs, tmp_path / "jobs", capsys)
    assert code == 1 and "hard link" in err and "site-3.yaml: key 'data_path'" in err


def test_build_refuses_a_utf16_site_file_naming_utf8(tmp_path, capsys):
    configs = write_configs(tmp_path, rows=60)
    path = configs / "site-2.yaml"
    path.write_bytes(path.read_text().encode("utf-16"))
    code, err = _build(configs, tmp_path / "jobs", capsys)
    assert code == 1 and f"{path}: the file is UTF-16" in err and "UTF-8" in err
