"""The command's option types and input and output files (cli/options.py)."""

from __future__ import annotations

import argparse
import os
import socket

import pytest

from fedforest.cli import options
from fedforest.outputs import OutputError


def refuses(parse, text, match):
    with pytest.raises(argparse.ArgumentTypeError, match=match):
        parse(text)


# ------------------------------------------------------------------ option types
def test_integers_are_checked_against_their_range():
    parse = options.integer(1, 10)
    assert parse("7") == 7
    refuses(parse, "7.5", r"'7.5' is not an integer; allowed: an integer in \[1, 10\]")
    refuses(parse, "11", r"11 is out of range; allowed: an integer in \[1, 10\]")
    refuses(options.integer(0), "-1", "allowed: an integer >= 0")


def test_numbers_are_finite_and_within_open_or_closed_bounds():
    parse = options.number(0, 1)
    assert parse("0") == 0.0 and parse("1e-3") == 0.001
    refuses(parse, "nan", r"'nan' is not a finite number; allowed: a number in \[0, 1\]")
    refuses(parse, "1.5", r"'1.5' is out of range")
    refuses(parse, "x", "'x' is not a number")
    positive = options.number(0, low_open=True)
    assert positive("900") == 900.0
    refuses(positive, "0", "allowed: a number > 0")
    refuses(options.number(0, 1, low_open=True), "0", r"allowed: a number in \(0, 1\]")


def test_lists_are_distinct_items_each_of_its_type():
    parse = options.listed(options.integer(2), "site counts")
    assert parse(" 2, 3 ,,4") == [2, 3, 4]
    refuses(parse, " , ", "holds no site counts; give at least one")
    refuses(parse, "2,1", r"in '2,1': 1 is out of range")
    refuses(parse, "2,3,2", "'2,3,2' repeats 2")
    assert options.csv_list(None) == [] and options.csv_list(" a ,b,, ") == ["a", "b"]


def test_choices_and_selectors_name_what_is_allowed():
    parse = options.choice(("soft", "hard"))
    assert parse("hard") == "hard"
    refuses(parse, "Soft", "'Soft' is not allowed; allowed: soft, hard")
    assert options.selector_list("lasso, chi2,lasso") == ["lasso", "chi2", "lasso"]
    refuses(options.selector_list, "lasso,ridge", "'ridge' is not allowed; allowed: lasso")
    refuses(options.selector_list, ",", "holds no selector")
    assert options.name(" bmi ") == " bmi "  # a column name as given


def test_rename_pairs_map_local_names_to_global_ones():
    parse = options.rename_pairs
    assert parse("bmi_kg = bmi, glu=glucose") == {"bmi_kg": "bmi", "glu": "glucose"}
    assert parse("bmi\u00a0=bmi") == {"bmi\u00a0": "bmi"}  # a no-break space is part of the name
    refuses(parse, "bmi", "'bmi' is not local=global")
    refuses(parse, "=bmi", "'=bmi' is not local=global")
    refuses(parse, "a=x,a=y", "column 'a' is renamed twice")
    refuses(parse, "a=x,b=x", "several columns are renamed to 'x'")
    refuses(parse, ", ,", "holds no local=global pair")


# ------------------------------------------------------------------ input files
def test_a_csv_is_read_and_a_missing_or_empty_one_refused_by_its_option(tmp_path):
    good = tmp_path / "rows.csv"
    good.write_text("a,b\n1,2\n3,4\n")
    assert options.read_csv(good, "--data")["b"].tolist() == [2, 4]
    with pytest.raises(FileNotFoundError, match="--data: no such CSV file: "):
        options.read_csv(tmp_path / "none.csv", "--data")
    with pytest.raises(FileNotFoundError, match="is a folder, not a file; give a CSV file"):
        options.read_csv(tmp_path, "--data")
    header = tmp_path / "header.csv"
    header.write_text("a,b\n")
    with pytest.raises(ValueError, match="--data: .*header.csv has no data rows"):
        options.read_csv(header, "--data")
    semi = tmp_path / "semi.csv"
    semi.write_text("a;b\n1;2\n")
    with pytest.raises(ValueError, match=r"--data .*semi.csv: .*allowed: "):
        options.read_csv(semi, "--data")


def test_a_table_read_as_a_site_follows_the_data_files_rules(tmp_path):
    unnamed = tmp_path / "unnamed.csv"
    unnamed.write_text("a,,y\n1,2,0\n3,4,1\n")
    assert list(options.read_csv(unnamed, "--data").columns)[0] == "a"
    with pytest.raises(ValueError, match="--data .*unnamed.csv"):
        options.read_csv(unnamed, "--data", exempt=["y"])


def test_what_a_path_is_instead_of_a_file(tmp_path):
    assert options.not_a_file(tmp_path) == "is a folder, not a file"
    assert options.not_a_file(tmp_path / "none") == "does not exist"
    link = tmp_path / "link.csv"
    link.symlink_to(tmp_path / "gone.csv")
    assert options.not_a_file(link) == f"is a link to {tmp_path / 'gone.csv'}, which does not exist"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert options.not_a_file(fifo) == "is a named pipe (FIFO), not a file"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock"))
        assert options.not_a_file(tmp_path / "sock") == "is a socket, not a file"


# ------------------------------------------------------------------ output files
def test_an_output_is_refused_unless_it_is_safe_to_write(tmp_path):
    data = tmp_path / "data.csv"
    data.write_text("a\n1\n")
    out = tmp_path / "out.csv"
    options.check_output(out, "--out", overwrite=False, inputs=[data])  # a new file: fine
    with pytest.raises(OutputError):
        options.check_output(data, "--out", overwrite=True, inputs=[data])  # never an input
    dangling = tmp_path / "dangling.csv"
    dangling.symlink_to(tmp_path / "nowhere.csv")
    with pytest.raises(OutputError, match="is a link to .*nowhere.csv, which does not exist"):
        options.check_output(dangling, "--out", overwrite=True, inputs=[])
    out.write_text("old")
    out.chmod(0o444)
    with pytest.raises(OutputError, match=r"is read-only; refusing to replace it.*chmod u\+w"):
        options.check_output(out, "--out", overwrite=True, inputs=[])
    assert out.read_text() == "old"


def test_writing_an_output_names_the_file_and_changes_nothing_on_failure(tmp_path):
    out = tmp_path / "out.csv"
    options.write_output(out, "--out", lambda handle: handle.write("a\n1\n"))
    assert out.read_text() == "a\n1\n"
    missing = tmp_path / "no folder" / "out.csv"
    with pytest.raises(
        OutputError, match=r"--out .*out.csv: cannot write it .*nothing was changed"
    ):
        options.write_output(missing, "--out", lambda handle: handle.write("x"))
    assert not missing.parent.exists()

    def fails(handle):
        handle.write("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OutputError, match="No space left on device"):
        options.write_output(out, "--out", fails)
    assert out.read_text() == "a\n1\n" and sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


# ------------------------------------------------------------------ help
def test_every_help_shows_the_options_default():
    parser = options.Parser(prog="fedforest")
    parser.add_argument("--rows", type=int, default=100, help="rows to read")
    parser.add_argument("--rate", default="5%", help="a share")
    parser.add_argument("--sites", default=["a", "b"])
    parser.add_argument("--quiet", action="store_true", help="say less")
    parser.add_argument("--seed", default=0, help="the seed (default: none drawn)")
    parser.add_argument("--need", required=True, help="required")
    sub = parser.add_subparsers().add_parser("run")
    sub.add_argument("--n", type=int, default=3, help="how many")
    text = " ".join(parser.format_help().split())
    assert "rows to read (default: 100)" in text
    assert "a share (default: 5%)" in text
    assert "--sites SITES default: a,b" in text
    assert "say less (default" not in text and "required (default" not in text
    assert "the seed (default: none drawn)" in text  # the help says it already
    assert isinstance(sub, options.Parser)
    assert "how many (default: 3)" in " ".join(sub.format_help().split())


def test_columns_of_a_frame_are_listed_for_a_message(tmp_path):
    import pandas as pd

    frame = pd.DataFrame(columns=[f"c{i}" for i in range(25)])
    text = options.columns_text(frame)
    assert text.startswith("c0, c1, c2") and text.endswith("and 5 more")
