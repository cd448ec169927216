"""``ipr``: right with the imputer's probability p_R = sigmoid((x^ - t) / sigma)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from fedforest import rules
from fedforest.rules import ipr
from fedforest.rules.routing import IMPUTED_DRAW, PR_RULE

from .hand_trees import b_imputer, forest, proba, rows


def test_ipr_is_registered_and_needs_the_pooled_std():
    assert rules.get("ipr") is ipr.RULE
    assert ipr.RULE.routing.steps == (IMPUTED_DRAW, PR_RULE)
    assert ipr.RULE.needs_std and ipr.RULE.draws and not ipr.RULE.static


def test_rows_go_right_with_the_sigmoid_probability():
    a = np.linspace(-1.01, -0.99, 4000)  # distinct rows, each its own draw
    p, _ = proba(
        forest(),
        rows(a),
        strategy="ipr",
        imputers=b_imputer(),
        feature_std={"b": 2.0},
        random_state=1,
    )
    expected = expit((a + 2.0 - 0.5) / 2.0).mean()  # b imputed as a + 2, threshold 0.5
    right = np.isclose(p[:, 1], 0.55)
    assert np.all(right | np.isclose(p[:, 1], 0.05))
    assert abs(right.mean() - expected) < 0.04


def test_without_the_std_of_an_imputed_feature_it_refuses():
    clf_rows = rows([0.0])
    with pytest.raises(ValueError, match=r"feature_std\['b'\]"):
        proba(forest(), clf_rows, strategy="ipr", imputers=b_imputer())
