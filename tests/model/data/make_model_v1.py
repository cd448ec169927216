"""Write ``model_v1.npz``: a model file whose pooled forests are version 1 payloads.

The file is a fixture of ``tests/model/test_forest_v1.py``: a real model, as
fedforest wrote it before the compact pooled-forest payload (version 2). To
write it again, run this script with fedforest at commit 4340a46 (the last one
that writes version 1), e.g. from an export of that commit::

    git archive 4340a46 src | tar -x -C /tmp/v1
    PYTHONPATH=/tmp/v1/src python tests/model/data/make_model_v1.py

Two sites, five features (a categorical one, missing values seen in training),
three classes, surrogate splits, imputers and an intersection forest.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier

from fedforest import ImputerSet, PooledForest, fit_imputers
from fedforest.model.model_files import model_bundle, save_payload
from fedforest.model.surrogates import fit_surrogates

logger = logging.getLogger("make_model_v1")
SHARED = ["x0", "x1"]
COLS = {"site-a": ["x0", "x1", "x2", "c"], "site-b": ["x0", "x1", "x3"]}
LEVELS = ["low", "mid", "high"]


def main() -> Path:
    rng = np.random.RandomState(11)
    n = 300
    X = pd.DataFrame(rng.normal(size=(n, 4)), columns=["x0", "x1", "x2", "x3"])
    X["c"] = np.digitize(X["x1"] + rng.normal(scale=0.7, size=n), [-0.4, 0.6]).astype(float)
    score = X["x0"] + 0.7 * X["x2"] - 0.5 * X["x3"] + 0.4 * X["c"] + rng.normal(scale=0.4, size=n)
    y = np.digitize(score, [-0.5, 0.6])  # classes 0, 1, 2
    X.loc[rng.rand(n) < 0.1, "x2"] = np.nan
    halves = {"site-a": slice(0, 150), "site-b": slice(150, 300)}
    forests, inters, imputers = [], [], []
    for seed, (owner, cols) in enumerate(COLS.items(), start=1):
        Xs, ys = X.iloc[halves[owner]][cols], y[halves[owner]]
        cats = {"c": LEVELS} if "c" in cols else {}
        rf = RandomForestClassifier(n_estimators=5, random_state=seed).fit(
            Xs.to_numpy(np.float32), ys
        )
        forest = PooledForest.from_sklearn(rf, cols, owner, X=Xs, categories=cats)
        forests.append(fit_surrogates(forest, Xs, SHARED, min_agreement=-1.0, min_rows=2))
        ri = RandomForestClassifier(n_estimators=3, max_depth=5, random_state=seed)
        ri.fit(Xs[SHARED].to_numpy(np.float32), ys)
        inters.append(PooledForest.from_sklearn(ri, SHARED, owner))
        private = [c for c in cols if c not in SHARED]
        imputers.append(fit_imputers(Xs, private, SHARED, categories=cats, owner=owner, cv=None))
    forest = PooledForest.concat(forests)
    payload = forest.to_payload()
    if payload["version"] != 1 or "children_left" not in payload:
        raise SystemExit("run this script with fedforest at commit 4340a46 (see the docstring)")
    std = {c: float(X[c].std(ddof=0)) for c in ["x0", "x1", "x2", "x3"]}
    bundle = model_bundle(
        payload,
        ImputerSet.select(imputers).to_payload(),
        std,
        PooledForest.concat(inters).to_payload(),
        settings={"depth_threshold": 1, "voting": "soft", "seed": 0},
    )
    path = save_payload(Path(__file__).with_name("model_v1.npz"), bundle)
    logger.info("wrote %s (%d trees, %d nodes)", path, forest.n_trees, forest.n_nodes)
    return path


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main()
