"""Tests for fedforest.experiments.statistics on a small synthetic results frame."""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd
import pytest

from fedforest.experiments.markdown import write_report
from fedforest.experiments.statistics import (
    COLUMNS,
    METHOD_ORDER,
    _cliques,
    average_ranks,
    nemenyi_cd,
    per_repetition,
    relative_gain,
    summary_table,
    summary_tables,
)

from .report_frames import BASE, REP_OFFSET, SITE_OFFSET, expected, make_tidy


@pytest.fixture(scope="module")
def tidy() -> pd.DataFrame:
    return make_tidy()


# --------------------------------------------------------------------------- tables


def test_per_repetition_averages_over_sites(tidy):
    rep = per_repetition(tidy)
    assert list(rep.columns) == [
        "dataset",
        "n_sites",
        "jaccard",
        "rep",
        "method",
        "metric",
        "value",
    ]
    assert len(rep) == len(tidy) // len(SITE_OFFSET)
    row = rep.query("n_sites == 4 and jaccard == 0.5 and rep == 3 and method == 'pr'")
    row = row[row["metric"] == "auprc"]
    sites = tidy.query("n_sites == 4 and jaccard == 0.5 and rep == 3 and method == 'pr'")
    sites = sites[sites["metric"] == "auprc"]
    assert len(sites) == 3
    assert row["value"].item() == pytest.approx(sites["value"].mean())
    # by construction: 0.72 + 0.05 - 0.04 + 0.001
    assert row["value"].item() == pytest.approx(0.731)


def test_summary_table_shape_order_and_values(tidy):
    table = summary_table(tidy, "auprc")
    assert list(table.index) == [m for m in METHOD_ORDER if m in BASE]
    assert table.index[0] == "intersection" and table.index[-1] == "ss"
    assert table.columns.names == ["jaccard", "n_sites"]
    assert list(table.columns) == [(0.3, 2), (0.3, 4), (0.7, 2), (0.7, 4)]
    # mean over reps of site means: 0.80 + 0.1 * 0.3 - 0.01 * 2 = 0.81
    assert table.loc["mp", (0.3, 2)] == pytest.approx(0.81)
    assert table.loc["intersection", (0.7, 4)] == pytest.approx(0.60 + 0.07 - 0.04)
    # the best method wins every column, the baseline loses every column
    assert (table.idxmax() == "mp").all()
    assert (table.idxmin() == "intersection").all()


def test_every_experiment_method_has_a_name_and_a_place():
    from fedforest.experiments.figures import _method_colors
    from fedforest.experiments.statistics import DISPLAY_NAMES, _order_methods, display_name
    from fedforest.vocabulary import EXPERIMENT_METHODS

    assert METHOD_ORDER == EXPERIMENT_METHODS
    assert set(DISPLAY_NAMES) == set(EXPERIMENT_METHODS)
    names = [display_name(m) for m in EXPERIMENT_METHODS]
    assert len(set(names)) == len(names)  # no two methods look alike in a table
    assert [display_name(m) for m in ("node", "wmp", "mp")] == [
        "Stop at the node",
        "Weighted marginal prediction",
        "Marginal prediction",
    ]  # spelled out, as fedforest.vocabulary.STRATEGY_NAMES
    assert _order_methods(["auto", "custom", "wmp", "mp", "node"]) == [
        "mp",
        "node",
        "wmp",
        "auto",
        "custom",
    ]
    colors = _method_colors(list(EXPERIMENT_METHODS))
    assert len(set(colors.values())) == len(EXPERIMENT_METHODS)  # a colour of its own each


def test_summary_table_std_and_all_jaccards(tidy):
    sd = summary_table(tidy, "auc", jaccards=None, std=True)
    assert sd.shape == (6, 6)
    assert sd.loc["mp", (0.5, 2)] == pytest.approx(np.std(REP_OFFSET, ddof=1))


def test_summary_table_nearest_jaccard(caplog):
    df = make_tidy(jaccards=(0.25, 0.5, 0.75))
    with caplog.at_level(logging.WARNING, logger="fedforest.experiments.reports"):
        table = summary_table(df, "auprc", jaccards=(0.3, 0.7))
    assert sorted({j for j, _ in table.columns}) == [0.25, 0.75]
    assert "nearest" in caplog.text
    assert table.loc["mp", (0.25, 2)] == pytest.approx(expected("mp", 2, 0.25))


def test_summary_tables_one_per_dataset():
    df = pd.concat([make_tidy("A"), make_tidy("B", methods=("intersection", "mp"))])
    tables = summary_tables(df, "auprc")
    assert sorted(tables) == ["A", "B"]
    assert list(tables["B"].index) == ["intersection", "mp"]
    with pytest.raises(ValueError, match="2 datasets"):
        summary_table(df, "auprc")


def test_relative_gain_by_hand(tidy):
    gains = relative_gain(tidy, "auprc")
    assert "intersection" not in gains.index
    assert gains.index[0] == "local" and gains.index[-1] == "ss"
    assert gains.columns.names == ["n_sites", "jaccard"]
    assert gains.shape == (5, 6)
    mp, base = expected("mp", 2, 0.3), expected("intersection", 2, 0.3)
    assert gains.loc["mp", (2, 0.3)] == pytest.approx((mp - base) / base)
    assert gains.loc["mp", (2, 0.3)] == pytest.approx(0.2 / 0.61)
    assert (gains > 0).all().all()


def test_relative_gain_zero_baseline_gives_nan():
    df = make_tidy(n_sites=(2,), jaccards=(0.5,), methods=("intersection", "mp"), metrics=("mcc",))
    df.loc[df["method"] == "intersection", "value"] = 0.0
    gains = relative_gain(df, "mcc")
    assert np.isnan(gains.loc["mp", (2, 0.5)])


def test_relative_gain_missing_baseline():
    df = make_tidy(methods=("mp", "local"))
    with pytest.raises(ValueError, match="baseline 'intersection'"):
        relative_gain(df, "auprc")


# --------------------------------------------------------------------------- ranks


def test_average_ranks_and_friedman(tidy):
    ranks, stat, pvalue, cd = average_ranks(tidy, "auprc")
    assert ranks.index[0] == "mp" and ranks.iloc[0] == pytest.approx(1.0)
    assert ranks.index[-1] == "intersection" and ranks.iloc[-1] == pytest.approx(6.0)
    assert list(ranks.index) == ["mp", "ss", "pr", "fpv", "local", "intersection"]
    assert stat > 100
    assert pvalue < 1e-10
    n_blocks = 2 * 3 * 5  # n_sites x jaccard x rep
    assert cd == pytest.approx(2.850 * math.sqrt(6 * 7 / (6 * n_blocks)))


def test_average_ranks_ties_get_average_rank():
    df = make_tidy(methods=("intersection", "local", "mp"), metrics=("auc",))
    df.loc[df["method"] == "local", "value"] = df.loc[df["method"] == "mp", "value"].to_numpy()
    ranks, *_ = average_ranks(df, "auc")
    assert ranks["mp"] == pytest.approx(1.5) and ranks["local"] == pytest.approx(1.5)
    assert ranks["intersection"] == pytest.approx(3.0)


def test_nemenyi_cd_formula():
    q = [1.960, 2.343, 2.569, 2.728, 2.850, 2.949, 3.031, 3.102, 3.164]
    for k, q_k in zip(range(2, 11), q, strict=True):
        assert nemenyi_cd(k, 40) == pytest.approx(q_k * math.sqrt(k * (k + 1) / 240))
    assert nemenyi_cd(11, 40) == pytest.approx(3.2187 * math.sqrt(11 * 12 / 240), rel=1e-3)
    assert math.isnan(nemenyi_cd(1, 40))


def test_cliques():
    assert _cliques([1.0, 1.5, 3.0, 3.2], 1.0) == [(0, 1), (2, 3)]
    assert _cliques([1.0, 1.5, 2.2, 3.0], 1.3) == [(0, 2), (2, 3)]
    assert _cliques([1.0, 1.5, 2.2, 2.7], 1.3) == [(0, 2), (1, 3)]
    assert _cliques([1.0, 3.0], float("nan")) == []


def test_fewer_than_three_methods_give_nan_friedman():
    ranks, stat, pvalue, cd = average_ranks(make_tidy(methods=("intersection", "mp")))
    assert list(ranks.index) == ["mp", "intersection"]
    assert math.isnan(stat) and math.isnan(pvalue)
    assert cd == pytest.approx(1.960 * math.sqrt(2 * 3 / (6 * 30)))
    ranks, stat, pvalue, cd = average_ranks(make_tidy(methods=("mp",)))
    assert ranks.to_dict() == {"mp": 1.0}
    assert math.isnan(stat) and math.isnan(pvalue) and math.isnan(cd)


def test_nan_values_are_skipped(tidy):
    df = tidy.copy()
    mp_auprc = (df["method"] == "mp") & (df["metric"] == "auprc")
    first = mp_auprc & (df["n_sites"] == 2) & (df["jaccard"] == 0.3) & (df["rep"] == 0)
    df.loc[first & (df["site"] == "s1"), "value"] = np.nan  # one site of one repetition
    whole = (df["method"] == "fpv") & (df["rep"] == 4) & (df["jaccard"] == 0.5)
    df.loc[whole, "value"] = np.nan  # every site: that repetition's mean is NaN
    rep = per_repetition(df)
    got = rep.query("method == 'mp' and n_sites == 2 and jaccard == 0.3 and rep == 0")
    got = got[got["metric"] == "auprc"]["value"].item()
    assert got == pytest.approx(expected("mp", 2, 0.3) - 0.002 + 0.005)  # mean of s2, s3
    ranks, stat, pvalue, cd = average_ranks(df, "auprc")
    assert ranks.index[0] == "mp" and pvalue < 1e-10
    assert cd == pytest.approx(nemenyi_cd(6, 28))  # 2 blocks dropped
    assert np.isfinite(summary_table(df, "auprc").to_numpy()).all()


def test_jaccard_float_noise_is_one_scenario(tidy):
    df = tidy.copy()
    df.loc[df["site"] == "s1", "jaccard"] += 1e-15
    assert len(per_repetition(df)) == len(per_repetition(tidy))


# --------------------------------------------------------------------------- errors


def test_empty_frame():
    with pytest.raises(ValueError, match="empty"):
        summary_table(pd.DataFrame(columns=list(COLUMNS)))


def test_missing_columns_are_named(tidy):
    with pytest.raises(ValueError, match=r"missing columns: \['site', 'value'\]"):
        per_repetition(tidy.drop(columns=["site", "value"]))


def test_unknown_and_absent_metric(tidy, tmp_path):
    with pytest.raises(ValueError, match="unknown metric 'f1'"):
        summary_table(tidy, "f1")
    with pytest.raises(ValueError, match="'mcc' is not in the results"):
        average_ranks(tidy, "mcc")
    with pytest.raises(ValueError, match="'mcc' is not in the results"):
        write_report(tidy, tmp_path, metrics=("auprc", "mcc"))


def test_all_nan_metric_cannot_be_ranked(tidy):
    df = tidy.copy()
    df.loc[df["metric"] == "auc", "value"] = np.nan
    with pytest.raises(ValueError, match="cannot rank"):
        average_ranks(df, "auc")


# --------------------------------------------------------------------------- lower is better


@pytest.fixture(scope="module")
def with_brier(tidy) -> pd.DataFrame:
    """The synthetic frame plus a Brier score that mirrors AUPRC: MP lowest (best)."""
    brier = tidy[tidy["metric"] == "auprc"].assign(metric="brier")
    brier["value"] = 1.0 - brier["value"]
    return pd.concat([tidy, brier], ignore_index=True)


def test_lower_is_better_metrics_rank_the_lowest_score_first(with_brier):
    from fedforest.experiments.statistics import _rank_test

    auprc = average_ranks(with_brier, "auprc")
    brier = average_ranks(with_brier, "brier")
    assert list(brier.ranks.index) == list(auprc.ranks.index)  # the same order, MP first
    assert brier.ranks.index[0] == "mp" and brier.ranks["mp"] == 1.0
    assert brier.ranks["intersection"] == len(BASE)
    assert brier.statistic == pytest.approx(auprc.statistic)
    with pytest.raises(ValueError, match="rank one metric at a time"):
        _rank_test(with_brier[with_brier["metric"].isin(["auprc", "brier"])])


def test_a_lower_is_better_gain_is_the_relative_reduction(with_brier):
    gains = relative_gain(with_brier, "brier")
    base = 1 - expected("intersection", 2, 0.3)
    mp = 1 - expected("mp", 2, 0.3)
    assert gains.loc["mp", (2, 0.3)] == pytest.approx((base - mp) / base)
    assert (gains.to_numpy() > 0).all()  # every method beats intersection, as with AUPRC
    assert (relative_gain(with_brier, "auprc").to_numpy() > 0).all()


def test_best_value_and_lower_is_better():
    from fedforest.experiments.statistics import best_value, lower_is_better
    from fedforest.vocabulary import LOWER_IS_BETTER, RANKING_METRICS

    assert all(lower_is_better(m) for m in LOWER_IS_BETTER)
    assert not any(lower_is_better(m) for m in RANKING_METRICS)
    assert best_value([0.3, np.nan, 0.1], "log_loss") == 0.1
    assert best_value([0.3, np.nan, 0.1], "mcc") == 0.3
    assert np.isnan(best_value([np.nan], "ece"))


def test_the_report_marks_the_lowest_brier_score_best(with_brier, tmp_path):
    path = write_report(with_brier, tmp_path / "out", metrics=("auprc", "brier"))
    text = path.read_text(encoding="utf-8")
    assert "Lower is better for Brier score" in text
    brier = text.split("## Brier score")[1]
    # MP at 2 peers, J = 0.3: 1 - 0.81 = 0.190, the lowest, in bold; Intersection's is not
    assert "| Marginal prediction | **0.190** |" in brier
    assert "| Intersection forest | 0.390 |" in brier
    assert "+32.8%" in text and "+51.3%" in brier  # (0.39 - 0.19) / 0.39
    ranks = brier.split("| Rank | Method | Average rank |")[1]
    assert ranks.split("\n")[2].startswith("| 1 | Marginal prediction | 1.00 |")


# --------------------------------------------------------------------------- regression metrics


@pytest.fixture(scope="module")
def with_rmse(tidy) -> pd.DataFrame:
    """The synthetic frame plus an RMSE and an R² that mirror AUPRC: MP lowest RMSE (best)."""
    auprc = tidy[tidy["metric"] == "auprc"]
    rmse = auprc.assign(metric="rmse", value=40.0 * (1.0 - auprc["value"]))
    r2 = auprc.assign(metric="r2")
    return pd.concat([tidy, rmse, r2], ignore_index=True)


def test_rmse_ranks_the_lowest_error_first_with_friedman_and_nemenyi(with_rmse):
    from fedforest.vocabulary import LOWER_IS_BETTER, REGRESSION_METRICS

    assert set(REGRESSION_METRICS) - set(LOWER_IS_BETTER) == {"r2"}  # r2: higher is better
    auprc = average_ranks(with_rmse, "auprc")
    rmse = average_ranks(with_rmse, "rmse")
    assert rmse.ranks.index[0] == "mp" and rmse.ranks["mp"] == 1.0
    assert rmse.ranks["intersection"] == len(BASE)
    assert list(rmse.ranks.index) == list(auprc.ranks.index)
    assert rmse.statistic == pytest.approx(auprc.statistic) and rmse.pvalue < 1e-6
    assert rmse.cd == pytest.approx(nemenyi_cd(len(BASE), 30))
    r2 = average_ranks(with_rmse, "r2")  # higher is better, as AUPRC
    assert list(r2.ranks.index) == list(auprc.ranks.index)
    gains = relative_gain(with_rmse, "rmse")
    base, mp = 40 * (1 - expected("intersection", 2, 0.3)), 40 * (1 - expected("mp", 2, 0.3))
    assert gains.loc["mp", (2, 0.3)] == pytest.approx((base - mp) / base)  # the reduction
    table = summary_table(with_rmse, "rmse")
    assert table.loc["mp", (0.3, 2)] == pytest.approx(mp)


def test_the_report_shows_rmse_lowest_best(with_rmse, tmp_path):
    path = write_report(with_rmse, tmp_path / "out", metrics=("rmse", "r2"))
    text = path.read_text(encoding="utf-8")
    assert "Lower is better for RMSE" in text and "## RMSE" in text and "## R²" in text
    rmse = text.split("## RMSE")[1].split("## R²")[0]
    assert "| Marginal prediction | **7.600** |" in rmse  # 40 * (1 - 0.81), the lowest, in bold
    ranks = rmse.split("| Rank | Method | Average rank |")[1]
    assert ranks.split("\n")[2].startswith("| 1 | Marginal prediction | 1.00 |")
    assert "**Friedman test** over 30 blocks" in rmse and "**Nemenyi CD**" in rmse
    for name in ("cd_rmse.png", "synth_rmse_vs_jaccard.png", "synth_methods_by_sites.png"):
        assert (tmp_path / "out" / name).is_file(), name
