"""Version 1 pooled-forest payloads, as fedforest wrote them before version 2.

:func:`v1_payload` is version 1's writer (kept in :mod:`fedforest.model.forest_v1`
as ``write``); ``data/model_v1.npz`` is a model file that version wrote
(``data/make_model_v1.py``), against which the kept writer is checked
(``test_forest_v1.py``).
"""

from __future__ import annotations

from pathlib import Path

from fedforest.model.forest import NODE_FIELDS
from fedforest.model.forest_v1 import write as v1_payload

MODEL_V1 = Path(__file__).resolve().parent / "data" / "model_v1.npz"

__all__ = ["MODEL_V1", "forest_fields", "v1_payload"]


def forest_fields(payload: dict) -> dict:
    """The keyword arguments of ``PooledForest`` held by a version 1 payload (no checks)."""
    keys = ("feature_names", "categories", "classes", "owners", "tree_start", "tree_owner")
    return {k: payload[k] for k in (*keys, "value", *NODE_FIELDS)}
