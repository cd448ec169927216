"""``fedforest predict`` reads values as what they are and says what it routes as missing:
on standard error, in ``--report-json``, and ``--strict`` refuses it."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

from fedforest import PooledForest, PooledForestClassifier
from fedforest.cli import main
from fedforest.columns import shell_word, spelled
from fedforest.model.model_files import save_payload
from fedforest.model.pooled_model import PooledModel, PredictionSettings

LEVELS = ["current", "former", "never"]
COLUMNS = ["age", "bmi", "smoker"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A real forest on two numbers and a categorical (levels current/former/never)."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame(
        {
            "age": rng.normal(50, 10, 300),
            "bmi": rng.normal(25, 4, 300),
            "smoker": rng.integers(0, 3, 300).astype(float),
        }
    )
    y = ((X["age"] - 50) / 10 + X["smoker"] - 1 > 0).astype(int)
    rf = RandomForestClassifier(n_estimators=8, max_depth=5, random_state=0).fit(X, y)
    forest = PooledForest.from_sklearn(rf, COLUMNS, "site-1", categories={"smoker": LEVELS})
    folder = tmp_path_factory.mktemp("model")
    path = save_payload(
        folder / "pooled_model.npz",
        PooledModel(forest, settings=PredictionSettings(seed=0)).to_payload(),
    )
    return path, forest


def rows(n: int = 6, **columns) -> pd.DataFrame:
    base = {
        "age": [40 + 5 * i for i in range(n)],
        "bmi": [22.5 + i for i in range(n)],
        "smoker": [LEVELS[i % 3] for i in range(n)],
    }
    base.update(columns)
    return pd.DataFrame({k: v for k, v in base.items() if v is not None})


def run(tmp_path, capsys, model_path, text: str, *extra) -> tuple[int, str, str]:
    data = tmp_path / "rows.csv"
    data.write_text(text, encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no raw numpy/pandas warning reaches the user
        code = main(["predict", "--model", str(model_path), "--data", str(data), *extra])
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "Warning" not in out.err
    return code, out.out, out.err


# ------------------------------------------------------------------ values as what they are
@pytest.mark.parametrize(
    "words", [("True", "False"), ("TRUE", "FALSE"), ("yes", "no"), ("on", "off"), ("T", "F")]
)
def test_booleans_in_a_numeric_feature_are_refused_naming_file_column_and_row(
    model, tmp_path, capsys, words
):
    path, _ = model
    text = rows(bmi=[words[i % 2] for i in range(6)]).to_csv(index=False)
    code, _, err = run(tmp_path, capsys, path, text)
    assert code == 1
    assert f"--data {tmp_path / 'rows.csv'}: column 'bmi' holds text such as" in err
    assert "(row 1)" in err and "'bmi' is a numeric feature" in err
    if words[0] != "T":
        assert "is a boolean, not a number" in err


def test_booleans_mixed_with_numbers_are_refused_too(model, tmp_path, capsys):
    path, _ = model
    text = rows(bmi=[21.0, 22.0, "True", 24.0, 25.0, 26.0]).to_csv(index=False)
    code, _, err = run(tmp_path, capsys, path, text)
    assert code == 1 and "column 'bmi' holds text such as ['True'] (row 3)" in err


@pytest.mark.parametrize("codes", [[0, 1, 2, 0, 1, 2], [0.0, 1.0, 2.0, 0.0, 1.0, 2.0]])
def test_numbers_in_a_categorical_feature_are_refused_as_codes(model, tmp_path, capsys, codes):
    path, _ = model
    code, _, err = run(tmp_path, capsys, path, rows(smoker=codes).to_csv(index=False))
    assert code == 1
    assert "column 'smoker' holds numbers such as ['0', '1', '2'] (row 1)" in err
    assert "levels of 'smoker' are text ('current', 'former', 'never')" in err
    assert "never their codes" in err


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        ('"1,234"', "thousands separator"),
        ('"22,5"', "decimal comma"),
        (" ", "a field of spaces only: leave it empty"),
    ],
)
def test_numbers_written_another_way_are_refused_with_a_hint(model, tmp_path, capsys, value, hint):
    path, _ = model
    text = "age,bmi,smoker\n" + "".join(f"{40 + i},{value},never\n" for i in range(3))
    code, _, err = run(tmp_path, capsys, path, text)
    assert code == 1 and "column 'bmi' holds text" in err and hint in err


@pytest.mark.parametrize("value", ["inf", "-inf", "1e39"])
def test_infinite_numbers_are_refused_naming_the_file(model, tmp_path, capsys, value):
    path, _ = model
    text = rows().to_csv(index=False).replace("22.5", value)
    code, _, err = run(tmp_path, capsys, path, text)
    assert code == 1
    assert f"--data {tmp_path / 'rows.csv'}: column 'bmi' holds" in err and "(row 1)" in err


def test_quoted_numbers_exponents_bom_and_crlf_predict_as_the_plain_file(model, tmp_path, capsys):
    path, forest = model
    frame = rows()
    plain = frame.to_csv(index=False)
    code, expected, _ = run(tmp_path, capsys, path, plain)
    assert code == 0
    lines = plain.strip().split("\n")
    odd = [lines[0]] + [
        f'"{a}",{float(b):.4e},{c}' for a, b, c in (line.split(",") for line in lines[1:])
    ]
    data = tmp_path / "rows.csv"
    data.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(odd).encode() + b"\r\n")
    assert main(["predict", "--model", str(path), "--data", str(data)]) == 0
    assert capsys.readouterr().out == expected
    mine = PooledForestClassifier(forest, strategy="mp", random_state=0).predict_proba(
        frame.assign(smoker=frame["smoker"].map(LEVELS.index).astype(float))
    )
    got = pd.read_csv(pd.io.common.StringIO(expected))[["p_0", "p_1"]].to_numpy()
    assert np.array_equal(got, mine)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("age;bmi;smoker\n40;22,5;never\n45;23,5;former\n", "separated by ';'"),
        ("age\tbmi\tsmoker\n40\t22.5\tnever\n45\t23.5\tformer\n", "separated by '\\t'"),
        ("age bmi smoker\n40 22.5 never\n45 23.5 former\n", "separated by ' '"),
    ],
)
def test_a_file_separated_otherwise_is_named_as_such(model, tmp_path, capsys, text, found):
    path, _ = model
    code, _, err = run(tmp_path, capsys, path, text)
    assert code == 1 and found in err and "has no columns" not in err
    assert "field(s) but the header has 1" not in err


# ------------------------------------------------------------------------ routed as missing
def test_unseen_levels_and_empty_fields_are_reported_and_predicted_as_missing(
    model, tmp_path, capsys
):
    path, forest = model
    frame = rows(smoker=["never", "NEVER", "smoker ", "", "current", "never "])
    frame.loc[2, "bmi"] = np.nan
    report = tmp_path / "report.json"
    code, out, err = run(
        tmp_path, capsys, path, frame.to_csv(index=False), "--report-json", str(report)
    )
    assert code == 0
    assert "bmi: empty in 1 of 6 rows" in err
    assert "smoker: empty in 1 of 6 rows" in err
    assert (
        "smoker: 3 row(s) hold levels the model never saw, read as missing: 'NEVER' (1 row), "
        "'never ' (1 row), 'smoker ' (1 row)"
    ) in err
    assert "read like the model's levels but differ in case, spaces" in err
    assert "'NEVER' for 'never', 'never ' for 'never'" in err
    assert "4 of 6 rows have a feature of the model routed as missing" in err
    # predicted exactly as rows with those values missing
    codes = frame["smoker"].map({v: float(i) for i, v in enumerate(LEVELS)})
    expected = PooledForestClassifier(forest, strategy="mp", random_state=0).predict_proba(
        frame.assign(smoker=codes)
    )
    got = pd.read_csv(pd.io.common.StringIO(out))[["p_0", "p_1"]].to_numpy()
    assert np.array_equal(got, expected)
    written = json.loads(report.read_text(encoding="utf-8"))
    assert written["format"] == "fedforest/predict-report" and written["version"] == 1
    assert written["rows"] == 6 and written["rows_with_missing"] == 4
    smoker = next(f for f in written["features"] if f["feature"] == "smoker")
    assert smoker["unseen_levels"] == {"NEVER": 1, "never ": 1, "smoker ": 1}
    assert smoker["empty_rows"] == 1 and smoker["missing_rows"] == 4
    assert smoker["absent"] is False and smoker["kind"] == "categorical"


def test_a_feature_empty_in_every_row_is_named_as_such(model, tmp_path, capsys):
    path, _ = model
    text = rows(bmi=[""] * 6).to_csv(index=False)
    report = tmp_path / "r.json"
    code, _, err = run(tmp_path, capsys, path, text, "--report-json", str(report))
    assert code == 0
    assert "bmi: empty in every row" in err and "missing on every row, as if absent" in err
    bmi = next(f for f in json.loads(report.read_text())["features"] if f["feature"] == "bmi")
    assert bmi["empty_in_every_row"] is True and bmi["missing_rows"] == 6


def test_an_absent_feature_is_in_the_report(model, tmp_path, capsys):
    path, _ = model
    report = tmp_path / "r.json"
    code, _, err = run(
        tmp_path, capsys, path, rows(bmi=None).to_csv(index=False), "--report-json", str(report)
    )
    assert code == 0 and "bmi: absent" in err
    bmi = next(f for f in json.loads(report.read_text())["features"] if f["feature"] == "bmi")
    assert bmi["absent"] is True and bmi["missing_rows"] == 6 and bmi["empty_in_every_row"]


@pytest.mark.parametrize(
    ("columns", "listed"),
    [
        ({"bmi": None}, "bmi: absent"),
        ({"bmi": [""] * 6}, "bmi: empty in every row"),
        ({"bmi": [22.0, None, 23.0, 24.0, 25.0, 26.0]}, "bmi: empty in 1 row(s)"),
        (
            {"smoker": ["NEVER"] + LEVELS + LEVELS[:2]},
            "smoker: levels the model never saw: 'NEVER'",
        ),
    ],
)
def test_strict_refuses_whatever_is_routed_as_missing(model, tmp_path, capsys, columns, listed):
    path, _ = model
    out = tmp_path / "pred.csv"
    report = tmp_path / "r.json"
    code, _, err = run(
        tmp_path,
        capsys,
        path,
        rows(**columns).to_csv(index=False),
        "--strict",
        "--out",
        str(out),
        "--report-json",
        str(report),
    )
    assert code == 1
    assert "--strict: --data" in err and listed in err and "nothing was predicted" in err
    assert not out.exists()
    assert json.loads(report.read_text())["strict"] is True  # the reasons are kept


def test_strict_predicts_a_complete_file(model, tmp_path, capsys):
    path, _ = model
    code, out, _ = run(tmp_path, capsys, path, rows().to_csv(index=False), "--strict")
    assert code == 0 and len(pd.read_csv(pd.io.common.StringIO(out))) == 6


# ----------------------------------------------------------------------- lists in messages
def test_a_file_of_twenty_thousand_columns_gets_short_messages(model, tmp_path, capsys):
    path, _ = model
    wide = pd.DataFrame(np.zeros((2, 20_000)), columns=[f"col_{i:05d}" for i in range(20_000)])
    frame = pd.concat([rows(2), wide], axis=1)
    code, _, err = run(tmp_path, capsys, path, frame.to_csv(index=False))
    assert code == 0
    assert "ignoring columns the model does not use: col_00000" in err and "and 19980 more" in err
    assert len(err) < 2_000
    # and the refusals that list the file's columns
    for extra in (["--rename", "nosuch=bmi"], ["--id", "nosuch"]):
        code, _, err = run(tmp_path, capsys, path, frame.to_csv(index=False), *extra)
        assert code == 1 and "more" in err and len(err) < 2_000
    code, _, err = run(tmp_path, capsys, path, wide.to_csv(index=False))
    assert code == 1 and "has none of the model's features" in err and len(err) < 2_000


# ------------------------------------------------------------ names as a person reads them
@pytest.mark.parametrize(
    ("header", "how"),
    [
        ("bm\u200bi", "U+200B (ZERO WIDTH SPACE)"),
        ("\uff42\uff4d\uff49", "compatibility characters"),
        ("b\u00admi", "U+00AD (SOFT HYPHEN)"),
        ("bmi\u2060", "U+2060 (WORD JOINER)"),
        ("BMI", "differs in case"),
    ],
)
def test_a_header_that_reads_like_a_feature_is_refused_and_its_fix_works(
    model, tmp_path, capsys, header, how
):
    path, _ = model
    text = rows().rename(columns={"bmi": header}).to_csv(index=False)
    code, _, err = run(tmp_path, capsys, path, text)
    assert code == 1
    assert (
        f"--data {tmp_path / 'rows.csv'}: column {spelled(header)} reads like the model's " in err
    )
    assert "feature 'bmi' but is not it" in err and how in err
    assert "correct the header" in err and f"--rename {shell_word(header + '=bmi')}" in err
    code, _, err = run(tmp_path, capsys, path, text, "--rename", f"{header}=bmi", "--strict")
    assert code == 0 and "renames from --rename" in err


def test_nfd_and_nfc_spellings_of_a_feature_are_one_name_refused_as_look_alikes(tmp_path, capsys):
    import unicodedata

    nfc, nfd = (unicodedata.normalize(f, "glucosé") for f in ("NFC", "NFD"))
    rng = np.random.default_rng(1)
    X = pd.DataFrame({nfc: rng.normal(100, 10, 80), "age": rng.normal(50, 9, 80)})
    rf = RandomForestClassifier(n_estimators=4, random_state=0).fit(X, (X["age"] > 50).astype(int))
    forest = PooledForest.from_sklearn(rf, [nfc, "age"], "site-1")
    model_path = save_payload(tmp_path / "m.npz", PooledModel(forest).to_payload())
    text = X.rename(columns={nfc: nfd}).to_csv(index=False)
    code, _, err = run(tmp_path, capsys, model_path, text)
    assert code == 1 and '"glucose\\u0301" reads like the model\'s feature "glucos\\u00e9"' in err
    assert "another Unicode form" in err


def test_two_columns_that_read_alike_are_refused_when_the_model_reads_one(model, tmp_path, capsys):
    path, _ = model
    code, _, err = run(tmp_path, capsys, path, rows().assign(BMI=1.0).to_csv(index=False))
    assert code == 1 and "columns 'bmi' and 'BMI' read alike" in err
    assert "remove or rename 'BMI' in the file" in err


@pytest.mark.parametrize("level", ["never\u200b", "\uff4e\uff45\uff56\uff45\uff52", "Never"])
def test_a_level_that_reads_like_a_model_level_is_reported_and_refused_under_strict(
    model, tmp_path, capsys, level
):
    path, _ = model
    text = rows(smoker=[level, *LEVELS, "never", "former"]).to_csv(index=False)
    report = tmp_path / "r.json"
    code, _, err = run(tmp_path, capsys, path, text, "--report-json", str(report))
    assert code == 0
    assert f"{spelled(level)} for 'never'" in err and "levels must match exactly" in err
    smoker = next(f for f in json.loads(report.read_text())["features"] if f["feature"] == "smoker")
    assert smoker["unseen_levels"] == {level: 1}
    code, _, err = run(tmp_path, capsys, path, text, "--strict")
    assert code == 1 and "levels the model never saw" in err and "nothing was predicted" in err
