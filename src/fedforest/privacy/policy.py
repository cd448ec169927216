"""The ``privacy:`` block: what a site accepts to send, and the stricter of two blocks.

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
      count_noise_epsilon: null   # Laplace noise on leaf class counts (regression: counts, sums)
      share: {imputers: true, feature_std: true, surrogates: true, intersection: true}
      dp_epsilon: null            # differentially private random trees instead of the forest
      dp_trees: null              # trees in DP mode (null: DEFAULT_DP_TREES = 10)
      dp_max_depth: null          # depth in DP mode (null: DEFAULT_DP_MAX_DEPTH = 4)
      feature_ranges: {age: [0, 120], bmi: [10, 70]}   # public ranges (DP mode)
      target_range: [0, 300]      # public range of a regression target (DP mode; required there)
      time_resolution: 30         # a survival job's event-time quantiles sent as multiples of 30

**Which policy applies.** :func:`effective_policy` combines the hospital's
policy with the job's, key by key, so that a job can tighten a hospital's
policy but never loosen it: the larger ``min_leaf_rows`` and
``min_level_rows``, the smaller ``count_noise_epsilon`` and ``dp_epsilon``
(``null`` counts as infinity), a ``share`` switch stays on only if both
have it on, and of two ``time_resolution`` the coarser (one must be an
integer multiple of the other, as for grids). Two threshold grids are combined feature by feature: equal rules
stay, otherwise the coarser one wins when its points are a subset of the
other's (a step that is an integer multiple of the other step, fewer
significant digits, edges that all lie on the other rule). Any other
disagreement is refused with a :class:`~fedforest.errors.ConfigError` naming
both files, because "coarser" is not defined between, say, a step of 0.3 and
a step of 0.5. The keys that do not change the guarantee (``dp_trees``,
``dp_max_depth``, ``feature_ranges``, ``target_range``) come from the job when
it sets them, otherwise from the site.

**Survival jobs.** DP mode (``dp_epsilon``), ``threshold_grid`` and
``count_noise_epsilon`` are refused (:meth:`PrivacyPolicy.check_task`): each
recomputes leaves from counts, and a survival leaf's curves are not counts;
``min_leaf_rows`` counts a survival leaf's rows and its events alike
(:mod:`fedforest.privacy.survival`). ``time_resolution`` rounds the coarse
event-time quantiles a survival site sends to agree the time grid to its
multiples (with the site YAML's own ``time_resolution``, the coarser of the
two; a FLARE filter with the key rounds them in the schema reply); it changes
nothing in a job of another task, so a hospital's file may set it for every
job of its scope.

**Regression jobs.** ``target_range`` may only be set in a block that sets
``dp_epsilon`` (nothing else uses it), and DP mode of a regression job
requires it: :meth:`PrivacyPolicy.check_task` refuses a policy that does not
fit the job's task.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model.payload_checks import MAX_NODE_SAMPLES
from ..validation import ConfigChecker
from ..vocabulary import TASKS
from .grids import MAX_RANGE, ThresholdGrid, coarser_resolution, merge_grids

#: ``tree_sample_fraction`` of a job's site that sets none (outside DP mode): each tree
#: grows on a bootstrap sample of 30% of the site's training rows.
JOB_TREE_SAMPLE_FRACTION = 0.3
#: A tree's sample holds at least this many leaves' worth of rows (``min_leaf_rows`` each).
MIN_SAMPLE_LEAVES = 4
#: ``min_leaf_rows`` of a job's site that sets none: no node it sends describes fewer
#: rows (:meth:`~fedforest.federation.config.SiteConfig.from_dict`). A policy read
#: elsewhere (a FLARE filter's arguments, the site's own ``local/`` file, which only
#: tightens) keeps 1 when unset, and the paper's experiment protocol sets no policy.
JOB_MIN_LEAF_ROWS = 5
#: The parts of a site's reply that ``share`` switches on and off.
SHARE_KEYS = ("imputers", "feature_std", "surrogates", "intersection")
#: Parts that are never shared in DP mode (they are computed without noise).
NOT_DP = ("imputers", "feature_std", "surrogates")
#: Trees and depth of a DP forest when the policy does not set them.
DEFAULT_DP_TREES = 10
DEFAULT_DP_MAX_DEPTH = 4
#: Largest DP tree depth (a full tree of depth d has 2**(d + 1) - 1 nodes).
MAX_DP_DEPTH = 16
#: The range of a noise budget (``count_noise_epsilon``, ``dp_epsilon``): below it the
#: noise scale (a multiple of 1 / epsilon) overflows or drowns every count; above it
#: the noise is nil and the key only pretends to protect.
MIN_EPSILON, MAX_EPSILON = 1e-6, 1e6

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
    "target_range",
    "tree_sample_fraction",
    "time_resolution",
)


# ========================================================================= policy
def _all_shared() -> dict[str, bool]:
    return dict.fromkeys(SHARE_KEYS, True)


@dataclass(frozen=True)
class PrivacyPolicy:
    """What a site accepts to send (see the module docstring for the YAML block).

    The defaults change nothing: :func:`~fedforest.privacy.transforms.prepare_forest` returns the forest it
    is given, bit for bit.

    Attributes
    ----------
    min_leaf_rows : int
        k >= 1: no node sent describes fewer than k training rows.
    threshold_grid : ThresholdGrid or None
        Public points that thresholds are snapped to.
    count_noise_epsilon : float or None
        Laplace noise of scale 1/epsilon on each leaf class count (regression
        trees: on each leaf's row count and sum of the target, half the
        budget each; :func:`~fedforest.privacy.transforms.add_count_noise`).
    min_level_rows : int
        Category levels with fewer rows at the site are sent as
        :data:`~fedforest.privacy.levels.OTHER_LEVEL` (0: off).
    share : dict of str to bool
        Which optional parts of the reply are sent (:data:`SHARE_KEYS`). In DP
        mode the parts in :data:`NOT_DP` are always off.
    dp_epsilon : float or None
        DP mode: the site sends :func:`~fedforest.privacy.dp_forest.fit_dp_forest` trees with this budget.
    dp_trees, dp_max_depth : int or None
        Trees and depth of the DP forest (``None``: the defaults).
    feature_ranges : dict of str to (float, float)
        Public ranges of numeric features, for the thresholds of DP trees.
    target_range : (float, float) or None
        Public bounds of a regression target, for the noisy leaf means of DP
        trees (DP mode only; required there for a regression job: see
        :meth:`check_task`).
    tree_sample_fraction : float or None
        Each tree is grown on a bootstrap sample of this share of the site's
        training rows (scikit-learn's ``max_samples``; at least
        :data:`MIN_SAMPLE_LEAVES` leaves of ``min_leaf_rows`` rows, so a small
        site's trees can still split): a row is in fewer trees, so the trees
        tell less about who was in the training rows. ``None``: every tree
        draws as many rows as the site has. Not used in DP mode.
    time_resolution : float or None
        A survival job's event-time quantiles (the schema reply's
        ``event_times``) are sent as multiples of it (:func:`coarser_resolution`
        with the site YAML's ``time_resolution``). ``None``: as the site's
        YAML says.
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
    target_range: tuple[float, float] | None = None
    tree_sample_fraction: float | None = None
    time_resolution: float | None = None
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
        if self.target_range is not None:
            lo, hi = self.target_range
            object.__setattr__(self, "target_range", (float(lo), float(hi)))

    # ------------------------------------------------------------- reading
    @classmethod
    def from_dict(
        cls, data: Any, source: str = "job.yaml", prefix: str = "privacy."
    ) -> PrivacyPolicy:
        """Read and validate a ``privacy:`` block (``None``: the default policy).

        Every error is a :class:`~fedforest.errors.ConfigError` naming the file
        (``source``), the key (``prefix`` + key), the bad value and what is
        allowed.

        Examples
        --------
        >>> p = PrivacyPolicy.from_dict({"dp_epsilon": 1, "target_range": [0, 300]})
        >>> p.target_range
        (0.0, 300.0)
        >>> PrivacyPolicy.from_dict({"target_range": [0, 300]}, "site.yaml")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        fedforest.errors.ConfigError: site.yaml: key 'privacy.target_range' is [0, 300]; ...
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
            return c.number(prefix + key, value, MIN_EPSILON, MAX_EPSILON)

        def optional_positive(key, hi):
            value = data.get(key)
            return None if value is None else c.number(prefix + key, value, 0, hi, open_lo=True)

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
                lo, hi = (c.number(where, v, -MAX_RANGE, MAX_RANGE) for v in value)
                if not lo < hi:
                    c.refuse(where, list(value), allowed)
                feature_ranges[name] = (lo, hi)
        target_range = data.get("target_range")
        if target_range is not None:
            where = prefix + "target_range"
            allowed = (
                f"a list [low, high] of two finite numbers of magnitude at most {MAX_RANGE:.7g} "
                "with low < high (public bounds of the regression target)"
            )
            numbers = (
                isinstance(target_range, (list, tuple))
                and len(target_range) == 2
                and all(
                    isinstance(v, (int, float, np.integer, np.floating))
                    and not isinstance(v, bool)
                    and abs(float(v)) <= MAX_RANGE
                    for v in target_range
                )
            )
            if not numbers or not target_range[0] < target_range[1]:
                c.refuse(where, target_range, allowed)
            lo, hi = (float(v) for v in target_range)
            if dp_eps is None:
                c.refuse(
                    where,
                    list(target_range),
                    f"null unless {prefix}dp_epsilon is set (only DP mode's regression trees "
                    "use the target's public range)",
                )
            target_range = (lo, hi)
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
            target_range=target_range,
            tree_sample_fraction=optional_positive("tree_sample_fraction", 1),
            time_resolution=optional_positive("time_resolution", MAX_RANGE),
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
            "target_range": None if self.target_range is None else list(self.target_range),
            "tree_sample_fraction": self.tree_sample_fraction,
            "time_resolution": self.time_resolution,
        }

    def tree_rows(self, n_rows: int) -> int | None:
        """Rows each tree's bootstrap draws (``max_samples``), or ``None`` for all of them.

        ``ceil(tree_sample_fraction * n_rows)``, but at least
        :data:`MIN_SAMPLE_LEAVES` times ``min_leaf_rows`` (and at most the
        rows there are); ``None`` without a fraction, in DP mode, or when the
        sample would be every row.
        """
        if self.tree_sample_fraction is None or self.dp:
            return None
        rows = max(
            math.ceil(self.tree_sample_fraction * n_rows), MIN_SAMPLE_LEAVES * self.min_leaf_rows
        )
        return None if rows >= n_rows else int(rows)

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
        feature. (Meant for job build and site start: :func:`~fedforest.privacy.transforms.snap_thresholds`
        and :func:`~fedforest.privacy.dp_forest.fit_dp_forest` raise the same problems as ``ValueError``.)
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

    def check_task(self, task: str) -> None:
        """Refuse a policy that does not fit the job's ``task`` (job build and site start).

        DP mode of a regression job needs ``target_range`` (the noise on the
        leaf sums is calibrated to it, and a range taken from the rows would
        void the guarantee); a classification job may not set one. DP mode is
        refused for a survival job: a survival leaf's curves come from its
        rows' exact event times, which no noise of DP mode covers. Raises a
        :class:`~fedforest.errors.ConfigError` naming :attr:`source` and the
        key; a ``task`` that is not one of :data:`~fedforest.vocabulary.TASKS`
        is a ``ValueError``. (:func:`~fedforest.privacy.dp_forest.fit_dp_forest`
        raises the same problems as ``ValueError``.)

        Examples
        --------
        >>> bounded = PrivacyPolicy.from_dict({"dp_epsilon": 1, "target_range": [0, 300]})
        >>> bounded.check_task("regression")
        >>> unbounded = PrivacyPolicy.from_dict({"dp_epsilon": 1})
        >>> unbounded.check_task("regression")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        fedforest.errors.ConfigError: job.yaml: key 'privacy.target_range' is None; ...
        """
        if task not in TASKS:
            raise ValueError(f"task={task!r} is not one of {list(TASKS)}")
        c = ConfigChecker(self.source)
        if task == "survival":
            for key, value in (
                ("threshold_grid", self.threshold_grid),
                ("count_noise_epsilon", self.count_noise_epsilon),
            ):
                if value is not None:
                    c.refuse(
                        f"privacy.{key}",
                        value.to_dict() if key == "threshold_grid" else value,
                        f"null for job.task: survival: {key} recounts the leaves from the "
                        "site's rows, and a survival leaf's curves are not counts (use "
                        "min_leaf_rows, which counts events in a survival job)",
                    )
        if task == "survival" and self.dp:
            c.refuse(
                "privacy.dp_epsilon",
                self.dp_epsilon,
                "null for job.task: survival: DP mode grows random trees with noisy class "
                "counts or leaf sums; a survival leaf's curve is computed from its rows' exact "
                "event times, which no noise covers here (use min_leaf_rows, which counts "
                "events in a survival job, and a coarse time_resolution)",
            )
        if task == "regression" and self.dp and self.target_range is None:
            c.refuse(
                "privacy.target_range",
                None,
                "a public [low, high] of the target in DP mode (privacy.dp_epsilon) for "
                "job.task: regression: the noise on each leaf's sum of the target is "
                "calibrated to it, and a range taken from the rows would void the guarantee",
            )
        if task != "regression" and self.target_range is not None:
            c.refuse(
                "privacy.target_range",
                list(self.target_range),
                f"null for job.task: {task} (a target range bounds the numbers regression "
                "trees predict; class labels have none)",
            )


def job_default_policy() -> PrivacyPolicy:
    """What a job's site applies when its YAML has no ``privacy:`` block (outside DP mode).

    ``min_leaf_rows`` :data:`JOB_MIN_LEAF_ROWS` and ``tree_sample_fraction``
    :data:`JOB_TREE_SAMPLE_FRACTION`, nothing else
    (:meth:`~fedforest.federation.config.SiteConfig.from_dict`).

    Examples
    --------
    >>> job_default_policy().min_leaf_rows, job_default_policy().tree_sample_fraction
    (5, 0.3)
    """
    return PrivacyPolicy(
        min_leaf_rows=JOB_MIN_LEAF_ROWS, tree_sample_fraction=JOB_TREE_SAMPLE_FRACTION
    )


def _stricter_epsilon(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return a if b is None else b
    return min(a, b)


def _smaller(a: float | None, b: float | None) -> float | None:
    """The smaller of two optional fractions (``None``: every row, the largest)."""
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
    ``dp_max_depth``, each entry of ``feature_ranges`` and ``target_range``
    (they do not change the guarantee): the job's when it sets them, else the
    site's. ``time_resolution``: the coarser (:func:`coarser_resolution`).

    So a job can tighten a hospital's policy, but never loosen it.
    """
    a, b = site_policy, job_policy
    return PrivacyPolicy(
        min_leaf_rows=max(a.min_leaf_rows, b.min_leaf_rows),
        threshold_grid=merge_grids(a.threshold_grid, b.threshold_grid, a.source, b.source),
        count_noise_epsilon=_stricter_epsilon(a.count_noise_epsilon, b.count_noise_epsilon),
        min_level_rows=max(a.min_level_rows, b.min_level_rows),
        share={k: bool(a.share[k] and b.share[k]) for k in SHARE_KEYS},
        dp_epsilon=_stricter_epsilon(a.dp_epsilon, b.dp_epsilon),
        dp_trees=b.dp_trees if b.dp_trees is not None else a.dp_trees,
        dp_max_depth=b.dp_max_depth if b.dp_max_depth is not None else a.dp_max_depth,
        feature_ranges={**a.feature_ranges, **b.feature_ranges},
        target_range=b.target_range if b.target_range is not None else a.target_range,
        tree_sample_fraction=_smaller(a.tree_sample_fraction, b.tree_sample_fraction),
        time_resolution=coarser_resolution(
            a.time_resolution,
            b.time_resolution,
            (a.source, "privacy.time_resolution"),
            (b.source, "privacy.time_resolution"),
        ),
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
