"""What each job.task allows and fills in (federation/config_tasks.py)."""

from __future__ import annotations

import pytest

from fedforest.errors import ConfigError
from fedforest.federation.config_tasks import TASK_RULES, task_defaults
from fedforest.validation import ConfigChecker
from fedforest.vocabulary import (
    REGRESSION_AUTO_METRIC,
    REGRESSION_METRICS,
    SURVIVAL_AUTO_METRIC,
    SURVIVAL_METRICS,
    TASKS,
)

SOURCE = "site_configs/job.yaml"
DEFAULTS = {
    "regression": (REGRESSION_METRICS, REGRESSION_AUTO_METRIC),
    "survival": (SURVIVAL_METRICS, SURVIVAL_AUTO_METRIC),
}


def refused(task, given, ev, el=None):
    with pytest.raises(ConfigError) as info:
        task_defaults(ConfigChecker(SOURCE), given, ev, el or {}, task)
    assert str(info.value).startswith(f"{SOURCE}: key '")
    return str(info.value)


def test_every_task_has_its_rules():
    assert set(TASK_RULES) == set(TASKS)
    for task, rules in TASK_RULES.items():
        assert rules.metrics and rules.auto_metrics and rules.tuning_metrics
        assert rules.auto_metric is None or rules.auto_metric in rules.auto_metrics
        assert rules.auto_metric is None or rules.auto_metric in rules.tuning_metrics, task


@pytest.mark.parametrize("task", ["regression", "survival"])
def test_a_job_gets_its_tasks_defaults_for_the_keys_it_leaves_out(task):
    metrics, metric = DEFAULTS[task]
    ev = {"metrics": ["auc"], "auto_metric": "log_loss", "calibration": "sigmoid"}
    el = {"metric": "log_loss"}
    task_defaults(ConfigChecker(SOURCE), {"job": {"task": task}}, ev, el, task)
    assert ev == {"metrics": list(metrics), "auto_metric": metric, "calibration": "none"}
    assert el == {"metric": metric}


def test_a_job_keeps_the_keys_it_sets_and_a_classification_job_is_left_as_it_is():
    given = {"evaluation": {"metrics": ["mae"], "auto_metric": "rmse"}, "election": {"metric": "x"}}
    ev = {"metrics": ["mae"], "auto_metric": "rmse", "calibration": "none"}
    el = {"metric": "x"}
    task_defaults(ConfigChecker(SOURCE), given, ev, el, "regression")
    assert ev["metrics"] == ["mae"] and el == {"metric": "x"}
    ev = {"metrics": ["auc"], "auto_metric": "log_loss", "calibration": "sigmoid"}
    task_defaults(ConfigChecker(SOURCE), {}, ev, {}, "classification")
    assert ev == {"metrics": ["auc"], "auto_metric": "log_loss", "calibration": "sigmoid"}


@pytest.mark.parametrize(
    "task, section, value, key, allowed",
    [
        ("regression", {"calibration": "isotonic"}, "isotonic", "evaluation.calibration", "none"),
        ("regression", {"voting": "hard"}, "hard", "evaluation.voting", "soft"),
        (
            "regression",
            {"metrics": ["rmse", "auc"]},
            ["rmse", "auc"],
            "evaluation.metrics",
            "regression metrics rmse, mae, r2 for job.task: regression ('auc' is a "
            "classification metric)",
        ),
        ("survival", {"calibration": "sigmoid"}, "sigmoid", "evaluation.calibration", "none"),
        ("survival", {"voting": "hard"}, "hard", "evaluation.voting", "soft"),
        (
            "survival",
            {"metrics": ["cindex", "rmse", "nope"]},
            ["cindex", "rmse", "nope"],
            "evaluation.metrics",
            "('rmse' is a regression metric; 'nope' is unknown)",
        ),
        (
            "survival",
            {"metrics": ["nope"]},
            ["nope"],
            "evaluation.metrics",
            "('nope' is unknown)",
        ),
    ],
)
def test_what_the_task_cannot_use_is_refused_naming_it(task, section, value, key, allowed):
    metrics = list(DEFAULTS[task][0])
    ev = {"metrics": metrics, "calibration": "none", **section}
    message = refused(task, {"evaluation": section}, ev)
    assert f"key '{key}' is {value!r}; allowed: " in message
    assert allowed in message and (key == "evaluation.metrics" or f"job.task: {task}" in message)
