"""benchmarks/bench_hospitals.py on tiny settings: the hospitals differ as described, and the
job runs with and without calibration."""

from __future__ import annotations

import importlib
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
    for calibration in ("auto", "none"):
        for site in bench.HOSPITALS:
            assert set(result["summary"][calibration][site]) == set(bench.STRATEGIES)
    plain = [r for r in data["rows"] if r["calibration"] == "none"]
    assert all(r["strategy"] != "auto" or r["chosen_calibration"] == "none" for r in plain)
    assert set(result["checks"]) >= {"mean AUC >= best of local and intersection"}
    text = bench.markdown(data, result)
    assert "| A (303, 0.46, all columns) | accuracy |" in text and "Targets:" in text
