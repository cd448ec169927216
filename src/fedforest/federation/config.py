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
    evaluation:
      strategies: [fpv, pr, mi, ipr, mp, ss, park, local, intersection, auto]
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
      always_keep: []
      metric: auprc

A site file (``site_configs/site-1.yaml``)::

    site: site-1
    data_path: ../demo_data/site-1.csv     # relative to this file
    target: outcome
    categorical: [smoker]                  # integer-coded categorical columns
    renames: {glucose_mg_dl: glucose}      # local column name -> global name
    selector: lasso
    selector_params: {}
    validation_fraction: 0.2
    test_fraction: 0.25

A hospital can keep its data path from the server: a file ``fedforest.yaml``
in the site's FLARE ``local/`` folder holding ``data_path: /secure/path.csv``
takes precedence over the job's value.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from ..validation import ConfigChecker
from ..vocabulary import AGGREGATIONS, JOB_STRATEGIES, METRICS, PHASES, SELECTORS, VOTING

LOCAL_OVERRIDE = "fedforest.yaml"

JOB_DEFAULTS: dict[str, Any] = {
    "job": {
        "name": "fedforest",
        "sites": None,
        "min_sites": None,
        "seed": 0,
        "timeouts": {"schema": 120, "election": 300, "train": 900, "evaluate": 600},
        "wait_after_min": None,
    },
    "evaluation": {
        "strategies": ["fpv", "pr", "mi", "ipr", "mp", "ss", "park", "local", "intersection"],
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
    "selector": "random_forest",
    "selector_params": {},
    "validation_fraction": 0.2,
    "test_fraction": 0.25,
}


#: Largest seed: scikit-learn and numpy take seeds in [0, 2**32 - 1].
MAX_SEED = 2**32 - 1
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
                and key not in ("renames", "selector_params")
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
            source=source,
        )

    @classmethod
    def load(cls, path) -> JobConfig:
        path = Path(path)
        return cls.from_dict(_read_yaml(path), str(path))


@dataclass
class SiteConfig:
    """The validated configuration of one hospital (see the module docstring)."""

    site: str
    data_path: str
    target: str
    categorical: list[str] = field(default_factory=list)
    renames: dict[str, str] = field(default_factory=dict)
    selector: str = "random_forest"
    selector_params: dict[str, Any] = field(default_factory=dict)
    validation_fraction: float = 0.2
    test_fraction: float = 0.25
    source: str = "site.yaml"

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
        c.choice("selector", d["selector"], SELECTORS)
        if not isinstance(d["selector_params"], Mapping):
            c.fail("selector_params", d["selector_params"], "a mapping of parameter to value")
        val = c.number(
            "validation_fraction", d["validation_fraction"], 0, 1, open_lo=True, open_hi=True
        )
        test = c.number("test_fraction", d["test_fraction"], 0, 1, open_lo=True, open_hi=True)
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
            selector=d["selector"],
            selector_params=dict(d["selector_params"]),
            validation_fraction=val,
            test_fraction=test,
            source=source,
        )

    @classmethod
    def load(cls, path, override: Path | None = None) -> SiteConfig:
        """Load a site file; a site-owned ``override`` file may replace ``data_path``."""
        path = Path(path)
        data = _read_yaml(path)
        config = cls.from_dict(data, str(path), base_dir=path.parent)
        if override is not None and Path(override).is_file():
            config = config.with_override(Path(override))
        return config

    def with_override(self, path: Path) -> SiteConfig:
        """Apply the site-owned file (only ``data_path`` may be set there)."""
        data = _read_yaml(path) or {}
        c = _Checker(str(path))
        if not isinstance(data, Mapping):
            c.fail("(top level)", data, "a mapping with the key data_path")
        unknown = [k for k in data if k != "data_path"]
        if unknown:
            c.fail(unknown[0], data[unknown[0]], "only data_path may be set in the site's own file")
        if "data_path" in data:
            c.string("data_path", data["data_path"])
            p = Path(data["data_path"]).expanduser()
            if not p.is_absolute():
                p = (path.parent / p).resolve()
            return SiteConfig(
                **{
                    **self.__dict__,
                    "data_path": str(p),
                    "source": f"{self.source} (data_path from {path})",
                }
            )
        return self

    def check_data(self) -> list[str]:
        """Check the data file and its columns; return the table's columns.

        Raises
        ------
        ConfigError
            If the file is missing or unreadable, or the target, categorical or
            renamed columns are not in it.
        """
        path = Path(self.data_path)
        if not path.is_file():
            raise ConfigError(
                f"{self.source}: key 'data_path' is {self.data_path!r}; "
                "allowed: a path to an existing CSV file (file not found)"
            )
        import pandas as pd

        try:
            header = list(pd.read_csv(path, nrows=0).columns)
        except Exception as err:  # noqa: BLE001 - any parse error is reported the same way
            raise ConfigError(
                f"{self.source}: data file {path} cannot be read as CSV: {err}"
            ) from err
        c = _Checker(self.source)
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
        return columns
