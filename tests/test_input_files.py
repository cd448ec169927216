"""One table, one site: two paths to one file, or two files with the same bytes."""

from __future__ import annotations

import os

import pytest

from fedforest.errors import ConfigError
from fedforest.input_files import refuse_same_tables, same_tables

CSV = "age,bmi,outcome\n" + "".join(f"{30 + i},{20 + i % 7},{i % 2}\n" for i in range(20))


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "north.csv"
    path.write_text(CSV)
    return path


def _refused(entries) -> str:
    with pytest.raises(ConfigError) as err:
        refuse_same_tables(entries, "give each site its own file")
    return str(err.value)


def test_distinct_tables_pass(tmp_path, table):
    other = tmp_path / "south.csv"
    other.write_text(CSV.replace("outcome", "y"))
    refuse_same_tables([("a", table), ("b", other)], "fix")
    assert same_tables([("a", table), ("b", other), ("c", tmp_path / "missing.csv")]) == []


def test_a_hard_link_is_one_file(tmp_path, table):
    link = tmp_path / "south.csv"
    os.link(table, link)
    text = _refused([("site table", table), ("site table", link)])
    assert str(table) in text and str(link) in text and "hard link" in text
    assert "one table per site: give each site its own file" in text


def test_a_symbolic_link_and_the_same_path_twice(tmp_path, table):
    link = tmp_path / "south.csv"
    link.symlink_to(table)
    assert "symbolic link" in _refused([("a", table), ("b", link)])
    assert "the same path" in _refused([("a", table), ("b", tmp_path / "." / "north.csv")])


def test_a_copy_holds_the_same_bytes(tmp_path, table):
    copy = tmp_path / "sub" / "south.csv"
    copy.parent.mkdir()
    copy.write_bytes(table.read_bytes())
    text = _refused([("a", table), ("b", tmp_path / "other.csv"), ("c", copy)])
    assert "same bytes" in text and str(copy) in text


def test_more_pairs_are_counted(tmp_path, table):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    os.link(table, a)
    os.link(table, b)
    assert "2 more such pair(s)" in _refused([("x", table), ("y", a), ("z", b)])
