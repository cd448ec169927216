import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import train_test_split

from fedforest.federation.splits import (
    describe_short_classes,
    fewest_class_rows,
    holdout_class_rows,
    part_class_rows,
    part_event_rows,
    split_site_rows,
    split_sizes,
)

CASES = [
    ({0: 297, 1: 3}, 0.2, 0.25),
    ({0: 99, 1: 1}, 0.2, 0.25),
    ({0: 94, 1: 6}, 0.2, 0.25),
    ({0: 50, 1: 2, 2: 30}, 0.3, 0.1),
    ({"a": 7, "b": 5}, 0.2, 0.25),
    ({0: 40, 1: 1, 2: 9}, 0.2, 0.25),
    ({0: 23, 1: 4}, 0.4, 0.4),
]


def target(counts: dict, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).permutation(
        np.concatenate([np.full(c, label) for label, c in counts.items()])
    )


@pytest.mark.parametrize(("counts", "val", "test"), CASES)
def test_no_seed_gives_a_class_fewer_rows_than_the_bound(counts, val, test):
    guaranteed = holdout_class_rows(counts, val, test)
    for seed in range(40):
        rows = part_class_rows(target(counts, seed), val, test, random_state=seed)
        for label, parts in rows.items():
            assert all(r >= g for r, g in zip(parts, guaranteed[label], strict=True))
        assert tuple(sum(r[i] for r in rows.values()) for i in range(3)) == split_sizes(
            sum(counts.values()), val, test
        )


def test_a_class_with_the_fewest_rows_keeps_one_in_every_part_whatever_the_seed():
    for n in (40, 100, 300, 5000):
        need = fewest_class_rows(n, 0.2, 0.25)
        assert min(holdout_class_rows({0: n - need, 1: need}, 0.2, 0.25)[1]) >= 1
        assert min(holdout_class_rows({0: n - need + 1, 1: need - 1}, 0.2, 0.25)[1]) == 0
        for seed in range(20):
            y = target({0: n - need, 1: need}, seed)
            assert min(part_class_rows(y, 0.2, 0.25, random_state=seed)[1]) >= 1


def test_a_site_with_one_positive_is_refused_with_the_class_and_what_it_needs():
    y = target({0: 99, 1: 1}, 0)
    text = describe_short_classes(y, 0.2, 0.25, random_state=0)
    assert text.startswith("class counts {0: 99, 1: 1}")
    assert "class 1 (1 row) gets" in text
    assert "with 100 rows a class needs at least 6 rows" in text


def test_a_site_whose_split_keeps_every_class_everywhere_passes():
    assert describe_short_classes(target({0: 90, 1: 10}, 0), 0.2, 0.25, random_state=0) is None
    assert describe_short_classes(target({"no": 60, "yes": 40}, 1), 0.2, 0.25, 1) is None


# ------------------------------------------------------------------ no validation rows (oob)
def test_the_holdout_split_is_two_plain_stratified_splits():
    rng = np.random.default_rng(3)
    X = pd.DataFrame({"a": rng.normal(size=200)})
    y = (rng.random(200) < 0.3).astype(int)
    parts = split_site_rows(X, y, 0.2, 0.25, random_state=7)
    rest_X, X_test, rest_y, y_test = train_test_split(
        X, y, test_size=0.25, stratify=y, random_state=7
    )
    X_train, X_val, y_train, y_val = train_test_split(
        rest_X, rest_y, test_size=0.2 / 0.75, stratify=rest_y, random_state=7
    )
    for got, want in zip(parts, (X_train, X_val, X_test, y_train, y_val, y_test), strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_without_validation_rows_every_row_but_the_test_rows_trains():
    rng = np.random.default_rng(4)
    X = pd.DataFrame({"a": rng.normal(size=200)})
    y = (rng.random(200) < 0.3).astype(int)
    X_train, X_val, X_test, y_train, y_val, y_test = split_site_rows(X, y, None, 0.25, 7)
    assert X_val is None and y_val is None
    holdout = split_site_rows(X, y, 0.2, 0.25, 7)
    assert X_test.index.equals(holdout[2].index)
    assert sorted(X_train.index) == sorted([*holdout[0].index, *holdout[1].index])
    np.testing.assert_array_equal(y_train, y[X_train.index])
    assert split_sizes(200, None, 0.25) == (150, 0, 50) == (len(X_train), 0, len(X_test))


def test_without_validation_rows_a_class_needs_training_and_test_rows_only():
    y = [0] * 98 + [1] * 2
    # seed 1: the holdout split leaves class 1 no training row; without validation rows
    # that row trains
    assert part_class_rows(y, 0.2, 0.25, random_state=1)[1] == (0, 1, 1)
    assert part_class_rows(y, None, 0.25, random_state=1)[1] == (1, 0, 1)
    assert describe_short_classes(y, None, 0.25, random_state=1) is None
    assert describe_short_classes(y, 0.2, 0.25, random_state=1) is not None
    assert holdout_class_rows({0: 96, 1: 4}, None, 0.25)[1][1] == 0
    assert fewest_class_rows(100, None, 0.25) < fewest_class_rows(100, 0.2, 0.25)
    text = describe_short_classes([0] * 99 + [1], None, 0.25, random_state=0)
    assert "test_fraction 0.25 (validation: oob, no validation rows)" in text
    assert "validation rows" not in text.split("gets")[1].split(",")[1]


def test_a_survival_target_is_split_by_event_as_the_event_column_alone_is():
    rng = np.random.default_rng(3)
    event = rng.random(80) < 0.3
    y = np.empty(80, dtype=[("event", bool), ("time", "f8")])
    y["event"], y["time"] = event, rng.exponential(100.0, 80)
    X = pd.DataFrame({"a": np.arange(80.0)})
    parts = split_site_rows(X, y, 0.2, 0.25, random_state=5)
    alone = split_site_rows(X, event.astype(int), 0.2, 0.25, random_state=5)
    for mine, reference in zip(parts[:3], alone[:3], strict=True):
        assert mine.index.tolist() == reference.index.tolist()
    # stratified: every part keeps the site's share of events (within one row)
    for X_part, y_part in zip(parts[:3], parts[3:], strict=True):
        assert abs(y_part["event"].sum() - event.mean() * len(X_part)) <= 1
    assert part_event_rows(event, 0.2, 0.25, 5) == tuple(int(p["event"].sum()) for p in parts[3:])
