"""Tests for fedforest.experiments.figures on a small synthetic results frame."""

from __future__ import annotations

import logging

import pandas as pd
import pytest

from fedforest.experiments.figures import (
    plot_critical_difference,
    plot_gain_heatmap,
    plot_metric_vs_jaccard,
)

from .report_frames import assert_png, make_tidy


@pytest.fixture(scope="module")
def tidy() -> pd.DataFrame:
    return make_tidy()


# --------------------------------------------------------------------------- plots


def test_plots_are_png_files(tidy, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="fedforest.experiments.reports"):
        paths = [
            plot_metric_vs_jaccard(tidy, tmp_path, "auprc"),
            plot_gain_heatmap(tidy, tmp_path, "auc"),
            plot_critical_difference(tidy, tmp_path, "auprc"),
        ]
    assert [p.name for p in paths] == [
        "synth_auprc_vs_jaccard.png",
        "synth_auc_gain.png",
        "cd_auprc.png",
    ]
    for p in paths:
        assert_png(p)
        assert f"wrote {p}" in caplog.text


def test_plot_metric_vs_jaccard_skips_absent_methods(tidy, tmp_path):
    path = plot_metric_vs_jaccard(tidy, tmp_path, methods=("mp", "ipr"))
    assert_png(path)
    with pytest.raises(ValueError, match="none of the methods"):
        plot_metric_vs_jaccard(tidy, tmp_path, methods=("ipr",))


def test_critical_difference_needs_two_methods(tmp_path):
    with pytest.raises(ValueError, match="at least 2 methods"):
        plot_critical_difference(make_tidy(methods=("mp",)), tmp_path)


# --------------------------------------------------------------------------- errors


def test_unknown_dataset(tidy, tmp_path):
    with pytest.raises(ValueError, match="dataset 'nope' is not in the results"):
        plot_gain_heatmap(tidy, tmp_path, dataset="nope")
