"""A hospital-owned privacy policy, applied to what leaves a site.

A site sends the server its schema (column names, category levels, classes,
row count) and its models (trees, surrogate splits, imputers, per-feature std,
the intersection forest). Plain scikit-learn trees disclose more than people
expect: a threshold is the midpoint of two training values, a leaf may describe
a single patient, and a rare category level may identify one. A
:class:`PrivacyPolicy` says what the hospital accepts to send. The transforms
below apply it to the outgoing :class:`~fedforest.model.forest.PooledForest`.
They are pure functions: they return a new forest and never change their
input. The measurements at the end say how much a forest still discloses.

The ``privacy:`` block (in a site's YAML, in the site's own ``local/`` file, or
in ``job.yaml``). Every key is optional, and the defaults change nothing::

    privacy:
      min_leaf_rows: 5            # k: no node sent describes fewer than k training rows
      min_level_rows: 5           # levels with fewer rows at the site are sent as "(other)"
      threshold_grid:             # null: thresholds are sent as trained
        step: 0.5                 # default for numeric features: multiples of 0.5
        # significant_digits: 2   # ... or: thresholds rounded to 2 significant digits
        steps: {age: 1, bmi: 0.5} # per-feature steps (override the default)
        edges: {hba1c: [5.7, 6.5, 8.0]}   # public cut points (override the default)
      count_noise_epsilon: null   # Laplace(1/eps) noise on leaf class counts
      share: {imputers: true, feature_std: true, surrogates: true, intersection: true}
      dp_epsilon: null            # differentially private random trees instead of the forest
      dp_trees: null              # trees in DP mode (null: DEFAULT_DP_TREES = 10)
      dp_max_depth: null          # depth in DP mode (null: DEFAULT_DP_MAX_DEPTH = 4)
      feature_ranges: {age: [0, 120], bmi: [10, 70]}   # public ranges (DP mode)

**Which policy applies.** :func:`effective_policy` combines the hospital's
policy with the job's, key by key, so that a job can tighten a hospital's
policy but never loosen it: the larger ``min_leaf_rows`` and
``min_level_rows``, the smaller ``count_noise_epsilon`` and ``dp_epsilon``
(``null`` counts as infinity), and a ``share`` switch stays on only if both
have it on. Two threshold grids are combined feature by feature: equal rules
stay, otherwise the coarser one wins when its points are a subset of the
other's (a step that is an integer multiple of the other step, fewer
significant digits, edges that all lie on the other rule). Any other
disagreement is refused with a :class:`~fedforest.errors.ConfigError` naming
both files, because "coarser" is not defined between, say, a step of 0.3 and
a step of 0.5. The keys that do not change the guarantee (``dp_trees``,
``dp_max_depth``, ``feature_ranges``) come from the job when it sets them,
otherwise from the site.

**The order of the transforms** (:func:`prepare_forest`, for one forest):

1. surrogate splits are removed when ``share.surrogates`` is false;
2. ``threshold_grid``: :func:`snap_thresholds` snaps every threshold (split
   and surrogate) to the grid, re-routes the site's training rows and
   recomputes the node counts and class distributions;
3. ``count_noise_epsilon``: the counts are first made plain row counts
   (:func:`recount`, each in-bag row once), so that one row changes one count
   of a tree by one;
4. ``min_leaf_rows``: :func:`enforce_min_leaf_rows` on the true counts;
5. ``count_noise_epsilon``: :func:`add_count_noise`;
6. ``min_leaf_rows`` again, on the noisy counts, so that no count sent is
   below k either (post-processing: it uses nothing but the noisy counts).

In DP mode (``dp_epsilon``) the site sends :func:`fit_dp_forest` trees instead
(pruned by ``min_leaf_rows`` on their noisy counts, which keeps the guarantee),
and imputers, std and surrogates are never shared (they are computed from the
rows without noise). The intersection forest, when shared, is a second DP
forest; :func:`dp_budget` splits ``dp_epsilon`` between the two.

**What is protected, and what is not.**

* ``min_leaf_rows`` and ``min_level_rows`` are k-anonymity-style thresholds.
  They are no formal guarantee: differencing two releases, or combining a
  leaf with the other sites' trees, can still isolate rows.
* ``threshold_grid`` removes the training values that thresholds are made of.
  Which grid point a split uses, and the tree structure, still depend on the
  rows.
* ``count_noise_epsilon`` protects the **counts** only (class distributions
  and ``n_node_samples``). The tree structure (which features, which
  thresholds, where the tree stops) is chosen from the data without noise, so
  the forest as a whole is **not** differentially private.
* ``dp_epsilon`` is the only formal guarantee, and it covers the trees of the
  forest (and of the intersection forest) only: the schema (levels, classes,
  row count), the election phase (votes, mask scores) and the evaluation
  metrics are sent without noise. See :func:`fit_dp_forest` for the exact
  statement.

The noise of :func:`add_count_noise` and :func:`fit_dp_forest` must be secret:
by default it comes from the operating system's entropy. Never seed it with
the job's seed (the server knows it and could subtract the noise); tests are
the only callers that pass a seed.

This module is part of the federation layer and imports only numpy, pandas,
scikit-learn and fedforest's lower layers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ConfigError
from ..model.forest import NODE_FIELDS, PooledForest
from ..model.inputs import to_global_matrix
from ..model.payload_checks import MAX_NODE_SAMPLES
from ..validation import ConfigChecker, describe
from .schema import as_level_strings, class_labels, column_kind

#: The level that rare levels are sent as (see :func:`hide_levels`).
OTHER_LEVEL = "(other)"
#: The parts of a site's reply that ``share`` switches on and off.
SHARE_KEYS = ("imputers", "feature_std", "surrogates", "intersection")
#: Parts that are never shared in DP mode (they are computed without noise).
NOT_DP = ("imputers", "feature_std", "surrogates")
#: Trees and depth of a DP forest when the policy does not set them.
DEFAULT_DP_TREES = 10
DEFAULT_DP_MAX_DEPTH = 4
#: Largest DP tree depth (a full tree of depth d has 2**(d + 1) - 1 nodes).
MAX_DP_DEPTH = 16
#: Largest number of significant digits of a threshold grid.
MAX_DIGITS = 15
#: Bound on the (tree, row) pairs routed at once.
MAX_PAIRS = 1 << 18

_KEYS = (
    "min_leaf_rows",
    "threshold_grid",
    "count_noise_epsilon",
    "min_level_rows",
    "share",
    "dp_epsilon",
    "dp_trees",
    "dp_max_depth",
    "feature_ranges",
)
_GRID_KEYS = ("step", "significant_digits", "steps", "edges")

# node actions of _rebuild
_KEEP, _LEAF, _TO_LEFT, _TO_RIGHT = 0, 1, 2, 3


# =========================================================================== grid
Rule = tuple  # ("step", float) | ("digits", int) | ("edges", tuple[float, ...])


def _rule_text(rule: Rule | None) -> str:
    if rule is None:
        return "no grid (thresholds as trained)"
    kind, p = rule
    if kind == "step":
        return f"step {p:g}"
    if kind == "digits":
        return f"{p} significant digits"
    return f"edges {list(p)}"


def _is_multiple(a: float, b: float) -> bool:
    """Whether ``a`` is an integer multiple of ``b`` (both > 0)."""
    r = a / b
    return round(r) >= 1 and abs(r - round(r)) <= 1e-9 * max(1.0, abs(r))


def _round_digits(values: np.ndarray, digits: int) -> np.ndarray:
    return np.array([float(f"{v:.{digits - 1}e}") for v in np.asarray(values, float)])


def _snap_rule(rule: Rule, t: np.ndarray) -> np.ndarray:
    kind, p = rule
    t = np.asarray(t, dtype=np.float64)
    if kind == "step":
        return np.round(t / p) * p
    if kind == "digits":
        return _round_digits(t, p)
    edges = np.asarray(p, dtype=np.float64)
    i = np.clip(np.searchsorted(edges, t), 1, edges.size - 1) if edges.size > 1 else None
    if i is None:
        return np.full(t.shape, edges[0])
    lo, hi = edges[i - 1], edges[i]
    return np.where(np.abs(t - lo) <= np.abs(hi - t), lo, hi)


def _on_rule(rule: Rule | None, t: np.ndarray) -> np.ndarray:
    """Which values of ``t`` are points of ``rule`` (every value for ``None``)."""
    t = np.asarray(t, dtype=np.float64)
    if rule is None:
        return np.ones(t.shape, bool)
    kind, p = rule
    if kind == "step":
        r = t / p
        return np.abs(r - np.round(r)) <= 1e-9 * np.maximum(1.0, np.abs(r))
    if kind == "digits":
        return _round_digits(t, p) == t
    return np.isin(t, np.asarray(p, dtype=np.float64))


def _subset(a: Rule | None, b: Rule | None) -> bool:
    """Whether every point of rule ``a`` is a point of rule ``b`` (``None``: all reals)."""
    if b is None:
        return True
    if a is None:
        return False
    if a[0] == "edges":
        return bool(_on_rule(b, np.asarray(a[1])).all())
    if a[0] == b[0] == "step":
        return _is_multiple(a[1], b[1])
    if a[0] == b[0] == "digits":
        return a[1] <= b[1]
    return False


@dataclass(frozen=True)
class ThresholdGrid:
    """Public points that thresholds are snapped to.

    Attributes
    ----------
    default : tuple or None
        The rule of every numeric feature not in ``features``: ``("step", s)``
        (the multiples of ``s``), ``("digits", n)`` (numbers with ``n``
        significant digits), or ``None`` (no default: a numeric feature not in
        ``features`` is refused by :func:`snap_thresholds`, because its
        thresholds would be sent as trained).
    features : dict of str to tuple
        Per-feature rules: ``("step", s)`` or ``("edges", (e1, e2, ...))``
        (the edges themselves, strictly increasing).

    Thresholds are snapped to the nearest point (ties: the lower edge; for a
    step, ``numpy.round``). Categorical features always use the half-integer
    cuts between level codes and may not appear in a grid.
    """

    default: Rule | None = None
    features: Mapping[str, Rule] = field(default_factory=dict)

    def rule(self, feature: str) -> Rule | None:
        """The rule that applies to ``feature``."""
        return self.features.get(feature, self.default)

    def snap(self, feature: str, values) -> np.ndarray:
        """``values`` snapped to the grid of ``feature`` (a ``ValueError`` if it has none)."""
        rule = self.rule(feature)
        if rule is None:
            raise ValueError(f"the threshold grid has no rule for numeric feature {feature!r}")
        return _snap_rule(rule, values)

    def on_grid(self, feature: str, values) -> np.ndarray:
        """Which ``values`` are points of the grid of ``feature``."""
        rule = self.rule(feature)
        if rule is None:
            return np.zeros(np.shape(values), bool)
        return _on_rule(rule, values)

    def uncovered(self, features: Sequence[str]) -> list[str]:
        """The ``features`` that no rule covers."""
        return [f for f in features if self.rule(f) is None]

    def to_dict(self) -> dict:
        """The YAML shape (``step`` or ``significant_digits``, ``steps``, ``edges``)."""
        out: dict[str, Any] = {}
        if self.default is not None:
            out["step" if self.default[0] == "step" else "significant_digits"] = self.default[1]
        steps = {f: r[1] for f, r in sorted(self.features.items()) if r[0] == "step"}
        edges = {f: list(r[1]) for f, r in sorted(self.features.items()) if r[0] == "edges"}
        if steps:
            out["steps"] = steps
        if edges:
            out["edges"] = edges
        return out

    @classmethod
    def from_dict(
        cls, data: Any, source: str = "job.yaml", key: str = "privacy.threshold_grid"
    ) -> ThresholdGrid:
        """Read the YAML shape; errors name ``source``, the key, the value and what is allowed."""
        c = ConfigChecker(source)
        shape = (
            "a mapping with step (a number > 0) or significant_digits (an integer in "
            f"[1, {MAX_DIGITS}]), and/or steps {{feature: step}} and edges "
            "{feature: [increasing numbers]}"
        )
        if not isinstance(data, Mapping) or not data:
            c.refuse(key, data, shape)
        for k in data:
            if k not in _GRID_KEYS:
                c.refuse(f"{key}.{k}", data[k], "one of the known keys " + ", ".join(_GRID_KEYS))
        default = None
        if data.get("step") is not None and data.get("significant_digits") is not None:
            c.refuse(
                f"{key}.significant_digits",
                data["significant_digits"],
                f"null when {key}.step is set (one default rule at most)",
            )
        if data.get("step") is not None:
            default = ("step", c.number(f"{key}.step", data["step"], 0, open_lo=True))
        elif data.get("significant_digits") is not None:
            n = c.integer(f"{key}.significant_digits", data["significant_digits"], 1, MAX_DIGITS)
            default = ("digits", n)
        features: dict[str, Rule] = {}
        for part in ("steps", "edges"):
            entries = data.get(part)
            if entries is None:
                continue
            if not isinstance(entries, Mapping):
                c.refuse(f"{key}.{part}", entries, "a mapping of feature names to values")
            for name, value in entries.items():
                where = f"{key}.{part}.{name}"
                if not isinstance(name, str) or not name.strip():
                    c.refuse(f"{key}.{part}", entries, "feature names as non-empty strings")
                if name in features:
                    c.refuse(where, value, f"a feature under only one of {key}.steps and .edges")
                if part == "steps":
                    features[name] = ("step", c.number(where, value, 0, open_lo=True))
                else:
                    features[name] = ("edges", _read_edges(c, where, value))
        if default is None and not features:
            c.refuse(key, data, shape)
        return cls(default, features)


def _read_edges(c: ConfigChecker, key: str, value) -> tuple[float, ...]:
    allowed = "a non-empty list of finite, strictly increasing numbers"
    if not isinstance(value, (list, tuple)) or not value:
        c.refuse(key, value, allowed)
    edges = tuple(c.number(key, v) for v in value)
    if any(b <= a for a, b in zip(edges[:-1], edges[1:], strict=True)):
        c.refuse(key, list(value), allowed)
    return edges


def _merge_grids(
    a: ThresholdGrid | None, b: ThresholdGrid | None, source_a: str, source_b: str
) -> ThresholdGrid | None:
    if a is None or b is None:
        return a if b is None else b

    def merge(ra: Rule | None, rb: Rule | None, what: str) -> Rule | None:
        if ra == rb or _subset(ra, rb):
            return ra
        if _subset(rb, ra):
            return rb
        raise ConfigError(
            f"{source_a} and {source_b}: key 'privacy.threshold_grid' disagrees for {what}: "
            f"{_rule_text(ra)} ({source_a}) against {_rule_text(rb)} ({source_b}); allowed: "
            "the same grid, or one whose points are all points of the other (a step that is an "
            "integer multiple of the other step, fewer significant digits, or edges that lie "
            "on the other grid). Make the two files agree"
        )

    default = merge(a.default, b.default, "the numeric features not listed")
    features = {
        f: merge(a.rule(f), b.rule(f), f"feature {f!r}")
        for f in sorted(set(a.features) | set(b.features))
    }
    odd = [f for f, r in features.items() if r is not None and r[0] == "digits"]
    if odd:  # cannot happen: a listed feature's rule is a step or edges on one side
        raise ConfigError(f"{source_a} and {source_b}: cannot combine the grids of {odd}")
    return ThresholdGrid(default, {f: r for f, r in features.items() if r is not None})


# ========================================================================= policy
def _all_shared() -> dict[str, bool]:
    return dict.fromkeys(SHARE_KEYS, True)


@dataclass(frozen=True)
class PrivacyPolicy:
    """What a site accepts to send (see the module docstring for the YAML block).

    The defaults change nothing: :func:`prepare_forest` returns the forest it
    is given, bit for bit.

    Attributes
    ----------
    min_leaf_rows : int
        k >= 1: no node sent describes fewer than k training rows.
    threshold_grid : ThresholdGrid or None
        Public points that thresholds are snapped to.
    count_noise_epsilon : float or None
        Laplace noise of scale 1/epsilon on each leaf class count.
    min_level_rows : int
        Category levels with fewer rows at the site are sent as
        :data:`OTHER_LEVEL` (0: off).
    share : dict of str to bool
        Which optional parts of the reply are sent (:data:`SHARE_KEYS`). In DP
        mode the parts in :data:`NOT_DP` are always off.
    dp_epsilon : float or None
        DP mode: the site sends :func:`fit_dp_forest` trees with this budget.
    dp_trees, dp_max_depth : int or None
        Trees and depth of the DP forest (``None``: the defaults).
    feature_ranges : dict of str to (float, float)
        Public ranges of numeric features, for the thresholds of DP trees.
    source : str
        The file(s) the policy came from, named in error messages (not part
        of the policy: ignored by ``==``).
    """

    min_leaf_rows: int = 1
    threshold_grid: ThresholdGrid | None = None
    count_noise_epsilon: float | None = None
    min_level_rows: int = 0
    share: Mapping[str, bool] = field(default_factory=_all_shared)
    dp_epsilon: float | None = None
    dp_trees: int | None = None
    dp_max_depth: int | None = None
    feature_ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    source: str = field(default="(default policy)", compare=False)

    def __post_init__(self):
        share = {**_all_shared(), **dict(self.share)}
        if self.dp_epsilon is not None:
            share.update(dict.fromkeys(NOT_DP, False))
        object.__setattr__(self, "share", share)
        object.__setattr__(
            self,
            "feature_ranges",
            {f: (float(lo), float(hi)) for f, (lo, hi) in dict(self.feature_ranges).items()},
        )

    # ------------------------------------------------------------- reading
    @classmethod
    def from_dict(
        cls, data: Any, source: str = "job.yaml", prefix: str = "privacy."
    ) -> PrivacyPolicy:
        """Read and validate a ``privacy:`` block (``None``: the default policy).

        Every error is a :class:`~fedforest.errors.ConfigError` naming the file
        (``source``), the key (``prefix`` + key), the bad value and what is
        allowed.
        """
        c = ConfigChecker(source)
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            c.refuse(prefix.rstrip("."), data, "a mapping of privacy keys to values")
        for k in data:
            if k not in _KEYS:
                c.refuse(
                    f"{prefix}{k}",
                    data[k],
                    "one of the known keys " + ", ".join(prefix + key for key in _KEYS),
                )

        def optional_epsilon(key):
            value = data.get(key)
            if value is None:
                return None
            return c.number(prefix + key, value, 0, open_lo=True)

        def optional_int(key, lo, hi):
            value = data.get(key)
            return None if value is None else c.integer(prefix + key, value, lo, hi)

        k = c.integer(prefix + "min_leaf_rows", data.get("min_leaf_rows", 1), 1, MAX_NODE_SAMPLES)
        level_rows = c.integer(prefix + "min_level_rows", data.get("min_level_rows", 0), 0)
        grid = data.get("threshold_grid")
        grid = (
            None
            if grid is None
            else ThresholdGrid.from_dict(grid, source, prefix + "threshold_grid")
        )
        count_eps = optional_epsilon("count_noise_epsilon")
        dp_eps = optional_epsilon("dp_epsilon")
        share_data = data.get("share")
        share = _all_shared()
        if share_data is not None:
            if not isinstance(share_data, Mapping):
                c.refuse(
                    prefix + "share",
                    share_data,
                    "a mapping of " + ", ".join(SHARE_KEYS) + " to true or false",
                )
            for key, value in share_data.items():
                if key not in SHARE_KEYS:
                    c.refuse(
                        f"{prefix}share.{key}",
                        value,
                        "one of the known keys "
                        + ", ".join(f"{prefix}share.{s}" for s in SHARE_KEYS),
                    )
                share[key] = c.boolean(f"{prefix}share.{key}", value)
            if dp_eps is not None:
                for key in NOT_DP:
                    if share_data.get(key) is True:
                        c.refuse(
                            f"{prefix}share.{key}",
                            True,
                            f"false when {prefix}dp_epsilon is set ({key} are computed from the "
                            "rows without noise, so DP mode never sends them)",
                        )
        ranges = data.get("feature_ranges")
        feature_ranges = {}
        if ranges is not None:
            if not isinstance(ranges, Mapping):
                c.refuse(
                    prefix + "feature_ranges", ranges, "a mapping of feature names to [low, high]"
                )
            for name, value in ranges.items():
                where = f"{prefix}feature_ranges.{name}"
                allowed = "a list [low, high] of two finite numbers with low < high"
                if not isinstance(name, str) or not name.strip():
                    c.refuse(
                        prefix + "feature_ranges", ranges, "feature names as non-empty strings"
                    )
                if not isinstance(value, (list, tuple)) or len(value) != 2:
                    c.refuse(where, value, allowed)
                lo, hi = (c.number(where, v) for v in value)
                if not lo < hi:
                    c.refuse(where, list(value), allowed)
                feature_ranges[name] = (lo, hi)
        return cls(
            min_leaf_rows=k,
            threshold_grid=grid,
            count_noise_epsilon=count_eps,
            min_level_rows=level_rows,
            share=share,
            dp_epsilon=dp_eps,
            dp_trees=optional_int("dp_trees", 1, 10_000),
            dp_max_depth=optional_int("dp_max_depth", 1, MAX_DP_DEPTH),
            feature_ranges=feature_ranges,
            source=source,
        )

    def to_dict(self) -> dict:
        """The policy in the YAML shape, for ``results.json`` (``from_dict`` reads it back)."""
        return {
            "min_leaf_rows": int(self.min_leaf_rows),
            "threshold_grid": None
            if self.threshold_grid is None
            else self.threshold_grid.to_dict(),
            "count_noise_epsilon": self.count_noise_epsilon,
            "min_level_rows": int(self.min_level_rows),
            "share": {k: bool(self.share[k]) for k in SHARE_KEYS},
            "dp_epsilon": self.dp_epsilon,
            "dp_trees": self.dp_trees,
            "dp_max_depth": self.dp_max_depth,
            "feature_ranges": {f: [lo, hi] for f, (lo, hi) in sorted(self.feature_ranges.items())},
        }

    # ------------------------------------------------------------- queries
    @property
    def is_default(self) -> bool:
        """Whether the policy changes nothing."""
        return self == PrivacyPolicy()

    @property
    def dp(self) -> bool:
        """Whether the site sends differentially private trees."""
        return self.dp_epsilon is not None

    @property
    def n_dp_trees(self) -> int:
        return DEFAULT_DP_TREES if self.dp_trees is None else int(self.dp_trees)

    @property
    def dp_depth(self) -> int:
        return DEFAULT_DP_MAX_DEPTH if self.dp_max_depth is None else int(self.dp_max_depth)

    def check_features(self, numeric: Sequence[str], categorical: Sequence[str] = ()) -> None:
        """Refuse a policy that cannot be applied to a site with these features.

        Raises a :class:`~fedforest.errors.ConfigError` naming :attr:`source`
        when the threshold grid names a categorical feature, leaves a numeric
        feature without a rule, or when DP mode lacks the range of a numeric
        feature. (Meant for job build and site start: :func:`snap_thresholds`
        and :func:`fit_dp_forest` raise the same problems as ``ValueError``.)
        """
        c = ConfigChecker(self.source)
        grid = self.threshold_grid
        if grid is not None and not self.dp:
            cats = sorted(set(grid.features) & set(categorical))
            if cats:
                c.refuse(
                    "privacy.threshold_grid",
                    cats,
                    "numeric features only (categorical features always use the cuts between "
                    "level codes)",
                )
            missing = grid.uncovered(list(numeric))
            if missing:
                c.refuse(
                    "privacy.threshold_grid",
                    grid.to_dict(),
                    f"a rule for every numeric feature; {missing} have none: add a default "
                    "step or significant_digits, or list them under steps or edges",
                )
        if self.dp:
            missing = [f for f in numeric if f not in self.feature_ranges]
            if missing:
                c.refuse(
                    "privacy.feature_ranges",
                    {f: list(r) for f, r in self.feature_ranges.items()},
                    f"a public [low, high] for every numeric feature in DP mode; missing: {missing}",
                )


def _stricter_epsilon(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return a if b is None else b
    return min(a, b)


def effective_policy(site_policy: PrivacyPolicy, job_policy: PrivacyPolicy) -> PrivacyPolicy:
    """The stricter of the hospital's and the job's policy, key by key.

    ``min_leaf_rows`` and ``min_level_rows``: the larger. ``count_noise_epsilon``
    and ``dp_epsilon``: the smaller (``None`` = infinity, i.e. off). ``share``:
    a part is shared only if both share it. ``threshold_grid``: one unset gives
    the other; otherwise merged feature by feature (equal, or the rule whose
    points are a subset of the other's), and any other disagreement is a
    :class:`~fedforest.errors.ConfigError` naming both files. ``dp_trees``,
    ``dp_max_depth`` and each entry of ``feature_ranges`` (they do not change
    the guarantee): the job's when it sets them, else the site's.

    So a job can tighten a hospital's policy, but never loosen it.
    """
    a, b = site_policy, job_policy
    return PrivacyPolicy(
        min_leaf_rows=max(a.min_leaf_rows, b.min_leaf_rows),
        threshold_grid=_merge_grids(a.threshold_grid, b.threshold_grid, a.source, b.source),
        count_noise_epsilon=_stricter_epsilon(a.count_noise_epsilon, b.count_noise_epsilon),
        min_level_rows=max(a.min_level_rows, b.min_level_rows),
        share={k: bool(a.share[k] and b.share[k]) for k in SHARE_KEYS},
        dp_epsilon=_stricter_epsilon(a.dp_epsilon, b.dp_epsilon),
        dp_trees=b.dp_trees if b.dp_trees is not None else a.dp_trees,
        dp_max_depth=b.dp_max_depth if b.dp_max_depth is not None else a.dp_max_depth,
        feature_ranges={**a.feature_ranges, **b.feature_ranges},
        source=f"{a.source} + {b.source}",
    )


def dp_budget(policy: PrivacyPolicy, intersection: bool) -> dict[str, float]:
    """How DP mode splits ``dp_epsilon`` over the forests a site sends.

    Both forests are trained on the same rows, so their budgets add up
    (sequential composition): ``{"forest": eps / 2, "intersection": eps / 2}``
    when the intersection forest is requested and shared, else
    ``{"forest": eps}``. Empty when DP mode is off.
    """
    if not policy.dp:
        return {}
    eps = float(policy.dp_epsilon)
    if intersection and policy.share["intersection"]:
        return {"forest": eps / 2, "intersection": eps / 2}
    return {"forest": eps}


# ================================================================ tree plumbing


def _replace(forest: PooledForest, **arrays) -> PooledForest:
    """A new forest with the same trees and some node arrays replaced."""
    fields = {k: getattr(forest, k) for k in NODE_FIELDS}
    fields["value"] = forest.value
    fields.update(arrays)
    return PooledForest(
        feature_names=forest.feature_names,
        classes=forest.classes,
        owners=forest.owners,
        categories=forest.categories,
        tree_start=forest.tree_start,
        tree_owner=forest.tree_owner,
        **fields,
    )


def _rebuild(
    forest: PooledForest, action: np.ndarray, keep_tree: np.ndarray | None = None
) -> PooledForest:
    """Rebuild the trees in depth-first order after pruning.

    ``action`` per node: ``_KEEP``; ``_LEAF`` (the node becomes a leaf with its
    own distribution and count); ``_TO_LEFT`` / ``_TO_RIGHT`` (the node is
    replaced by that child's subtree). Trees where ``keep_tree`` is false are
    dropped. Children are renumbered; a node made a leaf loses its split, its
    missing-value flag and its surrogate.
    """
    if keep_tree is None:
        keep_tree = np.ones(forest.n_trees, bool)
    if np.all(action == _KEEP) and keep_tree.all():
        return forest
    if not keep_tree.any():
        raise ValueError("no tree is left")
    gleft, gright = forest.global_children
    feature = forest.feature
    src: list[int] = []
    new_left: list[int] = []
    new_right: list[int] = []
    made_leaf: list[bool] = []
    starts = [0]
    for t in np.flatnonzero(keep_tree):
        base = len(src)
        stack = [(int(forest.tree_start[t]), -1, False)]
        while stack:
            node, parent, is_right = stack.pop()
            while action[node] in (_TO_LEFT, _TO_RIGHT):
                node = int(gleft[node] if action[node] == _TO_LEFT else gright[node])
            idx = len(src) - base
            src.append(node)
            new_left.append(-1)
            new_right.append(-1)
            leaf = feature[node] < 0 or action[node] == _LEAF
            made_leaf.append(bool(feature[node] >= 0 and leaf))
            if parent >= 0:
                (new_right if is_right else new_left)[base + parent] = idx
            if not leaf:
                stack.append((int(gright[node]), idx, True))
                stack.append((int(gleft[node]), idx, False))
        starts.append(len(src))
    src_a = np.asarray(src, dtype=np.int64)
    made = np.asarray(made_leaf, dtype=bool)
    out = {k: getattr(forest, k)[src_a].copy() for k in NODE_FIELDS}
    out["children_left"] = np.asarray(new_left, dtype=np.int32)
    out["children_right"] = np.asarray(new_right, dtype=np.int32)
    out["feature"][made] = -1
    out["threshold"][made] = 0.0
    out["saw_missing"][made] = False
    out["surrogate_feature"][made] = -1
    out["surrogate_threshold"][made] = 0.0
    out["surrogate_left_le"][made] = True
    out["surrogate_agreement"][made] = 0.0
    return PooledForest(
        feature_names=forest.feature_names,
        classes=forest.classes,
        owners=forest.owners,
        categories=forest.categories,
        tree_start=np.asarray(starts, dtype=np.int64),
        tree_owner=forest.tree_owner[keep_tree],
        value=forest.value[src_a],
        **out,
    )


def _class_index(forest: PooledForest, y) -> np.ndarray:
    y = np.asarray(y)
    idx = pd.Index(forest.classes).get_indexer(y)
    if np.any(idx < 0):
        unknown = sorted({str(v) for v in y[idx < 0]})[:10]
        raise ValueError(
            f"y has labels {unknown} that are not classes of the forest {list(forest.classes)}"
        )
    return idx.astype(np.int64)


def _site_matrix(forest: PooledForest, X) -> np.ndarray:
    """The site's rows at the forest's global positions; every split feature must be there."""
    Xg, present = to_global_matrix(X, forest.feature_names, forest.categories)
    used = np.unique(np.concatenate([forest.feature, forest.surrogate_feature]))
    lacking = [forest.feature_names[j] for j in used[used >= 0] if not present[j]]
    if lacking:
        raise ValueError(f"X lacks columns {lacking} that the trees split on")
    return Xg


def _node_counts(
    forest: PooledForest, Xg: np.ndarray, yi: np.ndarray, in_bag: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Route rows through every tree; weighted class sums, distinct rows, NaN seen per node.

    A row goes left when ``x <= threshold``; a missing value follows
    ``missing_left`` (as scikit-learn routes its training rows). A row counts
    in a tree with its weight ``in_bag[tree, row]`` (rows of weight 0 are not
    routed); ``None`` means every row once.
    """
    n_rows = Xg.shape[0]
    n_classes = forest.n_classes
    sums = np.zeros((forest.n_nodes, n_classes))
    distinct = np.zeros(forest.n_nodes, dtype=np.int64)
    saw = np.zeros(forest.n_nodes, dtype=bool)
    gleft, gright = forest.global_children
    feature = forest.feature.astype(np.int64)
    step = max(1, MAX_PAIRS // max(n_rows, 1))
    for lo in range(0, forest.n_trees, step):
        trees = np.arange(lo, min(forest.n_trees, lo + step))
        first, last = int(forest.tree_start[trees[0]]), int(forest.tree_start[trees[-1] + 1])
        width = last - first
        node = np.repeat(forest.tree_start[trees].astype(np.int64), n_rows)
        row = np.tile(np.arange(n_rows, dtype=np.int64), trees.size)
        if in_bag is None:
            w = np.ones(node.size)
        else:
            w = in_bag[trees].reshape(-1).astype(np.float64)
            keep = w > 0
            node, row, w = node[keep], row[keep], w[keep]
        chunk_sums = np.zeros(width * n_classes)
        chunk_n = np.zeros(width, dtype=np.int64)
        while node.size:
            local = node - first
            chunk_sums += np.bincount(
                local * n_classes + yi[row], weights=w, minlength=width * n_classes
            )
            chunk_n += np.bincount(local, minlength=width)
            f = feature[node]
            inner = f >= 0
            node, row, w, f = node[inner], row[inner], w[inner], f[inner]
            if not node.size:
                break
            x = Xg[row, f]
            nan = np.isnan(x)
            saw[node[nan]] = True
            go_left = np.where(nan, forest.missing_left[node], x <= forest.threshold[node])
            node = np.where(go_left, gleft[node], gright[node])
        sums[first:last] = chunk_sums.reshape(width, n_classes)
        distinct[first:last] = chunk_n
    return sums, distinct, saw


def _empty_actions(forest: PooledForest, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Collapse splits with an empty child onto the other child; drop empty trees."""
    gleft, gright = forest.global_children
    internal = forest.feature >= 0
    action = np.full(forest.n_nodes, _KEEP, dtype=np.int8)
    left_empty = internal & (n[np.where(internal, gleft, 0)] == 0)
    right_empty = internal & (n[np.where(internal, gright, 0)] == 0)
    action[left_empty] = _TO_RIGHT
    action[right_empty & ~left_empty] = _TO_LEFT
    keep_tree = n[forest.tree_start[:-1]] > 0
    return action, keep_tree


def recount(forest: PooledForest, X, y, in_bag=None) -> PooledForest:
    """Recompute ``n_node_samples``, ``value`` and ``saw_missing`` from the site's rows.

    Every row of ``X`` is routed through every tree (``x <= threshold`` goes
    left, a missing value follows ``missing_left``). With ``in_bag`` (the
    per-tree multiplicities of :func:`bootstrap_weights`) a row counts with its
    multiplicity in ``value`` and once in ``n_node_samples``, as scikit-learn
    counts its bootstrap sample, so the forest's own sample reproduces its
    counts exactly. Without it every row counts once in every tree; then
    ``value * n_node_samples`` are plain row counts. A node that no row reaches
    is removed (its parent is replaced by the other child), and a tree that no
    row reaches is dropped. ``saw_missing`` becomes: the threshold is +inf, or
    a counted row missing the node's feature reached the node.

    Parameters
    ----------
    forest : PooledForest
    X : DataFrame or ndarray
        The site's training rows (encoded, global column names).
    y : array-like
        Their class labels (classes of ``forest``).
    in_bag : ndarray of shape (n_trees, n_rows), optional
        Row multiplicities per tree (0: the row is not in the tree's sample).
    """
    Xg = _site_matrix(forest, X)
    yi = _class_index(forest, y)
    if yi.shape[0] != Xg.shape[0]:
        raise ValueError(f"X has {Xg.shape[0]} rows but y has {yi.shape[0]}")
    if in_bag is not None:
        in_bag = np.asarray(in_bag)
        if in_bag.shape != (forest.n_trees, Xg.shape[0]) or np.any(in_bag < 0):
            raise ValueError(
                f"in_bag must be non-negative with shape ({forest.n_trees}, {Xg.shape[0]}), "
                f"got {describe(in_bag)}"
            )
    sums, n, saw = _node_counts(forest, Xg, yi, in_bag)
    totals = sums.sum(axis=1, keepdims=True)
    value = np.where(totals > 0, sums / np.where(totals > 0, totals, 1.0), forest.value)
    internal = forest.feature >= 0
    saw_missing = internal & (np.isposinf(forest.threshold) | saw)
    counted = _replace(
        forest,
        n_node_samples=n,
        value=value,
        saw_missing=saw_missing,
    )
    action, keep_tree = _empty_actions(forest, n)
    if not keep_tree.any():
        raise ValueError("no row of X reaches any tree (is in_bag all zero?)")
    return _rebuild(counted, action, keep_tree)


def bootstrap_weights(rf, n_rows: int) -> np.ndarray:
    """Per-tree row multiplicities of a fitted scikit-learn forest, shape (n_trees, n_rows).

    With ``bootstrap=False`` every row counts once in every tree. Pass the
    result as ``in_bag`` to :func:`recount` / :func:`snap_thresholds` (counts
    like scikit-learn's), or ``in_bag > 0`` (each in-bag row once: plain row
    counts, as :func:`add_count_noise` assumes).
    """
    out = np.ones((len(rf.estimators_), n_rows), dtype=np.int64)
    if getattr(rf, "bootstrap", False):
        for i, rows in enumerate(rf.estimators_samples_):
            out[i] = np.bincount(np.asarray(rows), minlength=n_rows)
    return out


# ============================================================ the transforms
def enforce_min_leaf_rows(forest: PooledForest, k: int) -> PooledForest:
    """Prune every split with a child that describes fewer than ``k`` rows.

    Top-down, a split whose left or right child has ``n_node_samples < k``
    becomes a leaf with its own (the parent's) class distribution and count;
    its subtree is dropped. A tree whose root describes fewer than ``k`` rows
    is dropped. The result is a valid forest in depth-first order with
    renumbered children, and every node in it describes at least ``k`` rows
    (a child never has more rows than its parent). ``k <= 1``, or a forest
    that already complies, is returned as it is.

    Use :func:`smallest_leaf_rows` to check an outgoing forest.

    Raises
    ------
    ValueError
        When every tree's root describes fewer than ``k`` rows.
    """
    k = int(k)
    if k <= 1 or smallest_leaf_rows(forest) >= k:
        return forest
    n = forest.n_node_samples
    gleft, gright = forest.global_children
    internal = forest.feature >= 0
    small = internal & (
        (n[np.where(internal, gleft, 0)] < k) | (n[np.where(internal, gright, 0)] < k)
    )
    action = np.where(small, _LEAF, _KEEP).astype(np.int8)
    keep_tree = n[forest.tree_start[:-1]] >= k
    if not keep_tree.any():
        raise ValueError(
            f"min_leaf_rows={k}: every tree describes fewer rows (the largest root has "
            f"{int(n[forest.tree_start[:-1]].max())}); the site cannot send a forest"
        )
    return _rebuild(forest, action, keep_tree)


def _coerce_grid(grid) -> ThresholdGrid:
    if isinstance(grid, ThresholdGrid):
        return grid
    return ThresholdGrid.from_dict(grid, "threshold grid")


def snap_thresholds(
    forest: PooledForest,
    X,
    y,
    grid,
    *,
    in_bag=None,
    min_agreement: float = 0.25,
    min_rows: int = 6,
) -> PooledForest:
    """Snap every threshold to a public grid, then recount the trees on the site's rows.

    * numeric split thresholds go to the nearest point of their feature's rule
      in ``grid``;
    * categorical split thresholds become ``floor(t) + 0.5`` (clipped to
      ``[-0.5, K - 0.5]``): every level code goes the same way as before, and
      the threshold no longer tells which codes the node's rows had;
    * +inf thresholds (scikit-learn's split of missing from observed values)
      carry no training value and are kept.

    The site's training rows are then re-routed through each snapped tree and
    ``n_node_samples``, ``value`` and ``saw_missing`` recomputed
    (:func:`recount`, with ``in_bag``), so each tree stays consistent. A split
    that the snapping left with an empty side is replaced by its other child.

    Surrogate thresholds are snapped the same way (by the surrogate feature's
    rule). Their orientation and adjusted agreement are recomputed on the
    site's rows as :func:`~fedforest.model.surrogates.fit_surrogates` computes
    them, and a surrogate whose agreement falls below ``min_agreement``, or
    that is judged on fewer than ``min_rows`` rows, is removed.

    Raises
    ------
    ValueError
        When the grid leaves a numeric split feature without a rule, or names
        a categorical feature.
    """
    grid = _coerce_grid(grid)
    cats = set(forest.categories)
    named_cats = sorted(set(grid.features) & cats)
    if named_cats:
        raise ValueError(
            f"the threshold grid names categorical features {named_cats}; categorical "
            "features always use the cuts between level codes"
        )
    used = np.unique(np.concatenate([forest.feature, forest.surrogate_feature]))
    numeric_used = [forest.feature_names[j] for j in used[used >= 0]]
    numeric_used = [f for f in numeric_used if f not in cats]
    missing = grid.uncovered(numeric_used)
    if missing:
        raise ValueError(
            f"the threshold grid has no rule for numeric features {missing}; add a default "
            "step or significant_digits, or list them under steps or edges"
        )
    threshold = _snap_all(forest, grid, forest.feature, forest.threshold)
    sur_threshold = _snap_all(forest, grid, forest.surrogate_feature, forest.surrogate_threshold)
    snapped = _replace(forest, threshold=threshold, surrogate_threshold=sur_threshold)
    out = recount(snapped, X, y, in_bag=in_bag)
    if np.any(out.surrogate_feature >= 0):
        out = _rescore_surrogates(out, _site_matrix(out, X), min_agreement, min_rows)
    return out


def _snap_all(forest, grid: ThresholdGrid, feature, threshold) -> np.ndarray:
    out = np.array(threshold, dtype=np.float64, copy=True)
    splits = (feature >= 0) & np.isfinite(out)
    for j in np.unique(feature[splits]):
        at = splits & (feature == j)
        name = forest.feature_names[j]
        if name in forest.categories:
            k = len(forest.categories[name])
            out[at] = np.clip(np.floor(out[at]) + 0.5, -0.5, k - 0.5)
        else:
            out[at] = grid.snap(name, out[at])
    return out


def _rescore_surrogates(
    forest: PooledForest, Xg: np.ndarray, min_agreement: float, min_rows: int
) -> PooledForest:
    """Orientation and adjusted agreement of each (snapped) surrogate on the site's rows.

    Rows are routed as :func:`~fedforest.model.surrogates.fit_surrogates`
    routes them: a missing value at a node that saw missing values follows
    the learned direction, at any other node the row stops.
    """
    n_nodes = forest.n_nodes
    has = forest.surrogate_feature >= 0
    n_total = np.zeros(n_nodes)
    n_left = np.zeros(n_nodes)
    agree_le = np.zeros(n_nodes)
    gleft, gright = forest.global_children
    feature = forest.feature.astype(np.int64)
    sfeat = forest.surrogate_feature.astype(np.int64)
    n_rows = Xg.shape[0]
    step = max(1, MAX_PAIRS // max(n_rows, 1))
    for lo in range(0, forest.n_trees, step):
        trees = np.arange(lo, min(forest.n_trees, lo + step))
        node = np.repeat(forest.tree_start[trees].astype(np.int64), n_rows)
        row = np.tile(np.arange(n_rows, dtype=np.int64), trees.size)
        while node.size:
            f = feature[node]
            inner = f >= 0
            node, row, f = node[inner], row[inner], f[inner]
            if not node.size:
                break
            x = Xg[row, f]
            nan = np.isnan(x)
            go_left = x <= forest.threshold[node]
            rec = has[node] & ~nan
            if rec.any():
                rn, rr, rl = node[rec], row[rec], go_left[rec]
                xs = Xg[rr, sfeat[rn]]
                ok = ~np.isnan(xs)
                rn, rl, xs = rn[ok], rl[ok], xs[ok]
                s_left = xs <= forest.surrogate_threshold[rn]
                np.add.at(n_total, rn, 1.0)
                np.add.at(n_left, rn, rl.astype(float))
                np.add.at(agree_le, rn, (s_left == rl).astype(float))
            if nan.any():
                go_left = np.where(nan, forest.missing_left[node], go_left)
                alive = ~nan | forest.saw_missing[node]
                node, row, go_left = node[alive], row[alive], go_left[alive]
            node = np.where(go_left, gleft[node], gright[node])
    n_maj = np.maximum(n_left, n_total - n_left)
    le = agree_le >= n_total - agree_le
    n_surr = np.where(le, agree_le, n_total - agree_le)
    denom = n_total - n_maj
    with np.errstate(divide="ignore", invalid="ignore"):
        adj = np.where(denom > 0, (n_surr - n_maj) / np.where(denom > 0, denom, 1.0), -np.inf)
    keep = has & (n_total >= min_rows) & (denom > 0) & (adj >= min_agreement)
    return forest.with_surrogates(
        np.where(keep, forest.surrogate_feature, -1),
        np.where(keep, forest.surrogate_threshold, 0.0),
        np.where(keep, le, True),
        np.where(keep, adj, 0.0),
    )


def _with_leaf_counts(forest: PooledForest, leaf_counts: np.ndarray) -> PooledForest:
    """Set every node's counts from its leaves' class counts (rows of ``leaf_counts``).

    ``leaf_counts`` has one row per node (only leaf rows are read), values
    >= 0. Internal nodes get the sum of their children's counts; ``value``
    is the normalised count vector (uniform where the total is 0) and
    ``n_node_samples`` the rounded total, at least 1. Rounding is monotone, so
    a child never has more rows than its parent.
    """
    counts = np.where((forest.feature < 0)[:, None], leaf_counts, 0.0)
    depth = forest.node_depth
    gleft, gright = forest.global_children
    internal = forest.feature >= 0
    for d in range(int(depth.max(initial=0)), -1, -1):
        at = np.flatnonzero(internal & (depth == d))
        if at.size:
            counts[at] = counts[gleft[at]] + counts[gright[at]]
    total = counts.sum(axis=1, keepdims=True)
    uniform = np.full_like(counts, 1.0 / max(forest.n_classes, 1))
    value = np.where(total > 0, counts / np.where(total > 0, total, 1.0), uniform)
    n = np.clip(np.rint(total[:, 0]), 1, MAX_NODE_SAMPLES).astype(np.int64)
    return _replace(forest, value=value, n_node_samples=n)


def _check_epsilon(epsilon, what: str) -> float:
    if (
        isinstance(epsilon, bool)
        or not isinstance(epsilon, (int, float, np.integer, np.floating))
        or not math.isfinite(float(epsilon))
        or float(epsilon) <= 0
    ):
        raise ValueError(f"{what} must be a finite number > 0, got {epsilon!r}")
    return float(epsilon)


def add_count_noise(forest: PooledForest, epsilon: float, random_state=None) -> PooledForest:
    """Laplace noise on every leaf's class counts; everything above recomputed from them.

    The leaf class counts are ``c = value * n_node_samples``. Each count gets
    independent noise ``Laplace(0, 1/epsilon)`` (variance ``2 / epsilon**2``)
    and is clipped at 0. Internal nodes' counts are the sums of their leaves'
    noisy counts; every node's ``value`` is its normalised noisy count vector
    (uniform when all its counts were clipped to 0) and its
    ``n_node_samples`` the rounded noisy total (at least 1). The structure,
    thresholds and surrogates are unchanged.

    **Sensitivity.** When ``c`` are plain row counts (a forest from
    :func:`recount` or :func:`snap_thresholds` with each in-bag row once),
    adding or removing one training row changes one count of one leaf of a
    tree by 1, so the L1 sensitivity of a tree's leaf-count vector is 1 and
    the noisy counts of one tree are the Laplace mechanism:
    epsilon-differentially private *given the tree*; a forest of T trees that
    share rows spends T·epsilon on its counts (sequential composition). With
    scikit-learn's bootstrap weighting, ``c`` are weighted proportions times
    distinct rows and one row can move them by more than 1. In every case this
    protects the **counts only**: the tree structure and thresholds were chosen
    from the rows without noise, so the forest is not differentially private.
    Use :func:`fit_dp_forest` for a guarantee.

    Parameters
    ----------
    forest : PooledForest
    epsilon : float
        > 0; the noise scale is ``1 / epsilon``.
    random_state : None, int or Generator
        Source of the noise. Leave it ``None`` (operating-system entropy)
        outside tests: noise from a seed the server knows can be subtracted.
    """
    epsilon = _check_epsilon(epsilon, "count_noise_epsilon")
    rng = np.random.default_rng(random_state)
    counts = forest.value * forest.n_node_samples[:, None].astype(np.float64)
    leaf = forest.feature < 0
    noise = np.zeros_like(counts)
    noise[leaf] = rng.laplace(0.0, 1.0 / epsilon, size=(int(leaf.sum()), forest.n_classes))
    return _with_leaf_counts(forest, np.maximum(counts + noise, 0.0))


def fit_dp_forest(
    X: pd.DataFrame,
    y,
    feature_ranges: Mapping[str, Sequence[float]],
    categories: Mapping[str, Sequence[str]],
    n_trees: int,
    max_depth: int,
    epsilon: float,
    random_state=None,
    *,
    classes: Sequence | None = None,
    owner: str = "site",
    noise_state=None,
) -> PooledForest:
    """A differentially private forest of random decision trees.

    **Structure without the data.** Each tree is drawn from ``random_state``
    alone: at every node down to ``max_depth``, a feature is picked uniformly
    among those whose range at the node can still be split, with a threshold
    uniform in the node's range of it (numeric: the public
    ``feature_ranges[f]``, narrowed by the splits above; categorical: a cut
    ``c + 0.5`` between level codes, uniform among the cuts left). The
    direction of a missing value (``missing_left``) is a fair coin, and
    ``saw_missing`` is false everywhere. Rows outside a declared range are not
    clipped: they fall into the outermost leaf.

    **Counts with noise.** Every row of ``X`` is routed through every tree
    (once; a missing value follows ``missing_left``). Each leaf's class counts
    get independent ``Laplace(0, n_trees / epsilon)`` noise from
    ``noise_state``, are clipped at 0, and everything else (internal counts,
    ``value``, ``n_node_samples``) is computed from the noisy leaf counts as
    in :func:`add_count_noise`.

    **Guarantee.** Let the inputs ``feature_ranges``, ``categories``,
    ``classes``, ``n_trees``, ``max_depth``, ``epsilon``, ``owner``,
    ``random_state`` and the column names of ``X`` be fixed independently of
    the rows. Then the returned forest, as a whole (structure, thresholds,
    ``value``, ``n_node_samples``), is ``epsilon``-differentially private
    with respect to adding or removing one row of ``(X, y)`` (and
    ``2·epsilon``-DP with respect to replacing one row). Proof: the structure
    does not depend on the rows; in each tree a row falls into exactly one
    leaf and adds 1 to exactly one class count, so the L1 sensitivity of a
    tree's leaf-count vector is 1, and ``Laplace(n_trees / epsilon)`` noise
    makes each tree ``epsilon / n_trees``-DP (Laplace mechanism). The trees
    use the same rows, so their budgets add up to ``epsilon`` (sequential
    composition); clipping, normalising, rounding and pruning by the noisy
    counts (:func:`enforce_min_leaf_rows`) are post-processing.

    Sequential rather than parallel composition (each tree on a disjoint
    share of the rows with the full ``epsilon``): a leaf's signal-to-noise
    ratio is the same either way (n / (T·2^d) rows against noise 1/epsilon,
    or n / 2^d rows against noise T/epsilon), but disjoint shares add the
    sampling error of splitting a hospital's few rows T ways.

    Caveats: ``classes=None`` uses the labels present in ``y``, which the
    guarantee then does not cover (pass the schema's classes); numpy's Laplace
    sampler is not hardened against floating-point attacks, so the guarantee
    is that of the ideal mechanism; the noise must come from a secret source
    (``noise_state=None``: operating-system entropy), never from the job's
    seed.

    Parameters
    ----------
    X : DataFrame
        The site's training rows, encoded (categorical columns hold global
        level codes), global column names.
    y : array-like
        Class labels.
    feature_ranges : mapping of str to (low, high)
        Public range of every numeric column of ``X``.
    categories : mapping of str to list of str
        Levels of the categorical columns of ``X`` (codes ``0 .. K-1``).
    n_trees, max_depth : int
        Number of trees (>= 1) and depth of each (1 to :data:`MAX_DP_DEPTH`).
    epsilon : float
        The privacy budget of the whole forest (> 0).
    random_state : None, int or Generator
        Seeds the structure only (it may be public, e.g. the job's seed).
    classes : sequence, optional
        The class list (the global schema's); default: the labels of ``y``.
    owner : str
        The site's name (``owners`` of the forest).
    noise_state : None, int or Generator
        Source of the Laplace noise; ``None`` outside tests.
    """
    epsilon = _check_epsilon(epsilon, "dp_epsilon")
    if isinstance(n_trees, bool) or not isinstance(n_trees, (int, np.integer)) or n_trees < 1:
        raise ValueError(f"n_trees must be an integer >= 1, got {n_trees!r}")
    if (
        isinstance(max_depth, bool)
        or not isinstance(max_depth, (int, np.integer))
        or not 1 <= max_depth <= MAX_DP_DEPTH
    ):
        raise ValueError(f"max_depth must be an integer in [1, {MAX_DP_DEPTH}], got {max_depth!r}")
    if not isinstance(X, pd.DataFrame):
        raise ValueError("X must be a DataFrame with global column names")
    names = [str(c) for c in X.columns]
    cats = {c: list(categories[c]) for c in names if c in categories}
    lacking = [c for c in names if c not in cats and c not in feature_ranges]
    if lacking:
        raise ValueError(
            f"columns {lacking} have no public range (feature_ranges) and are not categorical; "
            "a range taken from the rows would void the guarantee"
        )
    lo = np.zeros(len(names))
    hi = np.zeros(len(names))
    is_cat = np.array([c in cats for c in names])
    for j, c in enumerate(names):
        if c in cats:
            lo[j], hi[j] = 0, len(cats[c]) - 1
        else:
            a, b = (float(v) for v in feature_ranges[c])
            if not (math.isfinite(a) and math.isfinite(b) and a < b):
                raise ValueError(f"feature_ranges[{c!r}] must be finite with low < high")
            lo[j], hi[j] = a, b
    classes = class_labels(y) if classes is None else list(classes)
    rng = np.random.default_rng(random_state)
    parts: dict[str, list] = {k: [] for k in ("l", "r", "f", "t", "m")}
    starts = [0]
    for _ in range(int(n_trees)):
        left, right, feat, thr, miss = _random_tree(rng, lo, hi, is_cat, int(max_depth))
        parts["l"] += left
        parts["r"] += right
        parts["f"] += feat
        parts["t"] += thr
        parts["m"] += miss
        starts.append(starts[-1] + len(left))
    n_nodes = starts[-1]
    k = len(classes)
    structure = PooledForest(
        feature_names=names,
        classes=np.asarray(classes),
        owners=[str(owner)],
        categories=cats,
        tree_start=np.asarray(starts),
        tree_owner=np.zeros(int(n_trees), np.int32),
        children_left=parts["l"],
        children_right=parts["r"],
        feature=parts["f"],
        threshold=parts["t"],
        n_node_samples=np.ones(n_nodes, np.int64),
        missing_left=parts["m"],
        saw_missing=np.zeros(n_nodes, bool),
        value=np.full((n_nodes, k), 1.0 / k),
    )
    Xg, _ = to_global_matrix(X, names, cats)
    yi = _class_index(structure, y)
    sums, _, _ = _node_counts(structure, Xg, yi, None)
    noise_rng = np.random.default_rng(noise_state)
    leaf = structure.feature < 0
    noisy = sums.copy()
    noisy[leaf] += noise_rng.laplace(0.0, n_trees / epsilon, size=(int(leaf.sum()), k))
    return _with_leaf_counts(structure, np.maximum(noisy, 0.0))


def _random_tree(rng, lo, hi, is_cat, max_depth):
    """One random tree in depth-first order, drawn from ``rng`` and the ranges only."""
    left: list[int] = []
    right: list[int] = []
    feat: list[int] = []
    thr: list[float] = []
    miss: list[bool] = []
    stack = [(lo.copy(), hi.copy(), 0, -1, False)]
    while stack:
        nlo, nhi, depth, parent, is_right = stack.pop()
        idx = len(feat)
        left.append(-1)
        right.append(-1)
        if parent >= 0:
            (right if is_right else left)[parent] = idx
        splittable = np.flatnonzero(np.where(is_cat, nhi - nlo >= 1, nhi > nlo))
        if depth >= max_depth or splittable.size == 0:
            feat.append(-1)
            thr.append(0.0)
            miss.append(False)
            continue
        j = int(rng.choice(splittable))
        llo, lhi, rlo, rhi = nlo.copy(), nhi.copy(), nlo.copy(), nhi.copy()
        if is_cat[j]:
            cut = int(rng.integers(int(nlo[j]), int(nhi[j])))  # codes <= cut go left
            t = cut + 0.5
            lhi[j], rlo[j] = cut, cut + 1
        else:
            t = float(rng.uniform(nlo[j], nhi[j]))
            lhi[j], rlo[j] = t, t
        feat.append(j)
        thr.append(t)
        miss.append(bool(rng.random() < 0.5))
        stack.append((rlo, rhi, depth + 1, idx, True))
        stack.append((llo, lhi, depth + 1, idx, False))
    return left, right, feat, thr, miss


def strip_surrogates(forest: PooledForest) -> PooledForest:
    """The forest without surrogate splits (``share.surrogates: false``)."""
    if not np.any(forest.surrogate_feature >= 0):
        return forest
    n = forest.n_nodes
    return forest.with_surrogates(np.full(n, -1), np.zeros(n), np.ones(n, bool), np.zeros(n))


def prepare_forest(
    forest: PooledForest,
    policy: PrivacyPolicy,
    X=None,
    y=None,
    *,
    in_bag=None,
    min_agreement: float = 0.25,
    min_rows: int = 6,
    noise_state=None,
) -> PooledForest:
    """Apply ``policy`` to a site's outgoing forest (not DP mode), in the documented order.

    Surrogates removed (``share.surrogates`` false) → :func:`snap_thresholds`
    (``threshold_grid``) → plain row counts (:func:`recount` with each in-bag
    row once, when ``count_noise_epsilon`` is set) → :func:`enforce_min_leaf_rows`
    → :func:`add_count_noise` → :func:`enforce_min_leaf_rows` on the noisy
    counts. The default policy returns ``forest`` itself.

    Parameters
    ----------
    forest : PooledForest
        The site's forest (with surrogates, if any: their thresholds are
        snapped too).
    policy : PrivacyPolicy
    X, y :
        The site's training rows and labels; needed for a grid or count noise.
    in_bag : ndarray of shape (n_trees, n_rows), optional
        :func:`bootstrap_weights` of the scikit-learn forest, so the counts
        stay those of each tree's sample (default: every row in every tree).
    min_agreement, min_rows :
        The job's surrogate settings (surrogates re-scored after snapping).
    noise_state : None, int or Generator
        Source of the count noise; ``None`` outside tests.
    """
    if policy.dp:
        raise ValueError("DP mode replaces the forest: use fit_dp_forest")
    if policy.is_default:
        return forest
    if not policy.share["surrogates"]:
        forest = strip_surrogates(forest)
    noise = policy.count_noise_epsilon
    needs_rows = policy.threshold_grid is not None or noise is not None
    if needs_rows and (X is None or y is None):
        raise ValueError("a threshold grid or count noise needs the site's rows X and y")
    weights = in_bag
    if noise is not None and in_bag is not None:
        weights = (np.asarray(in_bag) > 0).astype(np.int64)
    if policy.threshold_grid is not None:
        forest = snap_thresholds(
            forest,
            X,
            y,
            policy.threshold_grid,
            in_bag=weights,
            min_agreement=min_agreement,
            min_rows=min_rows,
        )
    elif noise is not None:
        forest = recount(forest, X, y, in_bag=weights)
    forest = enforce_min_leaf_rows(forest, policy.min_leaf_rows)
    if noise is not None:
        forest = add_count_noise(forest, noise, noise_state)
        forest = enforce_min_leaf_rows(forest, policy.min_leaf_rows)
    return forest


def check_forest(forest: PooledForest, policy: PrivacyPolicy) -> list[str]:
    """What in an outgoing (or received) forest breaks ``policy``; empty when nothing does.

    Checks what can be checked from the forest alone: every node's
    ``n_node_samples >= min_leaf_rows``; outside DP mode, every finite split
    and surrogate threshold on the grid (categorical ones on half-integers);
    no surrogate when ``share.surrogates`` is false. Count noise cannot be
    checked from the forest.
    """
    problems = []
    k = policy.min_leaf_rows
    smallest = smallest_leaf_rows(forest)
    if smallest < k:
        n_small = int(np.sum(forest.n_node_samples < k))
        problems.append(
            f"{n_small} nodes describe fewer than min_leaf_rows={k} rows (smallest: {smallest})"
        )
    if policy.threshold_grid is not None and not policy.dp:
        for what, feature, threshold in (
            ("split", forest.feature, forest.threshold),
            ("surrogate", forest.surrogate_feature, forest.surrogate_threshold),
        ):
            splits = (feature >= 0) & np.isfinite(threshold)
            for j in np.unique(feature[splits]):
                name = forest.feature_names[j]
                t = threshold[splits & (feature == j)]
                if name in forest.categories:
                    off = np.floor(t) + 0.5 != t
                else:
                    off = ~policy.threshold_grid.on_grid(name, t)
                if off.any():
                    problems.append(
                        f"{int(off.sum())} {what} thresholds on {name!r} are off the grid "
                        f"(e.g. {float(t[off][0])!r})"
                    )
    if not policy.share["surrogates"] and np.any(forest.surrogate_feature >= 0):
        problems.append("the forest carries surrogate splits but share.surrogates is false")
    return problems


# ===================================================================== levels
def _categorical_columns(frame: pd.DataFrame, categorical: Sequence[str], target) -> list[str]:
    listed = set(categorical)
    return [
        str(c)
        for c in frame.columns
        if c != target and column_kind(frame[c], c in listed) == "categorical"
    ]


def rare_levels(
    frame: pd.DataFrame,
    categorical: Sequence[str],
    min_level_rows: int,
    *,
    target: str | None = None,
) -> dict[str, list[str]]:
    """The levels to hide: ``{column: [levels with fewer than min_level_rows rows]}``.

    Columns are the categorical ones as :class:`~fedforest.federation.schema.SiteSchema`
    sees them (listed in ``categorical``, or not numeric), except ``target``.
    Levels are the strings the schema sends (:func:`as_level_strings`); a
    missing value is no level. Only columns with a rare level appear.
    """
    out: dict[str, list[str]] = {}
    if min_level_rows <= 1:
        return out
    for col in _categorical_columns(frame, categorical, target):
        counts = as_level_strings(frame[col]).dropna().value_counts()
        rare = sorted(str(lvl) for lvl, n in counts.items() if n < min_level_rows)
        if rare:
            out[col] = rare
    return out


def hide_levels(
    frame: pd.DataFrame, hidden: Mapping[str, Sequence[str]], other: str | None = OTHER_LEVEL
) -> pd.DataFrame:
    """A copy of ``frame`` where the ``hidden`` levels read ``other`` (``None``: missing).

    Apply it to the site's whole table before it is described
    (``SiteSchema.from_frame``) and encoded, and to every table the site
    predicts on later, with the same ``hidden`` (kept at the site, never
    sent). At this site, rows with a hidden level then share the code of
    ``other`` in the global schema: the site's trees and imputers learn them
    as one group, and trees from other sites route them as the level
    ``other`` (wherever it sorts among the levels), not as their true level.
    A rewritten column holds level strings (pandas ``string`` dtype), so a
    numeric-coded column must be listed as categorical, as it already is.

    Raises
    ------
    ValueError
        When a column to rewrite already has a level ``other``.
    """
    out = frame.copy()
    for col, levels in hidden.items():
        if col not in out.columns or not levels:
            continue
        as_str = as_level_strings(out[col])
        if other is not None and (as_str == other).any():
            raise ValueError(
                f"column {col!r} already has a level {other!r}; it cannot stand for the rare levels"
            )
        rare = as_str.isin(list(levels))
        out[col] = as_str.where(~rare, other if other is not None else pd.NA)
    return out


def hide_rare_levels(
    frame: pd.DataFrame,
    categorical: Sequence[str],
    min_level_rows: int,
    *,
    target: str | None = None,
    other: str | None = OTHER_LEVEL,
) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """:func:`rare_levels` then :func:`hide_levels`: the rewritten table and what was hidden.

    The rows of the rare levels of a column are pooled into one level
    ``other``. That level can itself have fewer than ``min_level_rows`` rows:
    it then tells that the site has some rare value in the column, not which
    one (``other=None`` sends those values as missing instead).
    """
    hidden = rare_levels(frame, categorical, min_level_rows, target=target)
    if not hidden:
        return frame, hidden
    return hide_levels(frame, hidden, other), hidden


# =============================================================== measurements
def smallest_leaf_rows(forest: PooledForest) -> int:
    """The fewest training rows any leaf describes (a child never has more than its parent,
    so this is also the smallest count of any node)."""
    leaf = forest.feature < 0
    return int(forest.n_node_samples[leaf].min()) if leaf.any() else 0


def threshold_midpoint_share(
    forest: PooledForest, X, *, surrogates: bool = False, pairs: str = "consecutive"
) -> float:
    """Share of the sent numeric thresholds that are midpoints of the site's training values.

    A threshold counts when it equals ``a / 2 + b / 2`` (in float64 from the
    float32 values, as scikit-learn computes its thresholds) for two distinct
    values ``a < b`` of its feature in ``X``, i.e. when it discloses two
    training values:

    * ``pairs="consecutive"``: ``a`` and ``b`` consecutive among the distinct
      values of the whole table. A tree grown on a bootstrap sample, or a deep
      node, places thresholds between values that are consecutive only among
      its node's rows, which this does not count: a lower bound (about 0.1 to
      0.2 for a bootstrap forest on a few hundred rows);
    * ``pairs="any"``: any two values of the table. This counts nearly every
      threshold scikit-learn places, but on coarse data (integer ages, grid
      points) it also counts thresholds that merely happen to be such a
      midpoint: an upper bound. It costs (thresholds x distinct values)
      operations: seconds for 100 deep trees on 5 000 rows.

    Only finite thresholds on numeric features are counted (categorical cuts
    disclose levels, which the schema sends anyway; +inf splits disclose
    nothing).

    Parameters
    ----------
    forest : PooledForest
    X : DataFrame or ndarray
        The site's training rows.
    surrogates : bool
        Also count surrogate thresholds.
    pairs : {"consecutive", "any"}

    Returns
    -------
    float
        In [0, 1]; NaN when there is no such threshold.
    """
    if pairs not in ("consecutive", "any"):
        raise ValueError(f"pairs must be 'consecutive' or 'any', got {pairs!r}")
    Xg, present = to_global_matrix(X, forest.feature_names, forest.categories)
    numeric = np.append(~forest.is_categorical, False)  # trailing entry: feature -1
    found = [(forest.feature, forest.threshold)]
    if surrogates:
        found.append((forest.surrogate_feature, forest.surrogate_threshold))
    feats, thrs = [], []
    for feature, threshold in found:
        sel = (feature >= 0) & numeric[feature] & np.isfinite(threshold)
        feats.append(feature[sel])
        thrs.append(threshold[sel])
    feats_a, thrs_a = np.concatenate(feats), np.concatenate(thrs)
    if feats_a.size == 0:
        return float("nan")
    hits = 0
    for j in np.unique(feats_a):
        if not present[j]:
            raise ValueError(f"X lacks column {forest.feature_names[j]!r}")
        col = Xg[:, j]
        v = np.unique(col[~np.isnan(col)]).astype(np.float64)
        if v.size < 2:
            continue
        t = thrs_a[feats_a == j]
        if pairs == "consecutive":
            mids = v[:-1] / 2.0 + v[1:] / 2.0
            mids = np.where((mids == v[1:]) | ~np.isfinite(mids), v[:-1], mids)
            hits += int(np.isin(t, mids).sum())
            continue
        # t = a/2 + b/2 with a < b in v  <=>  b = 2t - a is in v (exact for float32 values);
        # scikit-learn uses a itself when the midpoint rounds to b
        uniq, inverse = np.unique(t, return_inverse=True)
        mid = np.isin(uniq, v)
        below = np.searchsorted(v, uniq)  # values v[:below] are < t
        step = max(1, MAX_PAIRS // v.size)
        for lo in range(0, uniq.size, step):
            tt = uniq[lo : lo + step, None]
            b = 2.0 * tt - v[None, :]
            pos = np.minimum(np.searchsorted(v, b), v.size - 1)
            hit = (v[pos] == b) & (np.arange(v.size)[None, :] < below[lo : lo + step, None])
            mid[lo : lo + step] |= hit.any(axis=1)
        is_mid = mid[inverse]
        hits += int(is_mid.sum())
    return hits / feats_a.size


def disclosed_rare_levels(
    levels_sent: Mapping[str, Sequence[str]], frame: pd.DataFrame, min_rows: int
) -> dict[str, list[str]]:
    """The levels sent that have between 1 and ``min_rows - 1`` rows in ``frame``.

    ``levels_sent`` is what left the site (``SiteSchema.levels``, or the
    ``levels`` of its schema payload); ``frame`` is the site's original table.
    A level the site has no row of discloses nothing about its rows, and
    :data:`OTHER_LEVEL` is the pooled group, so neither counts. Only columns
    with a disclosed level appear.
    """
    out: dict[str, list[str]] = {}
    for col, levels in levels_sent.items():
        if col not in frame.columns:
            continue
        counts = as_level_strings(frame[col]).dropna().value_counts()
        found = sorted(
            str(lvl)
            for lvl in levels
            if lvl != OTHER_LEVEL and 0 < int(counts.get(lvl, 0)) < min_rows
        )
        if found:
            out[col] = found
    return out
