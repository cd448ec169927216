"""How fedforest reads a CSV file: one reader for a site's data file and ``predict``'s rows.

The file must be UTF-8 text (a byte-order mark and CRLF line ends are fine),
separated by commas, with as many fields on every row as on the header
(:func:`read_csv_text`). A file separated by semicolons, tabs, vertical bars
or spaces is refused naming the separator found (and decimal commas, when its
numbers have them), with how to save it as a comma-separated file: the sites
of a federation read their numbers the same way, never by a guess.

Values are read as what they are (:func:`parse_csv`): numbers as numbers,
an empty field (or pandas' missing-value words such as ``NA``) as missing,
anything else as text. Booleans are text: pandas would read a column of
``True``/``false`` as 1 and 0, and fedforest reads it as a category with the
levels as written (``True``, ``false``). Text in a numeric column is refused
where the column is used, with :func:`number_text_hint` saying what the text
looks like (a boolean, a decimal comma, a thousands separator).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from pathlib import Path

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
_DECIMAL_COMMA = re.compile(r"[-+]?\d+,\d+")
_THOUSANDS = re.compile(r"[-+]?\d{1,3}([,.' ]\d{3})+([.,]\d+)?")


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
            f"line {line} holds the byte(s) {raw[err.start : err.end]!r}, which are not UTF-8 text",
            "UTF-8 text: save the file as UTF-8 (e.g. 'CSV UTF-8' in a spreadsheet program)",
        )
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        fail(
            f"line {line} holds a NUL byte (a UTF-16 or binary file?)",
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
    flagged = [
        i
        for i, col in zip(keep, frame.columns, strict=True)
        if frame[col].dtype == bool
        or (frame[col].dtype == object and frame[col].map(type).eq(bool).any())
    ]
    if flagged:
        words = pd.read_csv(io.StringIO(text), usecols=flagged, dtype=str, low_memory=False)
        for i, values in zip(flagged, words.columns, strict=True):
            frame[names[i]] = words[values].astype("string")
    return frame


def number_text_hint(values: Sequence) -> str:
    """What text found in a numeric column looks like (``""`` when nothing in particular)."""
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
        if _DECIMAL_COMMA.fullmatch(value) or _THOUSANDS.fullmatch(value):
            return (
                f" ({value!r} looks like a number with a decimal comma or a thousands "
                "separator: write numbers with '.' as the decimal point and no thousands "
                "separator)"
            )
    return ""


def looks_like_comma_numbers(values: Sequence) -> list[str]:
    """The values of ``values`` written like numbers with decimal commas or thousands separators."""
    return [
        str(v)
        for v in values
        if _DECIMAL_COMMA.fullmatch(str(v).strip()) or _THOUSANDS.fullmatch(str(v).strip())
    ]
