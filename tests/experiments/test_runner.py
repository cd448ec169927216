"""The paper's protocol in-process: repetitions, the tidy table, and the expected ordering."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedforest.experiments.runner import (
    METHODS,
    TIDY_COLUMNS,
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
