"""Smoke test of benchmarks/bench_survival.py on tiny settings, and its tables' numbers."""

from __future__ import annotations

import importlib
import json

import pytest

from fedforest.vocabulary import SURVIVAL_METRICS


@pytest.fixture(scope="module")
def bench():
    return importlib.import_module("benchmarks.bench_survival")


def test_a_tiny_run_writes_its_tables_and_the_targets(bench, tmp_path):
    argv = ["--reps", "2", "--sites", "2", "--jaccard", "0.5", "--trees", "3"]
    bench.main([*argv, "--n-jobs", "1", "--out", str(tmp_path)])
    summary = json.loads((tmp_path / "survival.json").read_text())
    assert summary["settings"]["reps"] == 2 and summary["settings"]["sites"] == 2
    assert set(summary["datasets"]) == set(bench.DATASETS)
    for dataset, by_metric in summary["datasets"].items():
        assert set(by_metric) == set(SURVIVAL_METRICS)
        for metric, d in by_metric.items():
            assert set(d["mean"]) == {*bench.METHODS, "pooled_data"}
            assert all(0 <= v <= 1 for v in d["mean"].values()), (dataset, metric)
            assert 0 <= d["beat_local"]["wmp"] <= d["reps"] == 2
        means = {m: by_metric[m]["mean"] for m in ("cindex", "ibs")}
        assert summary["targets"][dataset] == {
            "wmp_cindex_above_local": means["cindex"]["wmp"] > means["cindex"]["local"],
            "wmp_ibs_below_local": means["ibs"]["wmp"] < means["ibs"]["local"],
        }
    text = (tmp_path / "survival.md").read_text()
    assert text.startswith("# Survival targets")
    for label in bench.LABELS.values():
        assert label in text
    assert text.count("| gbsg2 |") == len(SURVIVAL_METRICS)
