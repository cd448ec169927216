"""Four hospitals that differ in prevalence, case mix, size and columns, run as a job.

The hospitals are generated (nothing is downloaded) after the shape of the
four-centre clinical tables the field uses (303, 294, 123 and 200 patients;
prevalence about 0.46, 0.36, 0.93 and 0.74; one hospital measures every
column, the other three lack some). Each hospital has its own case mix (the
latent severity is shifted) and its own baseline risk (an intercept), so the
pooled trees carry the other hospitals' prevalence: the situation site-side
calibration is for.

Each repetition runs the job's own phase driver in this process
(:class:`~fedforest.federation.driver.JobDriver` over an
:class:`~fedforest.federation.driver.InProcessExchange`: the same code as the
FLARE job, which the tests check gives the same results) with ``job.seed`` =
the repetition, twice: with the job's defaults (``calibration: auto``,
``auto_metric: log_loss``) and with ``calibration: none``. It reports, per
hospital, the mean and standard deviation over the repetitions of accuracy
(threshold 0.5), Brier score and AUC for ``local`` (the hospital's own trees),
``mp``, ``intersection`` and ``auto`` (what the site deploys), and checks the
targets: ``auto`` (calibrated) accuracy >= uncalibrated ``local`` - 0.02 and
Brier <= ``local`` + 0.01 at every hospital, and mean AUC >= the best of
``local`` and ``intersection``.

Usage::

    python benchmarks/bench_hospitals.py [--reps 10] [--trees 100] [--weights equal|rows]
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import numpy as np
import yaml

from benchmarks import harness
from data_prep.make_demo_data import make_population

logger = logging.getLogger("bench_hospitals")

#: name: (rows, target prevalence, case-mix shift of the latent severity, columns dropped)
HOSPITALS = {
    "A": (303, 0.46, 0.0, []),
    "B": (294, 0.36, -0.3, ["hba1c", "activity"]),
    "C": (123, 0.93, 0.8, ["glucose", "ldl", "cholesterol"]),
    "D": (200, 0.74, 0.4, ["insulin", "hba1c"]),
}
STRATEGIES = ["local", "mp", "intersection", "auto"]
METRICS = ["accuracy", "brier", "auc", "log_loss"]
OUT = harness.RESULTS


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


def write_job(folder: Path, seed: int, trees: int, calibration: str, weights: str) -> Path:
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
    job = {
        "job": {"name": "hospitals", "sites": list(HOSPITALS), "seed": seed},
        "evaluation": {
            "strategies": STRATEGIES,
            "metrics": ["auprc", "auc", "mcc", "accuracy", "brier", "log_loss", "ece"],
            "calibration": calibration,
        },
        "pooling": {"weights": weights},
        "forest": {"n_estimators": trees},
    }
    (config / "job.yaml").write_text(yaml.safe_dump(job, sort_keys=False))
    return config


def run_job(config: Path) -> dict:
    """The job's phases in this process (:func:`benchmarks.harness.run_job`); ``results.json``."""
    return harness.run_job(config).results.to_dict()


def run(reps: int, trees: int, weights: str) -> dict:
    """Every repetition, calibrated and not; the per-hospital rows of every strategy."""
    rows = []
    progress = harness.Progress(logger, reps, "repetitions")
    for rep in range(reps):
        for calibration in ("auto", "none"):
            with tempfile.TemporaryDirectory() as tmp:
                results = run_job(write_job(Path(tmp), rep, trees, calibration, weights))
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
        progress.step(f"repetition {rep}")
    return {"reps": reps, "trees": trees, "weights": weights, "rows": rows}


def summarise(data: dict) -> dict:
    """Mean and standard deviation per (calibration, site, strategy, metric); the targets."""
    import pandas as pd

    frame = pd.DataFrame(data["rows"])
    table = frame.groupby(["calibration", "site", "strategy"])[METRICS].agg(["mean", "std"])
    summary = {}
    for (cal, site, strategy), values in table.iterrows():
        summary.setdefault(cal, {}).setdefault(site, {})[strategy] = {
            m: (float(values[(m, "mean")]), float(values[(m, "std")])) for m in METRICS
        }
    auto, plain = summary["auto"], summary["none"]
    checks = {}
    for site in HOSPITALS:
        deployed, local = auto[site]["auto"], plain[site]["local"]
        checks[f"{site}: accuracy >= local - 0.02"] = (
            deployed["accuracy"][0] >= local["accuracy"][0] - 0.02
        )
        checks[f"{site}: Brier <= local + 0.01"] = deployed["brier"][0] <= local["brier"][0] + 0.01

    def mean_auc(cal, strategy):
        return float(np.mean([summary[cal][s][strategy]["auc"][0] for s in HOSPITALS]))

    best = max(mean_auc("none", "local"), mean_auc("none", "intersection"))
    checks["mean AUC >= best of local and intersection"] = mean_auc("auto", "auto") >= best
    chosen = frame[(frame.calibration == "auto") & (frame.strategy == "auto")]
    picks = (
        (chosen["chosen"] + " + " + chosen["chosen_calibration"])
        .groupby(chosen["site"])
        .agg(lambda s: s.value_counts().to_dict())
    )
    return {"summary": summary, "checks": checks, "chosen": picks.to_dict()}


def markdown(data: dict, result: dict) -> str:
    """The table for ``benchmarks/results/hospitals.md``."""
    s = result["summary"]
    lines = [
        "# Four hospitals that differ: calibrated risks",
        "",
        f"`python benchmarks/bench_hospitals.py --reps {data['reps']} --trees {data['trees']} "
        f"--weights {data['weights']}`: the job in process, {data['reps']} seeds; mean ± sd "
        "per hospital. `local` and `mp` uncalibrated (`calibration: none`), the same with "
        "`calibration: auto`, and `auto` (what the site deploys, job defaults).",
        "",
        "| hospital (rows, prevalence) | metric | local | mp | intersection | local, calibrated "
        "| mp, calibrated | auto (deployed) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for site, (rows, prevalence, _, dropped) in HOSPITALS.items():
        label = f"{site} ({rows}, {prevalence:.2f}{', all columns' if not dropped else ''})"
        for metric in ("accuracy", "brier", "auc"):
            cells = [
                s["none"][site]["local"][metric],
                s["none"][site]["mp"][metric],
                s["none"][site]["intersection"][metric],
                s["auto"][site]["local"][metric],
                s["auto"][site]["mp"][metric],
                s["auto"][site]["auto"][metric],
            ]
            lines.append(
                f"| {label} | {metric} | "
                + " | ".join(f"{m:.3f} ± {sd:.3f}" for m, sd in cells)
                + " |"
            )
            label = ""
    lines += ["", "Targets:", ""]
    lines += [f"- {name}: {'yes' if ok else 'NO'}" for name, ok in result["checks"].items()]
    lines += ["", "What `auto` deployed (count over the seeds):", ""]
    lines += [f"- {site}: {picks}" for site, picks in result["chosen"].items()]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = harness.parser(__doc__, out=OUT)
    parser.add_argument("--reps", type=harness.at_least(1), default=10)
    parser.add_argument("--trees", type=harness.at_least(1), default=100)
    parser.add_argument("--weights", choices=("equal", "rows"), default="equal")
    args = parser.parse_args(argv)
    harness.start(logger)
    data = run(args.reps, args.trees, args.weights)
    result = summarise(data)
    suffix = "" if args.weights == "equal" else f"_{args.weights}"
    text = markdown(data, result)
    harness.write_results(args.out, f"hospitals{suffix}", {**data, **result}, text, logger)
    print(text)


if __name__ == "__main__":
    main()
