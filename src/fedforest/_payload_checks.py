"""Small validators shared by every ``from_payload``.

A payload is a dict of numpy arrays and plain values (str, int, float, bool,
lists and dicts of those). These helpers check one field at a time and raise
:class:`~fedforest.errors.PayloadError` with the field name and what was
expected, so that a malformed payload is refused before any of it is used.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .errors import PayloadError

MAX_TREES = 100_000
MAX_NODES = 50_000_000
MAX_FEATURES = 100_000
MAX_CLASSES = 10_000
MAX_LEVELS = 10_000


class Reader:
    """Field-by-field reader of a payload dict that names the sender on error."""

    def __init__(self, payload: Any, kind: str, version: int, sender: str | None = None):
        self.sender = sender
        if not isinstance(payload, Mapping):
            self.fail(f"expected a dict for a {kind} payload, got {type(payload).__name__}")
        self.payload = payload
        fmt = payload.get("format")
        if fmt != kind:
            self.fail(f"field 'format' is {fmt!r}, expected {kind!r}")
        ver = payload.get("version")
        if not isinstance(ver, (int, np.integer)) or isinstance(ver, bool):
            self.fail(f"field 'version' is {ver!r}, expected an integer")
        if int(ver) > version or int(ver) < 1:
            self.fail(
                f"format version {ver} is not supported (this fedforest reads versions 1 to "
                f"{version}); upgrade fedforest at this site"
            )
        self.version = int(ver)

    def fail(self, message: str):
        raise PayloadError(message, sender=self.sender)

    def check_keys(self, allowed: set[str]) -> None:
        extra = sorted(set(self.payload) - allowed - {"format", "version"})
        if extra:
            self.fail(f"unknown fields {extra}; expected only {sorted(allowed)}")

    def get(self, key: str, default: Any = ...):
        if key not in self.payload:
            if default is ...:
                self.fail(f"field {key!r} is missing")
            return default
        return self.payload[key]

    def array(
        self,
        key: str,
        kind: str,
        ndim: int = 1,
        length: int | None = None,
        default: Any = ...,
    ) -> np.ndarray:
        """Return field ``key`` as an array of dtype kind ``kind`` ('i', 'f', 'b', 'U')."""
        value = self.get(key, default)
        if value is None:
            return None
        if not isinstance(value, np.ndarray):
            self.fail(f"field {key!r} must be a numpy array, got {type(value).__name__}")
        if value.dtype.kind == "O":
            self.fail(f"field {key!r} has dtype object; only numeric, bool or string arrays")
        ok_kinds = {"i": "iu", "f": "f", "b": "b", "U": "U"}[kind]
        if value.dtype.kind not in ok_kinds:
            self.fail(f"field {key!r} has dtype {value.dtype}, expected kind {kind!r}")
        if value.ndim != ndim:
            self.fail(f"field {key!r} has {value.ndim} dimensions, expected {ndim}")
        if length is not None and value.shape[0] != length:
            self.fail(f"field {key!r} has length {value.shape[0]}, expected {length}")
        if kind == "f" and not np.all(np.isfinite(value)):
            self.fail(f"field {key!r} holds non-finite values")
        return value

    def str_list(self, key: str, max_len: int, unique: bool = True, default: Any = ...):
        value = self.get(key, default)
        if isinstance(value, np.ndarray) and value.dtype.kind == "U":
            value = value.tolist()
        if not isinstance(value, (list, tuple)):
            self.fail(f"field {key!r} must be a list of strings, got {type(value).__name__}")
        if len(value) > max_len:
            self.fail(f"field {key!r} has {len(value)} entries, more than the limit {max_len}")
        if not all(isinstance(v, str) and v for v in value):
            self.fail(f"field {key!r} must hold non-empty strings only")
        if unique and len(set(value)) != len(value):
            dup = sorted({v for v in value if list(value).count(v) > 1})
            self.fail(f"field {key!r} has duplicates: {dup}")
        return list(value)

    def number(self, key: str, lo: float | None = None, hi: float | None = None, default=...):
        value = self.get(key, default)
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(f"field {key!r} must be a number, got {type(value).__name__}")
        if not math.isfinite(value):
            self.fail(f"field {key!r} is not finite")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            self.fail(f"field {key!r} is {value}, expected a value in [{lo}, {hi}]")
        return value


def plain_labels(values) -> list:
    """Class labels as plain Python values (str or int) for a payload."""
    out = []
    for v in np.asarray(values).tolist():
        if isinstance(v, bool) or not isinstance(v, (str, int)):
            raise TypeError(
                f"class label {v!r} of type {type(v).__name__} cannot travel in a payload; "
                "use string or integer class labels"
            )
        out.append(v)
    return out
