"""The bundled datasets: scikit-learn's numeric columns f0..f{n-1} and their labels;
scikit-survival's tables with coded categorical columns and survival targets."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest.experiments.bundled import (
    BUNDLED,
    BUNDLED_TASKS,
    SURVIVAL_LOADERS,
    SURVIVAL_SOURCES,
    load_bundled,
    load_bundled_table,
)


def test_every_bundled_dataset_has_a_task():
    assert set(BUNDLED) == set(BUNDLED_TASKS)
    assert set(BUNDLED_TASKS.values()) == {"classification", "regression", "survival"}
    survival = {n for n, t in BUNDLED_TASKS.items() if t == "survival"}
    assert survival == set(SURVIVAL_LOADERS) == set(SURVIVAL_SOURCES)


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


@pytest.mark.parametrize(
    ("name", "shape", "events", "categorical"),
    [
        ("gbsg2", (686, 8), 299, ["horTh", "menostat", "tgrade"]),
        (
            "whas500",
            (500, 14),
            215,
            ["afb", "av3", "chf", "cvd", "gender", "miord", "mitype", "sho"],
        ),
        ("veterans", (137, 6), 128, ["Celltype", "Prior_therapy", "Treatment"]),
    ],
)
def test_a_survival_dataset_has_coded_columns_and_a_survival_target(
    name, shape, events, categorical
):
    from sksurv import datasets

    X, y, cats = load_bundled_table(name)
    assert X.shape == shape and cats == categorical
    assert all(X[c].dtype == float for c in X.columns)
    assert y.dtype.names == ("event", "time") and y["event"].dtype == bool
    assert int(y["event"].sum()) == events and (y["time"] >= 0).all()
    frame, target = getattr(datasets, SURVIVAL_LOADERS[name])()
    event, time = target.dtype.names
    assert np.array_equal(y["event"], target[event]) and np.array_equal(y["time"], target[time])
    for column in cats:  # codes 0..K-1 in the data's own order of levels
        levels = list(frame[column].cat.categories)
        assert np.array_equal(X[column], [levels.index(v) for v in frame[column]])
    numeric = [c for c in X.columns if c not in cats]
    assert np.array_equal(X[numeric].to_numpy(), frame[numeric].to_numpy(dtype=float))
    assert load_bundled(name)[0].equals(X)
