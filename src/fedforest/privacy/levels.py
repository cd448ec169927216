"""Rare category levels: the levels a site sends as one level, or as missing.

A level with fewer than ``min_level_rows`` rows at the site may identify a
patient; :func:`hide_rare_levels` rewrites the site's table so that those
levels read :data:`OTHER_LEVEL` before the table is described and encoded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from ..columns import as_level_strings, column_kind

#: The level that rare levels are sent as (see :func:`hide_levels`).
OTHER_LEVEL = "(other)"


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
    Levels are the strings the schema sends (:func:`~fedforest.columns.as_level_strings`); a
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
