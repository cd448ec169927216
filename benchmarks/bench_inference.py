"""Inference speed of every strategy, as a ratio to scikit-learn on the same forest.

Three sites each train 100 trees on 2,000 rows of a 20-feature table; the
pooled forest (300 trees) predicts 10,000 rows. Times are measured in one run
and compared with ``RandomForestClassifier.predict_proba`` on a forest holding
the same 300 trees, with every feature present (one thread, as scikit-learn
predicts by default), timed in turn with each measurement so that both see the
same load on a shared machine (:func:`paired_times`):

* all features present: every strategy (target: within 1.5x);
* half the features absent (the last 10 columns): fpv (including the rows
  that fall back to mp), ss, mi, mp (target: within 3x), pr and ipr (within
  2x), with imputers, pooled standard deviations and surrogate splits fitted
  as the job fits them;
* a naive per-row Python traversal, timed on a few rows and scaled up.

Each is measured with both engines of the dynamic traversals
(``PooledForestClassifier(engine=...)``): ``numba`` (compiled kernels, when
numba is installed) and ``numpy``. numba is measured twice: on one thread
(``NUMBA_NUM_THREADS=1``, or ``numba_kernels.MAX_THREADS = 1`` as here),
against scikit-learn's single thread, which is the fair ratio and the one the
targets apply to; and on every core the process may use (its default), which
is what a site sees on an idle machine. The numpy engine runs on one thread.
The engines' predictions are checked to be identical.

Every forest considers ``sqrt`` of the features at each split (the job's
default ``forest.max_features``, and scikit-learn's for classifiers).
``--task regression`` measures the same with regression trees
(``RandomForestRegressor`` on ``make_regression`` rows,
``PooledForestRegressor.predict`` against ``RandomForestRegressor.predict`` on
the same 300 trees); the targets are the same ratios.

``--forest job`` grows the trees as a job's site does under the privacy
policy a site gets by default (``min_samples_leaf`` 5 and 30% of the rows
per tree: :func:`~fedforest.privacy.policy.job_default_policy` through
:func:`~fedforest.federation.training.forest_params_for`) instead of
scikit-learn's defaults (fully grown trees on bootstrap samples of every row).

Usage::

    python benchmarks/bench_inference.py [--rows 10000] [--out benchmarks/results]
    python benchmarks/bench_inference.py --task regression [--engines numba_1_thread]
    python benchmarks/bench_inference.py [--task regression] --forest job

Results go to ``<out>/inference.json`` and ``<out>/inference.md``
(``inference_regression.*`` with ``--task regression``, ``*_job.*`` with
``--forest job``).
"""

from __future__ import annotations

import logging
import platform
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd
import sklearn
from sklearn.datasets import make_classification, make_regression
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from benchmarks import harness
from fedforest import (
    ImputerSet,
    PooledForest,
    PooledForestClassifier,
    PooledForestRegressor,
    fit_imputers,
    fit_surrogates,
)
from fedforest.federation.training import forest_params_for
from fedforest.model.inputs import to_global_matrix
from fedforest.model.traversal import BRANCH, MISSING_KIND, CompiledForest, node_kinds, traverse
from fedforest.prediction.cache import ForestCache
from fedforest.prediction.engines import load_kernels
from fedforest.prediction.imputation import impute
from fedforest.prediction.strategies import Strategy
from fedforest.privacy.policy import job_default_policy
from fedforest.rules import get as get_rule
from fedforest.rules import strategies as registered_strategies

logger = logging.getLogger("bench_inference")

N_FEATURES = 20
N_SITES = 3
TREES_PER_SITE = 100
TRAIN_ROWS = 2000
TARGETS_ALL = 1.5
TARGETS_HALF = {"fpv": 3.0, "pr": 2.0, "ss": 3.0, "mi": 3.0, "mp": 3.0, "ipr": 2.0}
#: ``wmp``'s weight of a tree that guessed (a number: nothing is fitted here).
GUESS_WEIGHT = 0.5
#: The measured engines: (engine of the estimator, threads of the numba kernels).
ENGINES = {
    "numba_1_thread": ("numba", 1),
    "numba_all_cores": ("numba", None),
    "numpy": ("numpy", 1),
}
#: The figure the targets apply to: one thread on both sides.
TARGET_ENGINE = "numba_1_thread"


def engine_label(key: str, cores: int | None) -> str:
    engine, threads = ENGINES[key]
    if engine == "numpy":
        return "numpy, 1 thread"
    if threads == 1:
        return "numba, 1 thread"
    return f"numba, all {cores} cores"


best_time = harness.best_time


def paired_times(fn, sk_fn, repeats: int) -> tuple[float, float]:
    """Best times of ``fn`` and of scikit-learn's ``sk_fn``, measured in turn.

    Each repeat times scikit-learn right before ``fn``, so that both see the
    same load on a shared machine; the ratio of the two minima is reported.
    """
    times, sk_times = [], []
    for _ in range(repeats):
        sk_times.append(best_time(sk_fn, 1))
        times.append(best_time(fn, 1))
    return min(times), min(sk_times)


def naive_predict_proba(forest: PooledForest, X: np.ndarray) -> np.ndarray:
    """Per-row, per-node Python traversal: the slow way this package avoids."""
    out = np.zeros((X.shape[0], forest.n_outputs))
    left, right = forest.global_children
    for i in range(X.shape[0]):
        for t in range(forest.n_trees):
            node = int(forest.tree_start[t])
            while forest.feature[node] >= 0:
                x = X[i, forest.feature[node]]
                node = int(left[node] if x <= forest.threshold[node] else right[node])
            out[i] += forest.value[node]
    return out / forest.n_trees


def predict(estimator, X):
    """What is timed: class probabilities, or the predicted numbers (regression)."""
    if hasattr(estimator, "predict_proba"):
        return estimator.predict_proba(X)
    return estimator.predict(X)


def forest_params(forest: str) -> dict:
    """The scikit-learn forest's parameters: its defaults, or a job site's by default."""
    params = {"n_estimators": TREES_PER_SITE, "max_features": "sqrt"}
    if forest == "job":
        params = forest_params_for(job_default_policy(), params, TRAIN_ROWS)
    return params


def build(rows: int, seed: int = 0, task: str = "classification", forest: str = "sklearn"):
    n = N_SITES * TRAIN_ROWS + rows
    if task == "regression":
        X, y = make_regression(
            n_samples=n, n_features=N_FEATURES, n_informative=10, noise=10.0, random_state=seed
        )
        Forest = RandomForestRegressor
    else:
        X, y = make_classification(
            n_samples=n, n_features=N_FEATURES, n_informative=10, n_redundant=4, random_state=seed
        )
        Forest = RandomForestClassifier
    names = [f"f{i:02d}" for i in range(N_FEATURES)]
    frame = pd.DataFrame(X, columns=names)
    shared, absent = names[:10], names[10:]
    forests, imputer_sets, stds, estimators = [], [], [], []
    for s in range(N_SITES):
        part = slice(s * TRAIN_ROWS, (s + 1) * TRAIN_ROWS)
        Xs, ys = frame[part], y[part]
        # max_features "sqrt" for both tasks: the job's default (forest.max_features)
        rf = Forest(**forest_params(forest), random_state=seed + s)
        rf.fit(Xs, ys)
        owner = f"site-{s + 1}"
        site_forest = PooledForest.from_sklearn(rf, names, owner=owner)
        forests.append(fit_surrogates(site_forest, Xs, shared))
        imputer_sets.append(fit_imputers(Xs, absent, shared, owner=owner, random_state=seed))
        stds.append(Xs.std())
        estimators.extend(rf.estimators_)
        logger.info("site %d trained and fitted imputers and surrogates", s + 1)
    reference = Forest(n_estimators=len(estimators)).fit(X[:50], y[:50])
    reference.estimators_ = estimators
    reference.n_estimators = len(estimators)
    pooled = PooledForest.concat(forests)
    imputers = ImputerSet.select(imputer_sets)
    feature_std = pd.concat(stds, axis=1).mean(axis=1).to_dict()
    test = frame[N_SITES * TRAIN_ROWS :].reset_index(drop=True)
    return reference, pooled, imputers, feature_std, test, shared


def time_strategy(pooled, imputers, feature_std, test, half, strategy, key, sk_fn, reference):
    """Seconds and ratios of one strategy with one engine, and its half-absent predictions.

    Every ratio is to scikit-learn timed in turn with the measurement
    (:func:`paired_times`).
    """
    engine, threads = ENGINES[key]
    kernels, _ = load_kernels()
    if kernels is not None:
        kernels.MAX_THREADS = threads
    Estimator = PooledForestRegressor if pooled.is_regression else PooledForestClassifier
    clf = Estimator(
        pooled,
        strategy=strategy,
        imputers=imputers,
        feature_std=feature_std,
        site="site-1",
        random_state=0,
        engine=engine,
        guess_weight=GUESS_WEIGHT,
    )
    predict(clf, test)  # warm the compiled trees
    t_all, sk_all = paired_times(lambda: predict(clf, test), sk_fn, 3)
    assert strategy in ("park", "local") or np.array_equal(
        predict(clf, test), predict(reference, test.to_numpy())
    )
    predict(clf, half)  # and the kernels
    first, sk_half = paired_times(lambda: predict(clf, half), sk_fn, 1)
    if first <= 2.0:
        again, sk_again = paired_times(lambda: predict(clf, half), sk_fn, 2)
        first, sk_half = min(first, again), min(sk_half, sk_again)
    t_half = first
    proba = predict(clf, half)
    diag = clf.diagnostics_
    if diag.n_fallback and diag.n_fallback < len(half):
        # routing cost alone: the same strategy on the rows that kept a tree, scaled up
        kept_rows = half[~diag.fallback_rows]
        t_kept, sk_kept = paired_times(lambda: predict(clf, kept_rows), sk_fn, 3)
        t_routing = t_kept * len(half) / len(kept_rows)
        sk_routing = sk_kept
    else:
        t_routing, sk_routing = t_half, sk_half
    logger.info(
        "%-5s %-15s all features %.3f s (%.2fx)  half absent %.3f s (%.2fx, %d rows fell back)",
        strategy,
        key,
        t_all,
        t_all / sk_all,
        t_half,
        t_half / sk_half,
        diag.n_fallback,
    )
    row_all = {"seconds": t_all, "ratio": t_all / sk_all, "sklearn_seconds": sk_all}
    row_half = {
        "seconds": t_half,
        "ratio": t_half / sk_half,
        "sklearn_seconds": sk_half,
        "mean_trees_kept": float(diag.trees_kept.mean()),
        "fallback_rows": diag.n_fallback,
        "ratio_without_fallback": t_routing / sk_routing,
        "engine": diag.engine,
        "dynamic_engine": diag.dynamic_engine,
    }
    return row_all, row_half, proba


def marginal_walk(pooled, imputers, feature_std, half, test, reference, sample: int = 1000):
    """What exact marginalisation visits per (row, tree) pair, and what a site could collapse.

    Counts, over ``sample`` rows of ``half``, the nodes ``mp``'s walk visits
    per (row, tree) pair (the numpy engine's walk, which the kernels
    reproduce): leaves, branching nodes (on an absent column) and among them
    those whose probability depends on the row (an imputer), and nodes read on
    a present column; against the nodes on scikit-learn's path with every
    feature present. Then the subtrees whose every split is on an absent
    column: the share of the forest's nodes (and of the visits) strictly
    inside them, which a forest compiled for the site could replace by one
    leaf each; and the same for those none of whose splits has an imputer,
    the only ones whose marginal is the same for every row.
    """
    Estimator = PooledForestRegressor if pooled.is_regression else PooledForestClassifier
    clf = Estimator(pooled, strategy="mp", imputers=imputers, feature_std=feature_std)
    X, present = to_global_matrix(half[:sample], pooled.feature_names, pooled.categories)
    absent = ~present
    cf = CompiledForest.build(pooled)
    dirty = np.zeros(len(X), bool)
    imputed, level_cdf = impute(pooled, imputers, clf._sigma(), X, absent, dirty, get_rule("mp"))
    rules = Strategy(None, pooled, cf, X, imputed, level_cdf, clf._sigma(), 0, None, ForestCache())
    kind = node_kinds(cf, absent)
    row_dependent = rules.kernel_tables()["node_kind"] != 0
    internal = cf.feature >= 0
    parent = np.full(cf.feature.size, -1, dtype=np.int64)
    inner = np.flatnonzero(internal)
    parent[cf.children[2 * inner]] = inner
    parent[cf.children[2 * inner + 1]] = inner
    inside = {}
    on_absent = kind == MISSING_KIND
    for name, allowed in (("absent", on_absent), ("exact", on_absent & ~row_dependent)):
        whole = ~internal  # a leaf is a subtree of its own
        for d in range(int(cf.depth.max()), -1, -1):  # from the deepest nodes up
            level = inner[cf.depth[inner] == d]
            whole[level] = (
                allowed[level] & whole[cf.children[2 * level]] & whole[cf.children[2 * level + 1]]
            )
        inside[name] = (parent >= 0) & whole[np.maximum(parent, 0)]
    visits = dict.fromkeys(("nodes", "leaves", "branching", "row_dependent", "present"), 0)
    visits_inside = dict.fromkeys(inside, 0)
    trees = np.arange(pooled.n_trees)
    walk = traverse(
        cf,
        X,
        trees,
        resolve=BRANCH,
        right_probability=rules.right_probability,
        kind=kind,
        weight=1.0,
    )
    for chunk in walk:
        for level in chunk:
            node = level.node
            branching = kind[node] == MISSING_KIND
            visits["nodes"] += node.size
            visits["leaves"] += level.ended.size
            visits["branching"] += int(branching.sum())
            visits["row_dependent"] += int((branching & row_dependent[node]).sum())
            for name, mask in inside.items():
                visits_inside[name] += int(mask[node].sum())
    visits["present"] = visits["nodes"] - visits["leaves"] - visits["branching"]
    pairs = len(X) * pooled.n_trees
    path, _ = reference.decision_path(test[:sample].to_numpy())
    return {
        "rows": len(X),
        "per_pair": {k: v / pairs for k, v in visits.items()},
        "sklearn_path_nodes": path.sum() / pairs,
        "collapsible": {
            name: {
                "node_share": float(mask.sum() / max(cf.feature.size, 1)),
                "visit_share": visits_inside[name] / max(visits["nodes"], 1),
            }
            for name, mask in inside.items()
        },
    }


def run(
    rows: int,
    out: Path,
    task: str = "classification",
    engines: tuple[str, ...] = tuple(ENGINES),
    forest: str = "sklearn",
) -> dict:
    reference, pooled, imputers, feature_std, test, shared = build(rows, task=task, forest=forest)
    X_np = test.to_numpy()

    def sk_fn():
        return predict(reference, X_np)

    sk = best_time(sk_fn, 5)
    logger.info("scikit-learn %s (one thread): %.3f s", _sklearn_call(task), sk)
    kernels, _ = load_kernels()
    if kernels is None:
        engines = tuple(e for e in engines if ENGINES[e][0] != "numba")
    if not engines:
        raise SystemExit("no engine to measure: numba cannot be imported; add --engines numpy")
    results = {
        "task": task,
        "forest": forest,
        "forest_params": forest_params(forest),
        "sklearn_seconds": sk,
        "targets": {"all_features": TARGETS_ALL, "half_absent": TARGETS_HALF},
        "target_engine": TARGET_ENGINE,
        "engines": {e: {"all_features": {}, "half_absent": {}} for e in engines},
    }
    half = test[shared]
    results["marginal_walk"] = marginal_walk(pooled, imputers, feature_std, half, test, reference)
    logger.info("marginal walk at half absent: %s", results["marginal_walk"])
    strategies = registered_strategies()
    progress = harness.Progress(logger, len(strategies), "strategies")
    for strategy in strategies:
        predictions = {}
        for engine in engines:
            row_all, row_half, predictions[engine] = time_strategy(
                pooled, imputers, feature_std, test, half, strategy, engine, sk_fn, reference
            )
            results["engines"][engine]["all_features"][strategy] = row_all
            results["engines"][engine]["half_absent"][strategy] = row_half
        # the engines agree bit for bit (the same seed gives the same draws)
        assert all(np.array_equal(predictions[engines[0]], p) for p in predictions.values())
        progress.step(strategy)
    if kernels is not None:
        kernels.MAX_THREADS = None
    # scikit-learn again at the end: the smaller time is the one reported (and the naive
    # traversal's reference); every strategy's ratio is to its own paired measurement
    results["sklearn_seconds"] = sk = min(sk, best_time(sk_fn, 5))
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
        "numba": None if kernels is None else metadata.version("numba"),
        "cores": harness.cpu_count(),
        "machine": platform.machine(),
    }
    name = "inference" + ("_regression" if task == "regression" else "")
    name += "_job" if forest == "job" else ""
    harness.write_results(out, name, results, markdown(results), logger)
    return results


def _params_text(results: dict) -> str:
    params = results.get("forest_params", {})
    shown = ", ".join(f"{k}={v!r}" for k, v in params.items() if k != "n_estimators")
    kind = "a job site's default privacy policy" if results.get("forest") == "job" else "defaults"
    return f"{kind} ({shown})"


def _sklearn_call(task: str) -> str:
    return "RandomForestRegressor.predict" if task == "regression" else "predict_proba"


def markdown(results: dict) -> str:
    setup = results["setup"]
    engines = list(results["engines"])
    labels = {e: engine_label(e, setup["cores"]) for e in engines}
    target_engine = results.get("target_engine", engines[0])
    lines = [
        f"Forest: {setup['trees']} trees ({setup['nodes']} nodes), {setup['features']} "
        f"features, grown with {_params_text(results)}; {setup['rows']} rows predicted. scikit-learn "
        f"{_sklearn_call(results.get('task', 'classification'))} (one thread, its "
        f"default): {results['sklearn_seconds']:.3f} s. Ratios to it, each to scikit-learn "
        "timed in turn with the measurement (the best of the paired repeats), per engine of the "
        f"dynamic traversals (numba {setup['numba'] or 'not installed'}, "
        f"{setup['cores']} cores). The targets apply to "
        f"{labels.get(target_engine, target_engine)}: one thread on both sides.",
        "",
        "| strategy | all features | "
        + " | ".join(f"half absent, {labels[e]}" for e in engines)
        + " | target (all / half) | trees kept | fallback rows | "
        + " | ".join(f"half absent routing alone, {labels[e]}" for e in engines)
        + " |",
        "|---|---|" + "---|" * (2 * len(engines) + 3),
    ]
    first = results["engines"][engines[0]]
    for strategy in first["all_features"]:
        half = {e: results["engines"][e]["half_absent"][strategy] for e in engines}
        worst_all = max(results["engines"][e]["all_features"][strategy]["ratio"] for e in engines)
        target = TARGETS_HALF.get(strategy)
        lines.append(
            f"| {strategy} | {worst_all:.2f}x | "
            + " | ".join(f"{half[e]['ratio']:.2f}x" for e in engines)
            + f" | {TARGETS_ALL:g}x / {f'{target:g}x' if target else '-'} | "
            f"{half[engines[0]]['mean_trees_kept']:.1f} | {half[engines[0]]['fallback_rows']} | "
            + " | ".join(f"{half[e]['ratio_without_fallback']:.2f}x" for e in engines)
            + " |"
        )
    lines += [
        "",
        "All features: every row takes scikit-learn's compiled trees whatever the engine (the "
        "larger of the engines' ratios is shown). Both engines give the same predictions bit "
        "for bit.",
        "",
        f"Naive per-row Python traversal: about {results['naive_python']['ratio']:.0f}x.",
        "",
    ]
    if "marginal_walk" in results:
        lines += _walk_text(results["marginal_walk"])
    return "\n".join(lines)


def _walk_text(walk: dict) -> list[str]:
    per, share = walk["per_pair"], walk["collapsible"]
    return [
        f"Exact marginalisation (`mp`, and the rows `fpv` and `wmp` marginalise) at half "
        f"absent visits {per['nodes']:.1f} nodes per (row, tree) pair on {walk['rows']} rows: "
        f"{per['leaves']:.1f} leaves, {per['branching']:.1f} branching nodes "
        f"({per['row_dependent']:.1f} with a probability from an imputer, which depends on the "
        f"row) and {per['present']:.1f} nodes read on a present column; scikit-learn's path "
        f"with every feature present has {walk['sklearn_path_nodes']:.1f}. Subtrees whose "
        f"every split is on an absent column hold {share['absent']['node_share']:.0%} of the "
        f"nodes ({share['absent']['visit_share']:.0%} of the visits) below their roots; those "
        f"with no imputer probability, the only ones whose marginal is the same for every row, "
        f"{share['exact']['node_share']:.0%} ({share['exact']['visit_share']:.0%} of the "
        f"visits).",
        "",
    ]


def main(argv=None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--rows", type=harness.at_least(20), default=10_000)
    parser.add_argument(
        "--task", choices=("classification", "regression"), default="classification"
    )
    parser.add_argument("--forest", choices=("sklearn", "job"), default="sklearn")
    parser.add_argument(
        "--engines",
        type=harness.name_list,
        default=list(ENGINES),
        help=f"comma-separated, of {', '.join(ENGINES)} (default: all)",
    )
    args = parser.parse_args(argv)
    engines = tuple(args.engines)
    unknown = [e for e in engines if e not in ENGINES]
    if unknown or not engines:
        parser.error(f"--engines {','.join(engines)!r}: use some of {', '.join(ENGINES)}")
    harness.start(logger)
    results = run(args.rows, args.out, args.task, engines, args.forest)
    print(markdown(results))


if __name__ == "__main__":
    main()
