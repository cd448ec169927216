"""What of the model's input a table lacks: the values prediction routes as missing.

For every feature of the model, :func:`input_gaps` counts the rows that are
missing because the table has no such column (*absent*), because the field
is empty (*empty*), or because it holds a level the model never saw
(*unseen*: ``NEVER`` for ``never``, ``never`` with a trailing or zero-width
space; those that read like a model level, :func:`~fedforest.columns.reading_key`,
are named as such). The
strategies route all of these as missing. :class:`InputGaps` says so in lines
for standard error (lists cut to :data:`~fedforest.model.inputs.MAX_LISTED`),
as a plain dict for ``fedforest predict --report-json`` (format
:data:`REPORT_FORMAT`, version :data:`REPORT_VERSION`), and as the problems
``--strict`` refuses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ..columns import match_look_alikes, spelled
from ..model.inputs import MAX_LISTED, names_text

#: The format of ``fedforest predict --report-json``.
REPORT_FORMAT = "fedforest/predict-report"
REPORT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class FeatureGaps:
    """The rows one model feature is missing on, and why.

    Attributes
    ----------
    feature : str
        The model's name.
    column : str
        The site's name of it (as in the file, or its global name when absent).
    kind : str
        ``numeric`` or ``categorical``.
    share : float
        Its share of the forest's splits.
    absent : bool
        The table has no such column: missing on every row.
    empty : int
        Rows whose field is empty.
    unseen : dict of str to int
        Levels the model never saw, with their rows.
    levels : list of str
        The model's levels of a categorical feature.
    """

    feature: str
    column: str
    kind: str
    share: float
    absent: bool
    empty: int
    unseen: dict
    levels: list

    def missing(self, n_rows: int) -> int:
        """Rows routed as missing on this feature."""
        return n_rows if self.absent else self.empty + sum(self.unseen.values())

    def to_dict(self, n_rows: int) -> dict:
        return {
            "feature": self.feature,
            "column": self.column,
            "kind": self.kind,
            "share_of_splits": round(float(self.share), 6),
            "absent": self.absent,
            "empty_rows": n_rows if self.absent else self.empty,
            "empty_in_every_row": self.absent or (n_rows > 0 and self.empty == n_rows),
            "unseen_levels": dict(self.unseen),
            "unseen_rows": sum(self.unseen.values()),
            "missing_rows": self.missing(n_rows),
        }


@dataclasses.dataclass(frozen=True)
class InputGaps:
    """Every model feature's :class:`FeatureGaps` for one table of ``n_rows`` rows."""

    data: str
    n_rows: int
    features: list
    rows_with_gaps: int

    @property
    def gaps(self) -> list[FeatureGaps]:
        """The features missing on some row, most used by the forest first."""
        found = [f for f in self.features if f.missing(self.n_rows)]
        return sorted(found, key=lambda f: (-f.share, f.feature))

    def problems(self) -> list[str]:
        """One phrase per feature missing on some row (what ``--strict`` refuses)."""
        out = []
        for f in self.gaps:
            if f.absent:
                out.append(f"{f.column}: absent")
                continue
            parts = []
            if f.empty == self.n_rows:
                parts.append("empty in every row")
            elif f.empty:
                parts.append(f"empty in {f.empty} row(s)")
            if f.unseen:
                parts.append(f"levels the model never saw: {_levels(f.unseen)}")
            out.append(f"{f.column}: " + "; ".join(parts))
        return out

    def lines(self, share_text: Callable[[float], str]) -> list[str]:
        """What standard error says of the features routed as missing (absent ones are said
        by the caller, with the forest's splits)."""
        out = []
        listed = [f for f in self.gaps if not f.absent]
        for f in listed[:MAX_LISTED]:
            splits = f"{share_text(f.share)} of the forest's splits"
            if f.empty == self.n_rows:
                out.append(
                    f"{f.column}: empty in every row ({splits}): missing on every row, as if absent"
                )
            elif f.empty:
                out.append(f"{f.column}: empty in {f.empty} of {self.n_rows} rows ({splits})")
            if f.unseen:
                rows = sum(f.unseen.values())
                out.append(
                    f"{f.column}: {rows} row(s) hold levels the model never saw, read as "
                    f"missing: {_levels(f.unseen)}{_near_misses(f.unseen, f.levels)}; the "
                    f"model's levels: {names_text([repr(v) for v in f.levels])}"
                )
        if len(listed) > MAX_LISTED:
            out.append(f"and {len(listed) - MAX_LISTED} more features with missing values")
        if self.rows_with_gaps:
            out.append(
                f"{self.rows_with_gaps} of {self.n_rows} rows have a feature of the model routed "
                "as missing (absent, empty or an unseen level)"
            )
        return out

    def to_dict(self) -> dict:
        """The report as plain values (``--report-json``)."""
        return {
            "format": REPORT_FORMAT,
            "version": REPORT_VERSION,
            "data": self.data,
            "rows": self.n_rows,
            "rows_with_missing": self.rows_with_gaps,
            "features": [f.to_dict(self.n_rows) for f in self.features],
        }


def _levels(unseen: Mapping[str, int]) -> str:
    return names_text(
        [f"{level!r} ({rows} row{'s' * (rows != 1)})" for level, rows in unseen.items()]
    )


def _near_misses(unseen: Mapping[str, int], levels: Sequence[str]) -> str:
    """A note naming the unseen levels that read like a model level
    (:func:`~fedforest.columns.match_look_alikes`: case, spaces, invisible characters,
    Unicode form), each YAML-escaped so that the two look different."""
    pairs = [
        f"{spelled(u)} for {spelled(v)}"
        for u, v in match_look_alikes(list(map(str, levels)), list(unseen)).items()
    ]
    if not pairs:
        return ""
    return (
        f" (these read like the model's levels but differ in case, spaces, invisible "
        f"characters or Unicode form: {names_text(pairs, limit=5)}; levels must match exactly)"
    )


def input_gaps(
    data: str,
    X,
    features: Sequence[str],
    categories: Mapping[str, Sequence[str]],
    done,
    shares: Mapping[str, float],
    local: Callable[[str], str],
) -> InputGaps:
    """The gaps of the model's input ``done`` (:class:`~fedforest.federation.model_input.ModelInput`)
    made from the file ``data``; ``shares`` gives each feature's share of the forest's splits,
    ``local`` a feature's name in the site's words."""
    n_rows = len(X)
    absent = set(done.absent)
    found = []
    for feature in features:
        levels = list(categories.get(feature, ()))
        found.append(
            FeatureGaps(
                feature=feature,
                column=local(feature),
                kind="categorical" if feature in categories else "numeric",
                share=float(shares.get(feature, 0.0)),
                absent=feature in absent,
                empty=int(done.empty.get(feature, 0)),
                unseen=dict(done.unseen.get(feature, {})),
                levels=levels,
            )
        )
    values = np.asarray(X, dtype=float) if X.shape[1] else np.zeros((n_rows, 0))
    with_gaps = int(np.isnan(values).any(axis=1).sum()) if values.size else 0
    if absent and n_rows:
        with_gaps = n_rows
    return InputGaps(data, n_rows, found, with_gaps)
