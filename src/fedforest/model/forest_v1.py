"""Reader of version 1 of the pooled-forest payload, kept apart from the current reader.

Version 1 (fedforest up to the compact payloads) sent every in-memory node
array as it is: ``children_left``, ``children_right``, ``feature`` (int32),
``threshold`` (float64), ``n_node_samples`` (int32), ``missing_left``,
``saw_missing`` (bool), ``value`` (float64, one row per node) and the four
surrogate arrays, plus ``tree_start`` (int64) and ``tree_owner`` (int32).

:func:`upgrade` is registered in :data:`fedforest.protocol.UPGRADES` as
``(fedforest/pooled-forest, 1)`` (by :mod:`fedforest.model.forest`, since
:mod:`fedforest.protocol` imports nothing from the package). It reads a
version 1 payload with every check version 1 applied (dtype kinds, shapes,
ranges, and the tree rules of
:func:`~fedforest.model.forest_format.check_tree_arrays`), then writes the
same trees in the version 2 layout (:func:`~fedforest.model.forest_format.encode`,
every class distribution as float64), which the current reader then reads and
checks again. Trees in a depth-first order other than preorder are renumbered
into preorder; thresholds of leaves and the surrogate fields of nodes without
a surrogate, which mean nothing, become their defaults. Everything else is
kept bit for bit, so a version 1 forest predicts exactly as before.

A malformed version 1 payload raises :class:`ValueError` naming the field;
:class:`~fedforest.validation.PayloadReader` reports it as a
:class:`~fedforest.errors.PayloadError` naming the sender.

:func:`write` is the version 1 writer, kept so that tests and
``benchmarks/bench_payload.py`` can make version 1 payloads; fedforest itself
never sends version 1. :func:`encode` writes the current version (2); if a
version 3 changes it, :func:`upgrade` must keep producing the version 2 layout
(the ``(pooled-forest, 2)`` reader then takes it to version 3).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NoReturn

import numpy as np

from .. import protocol
from ..validation import PayloadReader
from .forest_format import check_tree_arrays, encode
from .payload_checks import (
    MAX_CLASSES,
    MAX_FEATURES,
    MAX_LEVELS,
    MAX_NODE_SAMPLES,
    MAX_NODES,
    MAX_TREES,
    plain_labels,
)

VERSION = 1

#: Per-node arrays of a version 1 payload besides ``value``.
NODE_FIELDS = (
    "children_left",
    "children_right",
    "feature",
    "threshold",
    "n_node_samples",
    "missing_left",
    "saw_missing",
    "surrogate_feature",
    "surrogate_threshold",
    "surrogate_left_le",
    "surrogate_agreement",
)

#: Fields of a version 1 payload besides ``format`` and ``version``.
PAYLOAD_FIELDS = frozenset(
    {"feature_names", "categories", "classes", "owners", "tree_start", "tree_owner", "value"}
    | set(NODE_FIELDS)
)


class _Reader(PayloadReader):
    """A payload reader whose failures are ValueError (re-raised by the upgrade's caller)."""

    def fail(self, message: str) -> NoReturn:
        raise ValueError(message)


def read(payload: Mapping) -> dict:
    """The fields of a version 1 payload, checked as version 1 checked them.

    Returns
    -------
    dict
        The keyword arguments of :class:`~fedforest.model.forest.PooledForest`.

    Raises
    ------
    ValueError
        Naming the field, for any payload version 1 refused.
    """
    r = _Reader(payload, None)
    r.check_keys(set(PAYLOAD_FIELDS))
    names = r.read_str_list("feature_names", MAX_FEATURES)
    owners = r.read_str_list("owners", MAX_TREES)
    classes = r.read_labels("classes", MAX_CLASSES)
    cats = {}
    for k, levels in r.read_mapping("categories", MAX_FEATURES).items():
        if k not in names:
            r.fail(f"field 'categories' names unknown feature {k!r}")
        key = f"categories[{k!r}]"
        cats[k] = r.str_list(key, levels, max_len=MAX_LEVELS, allow_empty=True)
        if not cats[k]:
            r.refuse(key, levels, "a non-empty list of distinct strings")

    tree_start = r.read_array("tree_start", "i", max_len=MAX_TREES + 1, lo=0, hi=MAX_NODES)
    n_trees = tree_start.shape[0] - 1
    if n_trees < 1:
        r.fail(f"field 'tree_start' describes {n_trees} trees; expected 1 to {MAX_TREES}")
    if tree_start[0] != 0 or np.any(np.diff(tree_start) < 1):
        r.fail("field 'tree_start' must start at 0 and increase (every tree has a node)")
    n_nodes = int(tree_start[-1])
    tree_owner = r.read_array("tree_owner", "i", length=n_trees, lo=0, hi=len(owners) - 1)
    n_feat = len(names)

    def node_array(key, kind, **checks):
        return r.read_array(key, kind, length=n_nodes, **checks)

    arrays = {
        "children_left": node_array("children_left", "i", lo=-1, hi=MAX_NODES),
        "children_right": node_array("children_right", "i", lo=-1, hi=MAX_NODES),
        "feature": node_array("feature", "i", lo=-1, hi=n_feat - 1),
        # +inf is allowed on nodes that saw missing values (NaN and inf checked below)
        "threshold": node_array("threshold", "f", finite=False),
        "n_node_samples": node_array("n_node_samples", "i", lo=1, hi=MAX_NODE_SAMPLES),
        "missing_left": node_array("missing_left", "b"),
        "saw_missing": node_array("saw_missing", "b"),
        "value": r.read_array("value", "f", 2, n_nodes, width=len(classes), lo=0, hi=1),
        "surrogate_feature": node_array("surrogate_feature", "i", lo=-1, hi=n_feat - 1),
        "surrogate_threshold": node_array("surrogate_threshold", "f"),
        "surrogate_left_le": node_array("surrogate_left_le", "b"),
        "surrogate_agreement": node_array("surrogate_agreement", "f", lo=-1, hi=1),
    }
    levels = np.array([len(cats.get(n, ())) for n in names], dtype=np.int64)
    check_tree_arrays(r, tree_start, arrays, levels)
    return {
        "feature_names": names,
        "classes": classes,
        "owners": owners,
        "categories": cats,
        "tree_start": tree_start,
        "tree_owner": tree_owner,
        **arrays,
    }


def upgrade(payload: Mapping) -> dict:
    """A version 1 pooled-forest payload in the version 2 layout (see the module docstring).

    Raises
    ------
    ValueError
        If the payload is not a valid version 1 payload (the message names the field).
    """
    fields = read(payload)
    return {
        "format": protocol.POOLED_FOREST,
        "version": VERSION + 1,
        **encode(fields, counts=False),
    }


def write(forest) -> dict:
    """The version 1 payload of a :class:`~fedforest.model.forest.PooledForest`.

    Version 1's ``to_payload``, verbatim (for tests and benchmarks; fedforest
    sends version 2).
    """
    return {
        "format": protocol.POOLED_FOREST,
        "version": VERSION,
        "feature_names": list(forest.feature_names),
        "categories": {k: list(v) for k, v in forest.categories.items()},
        "classes": plain_labels(forest.classes),
        "owners": list(forest.owners),
        "tree_start": forest.tree_start.astype(np.int64),
        "tree_owner": forest.tree_owner.astype(np.int32),
        "children_left": forest.children_left.astype(np.int32),
        "children_right": forest.children_right.astype(np.int32),
        "feature": forest.feature.astype(np.int32),
        "threshold": forest.threshold.astype(np.float64),
        "n_node_samples": forest.n_node_samples.astype(np.int32),
        "missing_left": forest.missing_left.astype(bool),
        "saw_missing": forest.saw_missing.astype(bool),
        "value": forest.value.astype(np.float64),
        "surrogate_feature": forest.surrogate_feature.astype(np.int32),
        "surrogate_threshold": forest.surrogate_threshold.astype(np.float64),
        "surrogate_left_le": forest.surrogate_left_le.astype(bool),
        "surrogate_agreement": forest.surrogate_agreement.astype(np.float64),
    }
