"""``ss``: the node's surrogate split decides; without one, the ``pr`` rule."""

from __future__ import annotations

import numpy as np

from fedforest import rules
from fedforest.rules import ss
from fedforest.rules.routing import PR_RULE, SURROGATE

from .hand_trees import forest, proba, rows


def test_ss_is_registered_with_the_surrogate_first():
    assert rules.get("ss") is ss.RULE
    assert ss.RULE.routing.steps == (SURROGATE, PR_RULE)
    assert ss.RULE.static


def test_the_surrogate_routes_the_row_in_either_orientation():
    with_surrogate = forest(surrogates={0: ("a", -0.5, True)})
    p, _ = proba(with_surrogate, rows([-1.0, 0.2]), strategy="ss")
    # a=-1 <= -0.5: T1's left leaf; a=0.2: right, then a > 0: [0.2, 0.8]
    assert np.allclose(p, [[0.95, 0.05], [0.25, 0.75]])
    reversed_ = forest(surrogates={0: ("a", -0.5, False)})
    p, _ = proba(reversed_, rows([-1.0]), strategy="ss")
    assert np.allclose(p, [[0.45, 0.55]])


def test_without_a_surrogate_it_falls_back_to_pr():
    p, clf = proba(forest(), rows([-1.0]), strategy="ss", depth_threshold=1)
    assert np.allclose(p, [[0.9, 0.1]]) and clf.diagnostics_.trees_kept.tolist() == [1]
