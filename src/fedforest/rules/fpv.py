"""``fpv``, feasible-path voting: a tree whose path meets an unavailable feature is
discarded for the row (paper eq. (1)-(2))."""

from .base import RoutingRule
from .routing import DISCARD, Routing

RULE = RoutingRule(
    name="fpv",
    help="discard a tree when the row's path meets an unavailable feature",
    display_name="Feasible-path voting",
    colour="tab:olive",
    route=Routing(otherwise=DISCARD),
    candidate=True,
    preference=7,
    paper=3,
)
