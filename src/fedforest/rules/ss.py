"""``ss``, surrogate splits: the node's surrogate decides; without one the row has, the
``pr`` rule (paper eq. (21)-(22))."""

from .base import RoutingRule
from .routing import PR_RULE, SURROGATE, Routing

RULE = RoutingRule(
    name="ss",
    help="use the node's surrogate split on a shared feature (else pr)",
    display_name="Surrogate splits",
    colour="tab:green",
    route=Routing(first=SURROGATE, otherwise=PR_RULE),
    imputers=True,
    candidate=True,
    preference=3,
    paper=8,
)
