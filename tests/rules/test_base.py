"""What a rule is: one of five families, with facts derived from its declaration."""

from __future__ import annotations

import pytest

from fedforest.rules import base
from fedforest.rules.routing import DISCARD, IMPUTED_DRAW, PR_RULE, Routing

COMMON = {"help": "h", "display_name": "X", "colour": "k"}


def test_a_routing_rule_takes_its_facts_from_its_routing():
    rule = base.RoutingRule(name="x", route=Routing(otherwise=DISCARD), **COMMON)
    assert rule.family == base.ROUTING and rule.kept_trees == base.ALL_TREES
    assert not rule.draws and rule.static and not rule.needs_std and rule.deployable
    drawn = base.RoutingRule(
        name="y", route=Routing(otherwise=PR_RULE, first=IMPUTED_DRAW), **COMMON
    )
    assert drawn.draws and drawn.needs_std and not drawn.static


def test_each_family_declares_what_it_needs():
    marginal = base.MarginalRule(name="m", **COMMON)
    assert marginal.family == base.MARGINAL and marginal.routing is None
    assert marginal.needs_std and not marginal.draws and not marginal.static
    own = base.TreeSelection(name="o", trees=base.OWN_TREES, **COMMON)
    assert own.needs_site and own.learned and own.static and own.kept_trees == base.OWN_TREES
    other = base.TreeSelection(name="i", trees=base.INTERSECTION_FOREST, through="fpv", **COMMON)
    assert other.needs_intersection and not other.needs_site and not other.learned
    weighted = base.WeightedRule(name="w", certain="fpv", marginal="mp", fitted=True, **COMMON)
    assert weighted.family == base.WEIGHTED and weighted.needs_validation
    choice = base.ChoiceRule(name="c", **COMMON)
    assert choice.needs_validation and not choice.deployable and choice.family == base.CHOICE


def test_declarations_that_contradict_themselves_are_refused():
    with pytest.raises(ValueError, match="auto candidate"):
        base.MarginalRule(name="m", candidate=True, **COMMON)  # no preference
    with pytest.raises(ValueError, match="auto candidate"):
        base.WeightedRule(
            name="w", certain="fpv", marginal="mp", fitted=True, candidate=True, preference=1,
            **COMMON,
        )  # fmt: skip
    with pytest.raises(ValueError, match="is not a tree selection"):
        base.TreeSelection(name="t", trees=base.ALL_TREES, **COMMON)
