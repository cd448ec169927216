"""benchmarks/bench_scale_seeds.py: the job over seeds, on tiny settings, in process."""

from __future__ import annotations

import doctest
import importlib
import json
import math

import pytest

from benchmarks import harness


@pytest.fixture(scope="module")
def bench():
    return importlib.import_module("benchmarks.bench_scale_seeds")


def _site(local: float, auto: float) -> dict:
    return {
        "auprc": {"local": local, "auto": auto, "pooled_data": 0.6},
        "brier": {"local": 0.2, "auto": 0.19, "pooled_data": 0.21},
    }


def test_the_summary_over_seeds(bench):
    runs = [
        {"seed": 0, "features_kept": 5, "sites": {"a": _site(0.70, 0.65), "b": _site(0.6, 0.62)}},
        {"seed": 1, "features_kept": 6, "sites": {"a": _site(0.60, 0.61), "b": _site(0.5, 0.5)}},
    ]
    s = bench.summarise(runs)
    diffs = [-0.05, 0.02, 0.01, 0.0]
    assert s["auto_minus_local"]["mean"] == round(sum(diffs) / 4, 4)
    seed_means = [-0.015, 0.005]  # each seed's mean over its sites is one draw
    se = abs(seed_means[0] - seed_means[1]) / math.sqrt(2) / math.sqrt(2)
    assert s["auto_minus_local"]["se_over_seeds"] == round(se, 4)
    assert s["below_local"] == {"site_seeds": 1, "of": 4, "seeds_with_a_miss": 1}
    first, second = s["per_seed"]
    assert first["below_local"] == ["a"] and first["worst_site"] == "a"
    assert first["worst"] == pytest.approx(-0.05)
    assert second["below_local"] == [] and second["features_kept"] == 6
    assert first["auprc_auto"] == pytest.approx(0.635) and first["brier_pooled_data"] == 0.21
    result = doctest.testmod(bench)
    assert result.failed == 0 and result.attempted >= 2


def test_a_tiny_run_writes_the_report_it_prints(bench, tmp_path, capsys):
    bench.main(["--sites", "3", "--rows", "60", "--trees", "3", "--seeds", "0,1",
                "--out", str(tmp_path)])  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scale_seeds.json", "scale_seeds.md"]
    saved = harness.read_results(tmp_path / "scale_seeds.json")
    assert [r["seed"] for r in saved["runs"]] == [0, 1]
    for run in saved["runs"]:
        assert len(run["sites"]) == 3 and run["features_kept"] >= 1
        for site in run["sites"].values():
            assert set(site) == set(bench.METRICS)
            assert all(0 <= v <= 1 for m in site.values() for v in m.values())
    assert saved["below_local"]["of"] == 6
    text = (tmp_path / "scale_seeds.md").read_text()
    assert text.strip() == capsys.readouterr().out.strip()
    assert text == bench.markdown(json.loads((tmp_path / "scale_seeds.json").read_text()))
    assert "| 0 |" in text and "| 1 |" in text and "## Over the seeds" in text


def test_no_seed_is_refused(bench, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--seeds", ""])
    assert "--seeds is empty" in capsys.readouterr().err
