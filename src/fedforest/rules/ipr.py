"""``ipr``, informed probabilistic routing: right with the imputer's probability p_R;
without an imputer, the ``pr`` rule (paper eq. (13)-(16))."""

from .base import RoutingRule
from .routing import IMPUTED_DRAW, PR_RULE, Routing

RULE = RoutingRule(
    name="ipr",
    help="go right with probability sigmoid((imputed - threshold) / sigma) (else pr)",
    display_name="Informed probabilistic routing",
    colour="tab:cyan",
    route=Routing(first=IMPUTED_DRAW, otherwise=PR_RULE),
    imputers=True,
    candidate=True,
    preference=2,
    paper=6,
)
