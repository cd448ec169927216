"""``mp``: both children of an unresolvable node, weighted by p_R, the leaves summed."""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from fedforest import rules
from fedforest.rules import mp

from .hand_trees import b_imputer, forest, proba, rows


def test_mp_is_the_marginal_rule():
    assert rules.get("mp") is mp.RULE
    assert mp.RULE.family == rules.MARGINAL and mp.RULE.routing is None
    assert mp.RULE.needs_std and not mp.RULE.draws


def test_without_an_imputer_the_children_weigh_by_training_fractions():
    p, clf = proba(forest(), rows([-1.0]), strategy="mp")
    # T1: 0.3 * [1, 0] + 0.7 * [0, 1]; T2: [0.9, 0.1]
    assert np.allclose(p, [[(0.3 + 0.9) / 2, (0.7 + 0.1) / 2]])
    assert clf.diagnostics_.trees_kept.tolist() == [2]


def test_with_an_imputer_the_children_weigh_by_p_right():
    p, _ = proba(
        forest(), rows([-1.0]), strategy="mp", imputers=b_imputer(), feature_std={"b": 2.0}
    )
    right = expit((1.0 - 0.5) / 2.0)  # b imputed as 1
    assert np.allclose(p, [[((1 - right) + 0.9) / 2, (right + 0.1) / 2]])
