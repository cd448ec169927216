"""The registry: rules kept in registration order, every list of strategies computed from them."""

from __future__ import annotations

import pytest

from fedforest.rules import registry
from fedforest.rules.base import RoutingRule
from fedforest.rules.routing import STOP, Routing

EXTRA = RoutingRule(
    name="extra",
    help="a rule registered for a test",
    display_name="Extra",
    colour="k",
    route=Routing(otherwise=STOP),
    candidate=True,
    preference=99,
)


def test_the_builtin_rules_in_registration_order():
    assert registry.names() == (
        "fpv", "pr", "mi", "ipr", "mp", "ss", "node", "wmp", "park", "local", "intersection",
        "auto",
    )  # fmt: skip
    assert "auto" not in registry.deployable() and "intersection" in registry.deployable()
    assert registry.strategies() == registry.deployable()[:-1]  # not the intersection forest
    assert registry.tree_selections() == ("park", "local")
    assert registry.fitted() == ("wmp",)
    assert set(registry.validation_methods()) == {"wmp", "auto"}
    assert registry.preference()[:2] == ("wmp", "mp")
    assert registry.paper_methods()[:3] == ("intersection", "local", "park")
    experiment = registry.experiment_methods()
    assert experiment[: len(registry.paper_methods())] == registry.paper_methods()
    assert sorted(experiment) == sorted(registry.names())


def test_candidates_depend_on_own_trees_and_the_intersection_forest():
    every = registry.candidates(own_trees=True, intersection=True)
    assert {"park", "local", "intersection"} <= set(every)
    assert "wmp" not in every and "auto" not in every
    neither = registry.candidates(own_trees=False, intersection=False)
    assert not {"park", "local", "intersection"} & set(neither)
    assert [n for n in every if n in neither] == neither  # registration order kept


def test_lookups_and_what_each_rule_declares():
    assert registry.get("mp").name == "mp" and registry.find("nope") is None
    with pytest.raises(ValueError, match="is not one of"):
        registry.get("nope")
    with pytest.raises(ValueError):
        registry.get(3)
    assert registry.display_name("ss") == "Surrogate splits"
    assert registry.display_name("unknown") == "unknown"
    assert set(registry.display_names()) == set(registry.colours()) == set(registry.names())
    assert registry.help_lines()["fpv"].startswith("discard a tree")


def test_a_rule_registered_for_a_while():
    with registry.registered(EXTRA) as rule:
        assert registry.get("extra") is rule and registry.names()[-1] == "extra"
        assert "extra" in registry.candidates(own_trees=False, intersection=False)
        with pytest.raises(ValueError, match="registered already"):
            registry.register(EXTRA)
    assert registry.find("extra") is None
    with pytest.raises(ValueError, match="is not a rule"):
        registry.register("extra")
