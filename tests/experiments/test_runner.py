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
        n_estimators=30,  # the same ordering as at the default 100 trees, in a third of the time
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
    from fedforest.experiments.datasets import rows_per_class

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


# --------------------------------------------------------------- node, wmp, auto: validation rows
@pytest.fixture(scope="module")
def wine():
    return load_table("wine")


def test_every_experiment_method_is_scored_at_every_site(wine):
    methods = ["local", "mp", "node", "wmp", "auto"]
    rows = pd.DataFrame(run_repetition(wine, 3, 0.7, 0, methods, ["auprc", "mcc"], n_estimators=5))
    assert list(rows.columns) == TIDY_COLUMNS
    assert len(rows) == 3 * len(methods) * 2
    for (site, method), group in rows.groupby(["site", "method"]):
        assert len(group) == 2, (site, method)
    assert set(rows["method"]) == set(methods)
    assert set(rows["site"]) == {"site-1", "site-2", "site-3"}
    auprc = rows[rows.metric == "auprc"]["value"]
    assert np.isfinite(auprc).all() and auprc.between(0.0, 1.0).all()


def observe(monkeypatch, data, methods, **kwargs):
    """Run one repetition, the runner's real training and scoring functions wrapped to record
    which rows each site trains on, is tested on and validates on."""
    from fedforest.experiments import runner

    trained, tested = {}, {}
    real_fit, real_eval = runner.fit_site_models, runner.evaluate_strategies

    def fit(site, X_tr, y_tr, *args, **kw):
        trained[site] = X_tr.index.copy()
        return real_fit(site, X_tr, y_tr, *args, **kw)

    def evaluate(*args, site=None, X_val=None, y_val=None, **kw):
        X_te = args[4]
        tested[site] = (X_te.index.copy(), None if X_val is None else X_val.index.copy())
        return real_eval(*args, site=site, X_val=X_val, y_val=y_val, **kw)

    with monkeypatch.context() as m:
        m.setattr(runner, "fit_site_models", fit)
        m.setattr(runner, "evaluate_strategies", evaluate)
        run_repetition(data, 3, 0.7, 2, methods, ["auprc"], n_estimators=3, **kwargs)
    return trained, tested


def test_validation_rows_come_out_of_the_training_rows_only_when_a_method_needs_them(
    wine, monkeypatch
):
    from fedforest.experiments.partition import split_table
    from fedforest.federation.splits import split_validation
    from fedforest.vocabulary import VALIDATION_METHODS

    assert set(VALIDATION_METHODS) == {"wmp", "auto"}
    plain = observe(monkeypatch, wine, ["mp", "local", "node"])
    with_val = observe(monkeypatch, wine, ["mp", "wmp"], validation_fraction=0.2)
    more_val = observe(monkeypatch, wine, ["auto"], validation_fraction=0.4)
    # the sites' rows, split as the runner splits them
    frame = wine.X.assign(__target__=wine.y)
    tables = split_table(frame, "__target__", 3, 0.7, random_state=2)
    assert sorted(plain[0]) == sorted(tables)
    for site, table in tables.items():
        cols = [c for c in table.columns if c != "__target__"]
        X_tr, X_te, _, _ = split_validation(table[cols], table["__target__"].to_numpy(), 0.25, 2)
        # without a validation method: the paper's 75/25 split, nothing held out
        assert plain[1][site][1] is None
        assert set(plain[0][site]) == set(X_tr.index)
        assert list(plain[1][site][0]) == list(X_te.index)
        for (trained, tests), fraction in ((with_val, 0.2), (more_val, 0.4)):
            tested, validated = tests[site]
            # the same test rows; the validation rows come out of the training rows
            assert list(tested) == list(X_te.index)
            assert set(trained[site]).isdisjoint(validated)
            assert set(trained[site]) | set(validated) == set(X_tr.index)
            assert len(validated) == pytest.approx(fraction * len(table), abs=2)
        assert len(more_val[0][site]) < len(with_val[0][site]) < len(X_tr)


def test_paper_methods_alone_keep_the_paper_protocol_bit_for_bit(wine):
    def mp_rows(methods):
        rows = run_repetition(wine, 3, 0.7, 0, methods, ["auprc", "auc"], n_estimators=5)
        return [r for r in rows if r["method"] == "mp"]

    alone = mp_rows(["mp"])
    assert alone == mp_rows(["mp", "local", "node"])  # node needs no validation rows
    # with wmp, every forest is trained without the validation rows: other forests
    assert alone != mp_rows(["mp", "wmp"])


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


def test_bundled_datasets():
    from fedforest.experiments.bundled import BUNDLED

    wine = load_table("wine")
    assert wine.name == "wine" and wine.X.shape == (178, 13) and wine.categorical == []
    assert list(wine.X.columns) == [f"f{i}" for i in range(13)]
    assert sorted(np.unique(wine.y)) == [0, 1, 2] and len(wine.y) == 178
    cancer = load_table("breast_cancer")
    assert cancer.X.shape == (569, 30) and cancer.y.shape == (569,)
    assert sorted(np.unique(cancer.y)) == [0, 1]
    assert cancer.X.dtypes.map(lambda d: d.kind == "f").all()
    with pytest.raises(ValueError) as info:
        load_table("wines")
    for name in BUNDLED:
        assert name in str(info.value)
    assert "bundled with scikit-learn" in str(info.value)


def test_a_csv_file_named_like_a_bundled_dataset_is_read_as_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pd.DataFrame({"x": range(40), "y": [0, 1] * 20}).to_csv(tmp_path / "wine", index=False)
    data = load_table("wine", target="y")
    assert data.X.shape == (40, 1) and list(data.X.columns) == ["x"]


@pytest.mark.parametrize(
    "classes, n_sites, fraction",
    [(5, 2, 0.2), (2, 6, 0.65)],  # too few validation rows for a stratified split; none to train
)
def test_a_dataset_too_small_for_validation_rows_is_refused_before_anything_is_written(
    tmp_path, classes, n_sites, fraction
):
    from fedforest.experiments.datasets import check_dataset, rows_per_class

    digits = load_table("digits")
    frame = digits.X.iloc[:, 10:20].assign(y=digits.y)
    need = rows_per_class(n_sites)  # the fewest rows of every class check_dataset accepts
    small = pd.concat([frame[frame.y == c].head(need) for c in range(classes)])
    path = tmp_path / "small.csv"
    small.to_csv(path, index=False)
    plan = ExperimentPlan(
        datasets=[str(path)],
        target="y",
        n_sites=[n_sites],
        jaccards=[0.5],
        reps=1,
        methods=["mp", "wmp"],
        metrics=["auc"],
        n_estimators=3,
        validation_fraction=fraction,
    )
    check_dataset(load_table(str(path), target="y"), [n_sites])  # accepted
    run_experiment(ExperimentPlan(**{**vars(plan), "methods": ["mp"]}))  # runs without wmp
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="dataset small: "):
        run_experiment(plan, out)
    assert not out.exists()
