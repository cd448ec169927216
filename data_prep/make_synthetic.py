"""Write one of the paper's synthetic datasets (S-500-Num, S-500-Cat, S-500-Mix) as CSV.

500 rows, 16 features that contribute evenly to a binary ``target`` column
(see :mod:`fedforest.experiments.synthetic`). Categorical columns are integer codes; the
script prints their names, to pass on as ``--categorical`` to
``data_prep/jaccard_split.py``.

Usage::

    python data_prep/make_synthetic.py --dataset S-500-Mix --out s500mix.csv [--seed 0] \\
        [--overwrite]
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from data_prep.arguments import integer
from fedforest import outputs
from fedforest.experiments.synthetic import DATASETS, load_dataset

logger = logging.getLogger("make_synthetic")

TARGET = "target"


def make_synthetic_csv(
    dataset: str, out, seed: int = 0, overwrite: bool = False
) -> tuple[Path, list[str]]:
    """Write ``dataset`` with a ``target`` column to ``out``; return the path and categoricals.

    A missing folder of ``out`` is created; an existing ``out`` is replaced only
    with ``overwrite`` (``fedforest.outputs.check_file``).
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    out = outputs.check_file(out, "--out", overwrite=overwrite, create_folder=True)
    X, y, categorical = load_dataset(dataset, random_state=seed)
    table = X.assign(**{TARGET: y})
    outputs.write_file(out, lambda handle: table.to_csv(handle, index=False))
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
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    parser.add_argument("--seed", type=integer(0), default=0, help="an integer >= 0 (default 0)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        out, categorical = make_synthetic_csv(args.dataset, args.out, args.seed, args.overwrite)
    except (ValueError, OSError) as err:
        parser.error(str(err))
    print(f"wrote {out} (target column {TARGET!r})")
    print("categorical columns: " + (",".join(categorical) or "(none)"))
    return out, categorical


if __name__ == "__main__":
    main()
