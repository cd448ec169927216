"""``node``, ForestFire's fallback: the walk stops at the unresolvable node, whose own
value is the tree's prediction; never discards, draws nothing."""

from .base import RoutingRule
from .routing import STOP, Routing

RULE = RoutingRule(
    name="node",
    help="stop at the node: its own class distribution is the tree's prediction",
    display_name="Stop at the node",
    colour="tab:gray",
    route=Routing(otherwise=STOP),
    candidate=True,
    preference=4,
)
