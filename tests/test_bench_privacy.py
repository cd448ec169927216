"""Smoke test of benchmarks/bench_privacy.py on tiny settings (a few trees, few rows)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from fedforest.federation.training import fit_site_models
from fedforest.privacy.policy import (
    JOB_MIN_LEAF_ROWS,
    JOB_TREE_SAMPLE_FRACTION,
    PrivacyPolicy,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    return importlib.import_module("benchmarks.bench_privacy")


@pytest.fixture(scope="module")
def quick(bench):
    """The ``--quick`` configuration (1 repetition, 20 trees, 300 demo rows) on every dataset,
    for the settings whose membership-inference AUCs are compared."""
    settings = ["baseline", bench.JOB_DEFAULT, "k=20"]
    return bench.run(None, reps=1, jobs=1, n_trees=20, demo_rows=300, settings=settings)


def by_setting(rows):
    out = {}
    for row in rows:
        out.setdefault(row["setting"], []).append(row)
    return out


def assert_mia(rows):
    """Both attack AUCs in [0, 1], on as many members as non-members (all test rows)."""
    for r in rows:
        assert 0 <= r["mia_conf"] <= 1 and 0 <= r["mia_leaf"] <= 1, r["setting"]
        assert r["mia_rows"] == min(r["train_rows"], r["test_rows"]) > 0


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
        assert_mia(site_rows)
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
    assert_mia(rows)


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
    assert {"mia_conf", "mia_leaf", "mia_rows"} <= set(columns)
    for setting in ("baseline", "k=20"):
        for e in (saved["overall"][setting], saved["datasets"]["S-500-Num"][setting]):
            for attack in ("mia_conf", "mia_leaf"):
                mean, se = e[attack]
                assert 0 <= mean <= 1 and se > 0  # two repetitions: a standard error
    assert all(len(v) == len(columns) for v in saved["rows"]["values"])
    text = (tmp_path / "privacy.md").read_text()
    assert "| setting | fpv | pr | mi | ipr | mp | ss | park | local | intersection |" in text
    assert text.count("| MIA conf. | MIA leaf |") == 2  # the over-all table and S-500-Num's
    assert "**MIA conf.**" in text and "**MIA leaf**" in text  # the legend
    assert "## S-500-Num" in text and "| k=20 |" in text
    assert "k=20" in bench.headline(result)


def test_job_default_is_what_a_job_sends(bench):
    """The job default setting sends exactly what ``fit_site_models`` sends in a job."""
    setting = bench.get_settings([bench.JOB_DEFAULT])[0]
    assert setting.grows_leaves and not bench.get_settings(["k=5"])[0].grows_leaves
    block = setting.block("S-500-Mix")
    k, fraction = block["min_leaf_rows"], block["tree_sample_fraction"]
    assert (k, fraction) == (JOB_MIN_LEAF_ROWS, JOB_TREE_SAMPLE_FRACTION)
    tables, categorical = bench.site_tables("S-500-Mix", 0)
    grown = PrivacyPolicy.from_dict(block)
    schema, sites, _ = bench.prepare_sites(tables, categorical, 0, 4, grown=grown)
    policy = bench.policy_for(setting, "S-500-Mix", bench._numeric_columns("S-500-Mix"))
    for site in sites.values():
        sent = bench.outgoing(site, schema, policy, 0)
        job = fit_site_models(
            site.name,
            site.X_train,
            site.y_train,
            site.own,
            schema.shared,
            schema.categories,
            {"n_estimators": 4},  # min_samples_leaf 1: the job raises it to min_leaf_rows
            random_state=site.seed,
            intersection_columns=schema.shared,
            imputer_cv=None,
            privacy=policy,
            classes=schema.classes,
        )
        assert bench._same_forest(sent.forest, job.forest)
        assert bench._same_forest(sent.intersection, job.intersection)
        assert bench.smallest_leaf_rows(sent.forest) >= k
        # each tree grew on a bootstrap sample of 30% of the rows: its root saw no more
        roots = site.models.forest.n_node_samples[site.models.forest.tree_start[:-1]]
        assert roots.max() <= grown.tree_rows(len(site.X_train)) < len(site.X_train)


def test_membership_inference_on_the_quick_run(bench, quick):
    overall = quick["overall"]
    for e in [*overall.values(), *(s for d in quick["datasets"].values() for s in d.values())]:
        assert all(0 <= e[a][0] <= 1 for a in ("mia_conf", "mia_leaf"))
    base, job, k20 = (overall[s] for s in ("baseline", bench.JOB_DEFAULT, "k=20"))
    # the forests fit their training rows: their true-class probability tells members apart
    assert base["mia_conf"][0] > 0.7
    assert all(d["baseline"]["mia_conf"][0] > 0.6 for d in quick["datasets"].values())
    assert k20["mia_conf"][0] < job["mia_conf"][0] < base["mia_conf"][0]
    # fully grown trees: a bootstrap member reaches larger leaves than a non-member (AUC
    # below 0.5); leaves of at least 20 rows leave the leaf counts far less to go on
    assert base["mia_leaf"][0] < 0.47
    assert abs(k20["mia_leaf"][0] - 0.5) < abs(base["mia_leaf"][0] - 0.5)
