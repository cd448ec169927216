"""Smoke test of benchmarks/bench_regression.py on tiny settings, and its command line."""

from __future__ import annotations

import importlib
import json

import pytest


@pytest.fixture(scope="module")
def bench():
    return importlib.import_module("benchmarks.bench_regression")


def test_a_tiny_run_writes_its_tables(bench, tmp_path):
    argv = ["--reps", "1", "--sites", "2", "--trees", "3", "--n-jobs", "1"]
    bench.main([*argv, "--out", str(tmp_path)])
    summary = json.loads((tmp_path / "regression.json").read_text())
    assert summary["settings"]["reps"] == 1 and summary["settings"]["sites"] == 2
    assert summary["settings"]["trees"] == 3 and summary["settings"]["jaccard"] == 0.5
    assert set(summary["datasets"]) == set(bench.DATASETS)
    for d in summary["datasets"].values():
        assert set(bench.METHODS) <= set(d["mean"])
        assert all(v >= 0 for v in d["mean"].values())  # RMSE
    text = (tmp_path / "regression.md").read_text()
    assert all(dataset in text for dataset in bench.DATASETS)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--reps", "0"], "--reps: 0 is out of range; allowed: >= 1"),
        (["--sites", "1"], "--sites: 1 is out of range; allowed: >= 2"),
    ],
)
def test_the_grid_options_are_checked(bench, argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit):
        bench.main([*argv, "--out", str(tmp_path)])
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
