"""A strategy that fedforest does not ship, in one file: the surrogate split where the node
has one the row can use, else stop at the node (``ss`` and ``node`` composed).

Registered by the tests only (``fedforest.rules.registered(RULE)``).
"""

from fedforest.rules import RoutingRule
from fedforest.rules.routing import STOP, SURROGATE, Routing

RULE = RoutingRule(
    name="toy",
    help="use the node's surrogate split (else stop at the node)",
    display_name="Surrogate, else stop",
    colour="tab:olive",
    route=Routing(first=SURROGATE, otherwise=STOP),
    candidate=True,
    preference=-1,  # preferred to every other candidate on a tie
)
