"""Survival demo data for `make demo-survival`: three hospitals from the GBSG2 trial.

The German Breast Cancer Study Group 2 trial (686 patients; bundled with
scikit-survival, nothing is downloaded) split at random into three
hospitals of about 229 patients, each keeping some of the trial's columns:
every hospital has age, tumour size and positive lymph nodes; each has its
own private columns (hormone therapy and menopausal status; the progesterone
and oestrogen receptors; the tumour grade and the progesterone receptor).
Each file holds the follow-up time in days (``days``) and whether the
patient had a recurrence (``recurrence``, 1) or was censored (0).

Usage::

    python data_prep/make_survival_data.py --out demo_data_survival [--seed 0]
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np
import pandas as pd

from data_prep.arguments import integer
from fedforest import outputs

logger = logging.getLogger("make_survival_data")

#: Named in the marker of the output folder (``fedforest.outputs``).
COMMAND = "data_prep/make_survival_data.py"

SITE_COLUMNS = {
    "site-1": ["age", "tsize", "pnodes", "horTh", "menostat"],
    "site-2": ["age", "tsize", "pnodes", "progrec", "estrec"],
    "site-3": ["age", "tsize", "pnodes", "tgrade", "progrec"],
}


def gbsg2_table() -> pd.DataFrame:
    """The GBSG2 trial as one table: its columns, ``days`` and ``recurrence`` (1/0)."""
    from sksurv.datasets import load_gbsg2

    X, y = load_gbsg2()
    frame = X.copy()
    for col in ("horTh", "menostat", "tgrade"):
        frame[col] = frame[col].astype(str)
    frame["days"] = y["time"].astype(np.float64)
    frame["recurrence"] = y["cens"].astype(np.int64)
    return frame.reset_index(drop=True)


def make_survival_data(out, seed: int = 0) -> dict[str, Path]:
    """Write ``site-1.csv`` .. ``site-3.csv`` in ``out``; return their paths.

    The rows are shuffled with ``seed`` and dealt to the three hospitals in
    turn; each keeps its :data:`SITE_COLUMNS` and the two outcome columns.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed={seed!r} must be an integer >= 0")
    table = gbsg2_table()
    order = np.random.default_rng(seed).permutation(len(table))
    frames = {}
    for i, (site, cols) in enumerate(SITE_COLUMNS.items()):
        rows = order[i :: len(SITE_COLUMNS)]
        frames[site] = table.iloc[np.sort(rows)][cols + ["days", "recurrence"]]
    out = outputs.claim_dir(out, COMMAND)
    paths = {}
    try:
        for site, frame in frames.items():
            path = out / f"{site}.csv"
            frame.to_csv(path, index=False)
            paths[site] = path
            logger.info(
                "%s: %d rows, %d events, columns %s -> %s",
                site,
                len(frame),
                int(frame["recurrence"].sum()),
                list(frame.columns),
                path,
            )
    finally:
        outputs.record_dir(out, COMMAND)
    return paths


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("demo_data_survival"),
        help="output folder (new, empty or made by this script)",
    )
    parser.add_argument("--seed", type=integer(0), default=0, help="an integer >= 0")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        make_survival_data(args.out, args.seed)
    except (ValueError, OSError) as err:
        parser.error(str(err))


if __name__ == "__main__":
    main()
