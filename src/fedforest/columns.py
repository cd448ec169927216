"""How fedforest reads a table's columns: their kind, class labels and level strings.

A column is categorical when it is listed as such or is not numeric
(:func:`column_kind`). Class labels are plain integers when every label is an
integer-valued number, else strings (:func:`normalize_labels`,
:func:`class_labels`). Category levels travel as strings, integer-valued
numbers without a trailing ``.0`` (:func:`as_level_strings`). The site's schema,
its table checks, its privacy policy and the ``predict`` command all read
columns this way, so that they agree.

**Names as a person reads them.** Two names (of columns, of category levels,
of class labels) that look the same are one name to a person: ``bmi`` and
``BMI``, ``bmi`` and ``bmi`` followed by a no-break space, ``bm`` + a
zero-width space + ``i`` and ``bmi``, the composed and the decomposed spelling
of ``glucosé``. :func:`reading_key` is the name as read: NFKC-normalised,
format characters (Unicode category Cf: zero-width spaces, joiners,
byte-order marks) removed, every kind of space one plain space, trimmed and
case-folded. :func:`look_alike_groups` finds the names of one list that share
a key without being equal; :func:`match_look_alikes` pairs the names of one
list with those of another that read alike; :func:`name_problem` says why a
single name cannot be matched as written (invisible characters, spaces around
it) and :func:`clean_name` is its plain spelling.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

#: Integer-valued labels beyond this magnitude stay text (they do not fit int64).
_INT64_LIMIT = 2.0**63


def normalize_labels(y) -> np.ndarray:
    """Labels as an int64 array (integer-valued numbers within int64) or a string array."""
    series = pd.Series(y)
    if pd.api.types.is_numeric_dtype(series.dtype) and series.dtype != bool:
        values = series.to_numpy(dtype=float)
        if (
            np.all(np.isfinite(values))
            and np.all(values == np.round(values))
            and np.all(np.abs(values) < _INT64_LIMIT)
        ):
            return values.astype(np.int64)
    return series.astype(str).to_numpy(dtype=str)


def column_kind(series: pd.Series, listed_categorical: bool = False) -> str:
    """``"categorical"`` for a listed column or any non-numeric one, else ``"numeric"``."""
    numeric = pd.api.types.is_numeric_dtype(series.dtype) or series.dtype == bool
    return "categorical" if listed_categorical or not numeric else "numeric"


def class_labels(y) -> list:
    """Sorted distinct class labels of ``y`` as plain ints or strings.

    The same labels :func:`normalize_labels` gives each row, so that the
    schema's class list and a site's encoded targets always agree.
    """
    values = normalize_labels(pd.Series(y).dropna())
    return sorted(set(values.tolist()))


def as_level_strings(series: pd.Series) -> pd.Series:
    """Category levels as strings; integer-valued numbers without a trailing '.0'."""
    if pd.api.types.is_numeric_dtype(series.dtype) and series.dtype != bool:
        values = series.to_numpy(dtype=float, na_value=np.nan)
        finite = values[~np.isnan(values)]
        if np.all(finite == np.round(finite)):
            return pd.Series(values, index=series.index).astype("Int64").astype("string")
    return series.astype("string")


_SPACES = re.compile(r"\s+")


def _visible(name: str) -> str:
    """``name`` without format and control characters, every space character a plain space."""
    out = []
    for ch in name:
        if ch.isspace() or unicodedata.category(ch) == "Zs":
            out.append(" ")
        elif unicodedata.category(ch) not in ("Cf", "Cc"):
            out.append(ch)
    return "".join(out)


def reading_key(name) -> str:
    """A name as a person reads it: two names with the same key look the same.

    NFKC-normalised, format and control characters (Cf, Cc) removed, runs of any space
    character (no-break spaces included) one plain space, trimmed,
    case-folded (and normalised again, as case folding can decompose).

    Examples
    --------
    >>> reading_key("BMI") == reading_key("bmi\u00a0") == reading_key("bm\u200bi")
    True
    >>> reading_key("glucos\u00e9") == reading_key("glucose\u0301")
    True
    >>> reading_key("bmi") == reading_key("bmi_2")
    False
    """
    text = unicodedata.normalize("NFKC", _visible(str(name)))
    text = _SPACES.sub(" ", text).strip().casefold()
    return unicodedata.normalize("NFKC", text)


def clean_name(name: str) -> str:
    """The plain spelling of ``name``: NFC, no format characters, no spaces around it.

    Case and the characters themselves are kept (``BMI`` stays ``BMI``).
    """
    return unicodedata.normalize("NFC", _visible(str(name))).strip()


def name_problem(name: str) -> str | None:
    """Why ``name`` would not match its plain spelling elsewhere, or None.

    A name with a format character (a zero-width space, a byte-order mark),
    a no-break or other space that is not a plain space, or spaces around it
    is written differently from how it reads; the text names the characters
    by code point and the plain spelling (:func:`clean_name`).
    """
    name = str(name)
    odd = sorted(
        {
            ch
            for ch in name
            if unicodedata.category(ch) in ("Cf", "Cc", "Zs", "Zl", "Zp") and ch != " "
        }
    )
    problems = []
    if odd:
        problems.append(
            "holds the invisible or space-like character(s) "
            + ", ".join(
                f"U+{ord(ch):04X} ({unicodedata.name(ch, 'a control character')})" for ch in odd
            )
        )
    if _visible(name) != _visible(name).strip():
        problems.append("has spaces around it")
    if not problems:
        return None
    return f"{' and '.join(problems)}, so it would not match {clean_name(name)!r} elsewhere"


def look_alike_groups(names: Iterable) -> list[list[str]]:
    """Groups of two or more distinct names of ``names`` that read alike.

    Each group in the order its names first appear; groups in the order of
    their first name. Equal names are one name (a duplicate is another rule).

    Examples
    --------
    >>> look_alike_groups(["age", "bmi", "BMI", "sex", "b\u200bmi"])
    [['bmi', 'BMI', 'b\u200bmi']]
    """
    groups: dict[str, list[str]] = {}
    for name in names:
        group = groups.setdefault(reading_key(name), [])
        if str(name) not in group:
            group.append(str(name))
    return [group for group in groups.values() if len(group) > 1]


def match_look_alikes(wanted: Sequence, given: Iterable) -> dict[str, str]:
    """The names of ``given`` that are not in ``wanted`` but read like one name of it.

    Returns ``{given name: wanted name}``; a given name that reads like two
    wanted names (which are themselves look-alikes) is left out.

    Examples
    --------
    >>> match_look_alikes(["bmi", "age"], ["BMI", "age", "sex"])
    {'BMI': 'bmi'}
    """
    by_key: dict[str, list[str]] = {}
    for name in wanted:
        by_key.setdefault(reading_key(name), []).append(str(name))
    exact = {str(name) for name in wanted}
    out = {}
    for name in given:
        name = str(name)
        if name in exact:
            continue
        found = by_key.get(reading_key(name), [])
        if len(found) == 1:
            out[name] = found[0]
    return out


def spelled(name) -> str:
    """``name`` quoted for a message so that look-alikes look different.

    A plain ASCII name as Python quotes it (``'bmi'``); any other as a YAML
    double-quoted string with escapes (``"glucos\\u00e9"``, ``"glucose\\u0301"``),
    which can be pasted into a YAML file as it is.
    """
    name = str(name)
    if name.isascii() and name.isprintable():
        return repr(name)
    return json.dumps(name)


def how_names_differ(name, other) -> str:
    """How ``name`` differs from ``other``, a name it reads like (:func:`reading_key`).

    Examples
    --------
    >>> how_names_differ("BMI", "bmi")
    'differs only by case'
    >>> how_names_differ("\uff42\uff4d\uff49", "bmi")
    'is written with compatibility characters (full-width letters, ligatures or other forms)'
    """
    name, other = str(name), str(other)
    why = name_problem(name)
    if why is not None:
        return why.split(", so it would not match")[0]
    nfc, other_nfc = (unicodedata.normalize("NFC", n) for n in (name, other))
    if nfc == other_nfc:
        return "is the same text in another Unicode form (decomposed accents: NFD against NFC)"
    nfkc, other_nfkc = (unicodedata.normalize("NFKC", n) for n in (name, other))
    if nfkc == other_nfkc:
        return (
            "is written with compatibility characters (full-width letters, ligatures or other "
            "forms)"
        )
    if nfkc.casefold() == other_nfkc.casefold() and name.casefold() == other.casefold():
        return "differs only by case"
    return "differs only by case, spaces, invisible characters or Unicode form"


def shell_word(text: str) -> str:
    """``text`` quoted as one word of a POSIX shell command line (bash, zsh).

    Printable ASCII as :func:`shlex.quote` quotes it; any other character as
    a ``$'...'`` escape, so that invisible characters can be typed.

    Examples
    --------
    >>> shell_word("bmi=bmi"), shell_word("bm\u200bi=bmi")
    ('bmi=bmi', "$'bm\\\\u200bi=bmi'")
    """
    import shlex

    if text.isascii() and text.isprintable():
        return shlex.quote(text)
    out = []
    for ch in text:
        if ch in "\\'":
            out.append("\\" + ch)
        elif ch.isascii() and ch.isprintable():
            out.append(ch)
        else:
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
    return "$'" + "".join(out) + "'"


def look_alike_note(given, names: Iterable) -> str:
    """A note for a name given that is not one of ``names`` but reads like one of them.

    ``""`` when none reads like it. For the messages that refuse a name that
    is not a column (a YAML key, a command-line option), so that ``Outcome``
    for ``outcome`` or ``bmi`` for a column ``bmi`` with a zero-width space
    says which column was meant.

    Examples
    --------
    >>> look_alike_note("Outcome", ["age", "outcome"])
    " (the column 'outcome' reads like it: it differs only by case; names must match exactly)"
    """
    names = [str(n) for n in names]
    found = match_look_alikes([str(given)], names)
    if not found:
        return ""
    column = next(iter(found))
    return (
        f" (the column {spelled(column)} reads like it: it {how_names_differ(column, given)}; "
        "names must match exactly)"
    )
