"""What every key of the configuration files means: the reference tables of docs/configuration.md.

The keys and their defaults are the schema's own (:data:`~fedforest.federation.config.JOB_DEFAULTS`,
:data:`~fedforest.federation.config.SITE_DEFAULTS`, the ``privacy:`` block of
:class:`~fedforest.privacy.policy.PrivacyPolicy` and the site-owned file's
:data:`~fedforest.federation.config.OVERRIDE_KEYS`); this module adds, per key, what it means
and what is allowed. A choice or a range is given as data (:class:`Key`), so that the text
is written from the same lists the validation uses (``fedforest.vocabulary``) and the tests
can check it against the validation. A key of the schema without an entry here, or an entry
without a key, fails the tests.

``python -m fedforest.federation.config_docs`` prints the tables as Markdown.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from ..election.ballot import NORMALIZATIONS
from ..model.payload_checks import MAX_NODE_SAMPLES, MAX_SEED
from ..privacy.grids import _GRID_KEYS, MAX_DIGITS, MIN_STEP
from ..privacy.policy import (
    _KEYS,
    DEFAULT_DP_MAX_DEPTH,
    DEFAULT_DP_TREES,
    JOB_MIN_LEAF_ROWS,
    JOB_TREE_SAMPLE_FRACTION,
    MAX_DP_DEPTH,
    MAX_EPSILON,
    MIN_EPSILON,
    MIN_SAMPLE_LEAVES,
    NOT_DP,
    SHARE_KEYS,
    PrivacyPolicy,
)
from ..vocabulary import (
    AGGREGATIONS,
    AUTO_METRICS,
    CALIBRATIONS,
    JOB_STRATEGIES,
    METRICS,
    MODES,
    POOLING_WEIGHTS,
    RANKING_METRICS,
    REGRESSION_AUTO_METRIC,
    REGRESSION_METRICS,
    SELECTORS,
    SURVIVAL_AUTO_METRIC,
    SURVIVAL_AUTO_METRICS,
    SURVIVAL_METRICS,
    SURVIVAL_TUNING_METRICS,
    TASKS,
    TRACKING,
    VALIDATIONS,
    VOTING,
)
from .config import (
    JOB_DEFAULTS,
    LOCAL_OVERRIDE,
    MAX_TIMEOUT,
    OVERRIDE_KEYS,
    RESERVED_NAMES,
    SITE_DEFAULTS,
)
from .site_rules import MIN_PART_EVENTS
from .time_grid import MAX_GRID_POINTS, MAX_HORIZONS, MIN_QUANTILE_EVENTS

#: Keys of a site's file whose value is one mapping, never a section of keys.
MAPPING_KEYS = ("renames", "label_map", "selector_params", "privacy")


@dataclass(frozen=True)
class Key:
    """What one key means and what it allows.

    ``choices`` (one of them; with ``many``, a list of them), ``boolean``, or a range
    (``lo``/``hi``, ``integer``, ``open_lo``/``open_hi``) are the rules the validation
    applies, in the form the tests check; ``allowed`` is text for what they do not say
    (or all of it). ``default`` replaces the schema's default in the table when the
    value needs words (``required``).
    """

    meaning: str
    allowed: str = ""
    choices: tuple = ()
    many: bool = False
    boolean: bool = False
    lo: float | None = None
    hi: float | None = None
    integer: bool = False
    open_lo: bool = False
    open_hi: bool = False
    nullable: bool = False
    default: str | None = None

    def allowed_text(self) -> str:
        parts = []
        if self.choices:
            names = ", ".join(f"`{c}`" for c in self.choices)
            parts.append(f"a list of {names}" if self.many else f"{names}")
        if self.boolean:
            parts.append("`true` or `false`")
        if self.lo is not None or self.hi is not None:
            kind = "an integer" if self.integer else "a number"
            lo = "−∞" if self.lo is None else _number(self.lo)
            hi = "∞" if self.hi is None else _number(self.hi)
            if self.hi is None:
                parts.append(f"{kind} {'>' if self.open_lo else '≥'} {lo}")
            else:
                left, right = "(" if self.open_lo else "[", ")" if self.open_hi else "]"
                parts.append(f"{kind} in {left}{lo}, {hi}{right}")
        text = "; ".join(parts)
        if self.allowed:
            text = f"{text}; {self.allowed}" if text else self.allowed
        if self.nullable:
            text = f"`null` or {text}" if text else "`null`"
        return text


def _number(x: float) -> str:
    if isinstance(x, int) or float(x).is_integer():
        n = int(x)
        if n == MAX_SEED:
            return "2³² − 1"
        if n == MAX_NODE_SAMPLES:
            return "2³¹ − 1"
        return f"{n:,}".replace(",", " ") if abs(n) >= 10_000 else str(n)
    return f"{x:g}".replace("e-0", "e-")


PHASE_TEXT = {
    "schema": "reading the tables and joining their columns (it includes the sites' start)",
    "election": "the vote and each tuning round",
    "train": "training the forests, surrogate splits and imputers",
    "evaluate": "scoring the strategies on the test rows",
}
NAME_RULE = (
    "letters, digits, `_`, `.` and `-` (at most 64, starting with a letter or digit), not "
    + ", ".join(f"`{n}`" for n in RESERVED_NAMES)
)

JOB_KEYS: dict[str, Key] = {
    "job.name": Key(
        "The job's name: the folder `fedforest job build` writes (`<out>/<name>/`) and the "
        "simulator's `<workspace>/<name>/`.",
        NAME_RULE,
    ),
    "job.sites": Key(
        "The hospitals of the job; each has `<site>.yaml` in the configuration folder.",
        "a list of at least two distinct site names, each " + NAME_RULE,
        default="required",
    ),
    "job.min_sites": Key(
        "The job stops, saying why, when fewer sites are left in a phase.",
        "at most the number of sites",
        lo=1,
        integer=True,
        nullable=True,
        default="`null` (every site)",
    ),
    "job.seed": Key(
        "Seed of every split, forest, selector, bootstrap and random branch: the same "
        "configs give the same results.",
        lo=0,
        hi=MAX_SEED,
        integer=True,
    ),
    **{
        f"job.timeouts.{phase}": Key(
            f"Seconds the {phase} phase waits for the sites: {text}. Fractions are allowed; "
            "0 is no limit.",
            lo=0,
            hi=MAX_TIMEOUT,
            allowed="30 days",
        )
        for phase, text in PHASE_TEXT.items()
    },
    "job.wait_after_min": Key(
        "`null`: every live site has the whole phase timeout. A number: a phase also closes "
        "that many seconds after `min_sites` sites replied, and the late sites are dropped "
        "with the reason.",
        lo=0,
        hi=MAX_TIMEOUT,
        nullable=True,
    ),
    "job.tracking": Key(
        "Also send every site's test metrics and the election's tuning history to NVIDIA "
        "FLARE's experiment tracking ([running.md](running.md#experiment-tracking)).",
        "`none` when `job.mode` is `swarm`; `tensorboard` or `mlflow` needs that package "
        "where the job is built and on the server",
        choices=TRACKING,
    ),
    "job.mode": Key(
        "`server`: the FLARE server runs the phases and pools the trees. `swarm`: the sites "
        "exchange everything among themselves and the server only starts and watches them "
        "([deploying.md](deploying.md#swarm-mode-no-central-party-sees-the-trees)).",
        choices=MODES,
    ),
    "job.task": Key(
        "What the target holds: class labels (`classification`) or a number "
        "(`regression`: regression trees, [running.md](running.md#regression-jobs)). A "
        "regression job's defaults: `evaluation.metrics` "
        + ", ".join(REGRESSION_METRICS)
        + f"; `evaluation.auto_metric` and `election.metric` {REGRESSION_AUTO_METRIC}; "
        "`evaluation.calibration` none. `survival`: a time to an event (random survival "
        "forests; each site names `time` and `event` columns instead of `target`, "
        "[running.md](running.md#survival-jobs)); its defaults: `evaluation.metrics` "
        + ", ".join(SURVIVAL_METRICS)
        + f"; `evaluation.auto_metric` and `election.metric` {SURVIVAL_AUTO_METRIC}; "
        "`evaluation.calibration` none.",
        choices=TASKS,
    ),
    "evaluation.strategies": Key(
        "What every site scores on its test rows: the missing-split strategies "
        "([strategies.md](strategies.md)), the intersection forest and `auto`, which picks "
        "one per site on its validation rows and is what the site deploys.",
        "at least one",
        choices=JOB_STRATEGIES,
        many=True,
    ),
    "evaluation.voting": Key(
        "`soft` averages the kept trees' class distributions, `hard` their one-hot votes.",
        "`soft` in a regression job",
        choices=VOTING,
    ),
    "evaluation.depth_threshold": Key(
        "`pr`: an unavailable split shallower than this discards the tree; deeper ones "
        "branch at random.",
        lo=0,
        integer=True,
    ),
    "evaluation.metrics": Key(
        "The metrics reported per site and strategy (`brier`, `log_loss` and `ece`: lower is "
        "better).",
        "at least one; a regression job: of "
        + ", ".join(f"`{m}`" for m in REGRESSION_METRICS)
        + "; a survival job: of "
        + ", ".join(f"`{m}`" for m in SURVIVAL_METRICS),
        choices=METRICS,
        many=True,
    ),
    "evaluation.auto_metric": Key(
        "What `auto` optimises on each site's validation rows: `log_loss`, `brier` and "
        "`ibs` are minimised, the others maximised.",
        f"`{REGRESSION_AUTO_METRIC}` in a regression job; one of "
        + ", ".join(f"`{m}`" for m in SURVIVAL_AUTO_METRICS)
        + " in a survival job",
        choices=AUTO_METRICS,
    ),
    "evaluation.calibration": Key(
        "Calibration fitted at each site on its validation rows, after the strategy "
        "([calibration.md](calibration.md)); a site's own `calibration` replaces it.",
        "`none` in a regression or survival job",
        choices=CALIBRATIONS,
    ),
    "evaluation.trees_per_site": Key(
        "`null`: every site evaluates the whole pooled forest. A number n: each site is sent "
        "its own trees and, the other sites taking turns, those its columns reach furthest, "
        "n in all, so that its evaluation and what it receives stop growing with the number "
        "of sites ([performance.md](performance.md#trees_per_site)).",
        lo=1,
        integer=True,
        nullable=True,
    ),
    "evaluation.validation": Key(
        "What each site tunes the election's masks, chooses `auto`'s strategy, fits the "
        "calibration and `wmp`'s weight on. `oob`: its training rows, each scored by the trees "
        "that did not train on it; no validation rows are held out, so the trees train on "
        "every row but the test rows, and `auto`'s lowest score wins. `holdout`: "
        "`validation_fraction` of its rows, held out of training; a candidate within one "
        "standard error of `auto`'s lowest ties with it and the preferred wins. A site's own "
        "`validation` replaces it; a site in DP mode always holds out "
        "([below](#validation-modes)).",
        choices=VALIDATIONS,
    ),
    "pooling.weights": Key(
        "`equal`: every tree one vote. `rows`: each site's trees weighted by its training rows.",
        choices=POOLING_WEIGHTS,
    ),
    "forest.n_estimators": Key(
        "Trees of each site's random forest.", lo=1, hi=10_000, integer=True
    ),
    "forest.max_depth": Key(
        "Depth limit of each site's trees (`null`: none).",
        lo=1,
        hi=MAX_NODE_SAMPLES,
        integer=True,
        nullable=True,
    ),
    "forest.min_samples_leaf": Key(
        "Smallest leaf of each site's trees. A site grows its trees with leaves of at least "
        "the larger of this and its `privacy.min_leaf_rows`, which is "
        f"{JOB_MIN_LEAF_ROWS} unless its YAML sets another: with the default 1 here, the "
        f"trees still have leaves of {JOB_MIN_LEAF_ROWS} rows or more "
        "([privacy.md](privacy.md#secure-by-default)).",
        "at most half of each site's training rows",
        lo=1,
        hi=MAX_NODE_SAMPLES,
        integer=True,
    ),
    "forest.max_features": Key(
        "Features tried at each split (scikit-learn's `max_features`).",
        "`sqrt`, `log2`, `null`, an integer ≥ 1 (at most each site's feature columns) or a "
        "fraction in (0, 1]",
    ),
    "surrogates.min_agreement": Key(
        "A surrogate split is kept when its adjusted agreement with the node's split is at "
        "least this (`ss`).",
        lo=-1,
        hi=1,
    ),
    "surrogates.min_rows": Key(
        "... and it was measured on at least this many training rows.", lo=1, integer=True
    ),
    "election.enabled": Key(
        "Run the feature election before training (`false`: every feature is used).",
        boolean=True,
    ),
    "election.freedom_degree": Key(
        "Share of the disputed features kept: 0 keeps the intersection, 1 the union "
        "([election.md](election.md)); where tuning starts.",
        lo=0,
        hi=1,
    ),
    "election.auto_tune": Key(
        "Hill-climb the freedom degree on the sites' validation scores of each proposed mask.",
        boolean=True,
    ),
    "election.tuning_rounds": Key(
        "The most masks the sites score while tuning, each one round of the election phase. "
        "A freedom degree whose mask was scored already costs no round, so the tuning "
        "history can list more freedom degrees than this; the climb also stops when its "
        "step falls below 0.0125 ([election.md](election.md#tuning-the-freedom-degree)).",
        lo=1,
        hi=100,
        integer=True,
    ),
    "election.tune_every_feature": Key(
        "Tuning also scores the mask of every feature (second, after the starting freedom "
        "degree, within `tuning_rounds`). The vote reaches at most the union of what the "
        "sites' selectors kept; with this candidate a column is dropped only when the "
        "scores say the smaller mask is no worse "
        "([election.md](election.md#tuning-the-freedom-degree)).",
        boolean=True,
    ),
    "election.tolerance": Key(
        "Masks scoring within this of the best count as equally good, and the smallest of "
        "them wins (in the metric's unit).",
        lo=0,
    ),
    "election.aggregation": Key(
        "How the sites' scores are averaged: `weighted` by training rows or `uniform`.",
        choices=AGGREGATIONS,
    ),
    "election.normalization": Key(
        "How a site's scores enter the vote: `all` (the Feature Election paper's rule) or "
        "`selected` (NVIDIA FLARE 2.9's `feature_election` rule).",
        choices=NORMALIZATIONS,
    ),
    "election.always_keep": Key(
        "Features kept whatever the vote.",
        "a list of feature columns of at least one site (global names, after `renames` and "
        "`drop_columns`)",
    ),
    "election.metric": Key(
        "What each site scores a proposed mask by, on its validation rows.",
        "a regression job: "
        + ", ".join(f"`{m}`" for m in REGRESSION_METRICS)
        + "; a survival job: "
        + ", ".join(f"`{m}`" for m in SURVIVAL_TUNING_METRICS)
        + f" (default `{SURVIVAL_AUTO_METRIC}`)",
        choices=RANKING_METRICS,
    ),
    "survival.times": Key(
        "A survival job's public time grid: every leaf's survival curve is read at these "
        "times. `null`: the grid is agreed from the sites' coarse event-time quantiles "
        "([privacy.md](privacy.md#what-leaves-a-site)).",
        f"a list of 2 to {MAX_GRID_POINTS} finite times ≥ 0, strictly increasing, in the "
        "unit of the sites' time columns; only in a survival job",
        nullable=True,
    ),
    "survival.grid_points": Key(
        "The most points of an agreed time grid (evenly spaced among the sites' pooled "
        "quantiles when they hold more).",
        lo=2,
        hi=MAX_GRID_POINTS,
        integer=True,
    ),
    "survival.horizons": Key(
        "The times at which each site reports the time-dependent AUC of its test rows and "
        "the calibration of their survival curves ([running.md](running.md#survival-jobs)). "
        "`null`: the time grid's middle time. A horizon outside an agreed grid's range is "
        "left out of the report, with the reason in the site's log.",
        f"a list of 1 to {MAX_HORIZONS} finite times ≥ 0, strictly increasing, in "
        "the unit of the sites' time columns; within `survival.times` when the job gives "
        "it; only in a survival job",
        nullable=True,
    ),
}

SITE_KEYS: dict[str, Key] = {
    "site": Key(
        "The site's name, as in `job.sites`; the file is `<site>.yaml`.",
        "the file's name",
        default="required",
    ),
    "data_path": Key(
        "The site's CSV, relative to this YAML file (or absolute). The site's own "
        f"`local/{LOCAL_OVERRIDE}` can replace it.",
        "a CSV file that follows the [data rules](#data-files)",
        default="required",
    ),
    "target": Key(
        "The outcome column (its global name, after `renames`).",
        "a column of the data file; absent in a survival job (`time` and `event` name the outcome)",
        default="required",
    ),
    "time": Key(
        "A survival job's follow-up time column (its global name), in place of `target`.",
        "a column of finite times ≥ 0; only in a survival job",
        nullable=True,
        default="required in a survival job",
    ),
    "event": Key(
        "A survival job's event column: 1 (or true) when the event happened at the row's "
        "time, 0 (or false) when the row was censored then. Every part of the site's split "
        f"keeps at least {MIN_PART_EVENTS} events (the split is stratified by event).",
        "a column of 1/0 or true/false other than `time`; only in a survival job",
        nullable=True,
        default="required in a survival job",
    ),
    "time_resolution": Key(
        "A survival job: the site's event-time quantiles, sent to agree the time grid, are "
        "rounded to multiples of this (`null`: to 2 significant digits; with "
        "`privacy.time_resolution` too, the coarser). A site with fewer "
        f"than {MIN_QUANTILE_EVENTS} events (or `privacy.min_leaf_rows`) sends none.",
        "a number > 0 in the unit of the time column; only in a survival job",
        nullable=True,
    ),
    "categorical": Key(
        "Integer-coded categorical columns (text columns always are categorical).",
        "a list of columns (global names)",
    ),
    "renames": Key(
        "Local column name → global name, so that sites that spell a column differently "
        "vote on, and share, one feature.",
        "a mapping whose global names are distinct",
    ),
    "drop_columns": Key(
        "Columns of the CSV that are never read, named as in the file (patient identifiers, "
        "a saved index such as `Unnamed: 0`).",
        "a list of columns of the file, neither renamed nor the target",
    ),
    "label_map": Key(
        "Local class label → global label, applied to the target when the site reads its "
        "table (`{1: 0, 2: 1}`).",
        "a mapping of strings or integers, one global label per local label (quote `'yes'`, "
        "`'no'`, `'true'`, `'false'` and `'null'`, which YAML reads as booleans or null); `{}` "
        "in a regression job",
    ),
    "selector": Key(
        "The site's local feature selector for the election ([election.md](election.md)).",
        "`f_classif` and `chi2` only in a classification job, `f_regression` only in a "
        "regression job; a survival job takes `random_forest`, `coxnet`, `cox_univariate` "
        "and `none` only (and `coxnet`, `cox_univariate` only it)",
        choices=SELECTORS,
    ),
    "selector_params": Key(
        "Overrides of the selector's defaults (`{C: 0.5}` for `lasso`).",
        "a mapping checked by the selector: an unknown parameter or a bad value is refused "
        "as `selector_params.<name>`",
    ),
    "validation": Key(
        "This site's validation mode, in place of the job's `evaluation.validation`.",
        "not `oob` with a `privacy.dp_epsilon` in this file (a DP site always holds out)",
        choices=VALIDATIONS,
        nullable=True,
    ),
    "validation_fraction": Key(
        "Share of the site's rows held out for tuning the election, fitting `wmp`, "
        "calibrating and choosing `auto`, with validation `holdout` (unused with `oob`).",
        "with `test_fraction`, less than 0.9",
        lo=0,
        hi=1,
        open_lo=True,
        open_hi=True,
    ),
    "test_fraction": Key(
        "Share of the site's rows held out for the reported metrics.",
        lo=0,
        hi=1,
        open_lo=True,
        open_hi=True,
    ),
    "privacy": Key(
        "What this site accepts to send ([below](#the-privacy-block), "
        "[privacy.md](privacy.md)). The site's own `local/fedforest.yaml` may hold another "
        "block, and the stricter of the two applies.",
        "a mapping of the privacy keys",
        default=f"`null` (`min_leaf_rows: {JOB_MIN_LEAF_ROWS}`, "
        f"`tree_sample_fraction: {JOB_TREE_SAMPLE_FRACTION}`)",
    ),
    "report_metrics": Key(
        "Swarm mode: send the final test metrics to the server for its report (`false`: "
        "only the site's status).",
        boolean=True,
    ),
    "calibration": Key(
        "This site's calibration, in place of the job's `evaluation.calibration`.",
        "`none` in a regression job",
        choices=CALIBRATIONS,
        nullable=True,
    ),
}

PRIVACY_KEYS: dict[str, Key] = {
    "min_leaf_rows": Key(
        "No tree node sent describes fewer training rows: trees are grown with leaves of at "
        "least this many rows and pruned so.",
        "at most half of the site's training rows",
        lo=1,
        hi=MAX_NODE_SAMPLES,
        integer=True,
        default=f"`{JOB_MIN_LEAF_ROWS}` in a site's YAML (`1` in `local/fedforest.yaml`, "
        "which can only tighten)",
    ),
    "tree_sample_fraction": Key(
        "Each tree grows on a bootstrap sample of this share of the site's training rows "
        f"(scikit-learn's `max_samples`; at least {MIN_SAMPLE_LEAVES} leaves' worth of "
        "rows). Not used in DP mode.",
        lo=0,
        hi=1,
        open_lo=True,
        nullable=True,
        default=f"`{JOB_TREE_SAMPLE_FRACTION}` in a site's YAML (`null`, every row, in "
        "`local/fedforest.yaml`)",
    ),
    "min_level_rows": Key(
        'Category levels held by fewer rows at the site are sent as one level `"(other)"` '
        "(0: off).",
        lo=0,
        integer=True,
    ),
    "threshold_grid": Key(
        "Split and surrogate thresholds are snapped to public points, and the trees "
        "recounted on the site's rows (`null`: thresholds as trained).",
        "a mapping with `step` or `significant_digits`, and/or `steps` and `edges`; every "
        "numeric column needs a rule",
        nullable=True,
    ),
    "threshold_grid.step": Key(
        "Every numeric feature's thresholds become multiples of this.",
        "not with `significant_digits`",
        lo=MIN_STEP,
        default="none",
    ),
    "threshold_grid.significant_digits": Key(
        "... or are rounded to this many significant digits.",
        lo=1,
        hi=MAX_DIGITS,
        integer=True,
        default="none",
    ),
    "threshold_grid.steps": Key(
        "Per-feature steps (`{age: 1}`), in place of the default rule.",
        "a mapping of numeric features to numbers > 0",
        default="none",
    ),
    "threshold_grid.edges": Key(
        "Per-feature public cut points (`{hba1c: [5.7, 6.5, 8.0]}`).",
        "a mapping of numeric features to strictly increasing lists",
        default="none",
    ),
    "count_noise_epsilon": Key(
        "Laplace noise of scale 1/ε on the leaf class counts (regression: on each leaf's "
        "row count and sum of the target). Protects the counts, not the tree structure.",
        lo=MIN_EPSILON,
        hi=MAX_EPSILON,
        nullable=True,
    ),
    "share": Key(
        "Which optional parts of the training reply are sent.",
        "a mapping of " + ", ".join(f"`{k}`" for k in SHARE_KEYS) + " to `true` or `false`",
    ),
    **{
        f"share.{part}": Key(
            {
                "imputers": "Send the imputers of the site's private columns (`mi`, `ipr`, `mp`).",
                "feature_std": "Send each numeric column's standard deviation (withheld, the "
                "numeric imputers are withheld too).",
                "surrogates": "Send the surrogate splits of the site's trees (`ss`).",
                "intersection": "Send the site's forest on the shared columns (`intersection`).",
            }[part],
            "`false` in DP mode" if part in NOT_DP else "",
            boolean=True,
        )
        for part in SHARE_KEYS
    },
    "dp_epsilon": Key(
        "DP mode: the site sends ε-differentially private random trees drawn from the public "
        "`feature_ranges`, with noisy counts, instead of its forest; no imputer, standard "
        "deviation or surrogate split.",
        lo=MIN_EPSILON,
        hi=MAX_EPSILON,
        nullable=True,
    ),
    "dp_trees": Key(
        f"Trees of the DP forest (`null`: {DEFAULT_DP_TREES}).",
        lo=1,
        hi=10_000,
        integer=True,
        nullable=True,
    ),
    "dp_max_depth": Key(
        f"Depth of the DP trees (`null`: {DEFAULT_DP_MAX_DEPTH}).",
        lo=1,
        hi=MAX_DP_DEPTH,
        integer=True,
        nullable=True,
    ),
    "feature_ranges": Key(
        "Public ranges of the numeric features, for the DP trees' thresholds.",
        "a mapping of features to `[low, high]`, low < high; DP mode needs one for every "
        "numeric column",
    ),
    "target_range": Key(
        "Public bounds of a regression target, for the DP trees' noisy leaf means.",
        "`[low, high]`, low < high; only with `dp_epsilon`, and required there in a regression job",
        nullable=True,
    ),
    "time_resolution": Key(
        "A survival job: the event-time quantiles the site sends to agree the time grid are "
        "multiples of this (the coarser of it and the site's own `time_resolution`; of two "
        "blocks', the coarser). A FLARE privacy filter with the key rounds them in the "
        "schema reply. Changes nothing in a job of another task.",
        "a number > 0 in the unit of the time column; of two resolutions given, one an "
        "integer multiple of the other",
        nullable=True,
    ),
}

LOCAL_KEYS: dict[str, Key] = {
    "data_path": Key(
        "The site's CSV; replaces the job's `data_path`, so the server never learns where "
        "the data is. Relative to this file's folder.",
        "a path",
        default="the job's",
    ),
    "privacy": Key(
        "The hospital's own policy: for every key the stricter of this and the job's block "
        "applies, so a job can tighten it but never loosen it.",
        "a privacy block",
        default="none",
    ),
    "report_metrics": Key(
        "`false` withholds the site's test metrics from the server in swarm mode, whatever "
        "the job's site YAML says (`true` cannot re-enable them).",
        boolean=True,
        default="the job's",
    ),
}


# --------------------------------------------------------------------------- the schema
def schema_keys(defaults: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every key of a defaults mapping with its default, sections expanded as the files
    nest them (``job.timeouts.schema``); a mapping-valued key stays one key."""
    for key, value in defaults.items():
        if isinstance(value, dict) and value and key not in MAPPING_KEYS:
            yield from schema_keys(value, f"{prefix}{key}.")
        else:
            yield prefix + key, value


def privacy_defaults() -> dict[str, Any]:
    """The ``privacy:`` keys (sections ``threshold_grid`` and ``share`` expanded) with the
    defaults of :class:`~fedforest.privacy.policy.PrivacyPolicy`."""
    policy = PrivacyPolicy().to_dict()
    out: dict[str, Any] = {}
    for key in _KEYS:
        out[key] = policy.get(key)
        if key == "threshold_grid":
            out.update({f"threshold_grid.{k}": None for k in _GRID_KEYS})
        if key == "share":
            out.update({f"share.{k}": v for k, v in policy["share"].items()})
    return out


def tables() -> dict[str, tuple[dict[str, Key], dict[str, Any]]]:
    """The documented files: name -> (the documentation of each key, the schema's defaults)."""
    local = {key: None for key in OVERRIDE_KEYS}
    return {
        "job": (JOB_KEYS, dict(schema_keys(JOB_DEFAULTS))),
        "site": (SITE_KEYS, dict(schema_keys(SITE_DEFAULTS))),
        "privacy": (PRIVACY_KEYS, privacy_defaults()),
        "local": (LOCAL_KEYS, local),
    }


# --------------------------------------------------------------------------- Markdown
def yaml_value(value: Any) -> str:
    """A default as YAML writes it inline (``null``, ``true``, ``[a, b]``)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(value)
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text.removesuffix("...").strip()


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(name: str, prefix: str = "") -> str:
    """One file's keys as a Markdown table: key, default, allowed, meaning.

    ``name`` is one of :func:`tables`; ``prefix`` is written before every key
    (``privacy.``), and a section prefix of the job's keys starts a new table.
    """
    docs, defaults = tables()[name]
    rows = []
    for key, doc in docs.items():
        if key not in defaults:
            raise ValueError(f"{name}: {key!r} is described but is no key of the schema")
        default = doc.default if doc.default is not None else f"`{yaml_value(defaults[key])}`"
        allowed = doc.allowed_text()
        rows.append(
            f"| `{prefix}{key}` | {_cell(default)} | {_cell(allowed)} | {_cell(doc.meaning)} |"
        )
    head = "| key | default | allowed | meaning |\n|---|---|---|---|"
    return head + "\n" + "\n".join(rows)


def job_tables() -> str:
    """The job file's keys, one table per section (``job``, ``evaluation``, ...)."""
    docs, _ = tables()["job"]
    sections: dict[str, list[str]] = {}
    for key in docs:
        sections.setdefault(key.split(".")[0], []).append(key)
    out = []
    full = markdown_table("job").splitlines()
    head, rows = full[:2], dict(zip(docs, full[2:], strict=True))
    for section, keys in sections.items():
        out.append(f"#### `{section}:`\n\n" + "\n".join(head + [rows[k] for k in keys]))
    return "\n\n".join(out)


def render(name: str) -> str:
    """The Markdown of one generated block of docs/configuration.md (``job``, ``site``,
    ``privacy``, ``local``)."""
    if name == "job":
        return job_tables()
    if name == "privacy":
        return markdown_table("privacy", "privacy.")
    return markdown_table(name)


def main() -> None:  # pragma: no cover - writes the reference to standard output
    for name, title in (
        ("job", "job.yaml"),
        ("site", "<site>.yaml"),
        ("privacy", "privacy:"),
        ("local", f"local/{LOCAL_OVERRIDE}"),
    ):
        sys.stdout.write(f"### {title}\n\n{render(name)}\n\n")


if __name__ == "__main__":  # pragma: no cover
    main()
