"""One CSV reader for a site's data file and predict's rows (federation/csv_text.py): values
read as what they are, separators and decimal commas named."""

from __future__ import annotations

import pytest

from fedforest.errors import ConfigError
from fedforest.federation.tables import read_table

from .test_tables import HEADER, assert_data_error, site_config, table_rows


def write(path, lines, newline="\n", encoding="utf-8", bom=False):
    raw = newline.join(lines) + newline
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + raw.encode(encoding))
    return path


def rows_with(column: str, values) -> list[str]:
    """The small table's lines with ``column`` replaced by ``values`` (one per row)."""
    lines = [",".join([*HEADER, column])]
    for row, value in zip(table_rows(len(values)), values, strict=True):
        lines.append(",".join(map(str, [*row, value])))
    return lines


# --------------------------------------------------------------------------- separators
@pytest.mark.parametrize(
    ("sep", "name"), [(";", "semicolons"), ("\t", "tabs"), ("|", "vertical bars"), (" ", "spaces")]
)
def test_a_file_separated_by_another_character_is_refused_naming_it(tmp_path, sep, name):
    lines = [sep.join(map(str, r)) for r in [HEADER, *table_rows()]]
    data = write(tmp_path / "d.csv", lines)
    with pytest.raises(ConfigError) as info:
        read_table(site_config(data))
    assert_data_error(
        info.value,
        data,
        f"the fields seem separated by {sep!r} ({name}: 4 fields on each of the first 13 lines)",
        "allowed: a comma-separated file with '.' as the decimal point",
        f"pandas.read_csv(path, sep={sep!r}).to_csv(new_path, index=False)",
    )


def test_semicolons_with_decimal_commas_are_named_with_the_fix(tmp_path):
    lines = ["age;glucose;smoker;outcome"] + [
        f"{r[0]},5;{r[1]};{r[2]};{r[3]}" for r in table_rows()
    ]
    data = write(tmp_path / "d.csv", lines)
    with pytest.raises(ConfigError) as info:
        read_table(site_config(data))
    assert_data_error(
        info.value,
        data,
        "separated by ';'",
        "and its numbers have decimal commas (such as '30,5')",
        "pandas.read_csv(path, sep=';', decimal=',')",
    )


def test_unquoted_decimal_commas_in_a_comma_file_are_named_on_their_line(tmp_path):
    lines = ["age,outcome"] + [f"{30 + i},5,{i % 2}" for i in range(12)]
    data = write(tmp_path / "d.csv", lines)
    with pytest.raises(ConfigError) as info:
        read_table(site_config(data, target="outcome"))
    assert_data_error(
        info.value, data, "line 2 has 3 field(s) but the header has 2", "30,5 looks like a number"
    )


@pytest.mark.parametrize("value", ['"1,5"', '"1,234"', '"12.345,6"'])
def test_numbers_with_decimal_commas_or_thousands_separators_are_refused(tmp_path, value):
    data = write(tmp_path / "d.csv", rows_with("dose", [value] * 12))
    with pytest.raises(ConfigError) as info:
        read_table(site_config(data))
    assert_data_error(
        info.value,
        data,
        "column 'dose' holds numbers written with decimal commas or thousands separators",
        f"such as {value.strip(chr(34))!r} (line 2)",
        "numbers with '.' as the decimal point",
    )


def test_one_thousands_separator_among_numbers_is_refused_with_its_hint(tmp_path):
    data = write(tmp_path / "d.csv", rows_with("dose", [*range(1, 12), '"1,234"']))
    with pytest.raises(ConfigError) as info:
        read_table(site_config(data))
    assert_data_error(
        info.value, data, "'1,234' looks like a number with a decimal comma", "line 13"
    )


# ----------------------------------------------------------------------------- booleans
@pytest.mark.parametrize(
    "words", [("True", "False"), ("TRUE", "FALSE"), ("true", "false"), ("yes", "no"), ("T", "F")]
)
def test_a_column_of_booleans_is_a_category_with_its_words_as_levels(tmp_path, words):
    values = [words[i % 2] for i in range(12)]
    data = write(tmp_path / "d.csv", rows_with("insured", values))
    frame = read_table(site_config(data))
    assert frame["insured"].tolist() == values  # as written: never 1.0 and 0.0
    assert not frame["insured"].dtype == bool
    from fedforest.columns import column_kind

    assert column_kind(frame["insured"]) == "categorical"


def test_a_column_of_booleans_with_missing_values_keeps_its_words(tmp_path):
    values = ["True", "", "False"] * 4
    data = write(tmp_path / "d.csv", rows_with("insured", values))
    frame = read_table(site_config(data))
    assert frame["insured"].tolist()[:3] == ["True", frame["insured"].iloc[1], "False"]
    assert frame["insured"].isna().sum() == 4


@pytest.mark.parametrize("word", ["True", "false", "yes", "on", "T"])
def test_booleans_among_numbers_are_refused_naming_column_line_and_value(tmp_path, word):
    values = [word if i in (3, 5) else str(i) for i in range(12)]
    data = write(tmp_path / "d.csv", rows_with("dose", values))
    with pytest.raises(ConfigError) as info:
        read_table(site_config(data))
    assert_data_error(
        info.value,
        data,
        "column 'dose' holds numbers but also 2 text value(s)",
        f"[{word!r}] (line 5)",
        f"({word!r} is a boolean, not a number",
    )


def test_booleans_among_numbers_are_refused_even_when_they_are_most_values(tmp_path):
    values = ["True", "False", "True", "False", "True", "False", "True", "2", "3", "4", "5", "6"]
    data = write(tmp_path / "d.csv", rows_with("dose", values))
    with pytest.raises(ConfigError) as info:
        read_table(site_config(data))
    assert_data_error(info.value, data, "column 'dose' holds numbers but also 7 text value(s)")


# ---------------------------------------------------------------------- numbers as written
@pytest.mark.parametrize(
    ("written", "read"),
    [("1.0e3", 1000.0), ('"5"', 5.0), ("-2.5", -2.5), ("NaN", None), ("", None), ("NA", None)],
)
def test_numbers_are_read_as_written(tmp_path, written, read):
    values = [written] + [str(i) for i in range(2, 13)]
    data = write(tmp_path / "d.csv", rows_with("dose", values))
    first = read_table(site_config(data))["dose"].iloc[0]
    assert (first != first) if read is None else first == read


@pytest.mark.parametrize("value", ["inf", "-inf", "1e39"])
def test_infinite_numbers_are_refused(tmp_path, value):
    data = write(tmp_path / "d.csv", rows_with("dose", [value] + [str(i) for i in range(2, 13)]))
    with pytest.raises(ConfigError) as info:
        read_table(site_config(data))
    assert_data_error(info.value, data, "column 'dose' holds", "(line 2)", "overflows float32")


def test_a_byte_order_mark_and_crlf_line_ends_read_like_the_plain_file(tmp_path):
    lines = [",".join(map(str, r)) for r in [HEADER, *table_rows()]]
    plain = read_table(site_config(write(tmp_path / "plain.csv", lines)))
    marked = read_table(site_config(write(tmp_path / "bom.csv", lines, "\r\n", bom=True)))
    assert marked.equals(plain)
    assert list(marked.columns) == HEADER


def test_latin1_bytes_are_refused_naming_the_line_and_the_fix(tmp_path):
    lines = [",".join(map(str, r)) for r in [HEADER, *table_rows()]]
    lines[4] = lines[4].replace("never", "nevér")
    data = write(tmp_path / "d.csv", lines, encoding="latin-1")
    with pytest.raises(ConfigError) as info:
        read_table(site_config(data))
    assert_data_error(
        info.value, data, "line 5 holds the byte(s) b'\\xe9'", "save the file as UTF-8"
    )


def test_a_one_column_name_with_spaces_is_not_taken_for_a_separator(tmp_path):
    lines = ["blood pressure"] + [str(100 + i) for i in range(12)]
    data = write(tmp_path / "d.csv", lines)
    with pytest.raises(ConfigError) as info:  # no target: refused for that, not the separator
        read_table(site_config(data))
    assert "separated" not in str(info.value)


# ---------------------------------------------------------------------- lists in messages
def test_a_wide_file_gets_short_messages(tmp_path):
    names = [f"col_{i:05d}" for i in range(20_000)]
    data = write(tmp_path / "wide.csv", [",".join(names), ",".join(["1"] * 20_000)])
    with pytest.raises(ConfigError) as info:
        read_table(site_config(data))  # no column 'outcome'
    assert "col_00000" in str(info.value) and "and 19980 more" in str(info.value)
    assert len(str(info.value)) < 2_000
    repeated = write(
        tmp_path / "repeated.csv", [",".join(["age"] * 5_000), ",".join(["1"] * 5_000)]
    )
    with pytest.raises(ConfigError) as info:
        read_table(site_config(repeated))
    assert "column 'age' appears 5000 times in the header (fields 1, 2" in str(info.value)
    assert len(str(info.value)) < 2_000


def test_a_boolean_column_joins_the_schema_as_a_category_and_encodes_by_its_levels(tmp_path):
    from fedforest.federation.schema import GlobalSchema, SiteSchema

    values = ["True", "False", "False"] * 4
    frame = read_table(site_config(write(tmp_path / "d.csv", rows_with("insured", values))))
    site = SiteSchema.from_frame("site-1", frame, "outcome")
    schema = GlobalSchema.build([site])
    assert schema.categories["insured"] == ["False", "True"]
    codes = schema.encode(frame, ["insured"])["insured"].tolist()
    assert codes == [1.0, 0.0, 0.0] * 4


# ------------------------------------------------------------------ what stray text looks like
@pytest.mark.parametrize(
    ("value", "hint"),
    [
        ("?", "'?' looks like a mark for a missing value: leave the field empty"),
        ("-", "a mark for a missing value"),
        ("unknown", "a mark for a missing value"),
        ("0x1F", "'0x1F' is a hexadecimal number: write numbers in decimal"),
        ("2024-01-02", "'2024-01-02' is a date, not a number"),
        ("02/01/2024", "is a date, not a number"),
        ("22.5\u200b", "'22.5\\u200b' is a number written with invisible characters"),
        ("\uff12\uff12", "non-ASCII digits: write it with plain digits"),
    ],
)
def test_text_among_numbers_is_refused_saying_what_it_looks_like(tmp_path, value, hint):
    values = [value] + [str(i) for i in range(2, 13)]
    data = write(tmp_path / "d.csv", rows_with("dose", values))
    with pytest.raises(ConfigError) as info:
        read_table(site_config(data))
    assert_data_error(info.value, data, "column 'dose' holds numbers but also 1 text", hint)
    assert "(line 2)" in str(info.value) and "list the column under categorical" in str(info.value)


def test_integers_of_twenty_digits_or_more_are_numbers_in_every_reader(tmp_path):
    from fedforest.federation.csv_text import parse_csv

    text = "a,b\n1.5,123456789012345678901234567890\n2.5,3\n"
    frame = parse_csv(text, ["a", "b"])
    assert frame["b"].dtype == float and frame["b"].iloc[0] == pytest.approx(1.2345678901e29)
    assert parse_csv("a,b\n1,x\n2,3\n", ["a", "b"])["b"].tolist() == ["x", "3"]  # text stays


def test_stray_text_is_none_for_numbers_and_for_a_column_of_words():
    import pandas as pd

    from fedforest.federation.csv_text import stray_text

    assert stray_text(pd.Series([1.0, 2.0, None])) is None
    assert stray_text(pd.Series(["never", "former", "current"])) is None
    assert stray_text(pd.Series(["True", "False", None], dtype="string")) is None
    found = stray_text(pd.Series(["1", "2", "yes", "3"], dtype=object))
    assert found.mask.tolist() == [False, False, True, False] and "boolean" in found.note
