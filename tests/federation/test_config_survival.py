"""What job.task: survival adds to the job's and the sites' files (config_survival)."""

from __future__ import annotations

import pytest

from fedforest.errors import ConfigError
from fedforest.federation.config import JobConfig, SiteConfig
from fedforest.federation.tables import check_data

from .test_config import ROOT, assert_precise, site_dict, write_csv


def survival_site(**changes) -> dict:
    data = {"site": "site-1", "data_path": "data.csv", "time": "months", "event": "died"}
    data.update(changes)
    return {k: v for k, v in data.items() if v is not ...}


def test_the_shipped_survival_job_loads_with_survival_defaults():
    job = JobConfig.load(ROOT / "site_configs" / "survival" / "job.yaml")
    assert job.task == "survival" and job.survival
    assert job.auto_metric == "ibs" and job.calibration == "none"
    assert job.election.enabled and job.survival_times is None
    bare = JobConfig.from_dict({"job": {"sites": ["a", "b"], "task": "survival"}}, "j.yaml")
    assert bare.metrics == ["cindex", "uno_cindex", "ibs", "td_auc"]
    assert bare.election.enabled and bare.election.metric == "ibs" and bare.grid_points == 30
    tuned = {"job": {"sites": ["a", "b"], "task": "survival"}, "election": {"metric": "cindex"}}
    assert JobConfig.from_dict(tuned, "j.yaml").election.metric == "cindex"


@pytest.mark.parametrize(
    "extra, key, shown, allowed",
    [
        ({"election": {"metric": "uno_cindex"}}, "election.metric", "uno_cindex", "ibs, cindex"),
        ({"election": {"metric": "auprc"}}, "election.metric", "auprc", "ibs, cindex"),
        ({"evaluation": {"metrics": ["auc"]}}, "evaluation.metrics", ["auc"], "survival metrics"),
        (
            {"evaluation": {"calibration": "sigmoid"}},
            "evaluation.calibration",
            "sigmoid",
            "none for job.task: survival",
        ),
        ({"evaluation": {"auto_metric": "log_loss"}}, "evaluation.auto_metric", "log_loss", ""),
        ({"survival": {"times": [5, 3]}}, "survival.times", [5, 3], "2 to 200 finite times"),
        ({"survival": {"times": "all"}}, "survival.times", "all", "null or a list of numbers"),
        ({"survival": {"grid_points": 1}}, "survival.grid_points", 1, "an integer in [2, 200]"),
        ({"survival": {"horizons": []}}, "survival.horizons", [], "1 to 10 finite times"),
        ({"survival": {"horizons": [730, 365]}}, "survival.horizons", [730, 365], "1 to 10"),
        ({"survival": {"horizons": [True]}}, "survival.horizons", [True], "null or a list of"),
        ({"survival": {"horizons": "1y"}}, "survival.horizons", "1y", "null or a list of"),
        (
            {"survival": {"times": [0, 365], "horizons": [730]}},
            "survival.horizons",
            [730],
            "times within survival.times, [0, 365]",
        ),
    ],
)
def test_a_survival_job_refuses_what_it_cannot_use(extra, key, shown, allowed):
    data = {"job": {"sites": ["a", "b"], "task": "survival"}, **extra}
    with pytest.raises(ConfigError) as err:
        JobConfig.from_dict(data, "j.yaml")
    assert_precise(err.value, "j.yaml", key, shown, allowed)


def test_horizons_are_read_and_only_a_survival_job_may_set_them(survival_job):
    data = {"job": {"sites": ["a", "b"], "task": "survival"}, "survival": {"horizons": [365]}}
    assert JobConfig.from_dict(data, "j.yaml").survival_horizons == (365.0,)
    assert JobConfig.load(ROOT / "site_configs" / "survival" / "job.yaml").survival_horizons
    data["job"]["task"] = "regression"
    with pytest.raises(ConfigError) as err:
        JobConfig.from_dict(data, "j.yaml")
    assert_precise(err.value, "j.yaml", "survival.horizons", [365], "null unless job.task")
    # the evaluate task's horizons are checked where they enter a site
    runner = survival_job[0].runners["site-1"]
    assert runner._horizons(None) is None and runner._horizons([30, 60]) == [30.0, 60.0]
    with pytest.raises(ValueError, match="site 'site-1': the evaluate task's horizons must be"):
        runner._horizons([60, 30])


def test_a_public_time_grid_is_read_and_only_a_survival_job_may_set_one():
    data = {"job": {"sites": ["a", "b"], "task": "survival"}, "survival": {"times": [0, 365]}}
    assert JobConfig.from_dict(data, "j.yaml").survival_times == (0.0, 365.0)
    data["job"]["task"] = "classification"
    with pytest.raises(ConfigError) as err:
        JobConfig.from_dict(data, "j.yaml")
    assert_precise(err.value, "j.yaml", "survival.times", [0, 365], "null unless job.task")


def test_a_survival_site_names_time_and_event_and_the_event_is_its_target():
    cfg = SiteConfig.from_dict(survival_site(time_resolution=6), "s.yaml", task="survival")
    assert (cfg.target, cfg.time, cfg.time_resolution) == ("died", "months", 6.0)
    assert cfg.outcomes == ["died", "months"]


@pytest.mark.parametrize(
    "changes, key, shown, allowed",
    [
        ({"target": "died"}, "target", "died", "absent in a survival job"),
        ({"time": ...}, "time", None, "a column name (this key is required in a survival"),
        ({"event": "months"}, "event", "months", "a column other than the time column"),
        ({"time_resolution": 0}, "time_resolution", 0, "a finite number > 0"),
        ({"calibration": "prior"}, "calibration", "prior", "none or null in a survival job"),
        ({"label_map": {1: 0}}, "label_map", {1: 0}, "{} in a survival job"),
        ({"drop_columns": ["months"]}, "drop_columns", "months", "columns other than the time"),
    ],
)
def test_a_survival_site_refuses_bad_outcome_keys(changes, key, shown, allowed):
    with pytest.raises(ConfigError) as err:
        SiteConfig.from_dict(survival_site(**changes), "s.yaml", task="survival")
    assert_precise(err.value, "s.yaml", key, shown, allowed)


@pytest.mark.parametrize("selector", ["random_forest", "coxnet", "cox_univariate", "none"])
def test_a_survival_site_takes_the_selectors_that_read_a_time_to_an_event(selector):
    site = survival_site(selector=selector)
    assert SiteConfig.from_dict(site, "s.yaml", task="survival").selector == selector


@pytest.mark.parametrize(
    "selector, task, allowed",
    [
        ("lasso", "survival", "one of random_forest, coxnet, cox_univariate, none for job.task"),
        ("f_classif", "survival", "one of random_forest, coxnet, cox_univariate, none for job"),
        ("coxnet", "classification", "one of lasso, elastic_net, mutual_info, random_forest, "),
        ("cox_univariate", "regression", "one of lasso, elastic_net, mutual_info, random_for"),
    ],
)
def test_a_selector_of_another_task_is_refused_naming_the_ones_allowed(selector, task, allowed):
    site = survival_site(selector=selector) if task == "survival" else site_dict(selector=selector)
    with pytest.raises(ConfigError) as err:
        SiteConfig.from_dict(site, "s.yaml", task=task)
    assert_precise(err.value, "s.yaml", "selector", selector, allowed)


@pytest.mark.parametrize("key", ["time", "event", "time_resolution"])
def test_other_jobs_refuse_the_survival_keys(key):
    with pytest.raises(ConfigError) as err:
        SiteConfig.from_dict(site_dict(**{key: 3}), "s.yaml", task="regression")
    assert_precise(err.value, "s.yaml", key, 3, "null or absent unless job.task is survival")


def test_dp_mode_is_refused_for_a_survival_site_with_the_reason(tmp_path):
    rows = [[i % 7, float(3 * i + 2), i % 2] for i in range(40)]
    data = write_csv(tmp_path / "data.csv", ["x", "months", "died"], rows)
    site = survival_site(
        data_path=str(data), privacy={"dp_epsilon": 1.0, "feature_ranges": {"x": [0, 10]}}
    )
    cfg = SiteConfig.from_dict(site, "s.yaml", task="survival")
    with pytest.raises(ConfigError) as err:
        check_data(cfg)
    assert_precise(
        err.value, "s.yaml", "privacy.dp_epsilon", 1.0, "null for job.task: survival: DP mode"
    )
