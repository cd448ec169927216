"""Write one of the paper's synthetic datasets (S-500-Num, S-500-Cat, S-500-Mix) as CSV.

500 rows, 16 features that contribute evenly to a binary ``target`` column
(see :mod:`fedforest.experiments.synthetic`). Categorical columns are integer codes; the
script prints their names, to pass on as ``--categorical`` to
``data_prep/jaccard_split.py``.

Usage::

    python data_prep/make_synthetic.py --dataset S-500-Mix --out s500mix.csv [--seed 0]
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from fedforest.experiments.synthetic import DATASETS, load_dataset

logger = logging.getLogger("make_synthetic")

TARGET = "target"


def make_synthetic_csv(dataset: str, out, seed: int = 0) -> tuple[Path, list[str]]:
    """Write ``dataset`` with a ``target`` column to ``out``; return the path and categoricals."""
    X, y, categorical = load_dataset(dataset, random_state=seed)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    X.assign(**{TARGET: y}).to_csv(out, index=False)
    logger.info(
        "%s (seed %d): %d rows, %d features (%d categorical), positive share %.3f -> %s",
        dataset,
        seed,
        len(X),
        X.shape[1],
        len(categorical),
        y.mean(),
        out,
    )
    return out, categorical


def main(argv=None) -> tuple[Path, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True, choices=list(DATASETS))
    parser.add_argument("--out", type=Path, required=True, help="the CSV file to write")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    out, categorical = make_synthetic_csv(args.dataset, args.out, args.seed)
    print(f"wrote {out} (target column {TARGET!r})")
    print("categorical columns: " + (",".join(categorical) or "(none)"))
    return out, categorical


if __name__ == "__main__":
    main()
