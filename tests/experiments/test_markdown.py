"""Tests for fedforest.experiments.markdown on a small synthetic results frame."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from report_frames import assert_png, make_calibration, make_tidy

from fedforest.experiments.markdown import write_report
from fedforest.experiments.statistics import summary_table


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
