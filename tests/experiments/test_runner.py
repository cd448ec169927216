"""The paper's protocol in-process: repetitions, the tidy table, and the expected ordering."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedforest.experiments.runner import (
    METHODS,
    TIDY_COLUMNS,
    Dataset,
    ExperimentPlan,
    load_table,
    run_experiment,
    run_repetition,
)


@pytest.fixture(scope="module")
def mix():
    return load_table("S-500-Mix")


def test_one_repetition_scores_every_method_at_every_site(mix):
    rows = pd.DataFrame(run_repetition(mix, 3, 0.5, 0, METHODS, ["auprc", "mcc"], n_estimators=20))
    assert list(rows.columns) == TIDY_COLUMNS
    assert set(rows["method"]) == set(METHODS)
    assert set(rows["site"]) == {"site-1", "site-2", "site-3"}
    assert len(rows) == 3 * len(METHODS) * 2
    auprc = rows[rows.metric == "auprc"]["value"]
    assert auprc.between(0.2, 1.0).all()


def test_repetitions_are_reproducible_and_differ_by_seed(mix):
    a = run_repetition(mix, 2, 0.4, 3, ["mp", "pr"], ["auc"], n_estimators=10)
    b = run_repetition(mix, 2, 0.4, 3, ["mp", "pr"], ["auc"], n_estimators=10)
    c = run_repetition(mix, 2, 0.4, 4, ["mp", "pr"], ["auc"], n_estimators=10)
    assert a == b
    assert [r["value"] for r in a] != [r["value"] for r in c]


def test_mp_beats_intersection_and_local_on_s500_mix(tmp_path):
    plan = ExperimentPlan(
        datasets=["S-500-Mix"],
        n_sites=[3],
        jaccards=[0.3],
        reps=20,
        methods=["intersection", "local", "mp"],
        metrics=["auprc"],
        n_jobs=2,
    )
    tidy = run_experiment(plan, tmp_path)
    per_rep = tidy.groupby(["rep", "method"])["value"].mean().unstack()
    means = per_rep.mean()
    assert means["mp"] > means["intersection"]
    assert means["mp"] > means["local"]
    written = pd.read_csv(tmp_path / "results.csv")
    assert len(written) == len(tidy) == 20 * 3 * 3


def test_hard_voting_and_csv_datasets(tmp_path, mix):
    frame = mix.X.assign(
        outcome=np.where(mix.y == 1, "yes", "no"),
        colour=np.where(mix.X["num_01"] > 0, "red", "blue"),
    )
    path = tmp_path / "table.csv"
    frame.to_csv(path, index=False)
    data = load_table(str(path), target="outcome")
    assert "colour" in data.categorical and data.X["colour"].isin([0, 1]).all()
    rows = run_repetition(
        data, 2, 0.6, 0, ["fpv", "intersection"], ["auprc"], voting="hard", n_estimators=10
    )
    assert {r["method"] for r in rows} == {"fpv", "intersection"}


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(methods=["mp", "magic"]), "magic"),
        (dict(metrics=["f1"]), "f1"),
        (dict(n_sites=[1]), "n_sites"),
        (dict(jaccards=[0.0]), "jaccards"),
        (dict(reps=0), "reps"),
        (dict(voting="most"), "voting"),
        (dict(datasets=[]), "datasets"),
    ],
)
def test_bad_plans(change, message):
    plan = ExperimentPlan(datasets=["S-500-Mix"], reps=1)
    for key, value in change.items():
        setattr(plan, key, value)
    with pytest.raises(ValueError, match=message):
        run_experiment(plan)


def test_unknown_dataset():
    with pytest.raises(ValueError, match="neither a known synthetic set"):
        load_table("S-999")


def test_rows_per_class_follows_the_stratified_test_split():
    from fedforest.experiments.runner import rows_per_class

    assert rows_per_class(3) == 12  # 4 rows of every class at each of 3 sites
    assert rows_per_class(2, test_fraction=0.2) == 10
    # with that many rows of each class, every site's training and test rows hold every class
    mix = load_table("S-500-Num")
    frame = mix.X.iloc[:, :4].assign(y=mix.y)
    small = pd.concat([frame[frame.y == c].head(rows_per_class(6)) for c in (0, 1)])
    data = Dataset("small", small.drop(columns="y"), small["y"].to_numpy())
    rows = pd.DataFrame(run_repetition(data, 6, 0.5, 0, ["local"], ["auc"], n_estimators=5))
    assert rows["value"].notna().all()


def test_degenerate_datasets_are_refused_before_anything_is_written(tmp_path):
    single = tmp_path / "single.csv"
    pd.DataFrame({"x": range(30), "y": ["yes"] * 30}).to_csv(single, index=False)
    out = tmp_path / "out"
    plan = ExperimentPlan(datasets=[str(single)], target="y", n_sites=[2], reps=1)
    with pytest.raises(ValueError, match=r"dataset single: the target has a single class"):
        run_experiment(plan, out)
    few = tmp_path / "few.csv"
    pd.DataFrame({"x": range(20), "y": [0] * 14 + [1] * 6}).to_csv(few, index=False)
    plan = ExperimentPlan(datasets=[str(few)], target="y", n_sites=[2, 3], reps=1)
    with pytest.raises(ValueError, match=r"class counts \{0: 14, 1: 6\}; 3 sites need at least 12"):
        run_experiment(plan, out)
    missing = tmp_path / "missing.csv"
    pd.DataFrame({"x": range(30), "y": [0, 1, None] * 10}).to_csv(missing, index=False)
    plan = ExperimentPlan(datasets=[str(missing)], target="y", n_sites=[2], reps=1)
    with pytest.raises(ValueError, match="missing in 10 rows"):
        run_experiment(plan, out)
    assert not out.exists()


def test_run_experiment_writes_only_into_its_own_folder(tmp_path):
    from fedforest.outputs import MARKER

    plan = ExperimentPlan(
        datasets=["S-500-Num"],
        n_sites=[2],
        jaccards=[0.5],
        reps=1,
        methods=["local"],
        metrics=["auc"],
        n_estimators=5,
    )
    users = tmp_path / "mine"
    users.mkdir()
    (users / "data.csv").write_text("a\n1\n")
    with pytest.raises(ValueError, match="fedforest did not make it"):
        run_experiment(plan, users)
    assert [p.name for p in users.iterdir()] == ["data.csv"]
    out = tmp_path / "run"
    run_experiment(plan, out)
    assert "results.csv" in (out / MARKER).read_text()
    run_experiment(plan, out)  # again into its own folder
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "results.csv"]


@pytest.mark.parametrize(
    "change, message",
    [(dict(n_estimators=0), "n_estimators"), (dict(depth_threshold=-1), "depth_threshold")],
)
def test_bad_forest_settings(change, message):
    plan = ExperimentPlan(datasets=["S-500-Mix"], reps=1, **change)
    with pytest.raises(ValueError, match=message):
        run_experiment(plan)
