from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, matthews_corrcoef, roc_auc_score

from fedforest.metrics import (
    binary_auc,
    binary_average_precision,
    binary_mcc,
    score,
    score_all,
)


@pytest.mark.parametrize("seed", range(20))
def test_binary_metrics_equal_sklearn(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 300))
    y = rng.random(n) < rng.uniform(0.1, 0.9)
    if y.all() or not y.any():
        y[0] = not y[0]
    s = np.round(rng.random(n), int(rng.integers(1, 4)))  # ties on purpose
    assert binary_auc(y, s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert binary_average_precision(y, s) == pytest.approx(average_precision_score(y, s), abs=1e-12)
    p = rng.random(n) < 0.5
    assert binary_mcc(y, p) == pytest.approx(matthews_corrcoef(y, p), abs=1e-12)


def test_mcc_undefined_is_zero_like_sklearn():
    y = np.array([True, False, True])
    assert binary_mcc(y, np.ones(3, bool)) == 0.0 == matthews_corrcoef(y, np.ones(3, bool))


def test_score_multiclass_and_labels():
    y = np.array(["a", "b", "c", "a", "b", "c"])
    proba = np.eye(3)[[0, 1, 2, 0, 2, 1]] * 0.8 + 0.1 / 1
    got = score_all(y, proba, ["a", "b", "c"])
    assert got["accuracy"] == pytest.approx(4 / 6)
    assert 0 < got["auc"] < 1 and 0 < got["auprc"] <= 1
    assert np.isnan(score("auc", ["a", "a"], np.array([[0.6, 0.4], [0.3, 0.7]]), ["a", "b"]))
    with pytest.raises(ValueError, match="metric"):
        score("f1", y, proba, ["a", "b", "c"])
    with pytest.raises(ValueError, match="not in classes"):
        score("auc", ["z"], np.array([[1.0, 0.0]]), ["a", "b"])
    with pytest.raises(ValueError, match="shape"):
        score("auc", y, proba[:, :2], ["a", "b", "c"])
