"""How a table in a site's own words becomes the model's input: one path for all.

The site follows it for its own rows in a job, ``fedforest predict`` for new
rows (:func:`model_input`): ``drop_columns`` removed and ``renames`` applied
(:func:`global_names`, which :func:`~fedforest.federation.tables.check_table`
uses too), the rare levels hidden as the site's privacy policy hid them
(:func:`~fedforest.privacy.levels.hide_levels`), then every feature encoded
(:func:`encode_features`: categorical levels as global codes, numbers as
floats; :meth:`~fedforest.federation.schema.GlobalSchema.encode` is it). The
model a site saves carries its rules (:func:`site_inputs`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..columns import as_level_strings
from ..errors import SchemaError
from ..model.inputs import FLOAT32_MAX
from ..model.site_inputs import SiteInputs
from ..privacy.levels import hide_levels
from .csv_text import number_text_hint


def global_names(header: Sequence[str], renames: Mapping[str, str]) -> list[str]:
    """The global name of every column of ``header``: ``renames`` (local -> global) applied."""
    return [renames.get(h, h) for h in header]


def site_inputs(site, hidden: Mapping[str, Sequence[str]], classes: Sequence) -> SiteInputs:
    """The input mapping a site saves with its model: its YAML's rules for its data file,
    the levels its privacy policy hid (``hidden``) and the positive class of two
    ``classes`` (global labels; ``classes[1]``, as the metrics take it)."""
    classes = [c.item() if hasattr(c, "item") else c for c in classes]
    return SiteInputs(
        site=site.site,
        target=site.target,
        renames=dict(site.renames),
        drop_columns=tuple(site.drop_columns),
        categorical=tuple(site.categorical),
        label_map=tuple((k, v) for k, v in site.label_map.items()),
        hidden_levels={c: tuple(v) for c, v in hidden.items() if v},
        positive_class=classes[1] if len(classes) == 2 else None,
    )


def encode_features(
    frame: pd.DataFrame,
    categories: Mapping[str, Sequence[str]],
    columns: Sequence[str],
    names: Mapping[str, str] | None = None,
    unseen: dict | None = None,
) -> pd.DataFrame:
    """Feature columns of ``frame`` as floats, categorical levels as global codes.

    A categorical column's values are its levels as written, never their
    codes: numbers in a column whose levels are all text are refused. Text
    in a numeric column is refused, booleans (``True``, ``no``) too.

    Parameters
    ----------
    frame : DataFrame
        A table with global column names.
    categories : mapping of str to list of str
        Levels of the categorical features; level ``k`` has code ``k``.
    columns : sequence of str
        The columns to return, in this order.
    names : mapping of str to str, optional
        The table's own name of a renamed column (global -> local), for messages.
    unseen : dict, optional
        Where to record levels the categories do not list, which are then
        missing: ``unseen[column] = {level: rows}``. Without it such a level is
        refused (a job's own rows only hold levels of the schema).

    Raises
    ------
    SchemaError
        A column the table lacks, a level the categories do not list (without
        ``unseen``), a number in a categorical column of text levels, or text
        in a numeric column; naming the column, the values and what is allowed.
    """
    names = names or {}
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise SchemaError(f"table lacks columns {missing}")

    def what(col: str) -> str:
        local = names.get(col, col)
        return f"column {local!r}" + (f" (renamed to {col!r})" if local != col else "")

    out = {}
    for col in columns:
        series = frame[col]
        if col in categories:
            out[col] = _level_codes(series, list(categories[col]), what(col), col, unseen)
            continue
        if series.dtype == bool:  # a table built in memory (a file's booleans are text)
            series = series.astype(float)
        numbers = pd.to_numeric(series, errors="coerce")
        text = series.notna() & numbers.isna()
        if text.any():
            examples = sorted(set(series[text].astype(str)))[:5]
            raise SchemaError(
                f"{what(col)} holds text such as {examples} (row {int(np.flatnonzero(text)[0]) + 1}"
                f"){number_text_hint(examples)} but {col!r} is a numeric feature; allowed: "
                "numbers, with an empty field for a missing value"
            )
        values = numbers.to_numpy(dtype=float, na_value=np.nan)
        too_big = ~np.isnan(values) & ~(np.abs(values) <= FLOAT32_MAX)
        if too_big.any():
            row = int(np.flatnonzero(too_big)[0])
            raise SchemaError(
                f"{what(col)} holds {float(values[row])!r} (row {row + 1}), whose magnitude "
                "overflows float32, the type trees split on; allowed: finite numbers of magnitude "
                f"at most {FLOAT32_MAX:.7g}, with an empty field for a missing value"
            )
        out[col] = numbers.astype(float)
    return pd.DataFrame(out, index=frame.index)


def _level_codes(series: pd.Series, levels: list, what: str, col: str, unseen) -> np.ndarray:
    """A categorical column's global codes: a level's position in ``levels``."""
    lookup = {lvl: float(i) for i, lvl in enumerate(levels)}
    as_str = as_level_strings(series)
    codes = as_str.map(lookup).astype("Float64")
    other = codes.isna() & as_str.notna()
    if other.any():
        counts = as_str[other].value_counts(sort=False)
        found = sorted(counts.index)
        numbers = [v for v in found if _is_number(v)]
        if numbers and not any(_is_number(lvl) for lvl in levels):
            row = int(np.flatnonzero(as_str.isin(numbers).to_numpy(dtype=bool, na_value=False))[0])
            raise SchemaError(
                f"{what} holds numbers such as {numbers[:5]} (row {row + 1}), but the levels of "
                f"{col!r} are text ({levels_text(levels)}): a categorical column's values are its "
                "levels as written, never their codes; allowed: those levels, or an empty field "
                "for a missing value (write the level names in the file)"
            )
        if unseen is None:
            raise SchemaError(
                f"{what} has levels {found[:10]} not in the schema's {levels[:50]}; "
                "allowed: those levels, or an empty field for a missing value"
            )
        unseen[col] = {str(level): int(counts[level]) for level in found}
    return codes.to_numpy(dtype=float, na_value=np.nan)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def levels_text(levels: Sequence[str], limit: int = 20) -> str:
    """Levels for a message: quoted, at most ``limit``, then how many more."""
    shown = ", ".join(map(repr, levels[:limit]))
    return shown + (f" and {len(levels) - limit} more" if len(levels) > limit else "")


@dataclasses.dataclass
class ModelInput:
    """A table made the model's input by :func:`model_input`, and what was done to it.

    Attributes
    ----------
    X : DataFrame
        The model's features the table has, in the model's order (global
        names; categorical codes and numbers as floats).
    renamed : dict of str to str
        The renames applied (local -> global).
    dropped : list of str
        The table's columns listed under the site's ``drop_columns``.
    ignored : list of str
        The table's other columns the model does not use (global names).
    absent : list of str
        The model's features the table lacks (missing on every row).
    empty : dict of str to int
        Rows of each feature the table has that are empty (a missing value).
    unseen : dict of str to dict
        Levels of a categorical feature the model never saw, with their rows
        (``{feature: {level: rows}}``); they are missing in ``X``. Only with
        ``unseen_missing`` (else they are refused).
    """

    X: pd.DataFrame
    renamed: dict
    dropped: list
    ignored: list
    absent: list
    empty: dict = dataclasses.field(default_factory=dict)
    unseen: dict = dataclasses.field(default_factory=dict)


def model_input(
    frame: pd.DataFrame,
    inputs: SiteInputs | None,
    features: Sequence[str],
    categories: Mapping[str, Sequence[str]],
    renames: Mapping[str, str] | None = None,
    unseen_missing: bool = False,
) -> ModelInput:
    """Turn a table in the site's own words into the model's input.

    The site's ``drop_columns`` are removed, its ``renames`` applied
    (``renames`` given here extend them and win for the same local column),
    the levels its privacy policy hid are rewritten as it rewrote its own
    table, and the model's ``features`` the table has are encoded
    (:func:`encode_features`). The site's own rows in a job take this path
    (:meth:`~fedforest.federation.site.SiteRunner.set_schema`) and so do the
    rows ``fedforest predict`` scores: the same file gives the same input.

    Parameters
    ----------
    frame : DataFrame
        The table, with the column names of its file.
    inputs : SiteInputs or None
        The site's input mapping (``None``: the columns already carry global names).
    features : sequence of str
        The model's features, in order.
    categories : mapping of str to list of str
        Levels of the categorical features.
    renames : mapping of str to str, optional
        More local -> global renames.
    unseen_missing : bool
        Read a level the model never saw as missing, and record it in
        :attr:`ModelInput.unseen` (``fedforest predict``), instead of refusing it.

    Returns
    -------
    ModelInput

    Raises
    ------
    ValueError
        Two columns that would carry the same name after renaming, a column
        already holding the privacy policy's group of rare levels, or a value
        :func:`encode_features` refuses; the message names the column.

    Examples
    --------
    >>> import pandas as pd
    >>> from fedforest.model.site_inputs import SiteInputs
    >>> rows = pd.DataFrame({"pid": [7, 8], "glucose_mg_dl": [90.0, 140.0]})
    >>> inputs = SiteInputs("site-2", "outcome", renames={"glucose_mg_dl": "glucose"},
    ...                     drop_columns=("pid",))
    >>> done = model_input(rows, inputs, ["age", "glucose"], {})
    >>> list(done.X.columns), done.renamed, done.absent
    (['glucose'], {'glucose_mg_dl': 'glucose'}, ['age'])
    """
    own = dict(inputs.renames) if inputs is not None else {}
    own.update(renames or {})
    drop = set(inputs.drop_columns) if inputs is not None else set()
    header = [str(c) for c in frame.columns]
    dropped = [c for c in header if c in drop and c not in own]
    kept = [c for c in header if c not in dropped]
    renamed = {c: own[c] for c in kept if c in own and own[c] != c}
    columns = global_names(kept, renamed)
    for local, name in renamed.items():
        if columns.count(name) > 1:
            raise ValueError(
                f"column {local!r} is renamed to {name!r}, but the table already has a column "
                f"{name!r}; allowed: a global name no other column has"
            )
    table = frame[kept].set_axis(columns, axis=1)
    if inputs is not None and inputs.hidden_levels:
        try:
            table = hide_levels(table, inputs.hidden_levels)
        except ValueError as err:
            raise ValueError(
                f"{err}; the site's privacy policy groups its rare levels under that name"
            ) from err
    wanted = set(features)
    present = [f for f in features if f in table.columns]
    unseen: dict | None = {} if unseen_missing else None
    X = encode_features(table, categories, present, {v: k for k, v in renamed.items()}, unseen)
    return ModelInput(
        X=X,
        renamed=renamed,
        dropped=dropped,
        ignored=[c for c in columns if c not in wanted],
        absent=[f for f in features if f not in table.columns],
        empty={f: int(table[f].isna().sum()) for f in present},
        unseen=unseen or {},
    )
