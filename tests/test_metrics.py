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
    proba = np.eye(3)[[0, 1, 2, 0, 2, 1]] * 0.7 + 0.1
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


@pytest.mark.parametrize("n_classes", [2, 3, 4])
@pytest.mark.parametrize("labels", ["ints", "strings"])
def test_the_log_loss_is_scikit_learns_to_the_last_bit(n_classes, labels):
    from sklearn.metrics import log_loss

    from fedforest.metrics import mean_log_loss

    rng = np.random.default_rng(n_classes)
    y = rng.integers(0, n_classes, 200)
    proba = rng.dirichlet(np.full(n_classes, 0.3), 200)
    proba[:5] = np.eye(n_classes)[(y[:5] + 1) % n_classes]  # certain and wrong: clipped
    proba[5:10] = np.eye(n_classes)[y[5:10]]  # certain and right
    classes = np.arange(n_classes) if labels == "ints" else np.array(list("abcd")[:n_classes])
    y = classes[y]
    assert score("log_loss", y, proba, classes) == log_loss(y, proba, labels=classes)
    assert score("log_loss", y[5:], proba[5:], classes) == log_loss(
        y[5:], proba[5:], labels=classes
    )
    with pytest.raises(ValueError, match="not in classes"):
        mean_log_loss(np.r_[y[:3], classes[:1]], proba[:4, 1:], classes[1:])


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("seed", range(5))
def test_probability_metrics_equal_scikit_learn(n_classes, seed):
    from sklearn.calibration import calibration_curve
    from sklearn.metrics import brier_score_loss, log_loss

    from fedforest.metrics import calibration_bins, row_losses

    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, 150)
    proba = rng.dirichlet(np.ones(n_classes), 150)
    classes = list(range(n_classes))
    assert score("log_loss", y, proba, classes) == log_loss(y, proba, labels=classes)
    if n_classes == 2:
        assert score("brier", y, proba, classes) == pytest.approx(brier_score_loss(y, proba[:, 1]))
        bins = calibration_bins(y, proba, classes)
        observed, predicted = calibration_curve(y, proba[:, 1], n_bins=10)
        assert np.allclose([v for v in bins["observed"] if v is not None], observed)
        assert np.allclose([v for v in bins["predicted"] if v is not None], predicted)
    else:
        onehot = np.eye(n_classes)[y]
        assert score("brier", y, proba, classes) == pytest.approx(
            np.mean(np.sum((proba - onehot) ** 2, axis=1))
        )
    for metric in ("brier", "log_loss"):
        assert row_losses(metric, y, proba, classes).mean() == pytest.approx(
            score(metric, y, proba, classes)
        )
    # ece: the count-weighted gap between predicted and observed over the bins
    bins = calibration_bins(y, proba, classes)
    gaps = [
        c * abs(p - o)
        for c, p, o in zip(bins["count"], bins["predicted"], bins["observed"], strict=True)
        if c
    ]
    assert score("ece", y, proba, classes) == pytest.approx(sum(gaps) / len(y))
    assert sum(bins["count"]) == len(y)


def test_a_perfect_prediction_has_zero_calibration_error_and_lower_is_better():
    from fedforest.metrics import best_first, is_better

    y = np.array([0, 1, 1, 0])
    proba = np.eye(2)[y]
    assert score("brier", y, proba, [0, 1]) == 0.0 and score("ece", y, proba, [0, 1]) == 0.0
    assert is_better("brier", 0.1, 0.2) and not is_better("auc", 0.1, 0.2)
    assert sorted([0.3, 0.1], key=lambda v: best_first("log_loss", v)) == [0.1, 0.3]
