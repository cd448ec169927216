"""``node``: the walk stops at the unresolvable node, whose own value is the prediction."""

from __future__ import annotations

import numpy as np

from fedforest import rules
from fedforest.rules import node
from fedforest.rules.routing import STOP

from .hand_trees import forest, proba, rows


def test_node_is_registered_and_never_draws():
    assert rules.get("node") is node.RULE
    assert node.RULE.routing.steps == (STOP,)
    assert not node.RULE.draws and node.RULE.paper is None


def test_the_walk_stops_at_the_node_and_never_discards():
    # hand-built internal nodes hold a uniform distribution: T1 stops at its root
    for X in (rows([-1.0]), rows([-1.0], b=[np.nan])):
        p, clf = proba(forest(), X, strategy="node", depth_threshold=0)
        assert np.allclose(p, [[(0.5 + 0.9) / 2, (0.5 + 0.1) / 2]])
        assert clf.diagnostics_.trees_kept.tolist() == [2]
        assert clf.diagnostics_.n_fallback == 0
    p, _ = proba(forest(), rows([-1.0], b=[1.0]), strategy="node")  # b present: no stop
    assert np.allclose(p, [[0.45, 0.55]])
