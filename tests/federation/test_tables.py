"""A site's data file (federation/tables.py): what is refused, with the file, column and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedforest.errors import ConfigError
from fedforest.federation.config import SiteConfig
from fedforest.federation.tables import check_data, read_table

from .test_config import assert_precise, site_dict, write_csv


# --------------------------------------------------------------------------- site: check_data
@pytest.fixture
def small_csv(tmp_path) -> Path:
    path = tmp_path / "data" / "site.csv"
    path.parent.mkdir()
    rows = [
        (50, 100, "never", 0),
        (61, 130, "current", 1),
        (47, 95, "never", 0),
        (70, 160, "former", 1),
        (58, 110, "never", 0),
        (66, 142, "current", 1),
        (39, 90, "former", 0),
        (72, 151, "never", 1),
        (55, 104, "never", 0),
        (63, 137, "current", 1),
        (44, 99, "former", 0),
        (68, 149, "never", 1),
    ]
    lines = ["age,glucose_mg_dl,smoker,outcome", *(",".join(map(str, r)) for r in rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


def site_config(path: Path, **changes) -> SiteConfig:
    """A site of the small tables below, too small for the default 5-row leaves: its
    ``privacy`` block gets ``min_leaf_rows: 1`` unless it sets one (``privacy=None``: no
    block, the default)."""
    block = changes.get("privacy", {})
    if isinstance(block, dict) and "min_leaf_rows" not in block and "dp_epsilon" not in block:
        changes["privacy"] = {**block, "min_leaf_rows": 1}
    return SiteConfig.from_dict(site_dict(data_path=str(path), **changes), "site-1.yaml")


def test_check_data_returns_global_columns(small_csv):
    cfg = site_config(
        small_csv, renames={"glucose_mg_dl": "glucose"}, categorical=["smoker", "glucose"]
    )
    assert check_data(cfg) == ["age", "glucose", "smoker", "outcome"]


def test_check_data_accepts_a_renamed_target(small_csv):
    cfg = site_config(small_csv, renames={"outcome": "y"}, target="y")
    assert check_data(cfg)[-1] == "y"


def test_check_data_missing_file(tmp_path):
    missing = tmp_path / "nowhere.csv"
    with pytest.raises(ConfigError) as info:
        check_data(site_config(missing))
    assert_precise(
        info.value,
        "site-1.yaml",
        "data_path",
        str(missing),
        "a path to an existing CSV file (file not found)",
    )


def test_check_data_unknown_target(small_csv):
    with pytest.raises(ConfigError) as info:
        check_data(site_config(small_csv, target="death"))
    assert_precise(
        info.value,
        "site-1.yaml",
        "target",
        "death",
        "a column of the data file: age, glucose_mg_dl, smoker, outcome",
    )


def test_check_data_unknown_categorical(small_csv):
    with pytest.raises(ConfigError) as info:
        check_data(site_config(small_csv, categorical=["smoker", "sex"]))
    assert_precise(
        info.value,
        "site-1.yaml",
        "categorical",
        "sex",
        "columns of the data file: age, glucose_mg_dl, smoker, outcome",
    )


def test_check_data_categorical_must_use_the_global_name(small_csv):
    cfg = site_config(
        small_csv, renames={"glucose_mg_dl": "glucose"}, categorical=["glucose_mg_dl"]
    )
    with pytest.raises(ConfigError) as info:
        check_data(cfg)
    assert_precise(
        info.value,
        "site-1.yaml",
        "categorical",
        "glucose_mg_dl",
        "columns of the data file: age, glucose, smoker, outcome",
    )


def test_check_data_rename_of_a_column_not_in_the_file(small_csv):
    with pytest.raises(ConfigError) as info:
        check_data(site_config(small_csv, renames={"glucose": "glc"}))
    assert_precise(
        info.value,
        "site-1.yaml",
        "renames.glucose",
        "glucose",
        "a column of the data file: age, glucose_mg_dl, smoker, outcome",
    )


def test_check_data_rename_onto_an_existing_column(small_csv):
    with pytest.raises(ConfigError) as info:
        check_data(site_config(small_csv, renames={"glucose_mg_dl": "age"}))
    assert_precise(
        info.value,
        "site-1.yaml",
        "renames.glucose_mg_dl",
        "age",
        "a global name no other column of the data file has: age, age, smoker, outcome",
    )


def test_check_data_unreadable_csv(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("")
    with pytest.raises(ConfigError, match="cannot be read as CSV") as info:
        check_data(site_config(path))
    assert str(info.value).startswith("site-1.yaml: ") and str(path) in str(info.value)


# --------------------------------------------------------------------------- site: table rules
def table_rows(n: int = 12) -> list[list]:
    """``n`` plausible rows: age, glucose, smoker, outcome (no index-like column)."""
    smokers = ["never", "former", "current"]
    return [[30 + (7 * i) % 41, 90 + (13 * i) % 70, smokers[i % 3], i % 2] for i in range(n)]


HEADER = ["age", "glucose", "smoker", "outcome"]


def assert_data_error(err: ConfigError, data: Path, *parts: str) -> None:
    """The message names the YAML, the data file, and holds every part (column, line, allowed)."""
    msg = str(err)
    assert msg.startswith(f"site-1.yaml: data file {data}: "), msg
    for part in parts:
        assert part in msg, (part, msg)


def test_duplicate_column_names_are_refused_from_the_raw_header(tmp_path):
    data = write_csv(
        tmp_path / "d.csv",
        ["age", "glucose", "smoker", "glucose", "outcome"],
        [[r[0], r[1], r[2], r[1] + 1, r[3]] for r in table_rows()],
    )
    with pytest.raises(ConfigError) as info:
        check_data(site_config(data))
    assert_data_error(
        info.value,
        data,
        "column 'glucose' appears 2 times in the header (fields 2, 4)",
        "'glucose.1'",
        "allowed: distinct column names",
    )


def test_a_saved_pandas_index_is_refused_and_can_be_dropped(tmp_path):
    import pandas as pd

    frame = pd.DataFrame(table_rows(), columns=HEADER)
    data = tmp_path / "d.csv"
    frame.to_csv(data)  # index=True: an empty first header field
    assert data.read_text().startswith(",age,")
    with pytest.raises(ConfigError) as info:
        check_data(site_config(data))
    assert_data_error(
        info.value,
        data,
        "column 'Unnamed: 0' has no name in the header, like a saved pandas index",
        "allowed: named feature columns: drop it with drop_columns: ['Unnamed: 0']",
    )
    assert check_data(site_config(data, drop_columns=["Unnamed: 0"])) == HEADER
    # read back and saved again by pandas: now literally named 'Unnamed: 0'
    pd.read_csv(data).to_csv(data, index=False)
    with pytest.raises(ConfigError, match="column 'Unnamed: 0' has no name"):
        check_data(site_config(data))


@pytest.mark.parametrize("start", [0, 1])
def test_a_column_counting_rows_is_refused_and_can_be_dropped(tmp_path, start):
    rows = table_rows()
    data = write_csv(
        tmp_path / "d.csv",
        ["record", *HEADER],
        [[start + i, *row] for i, row in enumerate(rows)],
    )
    with pytest.raises(ConfigError) as info:
        check_data(site_config(data))
    assert_data_error(
        info.value,
        data,
        f"column 'record' holds exactly {start}..{start + len(rows) - 1} in row order",
        "allowed: feature columns only: drop it with drop_columns: ['record'] in site-1.yaml",
    )
    cfg = site_config(data, drop_columns=["record"])
    assert check_data(cfg) == HEADER
    assert "record" not in read_table(cfg).columns
    # the same numbers in another order are a feature
    shuffled = [[(5 * i) % len(rows), *row] for i, row in enumerate(rows)]
    write_csv(data, ["record", *HEADER], shuffled)
    assert check_data(site_config(data)) == ["record", *HEADER]


def test_drop_columns_must_name_columns_of_the_file(tmp_path):
    data = write_csv(tmp_path / "d.csv", HEADER, table_rows())
    with pytest.raises(ConfigError) as info:
        check_data(site_config(data, drop_columns=["patient_id"]))
    assert_precise(
        info.value,
        "site-1.yaml",
        "drop_columns",
        "patient_id",
        "columns of the data file: age, glucose, smoker, outcome",
    )


def test_dropped_columns_are_never_read(tmp_path):
    """A dropped identifier with 20,000 distinct text values and a stray byte-free mess."""
    rows = [[f"P{i:05d}-{'x' * (i % 3)}", *row] for i, row in enumerate(table_rows())]
    data = write_csv(tmp_path / "d.csv", ["patient_id", *HEADER], rows)
    cfg = site_config(data, drop_columns=["patient_id"])
    frame = read_table(cfg)
    assert list(frame.columns) == HEADER and len(frame) == 12


def test_bytes_that_are_not_utf8_are_refused_naming_the_line(tmp_path):
    data = write_csv(tmp_path / "d.csv", HEADER, table_rows())
    lines = data.read_bytes().split(b"\n")
    lines[3] = lines[3].replace(b"never", b"n\xe9ver").replace(b"former", b"f\xe9rmer")
    lines[3] = lines[3].replace(b"current", b"c\xe9rrent")
    data.write_bytes(b"\n".join(lines))
    with pytest.raises(ConfigError) as info:
        check_data(site_config(data))
    assert_data_error(
        info.value, data, "line 4 holds the byte(s) b'\\xe9'", "not UTF-8", "allowed: UTF-8 text"
    )


def test_utf8_with_a_byte_order_mark_is_fine(tmp_path):
    data = write_csv(tmp_path / "d.csv", HEADER, table_rows())
    data.write_bytes(b"\xef\xbb\xbf" + data.read_bytes())
    assert check_data(site_config(data)) == HEADER


@pytest.mark.parametrize(
    ("row", "fields"),
    [([50, 100, "never", 0, 7], 5), ([50, 100, "never"], 3)],
    ids=["more fields", "fewer fields"],
)
def test_ragged_rows_are_refused_naming_the_line(tmp_path, row, fields):
    rows = table_rows()
    rows.insert(3, row)  # the 4th data row: line 5
    data = write_csv(tmp_path / "d.csv", HEADER, rows)
    with pytest.raises(ConfigError) as info:
        check_data(site_config(data))
    assert_data_error(
        info.value,
        data,
        f"line 5 has {fields} field(s) but the header has 4",
        "allowed: exactly 4 comma-separated fields on every row",
    )


def test_blank_lines_and_quoted_newlines_keep_line_numbers_right(tmp_path):
    data = tmp_path / "d.csv"
    rows = table_rows()
    rows[4][1] = "1e39"
    text = [",".join(map(str, r)) for r in rows]
    text[2] = '47,95,"never\nagain",0'  # one row over two lines
    # line 1 header, 2 row 0, 3 blank, 4 row 1, 5-6 row 2, 7 row 3, 8 row 4
    data.write_text("\n".join(["age,glucose,smoker,outcome", text[0], "", *text[1:]]) + "\n")
    with pytest.raises(ConfigError) as info:
        check_data(site_config(data))
    assert_data_error(info.value, data, "column 'glucose' holds 1e+39 (line 8)")


def test_a_file_separated_by_semicolons_is_refused(tmp_path):
    data = tmp_path / "d.csv"
    data.write_text("\n".join(";".join(map(str, r)) for r in [HEADER, *table_rows()]) + "\n")
    with pytest.raises(ConfigError) as info:
        check_data(site_config(data))
    assert_data_error(
        info.value,
        data,
        "the header is a single column 'age;glucose;smoker;outcome': the fields seem separated "
        "by ';'",
        "allowed: a comma-separated file",
    )


def test_numbers_overflowing_float32_are_refused_naming_column_and_line(tmp_path):
    rows = table_rows()
    rows[5][1] = "4e38"
    data = write_csv(tmp_path / "d.csv", HEADER, rows)
    with pytest.raises(ConfigError) as info:
        check_data(site_config(data, renames={"glucose": "glc"}))
    assert_data_error(
        info.value,
        data,
        "column 'glucose' (renamed to 'glc') holds 4e+38 (line 7)",
        "overflows float32",
        "allowed: finite numbers of magnitude at most 3.402823e+38",
    )
    rows[5][1] = "-inf"
    write_csv(data, HEADER, rows)
    with pytest.raises(ConfigError, match=r"column 'glucose' holds -inf \(line 7\)"):
        check_data(site_config(data))
    rows[5][1] = "3e38"  # within float32
    write_csv(data, HEADER, rows)
    assert check_data(site_config(data)) == HEADER


def test_numbers_too_long_for_pandas_integers_are_still_numbers(tmp_path):
    rows = table_rows()
    rows[0][1] = "9" * 25  # pandas keeps it as text; still a number, and finite in float32
    data = write_csv(tmp_path / "d.csv", HEADER, rows)
    frame = read_table(site_config(data))
    assert frame["glucose"].dtype == float and frame["glucose"].iloc[0] == pytest.approx(1e25)


def test_a_numeric_column_with_stray_text_is_refused(tmp_path):
    rows = table_rows()
    rows[4][1] = "?"
    data = write_csv(tmp_path / "d.csv", HEADER, rows)
    with pytest.raises(ConfigError) as info:
        check_data(site_config(data))
    assert_data_error(
        info.value,
        data,
        "column 'glucose' holds numbers but also 1 text value(s) such as ['?'] (line 6)",
        "allowed: numbers only, with an empty field for a missing value (or list the column "
        "under categorical",
    )
    # empty fields are missing values; a listed categorical column may mix numbers and text
    rows[4][1] = ""
    write_csv(data, HEADER, rows)
    assert check_data(site_config(data)) == HEADER
    rows[4][1] = "4a"
    write_csv(data, HEADER, rows)
    assert check_data(site_config(data, categorical=["glucose"])) == HEADER


def test_a_text_column_with_more_levels_than_max_levels_is_refused(tmp_path):
    from fedforest.model.payload_checks import MAX_LEVELS

    n = MAX_LEVELS + 1
    rows = [[f"note {i}", 30 + i % 50, i % 2] for i in range(n)]
    data = write_csv(tmp_path / "d.csv", ["free_text", "age", "outcome"], rows)
    with pytest.raises(ConfigError) as info:
        check_data(site_config(data))
    assert_data_error(
        info.value,
        data,
        f"column 'free_text' has {n} distinct values, more than MAX_LEVELS = {MAX_LEVELS}",
        "free text or an identifier",
        f"allowed: categorical columns of at most {MAX_LEVELS} levels: drop it with "
        "drop_columns: ['free_text']",
    )
    assert check_data(site_config(data, drop_columns=["free_text"])) == ["age", "outcome"]


def test_column_names_with_surrounding_spaces_are_refused(tmp_path):
    data = write_csv(tmp_path / "d.csv", ["age ", *HEADER[1:]], table_rows())
    with pytest.raises(ConfigError) as info:
        check_data(site_config(data))
    assert_data_error(
        info.value,
        data,
        "column 'age ' has spaces around it, so it would not match 'age' elsewhere",
        "allowed: names as they read: rename it with renames: {'age ': 'age'}",
    )
    assert check_data(site_config(data, renames={"age ": "age"})) == HEADER


def test_too_few_rows_are_refused_when_the_job_is_built(tmp_path):
    data = write_csv(tmp_path / "d.csv", HEADER, table_rows(9))
    with pytest.raises(ConfigError) as info:
        check_data(site_config(data))
    assert_data_error(
        info.value, data, "has 9 rows; at least 10", "allowed: a table of at least 10"
    )


@pytest.mark.parametrize(
    ("value", "parts"),
    [
        ("", ["target column 'outcome' has 1 missing value(s) (line 4)", "a class label"]),
        ("0.5", ["target column 'outcome' holds non-integer numbers such as 0.5 (line 4)"]),
    ],
    ids=["missing", "a measurement"],
)
def test_a_target_that_is_not_class_labels_is_refused(tmp_path, value, parts):
    rows = table_rows()
    rows[2][3] = value
    data = write_csv(tmp_path / "d.csv", HEADER, rows)
    with pytest.raises(ConfigError) as info:
        check_data(site_config(data))
    assert_data_error(info.value, data, *parts)


def test_a_single_class_is_refused_when_the_job_is_built(tmp_path):
    rows = [[*row[:3], "yes"] for row in table_rows()]
    data = write_csv(tmp_path / "d.csv", HEADER, rows)
    with pytest.raises(ConfigError) as info:
        check_data(site_config(data))
    assert_data_error(
        info.value,
        data,
        "target column 'outcome' has a single class ['yes']",
        "allowed: a target with at least two classes",
    )


# --------------------------------------------------------------------------- site: label_map
def test_label_map_recodes_the_target_when_the_table_is_read(tmp_path):
    rows = [[*row[:3], ["No", "Yes"][row[3]]] for row in table_rows()]
    data = write_csv(tmp_path / "d.csv", HEADER, rows)
    cfg = site_config(data, label_map={"No": 0, "Yes": 1})
    frame = read_table(cfg)
    assert frame["outcome"].tolist() == [r[3] for r in table_rows()]
    assert frame["outcome"].dtype == "int64"
    # a partial map to labels of the same type leaves the others as they are
    frame = read_table(site_config(data, label_map={"Yes": "yes"}))
    assert sorted(set(frame["outcome"])) == ["No", "yes"]


def test_label_map_keys_must_be_labels_of_the_target(tmp_path):
    data = write_csv(tmp_path / "d.csv", HEADER, table_rows())
    with pytest.raises(ConfigError) as info:
        check_data(site_config(data, label_map={2: 1, 1: 0}))
    assert_precise(
        info.value, "site-1.yaml", "label_map.2", 2, "labels of the target column 'outcome': 0, 1"
    )
    # integer labels may be written as strings
    frame = read_table(site_config(data, label_map={"1": 2, "0": 1}))
    assert sorted(set(frame["outcome"])) == [1, 2]


def test_label_map_must_leave_labels_of_one_type(tmp_path):
    rows = [[*row[:3], ["no", "yes", "unknown"][i % 3]] for i, row in enumerate(table_rows())]
    data = write_csv(tmp_path / "d.csv", HEADER, rows)
    with pytest.raises(ConfigError) as info:
        check_data(site_config(data, label_map={"no": 0, "yes": 1}))
    assert_precise(
        info.value,
        "site-1.yaml",
        "label_map",
        {"no": 0, "yes": 1},
        "global labels of one type (all integers or all text); the target's labels after "
        "mapping are [0, 1, 'unknown']",
    )


# --------------------------------------------------------------------------- privacy block vs table
def test_the_privacy_block_is_checked_against_the_data_at_build(small_csv):
    # a grid cannot name a categorical column, whatever the hospital's own file says
    cfg = site_config(small_csv, privacy={"threshold_grid": {"step": 1, "steps": {"smoker": 1}}})
    with pytest.raises(ConfigError) as info:
        check_data(cfg)
    assert_precise(info.value, "site-1.yaml", "privacy.threshold_grid", ["smoker"], "numeric")
    # 12 rows leave 6 training rows with validation holdout: leaves of 4 rows cannot split
    cfg = site_config(small_csv, privacy={"min_leaf_rows": 4}, validation="holdout")
    with pytest.raises(ConfigError) as info:
        check_data(cfg)
    msg = str(info.value)
    assert_precise(info.value, "site-1.yaml", "privacy.min_leaf_rows", 4, "at most 3")
    assert "gives 6 training rows" in msg
    check_data(site_config(small_csv, privacy={"min_leaf_rows": 3}, validation="holdout"))
    # with oob no validation rows are held out: 9 training rows
    check_data(site_config(small_csv, privacy={"min_leaf_rows": 4}))
    with pytest.raises(ConfigError, match="gives 9 training rows"):
        check_data(site_config(small_csv, privacy={"min_leaf_rows": 5}))
    # the default 5-row leaves: the message says where to lower them
    with pytest.raises(ConfigError) as info:
        check_data(site_config(small_csv, privacy=None, validation="holdout"))
    assert_precise(info.value, "site-1.yaml", "privacy.min_leaf_rows", 5, "at most 3")
    assert "5 is the default when site-1.yaml sets none" in str(info.value)
    # the job's block must be applicable as it stands: every site would refuse to start
    with pytest.raises(ConfigError) as info:
        check_data(site_config(small_csv, privacy={"threshold_grid": {"steps": {"age": 1}}}))
    assert_precise(
        info.value,
        "site-1.yaml",
        "privacy.threshold_grid",
        {"steps": {"age": 1.0}},
        "a rule for every numeric feature",
    )
    assert "['glucose_mg_dl'] have none" in str(info.value)
    with pytest.raises(ConfigError) as info:
        check_data(site_config(small_csv, privacy={"dp_epsilon": 1.0}))
    assert_precise(
        info.value,
        "site-1.yaml",
        "privacy.feature_ranges",
        {},
        "a public [low, high] for every numeric feature in DP mode; missing: ['age', 'glucose_mg_dl']",
    )
    ranges = {"age": [0, 120], "glucose_mg_dl": [0, 400]}
    check_data(site_config(small_csv, privacy={"dp_epsilon": 1.0, "feature_ranges": ranges}))
    check_data(site_config(small_csv, privacy={"threshold_grid": {"step": 1, "steps": {"age": 5}}}))


# --------------------------------------------------------------------------- regression targets
def regression_site(tmp_path, outcome, **changes) -> SiteConfig:
    path = tmp_path / "reg.csv"
    lines = ["age,bmi,outcome", *(f"{40 + i},{20 + i % 7},{v}" for i, v in enumerate(outcome))]
    path.write_text("\n".join(lines) + "\n")
    data = site_dict(data_path=str(path), privacy={"min_leaf_rows": 1}, **changes)
    return SiteConfig.from_dict(data, "site-1.yaml", task="regression")


def test_a_regression_job_reads_its_target_as_numbers(tmp_path):
    site = regression_site(tmp_path, [1.5, 2.25, 7.0, 3.5, 4.0, 2.0, 9.5, 1.0, 6.0, 5.5])
    frame = read_table(site)
    assert frame["outcome"].dtype == float and frame["outcome"].iloc[1] == 2.25
    assert check_data(site) == ["age", "bmi", "outcome"]


@pytest.mark.parametrize(
    "outcome, says",
    [
        (["yes", "no"] * 5, "a class label, not a number"),
        ([0, 1] * 5, "only the values [0.0, 1.0]"),
        ([1.0, None, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], "has 1 missing value(s)"),
    ],
)
def test_a_class_like_or_missing_regression_target_is_refused_with_the_reason(
    tmp_path, outcome, says
):
    site = regression_site(tmp_path, ["" if v is None else v for v in outcome])
    with pytest.raises(ConfigError) as info:
        read_table(site)
    message = str(info.value)
    assert says in message and "site-1.yaml" in message
    if "missing" not in says:
        assert "job.task: classification" in message


def test_a_fractional_target_in_a_classification_job_names_the_regression_task(tmp_path):
    path = tmp_path / "frac.csv"
    path.write_text("age,outcome\n" + "".join(f"{40 + i},{i + 0.5}\n" for i in range(10)))
    site = SiteConfig.from_dict(site_dict(data_path=str(path)), "site-1.yaml")
    with pytest.raises(ConfigError, match="set job.task: regression in job.yaml"):
        read_table(site)


def test_a_regression_site_refuses_a_label_map_and_a_calibration():
    for key, value in (("label_map", {"yes": 1}), ("calibration", "isotonic")):
        with pytest.raises(ConfigError, match=f"key '{key}'.*regression job"):
            SiteConfig.from_dict(site_dict(**{key: value}), "site-1.yaml", task="regression")


# ------------------------------------------------------------ names read as a person reads them
@pytest.mark.parametrize(
    ("key", "given", "column"),
    [
        ("target", "Outcome", "'outcome'"),
        ("categorical", "SMOKER", "'smoker'"),
        ("drop_columns", "Age", "'age'"),
        ("renames.glucose\u200b", "glucose\u200b", "'glucose'"),
    ],
)
def test_a_key_naming_a_column_that_is_not_there_names_the_one_that_reads_like_it(
    tmp_path, key, given, column
):
    data = write_csv(tmp_path / "d.csv", HEADER, table_rows())
    changes = {
        "target": {"target": given},
        "categorical": {"categorical": [given]},
        "drop_columns": {"drop_columns": [given]},
        "renames.glucose\u200b": {"renames": {given: "glucose_mg"}},
    }[key]
    with pytest.raises(ConfigError) as info:
        check_data(site_config(data, **changes))
    text = str(info.value)
    assert text.startswith("site-1.yaml: key ") and f"the column {column} reads like it" in text
    assert "names must match exactly" in text


def test_a_column_empty_in_every_row_is_accepted_with_a_warning(tmp_path, caplog):
    rows = [[r[0], "", r[2], r[3]] for r in table_rows()]
    data = write_csv(tmp_path / "d.csv", HEADER, rows)
    with caplog.at_level("WARNING", logger="fedforest.federation.tables"):
        assert check_data(site_config(data)) == HEADER
        check_data(site_config(data))  # read again, said once
    said = [r.getMessage() for r in caplog.records if "empty in every row" in r.getMessage()]
    assert len(said) == 1 and "column 'glucose'" in said[0] and str(data) in said[0]


def test_a_table_in_memory_with_huge_integers_is_read_without_an_error(tmp_path):
    import pandas as pd

    from fedforest.federation.tables import check_table

    data = write_csv(tmp_path / "d.csv", HEADER, table_rows())
    frame = pd.read_csv(data)
    frame["big"] = [10**29 + i for i in range(len(frame))]  # python ints beyond int64
    checked = check_table(site_config(data), frame)
    assert len(checked) == len(frame)


def test_read_site_csv_applies_the_data_file_rules_without_a_yaml(tmp_path):
    from fedforest.federation.tables import read_site_csv

    def fail(what, allowed):
        raise ValueError(f"{what}; allowed: {allowed}")

    good = write_csv(tmp_path / "g.csv", HEADER, table_rows())
    assert list(read_site_csv(good, fail)) == HEADER
    cases = {
        "age,glucose,,outcome": "column 'Unnamed: 2' has no name in the header",
        "age,gluc\u200bose,smoker,outcome": "U+200B (ZERO WIDTH SPACE)",
        "age ,glucose,smoker,outcome": "has spaces around it",
    }
    for header, words in cases.items():
        bad = tmp_path / "b.csv"
        bad.write_text(header + "\n" + "\n".join(",".join(map(str, r)) for r in table_rows()))
        with pytest.raises(ValueError) as info:
            read_site_csv(bad, fail)
        assert (
            words in str(info.value)
            and "correct the header" in str(info.value)
            or ("remove the column" in str(info.value))
        )
    rows = [[r[0], "True" if i == 3 else r[1], r[2], r[3]] for i, r in enumerate(table_rows())]
    mixed = write_csv(tmp_path / "m.csv", HEADER, rows)
    with pytest.raises(ValueError, match=r"column 'glucose' holds numbers but also 1 .*line 5"):
        read_site_csv(mixed, fail)
    assert read_site_csv(mixed, fail, exempt=["glucose"])["glucose"].iloc[3] == "True"


# --------------------------------------------------------------------------- survival outcome
def survival_config(path, **changes) -> SiteConfig:
    data = {"site": "site-1", "data_path": str(path), "time": "months", "event": "died"}
    data.update(changes)
    return SiteConfig.from_dict(data, "s.yaml", task="survival")


def survival_rows(event=lambda i: i % 2, time=lambda i: 3 * i + 2.5):
    return [[i % 5, time(i), event(i)] for i in range(40)]


@pytest.mark.parametrize("coding", [(1, 0), ("true", "false"), ("True", "False"), (1.0, 0.0)])
def test_a_survival_table_reads_times_as_floats_and_events_as_0_1(tmp_path, coding):
    rows = survival_rows(event=lambda i: coding[i % 2])
    path = write_csv(tmp_path / "d.csv", ["x", "months", "died"], rows)
    frame = read_table(survival_config(path))
    assert frame["died"].tolist() == [1, 0] * 20
    assert frame["months"].dtype == float and frame["months"].iloc[1] == 5.5


@pytest.mark.parametrize(
    "rows, what, allowed",
    [
        (survival_rows(event=lambda i: 2 if i == 3 else i % 2), "event column 'died'", "1 (the"),
        (survival_rows(event=lambda i: "yes"), "event column 'died'", "1 (the event happened)"),
        (survival_rows(time=lambda i: -1 if i == 4 else i + 0.5), "time column 'months'", ">= 0"),
        (survival_rows(time=lambda i: "" if i == 4 else i + 0.5), "missing value", "a value on"),
        (survival_rows(event=lambda i: "" if i == 4 else 1), "missing value", "a value on every"),
    ],
)
def test_a_survival_table_refuses_bad_times_and_events_naming_file_and_column(
    tmp_path, rows, what, allowed
):
    path = write_csv(tmp_path / "d.csv", ["x", "months", "died"], rows)
    with pytest.raises(ConfigError) as err:
        read_table(survival_config(path))
    msg = str(err.value)
    assert msg.startswith(f"s.yaml: data file {path}: ") and what in msg, msg
    assert "allowed: " in msg and allowed in msg.split("allowed: ", 1)[1], msg


def test_a_survival_site_names_a_missing_time_column_by_its_key(tmp_path):
    path = write_csv(tmp_path / "d.csv", ["x", "month", "died"], survival_rows())
    with pytest.raises(ConfigError) as err:
        read_table(survival_config(path))
    assert_precise(err.value, "s.yaml", "time", "months", "a column of the data file")
