"""One prediction call as a pipeline of stages (prediction/pipeline.py), on real forests."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest import rules
from fedforest.prediction import fastpath, pipeline
from fedforest.prediction.pipeline import Settings, predict_rule, prepare

from .conftest import NAMES, settings


def test_complete_rows_take_scikit_learns_engine_and_its_probabilities(pooled_site):
    proba, diagnostics = predict_rule(settings(pooled_site), pooled_site.test, rules.get("fpv"))
    assert proba.tobytes() == pooled_site.rf.predict_proba(pooled_site.test).tobytes()
    assert diagnostics.engine == "compiled" and diagnostics.dynamic_engine is None
    assert diagnostics.n_fallback == 0 and np.all(diagnostics.trees_kept == 6)
    assert diagnostics.strategy == "fpv" and diagnostics.trees_available == 6


def test_the_stages_extend_one_call(pooled_site):
    call = prepare(settings(pooled_site), pooled_site.lacking, rules.get("mi"))
    assert call.n_rows == len(pooled_site.lacking) and call.X.dtype == np.float32
    assert call.present.tolist() == [True, True, False, False]
    assert np.array_equal(call.absent, ~call.present)
    assert call.trees.tolist() == list(range(6))
    assert call.strategy.routing is rules.get("mi").routing
    assert np.isfinite(call.strategy.imputed[:, NAMES.index("c")]).all()


def test_tree_selection_keeps_the_sites_trees_or_those_it_can_route(two_site_forest):
    forest, _, _ = two_site_forest
    present = np.array([n in ("x0", "x1", "x2", "x3") for n in forest.feature_names])
    own = np.flatnonzero(forest.owner_mask("b"))
    assert np.array_equal(pipeline.select_trees(rules.get("local"), forest, "b", present), own)
    park = pipeline.select_trees(rules.get("park"), forest, "b", present)
    # site a's trees split on x0..x3 only: routable with these columns, kept with b's own
    assert park.tolist() == list(range(forest.n_trees))
    none_of_a = present & np.array([n != "x2" for n in forest.feature_names])
    park = pipeline.select_trees(rules.get("park"), forest, "b", none_of_a)
    assert set(own) <= set(park) and len(park) < forest.n_trees
    every = pipeline.select_trees(rules.get("mp"), forest, None, present)
    assert every.tolist() == list(range(forest.n_trees))


def test_rows_with_nan_in_present_columns_take_the_dynamic_engine(pooled_site):
    call = prepare(settings(pooled_site), pooled_site.lacking, rules.get("fpv"))
    fast = pipeline.fast_rows(call)
    dirty = np.isnan(pooled_site.lacking["a"]).to_numpy()
    assert np.array_equal(fast, ~dirty)
    proba, diagnostics = predict_rule(settings(pooled_site), pooled_site.lacking, rules.get("fpv"))
    assert diagnostics.engine == "mixed" and diagnostics.dynamic_engine == "numpy"


@pytest.mark.parametrize("name", ["fpv", "pr", "mi", "ss", "node"])
def test_the_compiled_path_and_the_dynamic_path_give_the_same_predictions(
    pooled_site, name, monkeypatch
):
    complete = pooled_site.test[["a", "b"]]
    rule = rules.get(name)
    got, diagnostics = predict_rule(settings(pooled_site), complete, rule)
    assert diagnostics.engine == "compiled"
    monkeypatch.setattr(fastpath, "available", lambda: False)
    slow, slow_diagnostics = predict_rule(settings(pooled_site), complete, rule)
    assert slow_diagnostics.engine == "numpy"
    assert np.array_equal(got, slow)
    assert np.array_equal(diagnostics.trees_kept, slow_diagnostics.trees_kept)


def test_rows_whose_every_tree_was_discarded_take_mp(pooled_site):
    lacking = pooled_site.lacking
    fpv, diagnostics = predict_rule(settings(pooled_site), lacking, rules.get("fpv"))
    fell = diagnostics.fallback_rows
    assert fell.any() and diagnostics.n_fallback == int(fell.sum())
    assert np.array_equal(fell, diagnostics.trees_kept == 0)
    assert np.allclose(fpv.sum(axis=1), 1.0)
    # fpv reads no imputer: its fallback is mp's marginal by N_right / N_node
    bare, _ = predict_rule(settings(pooled_site, imputers=False), lacking, rules.get("mp"))
    assert np.array_equal(fpv[fell], bare[fell])
    # an mp prediction handed in (here with the imputers) is taken as it is
    mp, mp_diagnostics = predict_rule(settings(pooled_site), lacking, rules.get("mp"))
    again, again_diagnostics = predict_rule(
        settings(pooled_site), lacking, rules.get("fpv"), known_mp=(mp, mp_diagnostics)
    )
    assert np.array_equal(again[fell], mp[fell]) and np.array_equal(again[~fell], fpv[~fell])
    assert not np.array_equal(mp[fell], bare[fell])
    assert again_diagnostics.n_fallback == diagnostics.n_fallback


def test_a_rows_prediction_depends_on_that_row_only(pooled_site):
    rule = rules.get("ipr")
    whole, _ = predict_rule(settings(pooled_site, depth_threshold=0), pooled_site.lacking, rule)
    part, _ = predict_rule(
        settings(pooled_site, depth_threshold=0), pooled_site.lacking[7:23], rule
    )
    assert np.array_equal(whole[7:23], part)


def test_settings_hold_what_a_call_reads_and_choose_the_engine(pooled_site):
    s = settings(pooled_site, engine="numpy")
    assert isinstance(s, Settings) and s.kernels(10**9) is None
    with pytest.raises(AttributeError):
        s.engine = "numba"  # frozen: a call cannot change its settings
    assert settings(pooled_site, engine="auto").kernels(1) is None  # too few pairs for numba
