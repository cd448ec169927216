"""The bundled scikit-learn datasets: numeric columns f0..f{n-1} and their labels."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest.experiments.bundled import BUNDLED, BUNDLED_TASKS, load_bundled


def test_every_bundled_dataset_has_a_task():
    assert set(BUNDLED) == set(BUNDLED_TASKS)
    assert set(BUNDLED_TASKS.values()) == {"classification", "regression"}


def test_a_classification_dataset_has_integer_labels():
    X, y = load_bundled("wine")
    assert X.shape == (178, 13) and list(X.columns) == [f"f{i}" for i in range(13)]
    assert y.dtype.kind == "i" and sorted(np.unique(y)) == [0, 1, 2]
    assert all(X[c].dtype == float for c in X.columns)


def test_the_regression_dataset_has_numbers():
    X, y = load_bundled("diabetes")
    assert X.shape == (442, 10) and y.dtype == float
    assert 25 <= y.min() and y.max() <= 346


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown bundled dataset 'iris'; known: breast_cancer"):
        load_bundled("iris")
