"""``intersection``: the intersection forest alone (trained on the columns every site has),
predicted with ``fpv`` on its columns of the table."""

from .base import INTERSECTION_FOREST, TreeSelection

RULE = TreeSelection(
    name="intersection",
    help="the intersection forest (trained on the columns every site has) alone, with fpv",
    display_name="Intersection forest",
    colour="tab:blue",
    trees=INTERSECTION_FOREST,
    through="fpv",
    candidate=True,
    preference=10,
    paper=0,
)
