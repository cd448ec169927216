"""``park``, Park et al.'s tree selection: the site's own trees and every tree whose split
features the site has, missing values routed as scikit-learn does."""

from .base import OWN_OR_ROUTABLE, TreeSelection

RULE = TreeSelection(
    name="park",
    help="the site's own trees plus trees using only features the site has",
    display_name="Park et al. tree selection",
    colour="tab:brown",
    trees=OWN_OR_ROUTABLE,
    candidate=True,
    preference=8,
    paper=2,
)
