"""Four hospitals that differ in prevalence, case mix, size and columns, run as a job.

The hospitals are generated (nothing is downloaded) after the shape of the
four-centre clinical tables the field uses (303, 294, 123 and 200 patients;
prevalence about 0.46, 0.36, 0.93 and 0.74; one hospital measures every
column, the other three lack some). Each hospital has its own case mix (the
latent severity is shifted) and its own baseline risk (an intercept), so the
pooled trees carry the other hospitals' prevalence: the situation site-side
calibration is for. ``--heart-disease DIR`` runs the same report on the real
four-centre tables instead: the UCI Heart Disease data, downloaded by the
user into ``DIR`` and converted by ``data_prep/heart_disease.py`` (Cleveland,
Hungary, Switzerland and VA; each lacks the columns it mostly does not
measure); its results go to ``hospitals_heart.*``.

Each repetition runs the job's own phase driver in this process
(:class:`~fedforest.federation.driver.JobDriver` over an
:class:`~fedforest.federation.driver.InProcessExchange`: the same code as the
FLARE job, which the tests check gives the same results) with ``job.seed`` =
the repetition, twice: with the job's defaults (``calibration: auto``,
``auto_metric: log_loss``) and with ``calibration: none``; the election is
``site_configs/job.yaml``'s (the freedom degree hill-climbed on the
hospitals' scores, as users run it). Beside them, the
reference no federation can beat by much, *pooled data*
(:mod:`fedforest.experiments.reference`): one scikit-learn random forest with
the job's forest settings and seed, trained on every hospital's training and
validation rows pooled (the union of the columns, a column a hospital lacks
missing in its rows, left to scikit-learn's own handling of missing values;
categorical columns as their integer codes), scored on each hospital's own
test rows (the rows the job scores) with the job's metrics.

It reports, per hospital, the mean and standard deviation over the
repetitions of accuracy (threshold 0.5), Brier score, log-loss, AUC and AUPRC
for ``local`` (the hospital's own trees), ``mp``, ``intersection``, ``auto``
(what the site deploys) and pooled data, and the distance of ``auto`` and
``local`` to pooled data (paired, repetition by repetition). And it checks
the targets (:func:`targets`): at every hospital the deployed model's
accuracy and AUC are at least the better of ``local`` and pooled data minus
0.01, and its Brier score at most the better of them plus 0.01; each target
with the paired difference to its reference and the standard error of its
mean over the repetitions (:func:`target_margins`).

``--validation`` is what each hospital fits ``auto``'s choice, the
calibration and ``wmp``'s weight on: ``oob`` (the job's default; every
training row scored out of bag, no validation rows held out) or ``holdout``
(validation rows held out of training, the paper's protocol; results go to
``hospitals_holdout.*`` or ``hospitals_heart_holdout.*``).

Usage::

    python benchmarks/bench_hospitals.py [--reps 10] [--trees 100] [--weights equal|rows]
        [--validation oob|holdout]
    python benchmarks/bench_hospitals.py --heart-disease DIR [--reps 10]
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import numpy as np
import yaml

from benchmarks import harness
from data_prep import heart_disease
from data_prep.make_demo_data import make_population
from fedforest.experiments.reference import REFERENCE, REFERENCE_LABEL, job_reference

logger = logging.getLogger("bench_hospitals")

#: name: (rows, target prevalence, case-mix shift of the latent severity, columns dropped)
HOSPITALS = {
    "A": (303, 0.46, 0.0, []),
    "B": (294, 0.36, -0.3, ["hba1c", "activity"]),
    "C": (123, 0.93, 0.8, ["glucose", "ldl", "cholesterol"]),
    "D": (200, 0.74, 0.4, ["insulin", "hba1c"]),
}
STRATEGIES = ["local", "mp", "intersection", "auto"]
METRICS = ["accuracy", "brier", "log_loss", "auc", "auprc"]
#: The job's metrics (each hospital's metrics reply).
JOB_METRICS = ["auprc", "auc", "mcc", "accuracy", "brier", "log_loss", "ece"]
OUT = harness.RESULTS
#: The metrics of the targets (:func:`targets`) and how much worse than the better of
#: ``local`` and pooled data the deployed model may be at a hospital.
TARGET_METRICS = ("accuracy", "auc", "brier")
TOLERANCE = 0.01
#: What each validation mode fits the hospitals' choices on, as the report says it.
FITTED = {v: harness.fitted(v, "hospital") for v in ("oob", "holdout")}
#: Metric names in the targets.
NAMES = {"accuracy": "accuracy", "brier": "Brier", "log_loss": "log-loss", "auc": "AUC"}
#: Metrics where lower is better.
LOWER = ("brier", "log_loss")


def hospital_table(rows: int, prevalence: float, shift: float, rng):
    """One hospital: the demo population with shifted severity and its own baseline risk."""
    frame = make_population(rows * 4, rng)
    # case mix: keep rows with probability rising with the (hidden) severity shift
    severity = (frame["glucose"] - 105) / 18
    keep = rng.random(len(frame)) < 1 / (1 + np.exp(-shift * 2 * severity))
    frame = frame[keep].head(rows).reset_index(drop=True)
    # baseline risk: pick an intercept that gives the hospital its prevalence
    score = (
        2.2 * (frame["glucose"] - 105) / 18
        + 0.03 * (frame["age"] - 55)
        + 0.5 * (frame["smoker"] == "current")
        - 0.4 * (frame["activity"] == "high")
    ).to_numpy()
    lo, hi = -10.0, 10.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if np.mean(1 / (1 + np.exp(-(score + mid)))) < prevalence:
            lo = mid
        else:
            hi = mid
    p = 1 / (1 + np.exp(-(score + lo)))
    frame["outcome"] = (rng.random(len(frame)) < p).astype(int)
    return frame


def job_settings(
    name: str,
    sites,
    seed: int,
    trees: int,
    calibration: str,
    weights: str,
    validation: str = "oob",
) -> dict:
    """The job YAML of one run: the four strategies, :data:`JOB_METRICS`, the calibration,
    the validation mode (``oob`` or ``holdout``) and ``site_configs/job.yaml``'s election
    (:func:`benchmarks.harness.shipped_sections`: the election users run, tuned)."""
    return {
        "job": {"name": name, "sites": list(sites), "seed": seed},
        **harness.shipped_sections("election"),
        "evaluation": {
            "strategies": STRATEGIES,
            "metrics": JOB_METRICS,
            "calibration": calibration,
            "validation": validation,
        },
        "pooling": {"weights": weights},
        "forest": {"n_estimators": trees},
    }


def write_job(
    folder: Path, seed: int, trees: int, calibration: str, weights: str, validation: str = "oob"
) -> Path:
    """The four hospitals' tables and YAMLs for one repetition (data seeded by ``seed``)."""
    rng = np.random.default_rng(1000 + seed)
    config = folder / "site_configs"
    config.mkdir(parents=True, exist_ok=True)
    for name, (rows, prevalence, shift, dropped) in HOSPITALS.items():
        table = hospital_table(rows, prevalence, shift, rng).drop(columns=dropped)
        table.to_csv(folder / f"{name}.csv", index=False)
        site = {
            "site": name,
            "data_path": f"../{name}.csv",
            "target": "outcome",
            "selector": "random_forest",
        }
        (config / f"{name}.yaml").write_text(yaml.safe_dump(site, sort_keys=False))
    job = job_settings("hospitals", HOSPITALS, seed, trees, calibration, weights, validation)
    (config / "job.yaml").write_text(yaml.safe_dump(job, sort_keys=False))
    return config


def generated_hospitals() -> dict:
    """What the report says of each generated hospital: rows, prevalence, columns it lacks."""
    return {
        name: {"rows": rows, "prevalence": prevalence, "lacks": list(dropped)}
        for name, (rows, prevalence, _, dropped) in HOSPITALS.items()
    }


def _rows(rep: int, calibration: str, results: dict, reference: dict | None) -> list[dict]:
    """One run's rows: every hospital's strategies, and pooled data when given."""
    rows = []
    for site, per in results["metrics"].items():
        for strategy, row in per.items():
            rows.append(
                {
                    "rep": rep,
                    "calibration": calibration,
                    "site": site,
                    "strategy": strategy,
                    "chosen": row.get("chosen"),
                    "chosen_calibration": row.get("chosen_calibration"),
                    **{m: row.get(m) for m in METRICS},
                }
            )
    for site, row in (reference or {}).items():
        rows.append(
            {
                "rep": rep,
                "calibration": calibration,
                "site": site,
                "strategy": REFERENCE,
                "chosen": None,
                "chosen_calibration": None,
                **{m: row[m] for m in METRICS},
            }
        )
    return rows


def run(
    reps: int, trees: int, weights: str, heart: Path | None = None, validation: str = "oob"
) -> dict:
    """Every repetition, calibrated and not; the per-hospital rows of every strategy, and
    pooled data (computed in the uncalibrated run: the same rows and seed as the other).

    ``heart``: the folder of the UCI Heart Disease files (``data_prep/heart_disease.py``)
    instead of the generated hospitals.
    """
    rows = []
    progress = harness.Progress(logger, reps, "repetitions")
    with tempfile.TemporaryDirectory() as tmp:
        hospitals = generated_hospitals()
        if heart is not None:
            info = heart_disease.write_sites(heart, Path(tmp) / "heart", trees=trees)
            hospitals = {
                s: {"rows": n, "prevalence": info["prevalence"][s], "lacks": info["dropped"][s]}
                for s, n in info["rows"].items()
            }
        for rep in range(reps):
            for calibration in ("auto", "none"):
                if heart is None:
                    with tempfile.TemporaryDirectory() as folder:
                        config = write_job(
                            Path(folder), rep, trees, calibration, weights, validation
                        )
                        job = harness.run_job(config)
                else:
                    config = info["job"].parent
                    settings = job_settings(
                        "heart-disease", hospitals, rep, trees, calibration, weights, validation
                    )
                    info["job"].write_text(yaml.safe_dump(settings, sort_keys=False))
                    job = harness.run_job(config)
                reference = job_reference(job, METRICS) if calibration == "none" else None
                rows += _rows(rep, calibration, job.results.to_dict(), reference)
            progress.step(f"repetition {rep}")
    data = {"reps": reps, "trees": trees, "weights": weights, "validation": validation}
    data["rows"] = rows
    data["source"] = "heart-disease" if heart is not None else "generated"
    data["hospitals"] = hospitals
    return data


def summarise(data: dict) -> dict:
    """Mean and standard deviation per (calibration, site, strategy, metric); the distance of
    ``auto`` and ``local`` to pooled data; the targets."""
    import pandas as pd

    frame = pd.DataFrame(data["rows"])
    metrics = [m for m in METRICS if m in frame]
    table = frame.groupby(["calibration", "site", "strategy"])[metrics].agg(["mean", "std"])
    summary = {}
    for (cal, site, strategy), values in table.iterrows():
        summary.setdefault(cal, {}).setdefault(site, {})[strategy] = {
            m: (float(values[(m, "mean")]), float(values[(m, "std")])) for m in metrics
        }
    sites = list(data.get("hospitals") or HOSPITALS)
    checks = targets(summary, sites)
    distance = {}
    if (frame["strategy"] == REFERENCE).any():
        distance = reference_distance(frame, sites, metrics)
    chosen = frame[(frame.calibration == "auto") & (frame.strategy == "auto")]
    picks = (
        (chosen["chosen"] + " + " + chosen["chosen_calibration"])
        .groupby(chosen["site"])
        .agg(lambda s: s.value_counts().to_dict())
    )
    out = {"summary": summary, "checks": checks, "chosen": picks.to_dict()}
    if distance:
        out["distance"] = distance
    out["margins"] = target_margins(frame, summary, sites)
    return out


def targets(summary: dict, sites) -> dict:
    """The targets, ``{name: met}``: at every hospital the deployed model (``auto``,
    calibrated run) has accuracy and AUC at least the better of ``local`` (uncalibrated run:
    the hospital's own forest) and pooled data minus :data:`TOLERANCE`, and a Brier score at
    most the better of them plus :data:`TOLERANCE` (means over the repetitions).

    Without pooled data (results written before it was reported) ``local`` alone is the
    reference."""
    checks = {}
    for site in sites:
        deployed = summary["auto"][site]["auto"]
        references = [summary["none"][site]["local"]]
        if REFERENCE in summary["none"][site]:
            references.append(summary["none"][site][REFERENCE])
        for metric in TARGET_METRICS:
            values = [r[metric][0] for r in references]
            name = _target_name(site, metric, len(references) > 1)
            if metric in LOWER:
                checks[name] = bool(deployed[metric][0] <= min(values) + TOLERANCE)
            else:
                checks[name] = bool(deployed[metric][0] >= max(values) - TOLERANCE)
    return checks


def _target_name(site: str, metric: str, with_pooled: bool) -> str:
    """A target's name: ``"A: AUC >= the better of local and pooled data - 0.01"``."""
    against = f"the better of local and {REFERENCE_LABEL}" if with_pooled else "local"
    sign, bound = ("<=", "+") if metric in LOWER else (">=", "-")
    return f"{site}: {NAMES[metric]} {sign} {against} {bound} {TOLERANCE:g}"


def target_margins(frame, summary: dict, sites) -> dict:
    """Per target (:func:`targets`' names): the deployed model minus the reference it is
    checked against (the better of ``local`` and pooled data by their means), repetition by
    repetition, and the standard error of that mean: how far a target is met or missed,
    against how much ten seeds can tell.

    ``{name: {"reference": strategy, "difference": mean, "se": sd / sqrt(n), "n": n}}``
    (``se`` NaN with one repetition).
    """

    def runs(cal: str, strategy: str, site: str, metric: str):
        part = frame[
            (frame["calibration"] == cal)
            & (frame["strategy"] == strategy)
            & (frame["site"] == site)
        ]
        return part.set_index("rep")[metric].astype(float)

    margins = {}
    for site in sites:
        refs = ["local"] + ([REFERENCE] if REFERENCE in summary["none"][site] else [])
        for metric in TARGET_METRICS:
            lower = metric in LOWER
            means = {r: summary["none"][site][r][metric][0] for r in refs}
            best = (min if lower else max)(refs, key=lambda r: means[r])
            gap = (runs("auto", "auto", site, metric) - runs("none", best, site, metric)).dropna()
            name = _target_name(site, metric, len(refs) > 1)
            se = float(gap.std(ddof=1) / np.sqrt(len(gap))) if len(gap) > 1 else float("nan")
            margins[name] = {
                "reference": best,
                "difference": float(gap.mean()),
                "se": se,
                "n": int(len(gap)),
            }
    return margins


def _margin_text(margin: dict | None) -> str:
    """`` (auto − pooled data -0.015, standard error 0.012 over 10 seeds)``, or nothing."""
    if not margin:
        return ""
    label = REFERENCE_LABEL if margin["reference"] == REFERENCE else margin["reference"]
    return harness.paired_margin(
        "auto", label, margin["difference"], margin["se"], margin["n"], "seeds"
    )


def reference_distance(frame, sites, metrics) -> dict:
    """``{site: {metric: {"auto": [mean, sd], "local": [mean, sd]}}}``: deployed ``auto``
    (calibrated run) and ``local`` (uncalibrated run) minus pooled data, repetition by
    repetition, then mean and sd over the repetitions."""
    pick = {
        "auto": ("auto", "auto"),
        "local": ("none", "local"),
        REFERENCE: ("none", REFERENCE),
    }
    parts = {}
    for name, (cal, strategy) in pick.items():
        part = frame[(frame["calibration"] == cal) & (frame["strategy"] == strategy)]
        parts[name] = part.set_index(["site", "rep"])[metrics].astype(float)
    out = {}
    for site in sites:
        out[site] = {}
        for metric in metrics:
            pooled = parts[REFERENCE][metric].xs(site, level="site")
            out[site][metric] = {}
            for name in ("auto", "local"):
                gap = (parts[name][metric].xs(site, level="site") - pooled).dropna()
                sd = float(gap.std(ddof=1)) if len(gap) > 1 else float("nan")
                out[site][metric][name] = [float(gap.mean()), sd]
    return out


def _label(site: str, facts) -> str:
    rows, prevalence, lacks = facts["rows"], facts["prevalence"], facts["lacks"]
    return f"{site} ({rows}, {prevalence:.2f}{', all columns' if not lacks else ''})"


def _cell(value) -> str:
    mean, sd = value
    sd_text = "–" if sd is None or not np.isfinite(sd) else f"{sd:.3f}"
    return f"{mean:.3f} ± {sd_text}"


def markdown(data: dict, result: dict) -> str:
    """The report (``benchmarks/results/hospitals.md``; ``hospitals_heart.md`` for the UCI
    data). Results files written before pooled data was reported render without it."""
    s = result["summary"]
    heart = data.get("source") == "heart-disease"
    hospitals = data.get("hospitals") or generated_hospitals()
    first = s["none"][next(iter(hospitals))]
    reference = REFERENCE in first
    metrics = [m for m in ("accuracy", "brier", "log_loss", "auc", "auprc") if m in first["local"]]
    if not reference:  # the report as it was before pooled data
        metrics = [m for m in ("accuracy", "brier", "auc") if m in metrics]
    option = " --heart-disease DIR" if heart else ""
    validation, fitted = "", ""  # results written before the validation modes name none
    if data.get("validation"):
        validation = f" --validation {data['validation']}"
        fitted = " " + FITTED[data["validation"]]
    title = (
        "# Four real hospitals (UCI Heart Disease): calibrated risks"
        if heart
        else "# Four hospitals that differ: calibrated risks"
    )
    lines = [
        title,
        "",
        f"`python benchmarks/bench_hospitals.py{option} --reps {data['reps']} --trees "
        f"{data['trees']} --weights {data['weights']}{validation}`: the job in process, "
        f"{data['reps']} seeds; mean ± sd per hospital. `local` and `mp` uncalibrated "
        "(`calibration: none`), the same with `calibration: auto`, and `auto` (what the site "
        f"deploys, job defaults).{fitted}",
    ]
    if heart:
        lines += [
            "",
            "The UCI Heart Disease data (CC BY 4.0; principal investigators Andras Janosi, "
            "William Steinbrunn, Matthias Pfisterer and Robert Detrano), converted by "
            "`data_prep/heart_disease.py`; not measured: "
            + "; ".join(
                f"{site} {', '.join(f['lacks'])}" for site, f in hospitals.items() if f["lacks"]
            )
            + ".",
        ]
    if reference:
        lines += [
            "",
            f"*{REFERENCE_LABEL.capitalize()}*: one scikit-learn random forest ({data['trees']} trees, the "
            "job's seed) trained on every hospital's training and validation rows pooled (the "
            "union of the columns, a column a hospital lacks missing in its rows, scikit-learn's "
            "own handling of missing values; categorical columns as their integer codes), "
            "scored on each hospital's test rows: the reference no federation can beat by much.",
        ]
    header = (
        "| hospital (rows, prevalence) | metric | local | mp | intersection | local, calibrated "
        "| mp, calibrated | auto (deployed) |"
    )
    rule = "|---|---|---|---|---|---|---|---|"
    if reference:
        header += f" {REFERENCE_LABEL} |"
        rule += "---|"
    lines += ["", header, rule]
    for site, facts in hospitals.items():
        label = _label(site, facts)
        for metric in metrics:
            cells = [
                s["none"][site]["local"][metric],
                s["none"][site]["mp"][metric],
                s["none"][site]["intersection"][metric],
                s["auto"][site]["local"][metric],
                s["auto"][site]["mp"][metric],
                s["auto"][site]["auto"][metric],
            ]
            if reference:
                cells.append(s["none"][site][REFERENCE][metric])
            lines.append(f"| {label} | {metric} | " + " | ".join(map(_cell, cells)) + " |")
            label = ""
    distance = result.get("distance")
    if distance:
        lines += [
            "",
            f"Distance to {REFERENCE_LABEL} (each repetition's difference, then mean ± sd over "
            "the repetitions; for Brier score and log-loss lower is better, so a positive "
            "difference is a loss):",
            "",
            f"| hospital | metric | auto (deployed) − {REFERENCE_LABEL} | local − "
            f"{REFERENCE_LABEL} |",
            "|---|---|---|---|",
        ]
        for site, facts in hospitals.items():
            label = _label(site, facts)
            for metric in metrics:
                gap = distance[site][metric]
                lines.append(
                    f"| {label} | {metric} | {_signed(gap['auto'])} | {_signed(gap['local'])} |"
                )
                label = ""
    margins = result.get("margins") or {}
    lines += ["", "Targets:", ""]
    lines += [
        f"- {name}: {'yes' if ok else 'NO'}{_margin_text(margins.get(name))}"
        for name, ok in result["checks"].items()
    ]
    if margins:
        lines += [
            "",
            harness.margins_note("seed by seed", "seeds"),
        ]
    lines += ["", "What `auto` deployed (count over the seeds):", ""]
    lines += [f"- {site}: {picks}" for site, picks in result["chosen"].items()]
    return "\n".join(lines) + "\n"


def _signed(value) -> str:
    mean, sd = value
    sd_text = "–" if sd is None or not np.isfinite(sd) else f"{sd:.3f}"
    return f"{mean:+.3f} ± {sd_text}"


def main(argv=None) -> None:
    parser = harness.parser(__doc__, out=OUT)
    parser.add_argument("--reps", type=harness.at_least(1), default=10)
    parser.add_argument("--trees", type=harness.at_least(1), default=100)
    parser.add_argument("--weights", choices=("equal", "rows"), default="equal")
    harness.validation_option(parser, "hospital")
    parser.add_argument(
        "--heart-disease",
        type=Path,
        metavar="DIR",
        help="run on the UCI Heart Disease data in DIR (its four processed files, as "
        "data_prep/heart_disease.py reads them) instead of the generated hospitals",
    )
    args = parser.parse_args(argv)
    if args.heart_disease is not None:
        try:  # the files are checked before anything runs
            heart_disease.read_sites(args.heart_disease, "--heart-disease")
        except ValueError as err:
            parser.error(str(err))
    harness.start(logger)
    data = run(args.reps, args.trees, args.weights, args.heart_disease, args.validation)
    result = summarise(data)
    name = "hospitals_heart" if args.heart_disease is not None else "hospitals"
    suffix = "" if args.weights == "equal" else f"_{args.weights}"
    suffix += harness.validation_suffix(args.validation)
    text = markdown(data, result)
    harness.write_results(args.out, f"{name}{suffix}", {**data, **result}, text, logger)
    print(text)


if __name__ == "__main__":
    main()
