"""Smoke test of benchmarks/bench_survival_inference.py on tiny settings."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks import bench_survival_inference as bench


def test_recorded_times_fill_every_period():
    _, y = bench.survival_rows(600, 10)
    counts = np.bincount(y["time"].astype(int), minlength=11)[1:]
    assert counts.sum() == 600 and counts.min() >= 55 and 0.7 < y["event"].mean() < 0.95


def test_a_tiny_run_writes_its_ratios(tmp_path, monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setattr(bench, "TRAIN_ROWS", 300)
    monkeypatch.setattr(bench, "FOREST_PARAMS", {**bench.FOREST_PARAMS, "n_estimators": 4})
    results = bench.run(rows=200, n_times=8, out=tmp_path)
    assert results["setup"]["trees"] == 12 and results["setup"]["times"] == 8
    assert set(results["strategies"]) == set(bench.STRATEGIES)
    for row in results["strategies"].values():
        assert row["survival"]["ratio"] > 0 and row["classification"]["ratio"] > 0
        ratio = row["survival"]["ratio"] / row["classification"]["ratio"]
        assert row["ratio_of_ratios"] == pytest.approx(ratio)
        assert row["met"] == (row["ratio_of_ratios"] <= bench.TARGET)
        for task in ("survival", "classification"):
            assert 0 <= row[task]["fallback_rows"] <= 200
    saved = json.loads((tmp_path / "inference_survival.json").read_text())
    assert saved["strategies"].keys() == results["strategies"].keys()
    text = (tmp_path / "inference_survival.md").read_text()
    assert "| mp |" in text and "Target met for" in text and "falls back to `mp`" in text
