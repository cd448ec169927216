"""The ideas tried for a strategy that beats ``mp`` and is never worse than ``local``.

Every idea combines, at one site, the per-tree predictions of the pooled
forest for the site's rows, with at most a few parameters fitted on the site's
validation rows only (taken from its training rows, as in a job; every forest
is trained without them). Per tree ``t`` and row: ``p_t`` its ``mp``
distribution, ``n_t`` its ``node`` distribution, ``c_t`` whether the row
reached a leaf without meeting a split on a feature it lacks (*certain*), and
whether the tree is the site's own. The ideas:

* ``wmp`` -- certain trees weight 1, guessing ones ``w``; ``w`` from
  :data:`~fedforest.prediction.weighting.GUESS_WEIGHTS` by validation Brier
  score (the shipped strategy, :mod:`fedforest.prediction.weighting`); and the
  same choice by validation AUPRC (``wmp_auprc``), by log-loss
  (``wmp_logloss``), and from the coarser grid 0, 0.1, 0.3, 1 (``wmp_coarse``).
* ``wnode`` -- as ``wmp``, with a guessing tree's ``node`` distribution.
* ``tree_skill`` -- every tree weighted by its Brier skill score on the
  validation rows (clipped at 0).
* ``site_skill`` / ``site_skill_sq`` -- every site's trees weighted by the
  skill of their average (or its square) on the validation rows.
* ``site_skill_wmp`` -- ``site_skill`` times ``wmp``'s certainty weights.
* ``site_weights`` -- every site's trees weighted by a weight fitted to the
  lowest validation log-loss of their weighted average (the weights of a
  mixture of the sites' ``mp`` averages: a stacking of the sites' forests);
  ``site_weights_wmp`` -- those weights times ``wmp``'s certainty weights,
  ``w`` by Brier score.
* ``blend`` -- ``a * local + (1 - a) * mp`` with ``a`` in 0, .25, .5, .75, 1
  by validation Brier score; ``blend_wmp`` blends ``local`` with ``wmp``
  (both parameters fitted together), ``blend_skill`` with ``tree_skill``.

Baselines: ``local``, ``mp``, ``fpv`` (soft voting) and ``node``.

Usage::

    python benchmarks/bench_strategy_ideas.py [--reps 10] [--sites 3,6,10] \\
        [--jaccards 0.3,0.7] [--datasets S-500-Num,...] [--trees 100] [--n-jobs 2]

The default takes about 6 minutes on 2 cores. Writes
``<out>/strategy_ideas.json`` and ``<out>/strategy_ideas.md``: mean AUPRC per
number of sites and average ranks over the blocks (dataset x sites x overlap x
repetition, each the mean over the sites), and the mean Brier score over the
blocks.
"""

from __future__ import annotations

import logging
import sys
from concurrent.futures import ProcessPoolExecutor
from itertools import product

import numpy as np
import pandas as pd
from scipy.optimize import minimize

from benchmarks import harness
from fedforest import PooledForestClassifier
from fedforest.experiments.runner import VALIDATION_FRACTION, load_table, prepare_repetition
from fedforest.metrics import score
from fedforest.model.inputs import to_global_matrix
from fedforest.model.traversal import DISCARD, STOP
from fedforest.prediction.cache import forest_cache
from fedforest.prediction.imputation import impute
from fedforest.prediction.routing import route_leaves, route_marginal
from fedforest.prediction.strategies import Strategy
from fedforest.prediction.weighting import GUESS_WEIGHTS, brier_score
from fedforest.rules import get as get_rule

logger = logging.getLogger("bench_strategy_ideas")

DATASETS = ("S-500-Num", "S-500-Cat", "S-500-Mix", "breast_cancer", "wine", "digits")
BLEND = (0.0, 0.25, 0.5, 0.75, 1.0)
COARSE = (0.0, 0.1, 0.3, 1.0)
#: What each idea's test predictions are scored by: AUPRC ranks the ideas; the Brier score
#: (a proper scoring rule) is reported beside it.
METRICS = ("auprc", "brier")
IDEAS = (
    "local",
    "mp",
    "fpv",
    "node",
    "wmp",
    "wmp_auprc",
    "wmp_logloss",
    "wmp_coarse",
    "wnode",
    "tree_skill",
    "site_skill",
    "site_skill_sq",
    "site_skill_wmp",
    "site_weights",
    "site_weights_wmp",
    "blend",
    "blend_wmp",
    "blend_skill",
)


def per_tree(clf: PooledForestClassifier, X: pd.DataFrame):
    """``mp`` and ``node`` distributions and certainty of every (tree, row) pair."""
    forest = clf.forest
    Xg, present = to_global_matrix(X, forest.feature_names, forest.categories)
    cache = forest_cache(forest)
    cf = cache.compiled(forest)
    absent = ~present
    dirty = np.isnan(Xg[:, present]).any(axis=1)
    sigma = clf._sigma()
    imputed, cdf = impute(forest, clf.imputers, sigma, Xg, absent, dirty, get_rule("mp"))
    trees = np.arange(forest.n_trees)
    rng = np.random.default_rng(0)
    rules = Strategy(None, forest, cf, Xg, imputed, cdf, sigma, 2, rng, cache)
    mp = route_marginal(cf, Xg, trees, rules.right_probability, absent)
    certain = route_leaves(cf, Xg, trees, lambda n, r: np.full(n.size, DISCARD)) >= 0
    stopped = route_leaves(cf, Xg, trees, lambda n, r: np.full(n.size, STOP))
    return mp, cf.value[stopped], certain


def weighted(P, weights):
    """Per-row weighted average of per-tree distributions ``P`` (trees x rows x classes)."""
    total = weights.sum(axis=0)
    return (weights[:, :, None] * P).sum(axis=0) / np.maximum(total, 1e-300)[:, None]


def certainty(certain, w):
    return np.where(certain, 1.0, w)


def criterion(name, y, p, classes) -> float:
    """Lower is better."""
    if name == "brier":
        return brier_score(y, p, classes)
    if name == "logloss":
        hit = np.asarray(y)[:, None] == np.asarray(classes)[None, :]
        return float(-np.log(np.clip(p[hit], 1e-3, 1.0)).mean())
    value = score("auprc", y, p, classes)
    return float("inf") if np.isnan(value) else -value


def best(candidates: dict, y, classes, how="brier"):
    """The key of the candidate prediction with the lowest criterion (ties: the first)."""
    scores = {k: criterion(how, y, p, classes) for k, p in candidates.items()}
    return min(scores, key=lambda k: scores[k])


def skill(P, y, classes):
    """Brier skill score of each distribution in ``P`` (... x rows x classes), clipped at 0."""
    hit = (np.asarray(y)[:, None] == np.asarray(classes)[None, :]).astype(float)
    prior = ((hit.mean(axis=0)[None] - hit) ** 2).sum(axis=1).mean()
    b = ((P - hit) ** 2).sum(axis=-1).mean(axis=-1)
    return np.clip(1.0 - b / max(prior, 1e-12), 0.0, None)


def mixture_weights(P, groups, y, classes, floor: float = 1e-3) -> np.ndarray:
    """Each group's weight (largest 1) for the lowest log-loss of the trees' weighted average.

    Every tree of group ``g`` weighs ``a_g``; ``a`` = softmax(``z``) is fitted
    by L-BFGS from equal weights (``mp``) with :func:`mixture_loss`'s
    gradient. Deterministic: no random start.
    """
    hit = np.asarray(y)[:, None] == np.asarray(classes)[None, :]
    k = int(groups.max()) + 1
    # per group: the summed probability of each row's class, and the number of trees
    S = np.stack([P[groups == g][:, hit].sum(axis=0) for g in range(k)])
    n = np.bincount(groups, minlength=k).astype(float)
    z = minimize(mixture_loss, np.zeros(k), (S, n, floor), jac=True, method="L-BFGS-B").x
    a = np.exp(z - z.max())
    return a / a.max()


def mixture_loss(z, S, n, floor: float = 1e-3):
    """The mean log-loss of the mixture softmax(``z``) and its gradient in ``z``.

    ``S[g, i]``: the summed probability of row ``i``'s class over group ``g``'s
    trees; ``n[g]``: their number. Each row's probability is floored at
    ``floor``, as :func:`criterion` scores it (no gradient where floored).
    """
    a = np.exp(z - z.max())
    a /= a.sum()
    total = a @ n
    q = a @ S / total
    keep = q > floor
    value = -np.log(np.where(keep, q, floor)).mean()
    grad_a = (-(S[:, keep] / q[keep]).sum(axis=1) + keep.sum() * n) / (total * len(q))
    return value, a * (grad_a - a @ grad_a)


def ideas_for_site(val, test, own, groups, y_val, classes) -> dict:
    """Test predictions of every idea, parameters fitted on ``val`` only."""
    (Pv, Nv, Cv), (Pt, Nt, Ct) = val, test
    ones_v, ones_t = np.ones(Cv.shape), np.ones(Ct.shape)
    mp = Pt.mean(axis=0)
    out = {"local": Pt[own].mean(axis=0), "mp": mp, "fpv": _fpv(Pt, Ct, mp), "node": Nt.mean(0)}

    def wmp(P_v, P_t, grid, how):
        # ties go to the larger weight, as in fedforest.prediction.weighting
        grid = sorted(grid, reverse=True)
        w = best({g: _wmp(P_v, Cv, g, Pv.mean(0)) for g in grid}, y_val, classes, how)
        return _wmp(P_t, Ct, w, mp)

    def times_wmp(tree_w):
        # per-tree weights times wmp's certainty weights, w by Brier score
        fits = {g: weighted(Pv, tree_w[:, None] * certainty(Cv, g)) for g in GUESS_WEIGHTS if g}
        w = best(fits, y_val, classes)
        return weighted(Pt, tree_w[:, None] * certainty(Ct, w))

    out["wmp"] = wmp(Pv, Pt, GUESS_WEIGHTS, "brier")
    out["wmp_auprc"] = wmp(Pv, Pt, GUESS_WEIGHTS, "auprc")
    out["wmp_logloss"] = wmp(Pv, Pt, GUESS_WEIGHTS, "logloss")
    out["wmp_coarse"] = wmp(Pv, Pt, COARSE, "brier")
    out["wnode"] = wmp(Nv, Nt, GUESS_WEIGHTS, "brier")
    tree_w = skill(Pv, y_val, classes)
    tree_w = tree_w if tree_w.sum() > 0 else np.ones_like(tree_w)
    out["tree_skill"] = weighted(Pt, tree_w[:, None] * ones_t)
    site_w = np.array(
        [skill(Pv[groups == g].mean(axis=0), y_val, classes) for g in range(groups.max() + 1)]
    )
    site_w = site_w if site_w.sum() > 0 else np.ones_like(site_w)
    per_tree_w = site_w[groups]
    out["site_skill"] = weighted(Pt, per_tree_w[:, None] * ones_t)
    out["site_skill_sq"] = weighted(Pt, (per_tree_w**2)[:, None] * ones_t)
    out["site_skill_wmp"] = times_wmp(per_tree_w)
    sites_w = mixture_weights(Pv, groups, y_val, classes)[groups]
    out["site_weights"] = weighted(Pt, sites_w[:, None] * ones_t)
    out["site_weights_wmp"] = times_wmp(sites_w)
    local_v = Pv[own].mean(axis=0)
    a = best({a: a * local_v + (1 - a) * Pv.mean(axis=0) for a in BLEND}, y_val, classes)
    out["blend"] = a * out["local"] + (1 - a) * out["mp"]
    pairs = {
        (a, g): a * local_v + (1 - a) * weighted(Pv, certainty(Cv, g))
        for a, g in product(BLEND, GUESS_WEIGHTS)
        if g > 0
    }
    a, g = best(pairs, y_val, classes)
    out["blend_wmp"] = a * out["local"] + (1 - a) * weighted(Pt, certainty(Ct, g))
    skilled_v = weighted(Pv, tree_w[:, None] * ones_v)
    a = best({a: a * local_v + (1 - a) * skilled_v for a in BLEND}, y_val, classes)
    out["blend_skill"] = a * out["local"] + (1 - a) * out["tree_skill"]
    return out


def _fpv(P, C, mp):
    """Soft fpv: the certain trees' average; rows without one take ``mp``."""
    return _wmp(P, C, 0.0, mp)


def _wmp(P, C, w, mp):
    weights = certainty(C, w)
    return np.where(weights.sum(axis=0)[:, None] > 0, weighted(P, weights), mp)


def run_one(task) -> list[dict]:
    name, n_sites, jaccard, rep, trees = task
    data = load_table(name)
    prepared = prepare_repetition(
        data,
        n_sites,
        jaccard,
        rep,
        trees,
        validation_fraction=VALIDATION_FRACTION,
        intersection=False,
    )
    pooled = prepared.pooled
    forest = pooled.forest
    classes = np.unique(data.y)
    groups = np.zeros(forest.n_trees, dtype=int)
    for g, owner in enumerate(forest.owners):
        groups[forest.owner_mask(owner)] = g
    rows = []
    for site, (X_te, y_te, X_val, y_val) in prepared.splits.items():
        clf = PooledForestClassifier(
            forest, "mp", imputers=pooled.imputers, feature_std=pooled.feature_std, site=site
        )
        cols = [c for c in X_te.columns if c in forest.feature_names]
        val, test = per_tree(clf, X_val[cols]), per_tree(clf, X_te[cols])
        own = forest.owner_mask(site)
        for idea, proba in ideas_for_site(
            val, test, own, groups, np.asarray(y_val), classes
        ).items():
            for metric in METRICS:
                rows.append(
                    {
                        "dataset": name,
                        "n_sites": n_sites,
                        "jaccard": jaccard,
                        "rep": rep,
                        "site": site,
                        "method": idea,
                        "metric": metric,
                        "value": score(metric, y_te, proba, classes),
                    }
                )
    return rows


def summarise(tidy: pd.DataFrame) -> dict:
    block = ["dataset", "n_sites", "jaccard", "rep"]
    means = tidy.groupby(["metric", *block, "method"])["value"].mean()
    per_rep = means.loc["auprc"].unstack("method")[list(IDEAS)]
    brier = means.loc["brier"].unstack("method")[list(IDEAS)]
    ranks = per_rep.rank(axis=1, ascending=False).mean().sort_values()
    by_sites = per_rep.groupby(level="n_sites").mean()
    synthetic = per_rep.index.get_level_values("dataset").str.startswith("S-500")
    return {
        "blocks": len(per_rep),
        "ranks": ranks.round(3).to_dict(),
        "ranks_synthetic": per_rep[synthetic]
        .rank(axis=1, ascending=False)
        .mean()
        .round(3)
        .to_dict(),
        "ranks_real": per_rep[~synthetic].rank(axis=1, ascending=False).mean().round(3).to_dict(),
        "mean_by_sites": {int(n): row.round(4).to_dict() for n, row in by_sites.iterrows()},
        "brier": brier.mean().round(4).to_dict(),
    }


def render(summary: dict, config: dict) -> str:
    sites = list(summary["mean_by_sites"])
    lines = [
        "# Strategy ideas: mean AUPRC and average ranks",
        "",
        f"`python benchmarks/bench_strategy_ideas.py` ({' '.join(config['argv']) or 'defaults'}): "
        f"{', '.join(config['datasets'])}; sites {config['sites']}, Jaccard {config['jaccards']}, "
        f"{config['reps']} repetitions, {config['trees']} trees per site; {summary['blocks']} "
        f"blocks; {config['seconds']:.0f} s. Ranks are within each block (1 = best), by "
        "AUPRC; the Brier score (lower is better) is the mean over the blocks.",
        "",
        "| idea | rank (all) | rank (S-500) | rank (real) | "
        + " | ".join(f"AUPRC, {n} sites" for n in sites)
        + " | Brier (all) |",
        "|---|---|---|---" + "|---" * len(sites) + "|---|",
    ]
    for idea, rank in summary["ranks"].items():
        means = " | ".join(f"{summary['mean_by_sites'][n][idea]:.4f}" for n in sites)
        lines.append(
            f"| {idea} | {rank:.2f} | {summary['ranks_synthetic'][idea]:.2f} | "
            f"{summary['ranks_real'][idea]:.2f} | {means} | {summary['brier'][idea]:.4f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = harness.parser(__doc__.split("\n")[0])
    p.add_argument("--datasets", type=harness.name_list, default=list(DATASETS))
    p.add_argument("--sites", type=harness.int_list, default=[3, 6, 10])
    p.add_argument("--jaccards", type=harness.float_list, default=[0.3, 0.7])
    p.add_argument("--reps", type=harness.at_least(1), default=10)
    p.add_argument("--trees", type=harness.at_least(1), default=100)
    p.add_argument("--n-jobs", type=harness.at_least(1), default=2)
    args = p.parse_args(argv)
    # progress lines only: one per batch of repetitions, not one per site and strategy
    harness.start(logger, verbose=("fedforest.experiments.runner",))
    tasks = [
        (d, n, j, r, args.trees)
        for d in args.datasets
        for n in args.sites
        for j in args.jaccards
        for r in range(args.reps)
    ]
    progress = harness.Progress(logger, len(tasks), "repetitions")
    rows: list[dict] = []
    with ProcessPoolExecutor(max_workers=args.n_jobs) as pool:
        for k, result in enumerate(pool.map(run_one, tasks), 1):
            rows += result
            if k % max(1, args.reps) == 0 or k == len(tasks):
                dataset, n_sites, jaccard = tasks[k - 1][:3]
                progress.step(f"{dataset}, {n_sites} sites, J {jaccard:g}", k - progress.done)
    config = {
        "argv": argv,
        "datasets": args.datasets,
        "sites": args.sites,
        "jaccards": args.jaccards,
        "reps": args.reps,
        "trees": args.trees,
        "seconds": progress.seconds,
    }
    summary = summarise(pd.DataFrame(rows))
    text = render(summary, config)
    harness.write_results(args.out, "strategy_ideas", {"config": config, **summary}, text, logger)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
