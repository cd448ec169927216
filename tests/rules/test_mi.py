"""``mi``: the imputed value decides the split; without an imputer, the ``pr`` rule."""

from __future__ import annotations

import numpy as np

from fedforest import rules
from fedforest.rules import mi
from fedforest.rules.routing import IMPUTED_VALUE, PR_RULE

from .hand_trees import b_imputer, forest, proba, rows


def test_mi_is_registered_with_the_imputed_value_first():
    assert rules.get("mi") is mi.RULE
    assert mi.RULE.routing.steps == (IMPUTED_VALUE, PR_RULE)
    assert mi.RULE.imputers and mi.RULE.routing.reads_imputed


def test_the_imputed_value_routes_the_row():
    p, clf = proba(forest(), rows([-1.0, -3.0]), strategy="mi", imputers=b_imputer())
    # b = a + 2: a=-1 gives b=1 > 0.5 (right, then a <= 0: [0, 1]); a=-3 gives b=-1 (left)
    assert np.allclose(p, [[0.45, 0.55], [0.95, 0.05]])
    assert clf.diagnostics_.trees_kept.tolist() == [2, 2]


def test_without_an_imputer_it_is_the_pr_rule():
    X = rows([-1.0, 0.5])
    p, _ = proba(forest(), X, strategy="mi", depth_threshold=1, random_state=0)
    same, _ = proba(forest(), X, strategy="pr", depth_threshold=1, random_state=0)
    assert np.array_equal(p, same)
