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
    evaluation:
      strategies: [fpv, pr, mi, ipr, mp, ss, node, wmp, park, local, intersection, auto]
      voting: soft
      depth_threshold: 2
      metrics: [auprc, auc, mcc, accuracy]
      auto_metric: auprc
    forest: {n_estimators: 100, max_depth: null, min_samples_leaf: 1, max_features: sqrt}
    surrogates: {min_agreement: 0.25, min_rows: 6}
    election:
      enabled: true
      freedom_degree: 0.5
      auto_tune: true
      tuning_rounds: 5
      tolerance: 0.005
      aggregation: weighted
      normalization: all                # all: the Feature Election paper's reference rule;
                                        # selected: NVIDIA FLARE 2.9's feature_election rule
      always_keep: []
      metric: auprc

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
    validation_fraction: 0.2
    test_fraction: 0.25
    privacy:                               # what this site accepts to send (optional)
      min_leaf_rows: 5                     # see fedforest.federation.privacy for every key
      min_level_rows: 5
    report_metrics: true                   # swarm mode: send the final test metrics to the
                                           # server for its report (false: status only)

The data file is checked as a whole (:meth:`SiteConfig.read_table`), when the
job is built and when the site starts: UTF-8 text, every row with as many
fields as the header, distinct column names, no index-like column (an empty or
``Unnamed: N`` name, or values exactly 0..n-1 or 1..n in row order), numbers
within float32's range, no numeric column with stray text, text columns with
at most ``MAX_LEVELS`` distinct values, at least ``MIN_ROWS`` rows and a
target of class labels. :func:`check_job_against_sites` checks the job's
settings against the sites' data (``election.always_keep``,
``forest.min_samples_leaf``, an integer ``forest.max_features``).

A hospital can keep its data path from the server: a file ``fedforest.yaml``
in the site's FLARE ``local/`` folder holding ``data_path: /secure/path.csv``
takes precedence over the job's value. The same file may hold the hospital's
own ``privacy:`` block and ``report_metrics: false`` (the hospital's ``false``
wins over the job's ``true``). The policy the site applies is the stricter of the two
blocks, key by key (:func:`~fedforest.federation.privacy.effective_policy`,
:meth:`SiteConfig.privacy_policy`): a job can tighten a hospital's policy but
never loosen it. The job's block is checked when the job is built (its values,
a threshold grid naming a categorical column, ``2 * min_leaf_rows`` against
the training rows); both blocks and their combination are checked again when
the site starts, against the site's table (:meth:`SiteConfig.check_privacy`).
"""

from __future__ import annotations

import copy
import csv
import dataclasses
import io
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pandas as pd
import yaml

from ..errors import ConfigError
from ..model.payload_checks import MAX_LEVELS, MAX_SEED
from ..validation import ConfigChecker
from ..vocabulary import (
    AGGREGATIONS,
    JOB_STRATEGIES,
    METRICS,
    MODES,
    PHASES,
    SELECTORS,
    TRACKING,
    VOTING,
)
from .election import NORMALIZATIONS
from .privacy import PrivacyPolicy, effective_policy
from .schema import as_level_strings, class_labels, column_kind, normalize_labels

LOCAL_OVERRIDE = "fedforest.yaml"

JOB_DEFAULTS: dict[str, Any] = {
    "job": {
        "name": "fedforest",
        "sites": None,
        "min_sites": None,
        "seed": 0,
        "timeouts": {"schema": 120, "election": 300, "train": 900, "evaluate": 600},
        "wait_after_min": None,
        "tracking": "none",
        "mode": "server",
    },
    "evaluation": {
        "strategies": [
            "fpv",
            "pr",
            "mi",
            "ipr",
            "mp",
            "ss",
            "node",
            "wmp",
            "park",
            "local",
            "intersection",
        ],
        "voting": "soft",
        "depth_threshold": 2,
        "metrics": list(METRICS),
        "auto_metric": "auprc",
    },
    "forest": {
        "n_estimators": 100,
        "max_depth": None,
        "min_samples_leaf": 1,
        "max_features": "sqrt",
    },
    "surrogates": {"min_agreement": 0.25, "min_rows": 6},
    "election": {
        "enabled": True,
        "freedom_degree": 0.5,
        "auto_tune": False,
        "tuning_rounds": 5,
        "tolerance": 0.0,
        "aggregation": "weighted",
        "normalization": "all",
        "always_keep": [],
        "metric": "auprc",
    },
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
    "validation_fraction": 0.2,
    "test_fraction": 0.25,
    "privacy": None,
    "report_metrics": True,
}

#: Keys the site-owned file (``local/fedforest.yaml``) may hold.
OVERRIDE_KEYS = ("data_path", "privacy", "report_metrics")


#: A site or job name: it becomes a folder name, so no path separators or dots first.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
#: Names FLARE keeps for itself.
RESERVED_NAMES = ("server", "admin", "overseer")


def check_name(c: ConfigChecker, key: str, value, what: str) -> str:
    """A name that can be a folder and a FLARE participant name."""
    allowed = (
        f"{what} of letters, digits, '_', '.' and '-' (at most 64, starting with a letter or "
        f"digit), not one of {', '.join(RESERVED_NAMES)}"
    )
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
    if not path.is_file():
        raise ConfigError(f"{path}: file not found")
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from err


@dataclass
class JobConfig:
    """The validated job configuration (see the module docstring for the keys)."""

    name: str
    sites: list[str]
    min_sites: int
    seed: int
    timeouts: dict[str, float]
    wait_after_min: float | None
    strategies: list[str]
    voting: str
    depth_threshold: int
    metrics: list[str]
    auto_metric: str
    forest: dict[str, Any]
    surrogates: dict[str, Any]
    election: dict[str, Any]
    tracking: str = "none"
    mode: str = "server"
    source: str = "job.yaml"

    @classmethod
    def from_dict(cls, data: Any, source: str = "job.yaml") -> JobConfig:
        c = _Checker(source)
        d = c.merge(data, JOB_DEFAULTS)
        job, ev, forest, sur, el = (
            d["job"],
            d["evaluation"],
            d["forest"],
            d["surrogates"],
            d["election"],
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
            c.number(f"job.timeouts.{phase}", timeouts[phase], 0)
        if job["wait_after_min"] is not None:
            c.number("job.wait_after_min", job["wait_after_min"], 0)
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
        strategies = c.str_list("evaluation.strategies", ev["strategies"], JOB_STRATEGIES)
        if not strategies:
            c.fail(
                "evaluation.strategies", strategies, "at least one of " + ", ".join(JOB_STRATEGIES)
            )
        c.choice("evaluation.voting", ev["voting"], VOTING)
        c.integer("evaluation.depth_threshold", ev["depth_threshold"], 0)
        metrics = c.str_list("evaluation.metrics", ev["metrics"], METRICS)
        if not metrics:
            c.fail("evaluation.metrics", metrics, "at least one of " + ", ".join(METRICS))
        c.choice("evaluation.auto_metric", ev["auto_metric"], METRICS)
        c.integer("forest.n_estimators", forest["n_estimators"], 1, 10_000)
        if forest["max_depth"] is not None:
            c.integer("forest.max_depth", forest["max_depth"], 1)
        c.integer("forest.min_samples_leaf", forest["min_samples_leaf"], 1)
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
        c.number("election.tolerance", el["tolerance"], 0)
        c.choice("election.aggregation", el["aggregation"], AGGREGATIONS)
        c.choice("election.normalization", el["normalization"], NORMALIZATIONS)
        c.str_list("election.always_keep", el["always_keep"])
        c.choice("election.metric", el["metric"], METRICS)
        return cls(
            name=job["name"],
            sites=sites,
            min_sites=int(min_sites),
            seed=int(job["seed"]),
            timeouts={p: float(timeouts[p]) for p in PHASES},
            wait_after_min=(
                None if job["wait_after_min"] is None else float(job["wait_after_min"])
            ),
            strategies=strategies,
            voting=ev["voting"],
            depth_threshold=int(ev["depth_threshold"]),
            metrics=metrics,
            auto_metric=ev["auto_metric"],
            forest=dict(forest),
            surrogates=dict(sur),
            election=dict(el),
            tracking=job["tracking"],
            mode=job["mode"],
            source=source,
        )

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

    @classmethod
    def from_dict(cls, data: Any, source: str = "site.yaml", base_dir: Path | None = None):
        c = _Checker(source)
        d = c.merge(data, SITE_DEFAULTS)
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
        _check_selector_params(c, d["selector"], d["selector_params"])
        val = c.number(
            "validation_fraction", d["validation_fraction"], 0, 1, open_lo=True, open_hi=True
        )
        test = c.number("test_fraction", d["test_fraction"], 0, 1, open_lo=True, open_hi=True)
        privacy = PrivacyPolicy.from_dict(d["privacy"], source)
        c.boolean("report_metrics", d["report_metrics"])
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
        )

    @classmethod
    def load(cls, path, override: Path | None = None) -> SiteConfig:
        """Load a site file; a site-owned ``override`` file may set the :data:`OVERRIDE_KEYS`."""
        path = Path(path)
        data = _read_yaml(path)
        config = cls.from_dict(data, str(path), base_dir=path.parent)
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

    # ------------------------------------------------------------- privacy
    def privacy_policy(self) -> PrivacyPolicy:
        """The policy this site applies: the stricter of its own file's and the job's.

        :func:`~fedforest.federation.privacy.effective_policy` of
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
            if name == self.target:
                continue
            kind = column_kind(frame[name], name in self.categorical)
            (numeric if kind == "numeric" else categorical).append(str(name))
        return numeric, categorical

    def check_privacy(self, frame: pd.DataFrame, complete: bool = True) -> PrivacyPolicy:
        """Check the privacy policy against this site's table; return the policy checked.

        With ``complete`` (when the site starts) the effective policy
        (:meth:`privacy_policy`) must be applicable as it stands: a threshold
        grid with a rule for every numeric column and none for a categorical
        one, a public range for every numeric column in DP mode
        (:meth:`~fedforest.federation.privacy.PrivacyPolicy.check_features`).
        Without it (when the job is built, before the hospital's own file is
        known) only the job's block is checked, and only for what the
        hospital's file cannot repair: a grid naming a categorical column.
        Either way ``2 * min_leaf_rows`` may not exceed the site's training
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
        policy.check_features(numeric if complete else [], categorical)
        k = policy.min_leaf_rows
        n_train = split_sizes(len(frame), self.validation_fraction, self.test_fraction)[0]
        if 2 * k > n_train:
            _Checker(policy.source).fail(
                "privacy.min_leaf_rows",
                k,
                f"at most {n_train // 2} for site {self.site!r}: {self.source} gives {n_train} "
                f"training rows ({len(frame)} rows minus validation_fraction "
                f"{self.validation_fraction} and test_fraction {self.test_fraction}), and a "
                "split needs min_leaf_rows rows on each side",
            )
        return policy

    # ------------------------------------------------------------- the data file
    def check_data(self) -> list[str]:
        """Check the data file as a whole (see :meth:`read_table`); return its global columns.

        Besides the rules of :meth:`read_table`, the target must hold at least
        two classes (when the site runs, the server drops a site with a single
        class instead, naming it), and the ``privacy`` block of this file must
        fit the table (:meth:`check_privacy` without ``complete``).

        Raises
        ------
        ConfigError
            If the file is missing or unreadable, breaks a rule of
            :meth:`read_table`, the target, categorical, renamed or dropped
            columns are not in it, or the privacy block does not fit it.
        """
        frame = self.read_table()
        classes = class_labels(frame[self.target])
        if len(classes) < 2:
            self._data_error(
                f"target column {self.target!r} has a single class {classes}"
                + (" after label_map" if self.label_map else ""),
                "a target with at least two classes",
            )
        self.check_privacy(frame, complete=False)
        return list(frame.columns)

    def read_table(self) -> pd.DataFrame:
        """Read the data file after checking it; the table the site works on.

        The file must be UTF-8 text (a byte-order mark is fine) whose rows all
        have as many fields as the header, with distinct column names.
        ``drop_columns`` are never parsed; then :meth:`check_table` applies.

        Returns
        -------
        DataFrame
            The table with global column names and ``label_map`` applied to
            the target column.

        Raises
        ------
        ConfigError
            Naming this YAML, the data file, the line or column, the bad
            value and what is allowed.
        """
        path = Path(self.data_path)
        if not path.is_file():
            raise ConfigError(
                f"{self.source}: key 'data_path' is {self.data_path!r}; "
                "allowed: a path to an existing CSV file (file not found)"
            )
        text, header, lines = _read_csv_text(path, self._data_error)
        names = [h if h.strip() else f"Unnamed: {i}" for i, h in enumerate(header)]
        _check_distinct(names, self._data_error)
        self._check_drop_columns(names)
        keep = [i for i, name in enumerate(names) if name not in self.drop_columns]
        try:
            frame = pd.read_csv(io.StringIO(text), usecols=keep, low_memory=False)
        except Exception as err:  # noqa: BLE001 - any parse error is reported the same way
            raise ConfigError(
                f"{self.source}: data file {path} cannot be read as CSV: {err}"
            ) from err
        frame.columns = [names[i] for i in keep]
        if len(frame) != len(lines):  # the two readers disagree on a row: show row numbers
            lines = None
        frame = self.check_table(frame, lines=lines, from_file=True)
        _remember(self, ([str(x) for x in frame.columns], len(frame)))
        return frame

    def summary(self) -> tuple[list[str], int]:
        """The checked table's global columns and row count (the file is read again only
        when it or this configuration changed since it was last checked)."""
        cached = _recall(self)
        if cached is None:
            frame = self.read_table()
            cached = ([str(x) for x in frame.columns], len(frame))
        return list(cached[0]), cached[1]

    def check_table(
        self, frame: pd.DataFrame, lines: Sequence[int] | None = None, from_file: bool = False
    ) -> pd.DataFrame:
        """Check a table read from the data file (or given in memory); return it ready.

        Drops ``drop_columns``, renames to global names, checks the rules of
        the module docstring and applies ``label_map`` to the target.
        ``from_file`` means :meth:`read_table` read ``frame`` from the data
        file (the dropped columns were never parsed) and ``lines`` gives each
        row's line number there, for the messages. The value rule against
        index-like columns (0..n-1 or 1..n in row order) applies to data files
        only: a table built in memory has no saved index.

        Raises
        ------
        ConfigError
            Naming this YAML, the data file, the column (and line), the bad
            value and what is allowed.
        """
        c = _Checker(self.source)
        names = [str(col) for col in frame.columns]
        frame = frame.set_axis(names, axis=1)
        if not from_file:
            _check_distinct(names, self._data_error)
            self._check_drop_columns(names)
            frame = frame.drop(columns=[n for n in names if n in self.drop_columns])
        header = list(frame.columns)
        for local in self.renames:
            if local not in header:
                c.fail(f"renames.{local}", local, "a column of the data file: " + ", ".join(header))
        columns = [self.renames.get(h, h) for h in header]
        for local, name in self.renames.items():
            if columns.count(name) > 1:
                c.fail(
                    f"renames.{local}",
                    name,
                    "a global name no other column of the data file has: " + ", ".join(columns),
                )
        if self.target not in columns:
            c.fail("target", self.target, "a column of the data file: " + ", ".join(columns))
        for col in self.categorical:
            if col not in columns:
                c.fail("categorical", col, "columns of the data file: " + ", ".join(columns))
        frame = frame.set_axis(columns, axis=1)
        for local, name in zip(header, columns, strict=True):
            self._check_name(local, name)
        if len(frame) < MIN_ROWS:
            self._data_error(
                f"has {len(frame)} rows; at least {MIN_ROWS} are needed to train, validate and "
                "test",
                f"a table of at least {MIN_ROWS} rows",
            )
        for local, name in zip(header, columns, strict=True):
            checked = self._check_values(frame[name], local, name, lines, from_file)
            if checked is not frame[name]:
                frame[name] = checked
        return self._apply_label_map(frame, lines)

    def _data_error(self, what: str, allowed: str) -> NoReturn:
        raise ConfigError(f"{self.source}: data file {self.data_path}: {what}; allowed: {allowed}")

    def _check_drop_columns(self, names: Sequence[str]) -> None:
        for name in self.drop_columns:
            if name not in names:
                _Checker(self.source).fail(
                    "drop_columns", name, "columns of the data file: " + ", ".join(names)
                )

    def _check_name(self, local: str, name: str) -> None:
        """A column name that is no saved index and has no stray spaces."""
        what = f"column {local!r}" + (f" (renamed to {name!r})" if name != local else "")
        if UNNAMED.fullmatch(name):
            self._data_error(
                f"{what} has no name in the header, like a saved pandas index (or a trailing "
                "comma)",
                f"named feature columns: drop it with drop_columns: [{local!r}] in "
                f"{self.source} (or save the file with index=False), or name it with renames",
            )
        if name != name.strip():
            self._data_error(
                f"{what} has spaces around its name, so it would not match {name.strip()!r} at "
                "other sites",
                f"names without surrounding spaces: rename it with renames: "
                f"{{{local!r}: {name.strip()!r}}}",
            )

    def _check_values(
        self,
        series: pd.Series,
        local: str,
        name: str,
        lines: Sequence[int] | None,
        from_file: bool = True,
    ) -> pd.Series:
        """The rules on a column's values (index-like, float32 range, stray text, levels).

        Returns the column, as numbers when pandas kept numbers it could not hold
        as integers (more than 19 digits) as text.
        """
        what = f"column {local!r}" + (f" (renamed to {name!r})" if name != local else "")
        numeric = pd.api.types.is_numeric_dtype(series.dtype) and series.dtype != bool
        if not numeric and series.dtype != bool and name != self.target:
            numbers = pd.to_numeric(series, errors="coerce")
            text = series.notna() & numbers.isna()
            n_values = int(series.notna().sum())
            if from_file and n_values and not text.any():
                # numbers pandas kept as text because they do not fit an integer (20+ digits)
                series, numeric = numbers, True
            elif name not in self.categorical and text.sum() * 2 < n_values:
                examples = sorted(set(series[text].astype(str)))[:5]
                self._data_error(
                    f"{what} holds numbers but also {int(text.sum())} text value(s) such as "
                    f"{examples} ({_where(series, text, lines)})",
                    "numbers only, with an empty field for a missing value (or list the "
                    "column under categorical if it is a category)",
                )
        if numeric:
            values = series.to_numpy(dtype=np.float64, na_value=np.nan)
            too_big = ~np.isnan(values) & ~(np.abs(values) <= FLOAT32_MAX)
            if too_big.any():
                bad = float(values[too_big][0])
                self._data_error(
                    f"{what} holds {bad!r} ({_where(series, too_big, lines)}), whose magnitude "
                    "overflows float32, the type trees split on",
                    f"finite numbers of magnitude at most {FLOAT32_MAX:.7g} (check the unit "
                    "or the value)",
                )
            n = len(values)
            if from_file and n and not np.isnan(values).any():
                for start in (0, 1):
                    if np.array_equal(values, np.arange(start, start + n)):
                        self._data_error(
                            f"{what} holds exactly {start}..{start + n - 1} in row order, like a "
                            "row index or record number",
                            f"feature columns only: drop it with drop_columns: [{local!r}] in "
                            f"{self.source}",
                        )
        if name != self.target and column_kind(series, name in self.categorical) == "categorical":
            n_levels = int(as_level_strings(series).nunique(dropna=True))
            if n_levels > MAX_LEVELS:
                self._data_error(
                    f"{what} has {n_levels} distinct values, more than MAX_LEVELS = "
                    f"{MAX_LEVELS}: it is free text or an identifier, not a category",
                    f"categorical columns of at most {MAX_LEVELS} levels: drop it with "
                    f"drop_columns: [{local!r}] in {self.source}",
                )
        return series

    def _apply_label_map(self, frame: pd.DataFrame, lines: Sequence[int] | None) -> pd.DataFrame:
        """Check the target holds class labels; map them with ``label_map``."""
        c = _Checker(self.source)
        y = frame[self.target]
        what = f"target column {self.target!r}"
        missing = y.isna()
        if missing.any():
            self._data_error(
                f"{what} has {int(missing.sum())} missing value(s) ({_where(y, missing, lines)})",
                "a class label on every row (remove the unlabelled rows)",
            )
        if pd.api.types.is_float_dtype(y.dtype):
            fractional = y.to_numpy() != np.round(y.to_numpy())
            if fractional.any():
                self._data_error(
                    f"{what} holds non-integer numbers such as {float(y[fractional].iloc[0])!r} "
                    f"({_where(y, pd.Series(fractional, index=y.index), lines)}): a measurement, "
                    "not a class label",
                    "class labels (integers or text): is 'target' the right column?",
                )
        labels = normalize_labels(y)
        present = sorted(set(labels.tolist()))
        lookup = {str(k): v for k, v in self.label_map.items()}
        for key in self.label_map:
            if str(key) not in {str(v) for v in present}:
                c.fail(
                    f"label_map.{key}",
                    key,
                    f"labels of the target column {self.target!r}: "
                    + ", ".join(map(repr, present)),
                )
        mapped = [lookup.get(str(v), v) for v in labels.tolist()]
        kinds = {type(v).__name__ for v in mapped}
        if len(kinds) > 1:
            c.fail(
                "label_map",
                self.label_map,
                "global labels of one type (all integers or all text); the target's labels "
                f"after mapping are {sorted(set(mapped), key=lambda v: (isinstance(v, str), v))}",
            )
        frame = frame.copy()
        frame[self.target] = pd.Series(mapped, index=frame.index)
        return frame


# --------------------------------------------------------------------------- table helpers
#: The fewest rows a site needs to train, validate and test.
MIN_ROWS = 10
#: Trees split on float32 values; a larger magnitude becomes infinite.
FLOAT32_MAX = float(np.finfo(np.float32).max)
#: How pandas names a column with an empty header field (a saved index).
UNNAMED = re.compile(r"Unnamed: \d+(_level_\d+)?")
_BOM = b"\xef\xbb\xbf"


#: Global columns and row count of checked tables, by config and file state.
_SUMMARIES: dict[tuple, tuple[list[str], int]] = {}


def _file_state(config: SiteConfig) -> tuple:
    stat = Path(config.data_path).stat()
    return (repr(dataclasses.astuple(config)), stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _remember(config: SiteConfig, summary: tuple[list[str], int]) -> tuple[list[str], int]:
    if Path(config.data_path).is_file():
        if len(_SUMMARIES) >= 256:
            _SUMMARIES.clear()
        _SUMMARIES[_file_state(config)] = summary
    return summary


def _recall(config: SiteConfig) -> tuple[list[str], int] | None:
    return _SUMMARIES.get(_file_state(config))


def _read_csv_text(path: Path, fail) -> tuple[str, list[str], list[int]]:
    """The file's text, its header and each data row's line number.

    Refuses bytes that are not UTF-8 (or NUL bytes) and rows whose number of
    fields differs from the header's, naming the line; blank lines are
    skipped, as pandas does.
    """
    raw = path.read_bytes()
    if raw.startswith(_BOM):
        raw = raw[len(_BOM) :]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        fail(
            f"line {line} holds the byte(s) {raw[err.start : err.end]!r}, which are not UTF-8 text",
            "UTF-8 text: save the file as UTF-8 (e.g. 'CSV UTF-8' in a spreadsheet program)",
        )
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        fail(
            f"line {line} holds a NUL byte (a UTF-16 or binary file?)",
            "UTF-8 text: save the file as UTF-8 CSV",
        )
    reader = csv.reader(io.StringIO(text, newline=""))
    header: list[str] | None = None
    lines: list[int] = []
    previous = 0
    try:
        for row in reader:
            start, previous = previous + 1, reader.line_num
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # a blank line
            if header is None:
                header = row
            elif len(row) != len(header):
                fail(
                    f"line {start} has {len(row)} field(s) but the header has {len(header)}",
                    f"exactly {len(header)} comma-separated fields on every row (a stray or "
                    "unquoted comma? quote values that hold commas)",
                )
            else:
                lines.append(start)
    except csv.Error as err:
        fail(f"line {previous + 1} cannot be read as CSV ({err})", "a comma-separated file")
    if header is not None and len(header) == 1:
        sep = next((s for s in (";", "\t", "|") if s in header[0]), None)
        if sep is not None:
            fail(
                f"the header is a single column {header[0]!r}: the fields seem separated by "
                f"{sep!r}",
                "a comma-separated file (save it as CSV with commas)",
            )
    if header is None:
        fail(
            "cannot be read as CSV: the file is empty (no header line)",
            "a header line of column names",
        )
    return text, header, lines


def _check_distinct(names: Sequence[str], fail) -> None:
    seen: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        seen.setdefault(name, []).append(i + 1)
    for name, fields in seen.items():
        if len(fields) > 1:
            fail(
                f"column {name!r} appears {len(fields)} times in the header (fields "
                f"{', '.join(map(str, fields))}); pandas would silently read the second as "
                f"{name + '.1'!r}",
                "distinct column names: rename or remove the duplicate in the file",
            )


def _where(series: pd.Series, bad, lines: Sequence[int] | None) -> str:
    """Where the first flagged value of ``series`` is: its line in the file, or its row."""
    position = int(np.flatnonzero(np.asarray(bad, dtype=bool))[0])
    if lines is not None:
        return f"line {lines[position]}"
    return f"row {position + 1}"


def _scalar_label(value: Any) -> Any:
    """A label_map key or value as a plain label (int or str), or None if it is not one."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, float) and math.isfinite(value) and value == round(value):
        return int(value)
    if isinstance(value, str) and value.strip():
        return value
    return None


def _check_label_map(c: ConfigChecker, label_map: Any) -> dict:
    allowed = (
        "a mapping of local class label to global label, each a string or an integer "
        "(quote yes, no, true, false and null: YAML reads them as booleans or null)"
    )
    if not isinstance(label_map, Mapping):
        c.fail("label_map", label_map, allowed)
    out: dict = {}
    for key, value in label_map.items():
        k, v = _scalar_label(key), _scalar_label(value)
        if k is None:
            c.fail("label_map", key, allowed)
        if v is None:
            c.fail(f"label_map.{key}", value, allowed)
        if str(k) in {str(x) for x in out}:
            c.fail("label_map", label_map, "a mapping with one entry per local label")
        out[k] = v
    return out


def _check_selector_params(c: ConfigChecker, selector: str, params: Mapping) -> None:
    """The selector's own validation, reported as ``selector_params.<key>``."""
    from .selectors import SelectorParamError, check_params

    try:
        check_params(selector, params)
    except SelectorParamError as err:
        c.fail(f"selector_params.{err.key}", err.value, err.allowed)


# --------------------------------------------------------------------------- job x sites
def split_sizes(n_rows: int, validation_fraction: float, test_fraction: float):
    """(training, validation, test) rows of a site of ``n_rows`` rows, as the job splits them.

    The test rows are split off first, then the validation rows (scikit-learn's
    ``train_test_split`` rounds the held-out count up).
    """
    n_test = math.ceil(test_fraction * n_rows)
    rest = n_rows - n_test
    n_val = math.ceil(validation_fraction / (1 - test_fraction) * rest)
    return rest - n_val, n_val, n_test


def check_job_against_sites(
    job: JobConfig,
    sites: Mapping[str, SiteConfig],
    tables: Mapping[str, pd.DataFrame] | None = None,
) -> None:
    """Check the job's settings against the sites' data files.

    Checked for every site whose table is given or whose data file exists:

    * ``forest.min_samples_leaf``: a split needs that many training rows on
      each side, so ``2 * min_samples_leaf`` must not exceed the site's
      training rows (else every tree is a single leaf);
    * an integer ``forest.max_features``: at most the site's feature columns.

    When the columns of every site of ``job.sites`` are known,
    ``election.always_keep`` must name feature columns of at least one site
    (global names, after renames and ``drop_columns``).

    Parameters
    ----------
    job : JobConfig
    sites : mapping of site name to SiteConfig
        All the job's sites (at build time) or one site (when it starts).
    tables : mapping of site name to DataFrame, optional
        Tables already read (:meth:`SiteConfig.read_table`); the others are
        read from their data files when these exist.

    Raises
    ------
    ConfigError
        Naming the job file, the key, the bad value, the site file and what
        is allowed.
    """
    c = _Checker(job.source)
    summaries: dict[str, tuple[list[str], int]] = {}
    for name, site in sorted(sites.items()):
        if tables is not None and name in tables:
            frame = tables[name]
            summaries[name] = ([str(x) for x in frame.columns], len(frame))
        elif Path(site.data_path).is_file():
            summaries[name] = site.summary()
    leaf = job.forest["min_samples_leaf"]
    max_features = job.forest["max_features"]
    for name, (columns, n_rows) in summaries.items():
        site = sites[name]
        n_train = split_sizes(n_rows, site.validation_fraction, site.test_fraction)[0]
        if 2 * leaf > n_train:
            c.fail(
                "forest.min_samples_leaf",
                leaf,
                f"at most {n_train // 2} for site {name!r}: {site.source} gives {n_train} "
                f"training rows ({n_rows} rows minus validation_fraction "
                f"{site.validation_fraction} and test_fraction {site.test_fraction}), and a "
                "split needs min_samples_leaf rows on each side, so a larger value grows "
                "one-leaf trees",
            )
        n_features = len(columns) - 1
        if isinstance(max_features, int) and max_features > n_features:
            c.fail(
                "forest.max_features",
                max_features,
                f"at most {n_features}, the feature columns of site {name!r} ({site.source}), "
                "or a fraction in (0, 1], sqrt, log2 or null",
            )
    if set(job.sites) <= set(summaries):
        known = sorted(
            {col for name in job.sites for col in summaries[name][0] if col != sites[name].target}
        )
        for feature in job.election["always_keep"]:
            if feature not in known:
                c.fail(
                    "election.always_keep",
                    feature,
                    "feature columns of at least one site's data file (global names, after "
                    "renames and drop_columns): " + ", ".join(known),
                )
