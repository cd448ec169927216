"""Demo data for `make demo`: three hospitals with partially overlapping columns.

The rows are generated (nothing is downloaded). A latent metabolic state drives
the outcome; each hospital measures it through different private columns
(glucose, HbA1c, insulin), while the columns every hospital has (age, BMI,
blood pressure, smoking) carry only part of the signal. Site 2 calls its
glucose column ``glucose_mg_dl``; its YAML renames it to the global ``glucose``.

With ``--task regression`` the outcome is a number instead of a yes/no event:
the length of stay in days, driven by the same latent state and columns (the
regression demo, ``make demo-regression``).

Usage::

    python data_prep/make_demo_data.py --out demo_data [--rows 1000] [--seed 0]
    python data_prep/make_demo_data.py --out demo_data_regression --task regression
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np
import pandas as pd

from data_prep.arguments import integer
from fedforest import outputs

logger = logging.getLogger("make_demo_data")

#: Named in the marker of the output folder (``fedforest.outputs``).
COMMAND = "data_prep/make_demo_data.py"
#: Rows a site needs: ``SiteRunner.load`` refuses a data file with fewer.
MIN_ROWS = 10

SITE_COLUMNS = {
    "site-1": ["age", "bmi", "systolic_bp", "smoker", "glucose", "insulin", "ldl"],
    "site-2": ["age", "bmi", "systolic_bp", "smoker", "glucose", "hba1c", "activity"],
    "site-3": ["age", "bmi", "systolic_bp", "smoker", "insulin", "cholesterol", "activity"],
}
LOCAL_NAMES = {"site-2": {"glucose": "glucose_mg_dl"}}


#: What the outcome is (``--task``): a yes/no event, or the length of stay in days.
TASKS = ("classification", "regression")


def make_population(n: int, rng: np.random.Generator, task: str = "classification") -> pd.DataFrame:
    """All columns for ``n`` patients, and the outcome (an event, or days in hospital)."""
    metabolic = rng.normal(size=n)
    age = np.clip(rng.normal(55, 12, n), 20, 90)
    bmi = 27 + 2.0 * metabolic + rng.normal(0, 3.5, n)
    smoker = rng.choice(["never", "former", "current"], size=n, p=[0.55, 0.25, 0.2])
    activity = rng.choice(["low", "medium", "high"], size=n, p=[0.35, 0.4, 0.25])
    frame = pd.DataFrame(
        {
            "age": age.round(0),
            "bmi": bmi.round(1),
            "systolic_bp": (120 + 0.4 * (age - 55) + 4 * metabolic + rng.normal(0, 12, n)).round(0),
            "smoker": smoker,
            "glucose": (105 + 18 * metabolic + rng.normal(0, 8, n)).round(0),
            "hba1c": (5.8 + 0.7 * metabolic + rng.normal(0, 0.3, n)).round(1),
            "insulin": np.exp(2.5 + 0.35 * metabolic + rng.normal(0, 0.2, n)).round(1),
            "ldl": (120 + 10 * rng.normal(size=n)).round(0),
            "cholesterol": (190 + 8 * metabolic + rng.normal(0, 25, n)).round(0),
            "activity": activity,
        }
    )
    logit = (
        2.2 * metabolic
        + 0.03 * (age - 55)
        + 0.5 * (smoker == "current")
        - 0.4 * (activity == "high")
        - 0.3
    )
    if task == "regression":  # days in hospital: longer with the same risk factors
        days = np.exp(1.4 + 0.35 * logit + 0.01 * (age - 55) + rng.normal(0, 0.25, n))
        frame["outcome"] = days.round(1)
    else:
        frame["outcome"] = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    return frame


def make_demo_data(
    out: Path, rows: int = 1000, seed: int = 0, task: str = "classification"
) -> dict[str, Path]:
    """Write one CSV per site into ``out``; return their paths.

    ``out`` must be new, empty, or written by this script before and hold
    nothing else (``fedforest.outputs``): its earlier CSVs are
    replaced, anything else is refused before anything is written. So is a
    ``rows`` below what a site needs, or a seed that gives a site one class.
    """
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < MIN_ROWS:
        raise ValueError(
            f"rows={rows!r}: each site needs at least {MIN_ROWS} rows (a site with fewer is "
            "refused by the job)"
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed={seed!r} must be an integer >= 0")
    if task not in TASKS:
        raise ValueError(f"task={task!r} is not one of {list(TASKS)}")
    rng = np.random.default_rng(seed)
    frames = {}
    for site, cols in SITE_COLUMNS.items():
        frame = make_population(rows, rng, task)[cols + ["outcome"]]
        if task == "classification" and frame["outcome"].nunique() < 2:
            raise ValueError(
                f"{site}: with rows={rows} and seed={seed} every outcome is "
                f"{frame['outcome'].iloc[0]}; the job drops a site with one class. Use more rows"
            )
        frames[site] = frame.rename(columns=LOCAL_NAMES.get(site, {}))
    out = outputs.claim_dir(out, COMMAND)
    paths = {}
    try:
        for site, frame in frames.items():
            path = out / f"{site}.csv"
            frame.to_csv(path, index=False)
            paths[site] = path
            logger.info("%s: %d rows, columns %s -> %s", site, rows, list(frame.columns), path)
    finally:
        outputs.record_dir(out, COMMAND)
    return paths


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("demo_data"),
        help="output folder (new, empty or made by this script)",
    )
    parser.add_argument(
        "--rows", type=integer(MIN_ROWS), default=1000, help=f"rows per site (>= {MIN_ROWS})"
    )
    parser.add_argument("--seed", type=integer(0), default=0, help="an integer >= 0")
    parser.add_argument(
        "--task",
        choices=TASKS,
        default="classification",
        help="the outcome: a yes/no event (classification) or days in hospital (regression)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        make_demo_data(args.out, args.rows, args.seed, args.task)
    except (ValueError, OSError) as err:
        parser.error(str(err))


if __name__ == "__main__":
    main()
