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
    prepare_repetition,
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
        X_te = args[1]  # after the model
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


def test_the_paper_protocol_applies_no_privacy_policy(wine):
    """A job's site sends no node under 5 rows by default; the paper's protocol keeps the
    trees as scikit-learn grew them, one-row leaves included."""
    forest = prepare_repetition(wine, 3, 0.7, 0, n_estimators=5).pooled.forest
    leaves = forest.children_left < 0
    assert forest.n_node_samples[leaves].min() == 1


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


# ------------------------------------------------------ non-iid rows and natural sites
@pytest.mark.parametrize("partition", ["dirichlet", "quantity"])
def test_skewed_partitions_name_their_scenarios_and_keep_the_jaccard_columns(
    tmp_path, partition, caplog
):
    import logging

    from fedforest.experiments.datasets import class_floor
    from fedforest.experiments.partition import split_table
    from fedforest.experiments.runner import site_tables

    plan = ExperimentPlan(
        datasets=["breast_cancer"],
        n_sites=[3],
        jaccards=[0.5],
        reps=2,
        methods=["local", "mp", "auto"],
        metrics=["auc"],
        n_estimators=5,
        partition=partition,
        alphas=[0.3, 1],
    )
    with caplog.at_level(logging.INFO, logger="fedforest.experiments.runner"):
        tidy = run_experiment(plan, tmp_path / "out")
    names = {f"breast_cancer@{partition}-0.3", f"breast_cancer@{partition}-1"}
    assert set(tidy["dataset"]) == names
    assert list(tidy.columns) == TIDY_COLUMNS
    assert len(tidy) == 2 * 2 * 3 * 3 and tidy["value"].notna().all()
    assert set(tidy["n_sites"]) == {3} and set(tidy["jaccard"]) == {0.5}
    written = pd.read_csv(tmp_path / "out" / "results.csv")
    assert set(written["dataset"]) == names
    done = [r.message for r in caplog.records if " done: " in r.message]
    assert len(done) == 2 and all(m.split(" N=3 J=0.50")[0] in names for m in done)
    # every site holds the class floor of every class; the columns are the paper's split's
    data = load_table("breast_cancer")
    tables = site_tables(data, 3, 0.5, 1, partition, 0.3, validation_fraction=0.2)
    even = split_table(data.X.assign(__target__=data.y), "__target__", 3, 0.5, random_state=1)
    floor = class_floor(2, validation_fraction=0.2)
    for site, table in tables.items():
        assert list(table.columns) == list(even[site].columns)
        assert table["__target__"].value_counts().min() >= floor


def test_a_dataset_too_small_for_the_skewed_class_floor_is_refused(tmp_path):
    frame = load_table("S-500-Num").X.iloc[:, :3]
    small = frame.head(50).assign(y=[0] * 35 + [1] * 15)
    path = tmp_path / "small.csv"
    small.to_csv(path, index=False)
    plan = ExperimentPlan(
        datasets=[str(path)],
        target="y",
        n_sites=[2, 4],
        jaccards=[0.5],
        reps=1,
        methods=["local"],
        metrics=["auc"],
        partition="dirichlet",
        alphas=[0.5],
    )
    out = tmp_path / "out"
    with pytest.raises(ValueError) as info:
        run_experiment(plan, out)
    message = str(info.value)
    for part in (
        "dataset small: 50 rows, class counts {0: 35, 1: 15}",
        "Dirichlet label skew (alpha 0.5) over 4 sites first gives every site 4 rows",
        "needs 16 rows of every class; too few rows of class 1",
        "Use fewer sites (--sites) or more rows",
    ):
        assert part in message
    assert not out.exists()
    run_experiment(ExperimentPlan(**{**vars(plan), "n_sites": [2], "n_estimators": 3}))


@pytest.fixture
def site_files(tmp_path):
    """Three hospitals from breast_cancer: different sizes, prevalences and columns."""
    data = load_table("breast_cancer")
    frame = data.X.assign(y=data.y)
    paths = []
    for k, (start, stop, cols) in enumerate([(0, 150, 12), (150, 330, 16), (330, 569, 20)]):
        path = tmp_path / f"hosp{k}.csv"
        frame.iloc[start:stop][[f"f{i}" for i in range(k * 4, k * 4 + cols)] + ["y"]].to_csv(
            path, index=False
        )
        paths.append(str(path))
    return paths


def test_natural_sites_are_split_afresh_each_repetition(tmp_path, site_files):
    from fedforest.experiments.partition import pairwise_jaccard

    plan = ExperimentPlan(
        datasets=[],
        site_files=site_files,
        target="y",
        reps=2,
        methods=["local", "intersection", "mp", "auto"],
        metrics=["auc", "mcc"],
        n_estimators=5,
    )
    tidy = run_experiment(plan, tmp_path / "out")
    sets = [[c for c in pd.read_csv(p).columns if c != "y"] for p in site_files]
    assert set(tidy["dataset"]) == {"hosp0+hosp1+hosp2"}
    assert set(tidy["n_sites"]) == {3}
    assert set(tidy["jaccard"]) == {round(pairwise_jaccard(sets), 3)}
    assert set(tidy["site"]) == {"hosp0", "hosp1", "hosp2"}
    assert len(tidy) == 2 * 3 * 4 * 2 and tidy["value"].notna().all()
    by_rep = tidy.pivot_table(index=["site", "method", "metric"], columns="rep", values="value")
    assert not np.allclose(by_rep[0], by_rep[1])  # other splits, other forests
    named = run_experiment(
        ExperimentPlan(**{**vars(plan), "name": "cohort", "reps": 1, "methods": ["local"]})
    )
    assert set(named["dataset"]) == {"cohort"}


def test_natural_sites_too_small_or_without_a_shared_column_are_refused(tmp_path, site_files):
    base = dict(datasets=[], target="y", reps=1, metrics=["auc"], n_estimators=3)
    tiny = tmp_path / "tiny.csv"
    hosp0 = pd.read_csv(site_files[0])
    pd.concat([hosp0[hosp0.y == 0].head(3), hosp0[hosp0.y == 1].head(37)]).to_csv(tiny, index=False)
    plan = ExperimentPlan(site_files=[site_files[1], str(tiny)], methods=["local"], **base)
    with pytest.raises(ValueError, match=rf"site file {tiny}: class counts \{{0: 3, 1: 37\}}; "):
        run_experiment(plan)
    apart = tmp_path / "apart.csv"
    pd.read_csv(site_files[0])[["f0", "f1", "y"]].to_csv(apart, index=False)
    other = tmp_path / "other.csv"
    pd.read_csv(site_files[2])[["f20", "f21", "y"]].to_csv(other, index=False)
    plan = ExperimentPlan(
        site_files=[str(apart), str(other)], methods=["local", "intersection"], **base
    )
    with pytest.raises(ValueError, match="no column is in every file.*leave intersection out"):
        run_experiment(plan)
    tidy = run_experiment(ExperimentPlan(**{**vars(plan), "methods": ["local", "mp"]}))
    assert tidy["value"].notna().all()


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(partition="label"), "partition='label' must be one of jaccard, dirichlet, quantity"),
        (dict(alphas=[0.5]), r"alphas=\[0.5\] apply to the partitions dirichlet and quantity"),
        (dict(partition="dirichlet"), "partition 'dirichlet' needs its concentrations"),
        (dict(partition="quantity", alphas=[0.0]), "must be finite numbers > 0"),
        (dict(partition="quantity", alphas=[1, 1]), "repeat a value"),
        (dict(name="cohort"), "names site files' data; no site files given"),
        (dict(site_files=["a.csv", "b.csv"]), r"give datasets \(wine\) or site files, not both"),
        (
            dict(datasets=[], site_files=["a.csv", "b.csv"], partition="dirichlet", alphas=[1]),
            "site files keep their own rows",
        ),
        (dict(datasets=[], site_files=["a.csv", "b.csv"]), r"give the target column \(--target\)"),
    ],
)
def test_bad_partitions_and_site_file_plans(change, message):
    plan = ExperimentPlan(datasets=["wine"], reps=1)
    for key, value in change.items():
        setattr(plan, key, value)
    with pytest.raises(ValueError, match=message):
        plan.validate()


# ------------------------------------------------------ calibration and pooling weights
def test_calibration_bins_are_written_beside_the_results_when_asked(tmp_path):
    from fedforest.experiments.calibration_figures import CALIBRATION_COLUMNS, read_calibration

    base = dict(
        datasets=["breast_cancer"],
        n_sites=[3],
        jaccards=[0.5],
        reps=2,
        methods=["local", "mp", "auto"],
        n_estimators=5,
    )
    # the paper's metrics and no calibration: no calibration.csv
    run_experiment(ExperimentPlan(**base, metrics=["auc"]), tmp_path / "plain")
    assert not (tmp_path / "plain" / "calibration.csv").exists()
    for name, extra in (
        ("metric", dict(metrics=["auc", "brier"])),
        ("calibrated", dict(metrics=["auc"], calibration="sigmoid")),
    ):
        out = tmp_path / name
        tidy = run_experiment(ExperimentPlan(**base, **extra), out)
        bins = read_calibration(out / "calibration.csv")
        assert list(bins.columns) == list(CALIBRATION_COLUMNS)
        assert set(bins["method"]) == {"local", "mp", "auto"}
        assert set(bins["site"]) == {"site-1", "site-2", "site-3"}
        assert (bins["count"] > 0).all() and bins["bin"].between(0, 9).all()
        assert bins["predicted"].between(0, 1).all() and bins["observed"].between(0, 1).all()
        # every method's bins at a site hold that site's test rows
        counts = bins.groupby(["rep", "site", "method"])["count"].sum()
        assert len(counts) == 2 * 3 * 3
        assert (counts.groupby(["rep", "site"]).nunique() == 1).all()
        assert set(tidy["metric"]) == set(extra["metrics"])
        header = (out / "calibration.csv").read_text().splitlines()[0]
        assert header == ",".join(CALIBRATION_COLUMNS)


def test_calibration_and_pooling_weights_reach_the_evaluation(wine, monkeypatch):
    from fedforest.experiments import runner

    seen = []
    real_eval = runner.evaluate_strategies

    def evaluate(*args, **kw):
        # the pooling weights come with the model (its first argument)
        seen.append({**kw, "owner_weights": args[0].settings.owner_weights})
        return real_eval(*args, **kw)

    monkeypatch.setattr(runner, "evaluate_strategies", evaluate)
    trained = {}
    real_fit = runner.fit_site_models

    def fit(site, X_tr, y_tr, *args, **kw):
        trained[site] = len(X_tr)
        return real_fit(site, X_tr, y_tr, *args, **kw)

    monkeypatch.setattr(runner, "fit_site_models", fit)
    run_repetition(wine, 3, 0.7, 0, ["mp"], ["auc"], n_estimators=3)
    assert seen[-1]["calibration"] == "none" and seen[-1]["owner_weights"] is None
    assert "auto_metric" not in seen[-1] and seen[-1]["X_val"] is None
    seen.clear()
    rows = run_repetition(
        wine,
        3,
        0.7,
        0,
        ["mp", "auto"],
        ["auc", "log_loss"],
        n_estimators=3,
        calibration="isotonic",
        pooling_weights="rows",
        auto_metric="brier",
    )
    assert len(seen) == 3
    for kw in seen:
        assert kw["calibration"] == "isotonic" and kw["auto_metric"] == "brier"
        assert kw["owner_weights"] == {site: float(n) for site, n in trained.items()}
        assert kw["X_val"] is not None  # calibration is fitted on validation rows
    assert np.isfinite([r["value"] for r in rows]).all()
    # calibration alone holds validation rows out, as a validation method does
    seen.clear()
    run_repetition(wine, 3, 0.7, 0, ["mp"], ["auc"], n_estimators=3, calibration="prior")
    assert all(kw["X_val"] is not None for kw in seen)


#: wine, 3 sites, J 0.5, rep 1, 6 trees, calibration sigmoid, pooled data: the rows of
#: the runner before out-of-bag validation (holdout, the paper's protocol), to the last bit
#: on the machine that wrote them (see :data:`ULPS` for another processor).
HOLDOUT_ROWS = {
    ("site-1", "local", "auc"): 0.9587542087542088,
    ("site-1", "local", "brier"): 0.24742889664504872,
    ("site-1", "mp", "auc"): 0.9848484848484849,
    ("site-1", "mp", "brier"): 0.17133014473185895,
    ("site-1", "wmp", "auc"): 0.978675645342312,
    ("site-1", "wmp", "brier"): 0.20247694858375626,
    ("site-1", "auto", "auc"): 0.9862514029180695,
    ("site-1", "auto", "brier"): 0.1913100647528559,
    ("site-2", "local", "auc"): 0.876324354657688,
    ("site-2", "local", "brier"): 0.3811260252905085,
    ("site-2", "mp", "auc"): 0.9753086419753086,
    ("site-2", "mp", "brier"): 0.24787120793185266,
    ("site-2", "wmp", "auc"): 0.9492143658810326,
    ("site-2", "wmp", "brier"): 0.30330412294032905,
    ("site-2", "auto", "auc"): 0.9231200897867565,
    ("site-2", "auto", "brier"): 0.26623329805417156,
    ("site-3", "local", "auc"): 1.0,
    ("site-3", "local", "brier"): 0.1414004581126316,
    ("site-3", "mp", "auc"): 0.9862514029180695,
    ("site-3", "mp", "brier"): 0.18816152399462505,
    ("site-3", "wmp", "auc"): 0.9725028058361391,
    ("site-3", "wmp", "brier"): 0.19943209877667614,
    ("site-3", "auto", "auc"): 0.9793771043771043,
    ("site-3", "auto", "brier"): 0.19969175649678458,
    ("site-1", "pooled_data", "auc"): 0.9862514029180695,
    ("site-1", "pooled_data", "brier"): 0.12222222222222223,
    ("site-2", "pooled_data", "auc"): 0.9966666666666667,
    ("site-2", "pooled_data", "brier"): 0.08888888888888889,
    ("site-3", "pooled_data", "auc"): 0.9755892255892257,
    ("site-3", "pooled_data", "brier"): 0.18518518518518517,
}


#: How many units in the last place a pinned value may move on another processor: none for
#: AUC (a count of ranks); a few for the Brier score, a mean whose last bits depend on the
#: width of the vector instructions numpy sums with (a processor with AVX-512 adds in
#: another order than one with AVX2), far below any change of a prediction.
ULPS = {"auc": 0, "brier": 4}


def test_holdout_rows_stay_what_they_were_bit_for_bit(wine):
    rows = run_repetition(
        wine,
        3,
        0.5,
        1,
        ["local", "mp", "wmp", "auto"],
        ["auc", "brier"],
        n_estimators=6,
        calibration="sigmoid",
        pooled_reference=True,
        validation="holdout",
    )
    got = {(r["site"], r["method"], r["metric"]): r["value"] for r in rows}
    assert got.keys() == HOLDOUT_ROWS.keys()
    # AUC counts ranks: the same to the last bit; a mean may differ in its last bits
    far = {
        key: (value, HOLDOUT_ROWS[key])
        for key, value in got.items()
        if abs(value - HOLDOUT_ROWS[key]) > ULPS[key[2]] * np.spacing(HOLDOUT_ROWS[key])
    }
    assert not far, far
    assert {r["test_rows"] for r in rows} == {15}


def test_out_of_bag_validation_fits_on_every_training_row_out_of_bag(wine, monkeypatch):
    from fedforest.experiments import runner

    trained, models, seen, pooled_sites = {}, {}, {}, {}
    real_fit, real_eval, real_ref = (
        runner.fit_site_models,
        runner.evaluate_strategies,
        runner.pooled_data_reference,
    )

    def fit(site, X_tr, y_tr, *args, **kw):
        trained[site] = X_tr.index.copy()
        models[site] = real_fit(site, X_tr, y_tr, *args, **kw)
        return models[site]

    def evaluate(*args, site=None, **kw):
        seen[site] = {**kw, "model": args[0], "X_test": args[1]}
        return real_eval(*args, site=site, **kw)

    def reference(sites, *args, **kw):
        pooled_sites.update(sites)
        return real_ref(sites, *args, **kw)

    monkeypatch.setattr(runner, "fit_site_models", fit)
    monkeypatch.setattr(runner, "evaluate_strategies", evaluate)
    monkeypatch.setattr(runner, "pooled_data_reference", reference)
    methods = ["local", "intersection", "mp", "wmp", "auto"]
    options = dict(calibration="sigmoid", auto_metric="brier", pooled_reference=True)
    rows = run_repetition(
        wine, 3, 0.5, 1, methods, ["auc", "brier"], n_estimators=6,
        validation="oob", **options,
    )  # fmt: skip
    assert np.isfinite([r["value"] for r in rows]).all()
    assert {r["method"] for r in rows} == {*methods, "pooled_data"}
    oob = {site: (trained[site], seen[site], models[site]) for site in trained}
    pooled_sites_oob = dict(pooled_sites)
    trained.clear()
    seen.clear()
    run_repetition(
        wine, 3, 0.5, 1, methods, ["auc", "brier"], n_estimators=6,
        validation="holdout", **options,
    )  # fmt: skip
    for site, (rows_oob, kw, fitted) in oob.items():
        held = seen[site]
        # the same test rows; oob trains on the holdout's training and validation rows
        assert list(kw["X_test"].index) == list(held["X_test"].index)
        assert set(rows_oob) == set(trained[site]) | set(held["X_val"].index)
        assert held["in_bag"] is None
        # fitted on the training rows, out of bag, with the calibration and auto_metric
        assert list(kw["X_val"].index) == list(rows_oob)
        assert kw["calibration"] == "sigmoid" and kw["auto_metric"] == "brier"
        forest, bag = kw["model"].forest, kw["in_bag"]
        assert bag.forest.shape == (forest.n_trees, len(rows_oob))
        own = forest.owner_mask(site)
        assert not bag.forest[~own].any()  # the other sites' trees never saw the rows
        # the site's own trees: their bootstrap samples, as its training recorded them
        assert np.array_equal(bag.forest[own], fitted.in_bag.in_bag)
        assert 0.5 < bag.forest[own].mean() < 0.75  # about 1 - 1/e of the rows per tree
        inter = kw["model"].intersection
        assert bag.intersection.shape == (inter.n_trees, len(rows_oob))
        assert np.array_equal(
            bag.intersection[inter.owner_mask(site)], fitted.intersection_in_bag.in_bag
        )
        # pooled data trains on the same rows as the sites' forests: every non-test row
        assert pooled_sites_oob[site].X_val is None
        assert list(pooled_sites_oob[site].X_train.index) == list(rows_oob)


def test_out_of_bag_validation_of_a_regression_target(diabetes):
    rows = pd.DataFrame(
        run_repetition(
            diabetes, 3, 0.5, 0, ["mp", "wmp", "auto"], n_estimators=5, validation="oob"
        )  # fmt: skip
    )
    assert set(rows["method"]) == {"mp", "wmp", "auto"} and set(rows["metric"]) == {"rmse"}
    assert np.isfinite(rows["value"]).all()
    held = pd.DataFrame(run_repetition(diabetes, 3, 0.5, 0, ["mp", "wmp", "auto"],
                                       n_estimators=5))  # fmt: skip
    assert list(held["test_rows"]) == list(rows["test_rows"])
    assert not np.array_equal(held["value"], rows["value"])


def test_rows_pooling_weights_change_the_pooled_vote_only_when_sites_differ_in_size():
    cancer = load_table("breast_cancer")

    def mp(weights, partition="quantity", alpha=0.3):
        rows = run_repetition(
            cancer, 3, 0.5, 1, ["mp"], ["auc", "brier"], n_estimators=5,
            partition=partition, alpha=alpha, pooling_weights=weights,
        )  # fmt: skip
        return [r["value"] for r in rows]

    assert mp("equal") != mp("rows")


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(calibration="platt"), "calibration='platt' must be one of none, prior"),
        (dict(pooling_weights="size"), "pooling_weights='size' must be one of equal, rows"),
        (dict(auto_metric="f1"), "auto_metric='f1' must be one of"),
    ],
)
def test_bad_calibration_plans(change, message):
    plan = ExperimentPlan(datasets=["wine"], reps=1, **change)
    with pytest.raises(ValueError, match=message):
        plan.validate()


# ------------------------------------------------------ regression targets
@pytest.fixture(scope="module")
def diabetes():
    return load_table("diabetes")


def test_a_regression_repetition_scores_every_method_at_every_site(diabetes):
    from fedforest.experiments.runner import ALL_METHODS

    assert diabetes.task == "regression" and diabetes.X.shape == (442, 10)
    metrics = ["rmse", "mae", "r2"]
    rows = pd.DataFrame(run_repetition(diabetes, 3, 0.5, 0, ALL_METHODS, metrics, n_estimators=5))
    assert list(rows.columns) == TIDY_COLUMNS
    assert len(rows) == 3 * len(ALL_METHODS) * len(metrics)
    for (site, method), group in rows.groupby(["site", "method"]):
        assert sorted(group["metric"]) == sorted(metrics), (site, method)
    assert set(rows["method"]) == set(ALL_METHODS)
    assert set(rows["site"]) == {"site-1", "site-2", "site-3"}
    values = rows.pivot_table(index=["site", "method"], columns="metric", values="value")
    assert np.isfinite(values.to_numpy()).all()
    # errors in the target's units (sd 77): a forest beats predicting the mean, not by far
    assert values["rmse"].between(40, 100).all() and (values["mae"] <= values["rmse"]).all()
    assert (values["r2"] < 0.8).all() and values["r2"].median() > 0
    # the default metric of a regression dataset is RMSE
    default = run_repetition(diabetes, 2, 0.5, 0, ["local"], n_estimators=3)
    assert {r["metric"] for r in default} == {"rmse"}


def test_regression_repetitions_are_reproducible_and_differ_by_seed():
    data = load_table("F-500-Mix")
    assert data.task == "regression" and len(data.categorical) == 8
    a = run_repetition(data, 3, 0.5, 1, ["mp", "wmp"], ["rmse"], n_estimators=5)
    b = run_repetition(data, 3, 0.5, 1, ["mp", "wmp"], ["rmse"], n_estimators=5, task="regression")
    c = run_repetition(data, 3, 0.5, 2, ["mp", "wmp"], ["rmse"], n_estimators=5)
    assert a == b
    assert [r["value"] for r in a] != [r["value"] for r in c]


def test_regression_trains_regressors_on_rows_dealt_and_split_without_stratification(
    diabetes, monkeypatch
):
    from sklearn.model_selection import train_test_split

    from fedforest.experiments import runner
    from fedforest.experiments.partition import split_table

    seen = {"fit": [], "eval": []}
    real_fit, real_eval = runner.fit_site_models, runner.evaluate_strategies

    def fit(site, X_tr, y_tr, *args, **kw):
        seen["fit"].append((site, kw["task"], X_tr.index.copy()))
        return real_fit(site, X_tr, y_tr, *args, **kw)

    def evaluate(*args, site=None, X_val=None, y_val=None, **kw):
        # the model, the test rows, their targets, the classes
        seen["eval"].append((site, args[3], kw["calibration"], args[1].index.copy(), X_val.index))
        assert args[0].forest.is_regression
        return real_eval(*args, site=site, X_val=X_val, y_val=y_val, **kw)

    monkeypatch.setattr(runner, "fit_site_models", fit)
    monkeypatch.setattr(runner, "evaluate_strategies", evaluate)
    run_repetition(diabetes, 3, 0.7, 4, ["mp", "wmp"], ["rmse"], n_estimators=3)
    frame = diabetes.X.assign(__target__=diabetes.y)
    tables = split_table(frame, "__target__", 3, 0.7, random_state=4, stratify=False)
    for (site, task, trained), (site2, classes, calibration, tested, validated) in zip(
        seen["fit"], seen["eval"], strict=True
    ):
        assert site == site2 and task == "regression" and classes is None
        assert calibration == "none"
        table = tables[site]
        X = table.drop(columns="__target__")
        rest, test = train_test_split(X, test_size=0.25, random_state=4)
        train, val = train_test_split(rest, test_size=0.2 / 0.75, random_state=4)
        assert list(tested) == list(test.index)
        assert list(validated) == list(val.index) and list(trained) == list(train.index)


def test_a_regression_experiment_ranks_by_rmse_and_writes_the_tidy_table(tmp_path):
    from fedforest.experiments.statistics import average_ranks

    plan = ExperimentPlan(
        datasets=["F-500-Num", "diabetes"],
        task="regression",
        n_sites=[3],
        jaccards=[0.5],
        reps=2,
        methods=["local", "mp", "intersection"],
        n_estimators=5,
        n_jobs=2,
    )
    assert plan.metrics == ["rmse"]
    tidy = run_experiment(plan, tmp_path)
    written = pd.read_csv(tmp_path / "results.csv")
    assert list(written.columns) == TIDY_COLUMNS and len(written) == len(tidy)
    assert len(tidy) == 2 * 2 * 3 * 3 and set(tidy["metric"]) == {"rmse"}
    assert set(tidy["dataset"]) == {"F-500-Num", "diabetes"}
    pd.testing.assert_frame_equal(written, tidy, check_dtype=False)
    ranks = average_ranks(tidy, "rmse").ranks
    # rank 1 is the lowest RMSE of a block (dataset, sites, overlap, repetition)
    means = tidy.groupby(["dataset", "rep", "method"])["value"].mean().unstack()
    by_hand = means.rank(axis=1, ascending=True).mean().sort_values(kind="stable")
    pd.testing.assert_series_equal(ranks, by_hand, check_names=False)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(task="ranking"), "task='ranking' must be one of classification, regression"),
        (
            dict(metrics=["rmse", "auc"]),
            r"metrics \['auc'\] \(--metrics\) are classification metrics; --task regression "
            "scores rmse, mae, r2",
        ),
        (dict(metrics=["f1"]), r"metrics \['f1'\] are not among \['rmse', 'mae', 'r2'\]"),
        (dict(metrics=[]), "metrics is empty"),
        (
            dict(partition="dirichlet", alphas=[0.5]),
            "a regression target has no classes: under --task regression use partition jaccard",
        ),
        (dict(calibration="sigmoid"), "calibration='sigmoid' \\(--calibration\\) calibrates"),
        (dict(auto_metric="auc"), "auto and wmp choose by validation RMSE"),
        (dict(voting="hard"), "the trees' predictions are averaged"),
    ],
)
def test_bad_regression_plans(change, message):
    plan = ExperimentPlan(datasets=["diabetes"], reps=1, task="regression")
    plan.validate()
    plan.partition, plan.alphas = "quantity", [1.0]
    plan.validate()  # the quantity skew has no classes to stratify
    plan.partition, plan.alphas = "jaccard", []
    for key, value in change.items():
        setattr(plan, key, value)
    with pytest.raises(ValueError, match=message):
        plan.validate()


def test_a_classification_plan_refuses_regression_metrics_naming_the_task():
    plan = ExperimentPlan(datasets=["wine"], reps=1, metrics=["auc", "rmse"])
    with pytest.raises(ValueError) as info:
        plan.validate()
    assert str(info.value).startswith(
        "metrics ['rmse'] (--metrics) are regression metrics; --task classification scores "
        "auprc, auc, mcc, accuracy, brier, log_loss, ece; for a numeric target use --task "
        "regression"
    )


def test_a_dataset_of_the_other_task_is_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "out"
    plan = ExperimentPlan(datasets=["diabetes"], reps=1, n_sites=[2])
    with pytest.raises(ValueError) as info:
        run_experiment(plan, out)
    assert str(info.value).startswith("dataset diabetes: a regression dataset (its target is a")
    assert "run it with --task regression (metrics rmse, mae, r2)" in str(info.value)
    plan = ExperimentPlan(datasets=["F-500-Num", "wine"], reps=1, n_sites=[2], task="regression")
    with pytest.raises(ValueError) as info:
        run_experiment(plan, out)
    assert str(info.value).startswith("dataset wine: a classification dataset (3 classes)")
    assert (
        "--task regression needs a numeric target: F-500-Num, F-500-Mix, diabetes or a CSV file "
        "with a numeric --target" in str(info.value)
    )
    assert not out.exists()
    with pytest.raises(ValueError, match="dataset diabetes: a regression dataset"):
        run_repetition(load_table("diabetes"), 2, 0.5, 0, ["mp"], ["auc"], task="classification")


def test_a_csv_measurement_runs_under_regression_and_names_it_under_classification(tmp_path):
    data = load_table("F-500-Num")
    path = tmp_path / "cohort.csv"
    data.X.iloc[:, :8].assign(los=np.round(data.y, 2), ward=["a", "b"] * 250).to_csv(
        path, index=False
    )
    plan = ExperimentPlan(
        datasets=[str(path)],
        target="los",
        n_sites=[2],
        jaccards=[0.5],
        reps=1,
        methods=["local", "mp"],
        n_estimators=3,
    )
    with pytest.raises(ValueError) as info:
        run_experiment(plan)
    text = str(info.value)
    assert text.startswith("dataset cohort: the target holds non-integer numbers such as")
    assert "For a measurement use --task regression (metrics rmse, mae, r2)" in text
    assert "fewer sites" not in text
    tidy = run_experiment(ExperimentPlan(**{**vars(plan), "task": "regression", "metrics": None}))
    assert set(tidy["metric"]) == {"rmse"} and tidy["value"].notna().all()
    assert len(tidy) == 2 * 2


def test_regression_datasets_too_small_or_not_numbers_are_refused(tmp_path):
    from fedforest.experiments.datasets import regression_floor

    assert regression_floor() == 5 and regression_floor(validation_fraction=0.2) == 6
    base = dict(target="y", jaccards=[0.5], reps=1, task="regression", n_estimators=3)
    small = tmp_path / "small.csv"
    pd.DataFrame({"x": range(16), "z": range(16), "y": np.linspace(0, 1, 16)}).to_csv(
        small, index=False
    )
    plan = ExperimentPlan(datasets=[str(small)], n_sites=[2, 4], methods=["mp"], **base)
    with pytest.raises(ValueError) as info:
        run_experiment(plan)
    assert str(info.value) == (
        "dataset small: 16 rows; the even deal over 4 sites gives the smallest 4 rows, but a "
        "site needs at least 5 (so that its training and test rows hold 2 rows each): 20 rows "
        "in all. Use fewer sites (--sites) or more rows"
    )
    with pytest.raises(ValueError) as info:  # validation rows: one more row per site
        run_experiment(ExperimentPlan(**{**vars(plan), "n_sites": [3], "methods": ["wmp"]}))
    assert (
        "gives the smallest 5 rows, but a site needs at least 6 (so that its training, test "
        "and validation rows hold 2 rows each): 18 rows in all. Use fewer sites (--sites), a "
        "smaller --validation-fraction or more rows"
    ) in str(info.value)
    skewed = {"methods": ["wmp"], "partition": "quantity", "alphas": [1.0], "n_sites": [3]}
    with pytest.raises(ValueError) as info:
        run_experiment(ExperimentPlan(**{**vars(plan), **skewed}))
    assert "Dirichlet quantity skew over 3 sites first gives every site 6 rows" in str(info.value)
    assert "which needs 18 rows in all. Use fewer sites (--sites), a smaller" in str(info.value)
    tidy = run_experiment(ExperimentPlan(**{**vars(plan), "n_sites": [2, 3]}))
    assert tidy["value"].notna().all()
    text = tmp_path / "text.csv"
    pd.DataFrame({"x": range(40), "y": ["low", "high"] * 20}).to_csv(text, index=False)
    with pytest.raises(ValueError, match="the target holds text such as 'low': class labels"):
        run_experiment(ExperimentPlan(datasets=[str(text)], n_sites=[2], methods=["mp"], **base))
    flat = tmp_path / "flat.csv"
    pd.DataFrame({"x": range(40), "y": [3.5] * 40}).to_csv(flat, index=False)
    with pytest.raises(ValueError, match="the target is 3.5 in every row"):
        run_experiment(ExperimentPlan(datasets=[str(flat)], n_sites=[2], methods=["mp"], **base))


def test_regression_quantity_skew_and_natural_sites(tmp_path):
    plan = ExperimentPlan(
        datasets=["diabetes"],
        task="regression",
        n_sites=[3],
        jaccards=[0.5],
        reps=1,
        methods=["local", "mp", "wmp"],
        metrics=["rmse", "r2"],
        n_estimators=3,
        partition="quantity",
        alphas=[0.5],
    )
    tidy = run_experiment(plan)
    assert set(tidy["dataset"]) == {"diabetes@quantity-0.5"} and len(tidy) == 3 * 3 * 2
    rmse = tidy[tidy["metric"] == "rmse"]["value"]
    assert np.isfinite(rmse).all()
    data = load_table("diabetes")
    frame = data.X.assign(y=data.y)
    files = []
    for k, (start, stop, cols) in enumerate(
        [(0, 150, ["f0", "f2", "f3"]), (150, 442, ["f2", "f8"])]
    ):
        path = tmp_path / f"clinic{k}.csv"
        frame.iloc[start:stop][[*cols, "y"]].to_csv(path, index=False)
        files.append(str(path))
    natural = ExperimentPlan(
        datasets=[], site_files=files, target="y", task="regression", reps=2,
        methods=["local", "mp", "intersection"], n_estimators=3,
    )  # fmt: skip
    tidy = run_experiment(natural)
    assert set(tidy["site"]) == {"clinic0", "clinic1"} and set(tidy["metric"]) == {"rmse"}
    assert len(tidy) == 2 * 2 * 3 and tidy["value"].notna().all()
    tiny = tmp_path / "tiny.csv"
    frame.head(4)[["f2", "y"]].to_csv(tiny, index=False)
    with pytest.raises(ValueError, match=rf"site file {tiny}: 4 rows; every site needs at least 5"):
        run_experiment(ExperimentPlan(**{**vars(natural), "site_files": [files[0], str(tiny)]}))


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_forests_are_trained_once_per_site_and_repetition_for_every_method(
    task, mix, diabetes, monkeypatch
):
    """Every method scores the same pooled forests: nothing is trained after the pooling."""
    from sklearn.ensemble._forest import BaseForest

    from fedforest.experiments import runner
    from fedforest.vocabulary import EXPERIMENT_METHODS

    data = diabetes if task == "regression" else mix
    fits: list[tuple[str, bool]] = []
    pooled = []
    original_fit = BaseForest.fit

    def counting_fit(self, *args, **kwargs):
        fits.append((type(self).__name__, bool(pooled)))
        return original_fit(self, *args, **kwargs)

    original_prepare = runner.prepare_repetition

    def prepare(*args, **kwargs):
        result = original_prepare(*args, **kwargs)
        pooled.append(result)
        return result

    monkeypatch.setattr(BaseForest, "fit", counting_fit)
    monkeypatch.setattr(runner, "prepare_repetition", prepare)
    rows = run_repetition(data, 3, 0.5, 0, list(EXPERIMENT_METHODS), n_estimators=10, task=task)
    assert {r["method"] for r in rows} == set(EXPERIMENT_METHODS)
    assert len(pooled) == 1
    # per site: its forest and its intersection forest, before the pooling; nothing after
    assert [after for _, after in fits] == [False] * 6
    forest = pooled[0].pooled.forest
    assert forest.n_trees == 3 * 10 and len(set(forest.owners)) == 3


def test_a_process_pool_gives_the_table_one_worker_gives(tmp_path):
    plan = dict(
        datasets=["S-500-Mix"],
        n_sites=[2, 3],
        jaccards=[0.5],
        reps=2,
        methods=["local", "fpv", "mp", "wmp"],
        metrics=["auc", "brier"],
        n_estimators=10,
    )
    one = run_experiment(ExperimentPlan(**plan, n_jobs=1))
    two = run_experiment(ExperimentPlan(**plan, n_jobs=2))
    pd.testing.assert_frame_equal(one, two)


def test_pooled_data_adds_rows_and_changes_none(mix):
    from fedforest.experiments.reference import REFERENCE, pooled_data_reference

    metrics = ["auc", "brier", "log_loss"]
    args = (mix, 3, 0.5, 2, ["local", "mp", "auto"], metrics)
    plain = run_repetition(*args, n_estimators=8)
    rows = run_repetition(*args, n_estimators=8, pooled_reference=True)
    assert [r for r in rows if r["method"] != REFERENCE] == plain
    pooled = pd.DataFrame([r for r in rows if r["method"] == REFERENCE])
    assert len(pooled) == 3 * len(metrics)
    # one forest of 8 trees, seeded by the repetition, on every site's training and validation
    # rows of this repetition (the dataset's column order), scored on the sites' test rows
    prepared = prepare_repetition(mix, 3, 0.5, 2, n_estimators=8, validation_fraction=0.2)
    assert all(r.X_val is not None for r in prepared.rows.values())
    expected = pooled_data_reference(
        prepared.rows,
        metrics,
        {"n_estimators": 8},
        random_state=2,
        classes=np.unique(mix.y),
        columns=list(mix.X.columns),
    )
    for row in pooled.itertuples():
        assert row.value == expected[row.site][row.metric]
        assert row.test_rows == expected[row.site]["rows"]
    local = [r for r in rows if r["method"] == "local"]
    assert {(r["site"], r["test_rows"]) for r in local} == set(
        zip(pooled.site, pooled.test_rows, strict=True)
    )


def test_a_plan_with_pooled_data_scores_it_in_every_repetition():
    plan = ExperimentPlan(
        datasets=["S-500-Num"],
        n_sites=[2],
        jaccards=[0.5],
        reps=2,
        methods=["local"],
        metrics=["auc"],
        n_estimators=4,
        pooled_reference=True,
    )
    tidy = run_experiment(plan)
    pooled = tidy[tidy["method"] == "pooled_data"]
    assert sorted(set(zip(pooled.rep, pooled.site, strict=True))) == [
        (r, s) for r in (0, 1) for s in ("site-1", "site-2")
    ]
    assert pooled["value"].between(0, 1).all()
