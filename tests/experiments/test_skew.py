"""Non-iid row partitions: Dirichlet label skew and Dirichlet quantity skew."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from fedforest.experiments.bundled import load_bundled
from fedforest.experiments.partition import split_table
from fedforest.experiments.skew import (
    MAX_ATTEMPTS,
    class_shares,
    dirichlet_rows,
    quantity_rows,
    scenario_name,
    skewed_table,
)


@pytest.fixture(scope="module")
def cancer_y():
    return load_bundled("breast_cancer")[1]


def is_partition(parts, n) -> bool:
    rows = np.concatenate(parts)
    return len(rows) == n and set(rows.tolist()) == set(range(n))


def label_distance(y, parts) -> float:
    """Mean total-variation distance of the sites' class mixes from the table's."""
    y = np.asarray(y)
    overall = np.array([np.mean(y == c) for c in np.unique(y)])
    return float(
        np.mean(
            [
                0.5 * np.abs(np.array([np.mean(y[p] == c) for c in np.unique(y)]) - overall).sum()
                for p in parts
                if len(p)
            ]
        )
    )


# ---------------------------------------------------------------- dirichlet_rows


def test_dirichlet_rows_partition_every_row_reproducibly(cancer_y):
    a = dirichlet_rows(cancer_y, 5, 0.5, random_state=3)
    b = dirichlet_rows(cancer_y, 5, 0.5, random_state=3)
    c = dirichlet_rows(cancer_y, 5, 0.5, random_state=4)
    assert is_partition(a, len(cancer_y))
    assert all(np.array_equal(p, q) for p, q in zip(a, b, strict=True))
    assert not all(np.array_equal(p, q) for p, q in zip(a, c, strict=True))
    rng = np.random.default_rng(3)
    d = dirichlet_rows(cancer_y, 5, 0.5, random_state=rng)  # a Generator works as well
    assert all(np.array_equal(p, q) for p, q in zip(a, d, strict=True))


def test_dirichlet_rows_cut_each_class_at_the_drawn_shares():
    """Without balancing and shuffling: each class, in order of first appearance, is cut in its
    original order at int(cumsum(p) * n_k), p ~ Dirichlet(alpha) drawn from the seeded generator."""
    y = np.array(["b", "a", "c"] * 20 + ["a"] * 15)  # first appearance: b, a, c
    alpha = [0.4, 1.0, 2.5, 0.7]
    parts = dirichlet_rows(
        y, 4, alpha, min_partition_size=0, self_balancing=False, shuffle=False, random_state=11
    )
    rng = np.random.default_rng(11)
    expected = [[] for _ in range(4)]
    for label in ["b", "a", "c"]:
        rows = np.flatnonzero(y == label)
        cuts = (np.cumsum(rng.dirichlet(alpha)) * len(rows)).astype(int)[:-1]
        for site, chunk in enumerate(np.split(rows, cuts)):
            expected[site].extend(chunk.tolist())
    assert [p.tolist() for p in parts] == expected


def test_dirichlet_rows_shuffle_only_reorders_each_site():
    y = np.repeat([0, 1, 2], [40, 30, 30])
    plain = dirichlet_rows(y, 3, 0.8, min_partition_size=0, shuffle=False, random_state=5)
    mixed = dirichlet_rows(y, 3, 0.8, min_partition_size=0, shuffle=True, random_state=5)
    assert [sorted(p.tolist()) for p in plain] == [sorted(p.tolist()) for p in mixed]
    assert any(p.tolist() != q.tolist() for p, q in zip(plain, mixed, strict=True))


@pytest.mark.parametrize("seed", range(8))
def test_self_balancing_gives_a_full_site_no_more_rows(seed):
    """A site holding more than len(y) / n_sites rows before a class gets none of it."""
    y = np.repeat([0, 1, 2, 3], [50, 40, 30, 30])
    n_sites = 4
    parts = dirichlet_rows(y, n_sites, 0.3, min_partition_size=0, shuffle=False, random_state=seed)
    average = len(y) / n_sites
    held = np.zeros(n_sites, dtype=int)
    for label in range(4):
        got = np.array([(y[p] == label).sum() for p in parts])
        # none, but the float rounding of cumsum(p) * n_k (as Flower's) may leave the last row
        # of a class to the last site even when it is full
        assert got[held > average].sum() <= 1
        assert (got[:-1][held[:-1] > average] == 0).all()
        held += got
    unbalanced = dirichlet_rows(
        y, n_sites, 0.3, min_partition_size=0, self_balancing=False, random_state=seed
    )
    assert is_partition(unbalanced, len(y))


def test_small_alpha_skews_the_labels_more_than_a_large_one(cancer_y):
    def mean_distance(alpha):
        return np.mean(
            [
                label_distance(cancer_y, dirichlet_rows(cancer_y, 4, alpha, 0, random_state=s))
                for s in range(20)
            ]
        )

    assert mean_distance(0.1) > 1.5 * mean_distance(1.0) > 6 * mean_distance(100.0)


def test_min_class_rows_gives_every_site_every_class_however_small_alpha(cancer_y):
    for seed in range(10):
        parts = dirichlet_rows(cancer_y, 10, 0.05, min_class_rows=5, random_state=seed)
        assert is_partition(parts, len(cancer_y))
        assert class_shares(cancer_y, parts).to_numpy().min() >= 5


def test_too_few_rows_for_min_class_rows_are_refused():
    y = np.repeat([0, 1], [30, 11])
    with pytest.raises(
        ValueError, match=r"need 12 rows of every class; class counts \{0: 30, 1: 11"
    ):
        dirichlet_rows(y, 3, 1.0, min_class_rows=4)
    with pytest.raises(ValueError, match="too few of class 1"):
        quantity_rows(y, 3, 1.0, min_class_rows=4)


def test_min_partition_size_is_retried_a_bounded_number_of_times(caplog):
    y = np.repeat([0, 1], 10)  # 4 sites of at least 6 rows: impossible with 20 rows
    with caplog.at_level(logging.DEBUG, logger="fedforest.experiments.skew"):
        with pytest.raises(ValueError, match=rf"not met after {MAX_ATTEMPTS + 1} samplings"):
            dirichlet_rows(y, 4, 1.0, min_partition_size=6, random_state=0)
    assert sum("below min_partition_size=6" in r.message for r in caplog.records) == 11
    with pytest.raises(ValueError, match="after 3 samplings"):
        dirichlet_rows(y, 4, 1.0, min_partition_size=6, max_attempts=2, random_state=0)
    # reachable sizes: resampled until met
    parts = dirichlet_rows(np.repeat([0, 1], 50), 3, 1.0, min_partition_size=20, random_state=0)
    assert min(len(p) for p in parts) >= 20


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"alpha": 0}, "alpha must be finite and > 0"),
        ({"alpha": -1.0}, "alpha must be finite and > 0"),
        ({"alpha": float("nan")}, "alpha must be finite and > 0"),
        ({"alpha": [1.0, 2.0]}, "one number or 3"),
        ({"alpha": "much"}, "alpha must be a positive number"),
        ({"alpha": True}, "alpha must be a positive number"),
        ({"alpha": 1.0, "n_sites": 1}, "n_sites must be an integer >= 2"),
        ({"alpha": 1.0, "min_class_rows": -1}, "min_class_rows must be an integer >= 0"),
        ({"alpha": 1.0, "min_partition_size": 1.5}, "min_partition_size must be an integer"),
    ],
)
def test_bad_dirichlet_arguments_are_refused(kwargs, message):
    args = {"n_sites": 3, **kwargs}
    with pytest.raises(ValueError, match=message):
        dirichlet_rows(np.repeat([0, 1], 20), **args)


def test_one_alpha_per_site_is_accepted():
    parts = dirichlet_rows(np.repeat([0, 1], 30), 3, [0.5, 1.0, 5.0], random_state=0)
    assert is_partition(parts, 60)


# ---------------------------------------------------------------- quantity_rows


def test_quantity_rows_sizes_follow_the_drawn_proportions():
    y = np.repeat([0, 1, 2], [90, 60, 50])
    parts = quantity_rows(y, 4, 0.7, min_rows=0, random_state=2)
    shares = np.random.default_rng(2).dirichlet(np.full(4, 0.7))
    sizes = np.array([len(p) for p in parts])
    assert is_partition(parts, len(y))
    assert np.abs(sizes - len(y) * shares).max() < 1
    # with a minimum: every site has it, plus its share of the other rows
    parts = quantity_rows(y, 4, 0.7, min_rows=30, random_state=2)
    sizes = np.array([len(p) for p in parts])
    assert sizes.min() >= 30
    assert np.abs(sizes - (30 + (len(y) - 120) * shares)).max() < 1


@pytest.mark.parametrize("seed", range(6))
def test_quantity_rows_give_every_site_the_class_mix_of_the_table(seed):
    rng = np.random.default_rng(seed)
    y = rng.choice(["x", "y", "z"], size=300, p=[0.6, 0.3, 0.1])
    parts = quantity_rows(y, 5, 0.4, min_rows=5, random_state=seed)
    assert is_partition(parts, len(y))
    for p in parts:
        for label in ("x", "y", "z"):
            expected = len(p) * np.mean(y == label)
            assert abs((y[p] == label).sum() - expected) < 2


def test_quantity_rows_floor_of_every_class_and_size():
    y = np.repeat([0, 1], [150, 20])
    parts = quantity_rows(y, 4, 0.1, min_rows=12, min_class_rows=4, random_state=1)
    assert class_shares(y, parts).to_numpy().min() >= 4
    assert min(len(p) for p in parts) >= 12
    with pytest.raises(ValueError, match="4 sites of at least 50 rows need 200 rows, got 170"):
        quantity_rows(y, 4, 1.0, min_rows=50)


def test_small_beta_makes_sites_more_unequal_than_a_large_one(cancer_y):
    def spread(beta):
        return np.mean(
            [
                np.std([len(p) for p in quantity_rows(cancer_y, 5, beta, random_state=s)])
                for s in range(20)
            ]
        )

    assert spread(0.2) > 3 * spread(10.0)
    assert label_distance(cancer_y, quantity_rows(cancer_y, 5, 0.2, random_state=0)) < 0.02


# ---------------------------------------------------------------- skewed_table


@pytest.mark.parametrize("partition", ["dirichlet", "quantity"])
def test_skewed_tables_keep_the_jaccard_columns_and_skew_the_rows(partition):
    X, y = load_bundled("breast_cancer")
    frame = X.assign(y=y)
    even = split_table(frame, "y", 4, 0.4, random_state=7)
    skewed = skewed_table(frame, "y", 4, 0.4, partition, 0.3, min_class_rows=4, random_state=7)
    assert list(skewed) == list(even) == ["site-1", "site-2", "site-3", "site-4"]
    for site in even:  # the same columns as the paper's split with the same seed
        assert list(skewed[site].columns) == list(even[site].columns)
    rows = np.concatenate([t.index.to_numpy() for t in skewed.values()])
    assert sorted(rows.tolist()) == list(range(len(frame)))
    counts = pd.DataFrame({s: t["y"].value_counts() for s, t in skewed.items()}).T
    assert counts.to_numpy().min() >= 4
    if partition == "dirichlet":
        assert label_distance(y, [t.index.to_numpy() for t in skewed.values()]) > 0.1
    else:
        assert np.std([len(t) for t in skewed.values()]) > 20


def test_skewed_table_refuses_the_even_partition():
    frame = pd.DataFrame({"a": range(20), "y": [0, 1] * 10})
    with pytest.raises(ValueError, match="partition='jaccard' must be one of dirichlet, quantity"):
        skewed_table(frame, "y", 2, 0.5, "jaccard", 1.0)


def test_scenario_names():
    assert scenario_name("S-500-Mix", "jaccard", None) == "S-500-Mix"
    assert scenario_name("S-500-Mix", "dirichlet", 0.3) == "S-500-Mix@dirichlet-0.3"
    assert scenario_name("breast_cancer", "quantity", 1.0) == "breast_cancer@quantity-1"


def test_quantity_skew_of_a_regression_target_deals_the_rows_as_one_class():
    X, y = load_bundled("diabetes")
    frame = X.assign(y=y)
    skewed = skewed_table(frame, "y", 4, 0.4, "quantity", 0.3, 6, random_state=7, stratify=False)
    even = split_table(frame, "y", 4, 0.4, random_state=7, stratify=False)
    for site in even:
        assert list(skewed[site].columns) == list(even[site].columns)
    sizes = [len(t) for t in skewed.values()]
    assert sum(sizes) == len(frame) and min(sizes) >= 6 and np.std(sizes) > 20
    # the target's values play no part: the same rows for another target
    again = skewed_table(
        frame.assign(y=-y), "y", 4, 0.4, "quantity", 0.3, 6, random_state=7, stratify=False
    )
    pairs = zip(skewed.values(), again.values(), strict=True)
    assert all(list(a.index) == list(b.index) for a, b in pairs)
    # a site's rows are a random draw, not a band of the target's values
    assert all(t["y"].std() > 0.5 * y.std() for t in skewed.values())
    with pytest.raises(ValueError, match="regression target .* has no classes: use partition"):
        skewed_table(frame, "y", 4, 0.4, "dirichlet", 0.3, 6, random_state=7, stratify=False)
