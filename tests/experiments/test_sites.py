"""Natural sites: one CSV file per site, each with its own columns."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedforest.experiments.bundled import load_bundled
from fedforest.experiments.partition import pairwise_jaccard
from fedforest.experiments.sites import load_site_files


@pytest.fixture
def hospitals(tmp_path):
    """Three sites cut from breast_cancer, overlapping columns, a categorical 'ward' at two."""
    X, y = load_bundled("breast_cancer")
    frame = X.assign(y=y)
    rng = np.random.default_rng(0)
    parts = np.array_split(rng.permutation(len(frame)), 3)
    columns = [list(X.columns[:12]), list(X.columns[6:18]), list(X.columns[12:24])]
    paths = []
    for k, (rows, cols) in enumerate(zip(parts, columns, strict=True)):
        table = frame.iloc[rows][cols + ["y"]].copy()
        if k:
            table.insert(0, "ward", rng.choice(["b", "c"] if k == 1 else ["a", "c"], len(table)))
        path = tmp_path / f"hosp{k}.csv"
        table.to_csv(path, index=False)
        paths.append(path)
    return paths


def test_the_feature_space_is_the_union_of_the_files_columns(hospitals):
    data = load_site_files(hospitals, "y")
    files = [pd.read_csv(p) for p in hospitals]
    assert data.name == "hosp0+hosp1+hosp2"
    assert data.sites.names == ["hosp0", "hosp1", "hosp2"]
    assert len(data.X) == sum(len(f) for f in files)
    union = list(dict.fromkeys(c for f in files for c in f.columns if c != "y"))
    assert list(data.X.columns) == union
    for k, (site, rows) in enumerate(data.sites.rows.items()):
        own = [c for c in files[k].columns if c != "y"]
        assert sorted(data.sites.columns[site]) == sorted(own)
        assert data.sites.files[site] == str(hospitals[k])
        np.testing.assert_array_equal(data.y[rows], files[k]["y"].to_numpy())
        absent = [c for c in union if c not in own]
        assert data.X.iloc[rows][absent].isna().all().all()  # a column the file lacks
        for col in (c for c in own if c != "ward"):  # ward: coded, as the next test shows
            np.testing.assert_array_equal(data.X.iloc[rows][col], files[k][col].to_numpy(float))
    sets = [[c for c in f.columns if c != "y"] for f in files]
    assert data.sites.jaccard == round(pairwise_jaccard(sets), 3)
    assert load_site_files(hospitals, "y", name="cohort").name == "cohort"


def test_categorical_levels_have_one_code_at_every_site(hospitals):
    data = load_site_files(hospitals, "y")
    assert data.categorical == ["ward"]
    assert data.categories == {"ward": ["0", "1", "2"]}  # a, b, c over all files
    files = [pd.read_csv(p) for p in hospitals]
    for k in (1, 2):
        rows = data.sites.rows[f"hosp{k}"]
        codes = data.X.iloc[rows]["ward"].to_numpy()
        expected = files[k]["ward"].map({"a": 0, "b": 1, "c": 2}).to_numpy()
        np.testing.assert_array_equal(codes, expected)
    # a numeric column named categorical is coded too
    named = load_site_files(hospitals, "y", categorical=["f0"])
    assert named.categorical == ["f0", "ward"]


def write(path, frame):
    frame.to_csv(path, index=False)
    return path


def test_bad_site_files_are_refused_naming_the_file(tmp_path, hospitals):
    good = hospitals[0]
    with pytest.raises(ValueError, match="give at least two, one per site; got 1"):
        load_site_files([good], "y")
    with pytest.raises(ValueError, match=rf"site file {tmp_path / 'nope.csv'}: no such file"):
        load_site_files([good, tmp_path / "nope.csv"], "y")
    (tmp_path / "other").mkdir()
    twin = write(tmp_path / "other" / "hosp0.csv", pd.read_csv(good))
    with pytest.raises(ValueError, match="site names are the file stems and must be distinct"):
        load_site_files([good, twin], "y")
    dup = tmp_path / "dup.csv"
    dup.write_text("a,b,a,y\n1,2,3,0\n4,5,6,1\n")
    with pytest.raises(ValueError, match=rf"site file {dup}: column 'a' appears 2 times"):
        load_site_files([good, dup], "y")
    nolabel = write(tmp_path / "nolabel.csv", pd.DataFrame({"f0": [1, 2], "outcome": [0, 1]}))
    with pytest.raises(
        ValueError, match=rf"site file {nolabel}: the target \(--target\) 'y' is not a column"
    ):
        load_site_files([good, nolabel], "y")
    one = write(tmp_path / "one.csv", pd.DataFrame({"f0": range(20), "y": [1] * 20}))
    with pytest.raises(ValueError, match=rf"site file {one}: the target 'y' has a single class"):
        load_site_files([good, one], "y")
    gaps = write(tmp_path / "gaps.csv", pd.DataFrame({"f0": range(4), "y": [0, 1, None, 1]}))
    with pytest.raises(ValueError, match=rf"site file {gaps}: the target 'y' is missing in 1 rows"):
        load_site_files([good, gaps], "y")
    only = write(tmp_path / "only.csv", pd.DataFrame({"y": [0, 1] * 5}))
    with pytest.raises(ValueError, match=rf"site file {only}: no feature column"):
        load_site_files([good, only], "y")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ValueError, match=rf"site file {empty}: cannot be read as CSV"):
        load_site_files([good, empty], "y")
    header = tmp_path / "header.csv"
    header.write_text("f0,y\n")
    with pytest.raises(ValueError, match=rf"site file {header}: no rows below the header"):
        load_site_files([good, header], "y")
    with pytest.raises(ValueError, match=r"\(--categorical\) 'nope' are columns of no file"):
        load_site_files(hospitals, "y", categorical=["nope"])
    with pytest.raises(ValueError, match="--categorical names the target 'y'"):
        load_site_files(hospitals, "y", categorical=["y"])


def test_regression_site_files_may_hold_one_value_at_a_site(tmp_path):
    from fedforest.experiments.datasets import check_dataset

    a = write(tmp_path / "a.csv", pd.DataFrame({"f0": range(20), "los": np.linspace(1, 9, 20)}))
    one = write(tmp_path / "one.csv", pd.DataFrame({"f0": range(20), "los": [2.5] * 20}))
    with pytest.raises(ValueError, match="has a single class"):
        load_site_files([a, one], "los")
    data = load_site_files([a, one], "los", task="regression")
    assert data.task == "regression" and data.y.dtype.kind == "f"
    check_dataset(data, [2])  # the dataset's task: accepted
    with pytest.raises(ValueError, match="a regression dataset .* run it with --task regression"):
        check_dataset(data, [2], task="classification")
    b = write(tmp_path / "b.csv", pd.read_csv(a).iloc[::-1])  # its rows in another order
    data = load_site_files([a, b], "los")  # classification: two "classes" at least
    with pytest.raises(ValueError, match="non-integer numbers .* For a measurement use --task"):
        check_dataset(data, [2])


# ------------------------------------------------------------------ the one CSV reader
def test_a_column_of_booleans_is_a_category_never_ones_and_zeros(tmp_path):
    rng = np.random.default_rng(0)
    base = pd.DataFrame({"f0": rng.normal(size=40), "y": [0, 1] * 20})
    a = write(tmp_path / "a.csv", base.assign(flag=["True", "False"] * 20))
    b = write(tmp_path / "b.csv", base.assign(flag=["False", "True"] * 20))
    data = load_site_files([a, b], "y")
    assert "flag" in data.categorical  # levels False, True: codes of a category
    labels = write(tmp_path / "c.csv", base.assign(y=["True", "False"] * 20))
    labels2 = write(tmp_path / "d.csv", base.assign(y=["False", "True"] * 20))
    assert sorted(set(load_site_files([labels, labels2], "y").y)) == ["False", "True"]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("f0;y\n1,5;0\n2,5;1\n", "separated by ';'"),
        ("f0\ty\n1.5\t0\n2.5\t1\n", "separated by '\\t'"),
        ('f0,y\n"1,5",0\n"2,5",1\n"3,5",0\n', "decimal commas"),
        ("f0,y\n1.5,0\nTrue,1\n2.5,0\n3.5,1\n", "'True' is a boolean, not a number"),
        ("f0,y\n1.5,0\n?,1\n2.5,0\n3.5,1\n", "a mark for a missing value"),
    ],
)
def test_a_site_file_is_read_as_a_data_file_is(tmp_path, hospitals, text, words):
    bad = tmp_path / "bad.csv"
    bad.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError) as info:
        load_site_files([hospitals[0], bad], "y")
    assert str(info.value).startswith(f"site file {bad}: ") and words in str(info.value)
