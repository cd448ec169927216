"""``park``: the site's own trees and every tree whose split features the site has."""

from __future__ import annotations

import numpy as np

from fedforest import rules
from fedforest.rules import park

from .hand_trees import T1, T2, forest, proba, rows


def test_park_is_a_tree_selection_routed_as_scikit_learn_does():
    assert rules.get("park") is park.RULE
    assert park.RULE.family == rules.SELECTION
    assert park.RULE.kept_trees == rules.OWN_OR_ROUTABLE
    assert park.RULE.needs_site and park.RULE.learned and park.RULE.static


def test_it_keeps_own_trees_and_the_others_the_site_can_route():
    # T1 (on b) belongs to s2, T2 (on a only) to s1; the rows have a only
    pooled = forest([T1, T2], owners=["s1", "s2"], tree_owner=np.array([1, 0]))
    _, clf = proba(pooled, rows([-1.0]), strategy="park", site="s2")
    assert clf.diagnostics_.trees_available == 2  # its own T1, and T2
    p, clf = proba(pooled, rows([-1.0]), strategy="park", site="s1")
    assert clf.diagnostics_.trees_available == 1  # its own T2; T1 needs b
    assert np.allclose(p, [[0.9, 0.1]])
