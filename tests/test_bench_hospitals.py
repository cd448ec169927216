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
    assert set(result["checks"]) >= {"mean AUC >= best of local and intersection"}
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
        brier = f"{site}: Brier <= pooled data + 0.01"
        summary = result["summary"]
        assert result["checks"][brier] == (
            summary["auto"][site]["auto"]["brier"][0]
            <= summary["none"][site]["pooled_data"]["brier"][0] + 0.01
        )
        assert f"{site}: AUC >= pooled data - 0.02" in result["checks"]
    assert "| auto (deployed) | pooled data |" in text and "| log_loss |" in text
    assert "Distance to pooled data" in text and "| auprc | " in text


def test_the_committed_report_renders_without_pooled_data(bench):
    from benchmarks import harness

    for name in ("hospitals", "hospitals_rows"):
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
    assert "- va: Brier <= pooled data + 0.01: " in text
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--heart-disease", str(heart_disease_files.parent), "--out", str(out)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"--heart-disease {heart_disease_files.parent} lacks processed.cleveland.data" in err
