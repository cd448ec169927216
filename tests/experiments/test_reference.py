"""The pooled-data reference: scikit-learn's forest on every site's rows stacked, scored as
the job scores, on the rows the job splits."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from fedforest.experiments.reference import (
    PooledDataReference,
    SiteRows,
    config_reference,
    job_reference,
    job_site_rows,
    pooled_columns,
    pooled_data_reference,
    runner_rows,
)
from fedforest.metrics import score_all, score_values


def site(columns, n=80, seed=0, val=True, classes=2, code=None):
    """A site's rows: ``columns`` of numbers (``code``: a column of integer codes 0-3)."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, len(columns))), columns=columns)
    if code is not None:
        X[code] = rng.integers(0, 4, n).astype(float)
    y = (X.iloc[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int).to_numpy()
    if classes == 3:
        y = y + (X.iloc[:, 0] > 1).to_numpy()
    a, b = int(n * 0.6), int(n * 0.8)
    if not val:
        return SiteRows(X[:b], y[:b], X[b:], y[b:])
    return SiteRows(X[:a], y[:a], X[b:], y[b:], X[a:b], y[a:b])


@pytest.fixture(scope="module")
def sites():
    return {
        "a": site(["age", "bmi", "glucose"], seed=1, code="smoker"),
        "b": site(["age", "bmi", "hba1c"], seed=2),
        "c": site(["age", "insulin"], seed=3, val=False),
    }


def test_the_forest_is_scikit_learns_on_every_sites_rows_stacked(sites):
    ref = PooledDataReference({"n_estimators": 7, "min_samples_leaf": 2}, random_state=3)
    ref.fit(sites)
    columns = ["age", "bmi", "glucose", "smoker", "hba1c", "insulin"]
    assert ref.columns_ == pooled_columns(sites) == columns
    # training and validation rows pooled; a site without validation rows gives its training rows
    assert ref.n_rows_ == {"a": 64, "b": 64, "c": 64}
    parts = [r.fit_rows() for r in sites.values()]
    X = pd.concat([x.reindex(columns=columns) for x, _ in parts], ignore_index=True)
    y = np.concatenate([t for _, t in parts])
    # a column a site does not measure is missing in its rows: only age is everywhere
    assert list(X.columns[X.isna().any()]) == columns[1:]
    # the integer codes are numbers to the trees, as in a site's own forest
    assert set(X["smoker"].dropna()) <= {0.0, 1.0, 2.0, 3.0}
    expected = RandomForestClassifier(
        n_estimators=7, min_samples_leaf=2, random_state=3, n_jobs=1
    ).fit(X.to_numpy(np.float32), y)
    for rows in sites.values():
        test = rows.X_test.reindex(columns=columns).to_numpy(np.float32)
        np.testing.assert_array_equal(ref.predict_proba(rows.X_test), expected.predict_proba(test))
    assert len(ref.forest_.estimators_) == 7


def test_scores_are_the_jobs_metrics_on_each_sites_test_rows(sites):
    metrics = ["auprc", "auc", "accuracy", "brier", "log_loss", "ece"]
    scores = pooled_data_reference(sites, metrics, {"n_estimators": 9}, random_state=0)
    ref = PooledDataReference({"n_estimators": 9}, random_state=0).fit(sites)
    assert list(scores) == ["a", "b", "c"]
    for name, rows in sites.items():
        proba = ref.predict_proba(rows.X_test, [0, 1])
        assert scores[name] == {
            **score_all(rows.y_test, proba, np.array([0, 1]), metrics),
            "rows": len(rows.X_test),
            "events": int(rows.y_test.sum()),
        }
    only = pooled_data_reference(sites, ["auc"], {"n_estimators": 9}, scored=["b"])
    assert only == {"b": {"auc": scores["b"]["auc"], "rows": 16, "events": scores["b"]["events"]}}


def test_a_class_no_training_row_has_gets_probability_zero():
    rows = {"a": site(["x"], seed=5), "b": site(["x", "z"], seed=6)}
    ref = PooledDataReference({"n_estimators": 5}).fit(rows)
    proba = ref.predict_proba(rows["a"].X_test, [0, 1, 2])
    assert proba.shape == (16, 3) and not proba[:, 2].any()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    score = ref.score(rows["a"], ["auc", "log_loss"], classes=[0, 1, 2])
    assert np.isfinite(score["log_loss"]) and score["events"] >= 0


def test_regression_uses_a_regression_forest_and_the_regression_metrics():
    rng = np.random.default_rng(0)
    out = {}
    for name, cols in {"a": ["x", "u"], "b": ["x", "v"]}.items():
        X = pd.DataFrame(rng.normal(size=(60, 2)), columns=cols)
        y = 3 * X["x"].to_numpy() + rng.normal(size=60)
        out[name] = SiteRows(X[:45], y[:45], X[45:], y[45:])
    ref = PooledDataReference({"n_estimators": 6}, random_state=1, task="regression").fit(out)
    assert isinstance(ref.forest_, RandomForestRegressor)
    scores = pooled_data_reference(out, ["rmse", "r2"], {"n_estimators": 6}, 1, "regression")
    predicted = ref.predict(out["b"].X_test)
    assert scores["b"]["rmse"] == score_values("rmse", out["b"].y_test, predicted)
    assert scores["b"]["events"] is None and scores["b"]["r2"] > 0.5
    with pytest.raises(ValueError, match=r"metrics \['auc'\] are not among"):
        ref.score(out["a"], ["auc"])


def test_bad_rows_and_settings_are_refused(sites):
    X = pd.DataFrame({"x": [1.0, 2.0, 3.0]})
    with pytest.raises(ValueError, match="the train rows: 3 feature rows but 2 targets"):
        SiteRows(X, [0, 1], X, [0, 1, 0])
    with pytest.raises(ValueError, match="give both X_val and y_val, or neither"):
        SiteRows(X, [0, 1, 0], X, [0, 1, 0], X_val=X)
    with pytest.raises(ValueError, match="the test rows are a ndarray, not a DataFrame"):
        SiteRows(X, [0, 1, 0], X.to_numpy(), [0, 1, 0])
    with pytest.raises(ValueError, match="a site needs training and test rows"):
        SiteRows(X, [0, 1, 0], X[:0], [])
    with pytest.raises(ValueError, match=r"forest settings \['n_jobs'\] are unknown"):
        PooledDataReference({"n_jobs": 4}).fit(sites)
    with pytest.raises(ValueError, match="task='survival'"):
        PooledDataReference(task="survival").fit(sites)
    with pytest.raises(ValueError, match="no site's rows to pool"):
        PooledDataReference().fit({})
    with pytest.raises(ValueError, match=r"site 'b' has columns \['hba1c'\] that are not pooled"):
        PooledDataReference(columns=["age", "bmi", "glucose", "smoker", "insulin"]).fit(sites)
    with pytest.raises(ValueError, match=r"sites \['d'\] have no rows"):
        pooled_data_reference(sites, ["auc"], {"n_estimators": 2}, scored=["d"])
    ref = PooledDataReference({"n_estimators": 2}).fit(sites)
    with pytest.raises(ValueError, match=r"columns \['ldl'\] were not among the pooled columns"):
        ref.predict_proba(X.rename(columns={"x": "ldl"}))
    with pytest.raises(ValueError, match=r"metrics \['rmse'\] are not among"):
        ref.score(sites["a"], ["rmse"])


# ------------------------------------------------------------------ a job's sites
def demo_job(folder, task="classification"):
    """The demo hospitals (or the regression demo) as a job folder: 6 trees, no election."""
    from pathlib import Path

    from data_prep.make_demo_data import make_demo_data

    root = Path(__file__).resolve().parents[2] / "site_configs"
    shipped = root / "regression" if task == "regression" else root
    make_demo_data(folder / "data", rows=150, seed=0, task=task)
    configs = folder / "site_configs"
    configs.mkdir()
    job = yaml.safe_load((shipped / "job.yaml").read_text())
    job["job"]["seed"] = 4
    job["forest"]["n_estimators"] = 6
    job["election"]["enabled"] = False
    job["evaluation"]["strategies"] = ["local", "mp", "auto"]
    (configs / "job.yaml").write_text(yaml.safe_dump(job))
    for name in job["job"]["sites"]:
        cfg = yaml.safe_load((shipped / f"{name}.yaml").read_text())
        cfg["data_path"] = str(folder / "data" / f"{name}.csv")
        (configs / f"{name}.yaml").write_text(yaml.safe_dump(cfg))
    return configs


def test_a_jobs_reference_is_on_the_rows_its_sites_split(tmp_path):
    from fedforest.federation.offline import run_job

    configs = demo_job(tmp_path)
    job = run_job(configs)
    assert job.results.finished
    rows = runner_rows(job.runners)
    again = job_site_rows(configs)  # the schema phase alone: the same split, the same codes
    assert list(rows) == list(again) == job.config.sites
    for name in rows:
        for part in ("X_train", "X_val", "X_test"):
            pd.testing.assert_frame_equal(getattr(rows[name], part), getattr(again[name], part))
        np.testing.assert_array_equal(rows[name].y_test, again[name].y_test)
        # exactly the test rows the job scored
        assert job.results.metrics[name]["local"]["rows"] == len(rows[name].X_test)
    scores = job_reference(job)
    assert scores == config_reference(configs)
    assert set(scores) == set(job.results.metrics)
    assert set(scores["site-1"]) == {*job.config.metrics, "rows", "events"}
    # the job's forest settings and seed, the schema's column order and classes
    schema = job.server.schema
    ref = PooledDataReference(job.config.forest.to_dict(), 4, columns=schema.features).fit(rows)
    assert len(ref.forest_.estimators_) == 6
    # smoker is categorical at every site: its global codes, as numbers
    assert set(rows["site-1"].X_train["smoker"].dropna()) <= {0.0, 1.0, 2.0}
    classes = np.asarray(schema.classes)
    for name, site_rows in rows.items():
        proba = ref.predict_proba(site_rows.X_test, classes)
        expected = score_all(site_rows.y_test, proba, classes, job.config.metrics)
        assert {m: scores[name][m] for m in expected} == expected


def test_a_site_validating_out_of_bag_gives_its_training_rows(tmp_path):
    from fedforest.federation.offline import run_job

    configs = demo_job(tmp_path)
    job = run_job(configs)
    for runner in job.runners.values():  # as a site without validation rows holds them
        runner.X_train = pd.concat([runner.X_train, runner.X_val])
        runner.y_train = np.concatenate([runner.y_train, runner.y_val])
        runner.X_val = runner.y_val = None
    rows = runner_rows(job.runners)
    assert all(r.X_val is None for r in rows.values())
    assert job_reference(job) == config_reference(configs)


def test_a_regression_jobs_reference(tmp_path):
    from fedforest.federation.offline import run_job

    configs = demo_job(tmp_path, "regression")
    job = run_job(configs)
    scores = job_reference(job)
    assert set(scores["site-1"]) == {*job.config.metrics, "rows", "events"}
    assert scores == config_reference(configs)
    assert all(s["rmse"] > 0 for s in scores.values())
