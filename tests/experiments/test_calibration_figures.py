"""Tests for fedforest.experiments.calibration_figures: reliability diagrams and grids."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from fedforest.experiments.calibration_figures import (
    check_bins,
    plot_reliability,
    plot_strategy_grid,
    pool_bins,
    read_calibration,
)
from fedforest.metrics import calibration_bins

from .report_frames import assert_png, make_calibration


def random_bins(seed: int, rows: int = 200, classes=(0, 1)) -> dict:
    rng = np.random.default_rng(seed)
    proba = rng.dirichlet(np.ones(len(classes)), rows)
    y = np.asarray(classes)[rng.integers(0, len(classes), rows)]
    return calibration_bins(y, proba, list(classes))


# --------------------------------------------------------------------------- reliability


def test_reliability_diagram_is_a_png(tmp_path, caplog):
    curves = {m: random_bins(i) for i, m in enumerate(("auto", "mp", "local", "intersection"))}
    with caplog.at_level(logging.INFO, logger="fedforest.experiments.reports"):
        path = plot_reliability(
            curves, tmp_path, "reliability-site-1.png", labels={"auto": "Auto → MP + isotonic"}
        )
    assert path == tmp_path / "reliability-site-1.png"
    assert_png(path)
    assert f"wrote {path}" in caplog.text


def test_reliability_diagram_of_the_top_label_and_an_empty_curve(tmp_path, caplog):
    empty = {"target": "top-label", "count": [0] * 10, "predicted": [None] * 10}
    empty["observed"] = [None] * 10
    curves = {"mp": random_bins(1, classes=(0, 1, 2)), "local": empty}
    with caplog.at_level(logging.WARNING, logger="fedforest.experiments.reports"):
        assert_png(plot_reliability(curves, tmp_path, "r.png", title="three classes"))
    assert "'local' has fewer than 10 rows; not drawn" in caplog.text


def test_reliability_diagram_refuses_what_it_cannot_draw(tmp_path):
    with pytest.raises(ValueError, match="no curve to draw"):
        plot_reliability({}, tmp_path, "r.png")
    with pytest.raises(ValueError, match="same target"):
        plot_reliability(
            {"mp": random_bins(1), "local": random_bins(2, classes=(0, 1, 2))}, tmp_path, "r.png"
        )
    empty = {"target": "1", "count": [0, 0], "predicted": [None, None], "observed": [None] * 2}
    with pytest.raises(ValueError, match="has 10 rows or more: nothing to draw"):
        plot_reliability({"mp": empty}, tmp_path, "r.png")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda b: b.pop("count"), "bins have no 'count'"),
        (lambda b: b.update(count=[1, -1]), "'count' is"),
        (lambda b: b.update(predicted=[0.5]), "expected a list of 10 values"),
        (lambda b: b["observed"].__setitem__(3, 1.5), "'observed' holds 1.5"),
        (lambda b: b["predicted"].__setitem__(3, "x"), "'predicted' holds 'x'"),
        (lambda b: b.update(target=1), "'target' is 1"),
    ],
)
def test_check_bins_names_where_and_the_key(change, message):
    bins = random_bins(0)
    change(bins)
    with pytest.raises(ValueError, match=f"site-1 mp: .*{message}"):
        check_bins(bins, "site-1 mp")
    with pytest.raises(ValueError, match="expected a dict of bins"):
        check_bins([1, 2], "here")


# --------------------------------------------------------------------------- grid


def grid_frame() -> pd.DataFrame:
    rows = []
    for i, strategy in enumerate(("auto", "mp", "local", "intersection")):
        for j, site in enumerate(("site-1", "site-2", "site-3")):
            rows.append((strategy, site, "auc", 0.9 - 0.05 * i - 0.01 * j))
            rows.append((strategy, site, "brier", 0.1 + 0.03 * i + 0.01 * j))
    frame = pd.DataFrame(rows, columns=["strategy", "site", "metric", "value"])
    frame.loc[5, "value"] = np.nan  # a missing score is an n/a cell
    return frame


def test_strategy_grid_is_a_png(tmp_path):
    path = plot_strategy_grid(grid_frame(), tmp_path, "strategies-by-site.png", title="demo")
    assert path == tmp_path / "strategies-by-site.png"
    assert_png(path)


def _bright_rows_above_dark_rows(path) -> bool:
    """Whether the heatmap's yellow (viridis' bright end) is drawn above its purple."""
    from matplotlib.image import imread

    image = imread(path)[:, : int(imread(path).shape[1] * 0.6), :3]  # the heatmap, not the bar
    yellow = (image[..., 0] > 0.85) & (image[..., 1] > 0.8) & (image[..., 2] < 0.35)
    purple = (image[..., 0] < 0.35) & (image[..., 1] < 0.15) & (image[..., 2] > 0.25)
    assert yellow.any() and purple.any()
    return np.nonzero(yellow)[0].mean() < np.nonzero(purple)[0].mean()


@pytest.mark.parametrize("metric", ["auc", "brier"])
def test_the_better_end_is_bright_for_higher_and_lower_is_better_metrics(tmp_path, metric):
    # the first row is the better one for both metrics: it must be the bright one
    frame = pd.DataFrame(
        {
            "strategy": ["good", "bad"],
            "site": "s",
            "metric": metric,
            "value": [0.9, 0.6] if metric == "auc" else [0.1, 0.3],
        }
    )
    path = plot_strategy_grid(frame, tmp_path, f"{metric}.png", metrics=(metric,))
    assert _bright_rows_above_dark_rows(path)


def test_strategy_grid_refuses_a_frame_without_values(tmp_path):
    with pytest.raises(ValueError, match="no value of"):
        plot_strategy_grid(grid_frame(), tmp_path, "g.png", metrics=("ece",))
    with pytest.raises(ValueError, match="no column"):
        plot_strategy_grid(grid_frame().drop(columns="site"), tmp_path, "g.png")


# --------------------------------------------------------------------------- calibration.csv


def test_pooled_bins_are_the_bins_of_all_rows_together():
    # pooling two sites' bins by count-weighted means gives the bins of their rows together
    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, 300)
    p = rng.uniform(0, 1, 300)
    proba = np.c_[1 - p, p]
    rows = []
    for site, part in (("a", slice(0, 120)), ("b", slice(120, 300))):
        bins = calibration_bins(y[part], proba[part], [0, 1])
        for b, c in enumerate(bins["count"]):
            if c:
                rows.append(("mp", site, b, c, bins["predicted"][b], bins["observed"][b]))
    table = pd.DataFrame(rows, columns=["method", "site", "bin", "count", "predicted", "observed"])
    pooled = pool_bins(table)["mp"]
    whole = calibration_bins(y, proba, [0, 1])
    assert pooled["count"] == whole["count"]
    np.testing.assert_allclose(pooled["predicted"], whole["predicted"])
    np.testing.assert_allclose(pooled["observed"], whole["observed"])


def test_read_calibration_and_pool_by_method(tmp_path):
    path = tmp_path / "calibration.csv"
    make_calibration().to_csv(path, index=False)
    table = read_calibration(path)
    pooled = pool_bins(table)
    assert list(pooled) == ["intersection", "local", "mp"]  # METHOD_ORDER
    assert sum(pooled["mp"]["count"]) == 2 * 2 * 120 + 2 * 4 * 120  # (2 + 4 sites) x 2 reps
    assert_png(plot_reliability(pooled, tmp_path, "synth_reliability.png"))


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("observed", 1.2, "column 'observed' has 1.2"),
        ("count", "many", "column 'count' has 'many'"),
        ("bin", 1.5, "column 'bin' has 1.5"),
    ],
)
def test_read_calibration_refuses_a_bad_table_naming_the_file(tmp_path, column, value, message):
    table = make_calibration(n_sites=(2,), reps=1)
    table[column] = table[column].astype(object)
    table.loc[3, column] = value
    path = tmp_path / "calibration.csv"
    table.to_csv(path, index=False)
    with pytest.raises(ValueError, match=f"{path}: {message} \\(row 5\\)"):
        read_calibration(path)
    table.drop(columns="observed").to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"columns \['observed'\] are missing"):
        read_calibration(path)


# --------------------------------------------------------------------------- sparse bins


def test_sparse_bins_are_merged_with_their_neighbours_exactly():
    from fedforest.experiments.calibration_figures import MIN_BIN_ROWS, merge_sparse_bins
    from fedforest.intervals import wilson_interval

    rng = np.random.default_rng(2)
    p = rng.beta(0.7, 3, 60)  # few rows at high risk: 1-2-row bins there
    y = (rng.uniform(size=60) < p).astype(int)
    bins = calibration_bins(y, np.c_[1 - p, p], [0, 1])
    points = merge_sparse_bins(bins)
    assert all(pt["rows"] >= MIN_BIN_ROWS for pt in points)
    assert sum(pt["rows"] for pt in points) == 60
    assert [j for pt in points for j in pt["bins"]] == list(range(10))  # each bin once, in order
    for pt in points:  # a merged point is the mean over its rows
        idx = np.isin(np.minimum((p * 10).astype(int), 9), pt["bins"])
        assert pt["predicted"] == pytest.approx(p[idx].mean())
        assert pt["observed"] == pytest.approx(y[idx].mean())
        assert (pt["low"], pt["high"]) == pytest.approx(wilson_interval(y[idx].sum(), idx.sum()))
        assert pt["low"] <= pt["observed"] <= pt["high"]
    # neighbours: exactly the minimum, one short of it, and fewer rows than it in all
    exact = {"count": [10, 0], "predicted": [0.05, None], "observed": [0.3, None]}
    assert [pt["bins"] for pt in merge_sparse_bins(exact)] == [[0, 1]]
    short = {"count": [9, 0], "predicted": [0.05, None], "observed": [1 / 3, None]}
    assert merge_sparse_bins(short) == []
    tail = {"count": [12, 3], "predicted": [0.1, 0.9], "observed": [0.25, 1.0]}
    assert [pt["bins"] for pt in merge_sparse_bins(tail)] == [[0, 1]]  # the short tail joins


def test_a_diagram_of_too_few_rows_is_refused(tmp_path):
    bins = calibration_bins([0, 1, 1], np.array([[0.9, 0.1], [0.2, 0.8], [0.1, 0.9]]), [0, 1])
    with pytest.raises(ValueError, match="10 rows or more"):
        plot_reliability({"mp": bins}, tmp_path, "r.png")


def test_the_axes_name_the_outcome():
    from fedforest.experiments.calibration_figures import _axis_labels

    assert _axis_labels("1", "readmitted") == (
        "predicted risk of readmitted = 1",
        "observed frequency of readmitted = 1",
    )
    assert _axis_labels("1") == (
        "predicted risk of the outcome 1",
        "observed frequency of the outcome 1",
    )
    assert _axis_labels(None)[1] == "observed frequency of the outcome"
    assert "top label" in _axis_labels("top-label", "y")[0]


def test_the_grid_is_scaled_within_each_site():
    from fedforest.experiments.calibration_figures import column_scaled

    # site-2 is easy for everyone: one scale for all would make all its cells bright
    grid = np.array([[0.60, 0.95], [0.70, 0.96], [np.nan, 0.90]])
    scaled = column_scaled(grid)
    np.testing.assert_allclose(scaled[:, 0], [0.0, 1.0, np.nan])
    np.testing.assert_allclose(scaled[:, 1], [5 / 6, 1.0, 0.0])
    lower = column_scaled(np.array([[0.1, 0.3], [0.2, 0.3]]), lower=True)
    np.testing.assert_allclose(lower, [[1.0, 1.0], [0.0, 1.0]])  # lowest best; a tie: all best


def test_names_with_a_dollar_sign_draw(tmp_path):
    frame = pd.DataFrame(
        {"strategy": ["mp", "$\\frac$"], "site": "$x", "metric": "auc", "value": [0.8, 0.7]}
    )
    assert_png(plot_strategy_grid(frame, tmp_path, "g.png", metrics=("auc",), title="a $ b"))
