"""The strategy registry: every strategy is one :class:`Rule` object, registered here.

A rule declares what it is and how it predicts (:mod:`.base`; its routing in
:mod:`.routing`), once, in its own module; :mod:`.registry` keeps them in
registration order and computes every list of strategies from them. A new
strategy is one module with its ``RULE`` and one line in :data:`BUILTIN` (or a
:func:`register` call). This package imports nothing else from fedforest.

Examples
--------
>>> from fedforest import rules
>>> rules.names()[:4]
('fpv', 'pr', 'mi', 'ipr')
>>> rules.get("ss").routing.first.name
'surrogate'
"""

from . import auto, fpv, intersection, ipr, local, mi, mp, node, park, pr, ss, wmp
from .base import (
    ALL_TREES,
    CHOICE,
    INTERSECTION_FOREST,
    MARGINAL,
    OWN_OR_ROUTABLE,
    OWN_TREES,
    ROUTING,
    SELECTION,
    WEIGHTED,
    ChoiceRule,
    MarginalRule,
    RoutingRule,
    Rule,
    TreeSelection,
    WeightedRule,
)
from .registry import (
    all_rules,
    candidates,
    colours,
    deployable,
    display_name,
    display_names,
    experiment_methods,
    find,
    fitted,
    get,
    help_lines,
    names,
    paper_methods,
    preference,
    register,
    registered,
    strategies,
    tree_selections,
    unregister,
    validation_methods,
)
from .routing import Routing, Step

#: The built-in rules, in registration order (the order of every list of strategies).
BUILTIN = (fpv, pr, mi, ipr, mp, ss, node, wmp, park, local, intersection, auto)
for _module in BUILTIN:
    register(_module.RULE)

__all__ = [
    "ALL_TREES",
    "BUILTIN",
    "CHOICE",
    "INTERSECTION_FOREST",
    "MARGINAL",
    "OWN_OR_ROUTABLE",
    "OWN_TREES",
    "ROUTING",
    "SELECTION",
    "WEIGHTED",
    "ChoiceRule",
    "MarginalRule",
    "Routing",
    "Rule",
    "RoutingRule",
    "Step",
    "TreeSelection",
    "WeightedRule",
    "all_rules",
    "candidates",
    "colours",
    "deployable",
    "display_name",
    "display_names",
    "experiment_methods",
    "find",
    "fitted",
    "get",
    "help_lines",
    "names",
    "paper_methods",
    "preference",
    "register",
    "registered",
    "strategies",
    "tree_selections",
    "unregister",
    "validation_methods",
]
