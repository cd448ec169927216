"""The class floor of skewed and natural sites, and the checks that use it."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest.experiments.datasets import (
    class_floor,
    rows_per_class,
    validation_split_problem,
)


def test_the_class_floor_is_the_fewest_rows_that_split_with_every_class():
    assert class_floor(2) == rows_per_class(1) == 4
    assert class_floor(3, test_fraction=0.2) == 5
    for classes in (2, 3, 5, 10):
        for fraction in (0.1, 0.2, 0.4, 0.65):
            floor = class_floor(classes, validation_fraction=fraction)
            assert floor >= 4
            assert validation_split_problem(np.full(classes, floor), 0.25, fraction) is None
            if floor > 4:
                assert validation_split_problem(np.full(classes, floor - 1), 0.25, fraction)
            # a site with more rows of any class splits as well
            for extra in range(0, 40, 3):
                per_class = np.full(classes, floor)
                per_class[0] += extra
                assert validation_split_problem(per_class, 0.25, fraction) is None


def test_a_validation_share_that_leaves_no_training_rows_is_refused():
    with pytest.raises(ValueError, match="leaves no training rows"):
        class_floor(2, test_fraction=0.5, validation_fraction=0.5)
