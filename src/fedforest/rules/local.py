"""``local``: the site's own trees only, missing values routed as scikit-learn does."""

from .base import OWN_TREES, TreeSelection

RULE = TreeSelection(
    name="local",
    help="the site's own trees only",
    display_name="Local trees",
    colour="tab:orange",
    trees=OWN_TREES,
    candidate=True,
    preference=9,
    paper=1,
)
