"""The survival protocol: sites dealt by event, random survival forests on one time grid,
every method scored by the survival metrics; with every column at every site, every method
is scikit-survival's forest of the same trees."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedforest.experiments.datasets import load_table
from fedforest.experiments.plan import ExperimentPlan
from fedforest.experiments.reference import REFERENCE
from fedforest.experiments.runner import TIDY_COLUMNS, run_experiment, run_repetition
from fedforest.experiments.survival import (
    fit_survival_site,
    split_survival_rows,
    survival_site_tables,
)
from fedforest.model.time_grid import event_time_grid

METHODS = ["local", "mp", "wmp", "auto", "intersection", "fpv"]
METRICS = ["cindex", "uno_cindex", "ibs", "td_auc"]


@pytest.fixture(scope="module")
def gbsg2():
    return load_table("gbsg2")


def test_the_sites_are_dealt_evenly_by_event(gbsg2):
    sites = survival_site_tables(gbsg2, 3, 0.5, rep=0)
    events = [int(y["event"].sum()) for _, y in sites.values()]
    assert max(events) - min(events) <= 1
    assert sum(len(y) for _, y in sites.values()) == len(gbsg2.y)
    for X, y in sites.values():  # each row keeps its own event and time
        assert np.array_equal(y, gbsg2.y[X.index.to_numpy()])


def test_a_site_split_is_stratified_by_event(gbsg2):
    X, y = survival_site_tables(gbsg2, 3, 0.5, rep=0)["site-1"]
    X_tr, X_te, y_tr, y_te = split_survival_rows(X, y, 0.25, seed=0)
    assert len(X_te) == len(y_te) and len(X_tr) + len(X_te) == len(X)
    assert abs(y_te["event"].mean() - y["event"].mean()) < 0.03
    assert np.array_equal(y_te, gbsg2.y[X_te.index.to_numpy()])


def test_a_repetition_scores_every_method_and_the_reference_at_every_site(gbsg2):
    rows = run_repetition(
        gbsg2,
        3,
        0.5,
        rep=0,
        methods=METHODS,
        metrics=METRICS,
        n_estimators=5,
        task="survival",
        pooled_reference=True,
    )
    tidy = pd.DataFrame(rows, columns=TIDY_COLUMNS)
    assert len(tidy) == 3 * (len(METHODS) + 1) * len(METRICS)
    assert set(tidy["method"]) == {*METHODS, REFERENCE}
    assert set(tidy["site"]) == {"site-1", "site-2", "site-3"}
    assert tidy["value"].notna().all()
    concordance = tidy[tidy["metric"].isin(["cindex", "uno_cindex", "td_auc"])]["value"]
    assert concordance.between(0, 1).all() and concordance.mean() > 0.55
    assert tidy[tidy["metric"] == "ibs"]["value"].between(0, 0.5).all()
    assert (tidy["events"] >= 2).all() and (tidy["events"] <= tidy["test_rows"]).all()


def test_with_every_column_at_every_site_each_method_is_the_sksurv_forest_of_the_same_trees(
    gbsg2,
):
    from sksurv.ensemble import RandomSurvivalForest
    from sksurv.metrics import concordance_index_censored

    from fedforest.experiments.reference import curves_on_grid
    from fedforest.federation.training import pool_site_models
    from fedforest.prediction.out_of_bag import InBag
    from fedforest.prediction.survival import PooledForestSurvival

    sites = survival_site_tables(gbsg2, 3, 1.0, rep=1)
    parts = {s: split_survival_rows(X, y, 0.25, seed=1) for s, (X, y) in sites.items()}
    y_train = np.concatenate([p[2] for p in parts.values()])
    times = event_time_grid(y_train["time"], y_train["event"])
    columns = list(gbsg2.X.columns)
    models = [
        fit_survival_site(
            s,
            p[0],
            p[2],
            columns,
            gbsg2.categories,
            times,
            n_estimators=4,
            random_state=k,
            intersection=True,
        )
        for k, (s, p) in enumerate(parts.items())
    ]
    pooled = pool_site_models(models)
    # site-1's in-bag records: its bootstrap rows in its own trees, none in the others'
    bag = InBag.from_records(pooled.forest, *models[0].records[:1], pooled.intersection)
    assert bag.forest.shape == (12, len(parts["site-1"][0]))
    assert bag.forest[:4].any(axis=1).all() and (~bag.forest[:4]).any(axis=1).all()
    assert not bag.forest[4:].any()
    X_test = pd.concat([p[1] for p in parts.values()])
    y_test = np.concatenate([p[3] for p in parts.values()])
    # scikit-survival's own trees, the same seeds: the mean of every tree's curve on the grid
    hazards = []
    for k, (_, p) in enumerate(parts.items()):
        rsf = RandomSurvivalForest(n_estimators=4, random_state=k, n_jobs=1)
        rsf.fit(p[0].to_numpy(dtype=np.float32), p[2])
        X = X_test.to_numpy(dtype=np.float32)
        hazards += [curves_on_grid(tree, X, times) for tree in rsf.estimators_]
    everyone = np.mean(hazards, axis=0)
    own = np.mean(hazards[:4], axis=0)  # site-1's trees: local
    for method in METHODS:
        estimator = PooledForestSurvival(
            pooled.forest,
            strategy=method,
            imputers=pooled.imputers,
            feature_std=pooled.feature_std,
            site="site-1",
            random_state=0,
            intersection=pooled.intersection,
        )
        if method in ("wmp", "auto"):  # fitted on rows of the site's (its test rows here)
            estimator.fit(parts["site-1"][1], parts["site-1"][3])
        else:
            estimator.fit()
        # auto is the candidate it chose: every candidate is one of the two forests
        hazard = own if getattr(estimator, "strategy_", method) == "local" else everyone
        np.testing.assert_allclose(
            estimator.predict_cumulative_hazard_function(X_test, return_array=True),
            hazard,
            rtol=0,
            atol=1e-12,
        )
        expected = concordance_index_censored(y_test["event"], y_test["time"], hazard.sum(axis=1))[
            0
        ]
        assert estimator.score(X_test, y_test) == pytest.approx(expected, abs=1e-12)


def test_out_of_bag_validation_fits_wmp_and_auto_on_the_training_rows(gbsg2):
    def rows(validation):
        out = run_repetition(
            gbsg2,
            3,
            0.5,
            rep=2,
            methods=["mp", "wmp", "auto"],
            metrics=["cindex", "ibs"],
            n_estimators=5,
            task="survival",
            validation=validation,
        )
        return pd.DataFrame(out, columns=TIDY_COLUMNS).set_index(["site", "method", "metric"])

    oob, holdout = rows("oob"), rows("holdout")
    # the same test rows; the forests train on the validation rows too
    pd.testing.assert_series_equal(oob["test_rows"], holdout["test_rows"])
    pd.testing.assert_series_equal(oob["events"], holdout["events"])
    assert not np.allclose(oob["value"], holdout["value"])
    assert oob["value"].notna().all()
    assert oob.xs("cindex", level="metric")["value"].between(0.5, 1).all()


def test_a_small_experiment_writes_the_tidy_table(tmp_path):
    plan = ExperimentPlan(
        datasets=["veterans"],
        task="survival",
        n_sites=[2],
        jaccards=[0.5],
        reps=1,
        methods=["local", "mp", "wmp"],
        n_estimators=3,
    )
    assert plan.metrics == ["cindex", "ibs"]
    tidy = run_experiment(plan, tmp_path)
    written = pd.read_csv(tmp_path / "results.csv")
    assert list(written.columns) == TIDY_COLUMNS and len(written) == len(tidy) == 2 * 3 * 2
    pd.testing.assert_frame_equal(written, tidy, check_dtype=False)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(metrics=["cindex", "auc"]), r"\['auc'\] \(--metrics\) are classification metrics"),
        (dict(metrics=["rmse"]), r"\['rmse'\] \(--metrics\) are regression metrics"),
        (dict(partition="quantity", alphas=[1.0]), "allowed: jaccard"),
        (dict(calibration="sigmoid"), "calibration='sigmoid' \\(--calibration\\)"),
        (dict(voting="hard"), "the trees' curves are averaged"),
        (dict(auto_metric="auc"), "auto_metric='auc' .*allowed: ibs, cindex, uno_cindex"),
        (dict(target="t"), "a survival target is a time and an event"),
    ],
)
def test_bad_survival_plans(change, message):
    plan = ExperimentPlan(datasets=["gbsg2"], reps=1, task="survival")
    plan.validate()
    for key, value in change.items():
        setattr(plan, key, value)
    with pytest.raises(ValueError, match=message):
        plan.validate()


def test_a_dataset_of_another_task_is_refused_by_name():
    with pytest.raises(
        ValueError,
        match="dataset wine: a classification dataset, not one for "
        "--task survival; --task survival runs gbsg2, whas500, veterans",
    ):
        run_experiment(ExperimentPlan(datasets=["wine"], reps=1, task="survival"))
    with pytest.raises(
        ValueError, match="dataset gbsg2: a survival dataset, not one for --task regression"
    ):
        run_experiment(ExperimentPlan(datasets=["gbsg2"], reps=1, task="regression"))


def test_too_few_events_for_the_sites_are_refused():
    with pytest.raises(
        ValueError,
        match=r"dataset veterans: 128 events in 137 rows; the even "
        r"deal over 20 sites gives the smallest 6 events, but a site needs at "
        r"least 8",
    ):
        run_experiment(
            ExperimentPlan(
                datasets=["veterans"], n_sites=[20], reps=1, task="survival", methods=["local"]
            )
        )
