"""What an experiment runs and its checks, before anything is loaded (experiments/plan.py)."""

from __future__ import annotations

import pytest

from fedforest.experiments.plan import (
    DEFAULT_METRICS,
    METHODS,
    PAPER_JACCARDS,
    PAPER_SITES,
    ExperimentPlan,
    check_task_metrics,
)


def refused(match, **fields):
    plan = ExperimentPlan(**{"datasets": ["wine"], "reps": 1, **fields})
    with pytest.raises(ValueError, match=match):
        plan.validate()


def test_the_defaults_are_the_papers_comparison():
    plan = ExperimentPlan(datasets=["wine"])
    plan.validate()
    assert plan.methods == list(METHODS) and len(METHODS) == 9
    assert plan.n_sites == list(PAPER_SITES) and plan.jaccards == list(PAPER_JACCARDS)
    assert plan.metrics == ["auprc", "auc", "mcc"] and plan.reps == 100
    assert ExperimentPlan(datasets=["diabetes"], task="regression").metrics == ["rmse"]
    assert DEFAULT_METRICS["regression"] == ("rmse",)


def test_metrics_of_the_other_task_are_named_with_the_task_to_use():
    check_task_metrics("classification", ["auc", "brier"])
    with pytest.raises(
        ValueError,
        match=r"metrics \['rmse'\] \(--metrics\) are regression "
        r"metrics; --task classification scores auprc, .*; for a numeric target "
        r"use --task regression",
    ):
        check_task_metrics("classification", ["auc", "rmse"])
    with pytest.raises(ValueError, match=r"metrics \['auc'\] \(--metrics\) are classification"):
        check_task_metrics("regression", ["auc"])
    with pytest.raises(ValueError, match=r"metrics \['f2'\] are not among \['rmse', 'mae', 'r2'\]"):
        check_task_metrics("regression", ["rmse", "f2"])


@pytest.mark.parametrize(
    "fields, match",
    [
        ({"task": "ranking"}, "task='ranking' must be one of classification, regression"),
        ({"partition": "random"}, "partition='random' must be one of jaccard, dirichlet, quantity"),
        ({"alphas": [0.5]}, r"alphas=\[0.5\] apply to the partitions dirichlet and quantity"),
        ({"partition": "dirichlet"}, "partition 'dirichlet' needs its concentrations"),
        ({"partition": "quantity", "alphas": [0.5, 0.5]}, r"alphas=\[0.5, 0.5\] repeat a value"),
        ({"partition": "quantity", "alphas": [0]}, "must be finite numbers > 0"),
        ({"partition": "quantity", "alphas": [True]}, "must be finite numbers > 0"),
        ({"calibration": "platt"}, "calibration='platt' must be one of none, prior, sigmoid"),
        ({"pooling_weights": "trees"}, "pooling_weights='trees' must be one of equal, rows"),
        ({"auto_metric": "f1"}, "auto_metric='f1' must be one of log_loss, brier"),
        ({"metrics": []}, "metrics is empty; name at least one metric"),
        ({"n_jobs": 0}, "n_jobs=0 must be at least 1"),
        ({"n_estimators": 2.0}, "n_estimators=2.0 must be an integer >= 1"),
        ({"n_estimators": True}, "n_estimators=True must be an integer >= 1"),
        ({"depth_threshold": 1.5}, "depth_threshold=1.5 must be an integer >= 0"),
        ({"name": "mine"}, "name='mine' names site files' data; no site files given"),
        ({"pooled_reference": "yes"}, "pooled_reference='yes' must be True or False"),
    ],
)
def test_each_refusal_names_the_option_and_what_is_allowed(fields, match):
    refused(match, **fields)


def test_site_files_keep_their_own_rows_and_need_the_target():
    files = {"datasets": [], "site_files": ["a.csv", "b.csv"]}
    ExperimentPlan(**files, target="y", name="two hospitals").validate()
    refused("site files: give the target column", **files)
    refused(r"give datasets \(wine\) or site files, not both", site_files=["a.csv"], target="y")
    refused(
        "site files keep their own rows",
        **files,
        target="y",
        partition="quantity",
        alphas=[1.0],
    )


def test_skewed_partitions_take_their_concentrations():
    ExperimentPlan(datasets=["wine"], partition="dirichlet", alphas=[0.3, 1]).validate()
    ExperimentPlan(datasets=["wine"], partition="quantity", alphas=[2.5]).validate()


@pytest.mark.parametrize(
    "fields, match",
    [
        ({"partition": "dirichlet", "alphas": [1.0]}, "a regression target has no classes"),
        ({"calibration": "sigmoid"}, "calibration='sigmoid' .* leave it at 'none'"),
        ({"auto_metric": "brier"}, "auto and wmp choose by validation RMSE"),
        ({"voting": "hard"}, "the trees' predictions are averaged: leave it at 'soft'"),
        ({"metrics": ["auc"]}, r"metrics \['auc'\] \(--metrics\) are classification metrics"),
    ],
)
def test_regression_refuses_what_only_classification_has(fields, match):
    ExperimentPlan(
        datasets=["diabetes"], task="regression", partition="quantity", alphas=[1.0]
    ).validate()
    refused(match, datasets=["diabetes"], task="regression", **fields)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(methods=["mp", "wmp", "bogus"]), r"methods \['bogus'\] are not among"),
        (dict(methods=["mp", "wmp", "mp", "wmp"]), r"methods \['mp', 'wmp'\] are given twice"),
        (dict(validation_fraction=0), "validation_fraction=0 must be a number in"),
        (dict(validation_fraction=0.7), "validation_fraction=0.7 must be a number in"),
        (dict(validation_fraction=True), "validation_fraction=True must be a number in"),
        (dict(validation_fraction="x"), "validation_fraction='x' must be a number in"),
    ],
)
def test_bad_methods_and_validation_fractions(change, message):
    plan = ExperimentPlan(datasets=["wine"], reps=1, methods=["mp", "wmp", "auto"])
    plan.validate()  # every experiment method and the default fraction are fine
    for key, value in change.items():
        setattr(plan, key, value)
    with pytest.raises(ValueError, match=message):
        plan.validate()


def test_every_experiment_method_and_the_largest_validation_fraction_are_accepted():
    from fedforest.experiments.runner import ALL_METHODS
    from fedforest.vocabulary import EXPERIMENT_METHODS

    assert ALL_METHODS == EXPERIMENT_METHODS
    ExperimentPlan(
        datasets=["wine"], methods=list(ALL_METHODS), validation_fraction=0.65
    ).validate()


def test_the_papers_protocol_holds_out_validation_rows():
    plan = ExperimentPlan(datasets=["wine"], methods=["mp", "wmp", "auto"])
    assert plan.validation == "holdout"
    plan.validate()
    ExperimentPlan(datasets=["wine"], validation="oob").validate()  # the paper's nine: no fit
    refused(r"validation='cross' must be one of oob, holdout", validation="cross")
    refused(r"validation='cross' must be one of", methods=["wmp"], validation="cross")
    # out of bag: the fitted methods, the calibration and auto_metric are fitted on the
    # training rows scored out of bag (the runner keeps each site's in-bag records)
    ExperimentPlan(
        datasets=["wine"],
        methods=["mp", "wmp", "auto"],
        calibration="sigmoid",
        auto_metric="brier",
        validation="oob",
    ).validate()
