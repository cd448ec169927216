"""``fedforest elect``: one table per site, and the job's rules on the tables."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from fedforest.cli import main


def write(path, n=80, seed=0, **changes):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "age": rng.integers(20, 90, n).astype(float),
            "bmi": rng.normal(27, 4, n).round(1),
            "y": np.arange(n) % 2,
        }
    )
    for old, new in changes.items():
        frame = frame.rename(columns={old: new})
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize("how", ["hard link", "symbolic link", "copy"])
def test_two_paths_to_one_table_are_refused_naming_both(tmp_path, capsys, how):
    first = write(tmp_path / "north.csv")
    write(tmp_path / "east.csv", seed=2)
    second = tmp_path / "south.csv"
    if how == "hard link":
        os.link(first, second)
    elif how == "symbolic link":
        second.symlink_to(first)
    else:
        second.write_bytes(first.read_bytes())
    code = main(["elect", str(first), str(tmp_path / "east.csv"), str(second), "--target", "y"])
    err = capsys.readouterr().err
    assert code == 1
    assert str(first) in err and str(second) in err and "one table per site" in err
    assert "Traceback" not in err


def test_columns_that_read_alike_in_one_table_or_across_tables_are_refused(tmp_path, capsys):
    one = write(tmp_path / "north.csv")
    other = write(tmp_path / "south.csv", seed=1, bmi="BMI")
    assert main(["elect", str(one), str(other), "--target", "y"]) == 1
    err = capsys.readouterr().err
    assert "column names differ only by case" in err and "'BMI' at 'south'" in err
    both = tmp_path / "west.csv"
    pd.read_csv(one).assign(BMI=1.0).to_csv(both, index=False)
    assert main(["elect", str(both), str(one), "--target", "y"]) == 1
    err = capsys.readouterr().err
    assert "column 'bmi' and column 'BMI' have names that read alike" in err
