"""Smoke test of benchmarks/bench_privacy.py on tiny settings (a few trees, few rows)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    path = ROOT / "benchmarks" / "bench_privacy.py"
    spec = importlib.util.spec_from_file_location("bench_privacy", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_privacy"] = module
    spec.loader.exec_module(module)
    return module


def by_setting(rows):
    out = {}
    for row in rows:
        out.setdefault(row["setting"], []).append(row)
    return out


def test_every_setting_has_a_valid_policy(bench):
    for dataset in bench.DATASETS:
        numeric = bench._numeric_columns(dataset)
        for setting in bench.SETTINGS:
            policy = bench.policy_for(setting, dataset, numeric)
            policy.check_features(numeric)  # a grid rule / public range for every numeric column
            assert policy.is_default == (setting.name == "baseline")
    with pytest.raises(ValueError, match="unknown settings"):
        bench.get_settings(["k=3"])


def test_synthetic_settings_change_what_is_sent(bench):
    settings = ["baseline", "k=5", "grid:step", "noise=1", "dp=5"]
    rows = bench.run_task("S-500-Mix", 0, settings, n_trees=4)
    per = by_setting(rows)
    assert list(per) == settings
    for setting, site_rows in per.items():
        assert [r["site"] for r in site_rows] == ["site-1", "site-2", "site-3"], setting
        for r in site_rows:
            assert set(r["auprc"]) == set(bench.STRATEGIES)
            assert all(0 <= v <= 1 for v in r["auprc"].values() if v is not None)
            assert r["rare_levels"] == 0  # S-500 levels have ~30 rows per site
    base = per["baseline"]
    assert all(r["same_as_baseline"] for r in base)
    assert not any(r["same_as_baseline"] for s in settings[1:] for r in per[s])
    # scikit-learn thresholds are midpoints of training values
    assert all(r["mid_any"] == r["thresholds"] > 0 for r in base)
    assert min(r["smallest_leaf"] for r in base) == 1
    assert all(r["smallest_leaf"] >= 5 for r in per["k=5"])
    assert all(r["nodes"] < b["nodes"] for r, b in zip(per["k=5"], base, strict=True))
    assert all(r["mid_consecutive"] == r["mid_any"] == 0 for r in per["grid:step"])
    assert all(r["nodes"] == b["nodes"] for r, b in zip(per["noise=1"], base, strict=True))
    for r in per["dp=5"]:
        assert r["trees"] == 2 * bench.DP_TREES and r["imputers"] == 0 and r["surrogates"] == 0
        assert r["mid_consecutive"] == 0


def test_demo_rare_levels_are_hidden_by_min_level_rows(bench):
    # 20 rows per hospital: some smoking / activity levels have fewer than 5 rows at a site
    rows = bench.run_task("Demo", 0, ["baseline", "levels=5", "dp=1"], n_trees=3, demo_rows=20)
    per = by_setting(rows)
    assert sum(r["rare_levels"] for r in per["baseline"]) > 0
    assert all(r["rare_levels"] == 0 for r in per["levels=5"])
    assert per["levels=5"][0]["levels_hidden"] > 0 and not per["levels=5"][0]["same_as_baseline"]
    assert all(r["trees"] == 2 * bench.DP_TREES for r in per["dp=1"])


def test_run_writes_json_and_markdown(bench, tmp_path):
    result = bench.run(
        tmp_path,
        reps=2,
        jobs=1,
        n_trees=3,
        datasets=["S-500-Num"],
        settings=["baseline", "k=20"],
    )
    saved = json.loads((tmp_path / "privacy.json").read_text())
    assert saved["overall"].keys() == {"baseline", "k=20"}
    assert saved["overall"]["baseline"]["delta"]["mp"] == [0.0, 0.0]
    assert len(saved["overall"]["k=20"]["delta"]["local"]) == 2
    entry = saved["datasets"]["S-500-Num"]["k=20"]
    assert entry["reps"] == 2 and entry["smallest_leaf"] >= 20
    assert entry["rare_levels"] == 0 and entry["smallest_level_rows"] is None
    assert len(saved["rows"]["values"]) == 2 * 2 * 3
    columns = saved["rows"]["columns"]
    assert "auprc_mp" in columns and "smallest_leaf" in columns
    assert all(len(v) == len(columns) for v in saved["rows"]["values"])
    text = (tmp_path / "privacy.md").read_text()
    assert "| setting | fpv | pr | mi | ipr | mp | ss | park | local | intersection |" in text
    assert "## S-500-Num" in text and "| k=20 |" in text
    assert "k=20" in bench.headline(result)
