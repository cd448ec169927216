"""The global schema: features by name across sites with different columns.

Each site describes its table (:class:`SiteSchema`: column names and kinds,
category levels, class labels, row count) without sending a single row. The
server joins them into a :class:`GlobalSchema`: the union of features by name,
one global code per category level, the global class list and the *shared*
features every site has. Contradictions are refused with a message naming the
sites and the column or labels: a column numeric at one site and categorical at
another; names, levels or class labels that differ only by case or surrounding
whitespace, invisible characters or Unicode form across sites (they read alike:
:func:`~fedforest.columns.reading_key`), or two columns of one site that read
alike; a categorical column with more than ``MAX_LEVELS``
levels over all sites; class labels of different types, or label sets of two
sites that are disjoint or differ while neither contains the other (a coding
difference such as 0/1 against 1/2). A site whose labels are a strict subset
of another's only lacks some classes (:func:`lacking_classes`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import pandas as pd

from .. import protocol
from ..columns import (
    as_level_strings,
    class_labels,
    clean_name,
    column_kind,
    look_alike_groups,
    reading_key,
    spelled,
)
from ..errors import SchemaError
from ..model.payload_checks import MAX_FEATURES, MAX_LEVELS, MAX_ROWS
from ..validation import PayloadReader, listing
from ..vocabulary import FEATURE_KINDS as KINDS
from .time_grid import MAX_GRID_POINTS, QUANTILE_LEVELS

FORMAT_SITE = protocol.SITE_SCHEMA
FORMAT_GLOBAL = protocol.GLOBAL_SCHEMA

logger = logging.getLogger(__name__)


@dataclass
class SiteSchema:
    """What one site says about its table (no rows).

    Parameters
    ----------
    site : str
    columns : list of str
        Feature columns, by global name.
    kinds : dict of str to {"numeric", "categorical"}
    levels : dict of str to list of str
        Levels seen at this site for each categorical column.
    classes : list of int or str
        Class labels present at this site.
    n_rows : int
    event_times : list of float
        A survival job: the site's coarse event-time quantiles
        (:func:`~fedforest.federation.time_grid.site_time_quantiles`; empty when it
        has too few events, or in any other job).
    """

    site: str
    columns: list[str]
    kinds: dict[str, str]
    levels: dict[str, list[str]] = field(default_factory=dict)
    classes: list = field(default_factory=list)
    n_rows: int = 0
    event_times: list[float] = field(default_factory=list)

    @classmethod
    def from_frame(
        cls,
        site: str,
        frame: pd.DataFrame,
        target: str,
        categorical: Sequence[str] = (),
        task: str = "classification",
        time: str | None = None,
        event_times: Sequence[float] = (),
    ) -> SiteSchema:
        """Describe a site's table (already renamed to global column names).

        Columns listed in ``categorical`` and every non-numeric column are
        categorical; their levels are the distinct non-missing values as
        strings. A regression target (``task="regression"``) has no classes:
        ``classes`` is empty, and nothing about the target's values is sent.
        A survival job (``task="survival"``: ``target`` is the event column,
        ``time`` the time column, neither a feature) has no classes either; it
        sends ``event_times``, the site's coarse event-time quantiles.
        """
        if target not in frame.columns:
            raise SchemaError(
                f"site {site!r}: target column {target!r} is not in the table "
                f"(columns: {list(frame.columns)})"
            )
        unknown = [c for c in categorical if c not in frame.columns]
        if unknown:
            raise SchemaError(f"site {site!r}: categorical columns {unknown} are not in the table")
        columns = [str(c) for c in frame.columns if c != target and c != time]
        if not columns:
            raise SchemaError(f"site {site!r}: the table has no feature column besides {target!r}")
        alike = look_alike_groups([*columns, str(target)])
        if alike:
            raise SchemaError(
                f"site {site!r}: columns {alike[0]} have names that read alike (case, spaces, "
                "invisible characters or Unicode form); allowed: names that read differently: "
                "rename one with renames in the site's YAML, or drop it with drop_columns"
            )
        kinds, levels = {}, {}
        for col in columns:
            series = frame[col]
            kinds[col] = column_kind(series, col in categorical)
            if kinds[col] == "categorical":
                levels[col] = _sorted_levels(set(as_level_strings(series).dropna().unique()))
                if len(levels[col]) > MAX_LEVELS:
                    raise SchemaError(
                        f"site {site!r}: column {col!r} has {len(levels[col])} distinct values, "
                        f"more than MAX_LEVELS = {MAX_LEVELS}: it is free text or an "
                        f"identifier; allowed: categorical columns of at most {MAX_LEVELS} "
                        "levels: list it under drop_columns in the site's YAML"
                    )
        y = frame[target]
        if y.isna().any():
            raise SchemaError(
                f"site {site!r}: target column {target!r} has {int(y.isna().sum())} missing values"
            )
        classes = [] if task in ("regression", "survival") else class_labels(y)
        return cls(
            site,
            columns,
            kinds,
            levels,
            classes,
            int(frame.shape[0]),
            [float(t) for t in event_times],
        )

    def to_payload(self) -> dict:
        return {
            "format": FORMAT_SITE,
            "version": protocol.FORMATS[FORMAT_SITE],
            "site": self.site,
            "columns": list(self.columns),
            "kinds": [self.kinds[c] for c in self.columns],
            "levels": {k: list(v) for k, v in self.levels.items()},
            "classes": list(self.classes),
            "n_rows": int(self.n_rows),
            "event_times": [float(t) for t in self.event_times],
        }

    @classmethod
    def from_payload(cls, payload: Mapping, sender: str | None = None) -> SiteSchema:
        r = PayloadReader(payload, FORMAT_SITE, sender)
        r.check_keys({"site", "columns", "kinds", "levels", "classes", "n_rows", "event_times"})
        site = r.get("site")
        if not isinstance(site, str) or not site:
            r.fail("field 'site' must be a non-empty string")
        columns = r.read_str_list("columns", MAX_FEATURES)
        kinds = r.read_str_list("kinds", MAX_FEATURES, unique=False)
        if len(kinds) != len(columns) or any(k not in KINDS for k in kinds):
            r.fail(f"field 'kinds' must give one of {list(KINDS)} per column")
        levels = r.get("levels")
        if not isinstance(levels, Mapping):
            r.fail("field 'levels' must be a dict")
        for k, v in levels.items():
            if k not in columns or kinds[columns.index(k)] != "categorical":
                r.fail(f"field 'levels' names {k!r}, which is not a categorical column")
            if not isinstance(v, (list, tuple)) or len(v) > MAX_LEVELS:
                r.fail(f"levels[{k!r}] must be a list of at most {MAX_LEVELS} strings")
            if not all(isinstance(x, str) for x in v):
                r.fail(f"levels[{k!r}] must hold strings")
        classes = r.get("classes")
        if not isinstance(classes, (list, tuple)) or not all(
            isinstance(c, (str, int)) and not isinstance(c, bool) for c in classes
        ):
            r.fail("field 'classes' must be a list of strings or integers")
        n_rows = r.read_number("n_rows", lo=0, hi=MAX_ROWS)
        return cls(
            site,
            columns,
            dict(zip(columns, kinds, strict=True)),
            {k: list(v) for k, v in levels.items()},
            list(classes),
            int(n_rows),
            _read_times(r, "event_times", len(QUANTILE_LEVELS), strictly=False),
        )


@dataclass
class GlobalSchema:
    """The union of the sites' tables, by feature name.

    Attributes
    ----------
    features : list of str
        Every feature, sorted by name; global feature indices refer to it.
    categories : dict of str to list of str
        Levels of each categorical feature; level ``k`` has global code ``k``.
    classes : list
        Sorted union of class labels.
    shared : list of str
        Features every site has.
    site_columns : dict of str to list of str
    site_rows : dict of str to int
    times : list of float
        A survival job's time grid (:func:`~fedforest.federation.time_grid.agree_time_grid`),
        set by the server after :meth:`build`; empty in any other job.
    """

    features: list[str]
    categories: dict[str, list[str]]
    classes: list
    shared: list[str]
    site_columns: dict[str, list[str]]
    site_rows: dict[str, int]
    times: list[float] = field(default_factory=list)

    @classmethod
    def build(cls, sites: Sequence[SiteSchema]) -> GlobalSchema:
        """Join site schemas; refuse contradictions, naming the site and column."""
        if not sites:
            raise SchemaError("no site schema to join")
        names = [s.site for s in sites]
        if len(set(names)) != len(names):
            raise SchemaError(f"duplicate site names {names}")
        kind_of: dict[str, tuple[str, str]] = {}
        levels: dict[str, set[str]] = {}
        by_name = {s.site: s for s in sites}
        for s in sites:
            for col in s.columns:
                kind = s.kinds[col]
                if col in kind_of and kind_of[col][0] != kind:
                    other_kind, other_site = kind_of[col]
                    text_site = s.site if kind == "categorical" else other_site
                    raise SchemaError(
                        f"column {col!r} is {kind} at site {s.site!r} but {other_kind} at site "
                        f"{other_site!r}{_levels_note(by_name[text_site], col)}; allowed: one "
                        "kind at every site: numbers at every site (booleans, dates, marks such "
                        "as '?' and numbers written with decimal commas are text), or a "
                        "category at every site (its levels written out, never as codes; list "
                        "an integer-coded column under categorical at both sites or neither)"
                    )
                kind_of.setdefault(col, (kind, s.site))
                if kind == "categorical":
                    levels.setdefault(col, set()).update(s.levels.get(col, []))
        _refuse_spellings({s.site: s.columns for s in sites}, "column names", _RENAME_HINT)
        for col in sorted(levels):
            _refuse_spellings(
                {s.site: s.levels.get(col, []) for s in sites if col in s.levels},
                f"levels of categorical column {col!r}",
                "one spelling per level at every site: correct the values in the data file "
                "of the sites named",
            )
            if len(levels[col]) > MAX_LEVELS:
                per_site = ", ".join(
                    f"{s.site}: {len(s.levels[col])}" for s in sites if col in s.levels
                )
                raise SchemaError(
                    f"categorical column {col!r} has {len(levels[col])} distinct levels over "
                    f"all sites ({per_site}), more than MAX_LEVELS = {MAX_LEVELS}: it is free "
                    f"text or an identifier; allowed: at most {MAX_LEVELS} levels: list it "
                    "under drop_columns in the sites' YAML files"
                )
        label_types = {type(c) for s in sites for c in s.classes}
        if len(label_types) > 1:
            by_site = {s.site: sorted({type(c).__name__ for c in s.classes}) for s in sites}
            raise SchemaError(
                f"class labels have different types across sites: {by_site} (labels per site: "
                f"{_labels_by_site(sites)}); allowed: one type: map one site's labels with "
                "label_map: {local label: global label} in its YAML"
            )
        _refuse_spellings({s.site: s.classes for s in sites}, "class labels", _LABEL_MAP_HINT)
        _refuse_label_codings(sites)
        classes = sorted({c for s in sites for c in s.classes})
        features = sorted(kind_of)
        shared = [f for f in features if all(f in s.columns for s in sites)]
        for site, lacking in lacking_classes(sites).items():
            logger.warning("site %s has no row of class(es) %s", site, lacking)
        return cls(
            features=features,
            categories={c: _sorted_levels(v) for c, v in sorted(levels.items())},
            classes=classes,
            shared=shared,
            site_columns={s.site: [c for c in features if c in s.columns] for s in sites},
            site_rows={s.site: s.n_rows for s in sites},
        )

    @property
    def sites(self) -> list[str]:
        return list(self.site_columns)

    def encode(self, frame: pd.DataFrame, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """Feature columns of ``frame`` as floats, categorical levels as global codes.

        Parameters
        ----------
        frame : DataFrame
            A site's table with global column names (extra columns are ignored).
        columns : sequence of str, optional
            Columns to return (default: the features of the schema present in
            ``frame``).
        """
        from .model_input import encode_features

        if columns is None:
            columns = [f for f in self.features if f in frame.columns]
        return encode_features(frame, self.categories, columns)

    def to_payload(self) -> dict:
        return {
            "format": FORMAT_GLOBAL,
            "version": protocol.FORMATS[FORMAT_GLOBAL],
            "features": list(self.features),
            "categories": {k: list(v) for k, v in self.categories.items()},
            "classes": list(self.classes),
            "shared": list(self.shared),
            "site_columns": {k: list(v) for k, v in self.site_columns.items()},
            "site_rows": dict(self.site_rows),
            "times": [float(t) for t in self.times],
        }

    @classmethod
    def from_payload(cls, payload: Mapping, sender: str | None = None) -> GlobalSchema:
        r = PayloadReader(payload, FORMAT_GLOBAL, sender)
        keys = {
            "features",
            "categories",
            "classes",
            "shared",
            "site_columns",
            "site_rows",
            "times",
        }
        r.check_keys(keys)
        features = r.read_str_list("features", MAX_FEATURES)
        shared = r.read_str_list("shared", MAX_FEATURES)
        if not set(shared) <= set(features):
            r.fail("field 'shared' names features outside 'features'")
        cats = r.get("categories")
        if not isinstance(cats, Mapping) or not all(
            k in features and isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v)
            for k, v in cats.items()
        ):
            r.fail("field 'categories' must map features to lists of strings")
        site_columns = r.get("site_columns")
        known = set(features)
        if not isinstance(site_columns, Mapping) or not all(
            isinstance(v, (list, tuple)) and all(isinstance(c, str) and c in known for c in v)
            for v in site_columns.values()
        ):
            r.fail("field 'site_columns' must map sites to lists of features")
        site_rows = r.get("site_rows")
        if not isinstance(site_rows, Mapping) or not all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_ROWS
            for v in site_rows.values()
        ):
            r.fail(f"field 'site_rows' must map sites to whole numbers in [0, {MAX_ROWS}]")
        classes = r.get("classes")
        if not isinstance(classes, (list, tuple)) or not all(
            isinstance(c, (str, int)) and not isinstance(c, bool) for c in classes
        ):
            r.fail("field 'classes' must be a list of strings or integers")
        return cls(
            features=features,
            categories={k: list(v) for k, v in cats.items()},
            classes=list(classes),
            shared=shared,
            site_columns={k: list(v) for k, v in site_columns.items()},
            site_rows={k: int(v) for k, v in site_rows.items()},
            times=_read_times(r, "times", MAX_GRID_POINTS, strictly=True),
        )


def _read_times(r: PayloadReader, key: str, limit: int, strictly: bool) -> list[float]:
    """A list of at most ``limit`` finite times >= 0, ascending (``strictly``: strictly)."""
    value = r.get(key)
    if not isinstance(value, (list, tuple)) or len(value) > limit:
        r.fail(f"field {key!r} must be a list of at most {limit} times")
    if not all(
        isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and t >= 0
        for t in value
    ):
        r.fail(f"field {key!r} must hold finite times >= 0")
    steps = [b - a for a, b in zip(value, value[1:], strict=False)]
    if any(d <= 0 if strictly else d < 0 for d in steps):
        r.fail(f"field {key!r} must be {'strictly ' if strictly else ''}increasing")
    if strictly and len(value) == 1:
        r.fail(f"field {key!r} must hold no time or at least two")
    return [float(t) for t in value]


def refuse_no_shared_feature(schema: GlobalSchema) -> None:
    """Refuse a schema whose sites share no feature (a pooled forest needs one every site has)."""
    if not schema.shared:
        raise SchemaError(
            "the sites share no column: at least one feature every site has is needed "
            f"(columns per site: {_columns_by_site(schema.site_columns)}); allowed: sites with a "
            "common feature: "
            "rename a column with renames so that it has the same global name at every site"
        )


def _columns_by_site(site_columns: Mapping) -> str:
    return "; ".join(f"{site}: [{listing(cols)}]" for site, cols in site_columns.items())


def lacking_classes(sites: Sequence[SiteSchema]) -> dict[str, list]:
    """The classes each site has no row of, for the sites that lack any.

    A site whose class labels are a strict subset of another site's is
    allowed (:meth:`GlobalSchema.build`): its trees never predict the classes it
    lacks. The global schema's payload does not carry per-site classes, so this
    is computed from the sites' schemas.

    Returns
    -------
    dict of str to list
        ``{site: [classes of the union it lacks, in the global order]}``, by
        site name; a site with every class is left out.
    """
    classes = sorted({c for s in sites for c in s.classes})
    out = {}
    for s in sorted(sites, key=lambda s: s.site):
        lacking = [c for c in classes if c not in set(s.classes)]
        if lacking:
            out[s.site] = lacking
    return out


_RENAME_HINT = (
    "one name per column at every site: rename it with renames: {local name: global name} in "
    "the YAML of the sites named"
)
_LABEL_MAP_HINT = (
    "one spelling per class label at every site: map the labels with label_map: "
    "{local label: global label} in the YAML of the sites named"
)


def _levels_note(site: SiteSchema, col: str) -> str:
    """The levels a site holds in a column it reads as categorical, and what they look like."""
    from .csv_text import number_text_hint

    found = site.levels.get(col, [])
    if not found:
        return ""
    shown = listing(map(_spelled, found), limit=5)
    return f" (its values at {site.site!r}: {shown}{number_text_hint(found[:20])})"


def _labels_by_site(sites: Sequence[SiteSchema]) -> str:
    return "; ".join(
        f"{s.site}: [{listing(map(repr, sorted(s.classes)))}]"
        for s in sorted(sites, key=lambda s: s.site)
    )


def _refuse_spellings(by_site: Mapping[str, Iterable], what: str, allowed: str) -> None:
    """Refuse values that differ only as written across sites (:func:`~fedforest.columns.reading_key`:
    case, spaces, invisible characters, Unicode form).

    Spellings of one value (``"Yes"``, ``"yes"``, ``"yes "``) clash when the
    sites do not all use the same set of them. The message names every
    spelling with its sites and suggests, per site, a mapping onto the
    spelling most sites use.
    """
    groups: dict[str, dict[str, set[str]]] = {}
    for site, values in sorted(by_site.items()):
        for value in values:
            if isinstance(value, str):
                groups.setdefault(reading_key(value), {}).setdefault(site, set()).add(value)
    found, fixes = [], {}
    for canonical in sorted(groups):
        per_site = groups[canonical]
        spellings = set().union(*per_site.values())
        if len(spellings) < 2 or all(used == spellings for used in per_site.values()):
            continue
        users = {v: sorted(s for s, used in per_site.items() if v in used) for v in spellings}
        # the spelling most sites use; on a tie, one without spaces, then in lower case
        best = min(
            spellings,
            key=lambda v: (-len(users[v]), v != clean_name(v), v != v.lower(), v),
        )
        found.append(
            ", ".join(
                f"{_spelled(v)} at {', '.join(map(repr, users[v]))}" for v in sorted(spellings)
            )
        )
        for spelling in sorted(spellings - {best}):
            for site in users[spelling]:
                fixes.setdefault(site, {})[spelling] = best
    if not found:
        return
    per_site = "; ".join(
        f"{k}: [{listing(map(_spelled, sorted(v, key=str)))}]" for k, v in sorted(by_site.items())
    )
    suggestion = "; ".join(
        f"site {site!r}: {{"
        + ", ".join(f"{_spelled(a)}: {_spelled(b)}" for a, b in mapping.items())
        + "}"
        for site, mapping in sorted(fixes.items())
    )
    raise SchemaError(
        f"{what} differ only by case, spaces, invisible characters or Unicode form across "
        "sites: "
        f"{'; '.join(found)} (per site: {per_site}); allowed: {allowed} (e.g. {suggestion})"
    )


def _spelled(value) -> str:
    return spelled(value) if isinstance(value, str) else repr(value)


def _refuse_label_codings(sites: Sequence[SiteSchema]) -> None:
    """Refuse two sites whose label sets are disjoint, or overlap while neither contains
    the other; a strict subset (a site lacking a class) is fine."""
    by_site = {s.site: set(s.classes) for s in sites}
    for a, b in combinations(sorted(by_site), 2):
        la, lb = by_site[a], by_site[b]
        if la <= lb or lb <= la:
            continue
        pair = f"sites {a!r} (labels {sorted(la)}) and {b!r} (labels {sorted(lb)})"
        if not la & lb:
            problem = (
                f"{pair} have no class label in common: the target is coded differently, or "
                "one site names the wrong target column"
            )
        else:
            problem = (
                f"{pair} have class labels that differ while neither set contains the other "
                f"({a!r} lacks {sorted(lb - la)}, {b!r} lacks {sorted(la - lb)}): a coding "
                "difference such as 0/1 against 1/2"
            )
        raise SchemaError(
            f"{problem} (labels per site: {_labels_by_site(sites)}); allowed: label sets of "
            "which one contains the other (a site may lack a class): check target in both "
            "YAML files, and map one site's labels onto the other's with label_map: "
            "{local label: global label} in its YAML"
        )


def _sorted_levels(levels: set[str]) -> list[str]:
    """Numeric-looking levels in numeric order, others alphabetically."""

    def key(v: str):
        try:
            return (0, float(v), v)
        except ValueError:
            return (1, 0.0, v)

    return sorted(levels, key=key)
