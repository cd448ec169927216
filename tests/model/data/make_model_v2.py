"""Write ``model_v2.npz``: a site's model file of ``fedforest/model`` version 2.

The file is a fixture of ``tests/model/test_model_files.py``: a real model as a
site saved it before the model carried the site's input mapping (version 3
adds the field ``inputs``), with the deployment the job chose for the site. To
write it again, run this script with fedforest at commit 3c3d347 (the last one
that writes version 2), e.g. from an export of that commit::

    git archive 3c3d347 src | tar -x -C /tmp/v2
    PYTHONPATH=/tmp/v2/src python tests/model/data/make_model_v2.py

Two sites, four features, two classes, imputers, the pooling weights and a
deployment (``mp``, sigmoid-calibrated, for site-a); beside it
``model_v2_rows.csv`` (rows of site-a's columns) and
``model_v2_predictions.csv``, what ``fedforest predict`` of that commit wrote
for them.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier

from fedforest import PooledForest, fit_imputers
from fedforest.model.model_files import model_bundle, save_payload
from fedforest.prediction.calibration import fit_calibration

logger = logging.getLogger("make_model_v2")
COLS = {"site-a": ["x0", "x1", "x2"], "site-b": ["x0", "x1", "x3"]}


def main() -> Path:
    rng = np.random.RandomState(12)
    n = 300
    X = pd.DataFrame(rng.normal(size=(n, 4)), columns=["x0", "x1", "x2", "x3"])
    y = (X["x0"] + 0.7 * X["x2"] - 0.5 * X["x3"] + rng.normal(scale=0.4, size=n) > 0).astype(int)
    halves = {"site-a": slice(0, 150), "site-b": slice(150, 300)}
    forests = []
    for seed, (owner, cols) in enumerate(COLS.items(), start=1):
        rf = RandomForestClassifier(n_estimators=5, random_state=seed)
        rf.fit(X.iloc[halves[owner]][cols], y[halves[owner]])
        forests.append(PooledForest.from_sklearn(rf, cols, owner))
    forest = PooledForest.concat(forests)
    imputers = fit_imputers(X, ["x2", "x3"], ["x0", "x1"], owner="site-a", cv=None)
    from fedforest import PooledForestClassifier

    proba = PooledForestClassifier(
        forest, strategy="mp", imputers=imputers, feature_std=X.std().to_dict()
    ).predict_proba(X[COLS["site-a"]])
    calibrator = fit_calibration(proba, y, np.array([0, 1]), "sigmoid", None, 0).calibrator
    bundle = model_bundle(
        forest.to_payload(),
        imputers.to_payload(),
        X.std().to_dict(),
        settings={"seed": 0, "owner_weights": {"site-a": 150.0, "site-b": 150.0}},
        deployment={
            "site": "site-a",
            "strategy": "mp",
            "calibrator": calibrator.to_payload(),
            "guess_weight": None,
        },
    )
    if bundle["version"] != 2:
        raise SystemExit("run this script with fedforest at commit 3c3d347 (see the docstring)")
    path = save_payload(Path(__file__).resolve().parent / "model_v2.npz", bundle)
    pd.DataFrame(X[COLS["site-a"]][:40]).to_csv(path.with_name("model_v2_rows.csv"), index=False)
    from fedforest.cli import main as cli

    rows, out = path.with_name("model_v2_rows.csv"), path.with_name("model_v2_predictions.csv")
    out.unlink(missing_ok=True)
    cli(["predict", "--model", str(path), "--data", str(rows), "--out", str(out)])
    logger.warning("wrote %s", path)
    return path


if __name__ == "__main__":
    main()
