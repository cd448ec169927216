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
of ``glucosé``, ``bmi`` written with a Cyrillic ``і``. :func:`reading_key` is
the name as read: NFKC-normalised, invisible characters removed (format
characters, Unicode category Cf: zero-width spaces, joiners, byte-order
marks; and the other default-ignorable code points: variation selectors, the
combining grapheme joiner, Hangul fillers), every kind of space one plain
space, trimmed, the Cyrillic letters that look like Latin ones read as Latin
in a name that mixes the two scripts, and case-folded. :func:`look_alike_groups` finds the names of one list that share
a key without being equal; :func:`match_look_alikes` pairs the names of one
list with those of another that read alike; :func:`name_problem` says why a
single name cannot be matched as written (invisible characters, spaces around
it, Latin and Cyrillic letters mixed) and :func:`clean_name` is its plain
spelling; :func:`how_names_differ` says how two look-alikes differ and
:func:`look_alike_note` names the column a name given reads like.
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
#: Invisible code points that are not format characters (Unicode's default-ignorable code
#: points outside category Cf: the combining grapheme joiner, variation selectors, Hangul
#: fillers), removed like format characters.
_IGNORABLE = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xE0100, 0xE01EF),
)
#: Characters that show as a blank without being Unicode spaces.
_BLANKS = frozenset("\u2800")
#: Cyrillic letters that look like Latin ones, read as those in a name that mixes the two
#: scripts (``bm`` + CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I reads ``bmi``).
_CYRILLIC_LOOK_ALIKES = dict(
    zip(
        "\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0456\u0458\u0455\u0501\u051b"
        "\u051d\u04cf\u04bb\u0410\u0412\u0415\u041a\u041c\u041d\u041e\u0420\u0421"
        "\u0422\u0425\u0406\u0408\u0405",
        "aeopcyxijsdqwlhABEKMHOPCTXIJS",
        strict=True,
    )
)


def _hidden(ch: str) -> bool:
    """Whether ``ch`` is invisible: a format or control character, or default-ignorable."""
    if unicodedata.category(ch) in ("Cf", "Cc"):
        return True
    code = ord(ch)
    return any(low <= code <= high for low, high in _IGNORABLE)


def _space_like(ch: str) -> bool:
    return ch.isspace() or unicodedata.category(ch) in ("Zs", "Zl", "Zp") or ch in _BLANKS


def _script(ch: str) -> str | None:
    if not ch.isalpha():
        return None
    return unicodedata.name(ch, "").split(" ")[0] or None


def _mixes_latin_and_cyrillic(name: str) -> bool:
    scripts = {_script(ch) for ch in name}
    return "LATIN" in scripts and "CYRILLIC" in scripts


def _visible(name: str) -> str:
    """``name`` without invisible characters, every space-like character a plain space, and
    in a name mixing Latin and Cyrillic letters, the Cyrillic look-alikes as Latin ones."""
    if name.isascii() and name.isprintable():  # no control character, no other space
        return name
    out = []
    for ch in name:
        if _space_like(ch):
            out.append(" ")
        elif not _hidden(ch):
            out.append(ch)
    text = "".join(out)
    if _mixes_latin_and_cyrillic(text):
        text = "".join(_CYRILLIC_LOOK_ALIKES.get(ch, ch) for ch in text)
    return text


def reading_key(name) -> str:
    """A name as a person reads it: two names with the same key look the same.

    NFKC-normalised, invisible characters removed (format and control
    characters, Cf and Cc, and the other default-ignorable code points such
    as variation selectors and the combining grapheme joiner), runs of any
    space character (no-break spaces included) one plain space, trimmed,
    Cyrillic letters that look like Latin ones read as those in a name that
    mixes the two scripts, case-folded (and normalised again, as case
    folding can decompose).

    Examples
    --------
    >>> reading_key("BMI") == reading_key("bmi\u00a0") == reading_key("bm\u200bi")
    True
    >>> reading_key("glucos\u00e9") == reading_key("glucose\u0301")
    True
    >>> reading_key("bm\u0456") == reading_key("bmi\ufe0f") == reading_key("bmi")
    True
    >>> reading_key("bmi") == reading_key("bmi_2")
    False
    """
    text = _visible(unicodedata.normalize("NFKC", _visible(str(name))))
    text = _SPACES.sub(" ", text).strip().casefold()
    return unicodedata.normalize("NFKC", text)


def clean_name(name: str) -> str:
    """The plain spelling of ``name``: NFC, no invisible characters, no spaces around it,
    Latin letters for the Cyrillic look-alikes in a name that mixes the two scripts.

    Case and the characters themselves are kept (``BMI`` stays ``BMI``).
    """
    return unicodedata.normalize("NFC", _visible(str(name))).strip()


def name_problem(name: str) -> str | None:
    """Why ``name`` would not match its plain spelling elsewhere, or None.

    A name with an invisible character (a format character such as a
    zero-width space or a byte-order mark, a variation selector), a no-break
    or other space that is not a plain space, spaces around it, or Latin and
    Cyrillic letters mixed (``bm`` and a Cyrillic ``i``) is written
    differently from how it reads; the text names the characters by code
    point and the plain spelling (:func:`clean_name`).
    """
    name = str(name)
    odd = sorted({ch for ch in name if (_hidden(ch) or _space_like(ch)) and ch != " "})
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
    if _mixes_latin_and_cyrillic(name):
        cyrillic = sorted({ch for ch in name if _script(ch) == "CYRILLIC"})
        problems.append(
            "mixes Latin and Cyrillic letters that look alike: "
            + ", ".join(f"U+{ord(ch):04X} ({unicodedata.name(ch)})" for ch in cyrillic)
        )
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
    'differs in case'
    >>> how_names_differ("\uff22\uff2d\uff29", "bmi")
    'is written with compatibility characters (full-width letters, ligatures or other forms) and differs in case'
    """
    name, other = str(name), str(other)
    parts = []
    why = name_problem(name)
    if why is not None:
        parts.append(why.split(", so it would not match")[0])
    plain, other_plain = clean_name(name), clean_name(other)
    compatible = unicodedata.normalize("NFKC", plain)
    if compatible != plain:
        parts.append(
            "is written with compatibility characters (full-width letters, ligatures or other "
            "forms)"
        )
    elif name != unicodedata.normalize("NFC", name) or other != other_plain:
        parts.append("is the same text in another Unicode form (decomposed accents: NFD, NFC)")
    read, other_read = (
        unicodedata.normalize("NFC", unicodedata.normalize("NFKC", n)) for n in (plain, other_plain)
    )
    if read != other_read and read.casefold() == other_read.casefold():
        parts.append("differs in case")
    if not parts:
        return "differs only by case, spaces, invisible characters or Unicode form"
    return " and ".join(parts)


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
    " (the column 'outcome' reads like it: it differs in case; names must match exactly)"
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
