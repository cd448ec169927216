"""Figures for missing-split experiments, drawn with matplotlib.

Holds the score-vs-Jaccard panels of Figures 1-2
(:func:`plot_metric_vs_jaccard`), the relative-gain heatmap of Figures 3-4
(:func:`plot_gain_heatmap`), the critical-difference diagram of Figure 5
(:func:`plot_critical_difference`) and the fixed method colours. It is the
only module of the reports that uses matplotlib (the ``plots`` extra), imported
lazily inside functions; figures are drawn on the non-interactive Agg canvas
(``FigureCanvasAgg``) without pyplot, so the global backend is never changed
and no window opens. Every number drawn comes from :mod:`.statistics`, the
only fedforest module it imports; it never imports :mod:`.markdown`.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from .. import rules
from .statistics import (
    _cliques,
    _fmt_p,
    _metric_name,
    _order_methods,
    _prepare,
    _rank_test,
    _scenario_stats,
    _select_dataset,
    _slug,
    display_name,
    lower_is_better,
    per_repetition,
    relative_gain,
)

logger = logging.getLogger("fedforest.experiments.reports")  # the name used before the split

__all__ = ["plot_critical_difference", "plot_gain_heatmap", "plot_metric_vs_jaccard"]


def _new_figure(**kwargs):
    """A matplotlib Figure on the Agg canvas (no pyplot, no global backend change)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "plotting needs matplotlib; install fedforest with the 'plots' extra"
        ) from exc
    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def _save(fig, out_dir: str | os.PathLike, name: str) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    fig.savefig(path, dpi=120, format="png")
    logger.info("wrote %s", path)
    return path


def _method_colors(methods: Sequence[str]) -> dict[str, object]:
    """Fixed colour per known method, each rule's own (:func:`fedforest.rules.colours`:
    MP red, Local orange, Intersection blue); the others in matplotlib's cycle."""
    known = rules.colours()
    extra = [m for m in methods if m not in known]
    return {m: known.get(m, f"C{extra.index(m) % 10}" if m in extra else "k") for m in methods}


def plot_metric_vs_jaccard(
    tidy: pd.DataFrame,
    out_dir: str | os.PathLike,
    metric: str = "auprc",
    dataset: str | None = None,
    methods: Sequence[str] = ("mp", "local", "intersection"),
) -> Path:
    """Score against Jaccard overlap, one panel per number of peers (Figs 1-2).

    Each line is the mean over repetitions of the per-repetition site means;
    the band is +-1 standard deviation over repetitions.

    Parameters
    ----------
    tidy : pandas.DataFrame or path
        Runner output (see :data:`COLUMNS`).
    out_dir : path
        Directory for ``<dataset>_<metric>_vs_jaccard.png`` (created if needed).
    metric : str
        Metric on the y axis.
    dataset : str, optional
        May be omitted when the results hold one dataset.
    methods : sequence of str
        Methods to draw; those without scores are skipped with a warning.

    Returns
    -------
    pathlib.Path
        The PNG written.

    Examples
    --------
    >>> plot_metric_vs_jaccard(results, "out", "auprc", "S-500-Mix")  # doctest: +SKIP
    PosixPath('out/S-500-Mix_auprc_vs_jaccard.png')
    """
    df, dataset = _select_dataset(_prepare(tidy, metric), dataset)
    present = set(df["method"])
    absent = [m for m in methods if m not in present]
    if absent:
        logger.warning("no %s scores for %s in %r; not plotted", metric, absent, dataset)
    drawn = [m for m in methods if m in present]
    if not drawn:
        raise ValueError(
            f"none of the methods {list(methods)} has {metric} scores for {dataset!r}; "
            f"available: {_order_methods(present)}"
        )
    scen = _scenario_stats(per_repetition(df[df["method"].isin(drawn)]))
    sites = sorted(scen.index.get_level_values("n_sites").unique())
    jaccards = sorted(scen.index.get_level_values("jaccard").unique())
    ncols = min(len(sites), 4)
    nrows = math.ceil(len(sites) / ncols)
    fig = _new_figure(figsize=(3.1 * ncols + 0.6, 2.9 * nrows + 0.8), layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrows, ncols, sharey=True, squeeze=False)).ravel()
    colors = _method_colors(drawn)
    for ax, n in zip(axes, sites, strict=False):
        for m in drawn:
            try:
                s = scen.xs((n, m), level=("n_sites", "method")).sort_index()
            except KeyError:
                continue
            x = s.index.to_numpy(dtype=float)
            mean = s["mean"].to_numpy(dtype=float)
            sd = np.nan_to_num(s["std"].to_numpy(dtype=float))
            ax.plot(x, mean, marker="o", ms=3.5, lw=1.6, color=colors[m], label=display_name(m))
            ax.fill_between(x, mean - sd, mean + sd, color=colors[m], alpha=0.18, lw=0)
        ax.set_title(f"{n} peers", fontsize=10)
        ax.set_xlabel("Jaccard overlap")
        ax.set_xticks(jaccards)
        ax.tick_params(axis="x", labelsize=8, labelrotation=45 if len(jaccards) > 6 else 0)
        ax.grid(alpha=0.3)
    for ax in axes[len(sites) :]:
        ax.set_visible(False)
    for row in range(nrows):
        better = ", lower is better" if lower_is_better(metric) else ""
        axes[row * ncols].set_ylabel(f"{_metric_name(metric)} (mean ± 1 sd{better})")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(drawn), frameon=False)
    fig.suptitle(f"{dataset}: {_metric_name(metric)} vs. feature overlap", fontsize=11)
    return _save(fig, out_dir, f"{_slug(dataset)}_{metric}_vs_jaccard.png")


def plot_gain_heatmap(
    tidy: pd.DataFrame,
    out_dir: str | os.PathLike,
    metric: str = "auprc",
    dataset: str | None = None,
    baseline: str = "intersection",
) -> Path:
    """Heatmap of the relative gain over the baseline (Figs 3-4, eq. 25).

    Rows are the methods except the baseline, columns the scenarios
    ``(n_sites, jaccard)`` grouped by number of peers; cells are annotated in
    percent and coloured with a diverging colormap centred at 0.

    Parameters
    ----------
    tidy : pandas.DataFrame or path
        Runner output (see :data:`COLUMNS`).
    out_dir : path
        Directory for ``<dataset>_<metric>_gain.png`` (created if needed).
    metric, dataset, baseline
        As for :func:`relative_gain`.

    Returns
    -------
    pathlib.Path
        The PNG written.

    Examples
    --------
    >>> plot_gain_heatmap(results, "out", "auprc", "CDC-2Class")  # doctest: +SKIP
    PosixPath('out/CDC-2Class_auprc_gain.png')
    """
    from matplotlib.colors import Normalize
    from matplotlib.ticker import PercentFormatter

    gains = relative_gain(tidy, metric, baseline, dataset=dataset)
    if dataset is None:
        dataset = str(_prepare(tidy)["dataset"].iloc[0])
    if gains.empty:
        raise ValueError(f"no method other than the baseline {baseline!r}: nothing to compare")
    values = gains.to_numpy(dtype=float) * 100.0
    n_rows, n_cols = values.shape
    vmax = float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0
    vmax = max(vmax, 0.5)
    fig = _new_figure(
        figsize=(max(5.0, 0.56 * n_cols + 2.4), 0.4 * n_rows + 1.6), layout="constrained"
    )
    ax = fig.add_subplot()
    cmap = _colormap("RdBu").with_extremes(bad="0.85")
    im = ax.imshow(
        np.ma.masked_invalid(values),
        cmap=cmap,
        norm=Normalize(-vmax, vmax),
        aspect="auto",
        interpolation="nearest",
    )
    small = 7 if n_cols > 16 else 8
    for (i, j), v in np.ndenumerate(values):
        text = "n/a" if not np.isfinite(v) else f"{v:+.1f}%"
        dark = np.isfinite(v) and abs(v) > 0.6 * vmax
        ax.text(j, i, text, ha="center", va="center", fontsize=small,
                color="white" if dark else "black")  # fmt: skip
    sites = gains.columns.get_level_values("n_sites").to_numpy()
    jac = gains.columns.get_level_values("jaccard").to_numpy()
    ax.set_xticks(range(n_cols), [f"{j:g}" for j in jac], fontsize=small)
    ax.set_yticks(range(n_rows), [display_name(m) for m in gains.index], fontsize=9)
    ax.tick_params(length=0)
    groups = [np.flatnonzero(sites == n) for n in np.unique(sites)]
    top = ax.secondary_xaxis("top")
    top.set_xticks(
        [float(idx.mean()) for idx in groups], [f"{sites[idx[0]]} peers" for idx in groups]
    )
    top.tick_params(length=0, labelsize=9)
    for idx in groups[1:]:
        ax.axvline(idx[0] - 0.5, color="white", lw=3)
    ax.set_xlabel("Jaccard overlap", fontsize=9)
    ax.set_title(
        f"{dataset}: relative {_metric_name(metric)} gain over {display_name(baseline)}"
        + (" (reduction: lower is better)" if lower_is_better(metric) else ""),
        fontsize=11,
    )
    cb = fig.colorbar(im, ax=ax, fraction=0.03 if n_cols > 10 else 0.06, pad=0.01)
    cb.ax.yaxis.set_major_formatter(PercentFormatter(decimals=0))
    cb.ax.tick_params(labelsize=8)
    return _save(fig, out_dir, f"{_slug(dataset)}_{metric}_gain.png")


def _colormap(name: str):
    from matplotlib import colormaps

    return colormaps[name]


def plot_critical_difference(
    tidy: pd.DataFrame,
    out_dir: str | os.PathLike,
    metric: str = "auprc",
    *,
    dataset: str | None = None,
    alpha: float = 0.05,
) -> Path:
    """Critical difference diagram of the Friedman/Nemenyi procedure (Fig. 5).

    The axis runs over average ranks 1..k (best on the left); every method is
    labelled at its average rank, the bar at the top is the critical
    difference, and thick bars join groups of methods whose average ranks
    differ by less than the critical difference (not significantly different).

    Parameters
    ----------
    tidy : pandas.DataFrame or path
        Runner output (see :data:`COLUMNS`).
    out_dir : path
        Directory for ``cd_<metric>.png`` (``cd_<dataset>_<metric>.png`` with
        ``dataset``), created if needed.
    metric, dataset, alpha
        As for :func:`average_ranks`.

    Returns
    -------
    pathlib.Path
        The PNG written.

    Raises
    ------
    ValueError
        With fewer than two ranked methods.

    Examples
    --------
    >>> plot_critical_difference(results, "out", "auprc")  # doctest: +SKIP
    PosixPath('out/cd_auprc.png')
    """
    df = _prepare(tidy, metric)
    if dataset is not None:
        df, _ = _select_dataset(df, dataset)
    (ranks, stat, pval, cd), n_blocks = _rank_test(df, alpha)
    k = len(ranks)
    if k < 2:
        raise ValueError(f"a critical difference diagram needs at least 2 methods, got {k}")
    r = ranks.to_numpy(dtype=float)
    names = [f"{display_name(m)} ({v:.2f})" for m, v in zip(ranks.index, r, strict=True)]
    cliques = _cliques(r, cd)
    n_left = math.ceil(k / 2)
    n_rows = max(n_left, k - n_left)

    # Layout in data units: 1 y unit is drawn as `unit` inches.
    unit = 0.27
    y_cd, y_axis = 2.0, 0.0
    y_clique = [-0.55 - 0.45 * c for c in range(len(cliques))]
    y_first = -0.9 - 0.45 * len(cliques) - 0.4
    step = 0.85
    y_rows = [y_first - i * step for i in range(n_rows)]
    y_bottom, y_top = y_rows[-1] - 0.7, 3.5
    width = max(6.0, 0.75 * k + 4.2)
    label_in = 0.075 * max(len(s) for s in names) + 0.35
    span_in = width - 2 * label_in
    pad = label_in * max(k - 1, 1) / span_in
    fig = _new_figure(figsize=(width, (y_top - y_bottom) * unit))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.set_xlim(1 - pad, k + pad)
    ax.set_ylim(y_bottom, y_top)
    line = {"color": "black", "lw": 1.0}

    ax.plot([1, k], [y_axis, y_axis], **line)
    ticks = np.arange(1.0, k + 0.01, 0.5)
    for t in ticks:
        major = float(t).is_integer()
        ax.plot([t, t], [y_axis, y_axis + (0.35 if major else 0.2)], **line)
        if major:
            ax.text(t, y_axis + 0.45, f"{int(t)}", ha="center", va="bottom", fontsize=9)
    if np.isfinite(cd):
        x0 = 1.0
        ax.plot([x0, x0 + cd], [y_cd, y_cd], color="black", lw=1.6)
        for x in (x0, x0 + cd):
            ax.plot([x, x], [y_cd - 0.2, y_cd + 0.2], **line)
        ax.text(x0 + cd / 2, y_cd + 0.3, f"CD = {cd:.2f}", ha="center", va="bottom", fontsize=9)
    friedman = (
        f"Friedman χ² = {stat:.1f}, p {_fmt_p(pval)}" if np.isfinite(pval) else "Friedman test n/a"
    )
    ax.text(
        k + pad - 0.02 * (k - 1 + 2 * pad),
        y_top - 0.4,
        f"{_metric_name(metric)}: {friedman}, {n_blocks} blocks",
        ha="right",
        va="top",
        fontsize=8,
        color="0.3",
    )
    for c, (i, j) in enumerate(cliques):
        ax.plot([r[i] - 0.05, r[j] + 0.05], [y_clique[c]] * 2, color="black", lw=4,
                solid_capstyle="butt")  # fmt: skip
    x_left, x_right = 1 - 0.1 * pad, k + 0.1 * pad
    for i in range(n_left):
        y = y_rows[i]
        ax.plot([r[i], r[i], x_left], [y_axis, y, y], **line)
        ax.text(x_left - 0.03 * pad, y, names[i], ha="right", va="center", fontsize=10)
    for row, i in enumerate(range(k - 1, n_left - 1, -1)):
        y = y_rows[row]
        ax.plot([r[i], r[i], x_right], [y_axis, y, y], **line)
        ax.text(x_right + 0.03 * pad, y, names[i], ha="left", va="center", fontsize=10)
    name = f"cd_{metric}.png" if dataset is None else f"cd_{_slug(dataset)}_{metric}.png"
    return _save(fig, out_dir, name)
