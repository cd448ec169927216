"""``pr``: discard above the depth threshold, else right with probability N_right / N_node."""

from __future__ import annotations

import numpy as np

from fedforest import rules
from fedforest.rules import pr
from fedforest.rules.routing import PR_RULE

from .hand_trees import forest, proba, rows


def test_pr_is_registered_and_draws():
    assert rules.get("pr") is pr.RULE
    assert pr.RULE.routing.steps == (PR_RULE,)
    assert pr.RULE.draws and pr.RULE.family == rules.ROUTING


def test_shallow_nodes_discard_and_deeper_ones_draw_by_training_fractions():
    p, clf = proba(forest(), rows([-1.0]), strategy="pr", depth_threshold=1)
    assert np.allclose(p, [[0.9, 0.1]]) and clf.diagnostics_.trees_kept.tolist() == [1]
    a = np.linspace(-2.0, -1.0, 4000)  # distinct rows, one draw each; T1's right goes to [0, 1]
    p, clf = proba(forest(), rows(a), strategy="pr", depth_threshold=0, random_state=0)
    right = np.isclose(p[:, 1], (1.0 + 0.1) / 2)
    assert np.all(right | np.isclose(p[:, 1], 0.1 / 2))
    assert abs(right.mean() - 0.7) < 0.04  # 70 of T1's 100 training rows went right
    assert clf.diagnostics_.trees_kept.min() == 2
