"""Job and site configuration: one YAML for the job, one per hospital.

Every value is validated when the job is built and again when a site starts;
an error names the file, the key, the bad value and what is allowed, e.g.::

    site_configs/site-2.yaml: key 'selector' is 'magic'; allowed: lasso, elastic_net, ...

The job file (``site_configs/job.yaml``)::

    job:
      name: fedforest-demo
      sites: [site-1, site-2, site-3]   # one site_configs/<site>.yaml each
      min_sites: 2                      # fewer sites alive and the job stops
      seed: 0
      timeouts: {schema: 120, election: 300, train: 900, evaluate: 600}  # seconds, 0 = no limit
      wait_after_min: null              # null: every live site has the whole phase timeout;
                                        # a number: close a phase that long after min_sites replied
      tracking: none                    # none, tensorboard or mlflow: also send the sites'
                                        # metrics and the tuning history to FLARE's tracking
      mode: server                      # server: the server runs the phases and pools;
                                        # swarm: the sites exchange everything with each other
      task: classification              # or regression: a continuous target (regression
                                        # trees; metrics rmse, mae, r2; no calibration);
                                        # or survival: a time to an event (survival trees)
    evaluation:
      strategies: [fpv, pr, mi, ipr, mp, ss, node, wmp, park, local, intersection, auto]
      voting: soft
      depth_threshold: 2
      metrics: [auprc, auc, mcc, accuracy, brier, log_loss, ece]
      auto_metric: log_loss             # what auto minimises (log_loss, brier) or maximises
      calibration: auto                 # none, prior, sigmoid, isotonic or auto: fitted at
                                        # each site on its validation rows, after the strategy
      validation: oob                   # oob: tune, calibrate and choose on the training rows
                                        # out of bag; holdout: on validation_fraction's rows
      trees_per_site: null              # null: every pooled tree; n: each site gets its own
                                        # trees and those its columns reach best, n in all
    pooling:
      weights: equal                    # equal: every tree one vote; rows: each site's trees
                                        # weighted by its training rows
    forest: {n_estimators: 100, max_depth: null, min_samples_leaf: 1, max_features: sqrt}
    surrogates: {min_agreement: 0.25, min_rows: 6}
    election:
      enabled: true
      freedom_degree: 0.5
      auto_tune: true
      tuning_rounds: 5
      tune_every_feature: true          # tuning also scores keeping every feature
      tolerance: 0.005
      aggregation: weighted
      normalization: all                # all: the Feature Election paper's reference rule;
                                        # selected: NVIDIA FLARE 2.9's feature_election rule
      always_keep: []
      metric: auprc
    survival: {times: null, grid_points: 30, horizons: null}  # job.task: survival

A site file (``site_configs/site-1.yaml``)::

    site: site-1
    data_path: ../demo_data/site-1.csv     # relative to this file
    target: outcome
    categorical: [smoker]                  # integer-coded categorical columns
    renames: {glucose_mg_dl: glucose}      # local column name -> global name
    drop_columns: [patient_id]             # columns never read (identifiers, a saved index)
    label_map: {'Yes': 'yes', 'No': 'no'}  # local class label -> global label
    selector: lasso
    selector_params: {C: 0.5}              # checked against the selector's parameters
    validation: null                       # oob or holdout (null: the job's
                                           # evaluation.validation)
    validation_fraction: 0.2               # the validation rows of validation: holdout
    test_fraction: 0.25
    privacy:                               # what this site accepts to send (optional)
      min_leaf_rows: 5                     # see fedforest.privacy.policy for every key
      min_level_rows: 5
    report_metrics: true                   # swarm mode: send the final test metrics to the
                                           # server for its report (false: status only)
    calibration: null                      # this site's calibration (null: the job's
                                           # evaluation.calibration)

A site of a survival job names ``time`` and ``event`` columns instead of
``target`` (:mod:`fedforest.federation.config_survival`).

**Validation mode.** A site scores its choices (the election's tuning masks,
``auto``, the calibration, ``wmp``'s weight) either out of bag on its
training rows (``oob``: no validation rows are held out, the trees train on
every row but the test rows) or on ``validation_fraction`` of its rows held
out of training (``holdout``). The site's ``validation`` key overrides the
job's ``evaluation.validation`` (:meth:`SiteConfig.validation_mode`). A site
in DP mode always holds out: its trees count every training row in their
noised leaves, so no row is out of bag, and scoring the training rows by the
in-bag record would use (and could leak) what the noise protects. A site YAML that sets ``validation: oob`` and a DP block
is refused; DP mode from the job's default or the hospital's own file turns
``oob`` into ``holdout``, and the site logs why.

The data file itself is read and checked by :mod:`fedforest.federation.tables`.
:func:`check_job_against_sites` checks the job's settings against the sites'
data (``election.always_keep``, ``forest.min_samples_leaf``, an integer
``forest.max_features``).

A hospital can keep its data path from the server: a file ``fedforest.yaml``
in the site's FLARE ``local/`` folder holding ``data_path: /secure/path.csv``
takes precedence over the job's value. The same file may hold the hospital's
own ``privacy:`` block and ``report_metrics: false`` (the hospital's ``false``
wins over the job's ``true``). The policy the site applies is the stricter of the two
blocks, key by key (:func:`~fedforest.privacy.policy.effective_policy`,
:meth:`SiteConfig.privacy_policy`): a job can tighten a hospital's policy but
never loosen it. The job's block is checked when the job is built (its values,
a threshold grid naming a categorical column, ``2 * min_leaf_rows`` against
the training rows); both blocks and their combination are checked again when
the site starts, against the site's table (:meth:`SiteConfig.check_privacy`).

**Secure by default.** Outside DP mode, a site whose YAML sets no
``privacy.min_leaf_rows`` sends no node that describes fewer than
:data:`~fedforest.privacy.policy.JOB_MIN_LEAF_ROWS` (5) training rows, and
one that sets no ``privacy.tree_sample_fraction`` grows each tree on a
bootstrap sample of :data:`~fedforest.privacy.policy.JOB_TREE_SAMPLE_FRACTION`
(30%) of its training rows: fully grown trees on every row, with one-row
leaves, tell who was in the training rows (membership inference). The site's
YAML may loosen either (a smaller ``min_leaf_rows``, a larger fraction); the
site then logs a warning when it loads the file.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..columns import column_kind
from ..election.ballot import NORMALIZATIONS
from ..model.payload_checks import MAX_NODE_SAMPLES, MAX_NODES, MAX_SEED
from ..privacy.policy import (
    JOB_MIN_LEAF_ROWS,
    PrivacyPolicy,
    effective_policy,
)
from ..rules import names as strategy_names
from ..validation import ConfigChecker
from ..vocabulary import (
    AGGREGATIONS,
    CALIBRATIONS,
    DEFAULT_AUTO_METRIC,
    DEFAULT_VALIDATION,
    METRICS,
    MODES,
    NAME_CHARACTERS,
    PHASES,
    POOLING_WEIGHTS,
    RESERVED_SITE_NAMES,
    SELECTORS,
    SITE_NAME,
    TASKS,
    TRACKING,
    VALIDATIONS,
    VOTING,
)
from ..yaml_files import read_yaml_file
from . import config_survival as cs
from .config_sections import ElectionSettings, ForestParams, SurrogateParams, Timeouts
from .config_tasks import TASK_RULES, task_defaults
from .config_values import (
    _check_label_map,
    _check_selector_params,
    _site_privacy,
)
from .job_sites import check_job_against_sites
from .splits import split_sizes
from .time_grid import DEFAULT_GRID_POINTS

logger = logging.getLogger(__name__)

LOCAL_OVERRIDE = "fedforest.yaml"

JOB_DEFAULTS: dict[str, Any] = {
    "job": {
        "name": "fedforest",
        "sites": None,
        "min_sites": None,
        "seed": 0,
        "timeouts": Timeouts().to_dict(),
        "wait_after_min": None,
        "tracking": "none",
        "mode": "server",
        "task": "classification",
    },
    "evaluation": {
        "strategies": list(strategy_names()),
        "voting": "soft",
        "depth_threshold": 2,
        "metrics": list(METRICS),
        "auto_metric": DEFAULT_AUTO_METRIC,
        "calibration": "auto",
        "trees_per_site": None,
        "validation": DEFAULT_VALIDATION,
    },
    "pooling": {"weights": "equal"},
    # the sections of settings: their defaults are their dataclasses' (config_sections)
    "forest": ForestParams().to_dict(),
    "surrogates": SurrogateParams().to_dict(),
    "election": ElectionSettings().to_dict(),
    "survival": {"times": None, "grid_points": DEFAULT_GRID_POINTS, "horizons": None},
}

SITE_DEFAULTS: dict[str, Any] = {
    "site": None,
    "data_path": None,
    "target": None,
    "categorical": [],
    "renames": {},
    "drop_columns": [],
    "label_map": {},
    "selector": "random_forest",
    "selector_params": {},
    "validation": None,
    "validation_fraction": 0.2,
    "test_fraction": 0.25,
    "privacy": None,
    "report_metrics": True,
    "calibration": None,
    **cs.SURVIVAL_SITE_DEFAULTS,
}

#: Keys the site-owned file (``local/fedforest.yaml``) may hold.
OVERRIDE_KEYS = ("data_path", "privacy", "report_metrics")


#: A site or job name: it becomes a folder name, so no path separators or dots first. The
#: grammar is :data:`~fedforest.vocabulary.SITE_NAME`, the one model files read too.
NAME = re.compile(SITE_NAME)
#: The longest timeout (seconds, 30 days): longer ones overflow the clocks that wait.
MAX_TIMEOUT = 30 * 24 * 3600
#: Names FLARE keeps for itself.
RESERVED_NAMES = RESERVED_SITE_NAMES


def check_name(c: ConfigChecker, key: str, value, what: str) -> str:
    """A name that can be a folder and a FLARE participant name."""
    allowed = f"{what} of {NAME_CHARACTERS}, not one of {', '.join(RESERVED_NAMES)}"
    if not isinstance(value, str) or not NAME.fullmatch(value) or value in RESERVED_NAMES:
        c.fail(key, value, allowed)
    return value


class _Checker(ConfigChecker):
    """Config checks plus merging a file's keys into the defaults."""

    def merge(self, data: Any, defaults: dict, prefix: str = "") -> dict:
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            self.fail(prefix.rstrip(".") or "(top level)", data, "a mapping of keys to values")
        unknown = [k for k in data if k not in defaults]
        if unknown:
            key = prefix + str(unknown[0])
            self.fail(
                key,
                data[unknown[0]],
                "one of the known keys " + ", ".join(prefix + k for k in defaults),
            )
        out = {}
        for key, default in defaults.items():
            if (
                isinstance(default, dict)
                and default
                and key in data
                and key not in ("renames", "label_map", "selector_params", "privacy")
            ):
                out[key] = self.merge(data.get(key), default, f"{prefix}{key}.")
            else:
                out[key] = copy.deepcopy(data.get(key, default))
        return out


def _read_yaml(path: Path) -> Any:
    return read_yaml_file(path)


@dataclass
class JobConfig:
    """The validated job configuration (see the module docstring for the keys).

    The sections ``job.timeouts``, ``forest``, ``surrogates`` and ``election``
    are frozen dataclasses (:mod:`fedforest.federation.config_sections`); the
    keys of ``job``, ``evaluation`` and ``pooling`` are attributes of their own.
    """

    name: str
    sites: list[str]
    min_sites: int
    seed: int
    timeouts: Timeouts
    wait_after_min: float | None
    strategies: list[str]
    voting: str
    depth_threshold: int
    metrics: list[str]
    auto_metric: str
    forest: ForestParams
    surrogates: SurrogateParams
    election: ElectionSettings
    tracking: str = "none"
    mode: str = "server"
    task: str = "classification"
    calibration: str = "auto"
    pooling_weights: str = "equal"
    trees_per_site: int | None = None
    #: ``evaluation.validation``: what the sites score their choices on, unless a site's
    #: ``validation`` says otherwise (:data:`~fedforest.vocabulary.VALIDATIONS`).
    validation: str = DEFAULT_VALIDATION
    #: ``survival.times`` (``None``: agreed from the sites) and ``survival.grid_points``.
    survival_times: tuple[float, ...] | None = None
    grid_points: int = DEFAULT_GRID_POINTS
    #: ``survival.horizons``: where each site's time-dependent AUC and calibration are
    #: reported (``None``: the time grid's middle time).
    survival_horizons: tuple[float, ...] | None = None
    source: str = "job.yaml"

    @classmethod
    def from_dict(cls, data: Any, source: str = "job.yaml") -> JobConfig:
        c = _Checker(source)
        d = c.merge(data, JOB_DEFAULTS)
        job, ev, forest, sur, el, pooling, surv = (
            d["job"],
            d["evaluation"],
            d["forest"],
            d["surrogates"],
            d["election"],
            d["pooling"],
            d["survival"],
        )
        if job["sites"] is None:
            c.fail("job.sites", None, "a list of at least two site names")
        sites = c.str_list("job.sites", job["sites"])
        if len(sites) < 2:
            c.fail("job.sites", sites, "a list of at least two site names")
        for site in sites:
            check_name(c, "job.sites", site, "a site name")
        min_sites = job["min_sites"] if job["min_sites"] is not None else len(sites)
        c.integer("job.min_sites", min_sites, 1, len(sites))
        c.integer("job.seed", job["seed"], 0, MAX_SEED)
        timeouts = c.merge(job["timeouts"], JOB_DEFAULTS["job"]["timeouts"], "job.timeouts.")
        for phase in PHASES:
            c.number(f"job.timeouts.{phase}", timeouts[phase], 0, MAX_TIMEOUT)
        if job["wait_after_min"] is not None:
            c.number("job.wait_after_min", job["wait_after_min"], 0, MAX_TIMEOUT)
        check_name(c, "job.name", job["name"], "a job name")
        c.choice("job.tracking", job["tracking"], TRACKING)
        c.choice("job.mode", job["mode"], MODES)
        if job["mode"] == "swarm" and job["tracking"] != "none":
            c.fail(
                "job.tracking",
                job["tracking"],
                "none when job.mode is swarm (tracking sends every site's metrics and the "
                "election to the server, which swarm mode keeps from it)",
            )
        c.choice("job.task", job["task"], TASKS)
        survival = job["task"] == "survival"
        task_defaults(c, data, ev, el, job["task"])
        survival_times = cs.survival_grid(c, surv, survival)
        survival_horizons = cs.survival_horizons(c, surv, survival, survival_times)
        rules = TASK_RULES[job["task"]]
        allowed_metrics, auto_metrics = rules.metrics, rules.auto_metrics
        election_metrics = rules.tuning_metrics
        known = strategy_names()
        strategies = c.str_list("evaluation.strategies", ev["strategies"], known)
        if not strategies:
            c.fail("evaluation.strategies", strategies, "at least one of " + ", ".join(known))
        c.choice("evaluation.voting", ev["voting"], VOTING)
        # the model's settings carry it to the sites, whose reader takes at most MAX_NODES
        c.integer("evaluation.depth_threshold", ev["depth_threshold"], 0, MAX_NODES)
        metrics = c.str_list("evaluation.metrics", ev["metrics"], allowed_metrics)
        if not metrics:
            c.fail("evaluation.metrics", metrics, "at least one of " + ", ".join(allowed_metrics))
        c.choice("evaluation.auto_metric", ev["auto_metric"], auto_metrics)
        c.choice("evaluation.calibration", ev["calibration"], CALIBRATIONS)
        c.choice("evaluation.validation", ev["validation"], VALIDATIONS)
        tps = ev["trees_per_site"]
        if tps is not None and (isinstance(tps, bool) or not isinstance(tps, int) or tps < 1):
            c.fail("evaluation.trees_per_site", tps, "null (every pooled tree) or an integer >= 1")
        c.choice("pooling.weights", pooling["weights"], POOLING_WEIGHTS)
        c.integer("forest.n_estimators", forest["n_estimators"], 1, 10_000)
        if forest["max_depth"] is not None:
            c.integer("forest.max_depth", forest["max_depth"], 1, MAX_NODE_SAMPLES)
        c.integer("forest.min_samples_leaf", forest["min_samples_leaf"], 1, MAX_NODE_SAMPLES)
        mf = forest["max_features"]
        if not (
            mf in ("sqrt", "log2", None)
            or (isinstance(mf, int) and not isinstance(mf, bool) and mf >= 1)
            or (isinstance(mf, float) and 0 < mf <= 1)
        ):
            c.fail(
                "forest.max_features",
                mf,
                "sqrt, log2, null, an integer >= 1 or a fraction in (0, 1]",
            )
        c.number("surrogates.min_agreement", sur["min_agreement"], -1, 1)
        c.integer("surrogates.min_rows", sur["min_rows"], 1)
        c.boolean("election.enabled", el["enabled"])
        c.number("election.freedom_degree", el["freedom_degree"], 0, 1)
        c.boolean("election.auto_tune", el["auto_tune"])
        c.integer("election.tuning_rounds", el["tuning_rounds"], 1, 100)
        c.boolean("election.tune_every_feature", el["tune_every_feature"])
        c.number("election.tolerance", el["tolerance"], 0)
        c.choice("election.aggregation", el["aggregation"], AGGREGATIONS)
        c.choice("election.normalization", el["normalization"], NORMALIZATIONS)
        c.str_list("election.always_keep", el["always_keep"])
        c.choice("election.metric", el["metric"], election_metrics)
        return cls(
            name=job["name"],
            sites=sites,
            min_sites=int(min_sites),
            seed=int(job["seed"]),
            timeouts=Timeouts(**{p: float(timeouts[p]) for p in PHASES}),
            wait_after_min=(
                None if job["wait_after_min"] is None else float(job["wait_after_min"])
            ),
            strategies=strategies,
            voting=ev["voting"],
            depth_threshold=int(ev["depth_threshold"]),
            metrics=metrics,
            auto_metric=ev["auto_metric"],
            forest=ForestParams(**forest),
            surrogates=SurrogateParams(**sur),
            election=ElectionSettings(**{**el, "always_keep": tuple(el["always_keep"])}),
            tracking=job["tracking"],
            mode=job["mode"],
            task=job["task"],
            calibration=ev["calibration"],
            pooling_weights=pooling["weights"],
            trees_per_site=ev["trees_per_site"],
            validation=ev["validation"],
            survival_times=survival_times,
            grid_points=int(surv["grid_points"]),
            survival_horizons=survival_horizons,
            source=source,
        )

    @property
    def survival(self) -> bool:
        """Whether the job predicts a time to an event (``job.task: survival``)."""
        return self.task == "survival"

    @classmethod
    def load(cls, path) -> JobConfig:
        path = Path(path)
        return cls.from_dict(_read_yaml(path), str(path))

    def check_against_sites(
        self, sites: Mapping[str, SiteConfig], tables: Mapping[str, pd.DataFrame] | None = None
    ) -> None:
        """Check these settings against the sites' data (:func:`check_job_against_sites`)."""
        check_job_against_sites(self, sites, tables)


@dataclass
class SiteConfig:
    """The validated configuration of one hospital (see the module docstring)."""

    site: str
    data_path: str
    target: str
    categorical: list[str] = field(default_factory=list)
    renames: dict[str, str] = field(default_factory=dict)
    drop_columns: list[str] = field(default_factory=list)
    label_map: dict[Any, Any] = field(default_factory=dict)
    selector: str = "random_forest"
    selector_params: dict[str, Any] = field(default_factory=dict)
    validation_fraction: float = 0.2
    test_fraction: float = 0.25
    source: str = "site.yaml"
    #: The ``privacy:`` block of the job's site YAML (the default policy when absent).
    privacy: PrivacyPolicy = field(default_factory=PrivacyPolicy)
    #: The ``privacy:`` block of the site-owned ``local/fedforest.yaml``, if any.
    local_privacy: PrivacyPolicy | None = None
    #: Swarm mode: send the final test metrics to the server (``false``: status only).
    report_metrics: bool = True
    #: This site's calibration (``None``: the job's ``evaluation.calibration``).
    calibration: str | None = None
    #: The job's ``job.task`` (set by the job, not a key of the site's file): what the
    #: target column holds, class labels or numbers.
    task: str = "classification"
    #: The site's ``validation`` key (``None``: the job's, :attr:`job_validation`).
    validation: str | None = None
    #: The job's ``evaluation.validation`` (set by the job, not a key of the site's file).
    job_validation: str = DEFAULT_VALIDATION
    #: A survival job's ``time`` column (its ``event`` column is :attr:`target`) and
    #: ``time_resolution`` (:mod:`~fedforest.federation.config_survival`).
    time: str | None = None
    time_resolution: float | None = None

    @property
    def outcomes(self) -> list[str]:
        """The outcome columns, never features: the target, and a survival job's time column
        (``["died", "months"]``)."""
        return [self.target] + ([self.time] if self.time is not None else [])

    @classmethod
    def from_dict(
        cls,
        data: Any,
        source: str = "site.yaml",
        base_dir: Path | None = None,
        task: str = "classification",
        validation: str = DEFAULT_VALIDATION,
    ):
        """The validated site file; ``task`` and ``validation`` are the job's ``job.task`` and
        ``evaluation.validation``."""
        if validation not in VALIDATIONS:
            raise ValueError(f"validation={validation!r} is not one of {list(VALIDATIONS)}")
        c = _Checker(source)
        d = c.merge(data, SITE_DEFAULTS)
        if task not in TASKS:
            raise ValueError(f"task={task!r} is not one of {list(TASKS)}")
        cs.survival_site_keys(c, d, task)
        for key in ("site", "data_path", "target"):
            if d[key] is None:
                c.fail(key, None, "a non-empty string (this key is required)")
            c.string(key, d[key])
        c.str_list("categorical", d["categorical"])
        renames = d["renames"]
        if not isinstance(renames, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) and v for k, v in renames.items()
        ):
            c.fail("renames", renames, "a mapping of local column name to global name")
        if len(set(renames.values())) != len(renames):
            c.fail("renames", renames, "a mapping whose global names are distinct")
        drop = c.str_list("drop_columns", d["drop_columns"])
        for name in drop:
            if name in renames:
                c.fail(
                    "drop_columns",
                    name,
                    f"columns not also listed under renames ({name!r} is renamed to "
                    f"{renames[name]!r}; a dropped column is never read)",
                )
            if name == d["target"] and name not in renames.values():
                c.fail("drop_columns", name, f"columns other than the target {d['target']!r}")
        label_map = _check_label_map(c, d["label_map"])
        c.choice("selector", d["selector"], SELECTORS)
        if not isinstance(d["selector_params"], Mapping):
            c.fail("selector_params", d["selector_params"], "a mapping of parameter to value")
        _check_selector_params(c, d["selector"], d["selector_params"], task)
        val = c.number(
            "validation_fraction", d["validation_fraction"], 0, 1, open_lo=True, open_hi=True
        )
        test = c.number("test_fraction", d["test_fraction"], 0, 1, open_lo=True, open_hi=True)
        privacy = _site_privacy(d["privacy"], source)
        if d["validation"] is not None:
            c.choice("validation", d["validation"], VALIDATIONS)
            if d["validation"] == "oob" and privacy.dp:
                c.fail(
                    "validation",
                    "oob",
                    "holdout or null in DP mode (privacy.dp_epsilon is set in this file): DP "
                    "trees count every training row in their noised leaves, so no row is out "
                    "of bag, and scoring by the in-bag record would use what the noise "
                    "protects; a DP site always scores on validation rows held out of training",
                )
        c.boolean("report_metrics", d["report_metrics"])
        if d["calibration"] is not None:
            c.choice("calibration", d["calibration"], CALIBRATIONS)
        cs.survival_site_checks(c, d, label_map, task)
        if task == "regression":
            if d["calibration"] not in (None, "none"):
                c.fail(
                    "calibration",
                    d["calibration"],
                    "none or null in a regression job (job.task: regression predicts a number, "
                    "which is not calibrated)",
                )
            if label_map:
                c.fail(
                    "label_map",
                    d["label_map"],
                    "{} in a regression job (job.task: regression: the target holds numbers, "
                    "not class labels)",
                )
        if val + test >= 0.9:
            c.fail(
                "validation_fraction",
                val,
                f"a value leaving at least 10% of rows for training (test_fraction is {test})",
            )
        data_path = Path(d["data_path"]).expanduser()
        if not data_path.is_absolute() and base_dir is not None:
            data_path = (base_dir / data_path).resolve()
        return cls(
            site=d["site"],
            data_path=str(data_path),
            target=d["target"],
            categorical=list(d["categorical"]),
            renames=dict(renames),
            drop_columns=list(drop),
            label_map=label_map,
            selector=d["selector"],
            selector_params=dict(d["selector_params"]),
            validation_fraction=val,
            test_fraction=test,
            source=source,
            privacy=privacy,
            report_metrics=d["report_metrics"],
            calibration=d["calibration"],
            task=task,
            validation=d["validation"],
            job_validation=validation,
            time=d["time"],
            time_resolution=(None if d["time_resolution"] is None else float(d["time_resolution"])),
        )

    @classmethod
    def load(
        cls,
        path,
        override: Path | None = None,
        task: str = "classification",
        validation: str = DEFAULT_VALIDATION,
    ) -> SiteConfig:
        """Load a site file; a site-owned ``override`` file may set the :data:`OVERRIDE_KEYS`.

        ``task`` and ``validation`` are the job's ``job.task`` and ``evaluation.validation``.
        """
        path = Path(path)
        data = _read_yaml(path)
        config = cls.from_dict(
            data, str(path), base_dir=path.parent, task=task, validation=validation
        )
        if override is not None and Path(override).is_file():
            config = config.with_override(Path(override))
        return config

    def with_override(self, path: Path) -> SiteConfig:
        """Apply the site-owned file (only the :data:`OVERRIDE_KEYS` may be set there).

        A ``data_path`` there replaces the job's. A ``privacy`` block there is
        the hospital's own policy: it is validated (errors name this file), and
        its combination with the job's block is checked at once, since two
        threshold grids that cannot be ordered are refused naming both files.
        ``report_metrics: false`` there withholds the metrics whatever the
        job's site YAML says (``true`` there cannot re-enable them).
        """
        data = _read_yaml(path) or {}
        c = _Checker(str(path))
        if not isinstance(data, Mapping):
            c.fail(
                "(top level)", data, "a mapping with some of the keys " + ", ".join(OVERRIDE_KEYS)
            )
        unknown = [k for k in data if k not in OVERRIDE_KEYS]
        if unknown:
            c.fail(
                unknown[0],
                data[unknown[0]],
                "only " + ", ".join(OVERRIDE_KEYS) + " may be set in the site's own file",
            )
        config = self
        if "privacy" in data:
            local = PrivacyPolicy.from_dict(data["privacy"], str(path))
            config = dataclasses.replace(config, local_privacy=local)
            config.privacy_policy()  # two grids that cannot be combined fail here, naming both
        if "report_metrics" in data:
            c.boolean("report_metrics", data["report_metrics"])
            allowed = self.report_metrics and data["report_metrics"]
            config = dataclasses.replace(config, report_metrics=allowed)
        if "data_path" in data:
            c.string("data_path", data["data_path"])
            p = Path(data["data_path"]).expanduser()
            if not p.is_absolute():
                p = (path.parent / p).resolve()
            config = dataclasses.replace(
                config, data_path=str(p), source=f"{self.source} (data_path from {path})"
            )
        return config

    # ---------------------------------------------------------- validation
    def validation_choice(self) -> tuple[str, str]:
        """The validation mode this site uses, and why (text for the site's log).

        The site's ``validation`` key, else the job's ``evaluation.validation``;
        ``oob`` becomes ``holdout`` in DP mode (:meth:`privacy_policy`): DP
        trees count every training row in their noised leaves, so no row is
        out of bag, and scoring by the in-bag record would use what the noise
        protects. (A site YAML asking
        for ``oob`` with a DP block of its own is refused by :meth:`from_dict`;
        DP mode can still come from the hospital's own file.)

        Examples
        --------
        >>> SiteConfig("s", "s.csv", "y").validation_choice()
        ('oob', "the job's evaluation.validation")
        >>> SiteConfig("s", "s.csv", "y", validation="holdout").validation_choice()
        ('holdout', "key 'validation' of site.yaml")
        """
        if self.validation is not None:
            asked, why = self.validation, f"key 'validation' of {self.source}"
        else:
            asked, why = self.job_validation, "the job's evaluation.validation"
        if asked == "oob" and self.privacy_policy().dp:
            return "holdout", (
                f"DP mode ({self.privacy_policy().source}) in place of oob ({why}): DP "
                "trees count every training row in their noised leaves, so no row is out of "
                "bag, and scoring by the in-bag record would use what the noise protects"
            )
        return asked, why

    def validation_mode(self) -> str:
        """``oob`` or ``holdout``: what this site scores its choices on
        (:meth:`validation_choice`)."""
        return self.validation_choice()[0]

    @property
    def held_validation_fraction(self) -> float | None:
        """The share of rows the split holds out for validation: ``validation_fraction``
        with ``holdout``, ``None`` (no validation rows) with ``oob``."""
        return self.validation_fraction if self.validation_mode() == "holdout" else None

    def held_out_text(self) -> str:
        """The holdouts of the split, for messages (``validation_fraction 0.2 and
        test_fraction 0.25``)."""
        if self.held_validation_fraction is None:
            return f"test_fraction {self.test_fraction} (validation: oob, no validation rows)"
        return (
            f"validation_fraction {self.validation_fraction} and test_fraction {self.test_fraction}"
        )

    # ------------------------------------------------------------- privacy
    def privacy_policy(self) -> PrivacyPolicy:
        """The policy this site applies: the stricter of its own file's and the job's.

        :func:`~fedforest.privacy.policy.effective_policy` of
        :attr:`local_privacy` (the hospital's ``local/fedforest.yaml``) and
        :attr:`privacy` (the job's site YAML), or the job's alone when the
        hospital has no block. A job can tighten a hospital's policy, never
        loosen it.
        """
        if self.local_privacy is None:
            return self.privacy
        return effective_policy(self.local_privacy, self.privacy)

    def feature_kinds(self, frame: pd.DataFrame) -> tuple[list[str], list[str]]:
        """The numeric and the categorical feature columns of a checked table."""
        numeric, categorical = [], []
        for name in frame.columns:
            if name in self.outcomes:
                continue
            kind = column_kind(frame[name], name in self.categorical)
            (numeric if kind == "numeric" else categorical).append(str(name))
        return numeric, categorical

    def check_privacy(self, frame: pd.DataFrame, complete: bool = True) -> PrivacyPolicy:
        """Check the privacy policy against this site's table; return the policy checked.

        The policy must be applicable as it stands: a threshold grid with a
        rule for every numeric column and none for a categorical one, a
        public range for every numeric column in DP mode
        (:meth:`~fedforest.privacy.policy.PrivacyPolicy.check_features`).
        With ``complete`` (when the site starts) that is the effective policy
        (:meth:`privacy_policy`); without it (when the job is built, before
        the hospital's own file is known) the job's own block (job and site
        YAML), which must be complete by itself: the hospital's file can
        tighten it (grids combine, ranges are the job's), never complete it,
        so a job that would stop at every site's start is refused when it is
        built. Either way ``2 * min_leaf_rows`` may not exceed the site's training
        rows, as for ``forest.min_samples_leaf`` (the forest grows leaves of at
        least ``min_leaf_rows`` rows).

        Raises
        ------
        ConfigError
            Naming the policy's file(s), the key, the bad value and what is
            allowed.
        """
        policy = self.privacy_policy() if complete else self.privacy
        numeric, categorical = self.feature_kinds(frame)
        policy.check_features(numeric, categorical)
        policy.check_task(self.task)  # DP regression needs the target's public range
        cs.event_time_resolution(self, policy)  # the YAML's and the policy's must nest
        k = policy.min_leaf_rows
        n_train = split_sizes(len(frame), self.held_validation_fraction, self.test_fraction)[0]
        if 2 * k > n_train:
            _Checker(policy.source).fail(
                "privacy.min_leaf_rows",
                k,
                f"at most {n_train // 2} for site {self.site!r}: {self.source} gives {n_train} "
                f"training rows ({len(frame)} rows minus {self.held_out_text()}), and a "
                "split needs min_leaf_rows rows on each side"
                + (
                    f" ({JOB_MIN_LEAF_ROWS} is the default when {self.source} sets none: a "
                    "site this small may set privacy.min_leaf_rows lower there, knowing that "
                    "smaller leaves tell more about who was in its training rows)"
                    if k == JOB_MIN_LEAF_ROWS
                    else ""
                ),
            )
        return policy
