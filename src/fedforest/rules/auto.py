"""``auto``: every candidate calibrated and scored on the site's validation rows; the best
is used (ties to the first in the preference order)."""

from .base import ChoiceRule

RULE = ChoiceRule(
    name="auto",
    help="score the strategies on the site's validation rows and use the best",
    display_name="Auto (chosen on validation rows)",
    colour="black",
    imputers=True,
)
