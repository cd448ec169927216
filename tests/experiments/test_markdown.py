"""Tests for fedforest.experiments.markdown on a small synthetic results frame."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from fedforest.experiments.markdown import write_report
from fedforest.experiments.statistics import summary_table

from .report_frames import assert_png, make_calibration, make_tidy


@pytest.fixture(scope="module")
def tidy() -> pd.DataFrame:
    return make_tidy()


# --------------------------------------------------------------------------- report


def test_write_report(tidy, tmp_path):
    path = write_report(tidy, tmp_path / "out", metrics=("auprc", "auc"), title="Synthetic")
    assert path == tmp_path / "out" / "report.md"
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# Synthetic")
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert {"cd_auprc.png", "synth_auprc_vs_jaccard.png", "synth_auprc_gain.png"} <= set(links)
    assert "cd_auc.png" in links
    for link in links:
        assert_png(path.parent / link)
    assert "| Method | J=0.3, 2 peers | J=0.3, 4 peers | J=0.7, 2 peers | J=0.7, 4 peers |" in text
    assert "| Marginal prediction | **0.810** |" in text
    assert "+32.8%" in text  # MP over Intersection at 2 peers, J = 0.3: 0.2 / 0.61
    assert "**Friedman test** over 30 blocks" in text
    assert "**Nemenyi CD**" in text
    for metric in ("auprc", "auc"):
        csv = tmp_path / "out" / f"summary_synth_{metric}.csv"
        back = pd.read_csv(csv, header=[0, 1], index_col=0)
        assert back.shape == (6, 4)
        assert (tmp_path / "out" / f"summary_synth_{metric}_std.csv").exists()


def test_write_report_degenerate_inputs(tmp_path):
    # a single method, no baseline, NaN scores and a scenario missing one Jaccard level
    df = make_tidy(methods=("mp",), metrics=("auprc",))
    df.loc[df.index[:7], "value"] = np.nan
    df = df[~((df["n_sites"] == 4) & (df["jaccard"] == 0.7))]
    path = write_report(df, tmp_path)
    text = path.read_text(encoding="utf-8")
    assert "Friedman test" in text and "not computed" in text
    assert "no critical difference diagram" in text
    assert "no relative gains" in text
    assert "synth_auprc_vs_jaccard.png" in text
    table = summary_table(df, "auprc")
    assert np.isnan(table.loc["mp", (0.7, 4)])
    assert np.isfinite(table.loc["mp", (0.3, 2)])


def test_write_report_draws_reliability_diagrams_from_calibration_csv(tmp_path):
    tidy = pd.concat([make_tidy(), make_tidy("other", metrics=("brier",))])
    make_calibration(datasets=("synth", "other")).to_csv(tmp_path / "calibration.csv", index=False)
    path = write_report(tidy, tmp_path, metrics=("auprc",))
    text = path.read_text(encoding="utf-8")
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    for name in (
        "synth_reliability.png",
        "other_reliability.png",
        "synth_methods_by_sites.png",
        "other_methods_by_sites.png",
    ):
        assert name in links
    for link in links:
        assert_png(tmp_path / link)
    assert (
        "## Calibration" in text and "## AUC and Brier score by method and number of sites" in text
    )


def test_write_report_without_calibration_csv_or_auc_draws_neither(tmp_path):
    text = write_report(make_tidy(metrics=("auprc",)), tmp_path).read_text(encoding="utf-8")
    assert "reliability" not in text and "methods_by_sites" not in text
    assert not list(tmp_path.glob("*_reliability.png"))


# --------------------------------------------------------------------------- small samples


def test_write_report_counts_test_rows_and_warns_of_small_sites(tmp_path):
    from fedforest.experiments.runner import load_table, run_repetition

    mix = load_table("S-500-Mix")  # 500 rows, 30% test rows: ~50 per site at 3 sites, ~15 at 10
    rows = [
        r
        for n_sites in (3, 10)
        for r in run_repetition(mix, n_sites, 0.5, 0, ["mp", "local"], ["auprc"], n_estimators=5)
    ]
    tidy = pd.DataFrame(rows)
    counts = tidy.groupby(["n_sites", "site"])[["test_rows", "events"]].first()
    assert (counts["events"] <= counts["test_rows"]).all() and (counts["events"] > 0).all()
    assert counts.loc[10, "test_rows"].max() < 50  # ten sites of a 500-row table: small sites
    text = write_report(tidy, tmp_path / "out", metrics=("auprc",)).read_text(encoding="utf-8")
    section = text.split("## Test rows per site", 1)[1]
    ten = counts.loc[10]
    assert (
        f"| S-500-Mix | 10 | 0.5 | {ten['test_rows'].min()}–{ten['test_rows'].max()} | "
        f"{ten['events'].min()}–{ten['events'].max()} | 10 of 10 |" in section
    )
    assert "scenarios have sites with fewer than 50 test rows or 10 events" in section


def test_write_report_says_when_results_hold_no_counts(tidy, tmp_path):
    assert "test_rows" not in tidy.columns  # results written before the runner counted rows
    text = write_report(tidy, tmp_path / "out").read_text(encoding="utf-8")
    assert "These results do not record the sites' test rows and events." in text
