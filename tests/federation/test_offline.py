"""A whole election on local tables: selectors, ballot and tuning together."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedforest.federation.offline import run_election

SIGNAL = [f"s{i}" for i in range(6)]
NOISE = [f"n{i:02d}" for i in range(12)]
COLUMNS = {
    "a": ["s0", "s1", "n00", "n01", "n02", "n03", "s2", "s3", "n04", "n05", "n06"],
    "b": ["s0", "s1", "n00", "n01", "n02", "n03", "s4", "n07", "n08", "n09"],
    "c": ["s0", "s1", "n00", "n01", "n02", "n03", "s5", "n10", "n11"],
}


def site_tables(seed=0, rows=500):
    rng = np.random.default_rng(seed)
    tables = {}
    for site, cols in COLUMNS.items():
        X = pd.DataFrame(rng.normal(size=(rows, len(SIGNAL) + len(NOISE))), columns=SIGNAL + NOISE)
        logit = X[SIGNAL].sum(axis=1) * 1.2
        y = (rng.random(rows) < 1 / (1 + np.exp(-logit))).astype(int)
        tables[site] = X[cols].assign(y=y)
    return tables


def test_tuned_election_keeps_signal_and_drops_most_noise():
    out = run_election(
        site_tables(),
        "y",
        {"a": "lasso", "b": "random_forest", "c": "mutual_info"},
        auto_tune=True,
        tuning_rounds=5,
        tolerance=0.005,
        freedom_degree=0.5,
        random_state=0,
    )
    chosen = set(out.election.selected)
    assert set(SIGNAL) <= chosen
    assert len(chosen & set(NOISE)) <= 4
    assert out.tuning is not None and 1 <= len(out.tuning.history) <= 12
    assert out.schema.shared == ["n00", "n01", "n02", "n03", "s0", "s1"]
    # a private signal column is judged by its own site alone
    assert out.election.sites_with["s2"] == ["a"]


def test_fixed_freedom_degree_without_tuning_and_reproducibility():
    tables = site_tables(1)
    one = run_election(tables, "y", "f_classif", freedom_degree=0.0, random_state=3)
    two = run_election(tables, "y", "f_classif", freedom_degree=0.0, random_state=3)
    assert one.election.selected == two.election.selected
    assert one.tuning is None
    union = run_election(tables, "y", "f_classif", freedom_degree=1.0, random_state=3)
    assert set(one.election.selected) <= set(union.election.selected)


def test_normalization_reaches_the_ballot():
    from fedforest.election.ballot import Ballot

    tables = site_tables(3, rows=200)
    runs = {
        n: run_election(tables, "y", "f_classif", freedom_degree=0.5, normalization=n)
        for n in ("all", "selected")
    }
    for normalization, out in runs.items():
        assert out.election.normalization == normalization
        assert out.election.to_dict()["normalization"] == normalization
        # the server counted the sites' votes with that rule
        again = Ballot(out.votes, "weighted", normalization=normalization).count(0.5)
        assert again.selected == out.election.selected and again.votes == out.election.votes
    assert run_election(tables, "y", "f_classif").election.normalization == "all"
    with pytest.raises(ValueError, match="'election.normalization' is 'flare'"):
        run_election(tables, "y", "f_classif", normalization="flare")


def test_elect_command_takes_normalization(tmp_path, capsys):
    import json

    from fedforest.cli import main

    paths = []
    for site, frame in site_tables(4, rows=120).items():
        paths.append(str(tmp_path / f"{site}.csv"))
        frame.to_csv(paths[-1], index=False)
    out_json = tmp_path / "election.json"
    args = ["elect", *paths, "--target", "y", "--selector", "f_classif"]
    assert main([*args, "--normalization", "selected", "--json", str(out_json)]) == 0
    assert json.loads(out_json.read_text())["election"]["normalization"] == "selected"
    assert main([*args, "--json", str(out_json), "--overwrite"]) == 0
    assert json.loads(out_json.read_text())["election"]["normalization"] == "all"
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main([*args, "--normalization", "minmax"])
    assert "invalid choice: 'minmax'" in capsys.readouterr().err


def test_errors_name_the_field():
    tables = site_tables(2, rows=120)
    with pytest.raises(ValueError, match="'selector' is 'magic'"):
        run_election(tables, "y", "magic")
    with pytest.raises(ValueError, match="freedom_degree"):
        run_election(tables, "y", "none", freedom_degree=2)
    single = dict(tables, c=tables["c"].assign(y=0))
    with pytest.raises(ValueError, match="site 'c' has a single class"):
        run_election(single, "y", "none")
    disjoint = {
        "a": pd.DataFrame({"p": np.arange(20.0), "y": [0, 1] * 10}),
        "b": pd.DataFrame({"q": np.arange(20.0), "y": [0, 1] * 10}),
    }
    with pytest.raises(ValueError, match="share no column"):
        run_election(disjoint, "y", "none")


def test_the_offline_election_equals_the_jobs_election(tmp_path):
    import yaml

    from .test_site import make_job, run_job

    config, runners = make_job(tmp_path, rows=200, n_estimators=5)
    job = run_job(config, runners, tmp_path / "run")
    tables, selectors = {}, {}
    for site, runner in runners.items():
        site_cfg = runner.config
        tables[site] = pd.read_csv(site_cfg.data_path).rename(columns=site_cfg.renames)
        selectors[site] = site_cfg.selector
    el = config.election
    offline = run_election(
        tables,
        "outcome",
        selectors,
        freedom_degree=el.freedom_degree,
        aggregation=el.aggregation,
        auto_tune=el.auto_tune,
        tuning_rounds=el.tuning_rounds,
        tune_every_feature=el.tune_every_feature,
        tolerance=el.tolerance,
        metric=el.metric,
        random_state=config.seed,
        validation=config.validation,
    )
    assert offline.election.selected == job.elected
    assert offline.tuning.to_dict() == job.server.tuning.to_dict()
    assert yaml.safe_dump(offline.schema.to_payload()) == yaml.safe_dump(job.schema)


def test_the_election_table_keeps_long_site_names_whole():
    from fedforest.cli.elect import format_election

    names = {"a": "hungarian", "b": "switzerland", "c": "university-hospital-zurich"}
    tables = {names[s]: frame for s, frame in site_tables(5, rows=120).items()}
    out = run_election(tables, "y", "f_classif", freedom_degree=0.5)
    lines = format_election(out).splitlines()
    header = lines[0]
    assert header.split()[1:4] == list(names.values())
    assert "hungarianswitzerland" not in header and "switzerla " not in header
    for line in lines[2 : 2 + len(out.election.features)]:
        marks = line.split()[1:4]
        assert all(m in ("selected", "no", "-") for m in marks), line
        for name, mark in zip(names.values(), marks, strict=True):
            end = header.index(name) + len(name)  # each mark ends under its site's name
            assert line[:end].endswith(mark), (name, line)


def test_the_job_of_a_config_folder_runs_in_process(tmp_path):
    from fedforest import protocol
    from fedforest.federation.driver import InProcessExchange
    from fedforest.federation.offline import in_process_job, run_job

    from .test_site import make_job

    config, _ = make_job(
        tmp_path, rows=120, n_estimators=4, election={"auto_tune": False}, evaluation={}
    )
    configs = tmp_path / "site_configs"
    asked = []

    class Counting(InProcessExchange):
        def ask(self, request):
            asked.append(request.task)
            return super().ask(request)

    ticks = iter(range(10_000))
    job = in_process_job(configs, exchange=Counting, clock=lambda: float(next(ticks)))
    assert job.results is None and sorted(job.runners) == config.sites
    assert all(r.frame is not None for r in job.runners.values())  # loaded, as an executor does
    results = job.run()
    assert results.finished and job.results is results
    assert asked[0] == protocol.SCHEMA and asked[-1] == protocol.EVALUATE
    # one clock for the driver's phases and the exchange's per-site seconds
    assert all(v == int(v) for per in job.exchange.seconds.values() for v in per.values())
    again = run_job(configs, run_dir=tmp_path / "run")
    assert (tmp_path / "run" / "results.json").is_file()
    assert again.results.metrics == results.metrics  # the same configs and seed


def test_a_survival_job_runs_in_process_on_one_agreed_time_grid(survival_job):
    from fedforest.federation.job_results import JobResults
    from fedforest.federation.results import results_table
    from fedforest.model.pooled_model import load_model

    job, folder = survival_job
    results = job.results
    assert results.finished and not results.dropped_sites
    grid = job.server.schema.times
    assert 2 <= len(grid) <= 30 and all(t % 30 == 0 for t in grid)
    # the sites voted with coxnet, cox_univariate and a survival forest's importance, and
    # the freedom degree was tuned on each mask's integrated Brier score (lower is better)
    elected = results.election["selected"]
    assert 0 < len(elected) < len(results.election["votes"])
    assert {s for by in results.election["selected_by"].values() for s in by} == set(
        results.metrics
    )
    history = results.tuning["history"]
    assert len(history) >= 2 and all(0 < step["score"] < 0.25 for step in history)
    assert results.tuning["score"] == min(step["score"] for step in history)
    # every site read its trees on that grid, and local trees beat chance at every site
    for site, per in results.metrics.items():
        assert per["local"]["cindex"] > 0.55 and per["mp"]["ibs"] < 0.25, (site, per["mp"])
        assert per["auto"]["chosen"] in per and per["auto"]["calibration"] == "none"
        model = load_model(folder / "saved" / site / "pooled_model.npz")
        assert model.forest.times.tolist() == grid and model.forest.n_trees == 30
        assert set(model.forest.feature_names) <= set(elected), site
    # results.json reads back with its survival rows
    again = JobResults.from_dict(results.to_dict())
    assert again.metrics == results.metrics
    report = (folder / "run" / "report.md").read_text()
    assert "| strategy | Harrell's C | Uno's C | IBS | trees kept | fallback rows |" in report
    assert "## Survival by risk group and calibration" in report
    assert "- At 365: time-dependent AUC 0." in report and "- At 1095:" in report
    for per in results.metrics.values():
        curves = per["mp"]["survival_curves"]
        assert curves["times"] == grid and len(curves["groups"]) == 3
        assert sum(g["rows"] for g in curves["groups"]) == per["mp"]["rows"]
        # the job's horizons (1, 2 and 3 years): the time-dependent AUC and calibration there
        assert [at["horizon"] for at in curves["horizons"]] == [365.0, 730.0, 1095.0]
        for at in curves["horizons"]:
            assert 0.5 < at["td_auc"] <= 1 and 0 <= at["ici"] <= 1, (at, per["mp"])
    # the console's summary: Harrell's C and the integrated Brier score per site
    console = results_table(results)
    assert "Harrell's C on each site's test rows" in console
    assert "Integrated Brier score on each site's test rows (lower is better)" in console
