"""What of the model's input a table lacks (federation/input_gaps.py), from real model inputs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from fedforest.federation.input_gaps import REPORT_FORMAT, REPORT_VERSION, input_gaps
from fedforest.federation.model_input import model_input

FEATURES = ["age", "bmi", "ward", "insulin", "smoker"]
CATEGORIES = {"ward": ["north", "south"], "smoker": ["never", "former", "current"]}
SHARES = {"age": 0.1, "bmi": 0.3, "ward": 0.2, "insulin": 0.4}


def gaps_of(frame: pd.DataFrame, local=str):
    done = model_input(frame, None, FEATURES, CATEGORIES, unseen_missing=True)
    return input_gaps("visits.csv", done.X, FEATURES, CATEGORIES, done, SHARES, local)


def table() -> pd.DataFrame:
    """Six rows; insulin absent; bmi empty twice; ward with levels the model never saw;
    smoker empty in every row."""
    return pd.DataFrame(
        {
            "age": [50, 61, 42, 38, 70, 55],
            "bmi": [22.5, None, 31.0, None, 27.1, 24.0],
            "ward": ["north", "North", "south", "east", "north", "south\u200b"],
            "smoker": [None] * 6,
        }
    )


def test_each_feature_is_counted_as_absent_empty_or_unseen():
    gaps = gaps_of(table())
    by = {f.feature: f for f in gaps.features}
    assert [f.feature for f in gaps.features] == FEATURES
    assert by["insulin"].absent and by["insulin"].missing(6) == 6
    assert (by["bmi"].empty, by["bmi"].unseen, by["bmi"].missing(6)) == (2, {}, 2)
    assert by["ward"].unseen == {"North": 1, "east": 1, "south\u200b": 1}
    assert by["ward"].kind == "categorical" and by["ward"].levels == ["north", "south"]
    assert by["smoker"].empty == 6 and by["smoker"].share == 0.0  # no split on it
    assert by["age"].missing(6) == 0
    # an absent feature leaves every row with a gap
    assert gaps.rows_with_gaps == 6 and gaps.n_rows == 6


def test_the_gaps_are_listed_most_used_first_and_as_problems():
    gaps = gaps_of(table())
    assert [f.feature for f in gaps.gaps] == ["insulin", "bmi", "ward", "smoker"]
    assert gaps.problems() == [
        "insulin: absent",
        "bmi: empty in 2 row(s)",
        "ward: levels the model never saw: 'North' (1 row), 'east' (1 row), 'south\\u200b' (1 row)",
        "smoker: empty in every row",
    ]


def test_rows_with_gaps_count_nan_rows_when_no_feature_is_absent():
    frame = table().assign(insulin=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], smoker="never")
    gaps = gaps_of(frame)
    # rows 1 and 3: bmi empty; rows 1, 3 and 5: an unseen ward level
    assert gaps.rows_with_gaps == 3


def test_the_lines_name_the_site_columns_and_the_near_misses():
    gaps = gaps_of(table(), local=lambda f: f"{f}_local")
    lines = gaps.lines(lambda share: f"{share:.0%}")
    assert lines[0] == "bmi_local: empty in 2 of 6 rows (30% of the forest's splits)"
    assert lines[1].startswith(
        "ward_local: 3 row(s) hold levels the model never saw, read as missing"
    )
    assert "these read like the model's levels but differ in case" in lines[1]
    # each spelled so that the two look different
    assert "'North' for 'north', \"south\\u200b\" for 'south'" in lines[1]
    assert "'east' for" not in lines[1]
    assert lines[1].endswith("the model's levels: 'north', 'south'")
    assert lines[2] == (
        "smoker_local: empty in every row (0% of the forest's splits): missing on every row, "
        "as if absent"
    )
    assert lines[-1] == (
        "6 of 6 rows have a feature of the model routed as missing (absent, empty or an unseen "
        "level)"
    )
    assert not any(line.startswith("insulin") for line in lines)  # the caller says absent ones


def test_the_json_report_is_versioned_and_plain():
    report = gaps_of(table()).to_dict()
    assert json.loads(json.dumps(report)) == report
    assert (report["format"], report["version"]) == (REPORT_FORMAT, REPORT_VERSION)
    assert (report["data"], report["rows"], report["rows_with_missing"]) == ("visits.csv", 6, 6)
    insulin = report["features"][3]
    assert insulin == {
        "feature": "insulin",
        "column": "insulin",
        "kind": "numeric",
        "share_of_splits": 0.4,
        "absent": True,
        "empty_rows": 6,
        "empty_in_every_row": True,
        "unseen_levels": {},
        "unseen_rows": 0,
        "missing_rows": 6,
    }
    assert report["features"][4]["empty_in_every_row"] is True


def test_a_table_of_no_rows_has_no_gap_row():
    gaps = gaps_of(table().iloc[:0])
    assert gaps.rows_with_gaps == 0 and gaps.n_rows == 0
    assert np.all([f.missing(0) == 0 for f in gaps.features])
