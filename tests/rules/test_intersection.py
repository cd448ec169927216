"""``intersection``: the intersection forest alone, predicted with ``fpv``."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest import rules
from fedforest.rules import intersection

from .hand_trees import T1, T2, forest, proba, rows


def test_intersection_predicts_with_another_forest_through_fpv():
    assert rules.get("intersection") is intersection.RULE
    assert intersection.RULE.kept_trees == rules.INTERSECTION_FOREST
    assert intersection.RULE.through == "fpv"
    assert intersection.RULE.needs_intersection and not intersection.RULE.needs_site


def test_only_the_intersection_forests_trees_predict():
    X = rows([-1.0, 0.5])
    p, _ = proba(forest([T1]), X, strategy="intersection", intersection=forest([T2]))
    assert np.allclose(p, [[0.9, 0.1], [0.3, 0.7]])


def test_it_needs_the_intersection_forest():
    with pytest.raises(ValueError, match="intersection"):
        proba(forest(), rows([0.0]), strategy="intersection")
