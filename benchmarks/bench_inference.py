"""Inference speed of every strategy, as a ratio to scikit-learn on the same forest.

Three sites each train 100 trees on 2,000 rows of a 20-feature table; the
pooled forest (300 trees) predicts 10,000 rows. Times are measured in one run
and compared with ``RandomForestClassifier.predict_proba`` on a forest holding
the same 300 trees, with every feature present:

* all features present: every strategy (target: within 2x);
* half the features absent (the last 10 columns): fpv, pr, ss, mi (target:
  within 3x) and mp, ipr (target: within 10x), with imputers, pooled standard
  deviations and surrogate splits fitted as the job fits them;
* a naive per-row Python traversal, timed on a few rows and scaled up.

Usage::

    python benchmarks/bench_inference.py [--rows 10000] [--out benchmarks/results]

Results go to ``<out>/inference.json`` and ``<out>/inference.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd
import sklearn
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier

from fedforest import (
    ImputerSet,
    PooledForest,
    PooledForestClassifier,
    fit_imputers,
    fit_surrogates,
)
from fedforest.prediction.strategies import STRATEGIES

logger = logging.getLogger("bench_inference")

N_FEATURES = 20
N_SITES = 3
TREES_PER_SITE = 100
TRAIN_ROWS = 2000
TARGETS_ALL = 2.0
TARGETS_HALF = {"fpv": 3.0, "pr": 3.0, "ss": 3.0, "mi": 3.0, "mp": 10.0, "ipr": 10.0}


def best_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def naive_predict_proba(forest: PooledForest, X: np.ndarray) -> np.ndarray:
    """Per-row, per-node Python traversal: the slow way this package avoids."""
    out = np.zeros((X.shape[0], forest.n_classes))
    left, right = forest.global_children
    for i in range(X.shape[0]):
        for t in range(forest.n_trees):
            node = int(forest.tree_start[t])
            while forest.feature[node] >= 0:
                x = X[i, forest.feature[node]]
                node = int(left[node] if x <= forest.threshold[node] else right[node])
            out[i] += forest.value[node]
    return out / forest.n_trees


def build(rows: int, seed: int = 0):
    X, y = make_classification(
        n_samples=N_SITES * TRAIN_ROWS + rows,
        n_features=N_FEATURES,
        n_informative=10,
        n_redundant=4,
        random_state=seed,
    )
    names = [f"f{i:02d}" for i in range(N_FEATURES)]
    frame = pd.DataFrame(X, columns=names)
    shared, absent = names[:10], names[10:]
    forests, imputer_sets, stds, estimators = [], [], [], []
    for s in range(N_SITES):
        part = slice(s * TRAIN_ROWS, (s + 1) * TRAIN_ROWS)
        Xs, ys = frame[part], y[part]
        rf = RandomForestClassifier(n_estimators=TREES_PER_SITE, random_state=seed + s)
        rf.fit(Xs, ys)
        owner = f"site-{s + 1}"
        forest = PooledForest.from_sklearn(rf, names, owner=owner)
        forests.append(fit_surrogates(forest, Xs, shared))
        imputer_sets.append(fit_imputers(Xs, absent, shared, owner=owner, random_state=seed))
        stds.append(Xs.std())
        estimators.extend(rf.estimators_)
        logger.info("site %d trained and fitted imputers and surrogates", s + 1)
    reference = RandomForestClassifier(n_estimators=len(estimators)).fit(X[:50], y[:50])
    reference.estimators_ = estimators
    reference.n_estimators = len(estimators)
    pooled = PooledForest.concat(forests)
    imputers = ImputerSet.select(imputer_sets)
    feature_std = pd.concat(stds, axis=1).mean(axis=1).to_dict()
    test = frame[N_SITES * TRAIN_ROWS :].reset_index(drop=True)
    return reference, pooled, imputers, feature_std, test, shared


def run(rows: int, out: Path) -> dict:
    reference, pooled, imputers, feature_std, test, shared = build(rows)
    X_np = test.to_numpy()
    sk = best_time(lambda: reference.predict_proba(X_np), 5)
    logger.info("scikit-learn predict_proba: %.3f s", sk)
    results = {"sklearn_seconds": sk, "all_features": {}, "half_absent": {}}
    half = test[shared]
    for strategy in STRATEGIES:
        clf = PooledForestClassifier(
            pooled,
            strategy=strategy,
            imputers=imputers,
            feature_std=feature_std,
            site="site-1",
            random_state=0,
        )
        clf.predict_proba(test)  # warm the compiled trees
        t_all = best_time(lambda clf=clf: clf.predict_proba(test), 3)
        assert strategy in ("park", "local") or np.array_equal(
            clf.predict_proba(test), reference.predict_proba(X_np)
        )
        clf.predict_proba(half)
        first = best_time(lambda clf=clf: clf.predict_proba(half), 1)
        t_half = (
            first
            if first > 2.0
            else min(first, best_time(lambda clf=clf: clf.predict_proba(half), 2))
        )
        diag = clf.diagnostics_
        if diag.n_fallback and diag.n_fallback < len(half):
            # routing cost alone: the same strategy on the rows that kept a tree, scaled up
            kept_rows = half[~diag.fallback_rows]
            t_kept = best_time(lambda clf=clf, rows=kept_rows: clf.predict_proba(rows), 3)
            t_routing = t_kept * len(half) / len(kept_rows)
        else:
            t_routing = t_half
        results["all_features"][strategy] = {"seconds": t_all, "ratio": t_all / sk}
        results["half_absent"][strategy] = {
            "seconds": t_half,
            "ratio": t_half / sk,
            "mean_trees_kept": float(diag.trees_kept.mean()),
            "fallback_rows": diag.n_fallback,
            "ratio_without_fallback": t_routing / sk,
            "engine": diag.engine,
        }
        logger.info(
            "%-5s all features %.3f s (%.2fx)  half absent %.3f s (%.2fx, %d rows fell back)",
            strategy,
            t_all,
            t_all / sk,
            t_half,
            t_half / sk,
            diag.n_fallback,
        )
    few = 20
    naive = best_time(lambda: naive_predict_proba(pooled, X_np[:few].astype(np.float32)), 1)
    naive_full = naive * rows / few
    results["naive_python"] = {"seconds_estimated": naive_full, "ratio": naive_full / sk}
    logger.info("naive per-row traversal: %.1f s estimated (%.0fx)", naive_full, naive_full / sk)
    results["setup"] = {
        "rows": rows,
        "trees": pooled.n_trees,
        "nodes": pooled.n_nodes,
        "features": N_FEATURES,
        "train_rows_per_site": TRAIN_ROWS,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scikit_learn": sklearn.__version__,
        "machine": platform.machine(),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "inference.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "inference.md").write_text(markdown(results))
    return results


def markdown(results: dict) -> str:
    setup = results["setup"]
    lines = [
        f"Forest: {setup['trees']} trees ({setup['nodes']} nodes), {setup['features']} "
        f"features; {setup['rows']} rows predicted. scikit-learn predict_proba: "
        f"{results['sklearn_seconds']:.3f} s.",
        "",
        "| strategy | all features | target | half absent | target | trees kept | fallback rows "
        "| half absent, routing alone |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for strategy, row in results["all_features"].items():
        h = results["half_absent"][strategy]
        target = TARGETS_HALF.get(strategy)
        lines.append(
            f"| {strategy} | {row['ratio']:.2f}x | {TARGETS_ALL:.0f}x | {h['ratio']:.2f}x | "
            f"{f'{target:.0f}x' if target else '-'} | {h['mean_trees_kept']:.1f} | "
            f"{h['fallback_rows']} | {h['ratio_without_fallback']:.2f}x |"
        )
    lines += [
        "",
        f"Naive per-row Python traversal: about {results['naive_python']['ratio']:.0f}x.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    results = run(args.rows, args.out)
    print(markdown(results))


if __name__ == "__main__":
    main()
