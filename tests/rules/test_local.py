"""``local``: the site's own trees only."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest import rules
from fedforest.rules import local

from .hand_trees import T1, T2, forest, proba, rows


def test_local_is_the_own_trees_selection():
    assert rules.get("local") is local.RULE
    assert local.RULE.kept_trees == rules.OWN_TREES
    assert local.RULE.needs_site and not local.RULE.needs_intersection


def test_only_the_sites_own_trees_predict():
    pooled = forest([T1, T2], owners=["s1", "s2"], tree_owner=np.array([1, 0]))
    p, clf = proba(pooled, rows([-1.0, 0.5]), strategy="local", site="s1")
    assert np.allclose(p, [[0.9, 0.1], [0.3, 0.7]]) and clf.diagnostics_.trees_available == 1
    # s2's only tree reads b, absent: routed the learned way (left, the hand-built default)
    p, clf = proba(pooled, rows([-1.0]), strategy="local", site="s2")
    assert clf.diagnostics_.trees_available == 1
    assert np.allclose(p, [[1.0, 0.0]])


def test_local_needs_a_site_of_the_forest():
    with pytest.raises(ValueError):
        proba(forest(), rows([0.0]), strategy="local", site="nowhere")
