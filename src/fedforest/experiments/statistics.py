"""Tables and statistical tests for missing-split experiments (no plotting).

Holds the tidy-frame vocabulary (:data:`COLUMNS`, :data:`METHOD_ORDER`,
:data:`DISPLAY_NAMES`, :func:`display_name`), input validation, the
per-repetition site means (:func:`per_repetition`; NaN scores are skipped and
Jaccard values rounded to 10 decimals, so ``0.30000000000000004`` and ``0.3``
are one scenario), the summary tables of Tables II-III
(:func:`summary_table`, :func:`summary_tables`), the relative gain of eq. 25
(:func:`relative_gain`), and the Friedman test, Nemenyi critical difference,
average ranks and cliques behind Figure 5 (:func:`average_ranks`,
:func:`nemenyi_cd`). It imports numpy, pandas, scipy and, within fedforest,
only :mod:`fedforest.vocabulary`; never matplotlib, :mod:`.figures` or
:mod:`.markdown`.

Metrics of :data:`~fedforest.vocabulary.LOWER_IS_BETTER` (Brier score,
log-loss, ECE, the regression errors RMSE and MAE, and the integrated Brier
score of survival curves) are ranked, compared
and marked best the other way round (:func:`lower_is_better`): rank 1 is the
lowest score, a relative gain is the relative reduction, and the best value
of a table is its smallest. Every metric of
:data:`~fedforest.vocabulary.METRICS` and
:data:`~fedforest.vocabulary.REGRESSION_METRICS` (RMSE, MAE, R²) and
:data:`~fedforest.vocabulary.SURVIVAL_METRICS` (Harrell's and Uno's C, the
integrated Brier score, the time-dependent AUC) can be tabulated.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats

from .. import rules
from ..vocabulary import (
    EXPERIMENT_METHODS,
    LOWER_IS_BETTER,
    METRICS,
    REGRESSION_METRICS,
    STRATEGY_NAMES,
    SURVIVAL_METRICS,
)

logger = logging.getLogger("fedforest.experiments.reports")  # the name used before the split

__all__ = [
    "COLUMNS",
    "DISPLAY_NAMES",
    "METHOD_ORDER",
    "RankTest",
    "average_ranks",
    "best_value",
    "display_name",
    "lower_is_better",
    "nemenyi_cd",
    "per_repetition",
    "relative_gain",
    "summary_table",
    "summary_tables",
]

COLUMNS = ("dataset", "n_sites", "jaccard", "rep", "site", "method", "metric", "value")
"""Columns every tidy results frame must have (extra columns are ignored)."""

METHOD_ORDER = EXPERIMENT_METHODS
"""Order of methods in tables and figures; unknown methods follow, sorted."""

DISPLAY_NAMES = STRATEGY_NAMES
"""Names used in figures and in ``report.md`` (the rules' display names,
:func:`fedforest.rules.display_names`)."""

_METRIC_NAMES = {
    "auprc": "AUPRC",
    "auc": "AUC",
    "mcc": "MCC",
    "accuracy": "Accuracy",
    "brier": "Brier score",
    "log_loss": "Log-loss",
    "ece": "ECE",
    "rmse": "RMSE",
    "mae": "MAE",
    "r2": "R²",
    "cindex": "Harrell's C",
    "uno_cindex": "Uno's C",
    "ibs": "Integrated Brier score",
    "td_auc": "Time-dependent AUC",
}
#: Every metric a results frame may hold: classification's, regression's, then survival's.
_ALL_METRICS = (*METRICS, *REGRESSION_METRICS, *SURVIVAL_METRICS)
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
    ('Park et al. tree selection', 'Marginal prediction', 'custom')
    """
    return rules.display_name(method)


def _metric_name(metric: str) -> str:
    return _METRIC_NAMES.get(metric, metric)


def lower_is_better(metric: str) -> bool:
    """Whether a lower ``metric`` is better (:data:`~fedforest.vocabulary.LOWER_IS_BETTER`).

    Examples
    --------
    >>> lower_is_better("brier"), lower_is_better("auc")
    (True, False)
    """
    return metric in LOWER_IS_BETTER


def best_value(values, metric: str) -> float:
    """The best of ``values`` for ``metric`` (NaN skipped; NaN when none is finite).

    Examples
    --------
    >>> best_value([0.2, 0.1, float("nan")], "brier"), best_value([0.2, 0.1], "auc")
    (0.1, 0.2)
    """
    series = pd.Series(values, dtype=float)
    return float(series.min() if lower_is_better(metric) else series.max())


def _single_metric(df: pd.DataFrame) -> str:
    """The one metric of ``df`` (ranks are taken within one metric)."""
    metrics = sorted(df["metric"].unique())
    if len(metrics) != 1:
        raise ValueError(f"rank one metric at a time; the results hold {metrics}")
    return metrics[0]


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
    if metric not in _ALL_METRICS:
        raise ValueError(f"unknown metric {metric!r}; expected one of {list(_ALL_METRICS)}")
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
        One of :data:`~fedforest.vocabulary.METRICS` or
        :data:`~fedforest.vocabulary.REGRESSION_METRICS`; must be present in ``tidy``.
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
    NaN. For a lower-is-better metric (:func:`lower_is_better`) the sign is
    turned, ``G = (Score[baseline] - Score[m]) / Score[baseline]`` (the
    relative reduction), so a positive gain is an improvement for every metric.

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
        Values are fractions (0.05 = +5 %; better than the baseline when positive).

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
    if lower_is_better(metric):
        gains = -gains
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
    """Average ranks (1 = best) of the one metric of ``df``, Friedman test, Nemenyi CD."""
    lower = lower_is_better(_single_metric(df))
    wide = _rank_matrix(df)
    ranks = wide.rank(axis=1, ascending=lower, method="average")
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
    on the per-repetition site means; the best score (the highest, or the
    lowest for a lower-is-better metric) gets rank 1 and ties share the
    average rank. Blocks where some method has no score are left
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


def _fmt_p(p: float) -> str:
    """p-value for display; values below 1e-16 (float underflow territory) as a bound."""
    return "n/a" if not np.isfinite(p) else ("< 1e-16" if p < 1e-16 else f"= {p:.3g}")
