"""``auto``: every candidate calibrated and scored on the site's validation rows (its
training rows out of bag, or held-out rows); the best is used (on held-out rows, a
candidate within one standard error of it ties, and ties go to the first in the
preference order)."""

from .base import ChoiceRule

RULE = ChoiceRule(
    name="auto",
    help="score the strategies on the site's validation rows (out of bag or held out) and "
    "use the best",
    display_name="Auto (each site's choice)",
    colour="black",
    imputers=True,
)
