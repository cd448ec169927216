"""A job's results on disk and on screen: payload sizes, ``report.md``, the per-site table.

:class:`~fedforest.federation.job_results.JobResults` holds the results;
this module writes them (:func:`write_results_files`, or
:func:`write_brief_results` when even the partial results cannot be
rendered), renders ``report.md`` (:func:`render_report`) and the command
line's per-site, per-strategy table (:func:`results_table`). Every function
takes a :class:`JobResults` or a ``results.json`` dict.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .. import rules
from ..privacy.policy import PrivacyPolicy
from ..vocabulary import METRICS, REGRESSION_METRICS, SURVIVAL_METRICS
from .job_results import JobResults, as_results

#: The narrowest column of the command line's table: labels column, then each value column.
LABEL_WIDTH, VALUE_WIDTH = 14, 10
#: Spaces at least between two columns of the command line's table.
GUTTER = 2
#: What each validation mode scored a site's choices on, for the report.
VALIDATION_TEXT = {
    "oob": "oob (tuning, `auto`, calibration and `wmp` scored on the training rows out of bag)",
    "holdout": "holdout (tuning, `auto`, calibration and `wmp` scored on held-out validation rows)",
}


def markdown_text(value) -> str:
    """``value`` as text that markdown (and the HTML it may hold) shows as it is.

    Site, strategy and dataset names and error messages come from participants: a name
    holding ``<script>``, ``|`` or ``**`` must neither run, break a table nor change the
    emphasis. HTML's special characters become entities, markdown's inline markers are
    escaped with a backslash, and line breaks become spaces.

    Examples
    --------
    >>> markdown_text("site|<b>1</b>*")
    'site\\|&lt;b&gt;1&lt;/b&gt;\\*'
    """
    text = re.sub(r"[\r\n]+", " ", str(value))
    text = re.sub(r"([\\`*_\[\]|~])", r"\\\1", text)
    return html.escape(text, quote=False)


def prose_text(value, table: bool = False) -> str:
    """Free text from participants (an error, a reason) as markdown shows it: HTML's special
    characters as entities and line breaks as spaces (``table``: ``|`` escaped too); other
    characters are left as written, so a message reads as the log says it."""
    text = html.escape(re.sub(r"[\r\n]+", " ", str(value)), quote=False)
    return text.replace("|", "\\|") if table else text


def strategy_name(strategy) -> str:
    """A strategy as reports name it: spelled out (:func:`fedforest.rules.display_name`),
    an unknown name as it is (escaped, :func:`markdown_text`)."""
    return markdown_text(rules.display_name(str(strategy)))


def payload_bytes(value) -> int:
    """Approximate size of a payload on the wire (array bytes + plain values)."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, Mapping):
        return sum(len(str(k)) + payload_bytes(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return sum(payload_bytes(v) for v in value)
    return len(str(value))


def write_results_files(run_dir, results: JobResults | Mapping) -> None:
    """Write ``results.json`` (:meth:`JobResults.to_dict`) and ``report.md`` into ``run_dir``."""
    results = as_results(results)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "results.json").write_text(
        json.dumps(results.to_dict(), indent=2, default=str) + "\n"
    )
    (run_dir / "report.md").write_text(render_report(results))


def write_brief_results(run_dir, results: JobResults) -> None:
    """Write the brief ``results.json`` (:meth:`JobResults.brief_dict`) and a one-line report."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "results.json").write_text(json.dumps(results.brief_dict(), indent=2) + "\n")
    (run_dir / "report.md").write_text(
        f"# fedforest job `{results.job}`: {results.status}\n\n**Error:** {results.error}\n"
    )


def render_report(results: JobResults | Mapping) -> str:
    """A readable report of a job's results (server or swarm mode)."""
    r = as_results(results)
    mode = " (swarm mode)" if r.swarm is not None else ""
    lines = [f"# fedforest job {_code(r.job)}{mode}: {r.status}", ""]
    if r.error:
        lines += [f"**Error:** {prose_text(r.error)}", ""]
    if r.swarm is not None and r.swarm.site_states:
        lines += _swarm_sites(r)
    if r.classes_missing:
        lines += ["## Classes a site has no row of", ""]
        lines += [
            f"- {_code(s)}: {markdown_text(', '.join(map(str, lacking)))} (its trees never "
            "predict them; its metrics are on the classes it has)"
            for s, lacking in r.classes_missing.items()
        ]
        lines.append("")
    if r.dropped_sites:
        lines += ["## Dropped sites", ""]
        lines += [f"- {_code(s)}: {prose_text(why)}" for s, why in r.dropped_sites.items()]
        lines.append("")
    if r.sample_warnings:
        lines += ["## Sites with too few test rows or events", ""]
        lines += [
            f"- **{markdown_text(site)}**: {markdown_text(why)}."
            for site, why in r.sample_warnings.items()
        ]
        lines.append("")
    if r.metrics:
        lines += _metric_tables(r)
        lines += _survival_curves(r)
    if r.election:
        st = r.election["stats"]
        fd = r.election["freedom_degree"]
        kept_at = (
            "every feature, which tuning scored best" if fd is None else f"freedom degree {fd:.4g}"
        )
        lines += [
            "## Feature election",
            "",
            f"Kept {st['kept']} features (intersection {st['intersection']}, union "
            f"{st['union']}, disputed {st['disputed']}) at {kept_at}: "
            + markdown_text(", ".join(map(str, r.election["selected"]))),
            "",
        ]
    if r.tuning:
        lines += ["| freedom degree | features kept | validation score |", "|---|---|---|"]
        lines += [
            f"| {_freedom_text(h['freedom_degree'])} | {h['kept']} | {h['score']:.4f} |"
            for h in r.tuning["history"]
        ]
        lines.append("")
    if any(r.validation.values()):
        lines += ["## Validation", ""]
        lines += [
            f"- {_code(site)}: {VALIDATION_TEXT.get(mode, 'not reported')}"
            for site, mode in r.validation.items()
        ]
        lines.append("")
    if r.privacy:
        lines += ["## Privacy policies", ""]
        lines += [
            f"- {_code(site)}: {describe_policy(policy)}"  # validated keys and numbers
            for site, policy in r.privacy.items()
        ]
        lines.append("")
    if r.model is not None and r.model.site_models:
        lines += [
            "## The models the sites were sent",
            "",
            f"`evaluation.trees_per_site`: each site evaluated its own trees and those its "
            f"columns reach best, of the {r.model.trees} pooled trees "
            f"({r.model.bytes:,} bytes).",
            "",
        ]
        lines += [
            f"- {_code(site)}: {v['trees']} trees, {v['bytes']:,} bytes"
            for site, v in r.model.site_models.items()
        ]
        lines.append("")
    lines += _timings(r.phase_seconds)
    if r.payload_bytes:
        lines += ["## Payload sizes (bytes)", ""]
        for site, sizes in r.payload_bytes.items():
            lines.append(
                f"- {_code(site)}: "
                + ", ".join(f"{markdown_text(k)} {v:,}" for k, v in sizes.items())
            )
        lines.append("")
    return "\n".join(lines)


def _freedom_text(fd) -> str:
    """A tuning step's freedom degree; ``None`` is the mask of every feature."""
    return "every feature" if fd is None else f"{fd:.4f}"


def _code(name) -> str:
    """A participant's name shown as code: between backticks when it holds no backtick and
    nothing of HTML's (code shows the rest as it is), else as escaped text
    (:func:`markdown_text`)."""
    text = re.sub(r"[\r\n]+", " ", str(name))
    return markdown_text(text) if re.search(r"[`<>&]", text) else f"`{text}`"


def _swarm_sites(r: JobResults) -> list[str]:
    """The Sites section of a swarm job's report: states, encryption, model digests."""
    swarm = r.swarm
    lines = ["## Sites", "", "| site | state | metrics |", "|---|---|---|"]
    for site, state in swarm.site_states.items():
        shown = (
            "withheld by the site"
            if site in swarm.metrics_withheld
            else ("reported" if site in r.metrics else "–")
        )
        error = swarm.site_errors.get(site)
        state = prose_text(f"{state}{': ' + error if error else ''}", table=True)
        lines.append(f"| {markdown_text(site)} | {state} | {shown} |")
    lines.append("")
    if swarm.peer_messages_encrypted:
        said = {True: "encrypted end to end", False: "not encrypted end to end", None: "unknown"}
        lines += [
            "Messages between sites: "
            + ", ".join(
                f"{_code(s)} {said.get(v, 'unknown')}"
                for s, v in swarm.peer_messages_encrypted.items()
            )
            + ".",
            "",
        ]
    if swarm.model_digest:
        lines += [
            "Every finished site pooled the same model (SHA-256 "
            f"{_code(str(swarm.model_digest)[:16] + '…')}).",
            "",
        ]
    elif swarm.model_digests:
        lines += ["**The finished sites pooled different models:**", ""]
        lines += [f"- {_code(s)}: {_code(d)}" for s, d in swarm.model_digests.items()]
        lines.append("")
    return lines


#: How the report names each metric.
METRIC_LABELS = {
    "auprc": "AUPRC",
    "auc": "AUC",
    "mcc": "MCC",
    "accuracy": "accuracy",
    "brier": "Brier",
    "log_loss": "log-loss",
    "ece": "ECE",
    "rmse": "RMSE",
    "mae": "MAE",
    "r2": "R²",
    "cindex": "Harrell's C",
    "uno_cindex": "Uno's C",
    "ibs": "IBS",
    "td_auc": "td-AUC",
}


def _metrics_of(r: JobResults) -> list[str]:
    """The metrics the rows carry, in :data:`~fedforest.vocabulary.METRICS` order (then the
    regression and the survival metrics)."""
    present = {k for per in r.metrics.values() for row in per.values() for k in row}
    return [m for m in (*METRICS, *REGRESSION_METRICS, *SURVIVAL_METRICS) if m in present]


def _strategy_label(strategy: str, row: Mapping, markdown: bool = True) -> str:
    """A row's name in the report: spelled out (:func:`strategy_name`); ``auto`` names its
    choice, ``wmp`` its weight. ``markdown=False``: the command line's plain text, with the
    names a job's configuration spells (``evaluation.strategies``)."""
    name_of = strategy_name if markdown else str
    name = name_of(strategy)
    if row.get("chosen"):
        name += f" → {name_of(row['chosen'])}"
        if row.get("chosen_calibration") not in (None, "none"):
            name += f" + {row['chosen_calibration']}"
        if row.get("runner_up"):
            name += f" (runner-up {name_of(row['runner_up'])})"
    if row.get("guess_weight") is not None:
        name += f" (guess weight {row['guess_weight']:g})"
    return name


def skipped_calibrations(per: Mapping) -> dict[str, list[str]]:
    """``{why: strategies}``: the rows of one site whose calibration methods were skipped
    (their ``calibration_skipped``), the strategies that share a reason together."""
    out: dict[str, list[str]] = {}
    for strategy, row in per.items():
        why = row.get("calibration_skipped")
        if why:
            out.setdefault(str(why), []).append(str(strategy))
    return out


def _which(strategies: list[str], per: Mapping, name_of) -> str:
    """The strategies a note is about: ``every strategy``, or their names."""
    if len(strategies) == len(per) > 1:
        return "every strategy"
    return ", ".join(name_of(s) for s in strategies)


def site_counts(r: JobResults, site: str) -> str:
    """A site's test rows and events as the report heads its tables, e.g. ``250 test rows,
    61 events`` (the events when known)."""
    rows, events = r.test_rows.get(site), r.test_events.get(site)
    text = f"{rows} test rows"
    return text if events is None else f"{text}, {events} events"


def with_interval(row: Mapping, metric: str) -> str:
    """A metric's value with its bootstrap 95% interval, e.g. ``0.812 (0.751–0.866)``."""
    value = row.get(metric)
    intervals = row.get("intervals")
    interval = intervals.get(metric) if isinstance(intervals, Mapping) else None
    if value is None or interval is None:
        return _fmt(value)
    return f"{value:.3f} ({interval[0]:.3f}–{interval[1]:.3f})"


def _metric_tables(r: JobResults) -> list[str]:
    """Every site's table of strategies, then the mean over sites."""
    metrics = _metrics_of(r)
    labels = [METRIC_LABELS[m] for m in metrics]
    calibrated = any(
        row.get("calibration") not in (None, "none")
        for per in r.metrics.values()
        for row in per.values()
    )
    lines = ["## Test metrics per site and strategy", ""]
    if any(m in metrics for m in ("brier", "log_loss", "ece")):
        lines += [
            "Brier, log-loss and ECE (expected calibration error): lower is better. Accuracy "
            "and MCC threshold the (calibrated) probabilities at the most probable class.",
            "",
        ]
    if any(m in metrics for m in ("rmse", "mae")):
        lines += ["RMSE and MAE: lower is better (in the target's unit); R²: higher is better.", ""]
    if any(row.get("intervals") for per in r.metrics.values() for row in per.values()):
        lines += [
            "In brackets: the 95% interval of the score over the site's test rows (percentile "
            "bootstrap, the same resamples for every strategy of a site). Strategies whose "
            "intervals overlap widely cannot be told apart on these rows.",
            "",
        ]
    extra = ["calibration"] if calibrated else []
    warnings = r.sample_warnings
    for site, per in r.metrics.items():
        header = ["strategy", *labels, *extra, "trees kept", "fallback rows"]
        lines += [f"### {markdown_text(site)} ({site_counts(r, site)})", ""]
        if site in warnings:
            lines += [f"> **Warning:** {markdown_text(warnings[site])}.", ""]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for strategy, row in per.items():
            cells = [_strategy_label(strategy, row), *(with_interval(row, m) for m in metrics)]
            if calibrated:
                cells.append(markdown_text(row.get("calibration") or "none"))
            cells += [f"{row.get('mean_trees_kept', 0):.1f}", str(row.get("fallback_rows", 0))]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        for why, strategies in skipped_calibrations(per).items():
            names = _which(strategies, per, strategy_name)
            lines += [f"> **Calibration skipped** ({names}): {prose_text(why)}.", ""]
    lines += [
        "### Mean over sites",
        "",
        "| strategy | " + " | ".join(labels) + " |",
        "|---|" + "---|" * len(labels),
    ]
    for strategy in next(iter(r.metrics.values())):
        vals = {
            m: [
                per[strategy].get(m)
                for per in r.metrics.values()
                if strategy in per and per[strategy].get(m) is not None
            ]
            for m in metrics
        }
        lines.append(
            f"| {strategy_name(strategy)} | "
            + " | ".join(_fmt(float(np.mean(v)) if v else None) for v in vals.values())
            + " |"
        )
    lines.append("")
    return lines


def _survival_curves(r: JobResults) -> list[str]:
    """A survival job's curves at each site, for the strategy it deploys (``auto``'s choice,
    else the first strategy): predicted survival against Kaplan-Meier in risk groups of
    the test rows at three times of the grid, and the time-dependent AUC and calibration at
    each horizon."""
    sites = [
        (site, per)
        for site, per in r.metrics.items()
        if any(row.get("survival_curves") for row in per.values())
    ]
    if not sites:
        return []
    lines = [
        "## Survival by risk group and calibration",
        "",
        "Each site's test rows in groups by predicted risk (lowest first): the mean predicted "
        "survival beside the Kaplan-Meier estimate of the group's rows; then, at each horizon "
        "(`survival.horizons`; by default the time grid's middle time), the time-dependent AUC "
        "of the risk score and, in bins of predicted survival there, the mean prediction "
        "beside Kaplan-Meier (ICI: their mean absolute difference, weighted by rows). The "
        "strategy is the one the site deploys.",
        "",
    ]
    for site, per in sites:
        chosen = per.get("auto", {}).get("chosen")
        name = "auto" if chosen else next(s for s, row in per.items() if row.get("survival_curves"))
        curves = per[name].get("survival_curves")
        if not curves:
            continue
        times = curves["times"]
        picks = sorted({len(times) // 4, len(times) // 2, (3 * len(times)) // 4})
        label = strategy_name(chosen or name)
        lines += [f"### {markdown_text(site)} ({markdown_text(label)})", ""]
        header = ["risk group", "rows", "events"]
        header += [f"S({times[i]:g}) predicted / Kaplan-Meier" for i in picks]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for k, group in enumerate(curves["groups"], start=1):
            cells = [str(k), str(group["rows"]), str(group["events"])]
            cells += [f"{group['predicted'][i]:.3f} / {group['observed'][i]:.3f}" for i in picks]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        for at in curves["horizons"]:
            auc = "undefined" if at["td_auc"] is None else f"{at['td_auc']:.3f}"
            lines.append(
                f"- At {at['horizon']:g}: time-dependent AUC {auc}; calibration (ICI "
                f"{at['ici']:.3f}), predicted / Kaplan-Meier survival per bin, "
                + ", ".join(
                    f"{p:.3f} / {o:.3f} ({n} rows)"
                    for p, o, n in zip(at["predicted"], at["observed"], at["rows"], strict=True)
                )
                + "."
            )
        lines.append("")
    return lines


def _timings(seconds: Mapping) -> list[str]:
    """The phase timings: one table (server mode) or one line per site (swarm mode)."""
    if seconds and all(isinstance(v, Mapping) for v in seconds.values()):
        lines = ["## Phase timings (seconds, per site)", ""]
        lines += [
            f"- {_code(site)}: " + ", ".join(f"{markdown_text(k)} {v:.2f}" for k, v in per.items())
            for site, per in seconds.items()
        ]
        return [*lines, ""]
    if seconds:
        lines = ["## Phase timings (seconds)", "", "| phase | seconds |", "|---|---|"]
        lines += [f"| {markdown_text(k)} | {v:.2f} |" for k, v in seconds.items()]
        return [*lines, ""]
    return []


def results_table(results: JobResults | Mapping) -> str:
    """The command line's summary: status, dropped sites, AUPRC per site and strategy, timings.

    Every column is as wide as its longest label or value (at least
    :data:`LABEL_WIDTH` / :data:`VALUE_WIDTH`) plus :data:`GUTTER` spaces, so
    site and strategy names of any length stay apart.
    """
    r = as_results(results)
    lines = [f"job {r.job}: {r.status}"]
    if r.error:
        lines.append(f"error: {r.error}")
    for site, why in r.dropped_sites.items():
        lines.append(f"dropped {site}: {why}")
    sites = sorted(r.metrics)
    regression = sites and any(
        "rmse" in r.metrics[s].get(x, {}) for s in sites for x in r.strategies
    )
    survival = sites and any(
        "cindex" in r.metrics[s].get(x, {}) or "ibs" in r.metrics[s].get(x, {})
        for s in sites
        for x in r.strategies
    )
    if survival:
        for metric, title in (
            ("cindex", "Harrell's C on each site's test rows"),
            ("ibs", "Integrated Brier score on each site's test rows (lower is better)"),
        ):
            if any(metric in r.metrics[s].get(x, {}) for s in sites for x in r.strategies):
                lines += ["", title, *_site_table(r, sites, metric)]
    elif regression:
        lines += [
            "",
            "RMSE on each site's test rows (lower is better)",
            *_site_table(r, sites, "rmse"),
        ]
    elif sites:
        lines += ["", "AUPRC on each site's test rows", *_site_table(r, sites, "auprc")]
        if any("brier" in r.metrics[s].get(x, {}) for s in sites for x in r.strategies):
            lines += ["", "Brier score (lower is better)", *_site_table(r, sites, "brier")]
    chosen = {
        s: _strategy_label("auto", r.metrics[s]["auto"], markdown=False).split(" → ", 1)[1]
        for s in sites
        if r.metrics[s].get("auto", {}).get("chosen")
    }
    for site, what in chosen.items():
        lines.append(f"{site} deploys {what}")
    for site in sites:
        for why, strategies in skipped_calibrations(r.metrics[site]).items():
            which = _which(strategies, r.metrics[site], str)
            lines.append(f"calibration skipped at {site} ({which}): {why}")
    counts = {s: site_counts(r, s) for s in sites}
    if counts:
        lines.append("test rows: " + "; ".join(f"{s} {c}" for s, c in counts.items()))
    for site, why in r.sample_warnings.items():
        lines.append(f"warning: {site}: {why}")
    timings = r.phase_seconds
    if timings and all(isinstance(v, Mapping) for v in timings.values()):  # per site (swarm)
        for site, per in timings.items():
            lines.append(
                f"phase seconds at {site}: " + ", ".join(f"{k} {v:.1f}" for k, v in per.items())
            )
    elif timings:
        lines.append("phase seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
    return "\n".join(lines)


def _site_table(r: JobResults, sites: list[str], metric: str) -> list[str]:
    """One metric per strategy (rows) and site (columns), with the mean over sites."""
    rows = [["strategy", *sites, "mean"]]
    for strategy in r.strategies:
        vals = [r.metrics[s].get(strategy, {}).get(metric) for s in sites]
        got = [v for v in vals if v is not None]
        mean = sum(got) / len(got) if got else None
        rows.append([strategy, *(_cell(v) for v in [*vals, mean])])
    return text_table(rows)


def text_table(rows: list[list[str]]) -> list[str]:
    """Rows of text cells as aligned lines: the first column left-aligned, the others right.

    Each column is as wide as its longest cell plus :data:`GUTTER` spaces, and
    at least :data:`LABEL_WIDTH` (first column) or :data:`VALUE_WIDTH` wide.
    """
    widths = [
        max(LABEL_WIDTH if i == 0 else VALUE_WIDTH, max(len(row[i]) for row in rows) + GUTTER)
        for i in range(len(rows[0]))
    ]
    return [
        row[0].ljust(widths[0])
        + "".join(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))
        for row in rows
    ]


def describe_policy(policy: Mapping | None) -> str:
    """One line for a site's privacy policy (``PrivacyPolicy.to_dict``): what differs from
    the default."""
    if policy is None:
        return "not reported (a site-metrics reply of version 1)"
    default = PrivacyPolicy().to_dict()
    parts = []
    for key, value in policy.items():
        if key == "share":
            withheld = [k for k, on in value.items() if not on]
            if withheld:
                parts.append("withholds " + ", ".join(withheld))
        elif value != default.get(key):
            parts.append(f"{key} {_compact(value)}")
    return "; ".join(parts) if parts else "default (nothing changed or withheld)"


def _compact(value) -> str:
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_compact(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_compact(v) for v in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _fmt(value) -> str:
    return "–" if value is None else f"{value:.3f}"


def _cell(value) -> str:
    return "-" if value is None else f"{value:.3f}"
