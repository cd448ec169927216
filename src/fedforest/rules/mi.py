"""``mi``, model imputation: the imputed value decides; without one, the ``pr`` rule
(paper eq. (7)-(10))."""

from .base import RoutingRule
from .routing import IMPUTED_VALUE, PR_RULE, Routing

RULE = RoutingRule(
    name="mi",
    help="compare the best imputer's prediction with the threshold (else pr)",
    display_name="Model imputation",
    colour="tab:pink",
    route=Routing(first=IMPUTED_VALUE, otherwise=PR_RULE),
    imputers=True,
    candidate=True,
    preference=5,
    paper=5,
)
