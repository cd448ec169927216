"""``mp``, marginal prediction: both children of an unresolvable node, weighted by the
imputers' p_R (N_right / N_node without one), the leaves summed (paper eq. (19)-(20))."""

from .base import MarginalRule

RULE = MarginalRule(
    name="mp",
    help="follow both children weighted by the ipr probabilities; never discards",
    display_name="Marginal prediction",
    colour="tab:red",
    imputers=True,
    candidate=True,
    preference=1,
    paper=7,
)
