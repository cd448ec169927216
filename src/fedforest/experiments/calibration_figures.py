"""Figures of calibrated risks, drawn with matplotlib: what a clinician looks at.

Holds the reliability diagram (:func:`plot_reliability`: predicted against
observed risk per bin, one curve per strategy or method, the diagonal, and the
rows per bin underneath) and the strategy-by-site chart
(:func:`plot_strategy_grid`: one heatmap per metric, values written in the
cells, the colour scale turned so that the better end is always the bright
one, lower-is-better metrics included). Both take plain data, so the job's
report (``fedforest report``) and the experiment report
(:func:`~fedforest.experiments.markdown.write_report`) draw the same figures:
curves are ``{name: bins}`` with bins as
:func:`fedforest.metrics.calibration_bins` returns them (checked by
:func:`check_bins`), and a grid is a long frame of ``(row, column, metric,
value)``. The experiment runner's ``calibration.csv`` (:data:`CALIBRATION_COLUMNS`,
one row per non-empty bin) is read by :func:`read_calibration` and pooled into
such bins by :func:`pool_bins`.

Figures are drawn as in :mod:`.figures` (whose canvas, file writer and method
colours it uses): on the Agg canvas, without pyplot. It imports
:mod:`.figures`, :mod:`.statistics` and :mod:`fedforest.metrics` and
:mod:`fedforest.vocabulary`; like every module of ``experiments/``, it is not
shipped to the sites.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ..metrics import N_BINS
from ..vocabulary import LOWER_IS_BETTER
from .figures import _colormap, _method_colors, _new_figure, _save
from .statistics import _metric_name, _order_methods, display_name

logger = logging.getLogger("fedforest.experiments.reports")  # as figures and markdown

__all__ = [
    "CALIBRATION_COLUMNS",
    "MIN_BIN_ROWS",
    "check_bins",
    "column_scaled",
    "merge_sparse_bins",
    "plot_reliability",
    "plot_strategy_grid",
    "pool_bins",
    "read_calibration",
]

#: Columns of the experiment runner's ``calibration.csv`` (one row per non-empty bin).
CALIBRATION_COLUMNS = (
    "dataset",
    "n_sites",
    "jaccard",
    "rep",
    "site",
    "method",
    "bin",
    "count",
    "predicted",
    "observed",
)


# --------------------------------------------------------------------------- data


def check_bins(bins, where: str) -> dict:
    """Calibration bins (:func:`~fedforest.metrics.calibration_bins`'s dict), checked.

    Parameters
    ----------
    bins : mapping
        ``target`` (str or None), ``outcome`` (the target's name, optional),
        ``count`` (non-negative integers),
        ``predicted`` and ``observed`` (numbers in [0, 1] or None, as many
        as ``count``).
    where : str
        Where they come from, for messages (e.g. a file and a key).

    Returns
    -------
    dict
        The same keys, with plain lists.

    Raises
    ------
    ValueError
        Naming ``where`` and the key that is wrong.
    """
    if not isinstance(bins, Mapping):
        raise ValueError(f"{where}: expected a dict of bins, got {type(bins).__name__}")
    missing = [k for k in ("count", "predicted", "observed") if k not in bins]
    if missing:
        raise ValueError(f"{where}: bins have no {', '.join(map(repr, missing))}")
    target = bins.get("target")
    if target is not None and not isinstance(target, str):
        raise ValueError(f"{where}: 'target' is {target!r}, expected a class name or 'top-label'")
    outcome = bins.get("outcome")
    if outcome is not None and not isinstance(outcome, str):
        raise ValueError(f"{where}: 'outcome' is {outcome!r}, expected the target's name")
    count = bins["count"]
    if (
        not isinstance(count, (list, tuple))
        or not count
        or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in count)
    ):
        raise ValueError(f"{where}: 'count' is {count!r}, expected a list of integers >= 0")
    out: dict = {"target": target, "count": list(count)}
    if outcome is not None:
        out["outcome"] = outcome
    for key in ("predicted", "observed"):
        values = bins[key]
        if not isinstance(values, (list, tuple)) or len(values) != len(count):
            raise ValueError(
                f"{where}: {key!r} is {values!r}, expected a list of {len(count)} values"
            )
        for v in values:
            ok = v is None or (
                isinstance(v, (int, float))
                and not isinstance(v, bool)
                and math.isfinite(v)
                and 0 <= v <= 1
            )
            if not ok:
                raise ValueError(
                    f"{where}: {key!r} holds {v!r}, expected numbers in [0, 1] or null"
                )
        out[key] = [None if v is None else float(v) for v in values]
    return out


def read_calibration(path: str | os.PathLike) -> pd.DataFrame:
    """The experiment runner's ``calibration.csv``, checked.

    Raises
    ------
    ValueError
        If a column of :data:`CALIBRATION_COLUMNS` is missing, or ``bin``,
        ``count``, ``predicted`` or ``observed`` is not a number in its range;
        the message names the file.
    """
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: cannot read the calibration table ({err})") from err
    missing = [c for c in CALIBRATION_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{path}: columns {missing} are missing; expected {list(CALIBRATION_COLUMNS)}"
        )
    frame = frame.loc[:, list(CALIBRATION_COLUMNS)].copy()
    for col, low, high in (
        ("bin", 0, None),
        ("count", 0, None),
        ("predicted", 0, 1),
        ("observed", 0, 1),
    ):
        values = pd.to_numeric(frame[col], errors="coerce")
        bad = values.isna() | (values < low) | (values > high if high is not None else False)
        if col in ("bin", "count"):
            bad |= values.notna() & (values != values.round())
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise ValueError(
                f"{path}: column {col!r} has {frame[col].tolist()[row]!r} (row {row + 2}); expected "
                + (f"a number in [{low}, {high}]" if high is not None else f"an integer >= {low}")
            )
        frame[col] = values.astype(int) if col in ("bin", "count") else values.astype(float)
    for col in ("dataset", "site", "method"):
        frame[col] = frame[col].astype(str)
    return frame


def pool_bins(table: pd.DataFrame, n_bins: int = N_BINS) -> dict[str, dict]:
    """Bins per method, pooled over every row of ``table`` (count-weighted means).

    Parameters
    ----------
    table : pandas.DataFrame
        Rows of :data:`CALIBRATION_COLUMNS` (e.g. one dataset's rows of
        :func:`read_calibration`); ``predicted`` and ``observed`` are means
        over the ``count`` rows of the bin.
    n_bins : int
        Bins per curve (more when ``table`` names a higher bin).

    Returns
    -------
    dict
        ``{method: bins}`` in :data:`~.statistics.METHOD_ORDER`, with bins as
        :func:`~fedforest.metrics.calibration_bins` returns them (``target``
        is ``None``: the table does not name the class).

    Examples
    --------
    >>> t = pd.DataFrame({"method": "mp", "bin": [1, 1], "count": [1, 3],
    ...                   "predicted": [0.1, 0.2], "observed": [0.0, 0.4]})
    >>> b = pool_bins(t, n_bins=2)["mp"]
    >>> b["count"], round(b["predicted"][1], 3), round(b["observed"][1], 3)
    ([0, 4], 0.175, 0.3)
    """
    frame = table.loc[table["count"] > 0, ["method", "bin", "count", "predicted", "observed"]]
    n_bins = max(n_bins, int(frame["bin"].max()) + 1 if len(frame) else 0)
    frame = frame.assign(
        predicted=frame["predicted"] * frame["count"], observed=frame["observed"] * frame["count"]
    )
    sums = frame.groupby(["method", "bin"])[["count", "predicted", "observed"]].sum()
    pooled = {}
    for method in _order_methods(sums.index.get_level_values("method")):
        per = sums.loc[method]
        count = [int(per["count"].get(b, 0)) for b in range(n_bins)]
        pooled[method] = {"target": None, "count": count}
        for key in ("predicted", "observed"):
            pooled[method][key] = [
                float(per[key][b] / c) if c else None for b, c in enumerate(count)
            ]
    return pooled


# --------------------------------------------------------------------------- figures


#: A reliability diagram draws no point for fewer rows than this: a sparse bin is merged
#: with its neighbours (:func:`merge_sparse_bins`).
MIN_BIN_ROWS = 10


def merge_sparse_bins(bins: Mapping, min_rows: int = MIN_BIN_ROWS) -> list[dict]:
    """The points of a reliability curve: adjacent bins merged until each holds ``min_rows``.

    Bins are taken from the lowest risk up; a run of bins is closed once it
    holds ``min_rows`` rows, and a last run short of them joins the run before
    it. A merged point is the count-weighted mean of its bins' predicted and
    observed risks (exactly the mean over its rows), with the Wilson score 95%
    interval of its observed frequency
    (:func:`~fedforest.intervals.wilson_interval`). A curve with fewer than
    ``min_rows`` rows in all has no point.

    Parameters
    ----------
    bins : mapping
        As :func:`check_bins` returns them.
    min_rows : int
        The fewest rows of a point.

    Returns
    -------
    list of dict
        ``{"rows", "predicted", "observed", "low", "high", "bins"}`` per point,
        lowest risk first (``bins``: the indices merged).

    Examples
    --------
    >>> b = {"count": [3, 9, 0, 20], "predicted": [0.05, 0.15, None, 0.35],
    ...      "observed": [0.0, 1 / 9, None, 0.3]}
    >>> [(p["rows"], p["bins"]) for p in merge_sparse_bins(b)]
    [(12, [0, 1]), (20, [2, 3])]
    """
    from ..intervals import wilson_interval

    runs: list[list[int]] = []
    current: list[int] = []
    for i in range(len(bins["count"])):
        current.append(i)
        if sum(bins["count"][j] for j in current) >= min_rows:
            runs.append(current)
            current = []
    if current:
        if runs:
            runs[-1] = runs[-1] + current
        elif sum(bins["count"][j] for j in current) >= min_rows:
            runs.append(current)
    points = []
    for run in runs:
        rows = sum(bins["count"][j] for j in run)
        used = [j for j in run if bins["count"][j]]
        predicted = sum(bins["count"][j] * bins["predicted"][j] for j in used) / rows
        observed = sum(bins["count"][j] * bins["observed"][j] for j in used) / rows
        low, high = wilson_interval(observed * rows, rows)
        points.append(
            {
                "rows": rows,
                "predicted": predicted,
                "observed": observed,
                "low": low,
                "high": high,
                "bins": run,
            }
        )
    return points


def _axis_labels(target: str | None, outcome: str | None = None) -> tuple[str, str]:
    """The axes of a reliability diagram, naming the outcome: ``outcome = target`` when the
    target column's name is known, else the class alone."""
    if target == "top-label":
        return (
            "predicted probability of the top label (confidence)",
            "share of rows whose top label is right",
        )
    if target is None:
        if outcome is None:
            return "predicted risk of the outcome", "observed frequency of the outcome"
        return f"predicted risk of {outcome}", f"observed frequency of {outcome}"
    event = f"{outcome} = {target}" if outcome else f"the outcome {target}"
    return f"predicted risk of {event}", f"observed frequency of {event}"


def plot_reliability(
    curves: Mapping[str, Mapping],
    out_dir: str | os.PathLike,
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    title: str | None = None,
    min_rows: int = MIN_BIN_ROWS,
) -> Path:
    """Reliability diagram: predicted against observed risk per bin, rows per bin below.

    Each point is a bin of at least ``min_rows`` rows (sparser bins merged with
    their neighbours, :func:`merge_sparse_bins`), drawn at its mean predicted
    risk with its Wilson score 95% interval of the observed frequency; the
    rows per bin below are those of the bins before merging. The axes name the
    outcome: the bins' ``outcome`` (the target's name) and ``target`` (the
    positive class), e.g. "observed frequency of readmitted = 1".

    Parameters
    ----------
    curves : mapping
        ``{strategy or method: bins}``, bins as
        :func:`~fedforest.metrics.calibration_bins` returns them (checked
        with :func:`check_bins`), all with the same ``target`` and bins.
        Each curve has its method's fixed colour; a curve with fewer than
        ``min_rows`` rows in all is not drawn.
    out_dir : path
        Directory for ``name`` (created if needed).
    name : str
        File name of the PNG.
    labels : mapping, optional
        Legend text per curve (default: the method's display name).
    title : str, optional
        The figure's title.
    min_rows : int
        The fewest rows of a drawn point (:data:`MIN_BIN_ROWS`).

    Returns
    -------
    pathlib.Path
        The PNG written.

    Raises
    ------
    ValueError
        With no curve, curves of different targets or bin counts, or no
        curve of ``min_rows`` rows at all.

    Examples
    --------
    >>> plot_reliability({"mp": bins}, "out", "reliability-site-1.png")  # doctest: +SKIP
    PosixPath('out/reliability-site-1.png')
    """
    checked = {str(k): check_bins(v, f"curve {k!r}") for k, v in curves.items()}
    if not checked:
        raise ValueError("no curve to draw: give at least one {name: bins}")
    targets = {b["target"] for b in checked.values()}
    sizes = {len(b["count"]) for b in checked.values()}
    if len(targets) > 1 or len(sizes) > 1:
        raise ValueError(
            "curves of one reliability diagram need the same target and number of bins; got "
            + ", ".join(
                f"{k}: {b['target']!r} ({len(b['count'])} bins)" for k, b in checked.items()
            )
        )
    points = {k: merge_sparse_bins(b, min_rows) for k, b in checked.items()}
    drawn = {k: b for k, b in checked.items() if points[k]}
    if not drawn:
        raise ValueError(
            f"no curve of {sorted(checked)} has {min_rows} rows or more: nothing to draw"
        )
    for k in sorted(set(checked) - set(drawn)):
        logger.warning("curve %r has fewer than %d rows; not drawn", k, min_rows)
    labels = dict(labels or {})
    colors = _method_colors(list(drawn))
    n_bins = sizes.pop()
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    fig = _new_figure(figsize=(6.2, 6.6), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    top.plot([0, 1], [0, 1], ls="--", lw=1, color="0.45", label="perfectly calibrated")
    for key, bins in drawn.items():
        pts = points[key]
        x = np.array([p["predicted"] for p in pts])
        y = np.array([p["observed"] for p in pts])
        err = np.array([[p["observed"] - p["low"] for p in pts], [p["high"] - p["observed"]
                                                                    for p in pts]])  # fmt: skip
        label = _plain(labels.get(key, display_name(key)))
        top.errorbar(x, y, yerr=np.clip(err, 0, None), marker="o", ms=4.5, lw=1.7, capsize=2.5,
                     elinewidth=1, color=colors[key], label=label)  # fmt: skip
        bottom.stairs(np.asarray(bins["count"], dtype=float), edges, lw=1.5, color=colors[key])
    outcomes = {b.get("outcome") for b in drawn.values()} - {None}
    xlabel, ylabel = (
        _plain(t)
        for t in _axis_labels(targets.pop(), outcomes.pop() if len(outcomes) == 1 else None)
    )
    top.set_xlim(0, 1)
    top.set_ylim(0, 1)
    top.set_ylabel(ylabel)
    top.grid(alpha=0.3)
    top.legend(loc="upper left", fontsize=8, frameon=False)
    bottom.set_ylabel("rows per bin", fontsize=9)
    bottom.set_xlabel(xlabel)
    bottom.set_xticks(edges[:: max(1, n_bins // 5)])
    bottom.grid(alpha=0.3)
    bottom.tick_params(labelsize=8)
    if title:
        fig.suptitle(_plain(title), fontsize=11)
    return _save(fig, out_dir, name)


def plot_strategy_grid(
    frame: pd.DataFrame,
    out_dir: str | os.PathLike,
    name: str,
    *,
    metrics: Sequence[str] = ("auc", "brier"),
    rows: str = "strategy",
    columns: str = "site",
    title: str | None = None,
) -> Path:
    """One heatmap per metric: rows (strategies) by columns (sites), values in the cells.

    The colour is scaled within each column (:func:`column_scaled`): from the
    column's worst value to its best, the best end bright, so the colour shows
    which strategy wins at that site rather than which site is easy, and a
    lower-is-better metric (:data:`~fedforest.vocabulary.LOWER_IS_BETTER`) is
    scaled the right way. The values themselves are written in the cells, the
    best of every column in bold; a missing value is a grey ``n/a`` cell.

    Parameters
    ----------
    frame : pandas.DataFrame
        Long form: the columns ``rows``, ``columns``, ``metric`` and
        ``value``; rows and columns are drawn in their categories' order
        (categorical columns) or in the order they first appear, row labels
        as :func:`~.statistics.display_name`.
    out_dir : path
        Directory for ``name`` (created if needed).
    name : str
        File name of the PNG.
    metrics : sequence of str
        The panels, left to right; metrics without a finite value are left out.
    rows, columns : str
        The columns of ``frame`` that give the heatmaps' rows and columns.
    title : str, optional
        The figure's title.

    Returns
    -------
    pathlib.Path
        The PNG written.

    Raises
    ------
    ValueError
        If ``frame`` lacks a column, or no metric of ``metrics`` has a value.

    Examples
    --------
    >>> plot_strategy_grid(frame, "out", "strategies-by-site.png")  # doctest: +SKIP
    PosixPath('out/strategies-by-site.png')
    """
    from matplotlib.colors import Normalize

    missing = [c for c in (rows, columns, "metric", "value") if c not in frame.columns]
    if missing:
        raise ValueError(f"the frame has no column {missing}; it has {list(frame.columns)}")
    values = frame.assign(value=pd.to_numeric(frame["value"], errors="coerce"))
    present = [m for m in metrics if np.isfinite(values.loc[values["metric"] == m, "value"]).any()]
    if not present:
        raise ValueError(f"no value of {list(metrics)} to draw")
    row_keys, col_keys = _keys(values[rows]), _keys(values[columns])
    values = values.astype({rows: object, columns: object})
    width = max(2.6, 0.95 * len(col_keys) + 1.1)
    fig = _new_figure(
        figsize=(1.6 + width * len(present), 0.36 * len(row_keys) + 1.7), layout="constrained"
    )
    axes = np.atleast_1d(fig.subplots(1, len(present), sharey=True, squeeze=False)).ravel()
    for ax, metric in zip(axes, present, strict=True):
        wide = (
            values[values["metric"] == metric]
            .pivot_table(index=rows, columns=columns, values="value", aggfunc="mean", dropna=False)
            .reindex(index=row_keys, columns=col_keys)
        )
        grid = wide.to_numpy(dtype=float)
        lower = metric in LOWER_IS_BETTER
        shade = column_scaled(grid, lower)
        cmap = _colormap("viridis").with_extremes(bad="0.85")
        norm = Normalize(0.0, 1.0)
        im = ax.imshow(
            np.ma.masked_invalid(shade), cmap=cmap, norm=norm, aspect="auto",
            interpolation="nearest",
        )  # fmt: skip
        with np.errstate(all="ignore"):
            best = np.nanmin(grid, axis=0) if lower else np.nanmax(grid, axis=0)
        for (i, j), v in np.ndenumerate(grid):
            if not np.isfinite(v):
                ax.text(j, i, "n/a", ha="center", va="center", fontsize=8, color="0.3")
                continue
            r, g, b, _ = cmap(norm(shade[i, j]))
            dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
            ax.text(j, i, f"{v:.3f}", ha="center", va="center", fontsize=8,
                    color="white" if dark else "black",
                    fontweight="bold" if np.isclose(v, best[j]) else "normal")  # fmt: skip
        ax.set_xticks(range(len(col_keys)), [_plain(c) for c in col_keys], fontsize=8)
        ax.set_yticks(
            range(len(row_keys)), [_plain(display_name(str(r))) for r in row_keys], fontsize=8
        )
        ax.tick_params(length=0)
        ax.xaxis.tick_top()
        better = "lower" if lower else "higher"
        ax.set_title(f"{_metric_name(metric)} ({better} is better)", fontsize=10)
        cb = fig.colorbar(im, ax=ax, fraction=0.08, pad=0.02, ticks=[0, 1])
        cb.ax.set_yticklabels([f"worst of the {columns}", f"best of the {columns}"])
        cb.ax.tick_params(labelsize=7)
    if title:
        fig.suptitle(_plain(title), fontsize=11)
    return _save(fig, out_dir, name)


def column_scaled(grid: np.ndarray, lower: bool = False) -> np.ndarray:
    """Each column of ``grid`` scaled from its worst value (0) to its best (1).

    A lower-is-better metric (``lower``) has its best value lowest. A column
    whose finite values are all equal is 1 throughout (all tied best); NaN
    stays NaN.

    Examples
    --------
    >>> column_scaled(np.array([[0.9, 0.2], [0.7, 0.4]]), lower=False).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    grid = np.asarray(grid, dtype=float)
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column
            lo, hi = np.nanmin(grid, axis=0), np.nanmax(grid, axis=0)
        span = hi - lo
        scaled = (grid - lo) / np.where(span > 1e-12, span, 1.0)
        scaled = np.where(span > 1e-12, scaled, 1.0)
        if lower:
            scaled = np.where(span > 1e-12, 1.0 - scaled, 1.0)
    return np.where(np.isfinite(grid), scaled, np.nan)


def _plain(text) -> str:
    """``text`` as matplotlib shows it literally: a ``$`` in a participant's name would
    otherwise start mathematical text."""
    return str(text).replace("$", r"\$")


def _keys(column: pd.Series) -> list:
    """A column's values in its categories' order (categorical) or as they first appear."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        seen = set(column)
        return [c for c in column.cat.categories if c in seen]
    return list(pd.unique(column))
