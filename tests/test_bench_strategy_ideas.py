"""The strategy ideas' benchmark: its fitted site weights, and one block's rows."""

from __future__ import annotations

import numpy as np
from scipy.optimize import check_grad

from benchmarks.bench_strategy_ideas import (
    IDEAS,
    METRICS,
    criterion,
    mixture_loss,
    mixture_weights,
    run_one,
    weighted,
)


def test_the_mixture_losss_gradient_is_its_derivative():
    rng = np.random.default_rng(0)
    S, n = rng.uniform(0.1, 3, size=(4, 50)), np.array([3.0, 5.0, 2.0, 4.0])
    for z in rng.normal(size=(5, 4)):
        assert (
            check_grad(lambda z: mixture_loss(z, S, n)[0], lambda z: mixture_loss(z, S, n)[1], z)
            < 1e-5
        )


def test_the_site_whose_trees_know_the_rows_gets_the_weight():
    rng = np.random.default_rng(1)
    classes = np.array([0, 1])
    y = rng.integers(0, 2, 200)
    right = np.where(y[:, None] == classes, 0.9, 0.1)  # group 0's trees: right 90%
    noise = rng.dirichlet([1, 1], size=200)  # the others guess
    groups = np.repeat([0, 1, 2], 4)
    P = np.stack([right] * 4 + [noise] * 8)
    w = mixture_weights(P, groups, y, classes)
    assert w[0] == 1.0 and (w[1:] < 0.05).all()
    fitted = criterion("logloss", y, weighted(P, w[groups][:, None] * np.ones((12, 200))), classes)
    assert fitted < criterion("logloss", y, P.mean(axis=0), classes)


def test_one_block_scores_every_idea_by_every_metric():
    rows = run_one(("wine", 3, 0.5, 0, 4))
    sites = {r["site"] for r in rows}
    assert len(rows) == len(sites) * len(IDEAS) * len(METRICS) and len(sites) == 3
    assert {(r["method"], r["metric"]) for r in rows} == {(i, m) for i in IDEAS for m in METRICS}
    assert np.isfinite([r["value"] for r in rows]).all()
