"""A site's input mapping: how its own data file becomes the model's input.

A site reads its CSV with the rules of its YAML (``drop_columns``,
``renames``, ``categorical``, ``label_map``, ``target``) and, under a privacy
policy with ``min_level_rows``, rewrites its rare levels as one level. The
model a site saves (``pooled_model.npz``) carries these rules as the field
``inputs`` of the ``fedforest/model`` payload (version 3), so that
``fedforest predict`` turns a file in the site's own words into exactly the
input the job's evaluation gave the model, and writes its predictions back in
the site's words (its own column and class names).

The mapping is the site's own: it is written only into the model file the site
keeps, never sent to the server or to another site. It holds the site's rare
levels (``hidden_levels``), which its privacy policy keeps from the others.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from ..validation import INT64_MAX, INT64_MIN, PayloadReader, describe
from .payload_checks import MAX_CLASSES, MAX_FEATURES, MAX_LEVELS

#: Fields of a model's ``inputs`` (the site's input mapping).
INPUT_FIELDS = (
    "site",
    "target",
    "renames",
    "drop_columns",
    "categorical",
    "label_map",
    "hidden_levels",
    "positive_class",
)
#: The longest column name, level or label an input mapping may hold.
MAX_NAME = 1000


@dataclasses.dataclass(frozen=True)
class SiteInputs:
    """How one site's data file becomes the model's input, and the way back.

    Parameters
    ----------
    site : str
        The site whose rules these are.
    target : str
        The target column (its global name, as in the site's YAML).
    renames : dict of str to str
        Local column name -> global name.
    drop_columns : tuple of str
        Columns of the file that are never read (identifiers, a saved index).
    categorical : tuple of str
        Columns (global names) the site reads as categories.
    label_map : tuple of (label, label)
        Local class label -> global class label; labels not listed are kept.
    hidden_levels : dict of str to tuple of str
        Levels of a column (global name) the site's privacy policy rewrote as
        one level (``privacy.min_level_rows``).
    positive_class : int, str or None
        The class the two-class metrics take as positive (``classes[1]``,
        global), or ``None`` (more classes, or regression).

    Examples
    --------
    >>> inputs = SiteInputs("site-2", "outcome", renames={"glucose_mg_dl": "glucose"},
    ...                     label_map=(("no", 0), ("yes", 1)), positive_class=1)
    >>> inputs.local_name("glucose"), inputs.local_labels([0, 1])
    ('glucose_mg_dl', ['no', 'yes'])
    """

    site: str
    target: str
    renames: Mapping[str, str] = dataclasses.field(default_factory=dict)
    drop_columns: Sequence[str] = ()
    categorical: Sequence[str] = ()
    label_map: Sequence[tuple[Any, Any]] = ()
    hidden_levels: Mapping[str, Sequence[str]] = dataclasses.field(default_factory=dict)
    positive_class: Any = None

    def local_name(self, name: str) -> str:
        """The site's own name of the global column ``name``."""
        for local, global_name in self.renames.items():
            if global_name == name:
                return local
        return name

    def local_labels(self, classes) -> list:
        """The site's own label of each global class (the inverse of ``label_map``).

        A global label that several local labels map onto reads as those labels
        joined by ``" or "``; a class no entry maps onto keeps its global label,
        followed by `` (model class ...)`` where that reads like another class.
        """
        out = []
        for label in classes:
            label = label.item() if hasattr(label, "item") else label
            sources = [local for local, g in self.label_map if str(g) == str(label)]
            if not sources:
                out.append(label)
            elif len(sources) == 1:
                out.append(sources[0])
            else:
                out.append(" or ".join(map(str, sources)))
        texts = [str(v) for v in out]
        for i, label in enumerate(classes):
            if texts.count(texts[i]) > 1 and out[i] == _plain(label):
                out[i] = f"{texts[i]} (model class {_plain(label)!r})"
        return out

    def to_payload(self) -> dict:
        """The ``inputs`` field of a saved model: plain values only."""
        return {
            "site": self.site,
            "target": self.target,
            "renames": {str(k): str(v) for k, v in self.renames.items()},
            "drop_columns": [str(c) for c in self.drop_columns],
            "categorical": [str(c) for c in self.categorical],
            "label_map": [[_plain(k), _plain(v)] for k, v in self.label_map],
            "hidden_levels": {str(k): [str(x) for x in v] for k, v in self.hidden_levels.items()},
            "positive_class": _plain(self.positive_class),
        }

    @classmethod
    def read(cls, r: PayloadReader, forest) -> SiteInputs:
        """Validate an ``inputs`` entry against the model's ``forest``.

        Every name is a non-empty string of at most :data:`MAX_NAME`
        characters without surrounding spaces; ``renames`` maps distinct
        columns onto distinct global names, none of them dropped; the target
        is no feature of the forest; ``label_map`` pairs are plain labels
        (integers within int64 or strings), one per local label, mapping onto
        the forest's classes (none for regression trees), and
        ``positive_class`` is ``classes[1]`` of a two-class forest (else
        null). Only :class:`~fedforest.errors.PayloadError` is raised, naming
        the field.
        """
        r.check_keys(set(INPUT_FIELDS))
        site = r.site_name("site", r.get("site"))
        target = _name(r, "target", r.get("target"))
        if target in forest.feature_names:
            r.fail(f"field 'target' is {target!r}, a feature of the forest; expected the target")
        renames = r.read_mapping("renames", MAX_FEATURES)
        clean: dict[str, str] = {}
        for local, name in renames.items():
            clean[_name(r, "renames", local)] = _name(r, f"renames.{local}", name)
        targets = list(clean.values())
        repeated = sorted({t for t in targets if targets.count(t) > 1})
        if repeated:
            r.fail(f"field 'renames' maps several columns onto {repeated}; expected distinct names")
        drop = _names(r, "drop_columns")
        both = sorted(set(drop) & set(clean))
        if both:
            r.fail(f"field 'drop_columns' holds {both}, which 'renames' renames; expected either")
        categorical = _names(r, "categorical")
        label_map = _label_map(r, forest)
        hidden = r.read_mapping("hidden_levels", MAX_FEATURES)
        levels = {}
        for column, values in hidden.items():
            _name(r, "hidden_levels", column)
            levels[column] = tuple(
                r.str_list(f"hidden_levels.{column}", values, max_len=MAX_LEVELS)
            )
        positive = r.get("positive_class")
        expected = None
        if not forest.is_regression and len(forest.classes) == 2:
            expected = _plain(forest.classes[1])
        if positive is not None:
            positive = _label(r, "positive_class", positive)
        if positive != expected or type(positive) is not type(expected):
            r.refuse(
                "positive_class",
                positive,
                "null" if expected is None else f"{expected!r}, the forest's second class",
            )
        return cls(
            site, target, clean, tuple(drop), tuple(categorical), label_map, levels, positive
        )


def _plain(value):
    """A numpy scalar as a plain value (labels are ints or strings)."""
    return value.item() if hasattr(value, "item") else value


def _name(r: PayloadReader, key: str, value) -> str:
    if not isinstance(value, str) or not value.strip():
        r.refuse(key, value, "a non-empty string")
    if len(value) > MAX_NAME or value != value.strip():
        r.refuse(key, value, f"a name of at most {MAX_NAME} characters without surrounding spaces")
    return str(value)


def _names(r: PayloadReader, key: str) -> list[str]:
    names = r.read_str_list(key, MAX_FEATURES)
    for name in names:
        _name(r, key, name)
    return names


def _label(r: PayloadReader, key: str, value):
    value = _plain(value)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        r.refuse(key, value, "a class label (an integer or a non-empty string)")
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        r.refuse(key, value, f"an integer label in [{INT64_MIN}, {INT64_MAX}]")
    if isinstance(value, str):
        _name(r, key, value)
    return value


def _label_map(r: PayloadReader, forest) -> tuple:
    value = r.get("label_map")
    if not isinstance(value, (list, tuple)) or len(value) > MAX_CLASSES:
        r.refuse("label_map", value, f"a list of at most {MAX_CLASSES} [local, global] pairs")
    if value and forest.is_regression:
        r.fail("field 'label_map' must be empty for regression trees (a number has no labels)")
    classes = [_plain(c) for c in ([] if forest.is_regression else forest.classes)]
    pairs, seen = [], set()
    for i, pair in enumerate(value):
        key = f"label_map[{i}]"
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            r.refuse(key, pair, "a pair [local label, global label]")
        local, label = _label(r, key, pair[0]), _label(r, key, pair[1])
        if str(local) in seen:
            r.fail(f"field {key!r} maps the local label {local!r} a second time")
        seen.add(str(local))
        if label not in classes or type(label) is not type(classes[0]):
            r.fail(
                f"field {key!r} maps {local!r} onto {describe(label)}, which is not a class of "
                f"the forest; expected one of {classes}"
            )
        pairs.append((local, label))
    return tuple(pairs)
