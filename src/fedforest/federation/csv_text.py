"""How fedforest reads a CSV file: one reader for a site's data file and ``predict``'s rows.

The file must be UTF-8 text (a byte-order mark and CRLF line ends are fine),
separated by commas, with as many fields on every row as on the header
(:func:`read_csv_text`). A file separated by semicolons, tabs, vertical bars
or spaces is refused naming the separator found (and decimal commas, when its
numbers have them), with how to save it as a comma-separated file: the sites
of a federation read their numbers the same way, never by a guess.

Values are read as what they are (:func:`parse_csv`): numbers as numbers
(integers of 20 digits or more too, which pandas keeps as text), an empty
field (or pandas' missing-value words such as ``NA``) as missing, anything
else as text. Booleans are text: pandas would read a column of
``True``/``false`` as 1 and 0, and fedforest reads it as a category with the
levels as written (``True``, ``false``). A column of numbers with some text
among them (:func:`stray_text`: a boolean among numbers, a ``?``, numbers
written with decimal commas) is refused where the column is read, with
:func:`number_text_hint` saying what the text looks like (a boolean, a
missing-value mark, a decimal comma, a thousands separator, a hexadecimal
number, a date).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

_BOM = b"\xef\xbb\xbf"
#: Separators a file may have been saved with instead of commas, and their names.
OTHER_SEPARATORS = {";": "semicolons", "\t": "tabs", "|": "vertical bars", " ": "spaces"}
#: How many lines the separator is judged on.
SAMPLE_LINES = 20
#: Words pandas reads as booleans (fedforest reads them, and these, as text).
BOOLEAN_WORDS = frozenset(
    w.casefold() for w in ("True", "False", "T", "F", "yes", "no", "on", "off", "y", "n")
)
#: Marks people write for a missing value that pandas does not read as missing.
MISSING_MARKS = frozenset(("?", "??", "-", "--", ".", "*", "missing", "unknown", "none", "x"))
_DECIMAL_COMMA = re.compile(r"[-+]?\d+,\d+")
_THOUSANDS = re.compile(r"[-+]?\d{1,3}([,.' ]\d{3})+([.,]\d+)?")
_HEX = re.compile(r"[-+]?0[xX][0-9a-fA-F]+")
_DATE = re.compile(
    r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}([ T]\d{1,2}:\d{2}(:\d{2})?)?|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}"
)


def read_csv_text(path: Path, fail) -> tuple[str, list[str], list[int]]:
    """The file's text, its header and each data row's line number.

    Refuses bytes that are not UTF-8 (or NUL bytes), a file separated by
    another character than a comma, and rows whose number of fields differs
    from the header's, naming the line; blank lines are skipped, as pandas
    does. ``fail(what, allowed)`` raises the caller's error.
    """
    raw = Path(path).read_bytes()
    if raw.startswith(_BOM):
        raw = raw[len(_BOM) :]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        fail(
            f"line {line} holds the byte(s) {raw[err.start : err.end]!r}, which are not UTF-8 "
            f"text{_utf16_note(raw)}",
            "UTF-8 text: save the file as UTF-8 (e.g. 'CSV UTF-8' in a spreadsheet program)",
        )
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        fail(
            f"line {line} holds a NUL byte{_utf16_note(raw) or ' (a UTF-16 or binary file?)'}",
            "UTF-8 text: save the file as UTF-8 CSV",
        )
    _check_separator(text, fail)
    reader = csv.reader(io.StringIO(text, newline=""))
    header: list[str] | None = None
    lines: list[int] = []
    previous = 0
    try:
        for row in reader:
            start, previous = previous + 1, reader.line_num
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # a blank line
            if header is None:
                header = row
            elif len(row) != len(header):
                fail(
                    f"line {start} has {len(row)} field(s) but the header has {len(header)}"
                    + _comma_number_note(row, len(header)),
                    f"exactly {len(header)} comma-separated fields on every row (a stray or "
                    "unquoted comma? quote values that hold commas)",
                )
            else:
                lines.append(start)
    except csv.Error as err:
        fail(f"line {previous + 1} cannot be read as CSV ({err})", "a comma-separated file")
    if header is None:
        fail(
            "cannot be read as CSV: the file is empty (no header line)",
            "a header line of column names",
        )
    return text, header, lines


def _utf16_note(raw: bytes) -> str:
    """A note when ``raw`` looks like UTF-16 text (a UTF-16 byte-order mark, or every other
    byte of its start a NUL)."""
    head = raw[:200]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return " (the file is UTF-16 text: it starts with a UTF-16 byte-order mark)"
    if len(head) >= 4 and (
        head[1::2].count(0) * 2 > len(head) // 2 or head[0::2].count(0) * 2 > len(head) // 2
    ):
        return " (the file seems to be UTF-16 text: every other byte is a NUL)"
    return ""


def _comma_number_note(row: Sequence[str], n_header: int) -> str:
    """A note when the extra fields of a row look like a number's decimal comma."""
    if len(row) <= n_header:
        return ""
    for left, right in zip(row, row[1:], strict=False):
        if re.fullmatch(r"[-+]?\d+", left.strip()) and re.fullmatch(r"\d+", right.strip()):
            return (
                f" ({left},{right} looks like a number with a decimal comma or a thousands "
                "separator: write numbers with '.' as the decimal point and no thousands "
                "separator)"
            )
    return ""


def _sample(text: str) -> list[str]:
    """The first :data:`SAMPLE_LINES` non-blank lines of ``text``."""
    lines = []
    for line in text.splitlines():
        if line.strip():
            lines.append(line)
            if len(lines) == SAMPLE_LINES:
                break
    return lines


def _fields(lines: Sequence[str], sep: str) -> list[list[str]] | None:
    try:
        return list(csv.reader(lines, delimiter=sep, skipinitialspace=sep == " "))
    except csv.Error:
        return None


def _check_separator(text: str, fail) -> None:
    """Refuse a file whose header is one field by commas but splits evenly on another
    separator (or holds one), naming the separator and any decimal commas."""
    lines = _sample(text)
    by_comma = _fields(lines[:1], ",")
    if not lines or by_comma is None or len(by_comma[0]) != 1:
        return
    header = by_comma[0][0]
    for sep, name in OTHER_SEPARATORS.items():
        rows = _fields(lines, sep)
        if rows is None or len(rows[0]) < 2 or any(len(r) != len(rows[0]) for r in rows):
            continue
        if sep == " " and len(lines) < 2:
            continue  # a single column named with spaces
        commas = [f for r in rows[1:] for f in r if _DECIMAL_COMMA.fullmatch(f.strip())]
        decimal = f", and its numbers have decimal commas (such as {commas[0]!r})" if commas else ""
        fix = f"sep={sep!r}" + (", decimal=','" if commas else "")
        fail(
            f"the header is a single column {header!r}: the fields seem separated by {sep!r} "
            f"({name}: {len(rows[0])} fields on each of the first {len(rows)} lines){decimal}",
            "a comma-separated file with '.' as the decimal point: save it as CSV (comma "
            f"delimited), or convert it, e.g. pandas.read_csv(path, {fix})"
            ".to_csv(new_path, index=False)",
        )
    sep = next((s for s in (";", "\t", "|") if s in header), None)
    if sep is not None:
        fail(
            f"the header is a single column {header!r}: the fields seem separated by {sep!r}",
            "a comma-separated file (save it as CSV with commas)",
        )


def parse_csv(text: str, names: Sequence[str], keep: Sequence[int] | None = None) -> pd.DataFrame:
    """The table of a file :func:`read_csv_text` accepted: values read as what they are.

    Numbers are numbers, empty fields and pandas' missing-value words are
    missing, and everything else is text, booleans too (pandas alone would
    read a column of ``True``/``False`` as booleans, counted as 1 and 0).
    ``names`` are the header's names; ``keep`` the positions of the columns
    to read (default: all).
    """
    keep = list(range(len(names))) if keep is None else list(keep)
    frame = pd.read_csv(io.StringIO(text), usecols=keep, low_memory=False)
    frame.columns = [names[i] for i in keep]
    # the columns' types read once (a file may have thousands of columns the model never uses)
    flagged = [
        i
        for i, col, dtype in zip(keep, frame.columns, frame.dtypes, strict=True)
        if dtype.kind == "b" or (dtype.kind == "O" and frame[col].map(type).eq(bool).any())
    ]
    if flagged:
        words = pd.read_csv(io.StringIO(text), usecols=flagged, dtype=str, low_memory=False)
        for i, values in zip(flagged, words.columns, strict=True):
            frame[names[i]] = words[values].astype("string")
    for col, dtype in zip(list(frame.columns), list(frame.dtypes), strict=True):
        if pd.api.types.is_numeric_dtype(dtype):
            continue
        column = frame[col]
        if column.notna().any():
            # integers of 20 digits or more, which pandas keeps as text
            numbers = pd.to_numeric(column, errors="coerce")
            if not (column.notna() & numbers.isna()).any():
                frame[col] = numbers.astype(float)
    return frame


def number_text_hint(values: Sequence) -> str:
    """What text found in a numeric column looks like (``""`` when nothing in particular).

    Examples
    --------
    >>> number_text_hint(["?"])
    " ('?' looks like a mark for a missing value: leave the field empty instead)"
    """
    if any(not str(v).strip() for v in values):
        return " (a field of spaces only: leave it empty for a missing value)"
    texts = [str(v).strip() for v in values]
    for value in texts:
        if value.casefold() in BOOLEAN_WORDS:
            return (
                f" ({value!r} is a boolean, not a number: booleans are never read as 1 and 0; "
                "write the numbers themselves)"
            )
    for value in texts:
        if value.casefold() in MISSING_MARKS:
            return (
                f" ({value!r} looks like a mark for a missing value: leave the field empty instead)"
            )
    for value in texts:
        if _DECIMAL_COMMA.fullmatch(value) or _THOUSANDS.fullmatch(value):
            return (
                f" ({value!r} looks like a number with a decimal comma or a thousands "
                "separator: write numbers with '.' as the decimal point and no thousands "
                "separator)"
            )
    for value in texts:
        if _plain_number(value):
            return (
                f" ({value!r} is a number written with invisible characters, no-break spaces "
                "or non-ASCII digits: write it with plain digits)"
            )
    for value in texts:
        if _HEX.fullmatch(value):
            return f" ({value!r} is a hexadecimal number: write numbers in decimal)"
    for value in texts:
        if _DATE.fullmatch(value):
            return (
                f" ({value!r} is a date, not a number: write a number such as the days since "
                "a reference date, or list the column as a category)"
            )
    return ""


def _plain_number(value: str) -> bool:
    """Whether ``value`` is a number once written plainly (NFKC, no format or space
    characters) while it is not one as written."""
    plain = "".join(
        ch
        for ch in unicodedata.normalize("NFKC", value)
        if not ch.isspace() and unicodedata.category(ch) not in ("Cf", "Zs")
    )
    if plain == value.strip() or not plain.isascii():
        return False
    try:
        float(plain)
    except ValueError:
        return False
    return True


@dataclasses.dataclass(frozen=True)
class StrayText:
    """Text that does not belong in a column of numbers (:func:`stray_text`).

    A message reads ``column 'bmi' {what} ({where}){note}; allowed: {allowed}``,
    ``where`` being the line (or row) of the first value of ``mask``.
    """

    mask: np.ndarray
    what: str
    note: str
    allowed: str


def stray_text(series: pd.Series) -> StrayText | None:
    """Why a column read as text is a column of numbers with stray text, or None.

    A column of numbers whose values are text for fewer than half of them,
    or that mixes numbers and booleans (``True`` among numbers), holds stray
    text; so does a text column whose values are at least half numbers
    written with decimal commas or thousands separators (``22,5``,
    ``1,234``). A column of text values (booleans only, levels, dates) is a
    category and holds none. Callers add how to mark the column as a
    category.

    Examples
    --------
    >>> found = stray_text(pd.Series([21.5, 22.0, "?", 24.0], dtype=object))
    >>> found.what, found.mask.tolist()
    ("holds numbers but also 1 text value(s) such as ['?']", [False, False, True, False])
    """
    if pd.api.types.is_numeric_dtype(series.dtype) or series.dtype == bool:
        return None
    numbers = pd.to_numeric(series, errors="coerce")
    text = (series.notna() & numbers.isna()).to_numpy(dtype=bool, na_value=False)
    n_values, n_text = int(series.notna().sum()), int(text.sum())
    if not n_text:
        return None
    if n_text * 2 < n_values or (n_text < n_values and _has_booleans(series[text])):
        examples = sorted(set(series[text].astype(str)))[:5]
        return StrayText(
            text,
            f"holds numbers but also {n_text} text value(s) such as {examples}",
            number_text_hint(examples),
            "numbers only, with an empty field for a missing value",
        )
    commas = looks_like_comma_numbers(series[text].dropna().astype(str))
    if len(commas) * 2 >= n_values:
        bad = series.astype("string").isin(commas).to_numpy(dtype=bool, na_value=False)
        return StrayText(
            bad,
            "holds numbers written with decimal commas or thousands separators such as "
            f"{commas[0]!r}",
            ", which are text, not numbers",
            "numbers with '.' as the decimal point and no thousands separator (save the file "
            "as CSV with '.' decimals)",
        )
    return None


def _has_booleans(values: pd.Series) -> bool:
    """Whether text values of a column of numbers include a boolean word."""
    return bool(values.astype(str).str.strip().str.casefold().isin(BOOLEAN_WORDS).any())


def looks_like_comma_numbers(values: Sequence) -> list[str]:
    """The values of ``values`` written like numbers with decimal commas or thousands separators."""
    return [
        str(v)
        for v in values
        if _DECIMAL_COMMA.fullmatch(str(v).strip()) or _THOUSANDS.fullmatch(str(v).strip())
    ]
