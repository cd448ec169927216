"""Saving payloads to disk without pickle.

A payload (nested dicts and lists of numpy arrays and plain values) is written
as one ``.npz`` file: every array is an entry, and the structure with the plain
values is a JSON document stored as a string entry. Loading uses
``numpy.load(allow_pickle=False)``, so a file can never run code: an object
array inside it is refused by numpy itself.

A saved *model* (what each site keeps after a job) bundles the pooled forest,
the selected imputers, the pooled standard deviations, the intersection
forest (when trained) and the prediction settings; :func:`load_model` validates
every part as it would a payload received from another site.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .. import protocol
from ..errors import PayloadError
from ..validation import PayloadReader

_META = "__structure__"
MODEL_FORMAT = protocol.MODEL
MODEL_VERSION = protocol.FORMATS[MODEL_FORMAT]


def save_payload(path, payload: Mapping) -> Path:
    """Write a payload to ``path`` (``.npz`` is appended when missing)."""
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_suffix(path.suffix + ".npz")
    arrays: dict[str, np.ndarray] = {}

    def strip(value, key: str):
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in "iufbU":
                raise TypeError(f"{key}: arrays of dtype {value.dtype} cannot be saved")
            name = f"a{len(arrays)}"
            arrays[name] = value
            return {"__array__": name}
        if isinstance(value, Mapping):
            return {str(k): strip(v, f"{key}.{k}") for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [strip(v, f"{key}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, np.generic):
            return value.item()
        if value is None or isinstance(value, (str, int, float, bool)):
            return value
        raise TypeError(f"{key}: values of type {type(value).__name__} cannot be saved")

    structure = strip(payload, "payload")
    arrays[_META] = np.array(json.dumps(structure))
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)
    return path


def load_payload(path) -> dict:
    """Read a file written by :func:`save_payload` (never unpickles anything)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such model file: {path}")
    with open(path, "rb") as fh:
        if fh.read(4) != b"PK\x03\x04":
            raise PayloadError(f"{path} is not a fedforest payload file (not an .npz archive)")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except ValueError as err:
        raise PayloadError(f"{path} holds data that needs pickle to load; refused ({err})") from err
    except Exception as err:  # noqa: BLE001 - report any unreadable file the same way
        raise PayloadError(f"{path} is not a fedforest payload file: {err}") from err
    if _META not in arrays:
        raise PayloadError(f"{path} is not a fedforest payload file (no structure entry)")
    try:
        structure = json.loads(str(arrays.pop(_META)))
    except ValueError as err:
        raise PayloadError(f"{path}: its structure entry is not valid JSON ({err})") from err

    def fill(value):
        if isinstance(value, dict):
            if set(value) == {"__array__"}:
                name = value["__array__"]
                if not isinstance(name, str) or name not in arrays:
                    raise PayloadError(f"{path}: entry {name!r} is missing")
                return arrays[name]
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value

    return fill(structure)


def model_bundle(
    forest_payload: Mapping,
    imputers_payload: Mapping | None = None,
    feature_std: Mapping[str, float] | None = None,
    intersection_payload: Mapping | None = None,
    settings: Mapping[str, Any] | None = None,
) -> dict:
    """A model payload: the pooled forest and everything prediction needs."""
    return {
        "format": MODEL_FORMAT,
        "version": MODEL_VERSION,
        "forest": dict(forest_payload),
        "imputers": dict(imputers_payload) if imputers_payload is not None else None,
        "feature_std": {str(k): float(v) for k, v in (feature_std or {}).items()},
        "intersection": dict(intersection_payload) if intersection_payload is not None else None,
        "settings": dict(settings or {}),
    }


def read_feature_std(r: PayloadReader, key: str = "feature_std") -> dict[str, float]:
    """Read a field of pooled standard deviations: feature name -> finite number >= 0."""
    std = r.get(key)
    if not isinstance(std, Mapping) or not all(
        isinstance(k, str)
        and isinstance(v, (int, float, np.integer, np.floating))
        and not isinstance(v, bool)
        and np.isfinite(v)
        and v >= 0
        for k, v in std.items()
    ):
        r.fail(f"field {key!r} must map feature names to finite numbers >= 0")
    return {k: float(v) for k, v in std.items()}


def read_model(payload: Mapping, sender: str | None = None) -> dict:
    """Validate a model payload; return its parts as fedforest objects."""
    from .forest import PooledForest
    from .imputers import ImputerSet

    r = PayloadReader(payload, MODEL_FORMAT, sender)
    r.check_keys({"forest", "imputers", "feature_std", "intersection", "settings"})
    forest = PooledForest.from_payload(r.get("forest"), sender)
    imps = r.get("imputers")
    imputers = ImputerSet.from_payload(imps, sender) if imps is not None else None
    inter = r.get("intersection")
    intersection = PooledForest.from_payload(inter, sender) if inter is not None else None
    std = read_feature_std(r)
    settings = r.get("settings")
    if not isinstance(settings, Mapping):
        r.fail("field 'settings' must be a dict")
    return {
        "forest": forest,
        "imputers": imputers,
        "feature_std": dict(std),
        "intersection": intersection,
        "settings": dict(settings),
    }


def load_model(path) -> dict:
    """Load and validate a saved model; returns the parts as in :func:`read_model`."""
    return read_model(load_payload(path), sender=str(path))
