"""``pr``, probabilistic routing: the ``pr`` rule at every unresolvable node (paper eq.
(3)-(5))."""

from .base import RoutingRule
from .routing import PR_RULE, Routing

RULE = RoutingRule(
    name="pr",
    help="discard above depth_threshold, else go right with probability N_right/N_node",
    display_name="Probabilistic routing",
    colour="tab:purple",
    route=Routing(otherwise=PR_RULE),
    imputers=True,
    candidate=True,
    preference=6,
    paper=4,
)
