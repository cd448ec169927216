"""Smoke test of benchmarks/bench_quality.py on tiny settings, and its analysis by hand."""

from __future__ import annotations

import doctest
import importlib
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedforest.experiments.statistics import COLUMNS, display_name
from fedforest.vocabulary import EXPERIMENT_METHODS

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    return importlib.import_module("benchmarks.bench_quality")


HEADINGS = (
    "# Prediction quality: every method, 3 to 10 sites",
    "## Average ranks (AUPRC, all blocks)",
    "## Mean AUPRC per number of sites (± standard error over blocks)",
    "## Targets",
    "## The job at 3 sites",
    "## Mean AUPRC per scenario",
)


def test_a_tiny_run_writes_every_output_and_reanalyses_its_scores(bench, tmp_path, capsys):
    argv = ["--reps", "1", "--sites", "3", "--jaccards", "0.7", "--datasets", "wine"]
    argv += ["--trees", "5", "--n-jobs", "1", "--out", str(tmp_path)]
    argv += ["--job-sites", "3", "--job-rows", "80"]  # a small job, in one process
    assert bench.main(argv) == 0
    for name in ("quality.json", "quality.md", "quality_cd.png", "quality_results.csv.gz"):
        path = tmp_path / name
        assert path.is_file() and path.stat().st_size > 0, name
    assert (tmp_path / "quality_cd.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads((tmp_path / "quality.json").read_text())
    assert saved["methods"] == list(EXPERIMENT_METHODS)
    assert set(saved["ranks"]) == set(EXPERIMENT_METHODS)
    assert sorted(saved["ranks"].values())[0] >= 1 and max(saved["ranks"].values()) <= 12
    assert list(saved["per_sites"]) == ["3"]
    assert set(saved["per_sites"]["3"]["mean"]) == set(EXPERIMENT_METHODS)
    assert all(0 <= v <= 1 for v in saved["per_sites"]["3"]["mean"].values())
    assert set(saved["targets"]) == {
        "rank_better_than_mp",
        "not_below_local",
        "difference_to_local",
    }
    assert list(saved["targets"]["not_below_local"]) == ["3"]
    assert saved["blocks"] == 1
    job = saved["job"]
    assert (job["sites"], job["rows_per_site"], job["trees_per_site"]) == (3, 80, 5)
    assert {"local", "mp", "node", "wmp", "auto"} <= set(job["mean_auprc"])
    assert all(0 <= v <= 1 for v in job["mean_auprc"].values())
    assert len(job["wmp_guess_weight"]) == 3 and job["sites_below_local"]["local"] == 0
    assert set(saved["paired"]) == {"mp", "fpv", "node", "local", "auto"}
    assert saved["paired"]["mp"]["wins"] + saved["paired"]["mp"]["losses"] <= 1
    assert saved["config"]["datasets"] == ["wine"] and saved["config"]["reps"] == 1
    [scenario] = saved["scenario_mean"]
    assert (scenario["dataset"], scenario["n_sites"], scenario["jaccard"]) == ("wine", 3, 0.7)
    tidy = pd.read_csv(tmp_path / "quality_results.csv.gz")
    assert set(tidy["method"]) == set(EXPERIMENT_METHODS) and set(tidy["metric"]) == {"auprc"}
    assert len(tidy) == 3 * len(EXPERIMENT_METHODS)
    text = (tmp_path / "quality.md").read_text()
    for heading in HEADINGS:
        assert heading in text, heading
    for name in ("wmp", "node", "auto"):  # spelled out, as every report names them
        assert f"| {display_name(name)} |" in text
    assert capsys.readouterr().out.strip() == text.strip()
    # the same analysis again from the saved scores, with the run's settings
    md_before = text
    scores = str(tmp_path / "quality_results.csv.gz")
    assert bench.main(["--from-results", scores, "--out", str(tmp_path)]) == 0
    again = json.loads((tmp_path / "quality.json").read_text())
    assert again["ranks"] == saved["ranks"]
    assert again["config"] == saved["config"]
    assert again["per_sites"]["3"]["mean"] == pytest.approx(saved["per_sites"]["3"]["mean"])
    assert (tmp_path / "quality.md").read_text() == md_before


def tidy_frame(means: dict[str, float], wmp_minus_local: dict[int, list[float]] | None = None):
    """A tidy AUPRC frame: 2 datasets x sites (3, 6) x 2 overlaps x 4 repetitions.

    Every method scores ``means[method]`` plus a small block effect shared by all
    methods, so the ranks follow ``means``. ``wmp_minus_local[n]`` sets, per block at n sites
    (in order), how far ``wmp`` scores above ``local``.
    """
    rows = []
    rng = np.random.default_rng(0)
    count = {}
    for dataset in ("a", "b"):
        for n in (3, 6):
            for jaccard in (0.3, 0.7):
                for rep in range(4):
                    block = rng.normal(0, 0.02)
                    k = count.get(n, 0)
                    count[n] = k + 1
                    for method, mean in means.items():
                        value = mean + block
                        if wmp_minus_local is not None and method == "wmp":
                            value = means["local"] + block + wmp_minus_local[n][k]
                        for s in range(n):
                            rows.append(
                                {
                                    "dataset": dataset,
                                    "n_sites": n,
                                    "jaccard": jaccard,
                                    "rep": rep,
                                    "site": f"site-{s + 1}",
                                    "method": method,
                                    "metric": "auprc",
                                    "value": value,
                                }
                            )
    return pd.DataFrame(rows)


def test_analyse_meets_the_targets_when_wmp_leads(bench):
    result = bench.analyse(tidy_frame({"local": 0.70, "mp": 0.80, "wmp": 0.85, "fpv": 0.75}))
    assert result["methods"] == ["local", "fpv", "mp", "wmp"]  # in EXPERIMENT_METHODS order
    assert result["blocks"] == 2 * 2 * 2 * 4
    assert list(result["ranks"]) == ["wmp", "mp", "fpv", "local"]
    assert result["ranks"]["wmp"] == pytest.approx(1.0)
    assert set(result["per_sites"]) == {3, 6}
    for n in (3, 6):
        stats = result["per_sites"][n]
        assert stats["blocks"] == 16
        assert stats["mean"]["wmp"] - stats["mean"]["local"] == pytest.approx(0.15)
    targets = result["targets"]
    assert targets["rank_better_than_mp"] is True
    assert targets["not_below_local"] == {3: True, 6: True}
    for n in (3, 6):
        assert targets["difference_to_local"][n]["difference"] == pytest.approx(0.15)
        assert targets["difference_to_local"][n]["se"] == pytest.approx(0.0, abs=1e-9)
    text = bench.render(result, CONFIG)
    assert "- WMP's average rank 1.00 against MP's 2.00: met." in text
    assert "- 3 sites: WMP minus Local +0.1500 (SE 0.0000): met." in text


def test_analyse_misses_the_targets_when_wmp_falls_behind(bench):
    result = bench.analyse(tidy_frame({"local": 0.80, "mp": 0.75, "wmp": 0.60}))
    targets = result["targets"]
    assert targets["rank_better_than_mp"] is False
    assert targets["not_below_local"] == {3: False, 6: False}
    assert targets["difference_to_local"][3]["difference"] == pytest.approx(-0.20)
    assert "missed" in bench.render(result, CONFIG)


def test_not_below_local_allows_one_standard_error(bench):
    # paired differences wmp - local over the 16 blocks at 3 sites: mean -0.005, SE 0.0082
    # (within one SE); at 6 sites the same spread 0.02 lower: mean -0.025 (beyond)
    spread = [0.035, -0.045, 0.015, -0.025] * 4
    wmp_minus_local = {3: spread, 6: [d - 0.02 for d in spread]}
    result = bench.analyse(tidy_frame({"local": 0.8, "mp": 0.7, "wmp": 0.0}, wmp_minus_local))
    floor = result["targets"]["difference_to_local"]
    se = float(np.std(spread, ddof=1) / np.sqrt(len(spread)))
    assert se == pytest.approx(0.0082, abs=1e-4)
    assert floor[3] == pytest.approx({"difference": -0.005, "se": se})
    assert floor[6] == pytest.approx({"difference": -0.025, "se": se})
    assert result["targets"]["not_below_local"] == {3: True, 6: False}


def test_no_targets_without_wmp_mp_and_local(bench):
    result = bench.analyse(tidy_frame({"local": 0.7, "mp": 0.8, "fpv": 0.75}))
    assert "targets" not in result
    assert "## Targets" not in bench.render(result, CONFIG)


def test_one_block_with_wmp_above_local_meets_the_floor(bench):
    frame = tidy_frame({"local": 0.70, "mp": 0.80, "wmp": 0.85})
    one = frame[(frame.dataset == "a") & (frame.jaccard == 0.3) & (frame.rep == 0)]
    result = bench.analyse(one)
    assert result["targets"]["difference_to_local"][3]["difference"] == pytest.approx(0.15)
    assert result["targets"]["not_below_local"] == {3: True, 6: True}


CONFIG = {
    "command": "bench_quality.py --test",
    "datasets": ["a", "b"],
    "sites": [3, 6],
    "jaccards": [0.3, 0.7],
    "reps": 4,
    "trees": 5,
    "n_jobs": 1,
    "seconds": 1.0,
}


# ------------------------------------------------------------------ non-iid settings


def test_noniid_settings_are_added_to_the_report_of_a_run(bench, tmp_path, capsys):
    out = tmp_path / "results"
    with pytest.raises(SystemExit, match="run the benchmark without --noniid first"):
        bench.main(["--noniid", "--out", str(out)])
    base = ["--reps", "2", "--sites", "3", "--jaccards", "0.7", "--datasets", "wine"]
    assert bench.main([*base, "--trees", "3", "--n-jobs", "1", "--job-sites", "0"]
                      + ["--out", str(out)]) == 0  # fmt: skip
    before_md = (out / "quality.md").read_text()
    before = json.loads((out / "quality.json").read_text())
    capsys.readouterr()
    argv = ["--noniid", "--noniid-reps", "2", "--sites", "3", "--trees", "3", "--n-jobs", "1"]
    assert bench.main([*argv, "--out", str(out)]) == 0
    saved = json.loads((out / "quality.json").read_text())
    noniid = saved.pop("noniid")
    assert saved == before  # every other number is kept
    text = (out / "quality.md").read_text()
    assert text.startswith(before_md)
    assert "## Non-iid sites: label skew and calibrated risks" in text
    assert "## Non-iid sites: quantity skew and pooling weights" in text
    assert capsys.readouterr().out.strip() in text
    label = noniid["label_skew"]
    assert label["columns"] == [*bench.LABEL_COLUMNS, *bench.LABEL_DIFFERENCES]
    assert "Pooled data" in label["columns"] and "*Pooled data* is the reference" in text
    assert [(r["n_sites"], r["concentration"], r["reps"]) for r in label["rows"]] == [
        (3, 0.3, 2),
        (3, 1.0, 2),
    ]
    for row in label["rows"]:
        assert set(row["values"]) == set(bench.NONIID_METRICS)
        auc = row["values"]["auc"]
        assert all(0 <= auc[c][0] <= 1 for c in bench.LABEL_COLUMNS)
        brier = row["values"]["brier"]
        gap = brier["Auto, calibrated"][0] - brier["Local"][0]
        assert brier["difference"][0] == pytest.approx(gap)
        gap = brier["Auto, calibrated"][0] - brier["Pooled data"][0]
        assert brier["Auto, calibrated − Pooled data"][0] == pytest.approx(gap)
    quantity = noniid["quantity_skew"]
    assert quantity["columns"] == [*bench.QUANTITY_COLUMNS, *bench.QUANTITY_DIFFERENCES]
    assert [(r["n_sites"], r["concentration"]) for r in quantity["rows"]] == [(3, 0.5)]
    # out of bag by default (the job's): said in the report, with the targets
    assert noniid["config"]["validation"] == "oob"
    assert "scored out of bag (`--validation oob`" in text
    assert "every site's training rows (all its rows but the test rows) pooled" in text
    assert noniid["targets"] == bench.noniid_targets(label)
    assert [(t["n_sites"], t["alpha"], t["metric"], t["against"]) for t in noniid["targets"]] == [
        (3, a, m, ref) for a in (0.3, 1.0) for m in ("brier", "auc") for ref in
        ("Local", "Pooled data")
    ]  # fmt: skip
    assert "## Non-iid sites: targets" in text
    for target in noniid["targets"]:
        assert bench._target_line(target) in text
        # each target's paired gap, repetition by repetition, with its standard error
        assert target["difference"] == pytest.approx(target["deployed"] - target["reference"])
        assert target["reps"] == 2 and target["se"] >= 0
        assert f"standard error {target['se']:.4f} over 2 repetitions" in bench._target_line(target)
    tidy = pd.read_csv(out / "quality_noniid_results.csv.gz")
    assert set(tidy["setting"]) == {"dirichlet/none", "dirichlet/auto", "quantity/equal",
                                    "quantity/rows"}  # fmt: skip
    assert set(tidy["dataset"]) == {"breast_cancer@dirichlet-0.3", "breast_cancer@dirichlet-1",
                                    "breast_cancer@quantity-0.5"}  # fmt: skip
    # pooled data: scored once per skew, at every site of every repetition, with every metric
    pooled = tidy[tidy["method"] == "pooled_data"]
    assert set(pooled["setting"]) == {"dirichlet/none", "quantity/equal"}
    per_setting = tidy[tidy["setting"] == "dirichlet/none"]
    local = per_setting[per_setting["method"] == "local"]
    pooled = per_setting[per_setting["method"] == "pooled_data"]
    key = ["dataset", "rep", "site", "metric", "test_rows", "events"]
    assert sorted(map(tuple, pooled[key].values)) == sorted(map(tuple, local[key].values))
    # the same analysis again from the saved scores, with the run's settings
    scores = str(out / "quality_noniid_results.csv.gz")
    assert bench.main(["--noniid", "--from-results", scores, "--out", str(out)]) == 0
    assert json.loads((out / "quality.json").read_text())["noniid"] == noniid
    assert (out / "quality.md").read_text() == text
    # a full run again keeps the non-iid part
    assert bench.main(["--from-results", str(out / "quality_results.csv.gz"), "--out",
                       str(out)]) == 0  # fmt: skip
    assert json.loads((out / "quality.json").read_text())["noniid"] == noniid
    # held-out validation rows: files of their own, the oob report untouched
    kept = {p.name: p.read_bytes() for p in out.iterdir()}
    assert bench.main([*argv, "--validation", "holdout", "--out", str(out)]) == 0
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.name in kept} == kept
    new = sorted(p.name for p in out.iterdir() if p.name not in kept)
    assert new == ["quality_noniid_holdout.json", "quality_noniid_holdout.md",
                   "quality_noniid_holdout_results.csv.gz"]  # fmt: skip
    held = json.loads((out / "quality_noniid_holdout.json").read_text())
    assert held["config"]["validation"] == "holdout"
    held_text = (out / "quality_noniid_holdout.md").read_text()
    assert held_text.startswith(bench.HOLDOUT_TITLE + "\n\n" + bench.NONIID_HEADING)
    assert "held out of training for validation" in held_text
    assert "every site's training and validation rows pooled" in held_text
    held_tidy = pd.read_csv(out / "quality_noniid_holdout_results.csv.gz")
    assert list(held_tidy["test_rows"]) == list(tidy["test_rows"])  # the same test rows
    assert not np.array_equal(held_tidy["value"], tidy["value"])
    # read back, with the settings of the run that made the scores
    scores = str(out / "quality_noniid_holdout_results.csv.gz")
    again = ["--noniid", "--validation", "holdout", "--from-results", scores, "--out", str(out)]
    assert bench.main(again) == 0
    assert (out / "quality_noniid_holdout.md").read_text() == held_text
    # scores measured when holdout was the only mode (quality.json's non-iid part, no mode)
    (out / "quality_noniid_holdout.json").unlink()
    report = json.loads((out / "quality.json").read_text())
    config = {k: v for k, v in held["config"].items() if k != "validation"}
    report["noniid"]["config"] = {**config, "command": "--noniid"}
    (out / "quality.json").write_text(json.dumps(report))
    assert bench.main(again) == 0
    migrated = json.loads((out / "quality_noniid_holdout.json").read_text())["config"]
    assert migrated == {**config, "command": "--noniid --validation holdout", "validation":
                        "holdout"}  # fmt: skip


def test_the_validation_option_is_the_noniid_runs(bench, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--validation", "holdout", "--out", str(tmp_path)])
    assert exit_.value.code == 2
    assert "--validation holdout applies to --noniid" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(["--noniid", "--validation", "cross", "--out", str(tmp_path)])
    assert "invalid choice: 'cross'" in capsys.readouterr().err


def test_noniid_targets_hold_the_deployed_model_to_local_and_pooled_data(bench):
    def row(n, alpha, brier, auc):
        return {
            "n_sites": n,
            "concentration": alpha,
            "reps": 5,
            "values": {
                "brier": {c: [v, 0.01] for c, v in zip(COLUMNS_OF_TARGETS, brier, strict=True)},
                "auc": {c: [v, 0.01] for c, v in zip(COLUMNS_OF_TARGETS, auc, strict=True)},
            },
        }

    # (Local, Auto calibrated, Pooled data)
    table = {
        "rows": [
            row(3, 0.3, (0.050, 0.040, 0.030), (0.95, 0.96, 0.97)),  # all met (at the bounds)
            row(10, 1.0, (0.050, 0.051, 0.035), (0.96, 0.955, 0.99)),  # none met
        ]
    }
    targets = bench.noniid_targets(table)
    got = [(t["n_sites"], t["alpha"], t["metric"], t["against"], t["met"]) for t in targets]
    assert got == [
        (3, 0.3, "brier", "Local", True),
        (3, 0.3, "brier", "Pooled data", True),  # 0.040 <= 0.030 + 0.01
        (3, 0.3, "auc", "Local", True),
        (3, 0.3, "auc", "Pooled data", True),  # 0.96 >= 0.97 - 0.01
        (10, 1.0, "brier", "Local", False),  # 0.051 > 0.050
        (10, 1.0, "brier", "Pooled data", False),  # 0.051 > 0.045
        (10, 1.0, "auc", "Local", False),  # 0.955 < 0.96
        (10, 1.0, "auc", "Pooled data", False),  # 0.955 < 0.98
    ]
    assert targets[1]["bound"] == pytest.approx(0.040) and targets[3]["bound"] == 0.97 - 0.01
    lines = [bench._target_line(t) for t in targets]
    assert lines[0] == "- 3 sites, alpha 0.3: deployed Brier 0.0400 <= local 0.0500: yes"
    assert lines[3] == (
        "- 3 sites, alpha 0.3: deployed AUC 0.9600 >= pooled data 0.9700 - 0.01: yes"
    )
    assert lines[5] == (
        "- 10 sites, alpha 1: deployed Brier 0.0510 <= pooled data 0.0350 + 0.01: NO"
    )
    # results without pooled data: the targets against local only
    for r in table["rows"]:
        for cells in r["values"].values():
            del cells["Pooled data"]
    assert {t["against"] for t in bench.noniid_targets(table)} == {"Local"}
    # in the report: a section of its own, each line yes or NO
    result = {
        "config": {"command": "--noniid", "dataset": "breast_cancer", "jaccard": 0.5,
                   "sites": [3, 10], "alphas": [0.3, 1.0], "beta": 0.5, "reps": 5, "trees": 3,
                   "n_jobs": 1, "seconds": 1.0, "validation": "oob"},
        "label_skew": {"columns": [], "rows": []},
        "quantity_skew": {"columns": [], "rows": []},
        "targets": targets,
    }  # fmt: skip
    text = bench.render_noniid(result)
    assert "## Non-iid sites: targets" in text and "4 of 8 met:" in text
    assert all(line in text for line in lines)


#: The label-skew columns the targets read, in the order of the test's tuples.
COLUMNS_OF_TARGETS = ("Local", "Auto, calibrated", "Pooled data")


def test_noniid_targets_give_the_paired_gap_and_its_standard_error(bench):
    cells = {
        "Local": [0.030, 0.01],
        "Auto, calibrated": [0.031, 0.01],
        "Pooled data": [0.025, 0.01],
        "difference": [0.001, 0.004],  # deployed - local, repetition by repetition
        "Auto, calibrated − Pooled data": [0.006, 0.002],
    }
    row = {"n_sites": 3, "concentration": 0.3, "reps": 4, "values": {"brier": cells}}
    local, pooled = bench.noniid_targets({"rows": [row]})
    assert (local["difference"], local["se"], local["reps"]) == (0.001, 0.002, 4)
    assert (pooled["difference"], pooled["se"]) == (0.006, 0.001)
    assert bench._target_line(local) == (
        "- 3 sites, alpha 0.3: deployed Brier 0.0310 <= local 0.0300: NO "
        "(deployed − local +0.0010, standard error 0.0020 over 4 repetitions)"
    )
    # one repetition: the gap without a standard error
    row["reps"] = 1
    local = bench.noniid_targets({"rows": [row]})[0]
    assert math.isnan(local["se"])
    assert bench._target_line(local).endswith("NO (deployed − local +0.0010)")
    # a table without the gap columns (older results): no gap, the line as before
    for name in bench.TARGET_GAPS.values():
        del cells[name]
    local = bench.noniid_targets({"rows": [row]})[0]
    assert "difference" not in local and bench._target_line(local).endswith(": NO")
    # the module's examples (noniid_targets' among them) hold
    result = doctest.testmod(bench)
    assert result.failed == 0 and result.attempted >= 4


def test_analyse_noniid_means_sds_and_the_paired_difference(bench):
    rows = []
    for rep, (local, calibrated) in enumerate([(0.10, 0.07), (0.14, 0.09), (0.12, 0.08)]):
        for setting, method, value in (
            ("dirichlet/none", "local", local),
            ("dirichlet/auto", "auto", calibrated),
        ):
            for site, offset in (("site-1", -0.01), ("site-2", 0.01)):
                rows.append(("breast_cancer@dirichlet-0.3", 2, 0.5, rep, site, method,
                             "brier", value + offset, setting))  # fmt: skip
    tidy = pd.DataFrame(rows, columns=[*COLUMNS, "setting"])
    table = bench.analyse_noniid(tidy)["label_skew"]
    assert table["columns"] == ["Local", "Auto, calibrated", "difference"]
    [row] = table["rows"]
    assert (row["n_sites"], row["concentration"], row["reps"]) == (2, 0.3, 3)
    values = row["values"]["brier"]
    assert values["Local"] == pytest.approx([0.12, 0.02])
    assert values["Auto, calibrated"] == pytest.approx([0.08, 0.01])
    assert values["difference"] == pytest.approx([-0.04, 0.01])
    text = "\n".join(bench._skew_markdown(table, "alpha", ["brier"]))
    assert "| 2 | 0.3 | 0.120 ± 0.020 | 0.080 ± 0.010 | -0.040 ± 0.010 |" in text
    # with pooled data: its column and the calibrated default's distance to it
    for rep, value in enumerate([0.06, 0.10, 0.08]):
        for site, offset in (("site-1", -0.01), ("site-2", 0.01)):
            rows.append(("breast_cancer@dirichlet-0.3", 2, 0.5, rep, site, "pooled_data",
                         "brier", value + offset, "dirichlet/none"))  # fmt: skip
    tidy = pd.DataFrame(rows, columns=[*COLUMNS, "setting"])
    table = bench.analyse_noniid(tidy)["label_skew"]
    assert table["columns"] == ["Local", "Auto, calibrated", "Pooled data", "difference",
                                "Auto, calibrated − Pooled data"]  # fmt: skip
    values = table["rows"][0]["values"]["brier"]
    assert values["Pooled data"] == pytest.approx([0.08, 0.02])
    assert values["Auto, calibrated − Pooled data"] == pytest.approx([0.0, 0.01])
    text = "\n".join(bench._skew_markdown(table, "alpha", ["brier"]))
    assert "| Auto, calibrated − Local | Auto, calibrated − Pooled data |" in text
    assert "| 0.080 ± 0.020 | -0.040 ± 0.010 | +0.000 ± 0.010 |" in text
