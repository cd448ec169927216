"""``fedforest report``: a job's ``results.json`` as figures a clinician looks at.

Reads ``results.json`` through :class:`~fedforest.federation.job_results.JobResults`
(:func:`read_results_file`) and writes into a folder of its own (default:
:func:`default_out`, beside the run's folder, never inside it), under the folder rule of :mod:`fedforest.outputs`
(:data:`REPORT_COMMAND` is the marker's command), with
:func:`write_job_report`:

- ``report.md``: the job's report (:func:`~fedforest.federation.results.render_report`),
  a Calibration section (per site: the Brier score, log-loss and ECE of every
  strategy with its calibration method, what ``auto`` deployed and its
  runner-up, the reliability diagram) and the strategy-by-site chart;
- ``reliability-<site>.png`` for every site whose rows carry calibration bins:
  the strategies of :data:`RELIABILITY_STRATEGIES` that have bins, ``auto``
  labelled with the strategy and calibration it chose;
- ``strategies-by-site.png``: :data:`CHART_METRICS` (those present) by
  strategy and site.

A ``results.json`` written before the job recorded calibration gets what it
has, and ``report.md`` lists what is missing. The figures are drawn by
:mod:`fedforest.experiments.calibration_figures` (never shipped to the sites).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..intervals import INTERVAL_METRICS
from ..vocabulary import CALIBRATION_METRICS, METRICS, REGRESSION_METRICS

if TYPE_CHECKING:
    from ..federation.job_results import JobResults

#: The command named in the output folder's marker.
REPORT_COMMAND = "fedforest report"
#: The largest ``results.json`` read (a job writes a few hundred kilobytes).
MAX_RESULTS_BYTES = 64 * 1024**2
#: The strategies of a site's reliability diagram (when their rows have bins), deployed first.
RELIABILITY_STRATEGIES = ("auto", "mp", "local", "intersection")
#: The metrics of the strategy-by-site chart, left to right (those the results hold).
CHART_METRICS = ("auc", "brier")
#: The chart's metrics for a regression job.
REGRESSION_CHART_METRICS = ("rmse", "mae")
#: The chart's file name.
CHART_FILE = "strategies-by-site.png"
_HEADERS = {"brier": "Brier", "log_loss": "log-loss", "ece": "ECE"}


def read_results_file(path) -> JobResults:
    """``results.json`` at ``path``, read with :meth:`JobResults.from_dict`.

    Raises
    ------
    FileNotFoundError
        If there is no such file.
    ValueError
        If it is not JSON, not a results file, or has a row the report cannot
        draw (:func:`check_rows`); the message names ``path``.
    """
    import json

    from ..federation.job_results import JobResults

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such results file: {path}")
    size = path.stat().st_size
    if size > MAX_RESULTS_BYTES:
        raise ValueError(
            f"{path} is not a fedforest results.json: it has {size} bytes; allowed: at most "
            f"{MAX_RESULTS_BYTES} (a job's results.json is a few hundred kilobytes)"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is not a fedforest results.json: not JSON ({err})") from None
    except RecursionError:
        raise ValueError(
            f"{path} is not a fedforest results.json: its JSON is nested too deeply"
        ) from None
    results = JobResults.from_dict(data, source=str(path))
    check_rows(results, str(path))
    return results


def check_rows(results, source: str = "results") -> None:
    """Refuse metric rows the report cannot read, naming ``source``, the site, strategy and key.

    Every score of :data:`~fedforest.vocabulary.METRICS` is a number or null,
    ``bins`` are calibration bins (:func:`~fedforest.experiments.calibration_figures.check_bins`)
    and ``runner_up`` is null or the name of a candidate.
    """
    from ..experiments.calibration_figures import check_bins

    for _, _, row, where in _rows(results, source):
        for metric in METRICS:
            _number(row, metric, where)
        if row.get("bins") is not None:  # null: a regression row, or a row never scored
            check_bins(row["bins"], f"{where}['bins']")
        _runner_up(row, where)


def write_job_report(results, out_dir, source: str = "results") -> Path:
    """Write ``report.md`` and the figures of a job's results into ``out_dir``.

    Parameters
    ----------
    results : JobResults or mapping
        The job's results (a ``results.json`` dict is read with
        :func:`~fedforest.federation.job_results.as_results`).
    out_dir : path
        The folder (created if needed; the caller applies the folder rule).
    source : str
        Where the results come from, named in messages about malformed rows.

    Returns
    -------
    pathlib.Path
        The path of ``report.md``.
    """
    from ..federation.job_results import as_results
    from ..federation.results import render_report

    r = as_results(results)
    check_rows(r, source)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    md = [render_report(r).rstrip(), ""]
    md += _calibration_section(r, out, source)
    md += _chart_section(r, out, source)
    path = out / "report.md"
    path.write_text("\n".join(md).rstrip() + "\n", encoding="utf-8")
    return path


# --------------------------------------------------------------------------- rows


def _number(row: Mapping, key: str, where: str) -> float | None:
    value = row.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: {key!r} is {value!r}, expected a number or null")
    return float(value) if math.isfinite(value) else None


def _rows(r, source: str):
    """Every ``(site, strategy, row, where)`` of the results, rows checked to be dicts."""
    for site, per in r.metrics.items():
        if not isinstance(per, Mapping):
            raise ValueError(
                f"{source}: metrics[{site!r}] is {type(per).__name__}, expected a dict"
            )
        for strategy, row in per.items():
            where = f"{source}: metrics[{site!r}][{strategy!r}]"
            if not isinstance(row, Mapping):
                raise ValueError(f"{where} is {type(row).__name__}, expected a dict")
            yield site, strategy, row, where


def _regression(rows) -> bool:
    """Whether the rows are a regression job's: regression scores and no classification one."""
    keys = {k for _, _, row, _ in rows for k in row}
    return bool(keys & set(REGRESSION_METRICS)) and not keys & set(METRICS)


def _method(row: Mapping) -> str | None:
    """The calibration a row's probabilities went through (``auto``: the one it chose)."""
    return row.get("chosen_calibration") or row.get("calibration")


def _chooses(strategy: str) -> bool:
    """Whether ``strategy`` chose another on validation rows (``auto``; the registry says)."""
    from .. import rules

    rule = rules.find(strategy)
    return rule is not None and rule.family == rules.CHOICE


def _label(strategy: str, row: Mapping) -> str:
    """A curve's legend: display name, ``auto``'s choice, and the calibration method."""
    from ..experiments.statistics import display_name

    name = display_name(strategy)
    if _chooses(strategy) and row.get("chosen"):
        name += f" → {display_name(str(row['chosen']))}"
    method = _method(row)
    if method is None:
        return name
    return f"{name} (no calibration)" if method == "none" else f"{name} + {method}"


# --------------------------------------------------------------------------- sections


def _calibration_section(r, out: Path, source: str) -> list[str]:
    """The Calibration section: what is missing, then per site its table, choice and diagram."""
    lines = ["## Calibration", ""]
    if not r.metrics:
        return [*lines, "> These results hold no per-site metrics: nothing to draw.", ""]
    rows = list(_rows(r, source))
    if _regression(rows):
        return [
            *lines,
            "> A regression job predicts numbers, not risks: no calibration and no "
            "reliability diagram.",
            "",
        ]
    scored = any(
        _number(row, m, w) is not None for _, _, row, w in rows for m in CALIBRATION_METRICS
    )
    binned = any(row.get("bins") is not None for _, _, row, _ in rows)
    autos = [row for _, s, row, _ in rows if _chooses(s)]
    uncalibrated = _before_calibration(r)
    missing = []
    if not scored:
        missing.append("the calibration metrics (Brier score, log-loss, ECE): no table")
    if not binned:
        missing.append("the calibration bins: no reliability diagrams")
    if uncalibrated or not any("calibration" in row for _, _, row, _ in rows):
        missing.append("the calibration method of each strategy")
    if autos and (uncalibrated or not any("chosen_calibration" in row for row in autos)):
        missing.append("`auto`'s calibration choice and its runner-up")
    if missing:
        lines += [
            "This results.json was written by a job that did not record everything this "
            "section shows. Missing:",
            "",
            *(f"- {m}" for m in missing),
            "",
        ]
    if scored:
        lines += [
            "Lower is better for all three scores; the best of each site is in bold. A "
            "reliability diagram puts each bin's mean predicted risk against the share of "
            "its rows that had the outcome: on the diagonal, a predicted 30 % means 30 %.",
            "",
        ]
    for site, per in r.metrics.items():
        lines += _site_calibration(r, site, per, out, source, scored, binned)
    return lines


def _site_calibration(r, site, per, out, source, scored, binned) -> list[str]:
    from ..experiments.calibration_figures import (
        MIN_BIN_ROWS,
        check_bins,
        merge_sparse_bins,
        plot_reliability,
    )
    from ..experiments.statistics import _slug
    from ..federation.results import markdown_text, site_counts

    where = f"{source}: metrics[{site!r}]"
    auto = per.get("auto")
    lines = [f"### {markdown_text(site)} ({site_counts(r, site)})", ""]
    if site in r.sample_warnings:
        lines += [f"> **Warning:** {markdown_text(r.sample_warnings[site])}.", ""]
    head = len(lines)
    if scored:
        lines += _score_table(per, where)
    if auto is not None and auto.get("chosen"):
        lines += [_deployed(auto, f"{where}['auto']", not _before_calibration(r)), ""]
    curves, labels = {}, {}
    for strategy in RELIABILITY_STRATEGIES:
        row = per.get(strategy)
        if row is not None and row.get("bins") is not None:
            curves[strategy] = check_bins(row["bins"], f"{where}[{strategy!r}]['bins']")
            labels[strategy] = _label(strategy, row)
    if any(merge_sparse_bins(b) for b in curves.values()):
        png = plot_reliability(
            curves,
            out,
            f"reliability-{_slug(site)}.png",
            labels=labels,
            title=f"{site}: predicted against observed risk ({site_counts(r, site)})",
        )
        lines += [f"![Reliability diagram, {markdown_text(site)}]({png.name})", ""]
    elif curves:
        lines += [
            f"> Fewer than {MIN_BIN_ROWS} test rows at {markdown_text(site)}: no reliability "
            "diagram (a point needs that many rows).",
            "",
        ]
    elif binned:
        lines += [
            f"> No calibration bins for {', '.join(RELIABILITY_STRATEGIES)} at "
            f"{markdown_text(site)}: no reliability diagram.",
            "",
        ]
    return lines if len(lines) > head else []


def _score_table(per: Mapping, where: str) -> list[str]:
    """One site's calibration table: strategy, calibration method, scores (best in bold), the
    Brier score with its bootstrap interval."""
    from ..federation.results import markdown_text, strategy_name, with_interval

    values = {
        s: {m: _number(row, m, f"{where}[{s!r}]") for m in CALIBRATION_METRICS}
        for s, row in per.items()
    }
    best = {
        m: min((v[m] for v in values.values() if v[m] is not None), default=None)
        for m in CALIBRATION_METRICS
    }
    lines = [
        "| strategy | calibration | " + " | ".join(_HEADERS[m] for m in CALIBRATION_METRICS) + " |",
        "|---|---|" + "---|" * len(CALIBRATION_METRICS),
    ]
    for strategy, row in per.items():
        name = strategy_name(strategy)
        if row.get("chosen"):
            name += f" → {strategy_name(row['chosen'])}"
        cells = []
        for m in CALIBRATION_METRICS:
            v = values[strategy][m]
            text = "–" if v is None else f"{v:.3f}"
            bold = v is not None and text == f"{best[m]:.3f}"
            text = f"**{text}**" if bold else text
            if v is not None and m in INTERVAL_METRICS:
                text = f"{text} {with_interval(row, m).removeprefix(f'{v:.3f}').strip()}".strip()
            cells.append(text)
        method = markdown_text(_method(row) or "–")
        lines.append(f"| {name} | {method} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _before_calibration(r) -> bool:
    """Whether the results come from a file written before the job recorded calibration
    (results version 1: its rows read with no method, choice or runner-up recorded)."""
    return r.read_version is not None and r.read_version < 2


def _deployed(auto: Mapping, where: str, recorded: bool = True) -> str:
    """What ``auto`` deployed at a site, and its runner-up when the results say
    (``recorded``: the results record its calibration and runner-up)."""
    from ..federation.results import markdown_text, strategy_name

    text = f"Deployed (`auto`): {strategy_name(auto['chosen'])}"
    method = auto.get("chosen_calibration") if recorded else None
    if method:
        text += (
            " without calibration"
            if method == "none"
            else f" with {markdown_text(method)} calibration"
        )
    text += "."
    if not recorded or "runner_up" not in auto:
        return text
    runner = _runner_up(auto, where)
    if runner is None:
        return text + " No runner-up: it was the only candidate with a validation score."
    validation = auto.get("validation")
    score = validation.get(runner) if isinstance(validation, Mapping) else None
    shown = f" (validation score {score:.4g})" if isinstance(score, (int, float)) else ""
    return text + f" Runner-up: {strategy_name(runner)}{shown}."


def _runner_up(row: Mapping, where: str) -> str | None:
    """A row's ``runner_up`` (``None`` when absent or null), checked."""
    runner = row.get("runner_up")
    if runner is None:
        return None
    if not isinstance(runner, str) or not runner:
        raise ValueError(
            f"{where}: 'runner_up' is {runner!r}, expected null or the name of a candidate"
        )
    return runner


def _chart_section(r, out: Path, source: str) -> list[str]:
    """The strategy-by-site chart of :data:`CHART_METRICS`, or why there is none."""
    import pandas as pd

    from ..experiments.calibration_figures import plot_strategy_grid
    from ..experiments.statistics import _metric_name

    rows = list(_rows(r, source))
    chart = REGRESSION_CHART_METRICS if _regression(rows) else CHART_METRICS
    records = [
        (strategy, site, m, _number(row, m, where))
        for site, strategy, row, where in rows
        for m in chart
    ]
    present = [m for m in chart if any(v is not None for *_, k, v in records if k == m)]
    lines = ["## Strategies by site", ""]
    if not present:
        return [
            *lines,
            f"> These results hold no {' or '.join(chart)} scores: no chart.",
            "",
        ]
    order = {s: i for i, s in enumerate(r.strategies)}
    records.sort(key=lambda rec: order.get(rec[0], len(order)))  # stable: sites keep their order
    frame = pd.DataFrame(
        [(s, site, m, math.nan if v is None else v) for s, site, m, v in records],
        columns=["strategy", "site", "metric", "value"],
    )
    names = " and ".join(_metric_name(m) for m in present)
    png = plot_strategy_grid(
        frame, out, CHART_FILE, metrics=present, title=f"{r.job}: {names} by strategy and site"
    )
    lines += [
        "Colour is scaled within each site: the brightest cell is the strategy that wins at "
        "that site, whatever the site's level; the values are written in the cells.",
        "",
        f"![{names} by strategy and site]({png.name})",
        "",
    ]
    absent = [_metric_name(m) for m in chart if m not in present]
    if absent:
        lines += [f"> No {' or '.join(absent)} in these results: the chart shows {names} only.", ""]
    return lines


# --------------------------------------------------------------------------- command


def _report(args: argparse.Namespace) -> int:
    from ..outputs import claim_dir, record_dir

    source = Path(args.results)
    results = read_results_file(source)  # a bad file is refused before any folder is touched
    out = Path(args.out) if args.out else default_out(source)
    claim_dir(out, REPORT_COMMAND, inputs=[source])
    try:
        path = write_job_report(results, out, source=str(source))
    finally:
        record_dir(out, REPORT_COMMAND)
    for site, why in results.sample_warnings.items():
        print(f"warning: {site}: {why}", file=sys.stderr)
    print(f"report: {path}")
    return 0


def default_out(source) -> Path:
    """Where ``fedforest report`` writes by default: beside the run's folder, never in it.

    A ``results.json`` inside a folder that a fedforest run wrote (a simulator
    workspace, the ``--out`` of ``job poc`` or ``job prod``: the outermost
    folder above it holding :data:`~fedforest.outputs.MARKER`) gets
    ``<that folder>-report/`` next to it, so the next run into that folder
    finds nothing it did not write there (and the report outlives it). Any
    other ``results.json`` gets ``report/`` beside it.

    Examples
    --------
    ``workspaces/demo/fedforest-demo/server/simulate_job/results.json`` (the
    workspace of ``make demo``) gives ``workspaces/demo-report/``.
    """
    import os

    from ..outputs import MARKER

    given = Path(source)
    run_folders = [d for d in given.absolute().parents if (d / MARKER).is_file()]
    if not run_folders:
        return given.parent / "report"
    outermost = run_folders[-1]
    out = outermost.parent / f"{outermost.name}-report"
    return out if given.is_absolute() else Path(os.path.relpath(out))


def add_parser(sub) -> None:
    """Add ``report`` to the subcommands ``sub``."""
    p = sub.add_parser(
        "report",
        help="figures of a job's results.json: reliability diagrams, strategies by site",
        description="Read a job's results.json and write report.md with a Calibration section, "
        "a reliability diagram per site and a strategy-by-site chart of AUC and Brier score. "
        "The folder is used only if it is new, empty or an earlier `fedforest report` "
        "folder (it never clears a folder of yours).",
    )
    p.add_argument("results", help="the job's results.json (the server's run folder)")
    p.add_argument(
        "--out",
        help="output folder (default: <run folder>-report/ beside the folder of the run that "
        "wrote results.json, such as workspaces/demo-report/ for make demo's workspace, so the "
        "next run there is not refused; report/ beside any other results.json)",
    )
    p.set_defaults(func=_report)
