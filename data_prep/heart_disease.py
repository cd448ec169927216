"""Four real hospitals: the UCI Heart Disease data as four site CSVs and their site_configs/.

The Heart Disease data of the UCI Machine Learning Repository
(https://archive.ics.uci.edu/dataset/45/heart+disease, CC BY 4.0) come from
four centres that measured the same 14 attributes of 920 patients, each
leaving out some of them: the four-hospital setting fedforest is for. They
are not bundled with fedforest: download them from the UCI repository and
cite, as its ``heart-disease.names`` asks, the principal investigators
responsible for the data collection at each institution: Andras Janosi, M.D.
(Hungarian Institute of Cardiology, Budapest), William Steinbrunn, M.D.
(University Hospital, Zurich), Matthias Pfisterer, M.D. (University Hospital,
Basel) and Robert Detrano, M.D., Ph.D. (V.A. Medical Center, Long Beach, and
Cleveland Clinic Foundation).

``--source DIR`` holds the four processed files as the repository ships them
(:data:`FILES`: ``processed.cleveland.data``, ``processed.hungarian.data``,
``processed.switzerland.data``, ``processed.va.data``): 14 comma-separated
values per line, no header (:data:`COLUMNS`), a missing value written ``?``,
``NaN`` or left empty. Every line is checked: a line of another length, a
value that is not a number, a coded column (:data:`CODES`) outside its codes
or a missing or unknown diagnosis is refused naming the file, line, column
and what is allowed. Then, at each site:

* ``chol`` 0 is a missing value (the files write an unmeasured cholesterol as 0);
* the target ``disease`` is ``num`` > 0 (1: angiographic disease, 0: none);
* a column missing in more than half of the site's rows (:data:`MAX_MISSING`)
  is dropped: the site does not measure it (with the UCI files: Hungary lacks
  slope, ca and thal; Switzerland chol, fbs and ca; VA slope, ca and thal;
  Cleveland keeps every column);
* ``cp``, ``restecg``, ``slope`` and ``thal`` are categorical (:data:`CATEGORICAL`,
  listed in the site's YAML where the site has them), written as integer codes.

``--out`` gets ``<site>.csv`` for the sites ``cleveland``, ``hungary``,
``switzerland`` and ``va`` and ``site_configs/`` with one ``<site>.yaml`` each
and a ``job.yaml`` (:func:`job_settings`: the strategies ``local``, ``mp``,
``intersection`` and ``auto``, calibrated risks, 100 trees per site), loaded
back and checked as the job will. ``--out`` must be new, empty or written by
this script before and hold nothing else (``fedforest.outputs``).

Usage::

    python data_prep/heart_disease.py --source DIR --out heart_data [--seed 0]
    fedforest job build --config heart_data/site_configs ...
    python benchmarks/bench_hospitals.py --heart-disease DIR
"""

from __future__ import annotations

import argparse
import logging
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from data_prep.arguments import integer
from fedforest import outputs
from fedforest.federation.config import JobConfig, SiteConfig
from fedforest.federation.tables import check_data

logger = logging.getLogger("heart_disease")

#: Named in the marker of the output folder (``fedforest.outputs``).
COMMAND = "data_prep/heart_disease.py"
#: The 14 columns of a processed file, in order (``num``: the diagnosis, 0 to 4).
COLUMNS = (
    "age",
    "sex",
    "cp",
    "trestbps",
    "chol",
    "fbs",
    "restecg",
    "thalach",
    "exang",
    "oldpeak",
    "slope",
    "ca",
    "thal",
    "num",
)
#: Site name -> the UCI repository's file of its centre.
FILES = {
    "cleveland": "processed.cleveland.data",
    "hungary": "processed.hungarian.data",
    "switzerland": "processed.switzerland.data",
    "va": "processed.va.data",
}
#: How the files write a missing value.
MISSING = ("?", "", "NaN")
#: The target column written to the site CSVs: ``num`` > 0.
TARGET = "disease"
#: Categorical columns (integer codes), where the site has them.
CATEGORICAL = ("cp", "restecg", "slope", "thal")
#: Coded columns and their codes (``heart-disease.names``).
CODES = {
    "sex": (0, 1),
    "cp": (1, 2, 3, 4),
    "fbs": (0, 1),
    "restecg": (0, 1, 2),
    "exang": (0, 1),
    "slope": (1, 2, 3),
    "ca": (0, 1, 2, 3),
    "thal": (3, 6, 7),
    "num": (0, 1, 2, 3, 4),
}
#: Columns of whole numbers (written without decimals).
WHOLE = ("age", "trestbps", "chol", "thalach", *CODES)
#: A column missing in more than this share of a site's rows is dropped there.
MAX_MISSING = 0.5
#: The strategies of the job YAML (as ``benchmarks/bench_hospitals.py``'s).
STRATEGIES = ("local", "mp", "intersection", "auto")
#: The metrics of the job YAML.
METRICS = ("auprc", "auc", "mcc", "accuracy", "brier", "log_loss", "ece")


def read_processed(path) -> pd.DataFrame:
    """One processed file as a table of :data:`COLUMNS` (missing values NaN).

    Raises
    ------
    ValueError
        Naming the file, line and column: a missing or unreadable file, no data
        line, a line without 14 values, a value that is not a finite number, a
        coded column outside its codes (:data:`CODES`) or a missing diagnosis.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: cannot read it as text: {err}") from err
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != len(COLUMNS):
            raise ValueError(
                f"{path}, line {number}: {len(fields)} comma-separated values, expected "
                f"{len(COLUMNS)} ({', '.join(COLUMNS)}); is this one of the processed files?"
            )
        values = zip(COLUMNS, fields, strict=True)
        rows.append([_value(path, number, column, text) for column, text in values])
    if not rows:
        raise ValueError(f"{path}: no data lines")
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _value(path: Path, line: int, column: str, text: str) -> float:
    where = f"{path}, line {line}, column {column!r}"
    if text in MISSING:
        if column == "num":
            raise ValueError(f"{where}: the diagnosis is missing; every patient needs one (0-4)")
        return math.nan
    try:
        value = float(text)
    except ValueError:
        raise ValueError(
            f"{where}: {text!r} is not a number; allowed: a number, or "
            f"{' / '.join(repr(m) for m in MISSING)} for a missing value"
        ) from None
    if not math.isfinite(value):
        raise ValueError(f"{where}: {text!r} is not a finite number")
    if column in CODES and value not in CODES[column]:
        raise ValueError(
            f"{where}: {text!r} is not a code of {column}; allowed: "
            f"{', '.join(map(str, CODES[column]))} or a missing value"
        )
    return value


def site_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """A site's table from its processed file: ``chol`` 0 missing, ``disease`` = ``num`` > 0,
    the columns missing in more than :data:`MAX_MISSING` of the rows dropped.

    Returns the table (features, then ``disease``) and the dropped columns.

    Examples
    --------
    >>> frame = pd.DataFrame([[63, 1, 1, 145, 0, 1, 2, 150, 0, 2.3, 3, 0, 6, 2]] * 2,
    ...                      columns=list(COLUMNS))
    >>> table, dropped = site_table(frame)
    >>> dropped, table["disease"].tolist()
    (['chol'], [1, 1])
    """
    frame = frame.copy()
    frame.loc[frame["chol"] == 0, "chol"] = np.nan
    frame[TARGET] = (frame.pop("num") > 0).astype(int)
    features = [c for c in COLUMNS if c != "num"]
    dropped = [c for c in features if frame[c].isna().mean() > MAX_MISSING]
    table = frame[[c for c in features if c not in dropped] + [TARGET]]
    whole = [c for c in table.columns if c in WHOLE]
    return table.astype({c: "Int64" for c in whole}), dropped


def job_settings(
    sites, seed: int = 0, trees: int = 100, calibration: str = "auto", weights: str = "equal"
) -> dict[str, Any]:
    """The job YAML of the four hospitals (as ``benchmarks/bench_hospitals.py``'s)."""
    return {
        "job": {"name": "heart-disease", "sites": list(sites), "seed": seed},
        "evaluation": {
            "strategies": list(STRATEGIES),
            "metrics": list(METRICS),
            "calibration": calibration,
        },
        "pooling": {"weights": weights},
        "forest": {"n_estimators": trees},
    }


def site_settings(site: str, table: pd.DataFrame) -> dict[str, Any]:
    """A site's YAML: its data file beside ``site_configs/``, the target, its categoricals."""
    return {
        "site": site,
        "data_path": f"../{site}.csv",
        "target": TARGET,
        "categorical": [c for c in CATEGORICAL if c in table.columns],
        "selector": "random_forest",
    }


def read_sites(source, option: str = "--source") -> dict[str, tuple[pd.DataFrame, list[str]]]:
    """Site -> (its table, its dropped columns), from the four files in ``source`` (given
    as ``option``, which the messages name)."""
    source = Path(source)
    if not source.is_dir():
        raise ValueError(f"{option} {source}: no such folder")
    lacking = [f for f in FILES.values() if not (source / f).is_file()]
    if lacking:
        raise ValueError(
            f"{option} {source} lacks {', '.join(lacking)}; it must hold the four processed "
            "files of the UCI Heart Disease data as the repository names them: "
            f"{', '.join(FILES.values())}"
        )
    return {site: site_table(read_processed(source / name)) for site, name in FILES.items()}


HEADER = (
    "# {what}: the UCI Heart Disease data (CC BY 4.0), written by data_prep/heart_disease.py.\n"
)


def write_sites(
    source,
    out,
    seed: int = 0,
    trees: int = 100,
    calibration: str = "auto",
    weights: str = "equal",
) -> dict[str, Any]:
    """Convert the four files in ``source`` into ``out`` (module docstring); return what it wrote.

    The files are written and loaded back as the job loads them in a staging
    folder first, so nothing reaches ``out`` unless all of them pass.

    Returns
    -------
    dict
        ``rows``, ``prevalence``, ``columns`` and ``dropped`` (site -> value),
        ``data`` (site -> CSV path), ``configs`` (site -> YAML path), ``job``.
    """
    sites = read_sites(source)
    inputs = [Path(source) / name for name in FILES.values()]
    outputs.check_dir(out, COMMAND, inputs)
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp)
        (stage / "site_configs").mkdir()
        for site, (table, _) in sites.items():
            table.to_csv(stage / f"{site}.csv", index=False)
            text = HEADER.format(what=site) + yaml.safe_dump(
                site_settings(site, table), sort_keys=False
            )
            (stage / "site_configs" / f"{site}.yaml").write_text(text)
        job = job_settings(list(sites), seed, trees, calibration, weights)
        (stage / "site_configs" / "job.yaml").write_text(
            HEADER.format(what="four hospitals") + yaml.safe_dump(job, sort_keys=False)
        )
        try:
            config = JobConfig.load(stage / "site_configs" / "job.yaml")
            configs = {
                s: SiteConfig.load(
                    stage / "site_configs" / f"{s}.yaml", validation=config.validation
                )
                for s in sites
            }
            for site_config in configs.values():
                check_data(site_config)
            config.check_against_sites(configs)
        except ValueError as err:  # ConfigError: a rule of the job; nothing was written to OUT
            raise ValueError(
                f"fedforest would refuse these sites (nothing written): {err}"
            ) from err
        out = outputs.claim_dir(out, COMMAND, inputs=inputs)
        try:
            for entry in sorted(stage.iterdir()):
                shutil.move(str(entry), str(out / entry.name))
        finally:
            outputs.record_dir(out, COMMAND)
    for site, (table, dropped) in sites.items():
        logger.info(
            "%s: %d patients, disease share %.2f, %d columns; not measured: %s",
            site,
            len(table),
            table[TARGET].mean(),
            table.shape[1] - 1,
            ", ".join(dropped) or "(none)",
        )
    return {
        "rows": {s: len(t) for s, (t, _) in sites.items()},
        "prevalence": {s: float(t[TARGET].mean()) for s, (t, _) in sites.items()},
        "columns": {s: [c for c in t.columns if c != TARGET] for s, (t, _) in sites.items()},
        "dropped": {s: d for s, (_, d) in sites.items()},
        "data": {s: out / f"{s}.csv" for s in sites},
        "configs": {s: out / "site_configs" / f"{s}.yaml" for s in sites},
        "job": out / "site_configs" / "job.yaml",
    }


def main(argv=None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--source",
        type=Path,
        required=True,
        help=f"the folder of the four UCI files ({', '.join(FILES.values())})",
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="output folder (new, empty or made by this script)"
    )
    parser.add_argument("--seed", type=integer(0), default=0, help="the job's seed (default 0)")
    parser.add_argument("--trees", type=integer(1), default=100, help="trees per site")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        info = write_sites(args.source, args.out, args.seed, args.trees)
    except (ValueError, OSError) as err:
        parser.error(str(err))
    for site, rows in info["rows"].items():
        dropped = ", ".join(info["dropped"][site]) or "none"
        print(
            f"{site}: {rows} patients, disease share {info['prevalence'][site]:.2f}, "
            f"columns dropped: {dropped}"
        )
    print(f"configs in {info['job'].parent}")
    return info


if __name__ == "__main__":
    main()
