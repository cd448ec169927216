"""Small synthetic tidy results and calibration frames shared by the report tests."""

from __future__ import annotations

import pandas as pd

from fedforest.experiments.calibration_figures import CALIBRATION_COLUMNS
from fedforest.experiments.statistics import COLUMNS

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# Clearly ordered methods: MP best, Intersection worst, gaps of >= 0.02.
BASE = {"intersection": 0.60, "local": 0.65, "fpv": 0.70, "pr": 0.72, "ss": 0.74, "mp": 0.80}
SITE_OFFSET = {"s1": -0.01, "s2": 0.0, "s3": 0.01}  # sums to 0: site mean = scenario value
REP_OFFSET = [-0.002, -0.001, 0.0, 0.001, 0.002]  # sums to 0 over the 5 repetitions


def expected(method: str, n_sites: int, jaccard: float, metric: str = "auprc") -> float:
    """Mean score of a scenario in the synthetic frame (by construction)."""
    return BASE[method] + 0.1 * jaccard - 0.01 * n_sites + (0.1 if metric == "auc" else 0.0)


def make_tidy(
    dataset: str = "synth",
    n_sites=(2, 4),
    jaccards=(0.3, 0.5, 0.7),
    methods=tuple(BASE),
    metrics=("auprc", "auc"),
) -> pd.DataFrame:
    rows = []
    for n in n_sites:
        for j in jaccards:
            for rep, r_off in enumerate(REP_OFFSET):
                for site, s_off in SITE_OFFSET.items():
                    for m in methods:
                        for metric in metrics:
                            value = expected(m, n, j, metric) + r_off + s_off
                            rows.append((dataset, n, j, rep, site, m, metric, value))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def assert_png(path) -> None:
    assert path.exists(), path
    data = path.read_bytes()
    assert len(data) > 1000
    assert data[:8] == PNG_SIGNATURE


def make_calibration(
    datasets=("synth",), n_sites=(2, 4), reps=2, methods=("mp", "local", "intersection")
) -> pd.DataFrame:
    """Rows of the runner's ``calibration.csv``: bins of random risks (one row per non-empty bin).

    ``mp`` is well calibrated, ``local`` over-confident, ``intersection`` pulled to the prior.
    """
    import numpy as np

    from fedforest.metrics import calibration_bins

    rng = np.random.default_rng(7)
    rows = []
    for dataset in datasets:
        for n in n_sites:
            for rep in range(reps):
                for s in range(n):
                    risk = rng.uniform(0, 1, 120)
                    y = (rng.uniform(0, 1, 120) < risk).astype(int)
                    shown = {
                        "mp": risk,
                        "local": np.clip(0.5 + 1.6 * (risk - 0.5), 0, 1),
                        "intersection": 0.5 + 0.3 * (risk - 0.5),
                    }
                    for method in methods:
                        p = shown[method]
                        bins = calibration_bins(y, np.c_[1 - p, p], [0, 1])
                        for b, (c, pred, obs) in enumerate(
                            zip(bins["count"], bins["predicted"], bins["observed"], strict=True)
                        ):
                            if c:
                                rows.append(
                                    (dataset, n, 0.5, rep, f"s{s}", method, b, c, pred, obs)
                                )
    return pd.DataFrame(rows, columns=list(CALIBRATION_COLUMNS))
