"""The numpy implementation of every routing step (prediction/steps.py), on a real forest."""

from __future__ import annotations

import numpy as np

from fedforest import rules
from fedforest.model.traversal import DISCARD, LEFT, RIGHT, STOP
from fedforest.prediction import steps
from fedforest.prediction.draws import IPR_STREAM, PR_STREAM
from fedforest.prediction.pipeline import prepare
from fedforest.rules import routing as routing_steps

from .conftest import NAMES, settings

C, K = NAMES.index("c"), NAMES.index("k")


def call_of(pooled_site, name, depth_threshold=1, X=None):
    return prepare(
        settings(pooled_site, depth_threshold),
        pooled_site.lacking if X is None else X,
        rules.get(name),
    )


def pairs_on(call, features):
    """Every (node, row) pair of the internal nodes on ``features``."""
    nodes = np.flatnonzero(np.isin(call.cf.feature, features))
    nodes, rows = np.meshgrid(nodes, np.arange(call.n_rows), indexing="ij")
    return nodes.ravel(), rows.ravel()


def test_every_step_a_rule_names_has_its_forms():
    named = {
        step for name in rules.names() if (r := rules.get(name)).routing for step in r.routing.steps
    }
    for step in named:
        assert (step in steps.DECIDE) != step.total and (step in steps.ALWAYS) == step.total
        assert (step in steps.REWRITE) == step.static, step.name
    assert routing_steps.IMPUTED_DRAW not in steps.REWRITE  # ipr draws per pair: no static form


def test_the_total_steps_decide_every_pair(pooled_site):
    call = call_of(pooled_site, "pr", depth_threshold=2)
    nodes, rows = pairs_on(call, [C, K])
    s = call.strategy
    assert np.all(steps.ALWAYS[routing_steps.DISCARD](s, nodes, rows) == DISCARD)
    assert np.all(steps.ALWAYS[routing_steps.STOP](s, nodes, rows) == STOP)
    decision = steps.pr_rule(s, nodes, rows)
    deep = call.cf.depth[nodes] >= 2
    assert np.all(decision[~deep] == DISCARD)
    draw = call.draws.uniform(nodes[deep], rows[deep], PR_STREAM)
    right = draw < call.cf.right_fraction[nodes[deep]]
    assert np.array_equal(decision[deep], np.where(right, RIGHT, LEFT))


def test_the_partial_steps_say_which_pairs_they_decided(pooled_site):
    call = call_of(pooled_site, "ipr", depth_threshold=0)
    s = call.strategy
    nodes, rows = pairs_on(call, [C])
    decision = np.full(nodes.size, -1)
    has = steps.DECIDE[routing_steps.IMPUTED_DRAW](s, nodes, rows, decision)
    assert has.all()  # c has an imputer: every pair is decided
    p = s.right_probability(nodes, rows)
    draw = call.draws.uniform(nodes, rows, IPR_STREAM)
    assert np.array_equal(decision, np.where(draw < p, RIGHT, LEFT))
    # the surrogate step leaves the rows without the surrogate's value undecided
    nodes, rows = pairs_on(call, [C, K])
    decision = np.full(nodes.size, -1)
    has = steps.DECIDE[routing_steps.SURROGATE](s, nodes, rows, decision)
    sf = pooled_site.forest.surrogate_feature[nodes]
    assert np.array_equal(has[sf < 0], np.zeros((sf < 0).sum(), bool))
    assert np.all(decision[has] >= 0) and np.all(decision[~has] == -1)


def test_a_rewrite_starts_from_the_stuck_nodes(pooled_site):
    forest = pooled_site.forest
    absent = np.isin(np.arange(len(NAMES)), [C, K])
    t = steps.Rewrite.start(forest, absent)
    on_absent = np.isin(forest.feature, [C, K])
    assert np.array_equal(t.stuck, on_absent & ~forest.saw_missing)
    assert not t.discard.any() and not t.random_node.any()
    assert np.array_equal(t.left, forest.children_left) and t.left is not forest.children_left


def test_the_static_forms_rewrite_the_stuck_nodes(pooled_site):
    complete = pooled_site.test[["a", "b"]]
    call = call_of(pooled_site, "mi", X=complete)
    s, forest = call.strategy, pooled_site.forest
    t = steps.Rewrite.start(forest, call.absent)
    stuck = t.stuck.copy()
    steps.REWRITE[routing_steps.IMPUTED_VALUE](s, t)
    # every stuck node has an imputer here: it splits on its imputed column
    assert not t.stuck.any()
    assert np.array_equal(t.feature[stuck], forest.n_features + forest.feature[stuck])

    call = call_of(pooled_site, "ss", X=complete)
    s = call.strategy
    t = steps.Rewrite.start(forest, call.absent)
    stuck = t.stuck.copy()
    steps.REWRITE[routing_steps.SURROGATE](s, t)
    used = stuck & (forest.surrogate_feature >= 0)
    assert used.any() and np.array_equal(t.stuck, stuck & ~used)
    assert np.array_equal(t.feature[used], forest.surrogate_feature[used])
    swapped = used & ~forest.surrogate_left_le
    assert np.array_equal(t.left[swapped], forest.children_right[swapped])
    steps.REWRITE[routing_steps.PR_RULE](s, t)
    shallow = (call.cf.depth < s.depth_threshold) & stuck & ~used
    assert np.array_equal(t.discard, shallow) and np.all(t.feature[shallow] == -1)
    deep = stuck & ~used & ~shallow
    assert np.array_equal(t.random_node, deep)
    assert np.array_equal(t.feature[deep], 2 * forest.n_features + call.cf.depth[deep])
    assert np.array_equal(t.threshold[deep], -call.cf.right_fraction[deep])


def test_the_rows_the_rewritten_trees_take_and_their_key(pooled_site):
    call = call_of(pooled_site, "mi")
    s = call.strategy
    assert steps.static_rows(call_of(pooled_site, "fpv").strategy) is None
    assert np.array_equal(steps.with_imputer(s), np.isin(np.arange(len(NAMES)), [C, K]))
    assert steps.static_rows(s).all()  # imputers fill in every missing row here
    assert steps.static_key(s) == (C, K)
    assert steps.static_key(call_of(pooled_site, "pr").strategy) == ()
    bare = prepare(
        settings(pooled_site, imputers=False), pooled_site.lacking, rules.get("mi")
    ).strategy
    assert steps.static_key(bare) == () and steps.static_rows(bare).all()
