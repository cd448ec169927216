"""benchmarks/bench_oob_calibration.py: its reliability metrics, and a real run on tiny settings
(few trees, 2 seeds) with its report."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import brier_score_loss, log_loss

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    return importlib.import_module("benchmarks.bench_oob_calibration")


def sample(n=20000, seed=0):
    """Risks and outcomes drawn from them: a perfectly calibrated sample."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.02, 0.98, n)
    return (rng.random(n) < p).astype(int), p


def expit(x):
    return 1 / (1 + np.exp(-x))


def test_the_slope_of_calibrated_risks_is_one(bench):
    y, p = sample()
    slope, intercept, se = bench.calibration_slope(y, p)
    assert slope == pytest.approx(1, abs=3 * se) and abs(intercept) < 0.1
    assert 0 < se < 0.05
    assert abs(bench.calibration_in_the_large(y, p)) < 0.01


def test_risks_pulled_toward_the_base_rate_have_a_slope_above_one(bench):
    y, p = sample()
    shrunk = expit(0.5 * bench.logit(p))  # half the log-odds: too modest
    assert bench.calibration_slope(y, shrunk)[0] == pytest.approx(2, abs=0.1)
    extreme = expit(2 * bench.logit(p))  # twice the log-odds: too sure
    assert bench.calibration_slope(y, extreme)[0] == pytest.approx(0.5, abs=0.03)
    # a uniform shift of the log-odds keeps the slope and moves calibration-in-the-large
    high = expit(bench.logit(p) + 1)
    assert bench.calibration_slope(y, high)[0] == pytest.approx(1, abs=0.05)
    assert bench.calibration_in_the_large(y, high) > 0.1
    assert bench.calibration_in_the_large(y, expit(bench.logit(p) - 1)) < -0.1


def test_the_slope_is_the_logistic_regressions(bench):
    from sklearn.linear_model import LogisticRegression

    y, p = sample(500, seed=3)
    p = expit(0.7 * bench.logit(p) - 0.2)
    fit = LogisticRegression(C=1e12, tol=1e-12, max_iter=10_000).fit(bench.logit(p)[:, None], y)
    slope, intercept, _ = bench.calibration_slope(y, p)
    assert slope == pytest.approx(fit.coef_[0, 0], rel=1e-5)
    assert intercept == pytest.approx(fit.intercept_[0], rel=1e-5)


def test_the_slope_is_undefined_where_no_regression_fits(bench):
    def undefined(y, p):
        return all(np.isnan(v) for v in bench.calibration_slope(y, p))

    assert undefined([1, 1, 1, 1], [0.2, 0.4, 0.6, 0.8])  # one class
    assert undefined([0, 1, 0, 1], [0.3, 0.3, 0.3, 0.3])  # risks that do not vary
    assert undefined([0, 0, 1, 1], [0.1, 0.2, 0.8, 0.9])  # separated: no finite slope
    assert undefined([0, 1], [0.2, 0.8])  # too few rows
    assert not undefined([0, 1, 0, 1, 1], [0.1, 0.2, 0.8, 0.9, 0.6])
    # a risk of 0 or 1 is kept off the logit's infinities
    assert np.isfinite(bench.logit([0.0, 1.0])).all()
    with pytest.raises(ValueError, match="two equal non-empty vectors"):
        bench.calibration_in_the_large([0, 1], [0.5])


def test_reliability_scores_the_positive_class_as_the_job_does(bench):
    y, p = sample(400, seed=5)
    labels = np.where(y == 1, "yes", "no")
    proba = np.column_stack([1 - p, p])
    scores = bench.reliability(labels, proba, ["no", "yes"])
    assert scores["brier"] == pytest.approx(brier_score_loss(y, p))
    assert scores["log_loss"] == pytest.approx(log_loss(y, p))
    assert scores["citl"] == pytest.approx(p.mean() - y.mean())
    assert scores["slope"] == bench.calibration_slope(y, p)[0]
    with pytest.raises(ValueError, match="a binary outcome is needed"):
        bench.reliability([0, 1, 2], np.full((3, 3), 1 / 3), [0, 1, 2])


def test_own_vote_shares_at_test_time_and_out_of_bag(bench):
    class Forest:  # 2 own trees of 4
        def owner_mask(self, site):
            return np.array([True, True, False, False])

    in_bag = np.array(
        [
            [True, False, True],  # own tree 1 trained on rows 0 and 2
            [False, False, True],  # own tree 2 on row 2
            [False, False, False],
            [False, False, False],
        ]
    )
    at_test, out_of_bag = bench.own_vote_shares(Forest(), "A", in_bag)
    assert at_test == 0.5
    # row 0: 1 own of 3 voters; row 1: 2 of 4; row 2: 0 of 2
    assert out_of_bag == pytest.approx((1 / 3 + 2 / 4 + 0) / 3)


def test_the_out_of_bag_mixture_borrows_training_rows_columns(bench):
    from fedforest.prediction.out_of_bag import InBag

    forest = np.array([[True, False, False], [False, True, False], [False, False, False]])
    bag = InBag(forest, intersection=np.array([[False, True, True]]))
    borrowed = bench.borrowed_in_bag(bag, 50, random_state=3)
    assert borrowed.forest.shape == (3, 50) and borrowed.intersection.shape == (1, 50)
    columns = {tuple(c) for c in forest.T}
    assert {tuple(c) for c in borrowed.forest.T} == columns  # every training row drawn
    for row in range(50):  # the forest's and the intersection's columns of one training row
        source = [tuple(c) for c in forest.T].index(tuple(borrowed.forest[:, row]))
        assert borrowed.intersection[0, row] == bag.intersection[0, source]
    again = bench.borrowed_in_bag(bag, 50, random_state=3)
    assert np.array_equal(again.forest, borrowed.forest)  # seeded
    assert bench.borrowed_in_bag(InBag(forest), 4, 0).intersection is None


@pytest.fixture(scope="module")
def measured(bench, tmp_path_factory):
    out = tmp_path_factory.mktemp("results")
    bench.main(["--reps", "2", "--trees", "4", "--out", str(out)])
    return out


def test_a_real_run_scores_every_variant_at_every_hospital(bench, measured):
    from benchmarks import harness

    saved = harness.read_results(measured / "oob_calibration.json")
    assert sorted(p.name for p in measured.iterdir()) == [
        "oob_calibration.json",
        "oob_calibration.md",
    ]
    assert saved["reps"] == 2 and saved["trees"] == 4 and "machine" in saved
    keys = [v[0] for v in bench.VARIANTS]
    rows = saved["rows"]
    assert len(rows) == 2 * 4 * len(keys)
    for site in "ABCD":
        for rep in (0, 1):
            mine = {r["variant"]: r for r in rows if (r["site"], r["rep"]) == (site, rep)}
            assert sorted(mine) == sorted(keys)
            for row in mine.values():
                assert 0 <= row["brier"] <= 1 and row["log_loss"] > 0
                assert -1 <= row["citl"] <= 1
                assert row["test_rows"] == {"A": 76, "B": 74, "C": 31, "D": 50}[site]
            # uncalibrated rows stay uncalibrated; mp rows are mp
            assert mine["oob/none/mp"]["calibration"] == "none"
            assert mine["holdout/oob/mp+sigmoid"]["strategy"] == "mp"
            assert mine["holdout/validation/mp+sigmoid"]["calibration"] in ("sigmoid", "none")
            assert mine["holdout/mixture/mp+sigmoid"]["strategy"] == "mp"
    # the mechanism: 4 hospitals with as many trees each, fewer own votes out of bag
    for share in saved["shares"]:
        assert share["trees"] == 16 and share["own_trees"] == 4
        assert share["own_share_test"] == 0.25
        assert 0 < share["own_share_oob"] < 0.25
        assert (share["validation_rows"] > 0) == (share["job"] == "holdout")
    pooled = {(p["site"], p["variant"]): p for p in saved["pooled"]}
    assert pooled[("A", "oob/none/mp")]["rows"] == 2 * 76
    assert pooled[("all", "oob/none/mp")]["rows"] == 2 * (76 + 74 + 31 + 50)


def test_the_paired_differences_are_seed_by_seed(bench, measured):
    from benchmarks import harness

    saved = harness.read_results(measured / "oob_calibration.json")
    rows = {(r["site"], r["variant"], r["rep"]): r for r in saved["rows"]}
    for title, first, second in bench.PAIRS:
        for site in "ABCD":
            gaps = [
                rows[(site, first, rep)]["brier"] - rows[(site, second, rep)]["brier"]
                for rep in (0, 1)
            ]
            mean, sd, n = saved["pairs"][title][site]["brier"]
            assert n == 2 and mean == pytest.approx(np.mean(gaps))
            assert sd == pytest.approx(np.std(gaps, ddof=1))
            larger, defined = saved["pairs"][title][site]["slope_larger"]
            assert 0 <= larger <= defined <= 2
    cell = saved["summary"]["A"]["oob/oob/auto"]["brier"]
    assert cell[0] == pytest.approx(
        np.mean([rows[("A", "oob/oob/auto", r)]["brier"] for r in (0, 1)])
    )


def test_the_report_renders_from_its_results_file(bench, measured):
    from benchmarks import harness

    saved = harness.read_results(measured / "oob_calibration.json")
    text = (measured / "oob_calibration.md").read_text()
    assert bench.markdown(saved, saved) == text
    assert text.startswith("# Calibration fitted out of bag against held-out rows")
    assert "`python benchmarks/bench_oob_calibration.py --reps 2 --trees 4`" in text
    for heading in (
        "## Own trees' share of the votes",
        "## Reliability on the test rows",
        "### A (303, 0.46, all columns)",
        "### All hospitals together",
        "## Paired differences",
        "## What `auto` chose (count over the seeds)",
    ):
        assert heading in text
    assert "| `holdout` | `mp` + sigmoid | training rows, out of bag |" in text
    assert "| `oob` | `auto` (deployed) | training rows, out of bag |" in text
    assert "**Deployed: the `oob` job − the `holdout` job**" in text
    assert json.loads((measured / "oob_calibration.json").read_text())["hospitals"]["C"] == {
        "rows": 123,
        "prevalence": 0.93,
        "lacks": ["glucose", "ldl", "cholesterol"],
    }


def test_the_committed_results_render_as_committed(bench):
    from benchmarks import harness

    path = ROOT / "benchmarks" / "results" / "oob_calibration.json"
    saved = harness.read_results(path)
    assert saved["reps"] == 10
    assert bench.markdown(saved, saved) == path.with_suffix(".md").read_text()
