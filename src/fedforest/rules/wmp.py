"""``wmp``, weighted marginal prediction: ``mp`` with a tree that guessed for the row
weighted ``guess_weight`` against 1 for a certain tree (``fpv``'s kept trees); the
weight is fitted on the validation rows (``docs/architecture.md``, §4)."""

from .base import WeightedRule

RULE = WeightedRule(
    name="wmp",
    help="mp, a tree that guesses weighted less (weight fitted on validation rows)",
    display_name="Weighted marginal prediction",
    colour="darkred",
    certain="fpv",
    marginal="mp",
    imputers=True,
    fitted=True,
    preference=0,
)
