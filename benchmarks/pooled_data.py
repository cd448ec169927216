"""The pooled-data reference beside a job's metrics, site by site: ``bench_scale``'s part.

*Pooled data* (:mod:`fedforest.experiments.reference`) is one scikit-learn
random forest with the job's forest settings and seed, trained on every
site's training and validation rows pooled and scored on each site's test
rows: the reference no federation can beat by much.
:func:`reference_quality` sets it beside each evaluated site's ``local`` (its
own trees) and ``auto`` (what it deploys) in :data:`QUALITY_METRICS`, with
their mean ± sd over the sites, ``auto`` minus pooled data and the targets:
``auto`` against ``local`` at every site (:data:`LOCAL_TOLERANCE`) and the
mean ``auto`` against pooled data (:data:`REFERENCE_TOLERANCE`);
:func:`reference_markdown` is the report's part.
"""

from __future__ import annotations

from fedforest.experiments.reference import REFERENCE, REFERENCE_LABEL

#: The metrics compared with pooled data (each is among ``site_configs/job.yaml``'s).
QUALITY_METRICS = ("auprc", "auc", "brier", "log_loss")
#: Lower is better for these.
LOWER = ("brier", "log_loss")
#: The targets against pooled data: metric -> how much worse ``auto`` may be (site mean).
REFERENCE_TOLERANCE = {"auprc": 0.01, "brier": 0.01}
#: The targets against each site's own forest: metric -> how much worse ``auto`` may be
#: than ``local`` at any evaluated site.
LOCAL_TOLERANCE = {"auprc": 0.01}


def _mean_sd(values: list[float]) -> list:
    """``[mean, sd]`` over sites (sd ``None`` for one site)."""
    mean = sum(values) / len(values)
    if len(values) < 2:
        return [round(mean, 4), None]
    sd = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5
    return [round(mean, 4), round(sd, 4)]


def reference_quality(metrics: dict, pooled: dict) -> dict:
    """``local``, ``auto`` and pooled data at every evaluated site, their means and the targets.

    ``metrics`` is ``results.json``'s (site -> strategy -> row), ``pooled``
    the reference's scores (site -> metric -> value,
    :func:`~fedforest.experiments.reference.config_reference`). Returns
    ``{"metrics", "sites": {site: {metric: {"local", "auto", "pooled_data"}}},
    "summary": {metric: {"local", "auto", "pooled_data", "auto_minus_pooled":
    [mean, sd], "worst_site": auto - pooled at the site where auto does worst}},
    "local_target": {metric: {"tolerance", "sites", "fails": [site, ...], "worst",
    "worst_site"}}, "checks": {target: bool}}`` over the sites that have all three.
    ``local_target`` is :func:`local_target` for each metric of
    :data:`LOCAL_TOLERANCE`; the checks are its targets (``auto`` at most the
    tolerance worse than ``local`` at every site) and those of
    :data:`REFERENCE_TOLERANCE` (the mean ``auto`` at most the tolerance worse
    than the mean pooled data).

    Examples
    --------
    >>> metrics = {"a": {"local": {"auprc": 0.70}, "auto": {"auprc": 0.68}}}
    >>> q = reference_quality(metrics, {"a": {"auprc": 0.69}})
    >>> q["checks"]
    {'auprc >= local - 0.01 at every site': False, 'auprc >= pooled data - 0.01': True}
    """
    sites = {}
    for site, per in sorted(metrics.items()):
        if site not in pooled:
            continue
        row = {}
        for metric in QUALITY_METRICS:
            values = {
                "local": (per.get("local") or {}).get(metric),
                "auto": (per.get("auto") or {}).get(metric),
                REFERENCE: pooled[site].get(metric),
            }
            if all(v is not None and v == v for v in values.values()):  # NaN: undefined
                row[metric] = {k: round(float(v), 4) for k, v in values.items()}
        sites[site] = row
    summary, checks, local = {}, {}, {}
    for metric, tolerance in LOCAL_TOLERANCE.items():
        target = local_target(sites, metric, tolerance)
        if target is not None:
            local[metric] = target
            checks[_local_name(metric, tolerance)] = not target["fails"]
    for metric in QUALITY_METRICS:
        have = [s for s in sites if metric in sites[s]]
        if not have:
            continue
        cells = {
            name: _mean_sd([sites[s][metric][name] for s in have])
            for name in ("local", "auto", REFERENCE)
        }
        gaps = [sites[s][metric]["auto"] - sites[s][metric][REFERENCE] for s in have]
        worst = max(gaps) if metric in LOWER else min(gaps)
        summary[metric] = {
            **cells,
            "auto_minus_pooled": _mean_sd(gaps),
            "worst_site": round(worst, 4),
            "sites": len(have),
        }
        tolerance = REFERENCE_TOLERANCE.get(metric)
        if tolerance is not None:
            gap = round(cells["auto"][0] - cells[REFERENCE][0], 4)
            if metric in LOWER:
                checks[f"{metric} <= pooled data + {tolerance:g}"] = gap <= tolerance
            else:
                checks[f"{metric} >= pooled data - {tolerance:g}"] = gap >= -tolerance
    return {
        "metrics": list(QUALITY_METRICS),
        "sites": sites,
        "summary": summary,
        "local_target": local,
        "checks": checks,
    }


def local_target(sites: dict, metric: str, tolerance: float) -> dict | None:
    """``auto`` against ``local`` in ``metric`` at every site: the sites more than
    ``tolerance`` worse, and the worst difference.

    ``sites`` is :func:`reference_quality`'s (site -> metric -> ``{"local", "auto",
    ...}``). Returns ``{"tolerance", "sites": n, "fails": [site, ...], "worst": auto -
    local at the site where auto does worst, "worst_site"}`` (lower is better for
    :data:`LOWER`: there the worst difference is the largest), or ``None`` if no site
    has the metric. Differences are of the rounded scores, rounded to 4 decimals.

    Examples
    --------
    >>> sites = {"a": {"auprc": {"local": 0.70, "auto": 0.68}},
    ...          "b": {"auprc": {"local": 0.60, "auto": 0.61}}}
    >>> local_target(sites, "auprc", 0.01)
    {'tolerance': 0.01, 'sites': 2, 'fails': ['a'], 'worst': -0.02, 'worst_site': 'a'}
    """
    gaps = {
        site: round(row[metric]["auto"] - row[metric]["local"], 4)
        for site, row in sites.items()
        if metric in row
    }
    if not gaps:
        return None
    lower = metric in LOWER
    fails = [s for s, g in gaps.items() if (g > tolerance if lower else g < -tolerance)]
    worst_site = (max if lower else min)(gaps, key=gaps.get)
    return {
        "tolerance": tolerance,
        "sites": len(gaps),
        "fails": fails,
        "worst": gaps[worst_site],
        "worst_site": worst_site,
    }


def _local_name(metric: str, tolerance: float) -> str:
    sign = "<=" if metric in LOWER else ">="
    return f"{metric} {sign} local {'+' if metric in LOWER else '-'} {tolerance:g} at every site"


def _pair(cell) -> str:
    mean, sd = cell
    return f"{mean:.4f}" + ("" if sd is None else f" ± {sd:.4f}")


def reference_markdown(runs: list[dict]) -> list[str]:
    """The pooled-data sections of the report (none for runs without it: older results)."""
    runs = [r for r in runs if r.get("reference")]
    if not runs:
        return []
    lines = [
        "",
        f"Distance to *{REFERENCE_LABEL}*: one scikit-learn random forest with the job's forest "
        "settings and seed, trained on every site's training and validation rows pooled (the "
        "union of the columns, a column a site lacks missing in its rows, scikit-learn's own "
        "handling of missing values; categorical columns as their integer codes), scored on the "
        "test rows of the sites that evaluated: the reference no federation can beat by much. "
        "Mean ± sd over those sites (Brier score and log-loss: lower is better):",
        "",
        f"| sites | rows/site | metric | local | auto | {REFERENCE_LABEL} | auto − "
        f"{REFERENCE_LABEL} | auto − {REFERENCE_LABEL} (worst site) | seconds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        ref = r["reference"]
        for metric, cell in ref["summary"].items():
            lines.append(
                f"| {r['sites']} | {r['rows_per_site']} | {metric} | {_pair(cell['local'])} | "
                f"{_pair(cell['auto'])} | {_pair(cell[REFERENCE])} | "
                f"{cell['auto_minus_pooled'][0]:+.4f} | {cell['worst_site']:+.4f} | "
                f"{ref['seconds']:.0f} |"
            )
    lines += [
        "",
        "Targets (`auto`, what each site deploys: against its own forest `local` at every "
        f"evaluated site, and its mean over those sites against {REFERENCE_LABEL}'s):",
        "",
    ]
    for r in runs:
        lines += [
            f"- {r['sites']} sites x {r['rows_per_site']} rows: {name}: "
            f"{'yes' if ok else 'NO'}{_evidence(r['reference'], name)}"
            for name, ok in r["reference"]["checks"].items()
        ]
    shown = [
        m for m in ("auprc", "auc", "brier") if any(m in r["reference"]["summary"] for r in runs)
    ]
    lines += [
        "",
        "Per site:",
        "",
        "| sites | rows/site | site | "
        + " | ".join(f"{m}: local | {m}: auto | {m}: {REFERENCE_LABEL}" for m in shown)
        + " | auprc: auto − local |",
        "|---|---|---|" + "---|" * (3 * len(shown) + 1),
    ]
    for r in runs:
        for site, row in r["reference"]["sites"].items():
            cells = []
            for m in shown:
                v = row.get(m)
                names = ("local", "auto", REFERENCE)
                cells += ["–"] * 3 if v is None else [f"{v[k]:.4f}" for k in names]
            auprc = row.get("auprc")
            cells.append("–" if auprc is None else f"{auprc['auto'] - auprc['local']:+.4f}")
            lines.append(
                f"| {r['sites']} | {r['rows_per_site']} | {site} | " + " | ".join(cells) + " |"
            )
    return lines


def _evidence(reference: dict, name: str) -> str:
    """The numbers behind a target's line: `` (2 of 10 sites fail; worst ...)``."""
    for metric, target in (reference.get("local_target") or {}).items():
        if name == _local_name(metric, target["tolerance"]):
            return (
                f" ({len(target['fails'])} of {target['sites']} sites fail; worst auto − local "
                f"{target['worst']:+.4f}, {target['worst_site']})"
            )
    metric = name.split(" ", 1)[0]
    cell = reference["summary"].get(metric)
    if cell is None or REFERENCE_LABEL not in name:
        return ""
    auto, pooled = cell["auto"][0], cell[REFERENCE][0]
    return f" (auto {auto:.4f}, {REFERENCE_LABEL} {pooled:.4f}: {auto - pooled:+.4f})"
