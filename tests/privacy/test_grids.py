"""Public grids (privacy/grids.py): threshold grids' rules and time resolutions."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest.errors import ConfigError
from fedforest.privacy.grids import ThresholdGrid, coarser_resolution, merge_grids


def test_a_grid_snaps_to_its_rule_and_says_which_values_lie_on_it():
    grid = ThresholdGrid.from_dict(
        {"step": 0.5, "steps": {"age": 5}, "edges": {"hba1c": [5.7, 6.5, 8.0]}}
    )
    assert grid.snap("bmi", [27.3, 27.2]).tolist() == [27.5, 27.0]
    assert grid.snap("age", [42.0, 43.0]).tolist() == [40.0, 45.0]
    assert grid.snap("hba1c", [6.0, 6.2, 9.0]).tolist() == [5.7, 6.5, 8.0]
    assert grid.on_grid("bmi", [27.5, 27.3]).tolist() == [True, False]
    digits = ThresholdGrid.from_dict({"significant_digits": 2})
    assert digits.snap("x", [1234.0, 0.01234]).tolist() == [1200.0, 0.012]
    assert ThresholdGrid.from_dict({"steps": {"age": 1}}).uncovered(["age", "bmi"]) == ["bmi"]
    assert ThresholdGrid.from_dict(grid.to_dict()) == grid


def test_two_grids_merge_to_the_one_whose_points_are_all_points_of_the_other():
    fine, coarse = ThresholdGrid(("step", 0.5)), ThresholdGrid(("step", 1.5))
    assert merge_grids(fine, coarse, "a.yaml", "b.yaml") == coarse
    assert merge_grids(coarse, fine, "a.yaml", "b.yaml") == coarse
    assert merge_grids(None, fine, "a.yaml", "b.yaml") is fine
    with pytest.raises(ConfigError, match=r"step 0.5 \(a.yaml\) against step 0.3 \(b.yaml\)"):
        merge_grids(fine, ThresholdGrid(("step", 0.3)), "a.yaml", "b.yaml")


@pytest.mark.parametrize(
    ("a", "b", "coarser"),
    [(None, None, None), (30, None, 30), (None, 7, 7), (30, 90, 90), (0.5, 1.5, 1.5), (7, 7, 7)],
)
def test_of_two_time_resolutions_the_coarser_one_applies(a, b, coarser):
    where = (("s.yaml", "time_resolution"), ("local/fedforest.yaml", "privacy.time_resolution"))
    assert coarser_resolution(a, b, *where) == coarser
    assert coarser_resolution(b, a, *reversed(where)) == coarser
    if coarser is not None:  # every multiple of the coarser one is a multiple of both
        multiples = np.arange(1, 5) * coarser
        for given in (a, b):
            if given is not None:
                assert np.allclose(np.round(multiples / given) * given, multiples)


@pytest.mark.parametrize(("a", "b"), [(30, 45), (0.3, 0.5), (6, 4)])
def test_time_resolutions_that_do_not_nest_are_refused_naming_both_files(a, b):
    with pytest.raises(ConfigError) as err:
        coarser_resolution(
            a, b, ("s.yaml", "time_resolution"), ("job.yaml", "privacy.time_resolution")
        )
    message = str(err.value)
    assert message.startswith(
        f"s.yaml and job.yaml: key 'time_resolution' is {a:g} (s.yaml) and key "
        f"'privacy.time_resolution' is {b:g} (job.yaml); allowed: equal resolutions"
    )
