"""``fpv``: a tree whose path meets an unavailable feature is discarded for the row."""

from __future__ import annotations

import numpy as np

from fedforest import rules
from fedforest.rules import fpv
from fedforest.rules.routing import DISCARD

from .hand_trees import T2, forest, proba, rows


def test_fpv_is_registered_and_routes_by_discarding():
    assert rules.get("fpv") is fpv.RULE
    assert fpv.RULE.family == rules.ROUTING
    assert fpv.RULE.routing.steps == (DISCARD,)
    assert not fpv.RULE.draws and fpv.RULE.static and fpv.RULE.candidate


def test_a_tree_that_meets_the_absent_feature_is_discarded():
    p, clf = proba(forest(), rows([-1.0, 0.5]), strategy="fpv")
    # T1 reads b at its root and is dropped; T2 alone: a <= 0 left, else right
    assert np.allclose(p, [[0.9, 0.1], [0.3, 0.7]])
    assert clf.diagnostics_.trees_kept.tolist() == [1, 1]
    alone, _ = proba(forest([T2]), rows([-1.0, 0.5]), strategy="fpv")
    assert np.array_equal(p, alone)
