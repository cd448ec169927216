"""``wmp``: ``mp`` with the guessing trees weighted ``guess_weight`` against ``fpv``'s."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest import rules
from fedforest.rules import wmp

from .hand_trees import forest, proba, rows


def test_wmp_combines_fpv_and_mp_with_a_fitted_weight():
    assert rules.get("wmp") is wmp.RULE
    assert wmp.RULE.family == rules.WEIGHTED
    assert (wmp.RULE.certain, wmp.RULE.marginal) == ("fpv", "mp")
    assert wmp.RULE.fitted and wmp.RULE.needs_validation and not wmp.RULE.candidate


def test_the_weight_moves_the_prediction_from_fpv_to_mp():
    X = rows([-1.0, 0.5])
    fpv, _ = proba(forest(), X, strategy="fpv")
    mp, _ = proba(forest(), X, strategy="mp")
    one, _ = proba(forest(), X, strategy="wmp", guess_weight=1.0)
    zero, _ = proba(forest(), X, strategy="wmp", guess_weight=0.0)
    half, _ = proba(forest(), X, strategy="wmp", guess_weight=0.5)
    assert np.allclose(one, mp) and np.allclose(zero, fpv)
    # T1 guesses (its marginal prediction), weighted 0.5; T2 is certain, weighted 1
    t1 = np.array([[0.3, 0.7], [0.3 + 0.7 * 0.2, 0.7 * 0.8]])
    t2 = np.array([[0.9, 0.1], [0.3, 0.7]])
    assert np.allclose(half, (0.5 * t1 + t2) / 1.5)


def test_the_weight_is_fitted_first_by_default():
    with pytest.raises(ValueError, match="call fit first"):
        proba(forest(), rows([0.0]), strategy="wmp")
