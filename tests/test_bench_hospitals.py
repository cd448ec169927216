"""benchmarks/bench_hospitals.py on tiny settings: the hospitals differ as described, and the
job runs with and without calibration."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    return importlib.import_module("benchmarks.bench_hospitals")


def test_the_hospitals_differ_in_size_prevalence_and_columns(bench):
    rng = np.random.default_rng(0)
    for name, (rows, prevalence, shift, _dropped) in bench.HOSPITALS.items():
        table = bench.hospital_table(rows, prevalence, shift, rng)
        assert len(table) == rows, name
        assert abs(table["outcome"].mean() - prevalence) < 0.1, name
    assert bench.HOSPITALS["A"][3] == [] and all(bench.HOSPITALS[s][3] for s in "BCD")


def test_one_repetition_runs_the_job_calibrated_and_not(bench, tmp_path):
    data = bench.run(reps=1, trees=5, weights="rows")
    result = bench.summarise(data)
    for site in bench.HOSPITALS:
        assert set(result["summary"]["auto"][site]) == set(bench.STRATEGIES)
    plain = [r for r in data["rows"] if r["calibration"] == "none"]
    assert all(r["strategy"] != "auto" or r["chosen_calibration"] == "none" for r in plain)
    text = bench.markdown(data, result)
    assert "| A (303, 0.46, all columns) | accuracy |" in text and "Targets:" in text
    # pooled data: once a repetition and hospital (the uncalibrated run), the job's test rows
    pooled = [r for r in data["rows"] if r["strategy"] == "pooled_data"]
    assert [(r["site"], r["calibration"]) for r in pooled] == [(s, "none") for s in "ABCD"]
    assert all(0 <= r["auc"] <= 1 and 0 <= r["brier"] <= 1 for r in pooled)
    for site in bench.HOSPITALS:
        assert set(result["summary"]["none"][site]) == {*bench.STRATEGIES, "pooled_data"}
        cell = result["summary"]["none"][site]["pooled_data"]["auprc"]
        assert cell[0] == next(r["auprc"] for r in pooled if r["site"] == site)
        gap = result["distance"][site]["brier"]
        deployed = next(
            r["brier"]
            for r in data["rows"]
            if (r["site"], r["calibration"], r["strategy"]) == (site, "auto", "auto")
        )
        expected = deployed - next(r["brier"] for r in pooled if r["site"] == site)
        assert gap["auto"][0] == pytest.approx(expected)
        assert np.isnan(gap["auto"][1])  # one repetition: no spread
        brier = f"{site}: Brier <= the better of local and pooled data + 0.01"
        summary = result["summary"]
        better = min(
            summary["none"][site]["local"]["brier"][0],
            summary["none"][site]["pooled_data"]["brier"][0],
        )
        assert result["checks"][brier] == (
            summary["auto"][site]["auto"]["brier"][0] <= better + 0.01
        )
        for metric in ("accuracy", "AUC"):
            assert (
                f"{site}: {metric} >= the better of local and pooled data - 0.01"
                in result["checks"]
            )
    assert "| auto (deployed) | pooled data |" in text and "| log_loss |" in text
    assert "Distance to pooled data" in text and "| auprc | " in text


def test_every_committed_report_renders_again_from_its_results(bench):
    from benchmarks import harness

    for path in sorted((ROOT / "benchmarks" / "results").glob("hospitals*.json")):
        name = path.stem
        saved = harness.read_results(ROOT / "benchmarks" / "results" / f"{name}.json")
        text = bench.markdown(saved, saved)
        assert text == (ROOT / "benchmarks" / "results" / f"{name}.md").read_text()


def test_the_heart_disease_hospitals(bench, heart_disease_files, tmp_path, capsys):
    out = tmp_path / "results"
    bench.main(["--heart-disease", str(heart_disease_files), "--reps", "1", "--trees", "4",
                "--out", str(out)])  # fmt: skip
    assert sorted(p.name for p in out.iterdir()) == ["hospitals_heart.json", "hospitals_heart.md"]
    saved = json.loads((out / "hospitals_heart.json").read_text())
    assert saved["source"] == "heart-disease" and saved["reps"] == 1
    assert saved["hospitals"]["hungary"] == {
        "rows": 48,
        "prevalence": pytest.approx(0.48, abs=0.01),
        "lacks": ["slope", "ca", "thal"],
    }
    assert {r["site"] for r in saved["rows"]} == {"cleveland", "hungary", "switzerland", "va"}
    text = (out / "hospitals_heart.md").read_text()
    assert text.startswith("# Four real hospitals (UCI Heart Disease): calibrated risks")
    assert "--heart-disease DIR --reps 1 --trees 4" in text
    assert "| cleveland (48, 0.44, all columns) | accuracy |" in text
    assert "not measured: hungary slope, ca, thal; switzerland chol, fbs, ca" in text
    assert "- va: Brier <= the better of local and pooled data + 0.01: " in text
    assert "--reps 1 --trees 4 --weights equal --validation oob`" in text
    assert "training rows scored out of bag" in text
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--heart-disease", str(heart_disease_files.parent), "--out", str(out)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"--heart-disease {heart_disease_files.parent} lacks processed.cleveland.data" in err


def test_the_targets_take_the_better_of_local_and_pooled_data(bench):
    def cell(accuracy, auc, brier):
        return {"accuracy": (accuracy, 0.0), "auc": (auc, 0.0), "brier": (brier, 0.0)}

    summary = {
        "none": {
            "A": {"local": cell(0.80, 0.88, 0.14), "pooled_data": cell(0.82, 0.89, 0.13)},
            "B": {"local": cell(0.80, 0.88, 0.14)},  # no pooled data: local alone
        },
        "auto": {
            "A": {"auto": cell(0.811, 0.879, 0.141)},
            "B": {"auto": cell(0.795, 0.875, 0.145)},
        },
    }
    checks = bench.targets(summary, ["A", "B"])
    assert checks == {
        "A: accuracy >= the better of local and pooled data - 0.01": True,  # 0.811 >= 0.81
        "A: AUC >= the better of local and pooled data - 0.01": False,  # 0.879 < 0.88
        "A: Brier <= the better of local and pooled data + 0.01": False,  # 0.141 > 0.14
        "B: accuracy >= local - 0.01": True,
        "B: AUC >= local - 0.01": True,
        "B: Brier <= local + 0.01": True,
    }


def test_holdout_results_go_to_their_own_files(bench, heart_disease_files, tmp_path):
    out = tmp_path / "results"
    bench.main(["--heart-disease", str(heart_disease_files), "--reps", "1", "--trees", "3",
                "--validation", "holdout", "--out", str(out)])  # fmt: skip
    names = sorted(p.name for p in out.iterdir())
    assert names == ["hospitals_heart_holdout.json", "hospitals_heart_holdout.md"]
    saved = json.loads((out / "hospitals_heart_holdout.json").read_text())
    assert saved["validation"] == "holdout"
    assert "validation rows held out of training" in (out / names[1]).read_text()


def test_each_target_says_its_paired_difference_and_standard_error(bench):
    import pandas as pd

    rows = []
    for rep, (auto, local, pooled) in enumerate([(0.80, 0.82, 0.85), (0.90, 0.86, 0.87)]):
        for cal, strategy, auc in (
            ("auto", "auto", auto),
            ("none", "local", local),
            ("none", "pooled_data", pooled),
        ):
            rows.append({"rep": rep, "calibration": cal, "site": "A", "strategy": strategy,
                         "accuracy": auc, "auc": auc, "brier": 1 - auc})  # fmt: skip
    frame = pd.DataFrame(rows)
    summary = {
        cal: {"A": {s: {m: (float(g[m].mean()), 0.0) for m in ("accuracy", "auc", "brier")}
                    for s, g in frame[frame.calibration == cal].groupby("strategy")}}
        for cal in ("auto", "none")
    }  # fmt: skip
    margins = bench.target_margins(frame, summary, ["A"])
    auc = margins["A: AUC >= the better of local and pooled data - 0.01"]
    # pooled data is the better reference by its mean (0.86 against 0.84): -0.05 and +0.03
    assert auc["reference"] == "pooled_data" and auc["n"] == 2
    assert auc["difference"] == pytest.approx(-0.01)
    assert auc["se"] == pytest.approx(np.std([-0.05, 0.03], ddof=1) / np.sqrt(2))
    assert set(margins) == set(bench.targets(summary, ["A"]))
    text = bench._margin_text(auc)
    assert text == f" (auto − pooled data -0.010, standard error {auc['se']:.3f} over 2 seeds)"
    assert bench._margin_text({**auc, "se": float("nan"), "n": 1}).endswith("-0.010)")


def test_the_jobs_run_the_shipped_election(bench, tmp_path):
    import yaml

    from fedforest.federation.config import JobConfig

    shipped = yaml.safe_load((ROOT / "site_configs" / "job.yaml").read_text())["election"]
    settings = bench.job_settings("h", bench.HOSPITALS, 3, 10, "none", "equal", "holdout")
    assert settings["election"] == shipped and settings["election"]["auto_tune"] is True
    # a copy: the next run's settings do not share the dict
    settings["election"]["freedom_degree"] = 0.9
    assert bench.job_settings("h", bench.HOSPITALS, 3, 10, "none", "equal")["election"] == shipped
    config = bench.write_job(tmp_path, 3, 10, "none", "equal")
    job = JobConfig.load(config / "job.yaml")
    assert job.election.auto_tune and job.election.tolerance == shipped["tolerance"]
