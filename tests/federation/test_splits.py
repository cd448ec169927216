import numpy as np
import pytest

from fedforest.federation.splits import (
    describe_short_classes,
    fewest_class_rows,
    holdout_class_rows,
    part_class_rows,
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
