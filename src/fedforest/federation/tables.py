"""A site's data file: read as a whole and checked, before anything is learned from it.

The file is checked as a whole (:func:`read_table`), when the job is built and
when the site starts: UTF-8 text separated by commas, every row with as many
fields as the header, values read as what they are (booleans as text: a column
of ``True``/``False`` is a category; :mod:`~fedforest.federation.csv_text`),
distinct column names, no index-like column (an empty or ``Unnamed: N`` name,
or values exactly 0..n-1 or 1..n in row order), numbers within float32's
range, no numeric column with stray text (a boolean among numbers, numbers
with decimal commas or thousands separators), text columns with at most
``MAX_LEVELS`` distinct values, at least ``MIN_ROWS`` rows and a target of
class labels. A table given in memory gets the same checks
(:func:`check_table`), and :func:`check_data` adds what the job's build
checks: two classes and the site's ``privacy`` block against the table.

Every function takes the site's configuration
(:class:`~fedforest.federation.config.SiteConfig`): its ``data_path``,
``target``, ``categorical``, ``renames``, ``drop_columns`` and ``label_map``
say how to read the file. An error is a :class:`~fedforest.errors.ConfigError`
naming the site's YAML, the data file, the column (and line), the bad value
and what is allowed.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import re
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import NoReturn

import numpy as np
import pandas as pd

from ..columns import (
    as_level_strings,
    class_labels,
    clean_name,
    column_kind,
    look_alike_note,
    name_problem,
    normalize_labels,
    spelled,
)
from ..errors import ConfigError
from ..model.inputs import FLOAT32_MAX, names_text
from ..model.payload_checks import MAX_LEVELS
from ..validation import ConfigChecker
from .csv_text import parse_csv, read_csv_text, stray_text
from .model_input import global_names
from .site_rules import check_column_names

logger = logging.getLogger(__name__)

#: The fewest rows a site needs to train, validate and test.
MIN_ROWS = 10
#: How pandas names a column with an empty header field (a saved index).
UNNAMED = re.compile(r"Unnamed: \d+(_level_\d+)?")


def check_data(site) -> list[str]:
    """Check the data file as a whole (see :func:`read_table`); return its global columns.

    Besides the rules of :func:`read_table`, the target must hold at least
    two classes (when the site runs, the server drops a site with a single
    class instead, naming it), and the ``privacy`` block of this file must
    fit the table (:meth:`SiteConfig.check_privacy
    <fedforest.federation.config.SiteConfig.check_privacy>` without ``complete``).

    Parameters
    ----------
    site : SiteConfig

    Raises
    ------
    ConfigError
        If the file is missing or unreadable, breaks a rule of
        :func:`read_table`, the target, categorical, renamed or dropped
        columns are not in it, or the privacy block does not fit it.
    """
    frame = read_table(site)
    if getattr(site, "task", "classification") in ("regression", "survival"):
        site.check_privacy(frame, complete=False)
        return list(frame.columns)
    classes = class_labels(frame[site.target])
    if len(classes) < 2:
        _data_error(
            site,
            f"target column {site.target!r} has a single class {classes}"
            + (" after label_map" if site.label_map else ""),
            "a target with at least two classes",
        )
    site.check_privacy(frame, complete=False)
    return list(frame.columns)


def read_table(site) -> pd.DataFrame:
    """Read the data file after checking it; the table the site works on.

    The file must be UTF-8 text (a byte-order mark is fine) whose rows all
    have as many fields as the header, with distinct column names.
    ``drop_columns`` are never parsed; then :func:`check_table` applies.

    Parameters
    ----------
    site : SiteConfig

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
    path = Path(site.data_path)
    if not path.is_file():
        raise ConfigError(
            f"{site.source}: key 'data_path' is {site.data_path!r}; "
            "allowed: a path to an existing CSV file (file not found)"
        )
    fail = partial(_data_error, site)
    text, header, lines = read_csv_text(path, fail)
    names = [h if h.strip() else f"Unnamed: {i}" for i, h in enumerate(header)]
    _check_distinct(names, fail)
    _check_drop_columns(site, names)
    keep = [i for i, name in enumerate(names) if name not in site.drop_columns]
    try:
        frame = parse_csv(text, names, keep)
    except Exception as err:  # noqa: BLE001 - any parse error is reported the same way
        raise ConfigError(f"{site.source}: data file {path} cannot be read as CSV: {err}") from err
    if len(frame) != len(lines):  # the two readers disagree on a row: show row numbers
        lines = None
    frame = check_table(site, frame, lines=lines, from_file=True)
    _remember(site, TableSummary.of(frame, site.target))
    return frame


@dataclasses.dataclass(frozen=True)
class TableSummary:
    """What the job's checks need of a checked table: its global columns and its target.

    Attributes
    ----------
    columns : list of str
    target : ndarray
        The target column as the site reads it (``label_map`` applied, labels normalised).
    """

    columns: list
    target: np.ndarray

    @classmethod
    def of(cls, frame: pd.DataFrame, target: str) -> TableSummary:
        return cls([str(x) for x in frame.columns], np.asarray(normalize_labels(frame[target])))

    @property
    def n_rows(self) -> int:
        return len(self.target)


def read_csv_checked(path, fail) -> pd.DataFrame:
    """Read a CSV file with the file rules of :func:`read_table`, every column kept.

    UTF-8 text, the same number of fields on every row, a comma separator
    (a file separated by ``;``, tabs, ``|`` or spaces is refused naming it,
    :func:`~fedforest.federation.csv_text.read_csv_text`), distinct column
    names (pandas would read a second ``bmi`` as ``bmi.1``) and values read
    as what they are (booleans as text, :func:`~fedforest.federation.csv_text.parse_csv`).
    For tables that are not a site's data file, such as the rows
    ``fedforest predict`` scores.

    Parameters
    ----------
    path : path-like
    fail : callable
        ``fail(what, allowed)`` raises the caller's error, naming the file.

    Returns
    -------
    DataFrame
    """
    return _read_checked(path, fail)[0]


def read_site_csv(path, fail, exempt: Sequence[str] = ()) -> pd.DataFrame:
    """Read a table that is a site without a site YAML, with the data file's own rules.

    :func:`read_csv_checked`, then the rules of :func:`check_table` that need
    no YAML: every column has a name (no ``Unnamed: N``: a saved index or a
    trailing comma), every name reads as written
    (:func:`~fedforest.columns.name_problem`: no invisible character, no
    spaces around it), and no column of numbers holds stray text
    (:func:`~fedforest.federation.csv_text.stray_text`: a boolean or a ``?``
    among numbers, decimal commas) nor a number beyond float32's range,
    except the columns of ``exempt`` (the target, the columns named
    categorical). For ``fedforest experiment``'s
    CSV files (``--site-files``, a dataset file).

    Parameters
    ----------
    path : path-like
    fail : callable
        ``fail(what, allowed)`` raises the caller's error, naming the file.
    exempt : sequence of str
        Columns whose values are not checked as numbers.
    """
    frame, lines = _read_checked(path, fail)
    for name in map(str, frame.columns):
        if UNNAMED.fullmatch(name):
            fail(
                f"column {name!r} has no name in the header, like a saved pandas index (or a "
                "trailing comma)",
                "named columns: remove the column (or save the file with index=False)",
            )
        why = name_problem(name)
        if why is not None:
            fail(
                f"column {spelled(name)} {why}",
                f"names as they read: correct the header (write {spelled(clean_name(name))})",
            )
    for name in map(str, frame.columns):
        if name in exempt:
            continue
        found = stray_text(frame[name])
        if found is not None:
            fail(
                f"column {name!r} {found.what} ({_where(frame[name], found.mask, lines)})"
                f"{found.note}",
                f"{found.allowed} (or name it in --categorical if it is a category)",
            )
        if pd.api.types.is_numeric_dtype(frame[name].dtype):
            values = frame[name].to_numpy(dtype=np.float64, na_value=np.nan)
            too_big = ~np.isnan(values) & ~(np.abs(values) <= FLOAT32_MAX)
            if too_big.any():
                fail(
                    f"column {name!r} holds {float(values[too_big][0])!r} "
                    f"({_where(frame[name], too_big, lines)}), whose magnitude overflows "
                    "float32, the type trees split on",
                    f"finite numbers of magnitude at most {FLOAT32_MAX:.7g}, with an empty field "
                    "for a missing value (check the unit or the value)",
                )
    return frame


def _read_checked(path, fail) -> tuple[pd.DataFrame, list[int] | None]:
    """:func:`read_csv_checked`'s table and each row's line in the file (None when the
    two readers disagree on a row)."""
    path = Path(path)
    text, header, lines = read_csv_text(path, fail)
    names = [h if h.strip() else f"Unnamed: {i}" for i, h in enumerate(header)]
    _check_distinct(names, fail)
    try:
        frame = parse_csv(text, names)
    except Exception as err:  # noqa: BLE001 - any parse error is reported the same way
        fail(f"cannot be read as CSV ({err})", "a comma-separated file")
    return frame, (lines if len(lines) == len(frame) else None)


def read_text_columns(path, columns: Sequence[str]) -> pd.DataFrame:
    """Columns of a CSV file as the text written there (no number or missing-value parsing),
    one row per row of :func:`read_csv_checked` (a file it accepted)."""
    path = Path(path)
    text, header, _ = read_csv_text(path, _unreadable(path))
    names = [h if h.strip() else f"Unnamed: {i}" for i, h in enumerate(header)]
    keep = [i for i, name in enumerate(names) if name in set(columns)]
    frame = pd.read_csv(
        io.StringIO(text), usecols=keep, dtype=str, keep_default_na=False, low_memory=False
    )
    frame.columns = [names[i] for i in keep]
    return frame[list(columns)]


def _unreadable(path: Path):
    def fail(what: str, allowed: str) -> NoReturn:
        raise ValueError(f"{path}: {what}; allowed: {allowed}")

    return fail


def table_summary(site) -> TableSummary:
    """The checked table's :class:`TableSummary` (the file is read again only when it or
    the site's configuration changed since it was last checked)."""
    cached = _recall(site)
    if cached is None:
        cached = TableSummary.of(read_table(site), site.target)
    return cached


def check_table(
    site, frame: pd.DataFrame, lines: Sequence[int] | None = None, from_file: bool = False
) -> pd.DataFrame:
    """Check a table read from the data file (or given in memory); return it ready.

    Drops ``drop_columns``, renames to global names, checks the rules of
    the module docstring and applies ``label_map`` to the target.
    ``from_file`` means :func:`read_table` read ``frame`` from the data
    file (the dropped columns were never parsed) and ``lines`` gives each
    row's line number there, for the messages. The value rule against
    index-like columns (0..n-1 or 1..n in row order) applies to data files
    only: a table built in memory has no saved index.

    Parameters
    ----------
    site : SiteConfig
    frame : DataFrame
    lines : sequence of int, optional
    from_file : bool

    Raises
    ------
    ConfigError
        Naming this YAML, the data file, the column (and line), the bad
        value and what is allowed.
    """
    c = ConfigChecker(site.source)
    names = [str(col) for col in frame.columns]
    frame = frame.set_axis(names, axis=1)
    if not from_file:
        _check_distinct(names, partial(_data_error, site))
        _check_drop_columns(site, names)
        frame = frame.drop(columns=[n for n in names if n in site.drop_columns])
    header = list(frame.columns)
    for local in site.renames:
        if local not in header:
            c.fail(
                f"renames.{local}",
                local,
                "a column of the data file: " + names_text(header) + look_alike_note(local, header),
            )
    columns = global_names(header, site.renames)
    for local, name in site.renames.items():
        if columns.count(name) > 1:
            c.fail(
                f"renames.{local}",
                name,
                "a global name no other column of the data file has: " + names_text(columns),
            )
    outcome_keys = [("target", site.target)]
    if getattr(site, "time", None) is not None:  # a survival job: the target is the event column
        outcome_keys = [("time", site.time), ("event", site.target)]
    for key, name in outcome_keys:
        if name not in columns:
            c.fail(
                key,
                name,
                "a column of the data file: "
                + names_text(columns)
                + look_alike_note(name, columns),
            )
    for col in site.categorical:
        if col not in columns:
            c.fail(
                "categorical",
                col,
                "columns of the data file: " + names_text(columns) + look_alike_note(col, columns),
            )
    frame = frame.set_axis(columns, axis=1)
    for local, name in zip(header, columns, strict=True):
        _check_unnamed(site, local, name)
    check_column_names(site, columns)  # names as they read, none two alike
    if len(frame) < MIN_ROWS:
        _data_error(
            site,
            f"has {len(frame)} rows; at least {MIN_ROWS} are needed to train, validate and test",
            f"a table of at least {MIN_ROWS} rows",
        )
    for local, name in zip(header, columns, strict=True):
        checked = _check_values(site, frame[name], local, name, lines, from_file)
        if checked is not frame[name]:
            frame[name] = checked
    _say_empty_columns(site, frame, header, columns)
    return _apply_label_map(site, frame, lines)


#: The empty columns already said, so that a build that reads a file twice says it once.
_SAID: set[tuple] = set()


def _say_empty_columns(site, frame: pd.DataFrame, header, columns) -> None:
    """Log a warning naming each feature column empty in every row: the site has no value
    of it, as if it lacked the column (its trees never split on it)."""
    for local, name in zip(header, columns, strict=True):
        if name in _outcomes(site) or not frame[name].isna().all():
            continue
        said = (site.source, str(site.data_path), name)
        if said in _SAID:
            continue
        if len(_SAID) >= 1024:
            _SAID.clear()
        _SAID.add(said)
        logger.warning(
            "%s: data file %s: column %r is empty in every row: the site has no value of it, "
            "as if it lacked the column (fill it in, or drop it with drop_columns: [%r])",
            site.source,
            site.data_path,
            local,
            local,
        )


def _data_error(site, what: str, allowed: str) -> NoReturn:
    raise ConfigError(f"{site.source}: data file {site.data_path}: {what}; allowed: {allowed}")


def _check_drop_columns(site, names: Sequence[str]) -> None:
    for name in site.drop_columns:
        if name not in names:
            ConfigChecker(site.source).fail(
                "drop_columns",
                name,
                "columns of the data file: "
                + names_text(list(names))
                + look_alike_note(name, names),
            )


def _check_unnamed(site, local: str, name: str) -> None:
    """A column whose header field was empty (``Unnamed: N``): a saved index or a trailing
    comma."""
    if UNNAMED.fullmatch(name):
        what = f"column {local!r}" + (f" (renamed to {name!r})" if name != local else "")
        _data_error(
            site,
            f"{what} has no name in the header, like a saved pandas index (or a trailing comma)",
            f"named feature columns: drop it with drop_columns: [{local!r}] in "
            f"{site.source} (or save the file with index=False), or name it with renames",
        )


def _check_values(
    site,
    series: pd.Series,
    local: str,
    name: str,
    lines: Sequence[int] | None,
    from_file: bool = True,
) -> pd.Series:
    """The rules on a column's values (stray text, float32 range, index-like, levels);
    returns the column."""
    what = f"column {local!r}" + (f" (renamed to {name!r})" if name != local else "")
    numeric = pd.api.types.is_numeric_dtype(series.dtype) and series.dtype != bool
    found = None if name in site.categorical or name == site.target else stray_text(series)
    if found is not None:
        _data_error(
            site,
            f"{what} {found.what} ({_where(series, found.mask, lines)}){found.note}",
            f"{found.allowed} (or list the column under categorical in {site.source} if it is "
            "a category)",
        )
    if numeric:
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        too_big = ~np.isnan(values) & ~(np.abs(values) <= FLOAT32_MAX)
        if too_big.any():
            bad = float(values[too_big][0])
            _data_error(
                site,
                f"{what} holds {bad!r} ({_where(series, too_big, lines)}), whose magnitude "
                "overflows float32, the type trees split on",
                f"finite numbers of magnitude at most {FLOAT32_MAX:.7g} (check the unit "
                "or the value)",
            )
        n = len(values)
        if from_file and n and not np.isnan(values).any():
            for start in (0, 1):
                if np.array_equal(values, np.arange(start, start + n)):
                    _data_error(
                        site,
                        f"{what} holds exactly {start}..{start + n - 1} in row order, like a "
                        "row index or record number",
                        f"feature columns only: drop it with drop_columns: [{local!r}] in "
                        f"{site.source}",
                    )
    if (
        name not in _outcomes(site)
        and column_kind(series, name in site.categorical) == "categorical"
    ):
        n_levels = int(as_level_strings(series).nunique(dropna=True))
        if n_levels > MAX_LEVELS:
            _data_error(
                site,
                f"{what} has {n_levels} distinct values, more than MAX_LEVELS = "
                f"{MAX_LEVELS}: it is free text or an identifier, not a category",
                f"categorical columns of at most {MAX_LEVELS} levels: drop it with "
                f"drop_columns: [{local!r}] in {site.source}",
            )
    return series


def _outcomes(site) -> list[str]:
    """The site's outcome columns (the target, and a survival job's time column)."""
    time = getattr(site, "time", None)
    return [site.target] + ([time] if time is not None else [])


#: What a survival job's event column may hold (read case-insensitively as text).
EVENT_TEXT = {"1": 1, "0": 0, "1.0": 1, "0.0": 0, "true": 1, "false": 0}


def _survival_outcome(site, frame: pd.DataFrame, lines: Sequence[int] | None) -> pd.DataFrame:
    """``job.task: survival``: the time column holds finite times >= 0 and the event column
    1/0 or true/false on every row; the event column becomes integers 0/1, the time floats."""
    time, event = frame[site.time], frame[site.target]
    for key, name, y in (("time", site.time, time), ("event", site.target, event)):
        missing = y.isna()
        if missing.any():
            _data_error(
                site,
                f"{key} column {name!r} has {int(missing.sum())} missing value(s) "
                f"({_where(y, missing, lines)})",
                f"a value on every row in a survival job (remove the rows without a {key})",
            )
    what = f"time column {site.time!r} (key 'time')"
    if time.dtype == bool or not pd.api.types.is_numeric_dtype(time.dtype):
        bad = pd.to_numeric(time, errors="coerce").isna() if time.dtype != bool else time.notna()
        example = time[bad].iloc[0] if bad.any() else time.iloc[0]
        _data_error(
            site,
            f"{what} holds {example!r} ({_where(time, pd.Series(bad, index=time.index), lines)}),"
            " not a number",
            "finite follow-up times >= 0 in a survival job",
        )
    t = time.to_numpy(dtype=np.float64)
    bad = ~np.isfinite(t) | (t < 0)
    if bad.any():
        _data_error(
            site,
            f"{what} holds {float(t[bad][0])!r} ({_where(time, pd.Series(bad, index=time.index), lines)})",
            "finite follow-up times >= 0 in a survival job",
        )
    text = event.map(
        lambda v: str(v).strip().lower() if not isinstance(v, bool) else str(v).lower()
    )
    codes = text.map(EVENT_TEXT)
    bad = codes.isna()
    if bad.any():
        _data_error(
            site,
            f"event column {site.target!r} (key 'event') holds {event[bad].iloc[0]!r} "
            f"({_where(event, bad, lines)})",
            "1 (the event happened) or 0 (censored), or true/false, on every row of a survival job",
        )
    frame = frame.copy()
    frame[site.time] = t
    frame[site.target] = codes.to_numpy(dtype=np.int64)
    return frame


def _refuse_missing_target(site, y: pd.Series, lines, allowed: str) -> None:
    missing = y.isna()
    if missing.any():
        _data_error(
            site,
            f"target column {site.target!r} has {int(missing.sum())} missing value(s) "
            f"({_where(y, missing, lines)})",
            allowed,
        )


def _numeric_target(site, frame: pd.DataFrame, lines: Sequence[int] | None) -> pd.DataFrame:
    """``job.task: regression``: the target holds a finite number on every row."""
    y = frame[site.target]
    what = f"target column {site.target!r}"
    _refuse_missing_target(
        site, y, lines, "a number on every row (remove the rows without an outcome)"
    )
    if y.dtype == bool or not pd.api.types.is_numeric_dtype(y.dtype):
        text = pd.to_numeric(y, errors="coerce").isna() if y.dtype != bool else y.notna()
        example = y[text].iloc[0] if text.any() else y.iloc[0]
        _data_error(
            site,
            f"{what} holds {example!r} ({_where(y, pd.Series(text, index=y.index), lines)}): a "
            "class label, not a number, and job.task is regression",
            "numbers in a regression job; for class labels set job.task: classification in "
            "job.yaml",
        )
    values = y.to_numpy(dtype=np.float64)
    distinct = np.unique(values)
    if distinct.size <= 2:
        _data_error(
            site,
            f"{what} holds only the values {distinct.tolist()}: an outcome with two values is "
            "a class label, and job.task is regression",
            "a number with more than two distinct values in a regression job; for a yes/no "
            "outcome set job.task: classification in job.yaml",
        )
    frame = frame.copy()
    frame[site.target] = values
    return frame


def _apply_label_map(site, frame: pd.DataFrame, lines: Sequence[int] | None) -> pd.DataFrame:
    """Check the target holds class labels (numbers, for regression); map them with
    ``label_map``."""
    if getattr(site, "task", "classification") == "regression":
        return _numeric_target(site, frame, lines)
    if getattr(site, "task", "classification") == "survival":
        return _survival_outcome(site, frame, lines)
    c = ConfigChecker(site.source)
    y = frame[site.target]
    what = f"target column {site.target!r}"
    _refuse_missing_target(
        site, y, lines, "a class label on every row (remove the unlabelled rows)"
    )
    if pd.api.types.is_float_dtype(y.dtype):
        fractional = y.to_numpy() != np.round(y.to_numpy())
        if fractional.any():
            _data_error(
                site,
                f"{what} holds non-integer numbers such as {float(y[fractional].iloc[0])!r} "
                f"({_where(y, pd.Series(fractional, index=y.index), lines)}): a measurement, "
                "not a class label",
                "class labels (integers or text): is 'target' the right column? To predict "
                "the number itself, set job.task: regression in job.yaml",
            )
    labels = normalize_labels(y)
    present = sorted(set(labels.tolist()))
    lookup = {str(k): v for k, v in site.label_map.items()}
    for key in site.label_map:
        if str(key) not in {str(v) for v in present}:
            c.fail(
                f"label_map.{key}",
                key,
                f"labels of the target column {site.target!r}: "
                + names_text(list(map(repr, present)))
                + look_alike_note(key, [v for v in present if isinstance(v, str)]).replace(
                    "the column", "the label"
                ),
            )
    mapped = [lookup.get(str(v), v) for v in labels.tolist()]
    kinds = {type(v).__name__ for v in mapped}
    if len(kinds) > 1:
        c.fail(
            "label_map",
            site.label_map,
            "global labels of one type (all integers or all text); the target's labels "
            f"after mapping are {sorted(set(mapped), key=lambda v: (isinstance(v, str), v))}",
        )
    frame = frame.copy()
    frame[site.target] = pd.Series(mapped, index=frame.index)
    return frame


#: Summaries of checked tables, by config and file state.
_SUMMARIES: dict[tuple, TableSummary] = {}


def _file_state(config) -> tuple:
    stat = Path(config.data_path).stat()
    return (repr(dataclasses.astuple(config)), stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _remember(config, summary: TableSummary) -> TableSummary:
    if Path(config.data_path).is_file():
        if len(_SUMMARIES) >= 256:
            _SUMMARIES.clear()
        _SUMMARIES[_file_state(config)] = summary
    return summary


def _recall(config) -> TableSummary | None:
    return _SUMMARIES.get(_file_state(config))


def _check_distinct(names: Sequence[str], fail) -> None:
    seen: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        seen.setdefault(name, []).append(i + 1)
    for name, fields in seen.items():
        if len(fields) > 1:
            fail(
                f"column {name!r} appears {len(fields)} times in the header (fields "
                f"{names_text(fields)}); pandas would silently read the second as "
                f"{name + '.1'!r}",
                "distinct column names: rename or remove the duplicate in the file",
            )


def _where(series: pd.Series, bad, lines: Sequence[int] | None) -> str:
    """Where the first flagged value of ``series`` is: its line in the file, or its row."""
    position = int(np.flatnonzero(np.asarray(bad, dtype=bool))[0])
    if lines is not None:
        return f"line {lines[position]}"
    return f"row {position + 1}"
