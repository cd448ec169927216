"""Public grids that what a site sends is snapped to: threshold grids, time resolutions.

A ``privacy.threshold_grid`` (:class:`ThresholdGrid`) gives every numeric
feature a rule, a step, a number of significant digits or public edges, and
split thresholds are sent as points of it; a ``time_resolution`` rounds a
survival site's event-time quantiles to its multiples. Two blocks that both
set one combine into the coarser (:func:`merge_grids`,
:func:`coarser_resolution`) when one's points are all points of the other,
and are refused otherwise, naming both files: "coarser" is not defined
between a step of 0.3 and a step of 0.5, or 30 and 45 days.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..validation import ConfigChecker

#: Largest number of significant digits of a threshold grid.
MAX_DIGITS = 15
#: The range of a threshold grid's step (smaller steps overflow threshold / step).
MIN_STEP = 1e-9
#: The largest magnitude of a public range's bound (trees split on float32).
MAX_RANGE = float(np.finfo(np.float32).max)

_GRID_KEYS = ("step", "significant_digits", "steps", "edges")

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
        ``features`` is refused by :func:`~fedforest.privacy.transforms.snap_thresholds`, because its
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
            default = ("step", c.number(f"{key}.step", data["step"], MIN_STEP, MAX_RANGE))
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
                    features[name] = ("step", c.number(where, value, MIN_STEP, MAX_RANGE))
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


def merge_grids(
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


def coarser_resolution(
    a: float | None, b: float | None, where_a: tuple[str, str], where_b: tuple[str, str]
) -> float | None:
    """The coarser of two time resolutions (``None``: unset), refused unless nested.

    One unset gives the other; otherwise the larger, when it is an integer
    multiple of the smaller (its multiples are then multiples of both), and
    any other pair is a :class:`~fedforest.errors.ConfigError` naming both
    files and keys (``where_a``, ``where_b``: ``(file, key)``): "coarser" is not
    defined between, say, 30 and 45 days.

    Examples
    --------
    >>> coarser_resolution(30, 90, ("a.yaml", "time_resolution"), ("b.yaml", "time_resolution"))
    90
    >>> coarser_resolution(None, 7, ("a.yaml", "k"), ("b.yaml", "k"))
    7
    """
    if a is None or b is None:
        return a if b is None else b
    lo, hi = sorted((a, b))
    if _is_multiple(hi, lo):
        return hi
    (file_a, key_a), (file_b, key_b) = where_a, where_b
    raise ConfigError(
        f"{file_a} and {file_b}: key {key_a!r} is {a:g} ({file_a}) and key {key_b!r} is {b:g} "
        f"({file_b}); allowed: equal resolutions, or one an integer multiple of the other (its "
        "multiples are then multiples of both). Make the two files agree"
    )
