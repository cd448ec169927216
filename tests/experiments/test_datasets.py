"""The class floor of skewed and natural sites, and the checks that use it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedforest.experiments.datasets import (
    Dataset,
    check_dataset,
    class_floor,
    rows_per_class,
    validation_split_problem,
)


def test_the_class_floor_is_the_fewest_rows_that_split_with_every_class():
    assert class_floor(2) == rows_per_class(1) == 4
    assert class_floor(3, test_fraction=0.2) == 5
    for classes in (2, 3, 5, 10):
        for fraction in (0.1, 0.2, 0.4, 0.65):
            floor = class_floor(classes, validation_fraction=fraction)
            assert floor >= 4
            assert validation_split_problem(np.full(classes, floor), 0.25, fraction) is None
            if floor > 4:
                assert validation_split_problem(np.full(classes, floor - 1), 0.25, fraction)
            # a site with more rows of any class splits as well
            for extra in range(0, 40, 3):
                per_class = np.full(classes, floor)
                per_class[0] += extra
                assert validation_split_problem(per_class, 0.25, fraction) is None


def test_a_validation_share_that_leaves_no_training_rows_is_refused():
    with pytest.raises(ValueError, match="leaves no training rows"):
        class_floor(2, test_fraction=0.5, validation_fraction=0.5)


def test_a_continuous_target_is_refused_as_a_measurement():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(300, 3)), columns=["a", "b", "c"])
    data = Dataset("cont", X, rng.normal(size=300), [])
    with pytest.raises(ValueError) as info:
        check_dataset(data, [3])
    text = str(info.value)
    assert text.startswith("dataset cont: the target holds non-integer numbers such as")
    assert "a measurement, not a class label" in text and "--target" in text
    assert "For a measurement use --task regression (metrics rmse, mae, r2)" in text
    assert "fewer sites" not in text
    check_dataset(Dataset("cont", X, data.y, [], task="regression"), [3])  # accepted so


def test_a_target_with_many_classes_is_named_briefly():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(300, 3)), columns=["a", "b", "c"])
    data = Dataset("many", X, rng.integers(0, 80, size=300), [])
    with pytest.raises(ValueError) as info:
        check_dataset(data, [3])
    text = str(info.value)
    assert len(text) < 700
    assert "more classes (the rarest are shown;" in text and "is the target a class label?" in text
    assert "For a number use --task regression" in text
    assert "too few rows of class" in text and " more. Use fewer sites" in text


@pytest.mark.parametrize("value", [1e39, -np.inf])
def test_a_value_the_trees_cannot_split_on_is_refused_before_anything_runs(value):
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(300, 3)), columns=["a", "b", "c"])
    X.loc[6, "b"] = value
    data = Dataset("big", X, (X["a"] > 0).astype(int).to_numpy(), [])
    with pytest.raises(
        ValueError, match=r"dataset big: column 'b' holds .* \(row 7 of the table\)"
    ):
        check_dataset(data, [3])


def test_every_named_dataset_declares_its_task():
    from fedforest.experiments.bundled import BUNDLED, BUNDLED_TASKS
    from fedforest.experiments.datasets import dataset_task, load_table, task_datasets
    from fedforest.experiments.synthetic import DATASET_TASKS
    from fedforest.vocabulary import TASKS

    assert set(BUNDLED_TASKS) == set(BUNDLED)
    assert set(BUNDLED_TASKS.values()) | set(DATASET_TASKS.values()) == set(TASKS)
    assert task_datasets("regression") == ["F-500-Num", "F-500-Mix", "diabetes"]
    assert task_datasets("survival") == ["gbsg2", "whas500", "veterans"]
    for name in ("S-500-Num", "F-500-Mix", "wine", "diabetes"):
        data = load_table(name)
        assert data.task == dataset_task(name), name
        kind = np.asarray(data.y).dtype.kind
        assert kind == ("f" if data.task == "regression" else "i"), name
    data = load_table("gbsg2")
    assert data.task == dataset_task("gbsg2") == "survival"
    assert data.y.dtype.names == ("event", "time")
    assert data.categorical == ["horTh", "menostat", "tgrade"]
    assert data.categories["tgrade"] == ["0", "1", "2"]
    assert dataset_task("cohort.csv") is None
    with pytest.raises(ValueError, match="task='ranking' must be one of classification"):
        load_table("wine", task="ranking")


def test_survival_sites_need_events_in_every_part():
    from fedforest.experiments.datasets import check_dataset, load_table, survival_floor

    assert survival_floor() == 8 and survival_floor(0.25, 0.2) == 10
    data = load_table("veterans")
    check_dataset(data, [6], validation_fraction=0.2)  # 128 events: 21 a site
    with pytest.raises(
        ValueError,
        match=r"the even deal over 13 sites gives the smallest 9 "
        r"events, but a site needs at least 10 \(so that its training, test and "
        r"validation rows hold 2 events each\)",
    ):
        check_dataset(data, [13], validation_fraction=0.2)
    with pytest.raises(
        ValueError,
        match=r"--partition quantity under --task survival; "
        "allowed: --partition jaccard",
    ):
        check_dataset(data, [3], partition="quantity", alphas=[1.0])
    broken = load_table("veterans")
    broken.y = broken.y.copy()
    broken.y["time"][4] = -1.0
    with pytest.raises(
        ValueError,
        match=r"dataset veterans: the target \(event field .event., time field .time.\): "
        r"times must be finite and at least 0; found \[-1.0\]",
    ):
        check_dataset(broken, [2])


def test_a_csv_dataset_is_read_by_the_one_reader(tmp_path):
    from fedforest.experiments.datasets import load_table

    good = tmp_path / "table.csv"
    good.write_text(
        "f0,flag,y\n"
        + "".join(f"{i}.5,{'True' if i % 2 else 'False'},{i % 2}\n" for i in range(20))
    )
    data = load_table(str(good), "y")
    assert "flag" in data.categorical  # booleans are a category, never 1 and 0
    bad = tmp_path / "semi.csv"
    bad.write_text("f0;y\n1,5;0\n2,5;1\n")
    with pytest.raises(ValueError, match=rf"dataset {bad}: the header is a single column"):
        load_table(str(bad), "y")
    with pytest.raises(ValueError, match="the column 'y' reads like it"):
        load_table(str(good), "Y")
