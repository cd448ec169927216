"""Shared fixtures: small real scikit-learn forests, hand-built trees, shared FLARE runs.

How the suite runs in parallel (pytest-xdist) is in :mod:`parallel_runs`. The
compiled numba kernels are cached on disk (``FEDFOREST_KERNEL_CACHE``), shared
by the workers and by the site processes of every FLARE run, and kept between
sessions.
"""

from __future__ import annotations

import getpass
import logging
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

from fedforest import PooledForest

pytest_plugins = ["parallel_runs"]

# The kernels' cache folder (fedforest.prediction.kernel_cache), set before any test imports
# them: a folder per user in the temporary directory rather than the user's ~/.cache. Its
# entries are named after the content of the kernels' sources, so a folder shared by
# checkouts and sessions never serves stale code; the site processes of the FLARE runs
# inherit it and load the kernels instead of compiling them again.
try:
    _user = getpass.getuser()
except Exception:  # noqa: BLE001 - no user name in this environment
    _user = "user"
os.environ.setdefault(
    "FEDFOREST_KERNEL_CACHE", str(Path(tempfile.gettempdir()) / f"fedforest-kernels-{_user}")
)


@pytest.fixture(autouse=True)
def _logger_levels():
    """Every logger's level as it was before the test: a test that configures logging (a
    benchmark's ``main`` sets ``fedforest`` to warnings) leaves no level behind for the tests
    that run after it in the same worker and read the library's info lines."""
    manager = logging.root.manager
    before = {name: logger.level for name, logger in manager.loggerDict.items()
              if isinstance(logger, logging.Logger)}  # fmt: skip
    root = logging.root.level
    yield
    logging.root.setLevel(root)
    for name, logger in list(manager.loggerDict.items()):
        if isinstance(logger, logging.Logger):
            logger.setLevel(before.get(name, logging.NOTSET))


def make_tree_forest(
    trees,
    feature_names,
    classes=(0, 1),
    owners=("s1",),
    tree_owner=None,
    categories=None,
    surrogates=None,
):
    """Build a PooledForest from hand-written trees.

    Each tree is a list of nodes in depth-first order; a node is either
    ``("leaf", value, n)`` or ``("split", feature, threshold, left, right, n)``
    with optional keyword dict as 7th item (``saw_missing``, ``missing_left``).
    """
    fields = {k: [] for k in ("l", "r", "f", "t", "n", "m", "s", "v")}
    starts = [0]
    for tree in trees:
        for node in tree:
            if node[0] == "leaf":
                _, value, n = node
                fields["l"].append(-1)
                fields["r"].append(-1)
                fields["f"].append(-1)
                fields["t"].append(0.0)
                fields["m"].append(False)
                fields["s"].append(False)
            else:
                _, feat, thr, left, right, n, *extra = node
                opts = extra[0] if extra else {}
                fields["l"].append(left)
                fields["r"].append(right)
                fields["f"].append(feature_names.index(feat))
                fields["t"].append(thr)
                fields["m"].append(opts.get("missing_left", True))
                fields["s"].append(opts.get("saw_missing", False))
                value = [1.0 / len(classes)] * len(classes)
            fields["n"].append(n)
            fields["v"].append(value)
        starts.append(starts[-1] + len(tree))
    forest = PooledForest(
        feature_names=feature_names,
        classes=np.asarray(classes),
        owners=list(owners),
        categories=categories,
        tree_start=np.asarray(starts),
        tree_owner=np.zeros(len(trees), int) if tree_owner is None else tree_owner,
        children_left=fields["l"],
        children_right=fields["r"],
        feature=fields["f"],
        threshold=fields["t"],
        n_node_samples=fields["n"],
        missing_left=fields["m"],
        saw_missing=fields["s"],
        value=np.asarray(fields["v"], dtype=float),
    )
    if surrogates:
        sf = np.full(forest.n_nodes, -1)
        st = np.zeros(forest.n_nodes)
        sl = np.ones(forest.n_nodes, bool)
        sa = np.zeros(forest.n_nodes)
        for node, (feat, thr, left_le) in surrogates.items():
            sf[node] = feature_names.index(feat)
            st[node] = thr
            sl[node] = left_le
            sa[node] = 0.9
        forest = forest.with_surrogates(sf, st, sl, sa)
    return forest


@pytest.fixture(scope="session")
def table():
    """A 3-class-free binary table with 6 informative-ish numeric columns."""
    rng = np.random.RandomState(0)
    X = pd.DataFrame(rng.normal(size=(600, 6)), columns=[f"x{i}" for i in range(6)])
    logit = X["x0"] + 0.8 * X["x1"] - 0.6 * X["x3"] + 0.5 * X["x5"]
    y = (logit + rng.normal(scale=0.5, size=600) > 0).astype(int)
    return X, y


@pytest.fixture(scope="session")
def two_site_forest(table):
    """Two sites with partially overlapping columns, pooled; plus the sklearn forests."""
    X, y = table
    cols_a = ["x0", "x1", "x2", "x3"]
    cols_b = ["x0", "x1", "x4", "x5"]
    rf_a = RandomForestClassifier(n_estimators=15, random_state=1).fit(X[cols_a][:300], y[:300])
    rf_b = RandomForestClassifier(n_estimators=15, random_state=2).fit(X[cols_b][300:], y[300:])
    fa = PooledForest.from_sklearn(rf_a, cols_a, owner="a")
    fb = PooledForest.from_sklearn(rf_b, cols_b, owner="b")
    return PooledForest.concat([fa, fb]), rf_a, rf_b


# --------------------------------------------------------------------------- shared FLARE runs
# Real simulator runs (15-40 s each) of the demo configs (flare_setup.write_configs' defaults),
# read by tests in several modules of tests/flare/. Those tests carry one xdist_group
# (flare_setup.DEMO_RUNS), so under pytest-xdist each run is still made once. Every folder of
# tests/ is a package named after it (tests/ itself, this file's folder, is on sys.path), so
# the helpers of tests/flare/ are the module flare.flare_setup here.
def _demo_run(tmp_path_factory, mode: str):
    from flare.flare_setup import Run, write_configs

    folder = tmp_path_factory.mktemp(f"demo_{mode}")
    return Run(folder, write_configs(folder, job={"mode": mode}))


@pytest.fixture(scope="session")
def demo_server_run(tmp_path_factory):
    """The demo configs in server mode, with the server-side Inspector (``flare_setup.Run``)."""
    return _demo_run(tmp_path_factory, "server")


@pytest.fixture(scope="session")
def demo_swarm_run(tmp_path_factory):
    """The demo configs in swarm mode, with the server-side Inspector (``flare_setup.Run``)."""
    return _demo_run(tmp_path_factory, "swarm")


# --------------------------------------------------------------------------- UCI-format files
#: Site -> (UCI file name, columns mostly missing there, how the file writes a missing value).
HEART_FILES = {
    "cleveland": ("processed.cleveland.data", (), "?"),
    "hungary": ("processed.hungarian.data", ("slope", "ca", "thal"), "?"),
    "switzerland": ("processed.switzerland.data", ("fbs", "ca"), "NaN"),
    "va": ("processed.va.data", ("slope", "ca", "thal"), ""),
}


def write_heart_disease_files(folder: Path, rows: int = 48, seed: int = 0) -> Path:
    """Four tiny made-up files in the UCI Heart Disease processed format (not the real data):
    14 comma-separated values a line, each site's mostly missing columns as the real files
    have them, ``chol`` written 0 where unmeasured (everywhere at switzerland), Cleveland's
    numbers with decimals."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for site, (name, missing, mark) in HEART_FILES.items():
        lines = []
        for i in range(rows):
            risk = rng.normal()
            num = int(risk > 0) * int(rng.integers(1, 5))
            row = {
                "age": int(50 + 8 * risk + rng.normal(0, 5)),
                "sex": int(rng.integers(0, 2)),
                "cp": int(rng.integers(1, 5)),
                "trestbps": int(rng.normal(130, 15)),
                "chol": 0 if site == "switzerland" else int(rng.normal(240, 40)),
                "fbs": int(rng.integers(0, 2)),
                "restecg": int(rng.integers(0, 3)),
                "thalach": int(150 - 15 * risk + rng.normal(0, 10)),
                "exang": int(risk + rng.normal(0, 0.5) > 0.3),
                "oldpeak": round(max(0.0, risk + rng.normal(0, 0.5)), 1),
                "slope": int(rng.integers(1, 4)),
                "ca": int(rng.integers(0, 4)),
                "thal": int(rng.choice([3, 6, 7])),
                "num": num,
            }
            fields = []
            for column, value in row.items():
                if column in missing and i % 4 != 0:  # three rows in four: mostly missing
                    fields.append(mark)
                elif site == "cleveland":
                    fields.append(f"{float(value):.1f}")
                else:
                    fields.append(str(value))
            if site == "hungary" and i == 1:
                fields[4] = "?"  # a missing cholesterol, written as such
            lines.append(",".join(fields))
        (folder / name).write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture(scope="session")
def heart_disease_files(tmp_path_factory) -> Path:
    """The folder of :func:`write_heart_disease_files`' four files (UCI's names)."""
    return write_heart_disease_files(tmp_path_factory.mktemp("uci") / "heart")


# --------------------------------------------------------------------------- a survival job
@pytest.fixture(scope="session")
def survival_job(tmp_path_factory):
    """The survival demo's job (GBSG2's three hospitals, ``site_configs/survival``) run in
    process once, small: ``(job, folder)``, each site's saved model and metrics in
    ``folder / "saved" / <site>``, the data in ``folder / "data"``."""
    import yaml

    from data_prep.make_survival_data import make_survival_data
    from fedforest.federation.offline import run_job

    folder = tmp_path_factory.mktemp("survival_job")
    make_survival_data(folder / "data", seed=0)
    shipped = Path(__file__).resolve().parents[1] / "site_configs" / "survival"
    configs = folder / "site_configs"
    configs.mkdir()
    job = yaml.safe_load((shipped / "job.yaml").read_text())
    job["forest"]["n_estimators"] = 10
    (configs / "job.yaml").write_text(yaml.safe_dump(job))
    for site in job["job"]["sites"]:
        cfg = yaml.safe_load((shipped / f"{site}.yaml").read_text())
        cfg["data_path"] = str(folder / "data" / f"{site}.csv")
        (configs / f"{site}.yaml").write_text(yaml.safe_dump(cfg))
    return run_job(configs, run_dir=folder / "run", save_root=folder / "saved"), folder
