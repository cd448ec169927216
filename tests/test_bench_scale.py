"""Smoke test of benchmarks/bench_scale.py on tiny settings, in process (no simulator)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fedforest.federation.config import SiteConfig
from fedforest.federation.tables import read_table

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    return importlib.import_module("benchmarks.bench_scale")


def test_plan_and_modes(bench):
    assert bench.plan([3, 10, 30], 5000, [1000, 5000], 10) == [
        (3, 5000),
        (10, 5000),
        (30, 5000),
        (10, 1000),
    ]
    assert bench.choose_mode("auto", 10, 10) == "simulator"
    assert bench.choose_mode("auto", 30, 10) == "in-process"
    assert bench.choose_mode("in-process", 3, 10) == "in-process"


def test_the_job_uses_the_reference_settings(bench, tmp_path):
    configs = bench.make_job(tmp_path / "split", 3, 40, 7, tuning_rounds=2)
    job = bench.JobConfig.load(configs / "job.yaml")
    reference = bench.JobConfig.load(ROOT / "site_configs" / "job.yaml")
    assert job.sites == ["site-1", "site-2", "site-3"] and job.min_sites == 3
    assert job.strategies == reference.strategies and "auto" in job.strategies
    assert job.forest.n_estimators == 7 and job.election.tuning_rounds == 2
    assert job.election.auto_tune == reference.election.auto_tune
    assert job.timeouts.to_dict() == bench.TIMEOUTS
    for site in job.sites:
        frame = read_table(SiteConfig.load(configs / f"{site}.yaml"))
        assert len(frame) == 40


def test_estimates_spread_site_time_over_the_cores(bench):
    clock = bench._Clock()
    clock.add_server("schema", 0.5)
    for site, seconds in {"a": 2.0, "b": 2.0, "c": 2.0, "d": 6.0}.items():
        clock.add_site("train", site, seconds)
        clock.add_site("schema", site, 1.0)
    clock.add_site("evaluate", "a", 3.0)  # a sample of one site stands for all four
    clock.add_server("pool", 1.5)
    est = bench.estimate_phases(clock, 4, 2)
    assert est == {"schema": 0.5 + 2.0, "train": 6.0, "pool": 1.5, "evaluate": 6.0}


def test_process_memory_names_sites_and_server(bench):
    # a "server" process starting a "site" process that holds 60 MB, as the simulator does
    site = "import time; x = bytearray(60_000_000); x[::4096] = b'1' * 14649; time.sleep(1.2)"
    server = (
        "import subprocess, sys; "
        f"subprocess.run([sys.executable, '-c', {site!r}, 'simulator_worker', '--client', 's-9'])"
    )
    with bench.ProcessMemory(interval=0.05) as memory:
        subprocess.run([sys.executable, "-c", server], check=True, timeout=30)
        time.sleep(0.1)
    roles = memory.by_role()
    assert list(roles["sites"]) == ["s-9"]
    assert roles["sites"]["s-9"] > 60_000_000
    assert 0 < roles["server"] < 60_000_000
    assert roles["other"] == []


def test_run_in_process_writes_json_and_markdown(bench, tmp_path):
    bench_out = bench.run(
        tmp_path,
        sites=[2, 3],
        rows=60,
        trees=3,
        row_sweep=[30],
        row_sweep_sites=3,
        mode="in-process",
        evaluate_sample=2,
        tuning_rounds=2,
    )
    saved = json.loads((tmp_path / "scale.json").read_text())
    assert saved.pop("machine")["cores"] >= 1  # the harness's machine facts
    assert saved == json.loads(json.dumps(bench_out))
    runs = saved["runs"]
    assert [(r["sites"], r["rows_per_site"]) for r in runs] == [(2, 60), (3, 60), (3, 30)]
    assert saved["settings"]["validation"] == "oob"  # the job's default
    for r in runs:
        assert r["status"] == "finished" and r["dropped_sites"] == {}
        assert r["validation"] == "oob"
        assert r["mode"] == "in-process" and r["estimated"]
        assert set(r["phase_seconds"]) == set(bench.PHASES)
        assert all(v >= 0 for v in r["phase_seconds"].values())
        assert r["evaluated_sites"] == 2
        assert r["model_trees"] == 3 * r["sites"]
        b = r["bytes"]
        assert set(b["per_site"]) == {f"site-{i}" for i in range(1, r["sites"] + 1)}
        assert all({"schema", "election", "train"} <= set(p) for p in b["per_site"].values())
        assert b["broadcast"] == b["model"] * r["sites"]
        assert b["total"] == b["site_upload_total"] + b["broadcast"]
        assert 10 < b["model_bytes_per_node"] < 1000
        peak = r["peak_rss"]
        assert peak["isolated"] and peak["single_process"] >= peak["process_at_start"] > 10e6
        assert 0 <= r["auto_auprc_mean"] <= 1
        assert r["site_tree_counts"] == {} and r["evaluate_per_site"] > 0
        assert b["received_per_site"] == {s: b["model"] for s in b["per_site"]}
        q = r["site_quality"]
        assert len(q["sites"]) == r["evaluated_sites"]
        assert all(0 <= v[k] <= 1 for v in q["sites"].values() for k in ("local", "auto"))
        assert q["auto_below_local"] == sum(v["auto"] < v["local"] for v in q["sites"].values())
        assert q["auto_minus_local_min"] == round(
            min(v["auto"] - v["local"] for v in q["sites"].values()), 4
        )
        # pooled data beside local and auto at the evaluated sites, with the job's AUPRC
        ref = r["reference"]
        assert list(ref["sites"]) == list(q["sites"]) and ref["seconds"] >= 0
        for site, row in ref["sites"].items():
            assert row["auprc"]["local"] == q["sites"][site]["local"]
            assert row["auprc"]["auto"] == q["sites"][site]["auto"]
            assert set(row) <= set(bench.QUALITY_METRICS)
            assert all(0 <= v <= 1 for v in row["auprc"].values())
        summary = ref["summary"]["auprc"]
        assert summary["auto"][0] == round(sum(q["sites"][x]["auto"] for x in q["sites"]) / 2, 4)
        assert set(ref["checks"]) == {
            "auprc >= local - 0.01 at every site",
            "auprc >= pooled data - 0.01",
            "brier <= pooled data + 0.01",
        }
        target = ref["local_target"]["auprc"]
        assert target["sites"] == 2 and target["worst"] == q["auto_minus_local_min"]
    # more sites: a bigger pooled model and broadcast
    assert runs[1]["bytes"]["model"] > runs[0]["bytes"]["model"]
    varies = {(g["varies"], g["from"], g["to"]) for g in saved["growth"]}
    assert varies == {("sites", 2, 3), ("rows_per_site", 30, 60)}
    text = (tmp_path / "scale.md").read_text()
    assert "training rows scored out of bag (`validation: oob`)" in text
    assert "| sites | rows/site | mode | wall (s) | schema | vote | election | train | pool" in text
    assert "| 3 | 30 | in-process |" in text and "(one process)" in text
    assert "Growth" in text
    assert "| sites | rows/site | trees sent per site | received per site (MB) |" in text
    assert "Distance to *pooled data*" in text and "| 3 | 30 | brier |" in text
    assert "- 2 sites x 60 rows: auprc >= pooled data - 0.01: " in text
    assert "| 2 | 60 | site-1 |" in text


def test_pooled_data_beside_local_and_auto(bench):
    metrics = {
        "a": {"local": {"auprc": 0.70, "brier": 0.20}, "auto": {"auprc": 0.76, "brier": 0.16}},
        "b": {"local": {"auprc": 0.60, "brier": 0.22}, "auto": {"auprc": 0.62, "brier": 0.21}},
        "c": {"local": {"auprc": 0.90}, "auto": {"auprc": 0.91}},  # not in the reference
    }
    pooled = {
        "a": {"auprc": 0.75, "brier": 0.15, "auc": float("nan")},
        "b": {"auprc": 0.64, "brier": 0.21},
    }
    q = bench.reference_quality(metrics, pooled)
    assert list(q["sites"]) == ["a", "b"]
    assert q["sites"]["a"]["auprc"] == {"local": 0.70, "auto": 0.76, "pooled_data": 0.75}
    assert "auc" not in q["sites"]["a"]  # undefined (NaN), or not scored by the job
    auprc, brier = q["summary"]["auprc"], q["summary"]["brier"]
    assert auprc["auto"] == [0.69, pytest.approx(0.0990, abs=1e-4)]
    assert auprc["auto_minus_pooled"][0] == pytest.approx(-0.005)
    assert auprc["worst_site"] == pytest.approx(-0.02) and auprc["sites"] == 2
    assert brier["worst_site"] == pytest.approx(0.01)  # lower is better: the largest gap
    assert q["checks"] == {
        "auprc >= local - 0.01 at every site": True,
        "auprc >= pooled data - 0.01": True,
        "brier <= pooled data + 0.01": True,
    }
    worse = bench.reference_quality(metrics, {s: {"auprc": 0.8, "brier": 0.1} for s in "ab"})
    assert worse["checks"] == {
        "auprc >= local - 0.01 at every site": True,
        "auprc >= pooled data - 0.01": False,
        "brier <= pooled data + 0.01": False,
    }
    assert bench.reference_markdown([{"sites": 2}]) == []  # results without pooled data
    text = "\n".join(
        bench.reference_markdown(
            [{"sites": 2, "rows_per_site": 50, "reference": {**q, "seconds": 1}}]
        )
    )
    assert (
        "| 2 | 50 | auprc | 0.6500 ± 0.0707 | 0.6900 ± 0.0990 | 0.6950 ± 0.0778 | -0.0050 |" in text
    )
    assert "| 2 | 50 | a | 0.7000 | 0.7600 | 0.7500 | 0.2000 | 0.1600 | 0.1500 |" in text


def test_site_trees_send_each_site_a_model_of_its_own(bench, tmp_path):
    out = bench.run(
        tmp_path,
        sites=[3],
        rows=60,
        trees=3,
        row_sweep=[],
        mode="in-process",
        evaluate_sample=2,
        tuning_rounds=2,
        site_trees=4,
    )
    (r,) = out["runs"]
    assert r["status"] == "finished" and r["site_trees"] == 4 and r["model_trees"] == 9
    assert r["site_tree_counts"] == {f"site-{i}": 4 for i in (1, 2, 3)}
    b = r["bytes"]
    assert b["broadcast"] == sum(b["received_per_site"].values()) < b["model"] * 3
    assert b["total"] == b["site_upload_total"] + b["broadcast"]
    assert "| 3 | 60 | 4 |" in (tmp_path / "scale.md").read_text()


def test_the_job_carries_the_validation_mode(bench, tmp_path):
    # the job's default (oob) unless told, whatever site_configs/job.yaml says
    configs = bench.make_job(tmp_path / "oob", 2, 30, 3)
    assert bench.JobConfig.load(configs / "job.yaml").validation == "oob"
    configs = bench.make_job(tmp_path / "holdout", 2, 30, 3, validation="holdout")
    assert bench.JobConfig.load(configs / "job.yaml").validation == "holdout"


def test_holdout_results_go_to_their_own_files(bench, tmp_path, capsys):
    bench.main(["--sites", "2", "--rows", "60", "--trees", "3", "--row-sweep", "",
                "--mode", "in-process", "--evaluate-sample", "2", "--tuning-rounds", "2",
                "--validation", "holdout", "--out", str(tmp_path)])  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scale_holdout.json", "scale_holdout.md"]
    saved = json.loads((tmp_path / "scale_holdout.json").read_text())
    assert saved["settings"]["validation"] == "holdout"
    (r,) = saved["runs"]
    assert r["validation"] == "holdout" and r["status"] == "finished"
    text = (tmp_path / "scale_holdout.md").read_text()
    assert "validation rows held out of training (`validation: holdout`)" in text
    assert text.strip() == capsys.readouterr().out.strip()


def test_the_row_sweep_runs_alone(bench):
    assert bench.plan([], 5000, [1000], 10) == [(10, 1000)]
    with pytest.raises(SystemExit):  # no run at all
        bench.main(["--sites", "", "--row-sweep", ""])
    with pytest.raises(SystemExit):
        bench.main(["--sites", "1,3"])


def _sites(pairs: dict) -> dict:
    """reference_quality's sites from {site: (local, auto, pooled)} AUPRC and Brier pairs."""
    return {
        site: {
            "local": {"auprc": auprc[0], "brier": brier[0]},
            "auto": {"auprc": auprc[1], "brier": brier[1]},
        }
        for site, (auprc, brier) in pairs.items()
    }


def test_auto_against_local_at_every_site(bench):
    pooled_data = importlib.import_module("benchmarks.pooled_data")
    name = "auprc >= local - 0.01 at every site"
    # within 0.01 everywhere (0.01 below exactly counts as within)
    metrics = _sites({"a": ((0.70, 0.69), (0.20, 0.19)), "b": ((0.60, 0.65), (0.22, 0.21))})
    pooled = {"a": {"auprc": 0.69, "brier": 0.19}, "b": {"auprc": 0.65, "brier": 0.21}}
    q = bench.reference_quality(metrics, pooled)
    assert q["local_target"]["auprc"] == {
        "tolerance": 0.01,
        "sites": 2,
        "fails": [],
        "worst": -0.01,
        "worst_site": "a",
    }
    assert q["checks"] == {
        name: True,
        "auprc >= pooled data - 0.01": True,
        "brier <= pooled data + 0.01": True,
    }
    # two sites of three more than 0.01 below local; the mean still near pooled data
    metrics = _sites(
        {
            "a": ((0.70, 0.68), (0.20, 0.20)),
            "b": ((0.60, 0.55), (0.22, 0.22)),
            "c": ((0.50, 0.58), (0.25, 0.21)),
        }
    )
    pooled = {s: {"auprc": 0.60, "brier": 0.19} for s in "abc"}
    q = bench.reference_quality(metrics, pooled)
    target = q["local_target"]["auprc"]
    assert target["fails"] == ["a", "b"] and target["sites"] == 3
    assert target["worst"] == pytest.approx(-0.05) and target["worst_site"] == "b"
    assert q["checks"][name] is False
    assert q["checks"]["auprc >= pooled data - 0.01"]  # mean auto 0.6033
    assert not q["checks"]["brier <= pooled data + 0.01"]  # mean auto 0.21 against 0.19
    # lower is better: the largest difference is the worst
    brier = pooled_data.local_target(q["sites"], "brier", 0.01)
    assert brier["fails"] == [] and brier["worst"] == 0.0 and brier["worst_site"] == "a"
    assert pooled_data.local_target({"a": {}}, "auprc", 0.01) is None
    # the report: each target yes/NO with its numbers, and the per-site differences
    run = {"sites": 3, "rows_per_site": 1000, "reference": {**q, "seconds": 1}}
    text = "\n".join(bench.reference_markdown([run]))
    assert (
        f"- 3 sites x 1000 rows: {name}: NO (2 of 3 sites fail; worst auto − local -0.0500, b)"
        in text
    )
    assert (
        "- 3 sites x 1000 rows: auprc >= pooled data - 0.01: yes (auto 0.6033, pooled data "
        "0.6000: +0.0033)" in text
    )
    assert "- 3 sites x 1000 rows: brier <= pooled data + 0.01: NO (auto 0.2100," in text
    assert (
        "| 3 | 1000 | b | 0.6000 | 0.5500 | 0.6000 | 0.2200 | 0.2200 | 0.1900 | -0.0500 |" in text
    )
