"""Measured cost and leakage of the privacy settings (the ``fedforest.privacy`` package).

For each dataset and repetition (everything seeded by the repetition ``r``):

* **S-500-Num, S-500-Cat, S-500-Mix** (``experiments.synthetic``, dataset seed
  0): the rows are split over 3 sites at Jaccard 0.5 with
  ``split_table(..., random_state=r)``, as ``run_repetition`` does;
* **Demo**: the three demo hospitals of ``data_prep/make_demo_data.py``
  (``--rows 1000 --seed r``, written into a temporary folder; site-2's
  ``glucose_mg_dl`` renamed to ``glucose`` as its YAML does).

Each site describes its table (``SiteSchema``; with ``min_level_rows`` after
``hide_rare_levels``), the schemas are joined (``GlobalSchema``), and
each site encodes its table, holds out 25 % of its rows for testing
(``split_validation(..., 0.25, r)``) and trains what a site trains
(``fit_site_models``: 100 trees, surrogates, imputers, std, and the
intersection forest on the shared columns; ``random_state = 1000 r + k``).
Then, for every setting, each site applies the policy to what it sends, in
process, the way a site would:

* ``prepare_forest`` on its forest and on its intersection forest,
  with the site's training rows and the in-bag multiplicities of its
  scikit-learn forest (``bootstrap_weights``; the forest is refitted with the
  same seed to read them, and checked to be the same forest). The ``k=5`` and
  ``k=20`` settings prune forests grown to single-row leaves (post hoc); the
  ``job default`` setting is what a job's site sends when its YAML sets
  neither ``min_leaf_rows`` nor ``tree_sample_fraction`` (``JOB_MIN_LEAF_ROWS``
  5, ``JOB_TREE_SAMPLE_FRACTION`` 0.3): as ``fit_site_models`` does in a job
  (``forest_params_for``), the site grows its forests with
  ``min_samples_leaf`` raised to ``min_leaf_rows`` and each tree on a
  bootstrap sample of 30% of its rows (the same seeds), and then runs
  ``prepare_forest``;
* in DP mode, ``fit_dp_forest`` instead, with the budget split by
  ``dp_budget`` (half for the forest, half for the intersection forest), the
  policy's trees and depth (10 trees of depth 4, the defaults), the schema's
  classes and levels, and **public** feature ranges fixed in this file (never
  read from the rows): +-4 for the N(0, 1) columns of the S-500 sets, and for
  the demo hospitals the generating range of age ([20, 90], clipped by the
  generator) and mean +- 4 generating standard deviations of the others (see
  ``DEMO_RANGES``); imputers, std and surrogates are not sent in DP mode.

The sites' outgoing models are pooled (``pool_site_models``) and every
strategy is scored on every site's test rows (``evaluate_strategies``,
AUPRC). The leakage of the same runs is measured on what each site sends
(forest and intersection forest, split and surrogate thresholds):

* the share of numeric thresholds that are the midpoint of two of the site's
  training values, with both definitions of ``threshold_midpoint_share``:
  ``pairs="consecutive"`` (a lower bound) and ``pairs="any"`` (an upper bound:
  on integer-valued columns a grid point can be such a midpoint by chance);
* the smallest leaf row count sent (``smallest_leaf_rows``; with count noise
  it is the rounded noisy count);
* the rare levels disclosed: levels with fewer than 5 rows at a site that its
  schema names (``disclosed_rare_levels``);
* two membership-inference attacks on each site's forest as it leaves the
  site (``membership_inference``): members are the site's training rows,
  non-members as many of its held-out test rows (the same distribution, never
  seen by the forest), drawn with a generator seeded by the repetition and the
  site (the same rows under every setting). Each row is routed down every
  sent tree on the site's own encoded columns (``route_leaves``). The
  *confidence* attack scores a row by the forest's probability of its true
  class (the mean of the leaf distributions, ``predict_proba``), the
  *leaf-count* attack by the mean over trees of 1 / ``n_node_samples`` of the
  leaf reached (the count as sent); each reports the ROC AUC of that score
  against membership (``roc_auc_score``; 0.5: nothing learnt), as the mean over
  sites and repetitions ± one standard error over repetitions. In fully grown
  trees the leaf-count AUC is *below* 0.5: a tree's leaves are size-biased
  towards the rows it was grown on, so members reach larger leaves than
  non-members; the attack as stated then fails, and what the leaf counts leak
  is the distance of its AUC from 0.5 (an attacker who learnt the direction
  would get 1 - AUC).

The count noise and the DP noise are seeded from the repetition so that the
benchmark is reproducible. A real site must never do that (privacy.py: the
noise comes from the operating system's entropy).

Usage::

    python benchmarks/bench_privacy.py [--out benchmarks/results] [--reps 10] [--jobs 2] [--quick]

``--quick``: 1 repetition, 20 trees per forest, 300 demo rows per site (about
15 s). A full run (10 repetitions, 520 site-model sets scored on 9 strategies) takes
about 11 CPU-minutes: 12 minutes on 2 cores shared with other work, an estimated 6 to 7 on 2
idle ones (the job-default setting trains every site a second time).

Writes ``<out>/privacy.json`` and ``<out>/privacy.md``.
"""

from __future__ import annotations

import logging
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.metrics import roc_auc_score

from benchmarks import harness
from benchmarks.privacy_report import (  # the settings and the report
    DATASETS,
    DEMO_RANGES,
    DP_DEPTH,
    DP_TREES,
    JACCARD,
    JOB_DEFAULT,  # noqa: F401 - re-exported
    MIA_SEED,
    N_SITES,
    RARE_ROWS,
    REPS,
    SETTINGS,  # noqa: F401 - re-exported
    STRATEGIES,
    TARGET,
    TEST_FRACTION,
    _f,
    get_settings,
    headline,
    markdown,
    overall,
    policy_for,
    row_table,
    summarize,
)
from data_prep.make_demo_data import LOCAL_NAMES, make_demo_data
from fedforest.columns import as_level_strings, normalize_labels
from fedforest.experiments.partition import split_table
from fedforest.experiments.synthetic import DATASETS as SYNTHETIC
from fedforest.experiments.synthetic import load_dataset
from fedforest.federation.evaluation import evaluate_strategies
from fedforest.federation.schema import GlobalSchema, SiteSchema
from fedforest.federation.splits import split_validation
from fedforest.federation.training import (
    SiteModels,
    fit_site_models,
    forest_params_for,
    pool_site_models,
)
from fedforest.model.forest import PooledForest
from fedforest.model.imputers import ImputerSet
from fedforest.model.pooled_model import PooledModel
from fedforest.model.traversal import CompiledForest
from fedforest.prediction.routing import average_leaves, route_leaves
from fedforest.privacy.audit import (
    disclosed_rare_levels,
    smallest_leaf_rows,
    threshold_midpoint_share,
)
from fedforest.privacy.dp_forest import fit_dp_forest
from fedforest.privacy.levels import hide_rare_levels, rare_levels
from fedforest.privacy.policy import (
    PrivacyPolicy,
    dp_budget,
)
from fedforest.privacy.transforms import (
    bootstrap_weights,
    enforce_min_leaf_rows,
    prepare_forest,
)

logger = logging.getLogger("bench_privacy")


# =============================================================== data
def site_tables(dataset: str, rep: int, demo_rows: int = 1000) -> tuple[dict, list[str]]:
    """The sites' raw tables (global column names, target ``TARGET``) and the listed
    categorical columns."""
    if dataset in SYNTHETIC:
        X, y, categorical = load_dataset(dataset, random_state=0)
        frame = X.assign(**{TARGET: y})
        return split_table(frame, TARGET, N_SITES, JACCARD, random_state=rep), list(categorical)
    if dataset != "Demo":
        raise ValueError(f"unknown dataset {dataset!r}; known: {list(DATASETS)}")
    with tempfile.TemporaryDirectory(prefix="bench_privacy_") as tmp:
        paths = make_demo_data(Path(tmp) / "demo", rows=demo_rows, seed=rep)
        tables = {}
        for site, path in paths.items():
            table = pd.read_csv(path)
            renames = {local: name for name, local in LOCAL_NAMES.get(site, {}).items()}
            tables[site] = table.rename(columns=renames).rename(columns={"outcome": TARGET})
    return tables, []


@dataclass
class Site:
    """What one site holds: its encoded split, its trained models and their in-bag weights."""

    name: str
    schema: SiteSchema
    raw: pd.DataFrame
    own: list[str]
    X_train: pd.DataFrame
    y_train: np.ndarray
    X_test: pd.DataFrame
    y_test: np.ndarray
    models: SiteModels
    in_bag: np.ndarray
    in_bag_inter: np.ndarray | None
    seed: int


def _in_bag(X: pd.DataFrame, y, params: Mapping, seed: int, expected: PooledForest) -> np.ndarray:
    """In-bag multiplicities of the forest fit_site_models trained (refitted with its seed)."""
    rf = RandomForestClassifier(**params, random_state=seed, n_jobs=1)
    rf.fit(X.to_numpy(dtype=np.float32), y)
    counts = np.concatenate([e.tree_.n_node_samples for e in rf.estimators_])
    if not np.array_equal(counts, expected.n_node_samples):
        raise RuntimeError("the refitted forest is not the site's forest")
    return bootstrap_weights(rf, len(X))


def prepare_sites(
    tables: Mapping[str, pd.DataFrame],
    categorical: Sequence[str],
    rep: int,
    n_trees: int,
    min_level_rows: int = 0,
    imputer_cv: int | None = None,
    grown: PrivacyPolicy | None = None,
) -> tuple[GlobalSchema, dict[str, Site], int]:
    """Describe, join, encode, split and train every site.

    With ``min_level_rows`` each site first rewrites its rare levels
    (``hide_rare_levels``). With ``grown`` the forests are grown as a job
    grows them under that policy (``forest_params_for``: ``min_samples_leaf``
    raised to ``min_leaf_rows``, each tree's sample of ``tree_sample_fraction``
    of the rows). Returns the global schema, the sites and the number of
    levels hidden over all sites.
    """
    hidden_count = 0
    described, rewritten = {}, {}
    for site, raw in tables.items():
        table = raw
        listed = [c for c in categorical if c in raw.columns]  # the site's YAML lists its own
        if min_level_rows:
            table, hidden = hide_rare_levels(raw, listed, min_level_rows, target=TARGET)
            hidden_count += sum(len(v) for v in hidden.values())
        rewritten[site] = table
        described[site] = SiteSchema.from_frame(site, table, TARGET, listed)
    schema = GlobalSchema.build(list(described.values()))
    sites = {}
    for k, (site, table) in enumerate(rewritten.items()):
        own = list(schema.site_columns[site])
        X = schema.encode(table, own)
        y = normalize_labels(table[TARGET])
        X_tr, X_te, y_tr, y_te = split_validation(X, y, TEST_FRACTION, rep)
        forest_params = {"n_estimators": n_trees}
        if grown is not None:
            forest_params = forest_params_for(grown, forest_params, len(X_tr))
        seed = rep * 1000 + k
        models = fit_site_models(
            site,
            X_tr,
            y_tr,
            own,
            schema.shared,
            schema.categories,
            forest_params,
            random_state=seed,
            intersection_columns=schema.shared,
            imputer_cv=imputer_cv,
        )
        in_bag = _in_bag(X_tr[own], y_tr, forest_params, seed, models.forest)
        in_bag_inter = _in_bag(X_tr[schema.shared], y_tr, forest_params, seed, models.intersection)
        sites[site] = Site(
            site,
            described[site],
            tables[site],
            own,
            X_tr,
            y_tr,
            X_te,
            y_te,
            models,
            in_bag,
            in_bag_inter,
            seed,
        )
    return schema, sites, hidden_count


# =============================================================== a site's reply
def outgoing(
    site: Site,
    schema: GlobalSchema,
    policy: PrivacyPolicy,
    noise_seed,
) -> SiteModels:
    """What ``site`` sends under ``policy``: its models after the privacy transforms."""
    m = site.models
    noise = np.random.default_rng(noise_seed)
    share = policy.share
    if policy.dp:
        budget = dp_budget(policy, intersection=True)

        def dp_forest(columns, epsilon, seed):
            X = site.X_train[list(columns)]
            numeric = [c for c in columns if c not in schema.categories]
            forest = fit_dp_forest(
                X,
                site.y_train,
                {c: policy.feature_ranges[c] for c in numeric},
                {c: schema.categories[c] for c in columns if c in schema.categories},
                policy.n_dp_trees,
                policy.dp_depth,
                epsilon,
                random_state=seed,
                classes=schema.classes,
                owner=site.name,
                noise_state=noise,
            )
            return enforce_min_leaf_rows(forest, policy.min_leaf_rows)

        forest = dp_forest(site.own, budget["forest"], site.seed)
        inter = None
        if "intersection" in budget:
            inter = dp_forest(schema.shared, budget["intersection"], site.seed + 500)
        return SiteModels(forest, ImputerSet([]), {}, inter)

    def prepare(forest, in_bag):
        X = site.X_train[list(forest.feature_names)]
        return prepare_forest(forest, policy, X, site.y_train, in_bag=in_bag, noise_state=noise)

    forest = prepare(m.forest, site.in_bag)
    inter = None
    if m.intersection is not None and share["intersection"]:
        inter = prepare(m.intersection, site.in_bag_inter)
    return SiteModels(
        forest,
        m.imputers if share["imputers"] else ImputerSet([]),
        dict(m.feature_std) if share["feature_std"] else {},
        inter,
    )


def numeric_thresholds(forest: PooledForest, surrogates: bool = True) -> int:
    """How many thresholds ``threshold_midpoint_share`` judges (finite, numeric features)."""
    numeric = np.append(~forest.is_categorical, False)
    found = [(forest.feature, forest.threshold)]
    if surrogates:
        found.append((forest.surrogate_feature, forest.surrogate_threshold))
    return int(sum(((f >= 0) & numeric[f] & np.isfinite(t)).sum() for f, t in found))


def leakage(site: Site, sent: SiteModels, levels_sent: Mapping[str, Sequence[str]]) -> dict:
    """Leakage measures of what ``site`` sent (forest and intersection forest)."""
    forests = [f for f in (sent.forest, sent.intersection) if f is not None]
    out = {"thresholds": 0, "mid_consecutive": 0, "mid_any": 0}
    for forest in forests:
        n = numeric_thresholds(forest)
        out["thresholds"] += n
        if not n:
            continue
        for pairs in ("consecutive", "any"):
            share = threshold_midpoint_share(
                forest, site.X_train[list(forest.feature_names)], surrogates=True, pairs=pairs
            )
            out[f"mid_{pairs}"] += int(round(share * n))
    out["smallest_leaf"] = min(smallest_leaf_rows(f) for f in forests)
    disclosed = disclosed_rare_levels(levels_sent, site.raw, RARE_ROWS)
    out["rare_levels"] = sum(len(v) for v in disclosed.values())
    out["nodes"] = int(sum(f.n_nodes for f in forests))
    out["trees"] = int(sum(f.n_trees for f in forests))
    out["surrogates"] = int(sum((f.surrogate_feature >= 0).sum() for f in forests))
    out["imputers"] = len(sent.imputers)
    counts = [
        int(as_level_strings(site.raw[c]).dropna().value_counts().min())
        for c in site.schema.levels
        if site.raw[c].notna().any()
    ]
    out["smallest_level_rows"] = min(counts) if counts else None
    return out


def membership_inference(site: Site, forest: PooledForest) -> dict:
    """AUC of two membership-inference attacks on ``forest``, the forest ``site`` sends.

    Members: training rows of the site, non-members: as many of its held-out
    test rows (the same distribution, never seen by the forest), both drawn
    with a generator seeded by the site's seed (so every setting is attacked
    on the same rows). Every row is routed down every tree on the site's own
    encoded columns (the columns the forest splits on), as scikit-learn would.
    ``mia_conf``: the score is the forest's probability of the row's true class
    (the mean of the trees' leaf distributions, ``predict_proba``);
    ``mia_leaf``: the mean over trees of ``1 / n_node_samples`` of the leaf
    reached (as sent: under count noise the noisy count), small leaves
    pointing at members. 0.5: the attack learns nothing.
    """
    rng = np.random.default_rng((site.seed, MIA_SEED))
    n = min(len(site.X_train), len(site.X_test))
    members = rng.choice(len(site.X_train), n, replace=False)
    others = rng.choice(len(site.X_test), n, replace=False)
    columns = list(forest.feature_names)
    X = pd.concat([site.X_train.iloc[members], site.X_test.iloc[others]])[columns]
    y = np.concatenate([np.asarray(site.y_train)[members], np.asarray(site.y_test)[others]])
    is_member = np.repeat([1, 0], n)
    cf = CompiledForest.build(forest)
    leaves = route_leaves(cf, X.to_numpy(dtype=np.float32), np.arange(forest.n_trees), None)
    proba, _ = average_leaves(cf, leaves, "soft")
    truth = pd.Index(forest.classes).get_indexer(y)  # -1: a class the forest never saw
    confidence = np.where(truth >= 0, proba[np.arange(len(y)), truth], 0.0)
    smallness = (1.0 / np.maximum(forest.n_node_samples[leaves], 1)).mean(axis=0)
    return {
        "mia_rows": int(n),
        "mia_conf": round(float(roc_auc_score(is_member, confidence)), 5),
        "mia_leaf": round(float(roc_auc_score(is_member, smallness)), 5),
    }


# =============================================================== one repetition
def run_task(
    dataset: str,
    rep: int,
    settings: Sequence[str] | None = None,
    n_trees: int = 100,
    demo_rows: int = 1000,
) -> list[dict]:
    """Every setting on one repetition of one dataset; one row per (setting, site)."""
    chosen = get_settings(settings)
    tables, categorical = site_tables(dataset, rep, demo_rows)
    # the demo's private columns are held by two sites each, so imputers compete (job: cv=3);
    # the S-500 splits give each private column one owner (run_repetition: no CV)
    cv = 3 if dataset == "Demo" else None
    start = time.perf_counter()
    base = prepare_sites(tables, categorical, rep, n_trees, imputer_cv=cv)
    train_seconds = time.perf_counter() - start
    rows = []
    for index, setting in enumerate(chosen):
        t0 = time.perf_counter()
        schema, sites, hidden = base
        if setting.name.startswith("levels="):
            level_rows = int(setting.name.partition("=")[2])
            rare = [rare_levels(t, categorical, level_rows, target=TARGET) for t in tables.values()]
            if any(rare):
                schema, sites, hidden = prepare_sites(
                    tables, categorical, rep, n_trees, level_rows, cv
                )
            # else nothing to hide: the same tables and models
        if setting.grows_leaves:
            grown = PrivacyPolicy.from_dict(setting.block(dataset))
            schema, sites, hidden = prepare_sites(
                tables, categorical, rep, n_trees, imputer_cv=cv, grown=grown
            )
        numeric = [f for f in schema.features if f not in schema.categories]
        policy = policy_for(setting, dataset, numeric)
        sent, site_seconds = {}, {}
        for k, (name, site) in enumerate(sites.items()):
            s0 = time.perf_counter()
            sent[name] = outgoing(site, schema, policy, (rep, index, k, 20250601))
            site_seconds[name] = time.perf_counter() - s0
        pooled = pool_site_models(list(sent.values()))
        for name, site in sites.items():
            model = PooledModel(
                pooled.forest, pooled.imputers, pooled.feature_std, pooled.intersection
            )
            scores = evaluate_strategies(
                model,
                site.X_test,
                site.y_test,
                schema.classes,
                list(STRATEGIES),
                site=name,
                metrics=("auprc",),
                random_state=rep,
            )
            row = {
                "dataset": dataset,
                "rep": rep,
                "setting": setting.name,
                "site": name,
                "train_rows": int(len(site.X_train)),
                "test_rows": int(len(site.X_test)),
                "levels_hidden": int(hidden),
                # bit for bit what the site sends without a policy
                "same_as_baseline": _same_models(sent[name], base[1][name].models),
                "policy_seconds": round(site_seconds[name], 4),
                "auprc": {s: scores[s]["auprc"] for s in STRATEGIES},
            }
            row.update(leakage(site, sent[name], site.schema.levels))
            row.update(membership_inference(site, sent[name].forest))
            rows.append(row)
        logger.debug("%s rep %d %s: %.1f s", dataset, rep, setting.name, time.perf_counter() - t0)
    for row in rows:
        row["train_seconds"] = round(train_seconds, 3)
    return rows


_FOREST_ARRAYS = (
    "tree_start",
    "children_left",
    "children_right",
    "feature",
    "threshold",
    "n_node_samples",
    "missing_left",
    "saw_missing",
    "value",
    "surrogate_feature",
    "surrogate_threshold",
)


def _same_forest(a: PooledForest | None, b: PooledForest | None) -> bool:
    if a is None or b is None:
        return a is b
    return list(a.feature_names) == list(b.feature_names) and all(
        np.array_equal(getattr(a, k), getattr(b, k)) for k in _FOREST_ARRAYS
    )


def _same_models(a: SiteModels, b: SiteModels) -> bool:
    """Whether two replies carry the same forests, imputers (the same object) and std."""
    return (
        _same_forest(a.forest, b.forest)
        and _same_forest(a.intersection, b.intersection)
        and (a.imputers is b.imputers or len(a.imputers) == len(b.imputers) == 0)
        and a.feature_std == b.feature_std
    )


def _init_worker() -> None:
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    _quiet()


def _quiet() -> None:
    for name in ("fedforest", "make_demo_data"):
        logging.getLogger(name).setLevel(logging.WARNING)


# =============================================================== driver
def run(
    out: Path | None,
    reps: int = REPS,
    jobs: int = 2,
    n_trees: int = 100,
    demo_rows: int = 1000,
    datasets: Sequence[str] = DATASETS,
    settings: Sequence[str] | None = None,
    command: str = "python benchmarks/bench_privacy.py",
) -> dict:
    """Run every (dataset, repetition); write ``privacy.json`` and ``privacy.md`` into ``out``."""
    chosen = [s.name for s in get_settings(settings)]
    bad = sorted(set(datasets) - set(DATASETS))
    if bad:
        raise ValueError(f"unknown datasets {bad}; known: {list(DATASETS)}")
    tasks = [(d, r) for d in datasets for r in range(reps)]
    logger.info(
        "%d datasets x %d repetitions x %d settings, %d trees per forest, %d processes",
        len(datasets),
        reps,
        len(chosen),
        n_trees,
        jobs,
    )
    progress = harness.Progress(logger, len(tasks), "tasks")
    rows: list[dict] = []
    done: dict[str, int] = {}

    def collect(task, result):
        rows.extend(result)
        dataset = task[0]
        done[dataset] = done.get(dataset, 0) + 1
        progress.step(f"{dataset} rep {task[1]}")
        if done[dataset] == reps:
            per = summarize([r for r in rows if r["dataset"] == dataset])[dataset]
            for setting in chosen:
                e = per[setting]
                logger.info(
                    "%s %-17s AUPRC mp %.3f local %.3f | midpoints %s/%s, min leaf %d, "
                    "rare levels %.1f, nodes %.0f | MIA AUC conf %.3f leaf %.3f",
                    dataset,
                    setting,
                    e["auprc"]["mp"],
                    e["auprc"]["local"],
                    _f(e["midpoint_share_consecutive"], 2),
                    _f(e["midpoint_share_any"], 2),
                    e["smallest_leaf"],
                    e["rare_levels"],
                    e["nodes_per_rep"],
                    e["mia_conf"][0],
                    e["mia_leaf"][0],
                )

    if jobs == 1:
        _quiet()
        for task in tasks:
            collect(task, run_task(task[0], task[1], chosen, n_trees, demo_rows))
    else:
        with ProcessPoolExecutor(max_workers=jobs, initializer=_init_worker) as pool:
            futures = {
                pool.submit(run_task, d, r, chosen, n_trees, demo_rows): (d, r) for d, r in tasks
            }
            for future in as_completed(futures):
                collect(futures[future], future.result())
    seconds = progress.seconds
    rows.sort(key=lambda r: (DATASETS.index(r["dataset"]), r["rep"], chosen.index(r["setting"])))
    per_dataset = summarize(rows)
    per_dataset = {d: {s: per_dataset[d][s] for s in chosen} for d in datasets if d in per_dataset}
    bench = {
        "command": command,
        "seconds": round(seconds, 1),
        "config": {
            "datasets": list(datasets),
            "reps": reps,
            "jobs": jobs,
            "n_sites": N_SITES,
            "jaccard": JACCARD,
            "demo_rows": demo_rows,
            "n_trees": n_trees,
            "dp_trees": DP_TREES,
            "dp_depth": DP_DEPTH,
            "test_fraction": TEST_FRACTION,
            "rare_level_rows": RARE_ROWS,
            "strategies": list(STRATEGIES),
            "settings": {
                s.name: {
                    "label": s.label,
                    "privacy": {
                        d: policy_for(s, d, _numeric_columns(d)).to_dict() for d in datasets
                    },
                }
                for s in get_settings(chosen)
            },
        },
        "overall": overall(per_dataset, rows),
        "datasets": per_dataset,
        "rows": rows,
    }
    if out is not None:
        harness.write_results(out, "privacy", saved(bench), markdown(bench), logger)
    return bench


def saved(bench: dict) -> dict:
    """The results as ``privacy.json`` holds them: ``rows`` as a table, ``{"columns": [...],
    "values": [one list per (dataset, rep, setting, site)]}``, AUPRC as ``auprc_<strategy>``
    (the harness writes each list of values on one line).
    """
    columns, values = row_table(bench["rows"])
    return {**bench, "rows": {"columns": columns, "values": values}}


def _numeric_columns(dataset: str) -> list[str]:
    if dataset == "Demo":
        return sorted(DEMO_RANGES)
    X, _, categorical = load_dataset(dataset, random_state=0)
    return [c for c in X.columns if c not in categorical]


def main(argv=None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument(
        "--reps", type=int, default=None, help=f"repetitions (default {REPS}; --quick: 1)"
    )
    parser.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smaller run: 1 repetition, 20 trees, 300 demo rows per site",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1 or (args.reps is not None and args.reps < 1):
        parser.error("--reps and --jobs must be at least 1")
    harness.start(logger)
    reps = args.reps if args.reps is not None else (1 if args.quick else REPS)
    n_trees, demo_rows = (20, 300) if args.quick else (100, 1000)
    command = harness.command("bench_privacy.py", argv if argv is not None else sys.argv[1:])
    bench = run(args.out, reps, args.jobs, n_trees, demo_rows, command=command)
    print(headline(bench))


if __name__ == "__main__":
    main()
