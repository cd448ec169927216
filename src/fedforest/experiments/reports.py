"""Tables, statistics and figures for missing-split experiments.

The experiment runner writes one *tidy* row per score, with the columns
``dataset, n_sites, jaccard, rep, site, method, metric, value``. This module
turns such a frame into the artefacts of section V of the missing-split paper
(Tajabadi & Heider, "Mind the Missing Split"):

* :func:`plot_metric_vs_jaccard` -- Figures 1-2, score against Jaccard overlap
  with one panel per number of peers;
* :func:`relative_gain` and :func:`plot_gain_heatmap` -- Figures 3-4, the
  relative gain over Intersection of eq. 25;
* :func:`summary_table` / :func:`summary_tables` -- Tables II-III, mean score of
  every method per number of peers at J = 0.3 and J = 0.7;
* :func:`average_ranks` and :func:`plot_critical_difference` -- Figure 5, the
  Friedman test with the Nemenyi critical difference;
* :func:`write_report` -- all of the above as PNG, CSV and a ``report.md``.

As in the paper, every score is first averaged over the sites (peers) of a
repetition (:func:`per_repetition`), and those per-repetition means are then
averaged over repetitions. NaN scores (e.g. an AUC that is undefined at a site
whose test set holds one class) are skipped by the means.

Jaccard values are rounded to 10 decimals on input, so ``0.30000000000000004``
and ``0.3`` denote the same scenario.

Plotting needs matplotlib (the ``plots`` extra). Figures are drawn on the
non-interactive Agg canvas (``FigureCanvasAgg``) without pyplot, so the module
neither changes the global matplotlib backend nor opens windows.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats

from ..vocabulary import METRICS, PAPER_METHODS

logger = logging.getLogger(__name__)

__all__ = [
    "COLUMNS",
    "DISPLAY_NAMES",
    "METHOD_ORDER",
    "RankTest",
    "average_ranks",
    "display_name",
    "nemenyi_cd",
    "per_repetition",
    "plot_critical_difference",
    "plot_gain_heatmap",
    "plot_metric_vs_jaccard",
    "relative_gain",
    "summary_table",
    "summary_tables",
    "write_report",
]

COLUMNS = ("dataset", "n_sites", "jaccard", "rep", "site", "method", "metric", "value")
"""Columns every tidy results frame must have (extra columns are ignored)."""

METHOD_ORDER = PAPER_METHODS
"""Order of methods in tables and figures; unknown methods follow, sorted."""

DISPLAY_NAMES = {
    "intersection": "Intersection",
    "local": "Local",
    "park": "Park et al.",
    "fpv": "FPV",
    "pr": "PR",
    "mi": "MI",
    "ipr": "IPR",
    "mp": "MP",
    "ss": "SS",
}
"""Names used in figures and in ``report.md``."""

_METRIC_NAMES = {"auprc": "AUPRC", "auc": "AUC", "mcc": "MCC", "accuracy": "Accuracy"}
_REP_KEYS = ["dataset", "n_sites", "jaccard", "rep", "method", "metric"]
_BLOCK = ["dataset", "n_sites", "jaccard", "rep"]
_JACCARD_DECIMALS = 10

# Two-tailed Nemenyi q_alpha for alpha = 0.05 (Demsar 2006, Table 5a), k = 2..10.
_Q_005 = {2: 1.960, 3: 2.343, 4: 2.569, 5: 2.728, 6: 2.850, 7: 2.949, 8: 3.031, 9: 3.102, 10: 3.164}


class RankTest(NamedTuple):
    """Result of :func:`average_ranks`.

    Attributes
    ----------
    ranks : pandas.Series
        Average rank per method (1 = best), sorted from best to worst.
    statistic : float
        Friedman chi-square statistic (NaN with fewer than 3 methods).
    pvalue : float
        p-value of the Friedman test (NaN with fewer than 3 methods).
    cd : float
        Nemenyi critical difference of average ranks (NaN with one method).
    """

    ranks: pd.Series
    statistic: float
    pvalue: float
    cd: float


# --------------------------------------------------------------------------- helpers


def display_name(method: str) -> str:
    """Human-readable name of a method.

    Examples
    --------
    >>> display_name("park"), display_name("mp"), display_name("custom")
    ('Park et al.', 'MP', 'custom')
    """
    return DISPLAY_NAMES.get(method, method)


def _metric_name(metric: str) -> str:
    return _METRIC_NAMES.get(metric, metric)


def _order_methods(methods: Iterable[str]) -> list[str]:
    """Methods in :data:`METHOD_ORDER`, then any unknown ones alphabetically."""
    present = set(methods)
    known = [m for m in METHOD_ORDER if m in present]
    return known + sorted(present - set(METHOD_ORDER))


def _slug(name: object) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(name)).strip("_") or "dataset"


def _prepare(tidy: pd.DataFrame | str | os.PathLike, metric: str | None = None) -> pd.DataFrame:
    """Validate a tidy frame, coerce its dtypes and optionally keep one metric.

    ``tidy`` may also be the path of a CSV file written by the runner.
    """
    if isinstance(tidy, (str, os.PathLike)):
        tidy = pd.read_csv(tidy)
    if not isinstance(tidy, pd.DataFrame):
        raise TypeError(f"tidy must be a pandas DataFrame, got {type(tidy).__name__}")
    missing = [c for c in COLUMNS if c not in tidy.columns]
    if missing:
        raise ValueError(f"tidy frame is missing columns: {missing} (expected {list(COLUMNS)})")
    if tidy.empty:
        raise ValueError("tidy frame is empty: there are no scores to report")
    df = tidy.loc[:, list(COLUMNS)].copy()
    for col in ("dataset", "n_sites", "jaccard", "rep", "site", "method", "metric"):
        if df[col].isna().any():
            raise ValueError(f"column {col!r} has missing values")
    try:
        df["n_sites"] = df["n_sites"].astype(int)
        df["rep"] = df["rep"].astype(int)
        df["jaccard"] = df["jaccard"].astype(float).round(_JACCARD_DECIMALS)
        df["value"] = df["value"].astype(float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"tidy frame has non-numeric n_sites/jaccard/rep/value: {exc}") from exc
    for col in ("dataset", "site", "method", "metric"):
        df[col] = df[col].astype(str)
    if metric is not None:
        _check_metric(df, metric)
        df = df[df["metric"] == metric]
    return df


def _check_metric(df: pd.DataFrame, metric: str) -> None:
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; expected one of {list(METRICS)}")
    available = sorted(df["metric"].unique())
    if metric not in available:
        raise ValueError(f"metric {metric!r} is not in the results; available: {available}")


def _select_dataset(df: pd.DataFrame, dataset: str | None) -> tuple[pd.DataFrame, str]:
    datasets = sorted(df["dataset"].unique())
    if dataset is None:
        if len(datasets) != 1:
            raise ValueError(
                f"results hold {len(datasets)} datasets {datasets}; pass dataset=... "
                "(or use summary_tables for one table per dataset)"
            )
        dataset = datasets[0]
    elif dataset not in datasets:
        raise ValueError(f"dataset {dataset!r} is not in the results; available: {datasets}")
    return df[df["dataset"] == dataset], dataset


def _nearest(available: Sequence[float], wanted: Iterable[float]) -> list[float]:
    """Nearest available value for each wanted one (ties go to the smaller), deduplicated."""
    grid = np.sort(np.asarray(list(available), dtype=float))
    chosen: list[float] = []
    for w in wanted:
        j = float(grid[int(np.argmin(np.abs(grid - float(w))))])
        if not math.isclose(j, float(w), abs_tol=1e-9):
            logger.warning("jaccard %g is not in the results; using the nearest value %g", w, j)
        if j not in chosen:
            chosen.append(j)
    return chosen


def _scenario_stats(rep: pd.DataFrame) -> pd.DataFrame:
    """Mean, std (ddof=1) and count over repetitions per (n_sites, jaccard, method)."""
    g = rep.groupby(["n_sites", "jaccard", "method"])["value"]
    return pd.DataFrame({"mean": g.mean(), "std": g.std(ddof=1), "n": g.count()})


# --------------------------------------------------------------------------- tables


def per_repetition(tidy: pd.DataFrame) -> pd.DataFrame:
    """Mean over sites of every (dataset, n_sites, jaccard, rep, method, metric).

    The paper reports, per repetition, the mean performance over the peers;
    this is that mean. NaN site scores are skipped; a repetition whose sites
    are all NaN gets NaN.

    Parameters
    ----------
    tidy : pandas.DataFrame or path
        Runner output with the columns in :data:`COLUMNS`.

    Returns
    -------
    pandas.DataFrame
        Columns ``dataset, n_sites, jaccard, rep, method, metric, value``.

    Examples
    --------
    >>> df = pd.DataFrame({"dataset": "d", "n_sites": 2, "jaccard": 0.5, "rep": 0,
    ...                    "site": ["a", "b"], "method": "mp", "metric": "auc",
    ...                    "value": [0.6, 0.8]})
    >>> float(per_repetition(df)["value"].iloc[0])
    0.7
    """
    df = _prepare(tidy)
    out = df.groupby(_REP_KEYS, sort=True)["value"].mean().reset_index()
    return out


def summary_table(
    tidy: pd.DataFrame,
    metric: str = "auprc",
    jaccards: Sequence[float] | None = (0.3, 0.7),
    *,
    dataset: str | None = None,
    std: bool = False,
) -> pd.DataFrame:
    """Mean score of every method per number of peers (paper Tables II/III).

    Parameters
    ----------
    tidy : pandas.DataFrame or path
        Runner output (see :data:`COLUMNS`).
    metric : str
        One of ``auprc, auc, mcc, accuracy``; must be present in ``tidy``.
    jaccards : sequence of float or None
        Overlap levels to show. A level that is not in the results is replaced
        by the nearest available one (ties go to the smaller; a warning is
        logged) and the column is labelled with the value actually used.
        ``None`` shows every level.
    dataset : str, optional
        Dataset to tabulate; may be omitted when the results hold one dataset.
    std : bool
        Return the standard deviation over repetitions (ddof=1) of the
        per-repetition means instead of their mean.

    Returns
    -------
    pandas.DataFrame
        Index ``method`` (in :data:`METHOD_ORDER`, only methods present);
        columns a MultiIndex ``(jaccard, n_sites)``. A scenario missing from
        the results gives NaN.

    Examples
    --------
    >>> table = summary_table(results, "auprc", dataset="CDC-2Class")  # doctest: +SKIP
    >>> table.loc["mp", (0.3, 2)]  # doctest: +SKIP
    0.77
    """
    df, dataset = _select_dataset(_prepare(tidy, metric), dataset)
    rep = per_repetition(df)
    levels = sorted(rep["jaccard"].unique())
    chosen = levels if jaccards is None else _nearest(levels, jaccards)
    sites = sorted(rep["n_sites"].unique())
    stat = _scenario_stats(rep[rep["jaccard"].isin(chosen)])["std" if std else "mean"]
    columns = pd.MultiIndex.from_product([chosen, sites], names=["jaccard", "n_sites"])
    methods = _order_methods(rep["method"].unique())
    table = stat.unstack("method").T.reorder_levels(["jaccard", "n_sites"], axis=1)
    table = table.reindex(index=methods, columns=columns)
    table.index.name = "method"
    table.columns.names = ["jaccard", "n_sites"]
    return table.astype(float)


def summary_tables(
    tidy: pd.DataFrame,
    metric: str = "auprc",
    jaccards: Sequence[float] | None = (0.3, 0.7),
    *,
    std: bool = False,
) -> dict[str, pd.DataFrame]:
    """:func:`summary_table` for every dataset, keyed by dataset name.

    Examples
    --------
    >>> tables = summary_tables(results, "auprc")  # doctest: +SKIP
    >>> sorted(tables)  # doctest: +SKIP
    ['CDC-2Class', 'S-500-Mix']
    """
    df = _prepare(tidy, metric)
    return {
        ds: summary_table(df, metric, jaccards, dataset=ds, std=std)
        for ds in sorted(df["dataset"].unique())
    }


def relative_gain(
    tidy: pd.DataFrame,
    metric: str = "auprc",
    baseline: str = "intersection",
    *,
    dataset: str | None = None,
) -> pd.DataFrame:
    """Relative gain over a baseline per scenario (paper eq. 25).

    ``G[m, s] = (Score[m, s] - Score[baseline, s]) / Score[baseline, s]`` where
    a score is the mean over repetitions of the per-repetition site means of
    scenario ``s = (n_sites, jaccard)``. A zero or missing baseline score gives
    NaN.

    Parameters
    ----------
    tidy : pandas.DataFrame or path
        Runner output (see :data:`COLUMNS`).
    metric : str
        Metric to compare.
    baseline : str
        Reference method, ``"intersection"`` in the paper.
    dataset : str, optional
        May be omitted when the results hold one dataset.

    Returns
    -------
    pandas.DataFrame
        Index ``method`` (every method except the baseline, in
        :data:`METHOD_ORDER`); columns a MultiIndex ``(n_sites, jaccard)``.
        Values are fractions (0.05 = +5 %).

    Examples
    --------
    >>> gains = relative_gain(results, "auprc", dataset="S-500-Mix")  # doctest: +SKIP
    >>> gains.loc["mp", (2, 0.3)]  # (0.79 - 0.68) / 0.68  # doctest: +SKIP
    0.1617...
    """
    df, dataset = _select_dataset(_prepare(tidy, metric), dataset)
    if baseline not in set(df["method"]):
        raise ValueError(
            f"baseline {baseline!r} has no {metric} scores for dataset {dataset!r}; "
            f"methods present: {_order_methods(df['method'].unique())}"
        )
    means = _scenario_stats(per_repetition(df))["mean"].unstack("method")
    base = means[baseline].where(means[baseline] != 0)
    if (means[baseline] == 0).any():
        logger.warning("baseline %r scores 0 in some scenarios; their gains are NaN", baseline)
    gains = means.drop(columns=baseline).sub(base, axis=0).div(base, axis=0)
    methods = [m for m in _order_methods(means.columns) if m != baseline]
    out = gains.T.reindex(methods)
    out.index.name = "method"
    out.columns.names = ["n_sites", "jaccard"]
    return out.astype(float)


# --------------------------------------------------------------------------- ranks


def nemenyi_cd(k: int, n_blocks: int, alpha: float = 0.05) -> float:
    """Nemenyi critical difference ``q_alpha * sqrt(k (k + 1) / (6 n_blocks))``.

    ``q_alpha`` is Demsar's (2006) tabulated value for ``alpha = 0.05`` and
    ``k <= 10``; otherwise it is the studentized range quantile divided by
    sqrt(2).

    Examples
    --------
    >>> round(nemenyi_cd(5, 30), 4)  # 2.728 * sqrt(5 * 6 / 180)
    1.1137
    """
    if k < 2 or n_blocks < 1:
        return float("nan")
    if math.isclose(alpha, 0.05) and k in _Q_005:
        q = _Q_005[k]
    else:
        q = float(stats.studentized_range.ppf(1.0 - alpha, k, np.inf) / math.sqrt(2.0))
    return q * math.sqrt(k * (k + 1) / (6.0 * n_blocks))


def _rank_matrix(df: pd.DataFrame) -> pd.DataFrame:
    """Blocks x methods matrix of per-repetition means, complete blocks only."""
    rep = per_repetition(df)
    wide = rep.set_index([*_BLOCK, "method"])["value"].unstack("method")
    wide = wide[_order_methods(wide.columns)]
    empty = [m for m in wide.columns if wide[m].isna().all()]
    if empty:
        logger.warning("methods without any score are left out of the ranking: %s", empty)
        wide = wide.drop(columns=empty)
    complete = wide.dropna(how="any")
    if len(complete) < len(wide):
        logger.warning(
            "%d of %d blocks lack a score for some method and are left out of the ranking",
            len(wide) - len(complete),
            len(wide),
        )
    if complete.empty or complete.shape[1] == 0:
        raise ValueError(
            "no block (dataset, n_sites, jaccard, rep) has a score for every method; "
            "cannot rank the methods"
        )
    return complete


def _rank_test(df: pd.DataFrame, alpha: float = 0.05) -> tuple[RankTest, int]:
    wide = _rank_matrix(df)
    ranks = wide.rank(axis=1, ascending=False, method="average")
    avg = ranks.mean(axis=0).sort_values(kind="stable")
    avg.name = "average_rank"
    avg.index.name = "method"
    k, n = wide.shape[1], wide.shape[0]
    stat = pval = float("nan")
    if k >= 3:
        with np.errstate(divide="ignore", invalid="ignore"):
            res = stats.friedmanchisquare(*(wide[m].to_numpy() for m in wide.columns))
        stat, pval = float(res.statistic), float(res.pvalue)
    else:
        logger.info("Friedman test needs at least 3 methods, got %d; returning NaN", k)
    return RankTest(avg, stat, pval, nemenyi_cd(k, n, alpha)), n


def average_ranks(
    tidy: pd.DataFrame,
    metric: str = "auprc",
    *,
    dataset: str | None = None,
    alpha: float = 0.05,
) -> RankTest:
    """Average ranks, Friedman test and Nemenyi critical difference.

    Methods are ranked within each block ``(dataset, n_sites, jaccard, rep)``
    on the per-repetition site means; the highest score gets rank 1 and ties
    share the average rank. Blocks where some method has no score are left
    out (a warning says how many), as are methods without any score.

    Parameters
    ----------
    tidy : pandas.DataFrame or path
        Runner output (see :data:`COLUMNS`).
    metric : str
        Metric to rank on.
    dataset : str, optional
        Rank within one dataset only; by default blocks of all datasets are
        pooled, as for the paper's Figure 5.
    alpha : float
        Significance level of the critical difference.

    Returns
    -------
    RankTest
        ``(ranks, statistic, pvalue, cd)``: average rank per method sorted
        best first, the Friedman chi-square and its p-value (both NaN with
        fewer than 3 methods, or when every block is a complete tie), and the
        critical difference (NaN with a single method).

    Examples
    --------
    >>> ranks, chi2, p, cd = average_ranks(results, "auprc")  # doctest: +SKIP
    >>> ranks.index[0]  # doctest: +SKIP
    'mp'
    """
    df = _prepare(tidy, metric)
    if dataset is not None:
        df, _ = _select_dataset(df, dataset)
    return _rank_test(df, alpha)[0]


def _cliques(ranks: Sequence[float], cd: float) -> list[tuple[int, int]]:
    """Maximal runs ``(i, j)`` of sorted ranks with ``ranks[j] - ranks[i] < cd``."""
    out: list[tuple[int, int]] = []
    if not np.isfinite(cd):
        return out
    last_j = -1
    for i in range(len(ranks)):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] - ranks[i] < cd:
            j += 1
        if j > i and j > last_j:
            out.append((i, j))
            last_j = j
    return out


# --------------------------------------------------------------------------- plots


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


_COLORS = {
    "mp": "tab:red",
    "local": "tab:orange",
    "intersection": "tab:blue",
    "park": "tab:brown",
    "fpv": "tab:olive",
    "pr": "tab:purple",
    "mi": "tab:pink",
    "ipr": "tab:cyan",
    "ss": "tab:green",
}


def _method_colors(methods: Sequence[str]) -> dict[str, object]:
    """Fixed colour per known method (MP red, Local orange, Intersection blue)."""
    extra = [m for m in methods if m not in _COLORS]
    return {m: _COLORS.get(m, f"C{extra.index(m) % 10}" if m in extra else "k") for m in methods}


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
        axes[row * ncols].set_ylabel(f"{_metric_name(metric)} (mean ± 1 sd)")
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
        f"{dataset}: relative {_metric_name(metric)} gain over {display_name(baseline)}",
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


# --------------------------------------------------------------------------- report


def _fmt_p(p: float) -> str:
    """p-value for display; values below 1e-16 (float underflow territory) as a bound."""
    return "n/a" if not np.isfinite(p) else ("< 1e-16" if p < 1e-16 else f"= {p:.3g}")


def _fmt(v: float, digits: int = 3) -> str:
    return "–" if not np.isfinite(v) else f"{v:.{digits}f}"


def _markdown(header: Sequence[str], rows: Sequence[Sequence[str]], n_label_cols: int = 1) -> str:
    aligns = [":--" if i < n_label_cols else "--:" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(aligns) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _summary_markdown(table: pd.DataFrame) -> str:
    """Methods as rows, ``J, peers`` as columns, best value per column in bold."""
    header = ["Method"] + [f"J={j:g}, {n} peers" for j, n in table.columns]
    best = table.max(axis=0, skipna=True)
    rows = []
    for method, values in table.iterrows():
        cells = [display_name(str(method))]
        for col, v in values.items():
            s = _fmt(v)
            if np.isfinite(v) and np.isclose(v, best[col]):
                s = f"**{s}**"
            cells.append(s)
        rows.append(cells)
    return _markdown(header, rows)


def _gain_markdown(gains: pd.DataFrame) -> str:
    """Scenarios as rows (as in the paper's tables), methods as columns, in percent."""
    header = ["Peers", "Jaccard"] + [display_name(str(m)) for m in gains.index]
    rows = []
    for (n, j), col in gains.items():
        best = col.max(skipna=True)
        cells = [str(n), f"{j:g}"]
        for v in col:
            s = "–" if not np.isfinite(v) else f"{100 * v:+.1f}%"
            if np.isfinite(v) and np.isclose(v, best):
                s = f"**{s}**"
            cells.append(s)
        rows.append(cells)
    return _markdown(header, rows, n_label_cols=2)


def _friedman_markdown(test: RankTest, n_blocks: int, alpha: float) -> str:
    ranks, stat, pval, cd = test
    k = len(ranks)
    if np.isfinite(stat):
        friedman = f"χ²({k - 1}) = {stat:.2f}, p {_fmt_p(pval)}"
    else:
        friedman = f"not computed ({k} method{'s' if k != 1 else ''}; needs at least 3)"
    lines = [
        f"**Friedman test** over {n_blocks} blocks (dataset × peers × Jaccard × repetition), "
        f"{k} methods: {friedman}. "
        f"**Nemenyi CD** (α = {alpha:g}) = {_fmt(cd)}.",
        "",
        _markdown(
            ["Rank", "Method", "Average rank"],
            [
                [str(i + 1), display_name(str(m)), f"{v:.2f}"]
                for i, (m, v) in enumerate(ranks.items())
            ],  # fmt: skip
            n_label_cols=2,
        ),
    ]
    return "\n".join(lines)


def write_report(
    tidy: pd.DataFrame,
    out_dir: str | os.PathLike,
    metrics: Sequence[str] = ("auprc",),
    title: str = "Missing-split experiment results",
    *,
    jaccards: Sequence[float] = (0.3, 0.7),
    line_methods: Sequence[str] = ("mp", "local", "intersection"),
    baseline: str = "intersection",
    alpha: float = 0.05,
) -> Path:
    """Write figures, CSV tables and ``report.md`` for every dataset and metric.

    For each metric: a CD diagram pooled over all datasets with the Friedman
    and Nemenyi results (``cd_<metric>.png``). For each dataset and metric:
    the score-vs-Jaccard figure, ``summary_<dataset>_<metric>.csv`` (mean, as
    :func:`summary_table`) and ``summary_<dataset>_<metric>_std.csv``, the
    relative gains over the baseline as a table and a heatmap, and the
    Friedman test within the dataset. Parts that cannot be computed (e.g. no
    baseline scores, a single method) are replaced by a note in the report.

    Parameters
    ----------
    tidy : pandas.DataFrame or path
        Runner output (see :data:`COLUMNS`).
    out_dir : path
        Output directory (created if needed); ``report.md`` links the PNGs
        relatively, so the directory can be moved as a whole.
    metrics : sequence of str
        Metrics to report; each must be present in ``tidy``.
    title : str
        Top-level heading of ``report.md``.
    jaccards : sequence of float
        Overlap levels of the summary tables (nearest available ones are used).
    line_methods : sequence of str
        Methods of the score-vs-Jaccard figures; when none of them has scores,
        every method is drawn.
    baseline : str
        Reference method of the relative gains.
    alpha : float
        Significance level of the Nemenyi critical difference.

    Returns
    -------
    pathlib.Path
        Path of ``report.md``.

    Examples
    --------
    >>> write_report(results, "report", metrics=("auprc", "auc"))  # doctest: +SKIP
    PosixPath('report/report.md')
    """
    df = _prepare(tidy)
    metrics = list(metrics)
    if not metrics:
        raise ValueError("metrics is empty: nothing to report")
    for metric in metrics:
        _check_metric(df, metric)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    datasets = sorted(df["dataset"].unique())

    md: list[str] = [f"# {title}", ""]
    md.append(
        f"{len(df)} scores; datasets: {', '.join(datasets)}; "
        f"peers: {', '.join(str(n) for n in sorted(df['n_sites'].unique()))}; "
        f"Jaccard levels: {', '.join(f'{j:g}' for j in sorted(df['jaccard'].unique()))}; "
        f"repetitions per scenario: up to {df.groupby(_BLOCK[:3])['rep'].nunique().max()}; "
        f"methods: {', '.join(display_name(m) for m in _order_methods(df['method'].unique()))}."
    )
    md += [
        "",
        "Scores are averaged over the sites (peers) of each repetition, then over "
        "repetitions. Relative gain (eq. 25): G = (Score_m − Score_baseline) / Score_baseline.",
        "",
    ]

    def note(text: str) -> None:
        logger.warning("%s", text)
        md.extend([f"> {text}", ""])

    for metric in metrics:
        name = _metric_name(metric)
        mdf = df[df["metric"] == metric]
        md += [f"## {name}", "", f"### Overall ranking ({name}, all datasets)", ""]
        try:
            test, n_blocks = _rank_test(mdf, alpha)
            md += [_friedman_markdown(test, n_blocks, alpha), ""]
            if len(test.ranks) >= 2:
                png = plot_critical_difference(mdf, out, metric, alpha=alpha)
                md += [f"![Critical difference diagram, {name}]({png.name})", ""]
            else:
                note(f"Only one method has {name} scores: no critical difference diagram.")
        except ValueError as exc:
            note(f"Ranking not available for {name}: {exc}")

        for dataset in datasets:
            ddf = mdf[mdf["dataset"] == dataset]
            md += [f"### {dataset} — {name}", ""]
            if ddf.empty:
                note(f"No {name} scores for dataset {dataset}.")
                continue
            present = set(ddf["method"])
            drawn = [m for m in line_methods if m in present] or _order_methods(present)
            png = plot_metric_vs_jaccard(ddf, out, metric, dataset, drawn)
            md += [f"![{name} vs. Jaccard, {dataset}]({png.name})", ""]

            table = summary_table(ddf, metric, jaccards, dataset=dataset)
            sd = summary_table(ddf, metric, jaccards, dataset=dataset, std=True)
            stem = f"summary_{_slug(dataset)}_{metric}"
            table.to_csv(out / f"{stem}.csv")
            sd.to_csv(out / f"{stem}_std.csv")
            md += [
                f"**Mean {name}** over repetitions (best per column in bold; "
                f"standard deviations in `{stem}_std.csv`):",
                "",
                _summary_markdown(table),
                "",
            ]

            if baseline not in present:
                note(f"No {display_name(baseline)} scores for {dataset}: no relative gains.")
            elif len(present) < 2:
                note(f"Only {display_name(baseline)} has {name} scores for {dataset}: no gains.")
            else:
                gains = relative_gain(ddf, metric, baseline, dataset=dataset)
                md += [
                    f"**Relative {name} gain over {display_name(baseline)}** (eq. 25):",
                    "",
                    _gain_markdown(gains),
                    "",
                ]
                png = plot_gain_heatmap(ddf, out, metric, dataset, baseline)
                md += [f"![Relative gain heatmap, {dataset}]({png.name})", ""]

            if len(datasets) > 1:
                try:
                    test, n_blocks = _rank_test(ddf, alpha)
                    md += [_friedman_markdown(test, n_blocks, alpha), ""]
                except ValueError as exc:
                    note(f"Ranking not available for {dataset}: {exc}")

    path = out / "report.md"
    path.write_text("\n".join(md).rstrip() + "\n", encoding="utf-8")
    logger.info("wrote %s", path)
    return path
