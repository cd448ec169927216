"""Demo data for `make demo`: three hospitals with partially overlapping columns.

The rows are generated (nothing is downloaded). A latent metabolic state drives
the outcome; each hospital measures it through different private columns
(glucose, HbA1c, insulin), while the columns every hospital has (age, BMI,
blood pressure, smoking) carry only part of the signal. Site 2 calls its
glucose column ``glucose_mg_dl``; its YAML renames it to the global ``glucose``.

Usage::

    python data_prep/make_demo_data.py --out demo_data [--rows 1000] [--seed 0]
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np
import pandas as pd

logger = logging.getLogger("make_demo_data")

SITE_COLUMNS = {
    "site-1": ["age", "bmi", "systolic_bp", "smoker", "glucose", "insulin", "ldl"],
    "site-2": ["age", "bmi", "systolic_bp", "smoker", "glucose", "hba1c", "activity"],
    "site-3": ["age", "bmi", "systolic_bp", "smoker", "insulin", "cholesterol", "activity"],
}
LOCAL_NAMES = {"site-2": {"glucose": "glucose_mg_dl"}}


def make_population(n: int, rng: np.random.Generator) -> pd.DataFrame:
    """All columns for ``n`` patients, and the outcome."""
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
    frame["outcome"] = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    return frame


def make_demo_data(out: Path, rows: int = 1000, seed: int = 0) -> dict[str, Path]:
    """Write one CSV per site into ``out``; return their paths."""
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for site, cols in SITE_COLUMNS.items():
        frame = make_population(rows, rng)[cols + ["outcome"]]
        frame = frame.rename(columns=LOCAL_NAMES.get(site, {}))
        path = out / f"{site}.csv"
        frame.to_csv(path, index=False)
        paths[site] = path
        logger.info("%s: %d rows, columns %s -> %s", site, rows, list(frame.columns), path)
    return paths


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("demo_data"))
    parser.add_argument("--rows", type=int, default=1000, help="rows per site")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    make_demo_data(args.out, args.rows, args.seed)


if __name__ == "__main__":
    main()
