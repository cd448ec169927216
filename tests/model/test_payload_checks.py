"""Payload size limits, and class labels as payload values."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest.model import payload_checks


def test_labels_travel_as_plain_strings_and_integers():
    out = payload_checks.plain_labels(np.array([0, 1, 2]))
    assert out == [0, 1, 2] and all(type(v) is int for v in out)
    assert payload_checks.plain_labels(np.array(["no", "yes"])) == ["no", "yes"]
    assert payload_checks.plain_labels(["a"]) == ["a"]


@pytest.mark.parametrize("labels", [[0.5, 1.5], [True, False], np.array([1.0])])
def test_other_labels_are_refused_by_type(labels):
    with pytest.raises(TypeError, match="cannot travel in a payload"):
        payload_checks.plain_labels(labels)


def test_the_limits():
    assert payload_checks.MAX_SEED == 2**32 - 1  # what numpy and scikit-learn take
    assert payload_checks.MAX_NODE_SAMPLES == np.iinfo(np.int32).max
    assert payload_checks.MAX_TREES < payload_checks.MAX_NODES
