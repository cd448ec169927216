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


def test_the_same_size_is_the_closest_node_count(monkeypatch):
    monkeypatch.setattr(bench, "TRAIN_ROWS", 400)
    monkeypatch.setattr(bench, "FOREST_PARAMS", {**bench.FOREST_PARAMS, "n_estimators": 5})
    params = bench.same_size_params(rows=100, n_times=10)
    assert params["min_samples_split"] == 2 * params["min_samples_leaf"]
    frame, y = bench.survival_rows(bench.N_SITES * 400 + 100, 10)
    frame, y = frame[:400], y[:400]
    rf = bench.RandomForestClassifier(**bench.FOREST_PARAMS, random_state=0)
    target = bench._nodes(rf.fit(frame, y["event"].astype(int)))

    def gap(leaf):
        rsf = bench.RandomSurvivalForest(**bench.leaf_params(leaf), random_state=0)
        return abs(bench._nodes(rsf.fit(frame, y)) - target)

    chosen = gap(params["min_samples_leaf"])
    # survival trees grown with the classification trees' parameters are larger
    assert gap(bench.FOREST_PARAMS["min_samples_leaf"]) > chosen
    for leaf in (params["min_samples_leaf"] - 1, params["min_samples_leaf"] + 1):
        if leaf in bench.SURVIVAL_LEAVES:
            assert gap(leaf) >= chosen


def test_a_tiny_run_writes_its_ratios(tmp_path, monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setattr(bench, "TRAIN_ROWS", 300)
    monkeypatch.setattr(bench, "FOREST_PARAMS", {**bench.FOREST_PARAMS, "n_estimators": 4})
    results = bench.run(rows=200, n_times=8, out=tmp_path)
    assert results["setup"]["trees"] == 12 and results["setup"]["times"] == 8
    assert list(results["pairs"]) == list(bench.PAIRS) and results["target_pair"] == "same_size"
    same_params = results["pairs"]["same_params"]["forest_params"]
    assert same_params["survival"] == same_params["classification"] == bench.FOREST_PARAMS
    for pair in results["pairs"].values():
        assert set(pair["strategies"]) == set(bench.STRATEGIES)
        assert pair["nodes"]["survival"] > 0 and pair["mean_depth"]["classification"] > 0
        for row in pair["strategies"].values():
            assert row["survival"]["ratio"] > 0 and row["classification"]["ratio"] > 0
            ratio = row["survival"]["ratio"] / row["classification"]["ratio"]
            assert row["ratio_of_ratios"] == pytest.approx(ratio)
            assert row["met"] == (row["ratio_of_ratios"] <= bench.TARGET)
            for task in ("survival", "classification"):
                assert 0 <= row[task]["fallback_rows"] <= 200
    saved = json.loads((tmp_path / "inference_survival.json").read_text())
    assert saved["pairs"].keys() == results["pairs"].keys()
    text = (tmp_path / "inference_survival.md").read_text()
    assert "## Same forest size (the target)" in text and "## Same parameters" in text
    assert text.count("| mp |") == 2 and text.count("strategies.") >= 2
    assert "falls back to `mp`" in text and "not the target's pair" in text
