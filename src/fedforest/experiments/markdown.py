"""The ``report.md`` writer and its markdown helpers.

Holds :func:`write_report`, which writes every figure, the CSV summary tables
and a ``report.md`` linking them, and the helpers that render summary tables,
relative gains and Friedman/Nemenyi results as markdown tables. It computes
nothing itself: tables and tests come from :mod:`.statistics` and PNGs from
:mod:`.figures` and :mod:`.calibration_figures` (which also reads and pools
the runner's ``calibration.csv``), and escapes the names of the results
(datasets, methods) with :func:`fedforest.federation.results.markdown_text`;
the small-sample rule (a site with fewer than 50 test rows or 10 events) is
:mod:`fedforest.intervals`'; those are the only fedforest modules it imports (it never imports matplotlib
directly).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ..federation.results import markdown_text
from ..intervals import MIN_EVENTS, MIN_TEST_ROWS
from .calibration_figures import plot_reliability, plot_strategy_grid, pool_bins, read_calibration
from .figures import plot_critical_difference, plot_gain_heatmap, plot_metric_vs_jaccard
from .statistics import (
    _BLOCK,
    RankTest,
    _check_metric,
    _fmt_p,
    _metric_name,
    _order_methods,
    _prepare,
    _rank_test,
    _slug,
    best_value,
    display_name,
    lower_is_better,
    per_repetition,
    relative_gain,
    summary_table,
)

logger = logging.getLogger("fedforest.experiments.reports")  # the name used before the split

__all__ = ["write_report"]


def _shown(name) -> str:
    """A method's display name (:func:`~.statistics.display_name`) as markdown shows it
    literally (:func:`~fedforest.federation.results.markdown_text`): names come from the
    results CSV."""
    return markdown_text(display_name(str(name)))


#: The runner's per-bin table beside ``results.csv`` (``CALIBRATION_COLUMNS``, one row per bin).
CALIBRATION_FILE = "calibration.csv"
#: The metrics of the method-by-number-of-sites chart, left to right (those the results hold).
GRID_METRICS = ("auc", "brier", "rmse")


def _fmt(v: float, digits: int = 3) -> str:
    return "–" if not np.isfinite(v) else f"{v:.{digits}f}"


def _markdown(header: Sequence[str], rows: Sequence[Sequence[str]], n_label_cols: int = 1) -> str:
    aligns = [":--" if i < n_label_cols else "--:" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(aligns) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _summary_markdown(table: pd.DataFrame, metric: str = "auprc") -> str:
    """Methods as rows, ``J, peers`` as columns, best value per column in bold (the lowest
    for a lower-is-better ``metric``)."""
    header = ["Method"] + [f"J={j:g}, {n} peers" for j, n in table.columns]
    best = table.apply(lambda col: best_value(col, metric), axis=0)
    rows = []
    for method, values in table.iterrows():
        cells = [_shown(str(method))]
        for col, v in values.items():
            s = _fmt(v)
            if np.isfinite(v) and np.isclose(v, best[col]):
                s = f"**{s}**"
            cells.append(s)
        rows.append(cells)
    return _markdown(header, rows)


def _gain_markdown(gains: pd.DataFrame) -> str:
    """Scenarios as rows (as in the paper's tables), methods as columns, in percent."""
    header = ["Peers", "Jaccard"] + [_shown(str(m)) for m in gains.index]
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
                [str(i + 1), _shown(str(m)), f"{v:.2f}"] for i, (m, v) in enumerate(ranks.items())
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
    When ``tidy`` holds AUC, Brier or RMSE scores (:data:`GRID_METRICS`), per
    dataset a method-by-number-of-sites chart of them
    (``<dataset>_methods_by_sites.png``). When ``out_dir`` holds the runner's
    ``calibration.csv`` (:data:`CALIBRATION_FILE`), per dataset a reliability
    diagram with every method's bins pooled over sites, repetitions and
    scenarios (``<dataset>_reliability.png``).

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
    if isinstance(tidy, (str, os.PathLike)):
        tidy = pd.read_csv(tidy)
    df = _prepare(tidy)
    metrics = list(metrics)
    if not metrics:
        raise ValueError("metrics is empty: nothing to report")
    for metric in metrics:
        _check_metric(df, metric)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    datasets = sorted(df["dataset"].unique())

    md: list[str] = [f"# {markdown_text(title)}", ""]
    md.append(
        f"{len(df)} scores; datasets: {markdown_text(', '.join(map(str, datasets)))}; "
        f"peers: {', '.join(str(n) for n in sorted(df['n_sites'].unique()))}; "
        f"Jaccard levels: {', '.join(f'{j:g}' for j in sorted(df['jaccard'].unique()))}; "
        f"repetitions per scenario: up to {df.groupby(_BLOCK[:3])['rep'].nunique().max()}; "
        f"methods: {', '.join(_shown(m) for m in _order_methods(df['method'].unique()))}."
    )
    md += [
        "",
        "Scores are averaged over the sites (peers) of each repetition, then over "
        "repetitions. Relative gain (eq. 25): G = (Score_m − Score_baseline) / Score_baseline.",
        "",
    ]
    lower = [_metric_name(m) for m in metrics if lower_is_better(m)]
    if lower:
        md[-1:] = [
            f"Lower is better for {', '.join(lower)}: their ranks put the lowest score first, "
            "the best value is the lowest, and the gain is the relative reduction, "
            "G = (Score_baseline − Score_m) / Score_baseline, so a positive gain is an "
            "improvement for every metric.",
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
            md += [f"### {markdown_text(dataset)} — {name}", ""]
            if ddf.empty:
                note(f"No {name} scores for dataset {markdown_text(dataset)}.")
                continue
            present = set(ddf["method"])
            drawn = [m for m in line_methods if m in present] or _order_methods(present)
            png = plot_metric_vs_jaccard(ddf, out, metric, dataset, drawn)
            md += [f"![{name} vs. Jaccard, {markdown_text(dataset)}]({png.name})", ""]

            table = summary_table(ddf, metric, jaccards, dataset=dataset)
            sd = summary_table(ddf, metric, jaccards, dataset=dataset, std=True)
            stem = f"summary_{_slug(dataset)}_{metric}"
            table.to_csv(out / f"{stem}.csv")
            sd.to_csv(out / f"{stem}_std.csv")
            md += [
                f"**Mean {name}** over repetitions (best per column in bold; "
                f"standard deviations in `{stem}_std.csv`):",
                "",
                _summary_markdown(table, metric),
                "",
            ]

            if baseline not in present:
                note(
                    f"No {_shown(baseline)} scores for {markdown_text(dataset)}: no relative gains."
                )
            elif len(present) < 2:
                note(
                    f"Only {_shown(baseline)} has {name} scores for {markdown_text(dataset)}: no gains."
                )
            else:
                gains = relative_gain(ddf, metric, baseline, dataset=dataset)
                md += [
                    f"**Relative {name} gain over {_shown(baseline)}** (eq. 25):",
                    "",
                    _gain_markdown(gains),
                    "",
                ]
                png = plot_gain_heatmap(ddf, out, metric, dataset, baseline)
                md += [f"![Relative gain heatmap, {markdown_text(dataset)}]({png.name})", ""]

            if len(datasets) > 1:
                try:
                    test, n_blocks = _rank_test(ddf, alpha)
                    md += [_friedman_markdown(test, n_blocks, alpha), ""]
                except ValueError as exc:
                    note(
                        f"Ranking not available for {markdown_text(dataset)}: {markdown_text(exc)}"
                    )

    md += _sample_section(tidy)
    md += _grid_section(df, out)
    if (out / CALIBRATION_FILE).is_file():
        md += _reliability_section(read_calibration(out / CALIBRATION_FILE), out)
    path = out / "report.md"
    path.write_text("\n".join(md).rstrip() + "\n", encoding="utf-8")
    logger.info("wrote %s", path)
    return path


def _site_counts(tidy: pd.DataFrame) -> pd.DataFrame | None:
    """One row per (dataset, n_sites, jaccard, rep, site) with its test rows and events, or
    ``None`` when the results do not hold them (written before the runner counted them)."""
    if not {"test_rows", "events"} <= set(tidy.columns):
        return None
    keys = ["dataset", "n_sites", "jaccard", "rep", "site"]
    counts = tidy.loc[:, [*keys, "test_rows", "events"]].copy()
    for col in ("test_rows", "events"):
        counts[col] = pd.to_numeric(counts[col], errors="coerce")
    counts = counts.dropna(subset=["test_rows"])
    if counts.empty:
        return None
    return counts.groupby(keys, sort=True, as_index=False).first()


def _sample_section(tidy: pd.DataFrame) -> list[str]:
    """How many test rows and events the sites' scores rest on, per scenario, with a
    warning where a site has fewer than :data:`~fedforest.intervals.MIN_TEST_ROWS` test
    rows or :data:`~fedforest.intervals.MIN_EVENTS` events (the job's rule)."""
    counts = _site_counts(tidy)
    md = ["## Test rows per site", ""]
    if counts is None:
        return md + ["These results do not record the sites' test rows and events.", ""]
    has_events = bool(counts["events"].notna().any())
    scenario = ["dataset", "n_sites", "jaccard"]
    header = ["dataset", "sites", "Jaccard", "test rows per site (min–max)"]
    if has_events:
        header.append("events per site (min–max)")
    header.append("sites below the minimum")
    rows, warned = [], 0
    for (dataset, n_sites, jaccard), group in counts.groupby(scenario, sort=True):
        few = group["test_rows"] < MIN_TEST_ROWS
        if has_events:
            few |= group["events"].fillna(np.inf) < MIN_EVENTS
        warned += bool(few.any())
        row = [
            markdown_text(dataset),
            str(int(n_sites)),
            f"{float(jaccard):g}",
            f"{int(group['test_rows'].min())}–{int(group['test_rows'].max())}",
        ]
        if has_events:
            ev = group["events"].dropna()
            row.append(f"{int(ev.min())}–{int(ev.max())}" if len(ev) else "–")
        row.append(f"{int(few.sum())} of {len(group)}")
        rows.append(row)
    md += [
        "Each site's scores rest on its own test rows. The counts are over every site and "
        "repetition of a scenario.",
        "",
        _markdown(header, rows, n_label_cols=3),
        "",
    ]
    if warned:
        md += [
            f"> {warned} of {len(rows)} scenarios have sites with fewer than {MIN_TEST_ROWS} "
            f"test rows or {MIN_EVENTS} events: a single site's score there is unreliable (an "
            "AUPRC of 1.000 on a dozen rows says little). The means above average many such "
            "scores over sites and repetitions; their spread is in the `_std.csv` tables.",
            "",
        ]
    return md


def _grid_section(df: pd.DataFrame, out: Path) -> list[str]:
    """Per dataset: :data:`GRID_METRICS` by method and number of sites (mean over overlaps
    and repetitions of the per-repetition site means)."""
    present = [m for m in GRID_METRICS if m in set(df["metric"])]
    if not present:
        return []
    names = " and ".join(_metric_name(m) for m in present)
    md = [f"## {names} by method and number of sites", ""]
    md += [
        "Mean over overlaps and repetitions of the per-repetition mean over sites; the best "
        "value of each column is in bold.",
        "",
    ]
    rep = per_repetition(df[df["metric"].isin(present)])
    for dataset in sorted(rep["dataset"].unique()):
        cells = (
            rep[rep["dataset"] == dataset]
            .groupby(["method", "n_sites", "metric"])["value"]
            .mean()
            .reset_index()
        )
        cells["method"] = pd.Categorical(cells["method"], _order_methods(cells["method"]))
        sites = sorted(cells["n_sites"].unique())
        cells["sites"] = pd.Categorical(
            [f"{n} sites" for n in cells["n_sites"]], [f"{n} sites" for n in sites]
        )
        png = plot_strategy_grid(
            cells,
            out,
            f"{_slug(dataset)}_methods_by_sites.png",
            metrics=present,
            rows="method",
            columns="sites",
            title=f"{dataset}: {names} by method and number of sites",
        )
        md += [
            f"![{names} by method and number of sites, {markdown_text(dataset)}]({png.name})",
            "",
        ]
    return md


def _reliability_section(table: pd.DataFrame, out: Path) -> list[str]:
    """Per dataset: one reliability diagram, each method's bins pooled over every site,
    repetition and scenario (count-weighted means)."""
    md = ["## Calibration", ""]
    md += [
        f"From `{CALIBRATION_FILE}`: each method's bins pooled over every site, repetition "
        "and scenario (count-weighted means of predicted and observed risk). On the "
        "diagonal, a predicted 30 % means 30 %.",
        "",
    ]
    if table.empty:
        return [*md, f"> `{CALIBRATION_FILE}` has no rows: no reliability diagram.", ""]
    for dataset in sorted(table["dataset"].unique()):
        curves = pool_bins(table[table["dataset"] == dataset])
        if not curves:
            md += [f"> No non-empty bin for {markdown_text(dataset)}: no reliability diagram.", ""]
            continue
        png = plot_reliability(
            curves,
            out,
            f"{_slug(dataset)}_reliability.png",
            title=f"{dataset}: predicted against observed risk, all sites and scenarios",
        )
        md += [f"![Reliability diagram, {markdown_text(dataset)}]({png.name})", ""]
    return md
