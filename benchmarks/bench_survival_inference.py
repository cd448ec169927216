"""Inference speed of survival trees, as a ratio to scikit-survival, against classification's.

Three sites each grow 100 trees on 2,000 rows of a 20-feature table; each
pooled forest (300 trees) predicts 10,000 rows with the last 10 columns
absent. The same rows give two forests grown with the same parameters
(scikit-survival's defaults for a survival forest: ``min_samples_split`` 6,
``min_samples_leaf`` 3, ``max_features`` ``sqrt``): survival trees
(``RandomSurvivalForest`` on the rows' times and events,
:class:`~fedforest.PooledForestSurvival`) and classification trees
(``RandomForestClassifier`` on the events,
:class:`~fedforest.PooledForestClassifier`), both with imputers, pooled
standard deviations and surrogate splits fitted as the job fits them.

Times are recorded in ``--times`` whole units (as days are), so every site's
forest has the same times and the pooled survival forest's grid is those
times: scikit-survival can then hold the 300 survival trees in one
``RandomSurvivalForest``, whose ``predict_cumulative_hazard_function`` with
every feature present is the survival reference, as scikit-learn's
``predict_proba`` on the 300 classification trees is classification's.
Each strategy's time with half the features absent is a ratio to its task's
reference on the same trees, timed in turn with each measurement
(:func:`benchmarks.bench_inference.paired_times`; one thread on both sides:
the numba engine with one thread). The target: survival's ratio at most
twice classification's on the same forest size, for every strategy measured.

Grown with the same parameters, a survival tree has about twice the nodes of a
classification tree on the same rows (the log-rank split keeps finding
differences in time where the events alone are pure), so two pairs of forests
are measured: the same size, where the survival trees' ``min_samples_leaf``
(and ``min_samples_split``, twice it) is the one whose forest's node count is
closest to the classification forest's (:func:`same_size_params`, searched on
the first site's rows), and the same parameters. The target applies to the
pair of the same size.

Usage::

    python benchmarks/bench_survival_inference.py [--rows 10000] [--times 50]

Results go to ``<out>/inference_survival.json`` and ``.md``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier
from sksurv.ensemble import RandomSurvivalForest

from benchmarks import harness
from benchmarks.bench_inference import ENGINES, N_FEATURES, N_SITES, TRAIN_ROWS, paired_times
from fedforest import (
    ImputerSet,
    PooledForest,
    PooledForestClassifier,
    PooledForestSurvival,
    fit_imputers,
    fit_surrogates,
)
from fedforest.prediction.engines import load_kernels
from fedforest.survival_metrics import survival_target

logger = logging.getLogger("bench_survival_inference")

TREES_PER_SITE = 100
#: The forests' parameters: scikit-survival's defaults, for both tasks.
FOREST_PARAMS = {
    "n_estimators": TREES_PER_SITE,
    "max_features": "sqrt",
    "min_samples_split": 6,
    "min_samples_leaf": 3,
}
#: The strategies measured with half the features absent.
STRATEGIES = ("fpv", "pr", "mi", "ipr", "mp", "ss")
#: Survival's ratio to scikit-learn may be at most this many times classification's.
TARGET = 2.0
ENGINE = "numba_1_thread"
GUESS_WEIGHT = 0.5
#: The survival trees' ``min_samples_leaf`` tried for the pair of the same size.
SURVIVAL_LEAVES = range(FOREST_PARAMS["min_samples_leaf"], 21)
#: The pairs of forests measured: the target applies to the first.
PAIRS = ("same_size", "same_params")
PAIR_TITLES = {"same_size": "Same forest size (the target)", "same_params": "Same parameters"}


def survival_rows(n: int, n_times: int, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Rows of 20 features and their survival target: exponential times, about 15% censored,
    recorded as the number 1 .. ``n_times`` of the period they fall in (periods of as many
    rows each)."""
    X, _ = make_classification(
        n_samples=n, n_features=N_FEATURES, n_informative=10, n_redundant=4, random_state=seed
    )
    rng = np.random.default_rng(seed)
    beta = np.zeros(N_FEATURES)
    beta[:10] = rng.normal(scale=0.4, size=10)
    time = rng.exponential(np.exp(-X @ beta))
    censor = rng.exponential(np.quantile(time, 0.9), size=n)
    frame = pd.DataFrame(X, columns=[f"f{i:02d}" for i in range(N_FEATURES)])
    observed = np.minimum(time, censor)
    # n_times periods holding as many rows each (a follow-up visit's number, say)
    edges = np.quantile(observed, np.linspace(0, 1, n_times + 1)[1:-1])
    recorded = np.searchsorted(edges, observed).astype(np.float64) + 1
    return frame, survival_target(recorded, time <= censor)


def leaf_params(min_samples_leaf: int) -> dict:
    """The forests' parameters with ``min_samples_leaf`` (and ``min_samples_split`` twice it)."""
    return {
        **FOREST_PARAMS,
        "min_samples_leaf": min_samples_leaf,
        "min_samples_split": 2 * min_samples_leaf,
    }


def same_size_params(rows: int, n_times: int, seed: int = 0) -> dict:
    """The survival forest's parameters whose node count is closest to classification's.

    Searched on the first site's rows of :func:`build`'s table over :data:`SURVIVAL_LEAVES`
    (the first of equally close ones): the classification forest grown with
    :data:`FOREST_PARAMS` on the events, a survival forest for each ``min_samples_leaf`` on
    the times and events, each with the first site's seed.
    """
    frame, y = survival_rows(N_SITES * TRAIN_ROWS + rows, n_times, seed)
    frame, y = frame[:TRAIN_ROWS], y[:TRAIN_ROWS]
    rf = RandomForestClassifier(**FOREST_PARAMS, random_state=seed)
    target = _nodes(rf.fit(frame, y["event"].astype(int)))
    best, gap = FOREST_PARAMS, None
    for leaf in SURVIVAL_LEAVES:
        params = leaf_params(leaf)
        nodes = _nodes(RandomSurvivalForest(**params, random_state=seed).fit(frame, y))
        if gap is None or abs(nodes - target) < gap:
            best, gap = params, abs(nodes - target)
        if nodes <= target:  # node counts only fall as the leaves grow
            break
    return best


def _nodes(forest) -> int:
    return sum(tree.tree_.node_count for tree in forest.estimators_)


def build(rows: int, n_times: int, seed: int = 0, survival_params: dict | None = None) -> dict:
    """The survival and classification pooled forests of the same sites, and the test rows.

    The classification trees are grown with :data:`FOREST_PARAMS`, the survival trees with
    ``survival_params`` (:data:`FOREST_PARAMS` when not given).
    """
    survival_params = FOREST_PARAMS if survival_params is None else survival_params
    frame, y = survival_rows(N_SITES * TRAIN_ROWS + rows, n_times, seed)
    names = list(frame.columns)
    shared, absent = names[:10], names[10:]
    grid = np.arange(1.0, n_times + 1)
    parts: dict[str, list] = {"survival": [], "classification": []}
    imputer_sets, stds, estimators, survival_trees = [], [], [], []
    for s in range(N_SITES):
        part = slice(s * TRAIN_ROWS, (s + 1) * TRAIN_ROWS)
        Xs, ys = frame[part], y[part]
        owner = f"site-{s + 1}"
        rsf = RandomSurvivalForest(**survival_params, random_state=seed + s).fit(Xs, ys)
        if not np.array_equal(rsf.unique_times_, grid):
            raise SystemExit(f"site {s + 1} has no row at some of the {n_times} times")
        survival_trees.extend(rsf.estimators_)
        rf = RandomForestClassifier(**FOREST_PARAMS, random_state=seed + s)
        rf.fit(Xs, ys["event"].astype(int))
        survival = PooledForest.from_sksurv(rsf, names, owner, times=grid)
        classes = PooledForest.from_sklearn(rf, names, owner=owner)
        parts["survival"].append(fit_surrogates(survival, Xs, shared))
        parts["classification"].append(fit_surrogates(classes, Xs, shared))
        imputer_sets.append(fit_imputers(Xs, absent, shared, owner=owner, random_state=seed))
        stds.append(Xs.std())
        estimators.extend(rf.estimators_)
        logger.info("site %d grew its survival and classification trees", s + 1)
    references = {
        "classification": _holding(RandomForestClassifier, estimators, frame, y["event"]),
        "survival": _holding(RandomSurvivalForest, survival_trees, frame, y),
    }
    test = frame[N_SITES * TRAIN_ROWS :].reset_index(drop=True)
    return {
        "forests": {task: PooledForest.concat(f) for task, f in parts.items()},
        "imputers": ImputerSet.select(imputer_sets),
        "feature_std": pd.concat(stds, axis=1).mean(axis=1).to_dict(),
        "references": references,
        "test": test,
        "half": test[shared],
        "grid": grid,
        "survival_params": survival_params,
    }


def _holding(Forest, trees: list, frame: pd.DataFrame, y):
    """A fitted forest of ``Forest`` holding ``trees``: the reference on the same trees.

    Fitted on an array, as it is called (:func:`reference_call`): the timed calls then
    check no column names.
    """
    rows = np.r_[0:200]
    forest = Forest(n_estimators=1, random_state=0).fit(frame.iloc[rows].to_numpy(), y[rows])
    forest.estimators_ = list(trees)
    forest.n_estimators = len(trees)
    return forest


def reference_call(task: str, forest, X: np.ndarray):
    """What the reference computes: class probabilities, or every row's cumulative hazard."""
    if task == "survival":
        return lambda: forest.predict_cumulative_hazard_function(X, return_array=True)
    return lambda: forest.predict_proba(X)


def time_half_absent(setup: dict, task: str, strategy: str, sk_fn) -> dict:
    """One strategy's seconds and ratio with half the features absent (numba, one thread)."""
    Estimator = PooledForestSurvival if task == "survival" else PooledForestClassifier
    est = Estimator(
        setup["forests"][task],
        strategy=strategy,
        imputers=setup["imputers"],
        feature_std=setup["feature_std"],
        site="site-1",
        random_state=0,
        engine=ENGINES[ENGINE][0],
        guess_weight=GUESS_WEIGHT,
    )
    if task == "survival":

        def predict(rows):
            return est.predict_cumulative_hazard_function(rows, return_array=True)

    else:
        predict = est.predict_proba
    half = setup["half"]
    predict(half)  # warm the compiled trees and kernels
    seconds, sk = paired_times(lambda: predict(half), sk_fn, 3)
    return {
        "seconds": seconds,
        "sklearn_seconds": sk,
        "ratio": seconds / sk,
        # rows whose every kept tree is discarded predict with mp over all the trees
        "fallback_rows": int(est.diagnostics_.n_fallback),
    }


def measure_pair(setup: dict) -> dict:
    """Every strategy's ratios on one pair of forests, and the pair's sizes."""
    X_np = setup["test"].to_numpy()
    calls = {task: reference_call(task, f, X_np) for task, f in setup["references"].items()}
    # with every feature present the pooled survival forest is scikit-survival
    full = PooledForestSurvival(setup["forests"]["survival"]).predict_cumulative_hazard_function(
        setup["test"], return_array=True
    )
    np.testing.assert_allclose(full, calls["survival"](), rtol=0, atol=1e-12)
    rows_out = {}
    progress = harness.Progress(logger, len(STRATEGIES), "strategies")
    for strategy in STRATEGIES:
        row = {
            task: time_half_absent(setup, task, strategy, calls[task]) for task in setup["forests"]
        }
        row["ratio_of_ratios"] = row["survival"]["ratio"] / row["classification"]["ratio"]
        row["met"] = row["ratio_of_ratios"] <= TARGET
        rows_out[strategy] = row
        progress.step(f"{strategy}: survival / classification {row['ratio_of_ratios']:.2f}x")
    return {
        "forest_params": {"survival": setup["survival_params"], "classification": FOREST_PARAMS},
        "nodes": {task: f.n_nodes for task, f in setup["forests"].items()},
        "mean_depth": {
            task: float(np.mean([t.tree_.max_depth for t in forest.estimators_]))
            for task, forest in setup["references"].items()
        },
        "strategies": rows_out,
    }


def run(rows: int, n_times: int, out: Path) -> dict:
    kernels, _ = load_kernels()
    if kernels is None:
        raise SystemExit("numba cannot be imported: the targets apply to its one-thread engine")
    kernels.MAX_THREADS = ENGINES[ENGINE][1]
    params = {"same_size": same_size_params(rows, n_times), "same_params": FOREST_PARAMS}
    pairs = {}
    for pair in PAIRS:
        logger.info("%s: survival trees grown with %s", pair, _params_text(params[pair]))
        setup = build(rows, n_times, survival_params=params[pair])
        pairs[pair] = measure_pair(setup)
    kernels.MAX_THREADS = None
    results = {
        "setup": {
            "rows": rows,
            "trees": setup["forests"]["survival"].n_trees,
            "features": N_FEATURES,
            "absent": N_FEATURES // 2,
            "times": int(setup["grid"].shape[0]),
            "train_rows_per_site": TRAIN_ROWS,
            "engine": ENGINE,
        },
        "target": TARGET,
        "target_pair": PAIRS[0],
        "pairs": pairs,
    }
    harness.write_results(out, "inference_survival", results, markdown(results), logger)
    return results


def _params_text(params: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in params.items())


def markdown(results: dict) -> str:
    s = results["setup"]
    lines = [
        "# Survival inference against classification, same forest size",
        "",
        f"Forests: {s['trees']} trees of {s['features']} features from {N_SITES} sites of "
        f"{s['train_rows_per_site']} rows each; {s['rows']} rows predicted with "
        f"{s['absent']} of the features absent; numba on one thread. Each task's ratio is to "
        "its reference on the same trees with every feature present (one thread), timed in "
        "turn with the measurement: scikit-survival's `predict_cumulative_hazard_function` "
        f"(survival, curves on {s['times']} time points; the pooled forest with every "
        "feature present gives its numbers, checked) and scikit-learn's `predict_proba` "
        "(classification). Two pairs of forests: the survival trees grown to the "
        "classification forest's node count (their `min_samples_leaf` searched on the first "
        "site's rows), where the target applies, and both grown with the same parameters.",
    ]
    for pair, p in results["pairs"].items():
        lines += [
            "",
            f"## {PAIR_TITLES[pair]}",
            "",
            f"Survival trees: {_params_text(p['forest_params']['survival'])}; "
            f"{p['nodes']['survival']} nodes, mean depth {p['mean_depth']['survival']:.1f}. "
            f"Classification trees: {_params_text(p['forest_params']['classification'])}; "
            f"{p['nodes']['classification']} nodes, mean depth "
            f"{p['mean_depth']['classification']:.1f}.",
            "",
            "| strategy | survival | classification | survival / classification | target | "
            "rows falling back to mp (survival / classification) |",
            "|---|---|---|---|---|---|",
        ]
        for name, row in p["strategies"].items():
            verdict = "met" if row["met"] else "missed"
            if pair != results["target_pair"]:
                verdict = f"({verdict}; not the target's pair)"
            lines.append(
                f"| {name} | {row['survival']['ratio']:.2f}x | "
                f"{row['classification']['ratio']:.2f}x | {row['ratio_of_ratios']:.2f}x | "
                f"≤ {results['target']:g}x: {verdict} | "
                f"{row['survival']['fallback_rows']} / "
                f"{row['classification']['fallback_rows']} |"
            )
        met = sum(r["met"] for r in p["strategies"].values())
        lines += [
            "",
            f"{PAIR_TITLES[pair]}: survival within {results['target']:g}x of classification "
            f"for {met} of {len(p['strategies'])} strategies.",
        ]
    lines += [
        "",
        "A row whose every kept tree is discarded falls back to `mp` over all the trees "
        "(the costliest strategy); the last column counts those rows. Grown with the same "
        "parameters, the survival trees are deeper than the classification trees, so `fpv` "
        "discards more rows' trees and pays `mp`'s price on more rows.",
    ]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--rows", type=harness.at_least(20), default=10_000)
    parser.add_argument("--times", type=harness.at_least(2), default=50)
    args = parser.parse_args(argv)
    harness.start(logger)
    run(args.rows, args.times, args.out)


if __name__ == "__main__":
    main()
