"""Tables, statistics and figures for missing-split experiments (a facade).

The experiment runner writes one *tidy* row per score, with the columns
``dataset, n_sites, jaccard, rep, site, method, metric, value``. The artefacts
of section V of the missing-split paper (Tajabadi & Heider, "Mind the Missing
Split") are built from such a frame by three modules, whose public names this
module re-exports so that ``from fedforest.experiments.reports import X`` keeps
working:

* :mod:`fedforest.experiments.statistics` -- tables and tests, no plotting:
  :func:`per_repetition` (the mean over the sites of a repetition, which every
  other result averages over repetitions), :func:`summary_table` /
  :func:`summary_tables` (Tables II-III), :func:`relative_gain` (eq. 25),
  :func:`average_ranks` and :func:`nemenyi_cd` (Friedman test and Nemenyi
  critical difference of Figure 5), plus :data:`COLUMNS`,
  :data:`METHOD_ORDER`, :data:`DISPLAY_NAMES` and :func:`display_name`;
* :mod:`fedforest.experiments.figures` -- the matplotlib plots (the ``plots``
  extra), drawn on the Agg canvas without pyplot:
  :func:`plot_metric_vs_jaccard` (Figures 1-2), :func:`plot_gain_heatmap`
  (Figures 3-4) and :func:`plot_critical_difference` (Figure 5);
* :mod:`fedforest.experiments.calibration_figures` -- the figures of
  calibrated risks, shared with ``fedforest report``: :func:`plot_reliability`
  (reliability diagram) and :func:`plot_strategy_grid` (strategies or methods
  by site or number of sites, one heatmap per metric);
* :mod:`fedforest.experiments.markdown` -- :func:`write_report`, all of the
  above as PNG, CSV and a ``report.md``, with its markdown helpers.

Dependencies run one way: figures import statistics, calibration_figures
imports both, markdown imports all three.
"""

from __future__ import annotations

from .calibration_figures import plot_reliability, plot_strategy_grid
from .figures import plot_critical_difference, plot_gain_heatmap, plot_metric_vs_jaccard
from .markdown import write_report
from .statistics import (
    COLUMNS,
    DISPLAY_NAMES,
    METHOD_ORDER,
    RankTest,
    average_ranks,
    display_name,
    nemenyi_cd,
    per_repetition,
    relative_gain,
    summary_table,
    summary_tables,
)

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
    "plot_reliability",
    "plot_strategy_grid",
    "relative_gain",
    "summary_table",
    "summary_tables",
    "write_report",
]
