"""Hostile tables for every command that reads them: ``predict``, ``job build``,
``experiment --site-files`` and ``elect``.

Each case is a neighbour of one input rule: a name that reads like another
(format characters, spaces of every kind, default-ignorable marks, NFD,
compatibility forms, case, Cyrillic look-alikes), a value that is not what it
looks like (booleans, level codes, dates, ``?``, infinities, hexadecimal and
huge numbers, decimal commas), a file saved another way (separators,
encodings, byte-order marks, line ends), and degenerate tables (empty
columns, duplicate or empty header fields, no rows, one column), plus the
names given in YAML keys and options, and one table given twice. Every case
asserts either a refusal that names the file (or its site YAML), the column
or key and the value, with the fix, or a result with its notice; and that no
traceback and no Python or numpy warning reaches the user (warnings are
errors while a command runs). The tables are small and nothing runs FLARE.
"""

from __future__ import annotations

import dataclasses
import os
import unicodedata
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from sklearn.ensemble import RandomForestClassifier

from fedforest import PooledForest
from fedforest.cli import main
from fedforest.columns import spelled
from fedforest.model.model_files import save_payload
from fedforest.model.pooled_model import PooledModel

COMMANDS = ("predict", "job", "elect", "experiment")
SITE_COMMANDS = ("job", "elect", "experiment")
LEVELS = ["current", "former", "never"]
GLUCOSE = unicodedata.normalize("NFC", "glucosé")
N_ROWS = 40
EXPERIMENT = ["--reps", "1", "--trees", "3", "--methods", "local", "--metrics", "auc"]


def table(seed: int = 0, n: int = N_ROWS) -> pd.DataFrame:
    """A plausible site: two numbers, an accented name, a categorical and a 0/1 outcome."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(20, 90, n).astype(float),
            "bmi": rng.normal(27, 4, n).round(1),
            GLUCOSE: rng.normal(100, 15, n).round(0),
            "smoker": [LEVELS[(i + seed) % 3] for i in range(n)],
            "outcome": np.arange(n) % 2,
        }
    )


def text(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False)


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """A real forest on the table's four features (``smoker``: current/former/never)."""
    frame = table(seed=7, n=200)
    X = frame.drop(columns="outcome").assign(smoker=frame["smoker"].map(LEVELS.index))
    y = ((frame["age"] > 50) ^ (frame["bmi"] > 27)).astype(int)
    rf = RandomForestClassifier(n_estimators=4, max_depth=4, random_state=0).fit(X, y)
    forest = PooledForest.from_sklearn(rf, list(X.columns), "site-1", categories={"smoker": LEVELS})
    folder = tmp_path_factory.mktemp("model")
    return save_payload(folder / "pooled_model.npz", PooledModel(forest).to_payload())


class Built(Exception):
    """Raised in place of exporting the FLARE job: every check of ``job build`` passed."""


@dataclasses.dataclass
class Outcome:
    code: int
    err: str  # standard error, then standard output
    logs: str  # the warnings logged
    named: list  # the paths a refusal must name (one of them)
    out: str = ""  # standard output alone

    def result(self, command: str) -> str:
        """What the command computed: predict's rows, elect's elected features."""
        if command == "elect":
            return next(line for line in self.out.splitlines() if line.startswith("elected:"))
        return self.out


def _run(argv, capsys, caplog) -> tuple[int, str, str, str]:
    caplog.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a raw warning fails the case
        try:
            code = main(argv)
        except Built:
            code = 0
    captured = capsys.readouterr()
    err = captured.err + captured.out
    assert "Traceback" not in err and "Warning:" not in err, err
    logs = "\n".join(r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    return code, err, logs, captured.out


def attempt(
    command, tmp_path, hostile, *extra, keys=None, prepare=None, capsys, caplog, monkeypatch
):
    """Run ``command`` with one good site (or none, for predict) and the ``hostile`` file
    (text, or bytes as saved); ``keys`` go into the hostile site's YAML (job);
    ``prepare(good, hostile)`` may change the files before the command runs."""
    folder = tmp_path / f"{command}-{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    good = folder / ("site-1.csv" if command == "job" else "north.csv")
    good.write_text(text(table(seed=1)), encoding="utf-8")
    bad = folder / ("site-2.csv" if command == "job" else "south.csv")
    if isinstance(hostile, bytes):
        bad.write_bytes(hostile)
    else:
        bad.write_text(hostile, encoding="utf-8", newline="")
    if prepare is not None:
        prepare(good, bad)
    if command == "predict":
        argv = ["predict", "--model", str(extra[0]), "--data", str(bad), *extra[1:]]
        code, err, logs, out = _run(argv, capsys, caplog)
        return Outcome(code, err, logs, [str(bad)], out)
    if command == "elect":
        argv = ["elect", str(good), str(bad), "--target", "outcome", "--selector", "f_classif"]
        code, err, logs, out = _run([*argv, *extra], capsys, caplog)
        return Outcome(code, err, logs, [str(bad)], out)
    if command == "experiment":
        argv = ["experiment", "--site-files", str(good), str(bad), "--target", "outcome"]
        argv += [*EXPERIMENT, "--no-report", "--out", str(folder / "out"), *extra]
        code, err, logs, out = _run(argv, capsys, caplog)
        return Outcome(code, err, logs, [str(bad)], out)
    configs = folder / "site_configs"
    configs.mkdir()
    job = {
        "job": {"name": "hostile", "sites": ["site-1", "site-2"], "min_sites": 2},
        "forest": {"n_estimators": 3},
        "election": {"enabled": False},
    }
    (configs / "job.yaml").write_text(yaml.safe_dump(job))
    for site, path, more in (("site-1", good, {}), ("site-2", bad, keys or {})):
        data = {"site": site, "data_path": str(path), "target": "outcome", **more}
        (configs / f"{site}.yaml").write_text(yaml.safe_dump(data, allow_unicode=True))

    def built(*args, **kwargs):
        raise Built

    # imported here, before warnings become errors (FLARE's own imports may warn)
    monkeypatch.setattr("fedforest.flare.job.make_fed_job", built)
    argv = ["job", "build", "--config", str(configs), "--out", str(folder / "jobs"), *extra]
    code, err, logs, out = _run(argv, capsys, caplog)
    return Outcome(code, err, logs, [str(bad), str(configs / "site-2.yaml")], out)


def refused(outcome: Outcome, *parts: str) -> None:
    assert outcome.code == 1, outcome.err
    assert "fedforest: error: " in outcome.err
    assert any(path in outcome.err for path in outcome.named), outcome.err
    assert "allowed" in outcome.err.lower() or "rename" in outcome.err, outcome.err
    for part in parts:
        assert part in outcome.err, (part, outcome.err)


def accepted(outcome: Outcome, *notices: str) -> None:
    assert outcome.code == 0, outcome.err
    for notice in notices:
        assert notice in outcome.err or notice in outcome.logs, (notice, outcome.err, outcome.logs)


@pytest.fixture
def go(tmp_path, capsys, caplog, monkeypatch, model):
    """``go(command, hostile, *extra, keys=...)``: :func:`attempt` with the test's fixtures
    (the model first among predict's arguments)."""

    def run(command, hostile, *extra, keys=None, prepare=None):
        if command == "predict":
            extra = (model, *extra)
        return attempt(
            command,
            tmp_path,
            hostile,
            *extra,
            keys=keys,
            prepare=prepare,
            capsys=capsys,
            caplog=caplog,
            monkeypatch=monkeypatch,
        )

    return run


# ------------------------------------------------------------------------------ names
#: Spellings of ``bmi`` that read as ``bmi``, by what makes them differ.
BMI_SPELLINGS = {
    "case upper": "BMI",
    "case title": "Bmi",
    "case mixed": "bMi",
    "Cf zero width space": "bm\u200bi",
    "Cf leading zero width space": "\u200bbmi",
    "Cf zero width non-joiner": "bmi\u200c",
    "Cf zero width joiner": "bmi\u200d",
    "Cf word joiner": "\u2060bmi",
    "Cf byte-order mark inside": "bm\ufeffi",
    "Cf soft hyphen": "b\u00admi",
    "Cf left-to-right mark": "\u200ebmi",
    "Zs no-break space": "bmi\u00a0",
    "Zs leading no-break space": "\u00a0bmi",
    "Zs thin space": "bmi\u2009",
    "Zs narrow no-break space": "bmi\u202f",
    "Zs ideographic space": "\u3000bmi",
    "blank braille pattern": "bmi\u2800",
    "ASCII trailing space": "bmi ",
    "ASCII leading space": " bmi",
    "tab": "bmi\t",
    "Mn combining grapheme joiner": "bmi\u034f",
    "Mn variation selector": "bmi\ufe0f",
    "Lo hangul filler": "bmi\u3164",
    "full-width": "\uff42\uff4d\uff49",
    "full-width upper": "\uff22\uff2d\uff29",
    "full-width partly": "b\uff4di",
    "full-width and zero width": "\uff22\uff2d\u200b\uff29",
    "Cyrillic i": "bm\u0456",
}


@pytest.mark.parametrize("spelling", BMI_SPELLINGS.values(), ids=BMI_SPELLINGS.keys())
@pytest.mark.parametrize("command", COMMANDS)
def test_a_column_named_like_bmi_but_not_bmi_is_refused_naming_it(go, command, spelling):
    outcome = go(command, text(table().rename(columns={"bmi": spelling})))
    if command == "predict":
        refused(outcome, f"column {spelled(spelling)} reads like the model's feature 'bmi'")
        assert "correct the header" in outcome.err and "(write 'bmi')" in outcome.err
    else:
        refused(outcome, spelled(spelling))
        assert "correct" in outcome.err or "renames" in outcome.err


GLUCOSE_SPELLINGS = {
    "NFD": unicodedata.normalize("NFD", GLUCOSE),
    "upper": GLUCOSE.upper(),
    "NFD upper": unicodedata.normalize("NFD", GLUCOSE.upper()),
    "zero width joiner": GLUCOSE + "\u200d",
    "full-width": "\uff47\uff4c\uff55\uff43\uff4f\uff53\u00e9",
}


@pytest.mark.parametrize("spelling", GLUCOSE_SPELLINGS.values(), ids=GLUCOSE_SPELLINGS.keys())
@pytest.mark.parametrize("command", COMMANDS)
def test_an_accented_name_in_another_unicode_form_is_one_name_refused_as_a_look_alike(
    go, command, spelling
):
    outcome = go(command, text(table().rename(columns={GLUCOSE: spelling})))
    refused(outcome, spelled(spelling))
    if command == "predict":
        assert f"reads like the model's feature {spelled(GLUCOSE)}" in outcome.err


@pytest.mark.parametrize("command", COMMANDS)
def test_a_name_with_a_different_accent_is_another_column(go, command):
    """``bmí`` (a combining acute accent) reads differently from ``bmi``: another column."""
    outcome = go(command, text(table().rename(columns={"bmi": "bmi\u0301"})))
    if command == "predict":
        accepted(outcome, "bmi: absent", "ignoring columns the model does not use")
    else:  # a site lacking bmi and holding bmí: sites with different columns
        accepted(outcome)


@pytest.mark.parametrize("command", COMMANDS)
def test_two_columns_that_read_alike_in_one_file_are_refused(go, command):
    outcome = go(command, text(table().assign(BMI=1.5)))
    refused(outcome, "'BMI'", "read alike")


@pytest.mark.parametrize("command", COMMANDS)
def test_a_duplicated_header_name_is_refused_naming_the_fields(go, command):
    outcome = go(command, text(table()).replace("age,bmi", "bmi,bmi", 1))
    refused(outcome, "column 'bmi' appears 2 times in the header (fields 1, 2)")


# ------------------------------------------------------------------------------ values
#: One value written into the hostile file's ``bmi`` (line 4), and what the refusal says.
BAD_NUMBERS = {
    "True": "'True' is a boolean, not a number",
    "TRUE": "'TRUE' is a boolean",
    "false": "'false' is a boolean",
    "yes": "'yes' is a boolean",
    "No": "'No' is a boolean",
    "on": "'on' is a boolean",
    "?": "'?' looks like a mark for a missing value",
    "-": "a mark for a missing value",
    "unknown": "a mark for a missing value",
    "0x1A": "'0x1A' is a hexadecimal number",
    "2024-01-02": "'2024-01-02' is a date, not a number",
    "02/01/2024": "is a date, not a number",
    '"22,5"': "'22,5' looks like a number with a decimal comma",
    '"1,234"': "'1,234' looks like a number with a decimal comma or a thousands separator",
    "22.5\u200b": "a number written with invisible characters",
    "\uff12\uff12.5": "non-ASCII digits",
    "22 5": "",
}


def with_bmi(value: str, row: int = 2) -> str:
    """The hostile table's text with ``bmi`` of data row ``row`` written as ``value``."""
    lines = text(table()).splitlines()
    fields = lines[row + 1].split(",")
    fields[1] = value
    lines[row + 1] = ",".join(fields)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("value", BAD_NUMBERS, ids=[repr(v) for v in BAD_NUMBERS])
@pytest.mark.parametrize("command", COMMANDS)
def test_text_among_numbers_is_refused_naming_the_column_the_value_and_its_look(go, command, value):
    outcome = go(command, with_bmi(value))
    shown = repr(value.strip('"'))
    refused(outcome, "column 'bmi' holds", shown, BAD_NUMBERS[value])
    where = "(row 3)" if command == "predict" else "(line 4)"
    assert where in outcome.err


@pytest.mark.parametrize("value", ["inf", "-inf", "Infinity", "1e39", "-1e400"])
@pytest.mark.parametrize("command", COMMANDS)
def test_numbers_beyond_float32_are_refused_naming_the_line(go, command, value):
    outcome = go(command, with_bmi(value))
    refused(outcome, "column 'bmi' holds", "overflows float32")
    assert ("(row 3)" if command == "predict" else "(line 4)") in outcome.err


@pytest.mark.parametrize("value", ["NA", "nan", "NaN", "null", "N/A"])
@pytest.mark.parametrize("command", COMMANDS)
def test_a_missing_value_word_is_a_missing_value(go, command, value):
    outcome = go(command, with_bmi(value))
    accepted(outcome, *(["bmi: empty in 1 of 40 rows"] if command == "predict" else []))
    if command in ("predict", "elect"):  # as the file with the field left empty
        assert outcome.result(command) == go(command, with_bmi("")).result(command)


@pytest.mark.parametrize("command", COMMANDS)
def test_an_integer_of_thirty_digits_is_a_number(go, command):
    outcome = go(command, with_bmi("123456789012345678901234567890"))
    accepted(outcome)
    if command == "predict":  # as the same number written with an exponent
        assert outcome.result(command) == go(command, with_bmi("1.2345678901234568e+29")).out


@pytest.mark.parametrize(
    "words", [("True", "False"), ("yes", "no"), ("TRUE", "FALSE")], ids=["True", "yes", "TRUE"]
)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_column_of_booleans_is_never_ones_and_zeros(go, command, words):
    frame = table().assign(bmi=[words[i % 2] for i in range(N_ROWS)])
    outcome = go(command, text(frame))
    if command == "predict":
        refused(outcome, "column 'bmi' holds text such as", f"{words[1]!r} is a boolean")
    else:  # a category at this site, numbers at the other
        refused(outcome, "column 'bmi' is categorical at site", "is a boolean, not a number")


@pytest.mark.parametrize("codes", [(0, 1, 2), (0.0, 1.0, 2.0), (1, 2, 3)], ids=str)
@pytest.mark.parametrize("command", COMMANDS)
def test_level_codes_in_a_text_categorical_are_never_read_as_its_levels(go, command, codes):
    frame = table()
    frame["smoker"] = frame["smoker"].map(dict(zip(LEVELS, codes, strict=True)))
    outcome = go(command, text(frame))
    if command == "predict":
        refused(outcome, "column 'smoker' holds numbers such as", "never their codes")
    else:
        refused(outcome, "column 'smoker' is numeric at site", "'current', 'former', 'never'")


@pytest.mark.parametrize("command", COMMANDS)
def test_a_column_of_question_marks_and_numbers_says_what_the_marks_are(go, command):
    frame = table().astype({"bmi": object})
    frame.loc[: N_ROWS * 3 // 4, "bmi"] = "?"
    outcome = go(command, text(frame))
    refused(outcome, "column 'bmi'", "'?' looks like a mark for a missing value")


# ------------------------------------------------------------------------------ levels
LOOK_ALIKE_LEVELS = {
    "upper": "NEVER",
    "title": "Never",
    "trailing space": "never ",
    "leading space": " never",
    "zero width space": "never\u200b",
    "no-break space": "never\u00a0",
    "full-width": "\uff4e\uff45\uff56\uff45\uff52",
    "Cyrillic e": "nev\u0435r",
}


@pytest.mark.parametrize("level", LOOK_ALIKE_LEVELS.values(), ids=LOOK_ALIKE_LEVELS.keys())
@pytest.mark.parametrize("command", COMMANDS)
def test_a_level_that_reads_like_never_is_named_with_escapes(go, command, level):
    frame = table()
    frame["smoker"] = frame["smoker"].replace("never", level)
    outcome = go(command, text(frame))
    if command == "predict":  # routed as missing, and said so
        accepted(outcome, "smoker:", "hold levels the model never saw", f"{spelled(level)} for")
    else:
        refused(outcome, "levels of categorical column 'smoker' differ only by", spelled(level))


@pytest.mark.parametrize("level", ["NEVER", "never\u200b", "True"])
def test_predict_strict_refuses_a_level_the_model_never_saw(go, level):
    frame = table()
    frame["smoker"] = frame["smoker"].replace("never", level)
    outcome = go("predict", text(frame), "--strict")
    refused(outcome, "--strict", "levels the model never saw", spelled(level) if level else "")


@pytest.mark.parametrize("command", COMMANDS)
def test_a_boolean_word_as_a_level_is_a_level_of_its_own(go, command):
    frame = table()
    frame["smoker"] = frame["smoker"].replace("never", "True")
    outcome = go(command, text(frame))
    rows = int((frame["smoker"] == "True").sum())
    notices = [f"'True' ({rows} rows)"] if command == "predict" else []
    accepted(outcome, *notices)


# ------------------------------------------------------------------------------ labels
@pytest.mark.parametrize("labels", [("no", "yes"), ("False", "True"), (1, 2), ("A", "B")], ids=str)
@pytest.mark.parametrize("command", SITE_COMMANDS)
def test_a_target_coded_otherwise_at_one_site_is_refused_not_a_type_error(go, command, labels):
    frame = table().assign(outcome=[labels[i % 2] for i in range(N_ROWS)])
    outcome = go(command, text(frame))
    refused(outcome, "class label")
    assert "TypeError" not in outcome.err


# ------------------------------------------------------------------------------ files
SEPARATED = {
    "semicolons, decimal commas": (text(table()).replace(",", ";"), "separated by ';'"),
    "tabs": (table().to_csv(index=False, sep="\t"), "separated by '\\t'"),
    "vertical bars": (table().to_csv(index=False, sep="|"), "separated by '|'"),
    "spaces": (table().drop(columns=GLUCOSE).to_csv(index=False, sep=" "), "separated by ' '"),
}


@pytest.mark.parametrize("hostile", SEPARATED.values(), ids=SEPARATED.keys())
@pytest.mark.parametrize("command", COMMANDS)
def test_a_file_separated_otherwise_is_refused_naming_the_separator(go, command, hostile):
    refused(go(command, hostile[0]), hostile[1], "the header is a single column")


def test_semicolons_with_decimal_commas_are_named_with_the_conversion(go):
    frame = table()
    body = frame.to_csv(index=False, sep=";", decimal=",")
    refused(go("job", body), "decimal commas", "pandas.read_csv(path, sep=';', decimal=',')")


ENCODED = {
    "UTF-16 with BOM": (text(table()).encode("utf-16"), "starts with a UTF-16 byte-order mark"),
    "UTF-16 LE": (text(table()).encode("utf-16-le"), "seems to be UTF-16 text"),
    "UTF-16 BE": (text(table()).encode("utf-16-be"), "seems to be UTF-16 text"),
    "Latin-1": (text(table()).encode("latin-1"), "b'\\xe9', which are not UTF-8 text"),
    "cp1252 quotes": (
        text(table().assign(smoker="\u201cnever\u201d")).encode("cp1252"),
        "not UTF-8 text",
    ),
    "a NUL byte": (text(table()).replace("\n", "\n\x00", 3).encode(), "NUL byte"),
}


@pytest.mark.parametrize("hostile", ENCODED.values(), ids=ENCODED.keys())
@pytest.mark.parametrize("command", COMMANDS)
def test_a_file_that_is_not_utf8_is_refused_naming_the_line_and_the_fix(go, command, hostile):
    outcome = go(command, hostile[0])
    refused(outcome, hostile[1], "line ")
    assert "UTF-8" in outcome.err


SAVED_OTHERWISE = {
    "UTF-8 byte-order mark": b"\xef\xbb\xbf" + text(table()).encode(),
    "CRLF": text(table()).replace("\n", "\r\n").encode(),
    "CR only": text(table()).replace("\n", "\r").encode(),
    "blank lines": text(table()).replace("\n", "\n\n").encode(),
    "quoted fields": table().to_csv(index=False, quoting=1).encode(),
}


@pytest.mark.parametrize("hostile", SAVED_OTHERWISE.values(), ids=SAVED_OTHERWISE.keys())
@pytest.mark.parametrize("command", COMMANDS)
def test_a_file_saved_another_way_reads_like_the_plain_file(go, command, hostile):
    outcome = go(command, hostile)
    accepted(outcome)
    if command in ("predict", "elect"):
        assert outcome.result(command) == go(command, text(table())).result(command)


DEGENERATE = {
    "empty file": ("", {"*": "the file is empty (no header line)"}),
    "header only": (
        "age,bmi,smoker,outcome\n",
        {
            "predict": "has no data rows",
            "job": "has 0 rows",
            "elect": "has no data rows",
            "experiment": "no rows below the header",
        },
    ),
    "target only": (
        "outcome\n" + "".join(f"{i % 2}\n" for i in range(N_ROWS)),
        {
            "predict": "has none of the model's features",
            "job": "keeps no feature column besides the target",
            "elect": "no feature column besides the target",
            "experiment": "no feature column besides the target",
        },
    ),
    "no target": (
        text(table().drop(columns="outcome")),
        {
            "predict": None,
            "job": "key 'target' is 'outcome'",
            "elect": "--target 'outcome' is not a column",
            "experiment": "the target (--target) 'outcome' is not a column",
        },
    ),
    "ragged row": (text(table()) + "1,2\n", {"*": "line 42 has 2 field(s) but the header has 5"}),
    "empty header field": (
        text(table()).replace("age,bmi", "age,", 1),
        {"predict": None, "*": "column 'Unnamed: 1' has no name in the header"},
    ),
    "trailing comma": (
        text(table()).replace("\n", ",\n"),
        {"predict": None, "*": "column 'Unnamed: 5' has no name in the header"},
    ),
}


@pytest.mark.parametrize("case", DEGENERATE, ids=DEGENERATE.keys())
@pytest.mark.parametrize("command", COMMANDS)
def test_a_degenerate_table_is_refused_by_name_or_read_with_a_notice(go, command, case):
    body, expected = DEGENERATE[case]
    message = expected.get(command, expected.get("*"))
    outcome = go(command, body)
    if message is None:  # predict: the rows are read; what the model lacks is said
        notice = {
            "no target": (),
            "empty header field": ("bmi: absent", "ignoring columns the model does not use"),
            "trailing comma": ("ignoring columns the model does not use: outcome, Unnamed: 5",),
        }[case]
        accepted(outcome, *notice)
    else:
        refused(outcome, message)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_feature_empty_in_every_row_is_read_with_a_notice_naming_it(go, command):
    outcome = go(command, text(table().assign(bmi=np.nan)))
    accepted(outcome, "bmi: empty in every row" if command == "predict" else "'bmi' is empty")


@pytest.mark.parametrize("command", COMMANDS)
def test_one_row_is_refused_or_predicted(go, command):
    outcome = go(command, text(table().head(1)))
    if command == "predict":
        accepted(outcome)
    else:
        refused(outcome)


# ---------------------------------------------------------------- names given in keys and options
YAML_KEYS = {
    "target by case": ({"target": "Outcome"}, "key 'target'", "'outcome' reads like it"),
    "target with a zero width space": (
        {"target": "outcome\u200b"},
        "key 'target'",
        "'outcome' reads like it",
    ),
    "categorical by case": ({"categorical": ["SMOKER"]}, "key 'categorical'", "'smoker' reads"),
    "drop_columns by case": ({"drop_columns": ["AGE"]}, "key 'drop_columns'", "'age' reads"),
    "renames key by case": ({"renames": {"BMI": "bmi2"}}, "key 'renames.BMI'", "'bmi' reads"),
    "rename onto a look-alike": ({"renames": {"age": "BMI"}}, "renames.age", "read alike"),
    "rename onto an invisible name": (
        {"renames": {"bmi": "bm\u200bi"}},
        "U+200B",
        "renames",
    ),
}


@pytest.mark.parametrize("case", YAML_KEYS.values(), ids=YAML_KEYS.keys())
def test_a_yaml_key_naming_a_look_alike_column_is_refused_naming_the_key(go, case):
    keys, *parts = case
    refused(go("job", text(table()), keys=keys), *parts)


@pytest.mark.parametrize("spelling", ["bm\u200bi", "bmi\u00a0", "\uff42\uff4d\uff49", "bm\u0456"])
def test_the_rename_a_refusal_suggests_makes_the_site_accepted(go, spelling):
    hostile = text(table().rename(columns={"bmi": spelling}))
    outcome = go("job", hostile)
    assert outcome.code == 1
    suggested = outcome.err.split("renames: {")[1].split("}")[0]
    fix = yaml.safe_load("{" + suggested + "}")
    if list(fix.values()) != ["bmi"]:  # a look-alike across sites: the fix names the site
        fix = {spelling: "bmi"}
    assert list(fix) == [spelling]
    accepted(go("job", hostile, keys={"renames": fix}))


OPTIONS = {
    "elect --target": ("elect", ["--target", "Outcome"], "'outcome' reads like it"),
    "elect --categorical": ("elect", ["--categorical", "SMOKER"], "'smoker' reads like it"),
    "elect --always-keep": ("elect", ["--always-keep", "BMI"], "'bmi' reads like it"),
    "experiment --categorical": (
        "experiment",
        ["--categorical", "Smoker"],
        "'smoker' reads like it",
    ),
    "predict --rename": ("predict", ["--rename", "BMI=bmi"], "'bmi' reads like it"),
    "predict --id": ("predict", ["--id", "AGE"], "'age' reads like it"),
}


@pytest.mark.parametrize("case", OPTIONS.values(), ids=OPTIONS.keys())
def test_an_option_naming_a_look_alike_column_names_the_column(go, case):
    command, extra, part = case
    outcome = go(command, text(table()), *extra)
    assert outcome.code == 1 and part in outcome.err and "names must match exactly" in outcome.err


def test_experiment_target_that_reads_like_a_column_is_named(go):
    outcome = go("experiment", text(table().rename(columns={"outcome": "Outcome"})))
    refused(outcome, "the target (--target) 'outcome' is not a column", "'Outcome' reads like it")


# ------------------------------------------------------------------------------ one table
def _same(how: str, first: Path, second: Path) -> None:
    second.unlink()
    if how == "hard link":
        os.link(first, second)
    elif how == "symbolic link":
        second.symlink_to(first)
    elif how == "link to a link":
        (first.parent / "middle.csv").symlink_to(first)
        second.symlink_to(first.parent / "middle.csv")
    else:  # a copy
        second.write_bytes(first.read_bytes())


@pytest.mark.parametrize("how", ["hard link", "symbolic link", "link to a link", "copy"])
@pytest.mark.parametrize("command", SITE_COMMANDS)
def test_one_table_given_as_two_sites_is_refused_naming_both(go, command, how):
    outcome = go(command, text(table(seed=1)), prepare=lambda good, bad: _same(how, good, bad))
    first = "site-1.csv" if command == "job" else "north.csv"
    refused(outcome, "one table would count as two sites", first)
